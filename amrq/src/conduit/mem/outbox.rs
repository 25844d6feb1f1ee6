//! A front's outbox: in a job across hosts, the rank's other threads cannot send
//! through the network themselves (the cluster conduit is the rank's thread's), so their
//! injectors write one shared ring in this process, reserving slots by compare-and-swap
//! as on one host, and the rank's thread sends each frame on through the cluster when
//! it next looks at a channel. A frame's hidden word names its destination and channel
//! instead of its sender; at the destination it is the rank's own frame, in the order
//! the rank's thread sent it on.
//!
//! The rank's thread may be asleep when a thread writes: it sleeps on the outbox's word
//! too, and a writer that finds it asleep bumps the word and wakes it ([`Waker`]: all a
//! writer touches besides the ring), by the handshake of `doorbell::about_to_sleep`
//! and `doorbell::finds_sleeper` (modelled in `tests/loom_doorbell.rs`).
//!
//! Only AM requests travel as frames: a thread's enqueue is an operation
//! (`thread_op.rs`) that the rank's thread tries once and answers, so that a full queue
//! is the thread's `Ok(false)` and never holds the outbox up.

use super::thread_op::{self, ThreadOp, OP_CHANNEL};
use super::HeapRegion;
use crate::conduit::cluster::ClusterConduit;
use crate::conduit::doorbell;
use crate::conduit::ring::{Consumer, RawRing, RingMemory, SharedProducer};
use crate::conduit::{Channel, Conduit, ConduitError, Message, OpToken, Rank};
use crate::sync::AtomicU64;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

/// The frames of a front's threads, waiting for its thread to send them on.
pub(super) struct Outbox {
    /// The ring's memory (kept mapped while injectors write it).
    _region: HeapRegion,
    ring: RawRing,
    /// The writers' shared tail.
    tail: Box<AtomicU64>,
    cons: Cell<Consumer>,
    /// Where a frame's payload is copied before it is sent on.
    payload: RefCell<Vec<u8>>,
    /// The threads' one-sided operations started and not yet complete.
    in_flight: RefCell<Vec<(OpToken, Arc<ThreadOp>)>>,
    /// How writers wake the rank's thread.
    waker: Waker,
}

/// The part of an outbox its writers touch besides the ring: atomics only.
pub(crate) struct Waker {
    /// Bumped by a writer that found the rank's thread asleep; that thread sleeps on it.
    word: AtomicU32,
    /// The rank's thread is about to sleep, or sleeps (`doorbell::about_to_sleep`).
    sleeping: crate::sync::AtomicU32,
    /// Per rank: it left the job (the cluster refused a frame to it for that), so a
    /// thread waiting for it learns it (across hosts the job's liveness record does not
    /// say so).
    left: Box<[AtomicBool]>,
}

// SAFETY: the ring is written by injectors in other threads only through the shared
// ring's protocol (slots reserved by compare-and-swap on `tail`, published by Release
// stores) and read by the rank's thread alone; writers touch nothing else but the
// `Waker`, whose fields are atomics. The cells are the rank's thread's (the front that
// holds the outbox is not `Sync`).
unsafe impl Send for Outbox {}

impl Outbox {
    /// An outbox of `slots` 64-byte slots (a power of two ≥ 2) for a rank of a job of
    /// `size` ranks.
    pub(super) fn new(slots: u64, size: usize) -> Result<Self, ConduitError> {
        let region = HeapRegion::new(RawRing::bytes(slots))?;
        // SAFETY: page-aligned, room for `slots` slots, used only as this ring, kept
        // mapped by `_region` for as long as the outbox lives.
        let ring = unsafe { RawRing::new(region.base(), slots) };
        ring.init(0);
        Ok(Self {
            _region: region,
            ring,
            tail: Box::new(AtomicU64::new(0)),
            cons: Cell::new(Consumer::new(slots, 0, Consumer::default_batch(slots))),
            payload: RefCell::new(Vec::new()),
            in_flight: RefCell::new(Vec::new()),
            waker: Waker {
                word: AtomicU32::new(0),
                sleeping: crate::sync::AtomicU32::new(0),
                left: (0..size).map(|_| AtomicBool::new(false)).collect(),
            },
        })
    }

    /// The ring and its tail, for an injector (a producer of its own from the head as
    /// it is now).
    pub(super) fn lane(&self) -> (RawRing, *const AtomicU64, SharedProducer) {
        // ORDERING: Acquire, as every producer's view of the head (pairs with the
        // consumer's Release store of it); an older view only makes a reservation look
        // again.
        let head = self.ring.head().load(Ordering::Acquire);
        (self.ring, &*self.tail, SharedProducer::new(head))
    }

    /// How its writers wake the rank's thread.
    pub(super) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// Before this rank's thread sleeps: its word and value to sleep on, and whether a
    /// frame is already waiting (then it must not sleep). [`Outbox::disarm`] after.
    pub(super) fn arm(&self) -> (&AtomicU32, u32, bool) {
        let w = &self.waker;
        // ORDERING: Acquire pairs with a writer's Release bump.
        let seen = w.word.load(Ordering::Acquire);
        doorbell::about_to_sleep(&w.sleeping);
        (&w.word, seen, self.has_work())
    }

