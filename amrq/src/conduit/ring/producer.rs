//! The producer side: reserve slots against a cached head, write, publish the sequence word.

use super::layout::{frame_slots, payload_offset, FrameHeader, EXPRESS_ARGS, FLAG_PAD, MAX_WORDS};
use super::memory::RingMemory;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// How far past its tail the producer prefetches a slot for writing (one the cached
/// head says is free): a sixteenth of the ring, at least one group. Near enough that the
/// line is still in cache when written, far enough that the consumer has left it: a
/// closer distance fetched lines the consumer was still reading, a farther one evicted
/// them before use. The header's inline C send uses the same distance.
///
/// The slots are prefetched [`PREFETCH_GROUP`] at a time, from a multiple of the group
/// this far past the group the tail has just entered: so the distance is a multiple of
/// the group too (a sixteenth of a ring of 128 slots or more; one group below that).
#[inline(always)]
pub(crate) const fn prefetch_ahead(mask: u64) -> u64 {
    if mask >= 127 {
        (mask >> 4) + 1
    } else {
        PREFETCH_GROUP
    }
}

/// How many slots the producer prefetches at once: each time its tail enters a new
/// group of this many, the group [`prefetch_ahead`] past it, one cache line each: a
/// test of the tail per send and eight prefetches every eighth send, instead of the
/// distance's arithmetic and its test on every send.
pub(crate) const PREFETCH_GROUP: u64 = 8;

/// Writes the initial state of a ring whose first frame will be at position `start`:
/// head = `start`, and each slot's sequence word one lap behind the first position that
/// will use it, so no slot reads as full.
pub(crate) fn init<M: RingMemory>(mem: &M, start: u64) {
    let n = mem.nslots();
    let mut p = start;
    for _ in 0..n {
        mem.seq(p & (n - 1))
            .store(p.wrapping_sub(n).wrapping_add(1), Relaxed);
        p = p.wrapping_add(1);
    }
    mem.head().store(start, Relaxed);
}

/// The producer's private state: where it writes next and what it last saw of the head.
/// Lives in the sending rank, never in shared memory.
///
/// ```
/// use amrq::conduit::ring::Producer;
/// let p = Producer::new(256, 0);
/// assert_eq!(p.tail(), 0);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Producer {
    tail: u64,
    cached_head: u64,
    /// Slots − 1: the tail's slot is `tail & mask`.
    mask: u64,
}

