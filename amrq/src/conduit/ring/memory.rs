//! Where a ring's bytes live. The algorithm in [`super::Producer`] and
//! [`super::Consumer`] only touches memory through [`RingMemory`], so the loom models can
//! run it over loom cells while the conduits run it over raw mapped bytes ([`RawRing`]).

use crate::sync::AtomicU64;

/// Access to one ring's control word, sequence words and slot bytes.
///
/// Ownership of slot bytes moves by protocol, not by the type system: the producer owns
/// a slot from the moment it sees the slot free (its view of `head`) until it publishes
/// the sequence word; the consumer owns it from its Acquire of that sequence word until
/// it publishes a head past it. The `unsafe` methods require the caller to own the slots
/// it touches in this sense.
///
/// ```
/// # use amrq::conduit::ring::*;
/// # #[repr(C, align(128))]
/// # struct Mem([u8; 128 + 8 * 64]);
/// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
/// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
/// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
/// # ring.init(0);
/// // The producer and consumer work on any RingMemory: raw bytes here, loom cells in models.
/// fn slots<M: RingMemory>(m: &M) -> u64 { m.nslots() }
/// assert_eq!(slots(&ring), 8);
/// ```
pub trait RingMemory {
    /// Number of slots, a power of two.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// assert_eq!(ring.nslots(), 8);
    /// ```
    fn nslots(&self) -> u64;
    /// The consumer's published head.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// use std::sync::atomic::Ordering;
    /// assert_eq!(ring.head().load(Ordering::Relaxed), 0); // nothing consumed
    /// ```
    fn head(&self) -> &AtomicU64;
    /// The sequence word of slot `idx` (`idx < nslots`).
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
    /// use std::sync::atomic::Ordering;
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[1], b""));
    /// assert_eq!(ring.seq(0).load(Ordering::Acquire), 1); // position 0 + 1: readable
    /// ```
    fn seq(&self, idx: u64) -> &AtomicU64;
    /// Writes the header word (bytes 8..16) of slot `idx`.
    ///
    /// # Safety
    /// The caller owns slot `idx`.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// let h = FrameHeader { tag: 3, ..Default::default() }.pack();
    /// // SAFETY: slot 0 is not published and nobody reads it meanwhile.
    /// unsafe { ring.write_header(0, h) };
    /// // SAFETY: as above.
    /// assert_eq!(unsafe { ring.read_header(0) }, h);
    /// ```
    unsafe fn write_header(&self, idx: u64, header: u64);
    /// Reads the header word (bytes 8..16) of slot `idx`.
    ///
    /// # Safety
    /// The caller owns slot `idx`.
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
    /// assert!(p.try_push(&ring, FrameHeader { tag: 7, ..Default::default() }, &[], b""));
    /// // SAFETY: the frame at slot 0 is published (its sequence word was checked by peek).
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// assert_eq!(FrameHeader::unpack(unsafe { ring.read_header(0) }).tag, f.header.tag);
    /// ```
    unsafe fn read_header(&self, idx: u64) -> u64;
    /// Copies `src` to the bytes that start at byte `offset` of slot `idx` and run on
    /// through the following slots (never past the last slot).
    ///
    /// # Safety
    /// The caller owns every slot touched.
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 8 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
    /// # ring.init(0);
    /// let mut back = [0u8; 3];
    /// // SAFETY: slots 1-2 are nobody else's here; 3 bytes at offset 16 stay inside them.
    /// unsafe {
    ///     ring.write_bytes(1, 16, b"abc");
    ///     ring.read_bytes(1, 16, &mut back);
    /// }
    /// assert_eq!(&back, b"abc");
    /// ```
    unsafe fn write_bytes(&self, idx: u64, offset: usize, src: &[u8]);
    /// Writes the args `words` (at most [`MAX_WORDS`](super::layout::MAX_WORDS)) at
    /// [`ARGS_OFFSET`](super::layout::ARGS_OFFSET) of slot `idx` (and on through the
    /// following slots).
    ///
    /// # Safety
    /// As [`RingMemory::write_bytes`].
    #[inline(always)]
    unsafe fn write_args(&self, idx: u64, words: &[u64]) {
        // SAFETY: the caller's guarantee; u64 has no padding.
        unsafe {
            let bytes = std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8);
            self.write_bytes(idx, super::layout::ARGS_OFFSET, bytes)
        }
    }
    /// Copies the bytes that start at byte `offset` of slot `idx` into `dst`.
    ///
    /// # Safety
    /// The caller owns every slot touched.
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b"payload"));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// let mut out = [0u8; 7];
    /// // SAFETY: the frame is published and not yet released.
    /// unsafe { ring.read_bytes(f.index(8), f.payload_offset(), &mut out) };
    /// assert_eq!(&out, b"payload");
    /// ```
    unsafe fn read_bytes(&self, idx: u64, offset: usize, dst: &mut [u8]);
    /// Hints that the producer's group of slots from `idx` on (8 slots, `idx` a
    /// multiple of 8) will be written soon: a hint only, which changes nothing a reader
    /// of the ring can see (the default does nothing).
    ///
    /// ```
    /// # use amrq::conduit::ring::*;
    /// # #[repr(C, align(128))]
    /// # struct Mem([u8; 128 + 16 * 64]);
    /// # let mut mem = Box::new(Mem([0; 128 + 16 * 64]));
    /// # // SAFETY: 128-byte aligned, room for 16 slots, outlives the ring.
    /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 16) };
    /// # ring.init(0);
    /// ring.prefetch_group_for_write(8); // slots 8–15, for writing
    /// let mut c = Consumer::new(16, 0, 2);
    /// assert!(c.peek(&ring).unwrap().is_none());
    /// ```
    #[inline(always)]
    fn prefetch_group_for_write(&self, idx: u64) {
        let _ = idx;
    }
}

