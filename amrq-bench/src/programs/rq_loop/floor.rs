//! `rq-loop --ring-floor`: the one-word AM of `--am-oneway`, written and read with the
//! ring primitives alone (`amrq::conduit::ring`), for a floor to read the runtime's
//! figure against.
//!
//! Per message: the Express write into a per-pair ring (`Producer::try_push_express`,
//! the full `try_push` when the cached head says full), then polls until its handler
//! ran, each poll one look at a reply ring and one at the request ring
//! (`Consumer::look`), the handler called through a table of fn pointers with its args
//! in place, and the release (`release_one`, the head published if behind). What it
//! leaves out is what the runtime adds: channels and their guards, the sender's
//! permission, a handler's result and a peer's fault, re-entrant polls, One-poll's
//! count, fairness between senders, bursts.

use amrq::conduit::ring::{
    Consumer, FrameHeader, Look, Producer, RawRing, RingMemory, ARGS_OFFSET, CTL_BYTES, SLOT_BYTES,
};
use std::cell::Cell;
use std::time::Instant;

/// Slots per ring (the runtime's default).
const SLOTS: usize = 256;
/// The handler's id.
const TAG: u16 = 7;

/// One ring's memory: its control lines, then its slots.
#[repr(C, align(128))]
struct RingMem([u8; CTL_BYTES + SLOTS * SLOT_BYTES]);

/// A handler: the state, the sender, the args in place.
type Handler = fn(&Cell<u64>, usize, &[u64]);

/// The handler: counts the messages by their arg.
fn count(state: &Cell<u64>, _source: usize, args: &[u64]) {
    state.set(state.get() + args[0]);
}

/// One ring's receive side.
struct Rx {
    ring: RawRing,
    cons: Consumer,
}

impl Rx {
    /// Looks at the ring once; runs the handler of an Express frame found there (the
    /// table has an entry for every tag byte: no bounds check) and releases it.
    #[inline(always)]
    fn poll(&mut self, source: usize, table: &[Option<Handler>; 256], state: &Cell<u64>) {
        let p = match self.cons.look(&self.ring) {
            Look::Empty => return,
            Look::Express(p) => p,
            Look::Other => super::super::fail("the floor sends Express frames only"),
        };
        let slot = self.ring.slot_ptr(p.index(self.ring.nslots()));
        // SAFETY: the sequence word said the slot is published and not released: its
        // `nargs` (at most six) words from `ARGS_OFFSET` are the frame's args, 8-aligned
        // (slots are 64-byte aligned), unchanged until `release_one` below.
        let args = unsafe {
            std::slice::from_raw_parts(
                slot.add(ARGS_OFFSET).cast::<u64>(),
                usize::from(p.header.nargs),
            )
        };
        if let Some(h) = table[usize::from(p.header.tag & 0xff)] {
            h(state, source, args);
        }
        self.cons.release_one(&self.ring);
        self.cons.publish_if_behind(&self.ring);
    }
}

/// A ring over `mem`, initialised.
fn ring_over(mem: &mut RingMem) -> RawRing {
    // SAFETY: `mem` is 128-byte aligned, holds the control lines and `SLOTS` slots, and
    // outlives the ring (both live until `floor_rank` returns).
    let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), SLOTS as u64) };
    ring.init(0);
    ring
}

/// `batches` batches of `iters` messages; ns per message of each.
#[inline(never)]
pub fn floor_rank(iters: u64, batches: u64) -> Vec<f64> {
    let mut mem = Box::new([
        RingMem([0; CTL_BYTES + SLOTS * SLOT_BYTES]),
        RingMem([0; CTL_BYTES + SLOTS * SLOT_BYTES]),
    ]);
    let [req_mem, rep_mem] = &mut *mem;
    let batch = Consumer::default_batch(SLOTS as u64);
    let mut request = Rx {
        ring: ring_over(req_mem),
        cons: Consumer::new(SLOTS as u64, 0, batch),
    };
    let mut reply = Rx {
        ring: ring_over(rep_mem),
        cons: Consumer::new(SLOTS as u64, 0, batch),
    };
    let mut prod = Producer::new(SLOTS as u64, 0);
    let mut table: [Option<Handler>; 256] = [None; 256];
    // Through `black_box`: a table the compiler cannot see into, as the runtime's.
    table[std::hint::black_box(usize::from(TAG))] = Some(count);
    let state = Cell::new(0);
    let header = FrameHeader {
        tag: TAG,
        nargs: 1,
        ..FrameHeader::default()
    };
    let mut per_batch = Vec::new();
    let mut sent = 0;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters {
            let args = [1];
            if !prod.try_push_express(&request.ring, header, &args)
                && !prod.try_push(&request.ring, header, &args, &[])
            {
                super::super::fail("the floor's ring is full");
            }
            sent += 1;
            while state.get() < sent {
                reply.poll(0, &table, &state);
                request.poll(0, &table, &state);
            }
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    if state.get() != sent {
        super::super::fail("a message was handled twice");
    }
    per_batch
}
