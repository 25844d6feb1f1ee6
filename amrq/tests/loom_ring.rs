//! Loom models of the ring: every interleaving (within loom's bounds) of one producer and
//! one consumer over 2–4 slots, with Express and multi-slot frames, batched head
//! publication and positions that wrap u64. Run with
//!
//! ```text
//! RUSTFLAGS="--cfg amrq_loom" cargo test --release --target-dir target/loom --test loom_ring
//! ```
//!
//! Loom cannot model raw mapped bytes, so the same algorithm runs over [`LoomRing`]:
//! loom atomics for the control and sequence words, one loom `UnsafeCell` per slot for
//! the bytes (loom reports a data race if the protocol lets both sides touch a slot
//! without a happens-before edge). In the raw layout the bytes of a frame's later slots
//! cover their sequence words; here those words are separate atomics, which the
//! consumer restores all the same.

#![cfg(amrq_loom)]

use amrq::conduit::ring::{Consumer, FrameHeader, Producer, RingMemory, SLOT_BYTES};
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;

struct LoomRing {
    head: AtomicU64,
    seq: Vec<AtomicU64>,
    bytes: Vec<UnsafeCell<[u8; SLOT_BYTES]>>,
}

impl LoomRing {
    fn new(nslots: u64, start: u64) -> Self {
        let r = Self {
            head: AtomicU64::new(0),
            seq: (0..nslots).map(|_| AtomicU64::new(0)).collect(),
            bytes: (0..nslots)
                .map(|_| UnsafeCell::new([0; SLOT_BYTES]))
                .collect(),
        };
        // Same initial state as RawRing::init.
        let mut p = start;
        for _ in 0..nslots {
            r.seq[(p & (nslots - 1)) as usize].store(
                p.wrapping_sub(nslots).wrapping_add(1),
                loom::sync::atomic::Ordering::Relaxed,
            );
            p = p.wrapping_add(1);
        }
        r.head.store(start, loom::sync::atomic::Ordering::Relaxed);
        r
    }
}

impl RingMemory for LoomRing {
    fn nslots(&self) -> u64 {
        self.seq.len() as u64
    }
    fn head(&self) -> &AtomicU64 {
        &self.head
    }
    fn seq(&self, idx: u64) -> &AtomicU64 {
        &self.seq[idx as usize]
    }
    unsafe fn write_header(&self, idx: u64, header: u64) {
        self.bytes[idx as usize].with_mut(|p| {
            // SAFETY: loom checks that the producer owns the slot here.
            let slot = unsafe { &mut *p };
            slot[8..16].copy_from_slice(&header.to_ne_bytes());
        })
    }
    unsafe fn read_header(&self, idx: u64) -> u64 {
        self.bytes[idx as usize].with(|p| {
            // SAFETY: loom checks that the consumer owns the slot here.
            let slot = unsafe { &*p };
            u64::from_ne_bytes(slot[8..16].try_into().unwrap())
        })
    }
    unsafe fn write_bytes(&self, idx: u64, offset: usize, src: &[u8]) {
        for (k, b) in src.iter().enumerate() {
            let at = offset + k;
            self.bytes[idx as usize + at / SLOT_BYTES].with_mut(|p| {
                // SAFETY: as in write_first.
                unsafe { (*p)[at % SLOT_BYTES] = *b }
            });
        }
    }
    unsafe fn read_bytes(&self, idx: u64, offset: usize, dst: &mut [u8]) {
        for (k, b) in dst.iter_mut().enumerate() {
            let at = offset + k;
            self.bytes[idx as usize + at / SLOT_BYTES].with(|p| {
                // SAFETY: as in read_header.
                *b = unsafe { (*p)[at % SLOT_BYTES] }
            });
        }
    }
}

/// Frame `i` of a model: `args` args, `len` payload bytes, all derived from `i`.
fn frame(i: u64, nargs: usize, len: usize) -> (Vec<u64>, Vec<u8>) {
    (
        (0..nargs as u64).map(|a| i * 10 + a).collect(),
        (0..len).map(|b| (i as usize * 7 + b) as u8).collect(),
    )
}