#[cfg(not(amrq_loom))]
pub use raw::RawRing;

#[cfg(not(amrq_loom))]
mod raw {
    use super::RingMemory;
    use crate::conduit::ring::layout::{RingCtl, Slot, CTL_BYTES, HEADER_OFFSET, SLOT_BYTES};
    use crate::sync::AtomicU64;
    use std::ptr::NonNull;
    use std::sync::atomic::Ordering;

    /// A ring laid out in raw bytes (see the diagram in [`crate::conduit::ring`]).
    ///
    /// Holds a pointer valid in this process only; what is shared between processes is
    /// the ring's *offset* in its region.
    ///
    /// ```
    /// use amrq::conduit::ring::{RawRing, Producer, Consumer, FrameHeader};
    /// #[repr(C, align(128))]
    /// struct Mem([u8; 128 + 4 * 64]);
    /// let mut mem = Box::new(Mem([0; 128 + 4 * 64]));
    /// // SAFETY: `mem` is 128-byte aligned, large enough for 4 slots and outlives `ring`.
    /// let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 4) };
    /// ring.init(0);
    /// let (mut p, mut c) = (Producer::new(4, 0), Consumer::new(4, 0, 1));
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[42], b""));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// assert_eq!(c.read_args(&ring, &f)[..2], [42, 0]); // its one arg, then zeros
    /// c.release(&ring, &f);
    /// ```
    #[derive(Debug, Clone, Copy)]
    pub struct RawRing {
        base: NonNull<u8>,
        /// Slots − 1 (a power of two less one): indexing masks with it.
        mask: u64,
    }

    // SAFETY: a RawRing is an address plus a length; the ring protocol (not Rust
    // ownership) decides which thread touches which bytes, exactly as for memory shared
    // with another process.
    unsafe impl Send for RawRing {}

    impl RawRing {
        /// Bytes a ring of `nslots` slots occupies.
        ///
        /// ```
        /// use amrq::conduit::ring::RawRing;
        /// assert_eq!(RawRing::bytes(256), 128 + 256 * 64);
        /// ```
        pub const fn bytes(nslots: u64) -> usize {
            CTL_BYTES + SLOT_BYTES * nslots as usize
        }

        /// A ring whose control block starts at `base`.
        ///
        /// # Safety
        /// `base` is 128-byte aligned and valid for reads and writes of
        /// [`RawRing::bytes`]`(nslots)` bytes for as long as the ring is used, those bytes
        /// are used only as this ring, and `nslots` is a power of two ≥ 2.
        ///
        /// ```
        /// # use amrq::conduit::ring::*;
        /// # #[repr(C, align(128))]
        /// # struct Mem([u8; 128 + 8 * 64]);
        /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
        /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
        /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
        /// # ring.init(0);
        /// assert_eq!(ring.nslots(), 8);
        /// ```
        pub unsafe fn new(base: NonNull<u8>, nslots: u64) -> Self {
            debug_assert!(nslots.is_power_of_two() && nslots >= 2);
            debug_assert!((base.as_ptr() as usize).is_multiple_of(CTL_BYTES));
            Self {
                base,
                mask: nslots - 1,
            }
        }

        /// Writes the initial control word and sequence words for a ring whose first
        /// frame will be at position `start`. Call once, before any producer or consumer
        /// (not needed at position 0 on zeroed memory: a zeroed ring is a ring there).
        ///
        /// ```
        /// # use amrq::conduit::ring::*;
        /// # #[repr(C, align(128))]
        /// # struct Mem([u8; 128 + 8 * 64]);
        /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
        /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
        /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
        /// # ring.init(0);
        /// let (mut p, mut c) = (Producer::new(8, 0), Consumer::new(8, 0, 1));
        /// assert!(c.peek(&ring).unwrap().is_none()); // initialised: empty, no stale frame
        /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b""));
        /// ```
        pub fn init(&self, start: u64) {
            super::super::producer::init(self, start);
            self.ctl().closed.store(0, Ordering::Relaxed);
        }

        #[inline(always)]
        fn slot(&self, idx: u64) -> *mut u8 {
            debug_assert!(idx <= self.mask);
            // SAFETY: idx < nslots keeps the result inside the ring (see `new`).
            unsafe {
                self.base
                    .as_ptr()
                    .add(CTL_BYTES + SLOT_BYTES * idx as usize)
            }
        }

        /// The control block.
        fn ctl(&self) -> &RingCtl {
            // SAFETY: the control block is at `base` (see `new`) and only accessed
            // atomically.
            unsafe { &*self.base.as_ptr().cast::<RingCtl>() }
        }

        /// Marks the ring closed: its consumer reads it no more (it found a frame the
        /// protocol cannot produce). Its producer sees it with [`RawRing::is_closed`].
        ///
        /// ```
        /// # use amrq::conduit::ring::*;
        /// # #[repr(C, align(128))]
        /// # struct Mem([u8; 128 + 8 * 64]);
        /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
        /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
        /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
        /// # ring.init(0);
        /// assert!(!ring.is_closed());
        /// ring.close(); // the consumer found a corrupt frame
        /// assert!(ring.is_closed());
        /// ```
        #[cold]
        pub fn close(&self) {
            // ORDERING: Release pairs with the Acquire load in `is_closed`; nothing else
            // is published with it, but a sender that sees it must not see it early.
            self.ctl().closed.store(1, Ordering::Release);
        }

        /// True once the consumer has closed the ring ([`RawRing::close`]). A sender
        /// asks when the ring is full, before it waits for room.
        ///
        /// ```
        /// # use amrq::conduit::ring::*;
        /// # #[repr(C, align(128))]
        /// # struct Mem([u8; 128 + 8 * 64]);
        /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
        /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
        /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
        /// # ring.init(0);
        /// ring.close();
        /// assert!(ring.is_closed());
        /// ```
        #[cold]
        pub fn is_closed(&self) -> bool {
            // ORDERING: Acquire pairs with the Release store in `close`.
            self.ctl().closed.load(Ordering::Acquire) != 0
        }

        /// Address of slot `idx` (a frame's bytes are borrowed in place from here).
        ///
        /// ```
        /// # use amrq::conduit::ring::*;
        /// # #[repr(C, align(128))]
        /// # struct Mem([u8; 128 + 8 * 64]);
        /// # let mut mem = Box::new(Mem([0; 128 + 8 * 64]));
        /// # // SAFETY: 128-byte aligned, room for 8 slots, outlives the ring.
        /// # let ring = unsafe { RawRing::new(std::ptr::NonNull::from(&mut mem.0).cast(), 8) };
        /// # ring.init(0);
        /// assert_eq!(ring.slot_ptr(1) as usize - ring.slot_ptr(0) as usize, 64);
        /// ```
        #[inline(always)]
        pub fn slot_ptr(&self, idx: u64) -> *const u8 {
            self.slot(idx)
        }
    }

    impl RingMemory for RawRing {
        #[inline(always)]
        fn nslots(&self) -> u64 {
            self.mask + 1
        }

        #[inline(always)]
        fn head(&self) -> &AtomicU64 {
            &self.ctl().head
        }

        #[inline(always)]
        fn seq(&self, idx: u64) -> &AtomicU64 {
            // SAFETY: `slot` is a valid slot address; the seq word is only accessed
            // atomically, except by payload copies into slots the copier owns.
            unsafe { &(*self.slot(idx).cast::<Slot>()).seq }
        }

        #[inline(always)]
        unsafe fn write_header(&self, idx: u64, header: u64) {
            // SAFETY: the caller owns the slot; the header word follows the seq word.
            unsafe {
                self.slot(idx)
                    .add(HEADER_OFFSET)
                    .cast::<u64>()
                    .write(header)
            }
        }

        #[inline(always)]
        unsafe fn read_header(&self, idx: u64) -> u64 {
            // SAFETY: the caller owns the slot; the header word follows the seq word.
            unsafe { self.slot(idx).add(HEADER_OFFSET).cast::<u64>().read() }
        }

        #[inline(always)]
        unsafe fn write_bytes(&self, idx: u64, offset: usize, src: &[u8]) {
            // SAFETY: the caller owns the slots and the range stays inside the ring.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), self.slot(idx).add(offset), src.len())
            }
        }

        /// A word at a time: at most [`MAX_WORDS`](crate::conduit::ring::MAX_WORDS)
        /// words, whose count a caller may know only at run time (the C interface),
        /// where `copy_nonoverlapping` would call `memcpy`. The loop's bound is the
        /// constant, so that it unrolls into a test and a store per word (a loop over
        /// the slice's length came out as a vectorised copy and its set-up).
        #[inline(always)]
        unsafe fn write_args(&self, idx: u64, words: &[u64]) {
            use crate::conduit::ring::layout::{ARGS_OFFSET, MAX_WORDS};
            debug_assert!(
                words.len() <= MAX_WORDS,
                "a frame carries at most MAX_WORDS words"
            );
            // SAFETY: the caller owns the slots and the args stay inside the ring; the
            // args start 8-aligned (slots are 64-byte aligned, ARGS_OFFSET is 16).
            unsafe {
                let at = self.slot(idx).add(ARGS_OFFSET).cast::<u64>();
                for k in 0..MAX_WORDS {
                    let Some(&w) = words.get(k) else { break };
                    at.add(k).write(w);
                }
            }
        }

        #[inline(always)]
        unsafe fn read_bytes(&self, idx: u64, offset: usize, dst: &mut [u8]) {
            // SAFETY: as for `write_bytes`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.slot(idx).add(offset),
                    dst.as_mut_ptr(),
                    dst.len(),
                )
            }
        }

        #[inline(always)]
        fn prefetch_group_for_write(&self, idx: u64) {
            const _: () = assert!(super::super::producer::PREFETCH_GROUP == 8);
            const _: () = assert!(SLOT_BYTES == 64);
            // The group's slots are consecutive lines (it never wraps).
            crate::util::prefetch::prefetch_write_8_lines(self.slot(idx));
        }
    }
}