impl Producer {
    /// A producer for a ring of `nslots` slots initialised at position `start`.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// let mut p = Producer::new(8, 0);
    /// assert_eq!(p.tail(), 0);
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[1, 2], b""));
    /// ```
    pub const fn new(nslots: u64, start: u64) -> Self {
        Self {
            tail: start,
            cached_head: start,
            mask: nslots - 1,
        }
    }

    /// Position the next frame will take.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// let mut p = Producer::new(8, 0);
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], &[0; 100]));
    /// assert_eq!(p.tail(), frame_slots(0, 100));
    /// ```
    pub const fn tail(&self) -> u64 {
        self.tail
    }

    /// Where its tail and its cached view of the head are, for a send that writes a
    /// frame itself ([`ExpressLane`](crate::conduit::mem::ExpressLane)).
    #[cfg(not(amrq_loom))]
    pub(crate) fn words(&mut self) -> (*mut u64, *const u64) {
        (&raw mut self.tail, &raw const self.cached_head)
    }

    /// True if `need` slots are free, re-reading the consumer's head only when the
    /// cached view says there is not enough room.
    #[inline(always)]
    fn has_room<M: RingMemory>(&mut self, mem: &M, need: u64) -> bool {
        if self.tail.wrapping_sub(self.cached_head) + need <= self.mask + 1 {
            return true;
        }
        self.refresh_head(mem, need)
    }

    #[cold]
    #[inline(never)]
    fn refresh_head<M: RingMemory>(&mut self, mem: &M, need: u64) -> bool {
        // ORDERING: Acquire pairs with the Release store of `head` in
        // `Consumer::publish`: the consumer's reads of the slots it handed back (and its
        // restores of their sequence words) happen before we overwrite them.
        self.cached_head = mem.head().load(Acquire);
        self.tail.wrapping_sub(self.cached_head) + need <= self.mask + 1
    }

    /// True if a frame of `nargs` args and `len` payload bytes fits now; the next
    /// `try_push` of such a frame then succeeds (only this producer takes room).
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// let mut p = Producer::new(8, 0);
    /// assert!(p.has_room_for(&ring, 8, 0));
    /// for _ in 0..8 { assert!(p.try_push(&ring, FrameHeader::default(), &[], b"")); }
    /// assert!(!p.has_room_for(&ring, 0, 0)); // full until the consumer hands slots back
    /// ```
    pub fn has_room_for<M: RingMemory>(&mut self, mem: &M, nargs: usize, len: usize) -> bool {
        let need = tail_after(self.tail, self.mask + 1, nargs, len).wrapping_sub(self.tail);
        self.has_room(mem, need)
    }

    /// Writes one frame, or returns `false` with nothing written if the ring lacks room.
    ///
    /// `header.len` and `header.nargs` are set from `payload` and `args`. The caller
    /// guarantees `args.len() <= MAX_WORDS` and that the frame takes at most
    /// [`super::max_frame_slots`] slots (the conduit checks both before calling).
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// # let (mut p, mut c) = (Producer::new(8, 0), Consumer::new(8, 0, 2));
    /// assert!(p.try_push(&ring, FrameHeader { tag: 4, ..Default::default() }, &[9], b"x"));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// assert_eq!((f.header.tag, f.header.nargs, f.header.len), (4, 1, 1));
    /// ```
    #[inline(always)]
    pub fn try_push<M: RingMemory>(
        &mut self,
        mem: &M,
        header: FrameHeader,
        args: &[u64],
        payload: &[u8],
    ) -> bool {
        debug_assert!(args.len() <= MAX_WORDS);
        if payload.is_empty() && args.len() <= EXPRESS_ARGS {
            // An Express frame, whatever its arg count: one slot, never padded. Folds
            // away where the count is a constant; where it is not (the C interface),
            // it spares the slot count and pad arithmetic of the general case.
            return self.push_slots::<M, true>(mem, 1, header, args, payload);
        }
        let k = frame_slots(args.len(), payload.len());
        self.push_slots::<M, true>(mem, k, header, args, payload)
    }

    /// [`Producer::try_push`] of an Express frame (at most `EXPRESS_ARGS` args, no
    /// payload) that trusts the cached view of the consumer's head: `false` (nothing
    /// written) when that view shows the ring full, even if the consumer has freed room
    /// since. No call in it, for a send whose other cases go through `try_push`.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 2 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 2 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 2 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 2) };
    /// # ring.init(0);
    /// let (mut p, mut c) = (Producer::new(2, 0), Consumer::new(2, 0, 1));
    /// assert!(p.try_push_express(&ring, FrameHeader::default(), &[1]));
    /// assert!(p.try_push_express(&ring, FrameHeader::default(), &[2]));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// c.release(&ring, &f); // one slot free, but the cached view says full:
    /// assert!(!p.try_push_express(&ring, FrameHeader::default(), &[3]));
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[3], b"")); // reads the head
    /// ```
    #[inline(always)]
    pub fn try_push_express<M: RingMemory>(
        &mut self,
        mem: &M,
        header: FrameHeader,
        args: &[u64],
    ) -> bool {
        debug_assert!(args.len() <= EXPRESS_ARGS);
        self.push_slots::<M, false>(mem, 1, header, args, &[])
    }

    /// [`Self::try_push`] of a frame of `k` slots (with `REFRESH`, re-reading the
    /// consumer's head when the cached view says there is no room).
    #[inline(always)]
    fn push_slots<M: RingMemory, const REFRESH: bool>(
        &mut self,
        mem: &M,
        k: u64,
        header: FrameHeader,
        args: &[u64],
        payload: &[u8],
    ) -> bool {
        debug_assert!(k >= 1 && k <= super::max_frame_slots(self.mask + 1));
        debug_assert_eq!(self.mask, mem.nslots() - 1);
        // The memory's mask, which `write_frame` loads too: one load for both.
        let mask = mem.nslots() - 1;
        let idx = self.tail & mask;
        // A frame never wraps: pad to the end of the ring first if it would. (Its last
        // slot past the mask, so that a one-slot frame's test folds away.)
        let pad = if idx + (k - 1) > mask {
            mask + 1 - idx
        } else {
            0
        };
        // At most this many slots may be in use: none for a frame larger than the ring
        // (`k` is at least 1), the mask itself for an Express frame, so that its test is
        // one compare with the mask.
        let room = match REFRESH {
            true => self.has_room(mem, pad + k),
            false => mask
                .checked_sub(pad + k - 1)
                .is_some_and(|most_used| self.tail.wrapping_sub(self.cached_head) <= most_used),
        };
        if !room {
            return false;
        }
        if pad > 0 {
            self.publish_pad(mem, pad);
        }
        let pos = self.tail;
        write_frame(mem, pos, header, args, payload);
        let tail = pos.wrapping_add(k);
        self.tail = tail;
        // Entered a new group of slots: prefetch a group ahead for ownership, only if
        // all its slots are already free (prefetching a slot the consumer still reads
        // would steal its line). The group never wraps: it starts at a multiple of
        // its size, and the ring's size is one.
        let entered = match k {
            1 => tail & (PREFETCH_GROUP - 1) == 0, // one test of the new tail
            _ => pos ^ tail >= PREFETCH_GROUP,
        };
        if entered {
            let first = (tail & !(PREFETCH_GROUP - 1)).wrapping_add(prefetch_ahead(mask));
            let end = first.wrapping_add(PREFETCH_GROUP);
            if end.wrapping_sub(self.cached_head) <= mask + 1 {
                mem.prefetch_group_for_write(first & mask);
            }
        }
        true
    }

    /// Publishes a pad frame covering the `pad` slots up to the end of the ring.
    #[cold]
    fn publish_pad<M: RingMemory>(&mut self, mem: &M, pad: u64) {
        write_pad(mem, self.tail, pad);
        self.tail = self.tail.wrapping_add(pad);
    }
}