/// One producer sends `shapes` (nargs, payload bytes) in order; one consumer checks each
/// frame's tag, args and payload, exactly once and in order.
fn model(nslots: u64, start: u64, batch: u64, shapes: &'static [(usize, usize)]) {
    loom::model(move || {
        let ring = Arc::new(LoomRing::new(nslots, start));
        let r2 = ring.clone();
        let producer = loom::thread::spawn(move || {
            let mut p = Producer::new(nslots, start);
            for (i, &(n, len)) in shapes.iter().enumerate() {
                let (a, d) = frame(i as u64, n, len);
                while !p.try_push(
                    &*r2,
                    FrameHeader {
                        tag: i as u16,
                        ..Default::default()
                    },
                    &a,
                    &d,
                ) {
                    loom::thread::yield_now();
                }
            }
        });
        let mut c = Consumer::new(nslots, start, batch);
        for (i, &(n, len)) in shapes.iter().enumerate() {
            let f = loop {
                match c.peek(&*ring).expect("no corrupt frame") {
                    Some(f) => break f,
                    None => loom::thread::yield_now(),
                }
            };
            let (a, d) = frame(i as u64, n, len);
            assert_eq!(f.header.tag, i as u16);
            assert_eq!(&c.read_args(&*ring, &f)[..n], &a[..]);
            let mut got = vec![0; len];
            c.read_payload(&*ring, &f, &mut got);
            assert_eq!(got, d);
            c.release(&*ring, &f);
        }
        producer.join().unwrap();
        assert!(c.peek(&*ring).unwrap().is_none());
    });
}

#[test]
fn two_slots_express_frames_wrap() {
    model(2, 0, 1, &[(1, 0), (2, 0), (0, 0)]);
}

#[test]
fn two_slots_positions_cross_u64_max() {
    model(2, u64::MAX, 1, &[(1, 0), (1, 0), (1, 0)]);
}

#[test]
fn four_slots_multi_slot_frames_pad_and_batch() {
    // (7 args) and (0 args + 60 bytes) take two slots; the third frame must pad.
    model(4, 0, 2, &[(1, 0), (7, 0), (0, 60), (1, 0)]);
}

#[test]
fn four_slots_small_payload_in_first_line() {
    model(4, u64::MAX - 1, 4, &[(2, 8), (0, 48), (8, 0)]);
}

/// Two producers share one ring through `SharedProducer` (CAS reservation); the
/// consumer must see every frame complete, exactly once, each producer's in its order.
/// `late`: the second producer (an injector, made while the ring is in use) starts from
/// the head it reads when it begins, not from the ring's start.
fn shared_model(nslots: u64, start: u64, shapes: &'static [(usize, usize)], late: bool) {
    use amrq::conduit::ring::SharedProducer;
    // Three threads: every interleaving with up to two preemptions (the usual bound;
    // unbounded, the state space takes hours).
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.max_branches = 100_000;
    b.check(move || {
        let ring = Arc::new(LoomRing::new(nslots, start));
        let tail = Arc::new(AtomicU64::new(start));
        let producers: Vec<_> = (0..2u64)
            .map(|who| {
                let (r, t) = (ring.clone(), tail.clone());
                loom::thread::spawn(move || {
                    let mut p = match late && who == 1 {
                        true => SharedProducer::new(
                            r.head().load(loom::sync::atomic::Ordering::Acquire),
                        ),
                        false => SharedProducer::new(start),
                    };
                    for (i, &(n, len)) in shapes.iter().enumerate() {
                        let id = who * 100 + i as u64;
                        let (a, d) = frame(id, n, len);
                        while !p.try_push(
                            &*r,
                            &*t,
                            FrameHeader {
                                tag: id as u16,
                                ..Default::default()
                            },
                            &a,
                            &d,
                        ) {
                            loom::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut c = Consumer::new(nslots, start, 1);
        let mut next = [0usize; 2];
        for _ in 0..2 * shapes.len() {
            let f = loop {
                match c.peek(&*ring).expect("no corrupt frame") {
                    Some(f) => break f,
                    None => loom::thread::yield_now(),
                }
            };
            let id = u64::from(f.header.tag);
            let (who, i) = ((id / 100) as usize, (id % 100) as usize);
            assert_eq!(i, next[who], "producer {who}'s frames out of order");
            next[who] += 1;
            let (n, len) = shapes[i];
            let (a, d) = frame(id, n, len);
            assert_eq!(&c.read_args(&*ring, &f)[..n], &a[..]);
            let mut got = vec![0; len];
            c.read_payload(&*ring, &f, &mut got);
            assert_eq!(got, d);
            c.release(&*ring, &f);
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(next, [shapes.len(); 2]);
        assert!(c.peek(&*ring).unwrap().is_none());
    });
}

#[test]
fn shared_ring_two_producers_two_slots() {
    shared_model(2, 0, &[(1, 0)], false);
}

/// An injector joins a ring whose positions are about to cross `u64::MAX`: the view of
/// the head it starts from never lets it reserve slots the consumer has not freed.
#[test]
fn shared_ring_an_injector_joins_at_the_head_across_u64_max() {
    shared_model(2, u64::MAX - 1, &[(1, 0)], true);
}