    /// After this rank's thread woke.
    pub(super) fn disarm(&self) {
        self.waker.sleeping.store(0, crate::sync::Ordering::Relaxed);
    }

    /// True if a frame waits, or a thread's operation is in flight (the rank's
    /// thread must not sleep past its completion).
    pub(super) fn has_work(&self) -> bool {
        let mut cons = self.cons.get();
        let ready = cons.ready(&self.ring);
        self.cons.set(cons);
        ready || !self.in_flight.borrow().is_empty()
    }

    /// Completes the threads' operations the cluster has done, then sends on the
    /// waiting frames, in order, through `cluster` (an op frame's operation starts
    /// there), until one is refused for want of room (it stays first: AM frames, which
    /// every rank takes whenever it polls) or none is left: `Ok(true)` once none is and
    /// no operation is in flight. A frame to a rank that has left is dropped, as the
    /// rank's own would be, and the rank marked left for its threads ([`Waker`]); a
    /// frame the cluster refuses for another reason is dropped and that refusal
    /// returned (the thread that wrote it was told it was sent).
    pub(super) fn forward(&self, cluster: &ClusterConduit) -> Result<bool, ConduitError> {
        thread_op::complete(cluster, &mut self.in_flight.borrow_mut());
        let mut cons = self.cons.get();
        let out = self.forward_with(cluster, &mut cons);
        self.cons.set(cons);
        Ok(out? && self.in_flight.borrow().is_empty())
    }

    fn forward_with(
        &self,
        cluster: &ClusterConduit,
        cons: &mut Consumer,
    ) -> Result<bool, ConduitError> {
        let mut payload = self.payload.borrow_mut();
        loop {
            // Written by this process's threads, whose frames are whole by construction:
            // a corrupt one would be this process's own bug.
            let Some(f) = cons.peek(&self.ring).ok().flatten() else {
                return Ok(true);
            };
            let words = cons.read_args(&self.ring, &f);
            let n = f.header.nargs as usize;
            let (dest, ch) = to_where(words[0]);
            payload.resize(f.header.len as usize, 0);
            cons.read_payload(&self.ring, &f, &mut payload);
            if ch == OP_CHANNEL {
                cons.release(&self.ring, &f);
                let started = thread_op::start(cluster, dest, &words[1..n], &payload);
                self.in_flight.borrow_mut().extend(started);
                continue;
            }
            let channels = &cluster.caps().channels;
            let ch = channels.get(ch).and_then(|c| c.received_with).unwrap_or(ch);
            let msg = Message {
                tag: f.header.tag,
                flags: f.header.flags,
                args: &words[1..n.max(1)],
                payload: &payload,
            };
            match cluster.try_send(dest, ch, &msg) {
                Err(ConduitError::Busy) => return Ok(false),
                sent => {
                    cons.release(&self.ring, &f);
                    match sent {
                        Ok(()) => {}
                        Err(ConduitError::PeerLeft { rank }) => self.waker.mark_left(rank),
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
}

impl Drop for Outbox {
    /// Gives back the records of op frames never sent on (every injector, which
    /// borrows the front, is gone by now).
    fn drop(&mut self) {
        let mut cons = self.cons.get();
        while let Some(f) = cons.peek(&self.ring).ok().flatten() {
            let words = cons.read_args(&self.ring, &f);
            if to_where(words[0]).1 == OP_CHANNEL {
                thread_op::unsend(&words[1..]);
            }
            cons.release(&self.ring, &f);
        }
    }
}

impl Waker {
    /// True once a frame to `rank` was dropped because it left the job.
    pub(crate) fn has_left(&self, rank: Rank) -> bool {
        // ORDERING: Acquire pairs with the Release store of `mark_left`.
        self.left
            .get(rank)
            .is_some_and(|l| l.load(Ordering::Acquire))
    }

    fn mark_left(&self, rank: Rank) {
        if let Some(l) = self.left.get(rank) {
            // ORDERING: Release pairs with the Acquire load of `has_left`.
            l.store(true, Ordering::Release);
        }
    }

    /// After a writer published a frame: wakes the rank's thread if it sleeps.
    pub(super) fn wake(&self) {
        // Either the sleeper's last look sees this frame, or this sees its mark.
        if doorbell::finds_sleeper(&self.sleeping) {
            // ORDERING: Release pairs with the sleeper's Acquire load of `word`.
            self.word.fetch_add(1, Ordering::Release);
            crate::util::futex::wake_all(&self.word);
        }
    }
}

/// The hidden word of an outbox frame for `dest` on channel `ch`.
pub(super) fn hidden_word(dest: Rank, ch: Channel) -> u64 {
    dest as u64 | (ch as u64) << 32
}

/// The destination and channel a hidden word names.
fn to_where(word: u64) -> (Rank, Channel) {
    ((word & 0xffff_ffff) as Rank, (word >> 32) as Channel)
}