/// Where a producer's tail is after pushing a frame of `nargs` args and `len` payload
/// bytes at `tail` into a ring of `nslots` slots: the frame's slots, and the pad before
/// it if it would wrap. A sender that cannot see the ring (a network peer) follows its
/// receiver's ring with it.
///
/// ```
/// use amrq::conduit::ring::tail_after;
/// assert_eq!(tail_after(0, 8, 6, 0), 1); // an Express frame: one slot
/// assert_eq!(tail_after(7, 8, 8, 0), 10); // two slots do not fit the last one: pad 1
/// ```
pub const fn tail_after(tail: u64, nslots: u64, nargs: usize, len: usize) -> u64 {
    let k = frame_slots(nargs, len);
    let idx = tail & (nslots - 1);
    let pad = if idx + k > nslots { nslots - idx } else { 0 };
    tail.wrapping_add(pad + k)
}

/// Writes the pad frame at position `pos`, covering `pad` slots to the end of the ring,
/// and publishes it. The caller owns slot `pos` (single or shared producer alike).
#[cold]
pub(super) fn write_pad<M: RingMemory>(mem: &M, pos: u64, pad: u64) {
    let idx = pos & (mem.nslots() - 1);
    let header = FrameHeader {
        len: pad as u32,
        flags: FLAG_PAD,
        ..FrameHeader::default()
    };
    // SAFETY: slot idx is ours (the caller counted the pad in its room) until published.
    unsafe { mem.write_header(idx, header.pack()) };
    // ORDERING: Release publishes the pad header; pairs with the Acquire in `Consumer::peek`.
    mem.seq(idx).store(pos.wrapping_add(1), Release);
}

/// Writes the frame at position `pos` (header with `len` and `nargs` set from `payload`
/// and `args`, then args and payload) and publishes it with its sequence word. The
/// caller owns the frame's slots, which do not wrap.
#[inline(always)]
pub(super) fn write_frame<M: RingMemory>(
    mem: &M,
    pos: u64,
    mut header: FrameHeader,
    args: &[u64],
    payload: &[u8],
) {
    let idx = pos & (mem.nslots() - 1);
    header.len = payload.len() as u32;
    header.nargs = args.len() as u8;
    // SAFETY: the frame's slots are the caller's and inside the ring (no wrap) until the
    // sequence word below publishes them. Only the words the frame uses are written:
    // every store before the sequence word is a window in which the consumer, spinning
    // on this line, can take it back before it is complete.
    unsafe {
        mem.write_header(idx, header.pack());
        if !args.is_empty() {
            mem.write_args(idx, args);
        }
        if !payload.is_empty() {
            mem.write_bytes(idx, payload_offset(args.len()), payload);
        }
    }
    // ORDERING: Release publishes every byte of the frame written above; pairs with the
    // Acquire load of the sequence word in `Consumer::peek`.
    mem.seq(idx).store(pos.wrapping_add(1), Release);
}
