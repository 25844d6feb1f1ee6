//! The producer side of a ring many senders share (the T3D's slot reservation): a
//! producer reserves its slots by a compare-and-swap on a tail word the producers share,
//! after checking room against the consumer's head, then writes and publishes exactly
//! like a single producer. The consumer is the same [`super::Consumer`]: frames become
//! readable in reservation order, whichever producer publishes first.
//!
//! A compare-and-swap, not the T3D's fetch-and-add: a fetch-and-add cannot be taken
//! back, so a producer that found the queue full would have to wait for room; with the
//! check before the swap, a full queue answers "full" and nothing is committed.
//!
//! ```text
//! shared tail word: own 128-byte line pair, before the ring's control block
//! ```

use super::layout::{frame_slots, FrameHeader, MAX_WORDS};
use super::memory::RingMemory;
use super::producer::{write_frame, write_pad};
use crate::sync::AtomicU64;
use crate::sync::Ordering::{Acquire, Relaxed};

/// One producer's private view of a shared ring: what it last saw of the head.
///
/// ```
/// let p = amrq::conduit::ring::SharedProducer::new(0);
/// # let _ = p;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct SharedProducer {
    cached_head: u64,
}

impl SharedProducer {
    /// A producer for a ring initialised at position `start`.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// use std::sync::atomic::AtomicU64;
    /// let tail = AtomicU64::new(0); // shared by every producer
    /// let (mut a, mut b) = (SharedProducer::new(0), SharedProducer::new(0));
    /// assert!(a.try_push(&ring, &tail, FrameHeader::default(), &[1], b""));
    /// assert!(b.try_push(&ring, &tail, FrameHeader::default(), &[2], b""));
    /// let mut c = Consumer::new(8, 0, 1);
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// assert_eq!(c.read_args(&ring, &f)[0], 1);
    /// ```
    pub const fn new(start: u64) -> Self {
        Self { cached_head: start }
    }

    /// Reserves room for one frame by CAS on `tail`, writes it and publishes it; `false`
    /// with nothing reserved or written if the ring lacks room. Same preconditions as
    /// [`super::Producer::try_push`].
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// use std::sync::atomic::AtomicU64;
    /// let tail = AtomicU64::new(0);
    /// let mut p = SharedProducer::new(0);
    /// let mut n = 0;
    /// while p.try_push(&ring, &tail, FrameHeader::default(), &[n], b"") { n += 1; }
    /// assert_eq!(n, 8); // then full
    /// ```
    #[inline]
    pub fn try_push<M: RingMemory>(
        &mut self,
        mem: &M,
        tail: &AtomicU64,
        header: FrameHeader,
        args: &[u64],
        payload: &[u8],
    ) -> bool {
        match self.try_reserve(mem, tail, args.len(), payload.len()) {
            Some(r) => {
                r.publish(mem, header, args, payload);
                true
            }
            None => false,
        }
    }

    /// Reserves the slots of one frame of `nargs` args and `len` payload bytes (and a
    /// pad before it if it would wrap); `None`, nothing reserved, if the ring lacks
    /// room. The consumer waits at the reservation until it is published, so publish it
    /// soon: data that must be in place before the frame (a Long message's bytes) can
    /// be written in between, and is then never written for a frame that cannot follow.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// use std::sync::atomic::AtomicU64;
    /// let tail = AtomicU64::new(0);
    /// let mut p = SharedProducer::new(0);
    /// let r = p.try_reserve(&ring, &tail, 1, 0).expect("room");
    /// // … write what must be in place before the frame (a Long payload) …
    /// r.publish(&ring, FrameHeader::default(), &[7], b"");
    /// let mut c = Consumer::new(8, 0, 1);
    /// assert!(c.peek(&ring).unwrap().is_some());
    /// ```
    pub fn try_reserve<M: RingMemory>(
        &mut self,
        mem: &M,
        tail: &AtomicU64,
        nargs: usize,
        len: usize,
    ) -> Option<Reservation> {
        debug_assert!(nargs <= MAX_WORDS);
        let k = frame_slots(nargs, len);
        let mut t = tail.load(Relaxed);
        loop {
            let (pad, need) = Self::need(mem, t, k);
            if !self.fits(mem, t, need) {
                return None;
            }
            // Relaxed: the CAS only hands out positions; the slots' contents are
            // published by the Release stores of their sequence words in `publish`, and
            // the room was established by the Acquire load of `head` in `fits`. (Strong
            // CAS: a weak one may fail spuriously, which loom explores without end; on
            // x86 both are one `lock cmpxchg`.)
            match tail.compare_exchange(t, t.wrapping_add(need), Relaxed, Relaxed) {
                Ok(_) => return Some(Reservation { pos: t, pad }),
                Err(now) => t = now,
            }
        }
    }

    /// `(pad, pad + k)`: the slots a frame of `k` slots takes from position `t`.
    fn need<M: RingMemory>(mem: &M, t: u64, k: u64) -> (u64, u64) {
        let n = mem.nslots();
        let idx = t & (n - 1);
        let pad = if idx + k > n { n - idx } else { 0 };
        (pad, pad + k)
    }

    /// `need` slots from position `t` are free (refreshing the view of the head if the
    /// cached one says no).
    /// A `t` older than the head says yes: other producers have reserved past it and the
    /// consumer has read past it, so the caller's compare-and-swap on `t` fails and
    /// retries from the current tail.
    fn fits<M: RingMemory>(&mut self, mem: &M, t: u64, need: u64) -> bool {
        let n = mem.nslots();
        if t.wrapping_sub(self.cached_head) + need > n {
            // ORDERING: Acquire pairs with the consumer's Release store of `head`: its
            // reads of the slots we may take happen before our writes.
            self.cached_head = mem.head().load(Acquire);
        }
        let used = t.wrapping_sub(self.cached_head);
        used > n || used + need <= n
    }
}

/// Slots one producer reserved in a shared ring and must publish.
///
/// ```
/// # use amrq::conduit::ring::*;
/// # #[repr(C, align(128))]
/// # struct Mem([u8; 128 + 8 * 64]);
/// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
/// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
/// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
/// # ring.init(0);
/// use std::sync::atomic::AtomicU64;
/// let tail = AtomicU64::new(0);
/// let r: Reservation = SharedProducer::new(0).try_reserve(&ring, &tail, 0, 10).unwrap();
/// r.publish(&ring, FrameHeader::default(), &[], b"ten bytes!");
/// ```
#[derive(Debug)]
#[must_use = "a reservation that is never published blocks the ring"]
pub struct Reservation {
    pos: u64,
    pad: u64,
}

impl Reservation {
    /// Writes and publishes the frame (and the pad before it) in the reserved slots.
    /// `args` and `payload` have the sizes the reservation was made for.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// use std::sync::atomic::AtomicU64;
    /// let tail = AtomicU64::new(0);
    /// let r = SharedProducer::new(0).try_reserve(&ring, &tail, 2, 0).unwrap();
    /// let mut c = Consumer::new(8, 0, 1);
    /// assert!(c.peek(&ring).unwrap().is_none()); // reserved, not yet published
    /// r.publish(&ring, FrameHeader::default(), &[1, 2], b"");
    /// assert!(c.peek(&ring).unwrap().is_some());
    /// ```
    #[inline]
    pub fn publish<M: RingMemory>(
        self,
        mem: &M,
        header: FrameHeader,
        args: &[u64],
        payload: &[u8],
    ) {
        if self.pad > 0 {
            write_pad(mem, self.pos, self.pad);
        }
        write_frame(mem, self.pos.wrapping_add(self.pad), header, args, payload);
    }
}
