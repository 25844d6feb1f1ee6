//! The consumer side: poll the next slot's sequence word, read in place, hand slots back
//! in batches.

use super::layout::{
    frame_slots, payload_offset, FrameHeader, ARGS_OFFSET, EXPRESS_BELOW, FLAG_PAD, MAX_ARGS,
    MAX_WORDS,
};
use super::memory::RingMemory;
use super::{max_frame_slots, Corrupt};
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// Whether a ring's Express frames are handed out as they are ([`Consumer::look_through`]):
/// [`OPEN`](ExpressGate::OPEN) lets a header word below [`EXPRESS_BELOW`] through,
/// [`SHUT`](ExpressGate::SHUT) none. Only these two exist, so a frame let through is
/// always Express.
///
/// ```
/// use amrq::conduit::ring::{ExpressGate, FrameHeader};
/// let express = FrameHeader { tag: 3, nargs: 1, ..Default::default() }.pack();
/// assert!(ExpressGate::OPEN.lets_through(express));
/// assert!(!ExpressGate::SHUT.lets_through(express));
/// assert!(!ExpressGate::OPEN.lets_through(FrameHeader { len: 8, ..Default::default() }.pack()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpressGate(u64);

impl ExpressGate {
    /// Express frames are handed out as they are.
    pub const OPEN: Self = Self(EXPRESS_BELOW);
    /// No frame is: each goes through the full checks.
    pub const SHUT: Self = Self(0);

    /// Whether header word `w` is an Express frame's and the gate is open: one compare.
    #[inline(always)]
    pub const fn lets_through(self, w: u64) -> bool {
        w < self.0
    }
}

/// A readable frame, as [`Consumer::peek`] found it. The frame stays in the ring (and its
/// args and payload can be borrowed in place) until [`Consumer::release`].
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
/// assert!(p.try_push(&ring, FrameHeader::default(), &[], &[0; 200]));
/// let f: Peeked = c.peek(&ring).unwrap().unwrap();
/// assert_eq!((f.position, f.slots), (0, frame_slots(0, 200)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peeked {
    /// Position of the frame's first slot.
    pub position: u64,
    /// The frame header (`nargs` ≤ 8 and the frame inside the ring: checked).
    pub header: FrameHeader,
    /// Slots the frame takes.
    pub slots: u64,
}

impl Peeked {
    /// Index of the first slot.
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
    /// for _ in 0..3 {
    ///     assert!(p.try_push(&ring, FrameHeader::default(), &[], b""));
    ///     let f = c.peek(&ring).unwrap().unwrap();
    ///     c.release(&ring, &f);
    /// }
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b""));
    /// assert_eq!(c.peek(&ring).unwrap().unwrap().index(8), 3);
    /// ```
    #[inline(always)]
    pub fn index(&self, nslots: u64) -> u64 {
        self.position & (nslots - 1)
    }

    /// Offset of the payload from the start of the first slot.
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[1, 2], b"p"));
    /// assert_eq!(c.peek(&ring).unwrap().unwrap().payload_offset(), 16 + 16);
    /// ```
    #[inline(always)]
    pub fn payload_offset(&self) -> usize {
        payload_offset(self.header.nargs as usize)
    }
}

/// What [`Consumer::look`] found at the head.
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
/// assert_eq!(c.look(&ring), Look::Empty);
/// assert!(p.try_push(&ring, FrameHeader::default(), &[1], b""));
/// assert!(matches!(c.look(&ring), Look::Express(_)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Nothing readable.
    Empty,
    /// An Express frame (one slot, at most `EXPRESS_ARGS` args, no payload).
    Express(Peeked),
    /// Another frame, or a pad: [`Consumer::take_ready`] reads it.
    Other,
}

/// The consumer's private state. Lives in the receiving rank.
///
/// The consumer prefetches nothing ahead of its head: the producer's writes bring the
/// lines over anyway, and a read prefetch raced them (it slowed the one-way stream on
/// one host as much as it sped it on another).
///
/// ```
/// use amrq::conduit::ring::Consumer;
/// let c = Consumer::new(256, 0, 64);
/// assert_eq!(c.batch(), 64);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Consumer {
    head: u64,
    published: u64,
    /// `published` + `batch`: the head from which a release publishes.
    publish_at: u64,
    /// Slots − 1: the head's slot is `head & mask`.
    mask: u64,
    batch: u64,
    /// The most arg words a frame of the ring carries.
    max_words: u64,
}

impl Consumer {
    /// A consumer for a ring of `nslots` slots initialised at `start`, publishing its head
    /// every `batch` slots (and whenever it finds the ring empty).
    ///
    /// ```
    /// use amrq::conduit::ring::Consumer;
    /// let c = Consumer::new(256, 0, Consumer::default_batch(256));
    /// assert_eq!((c.nslots(), c.batch(), c.head()), (256, 64, 0));
    /// ```
    pub const fn new(nslots: u64, start: u64, batch: u64) -> Self {
        let batch = if batch == 0 { 1 } else { batch };
        Self {
            head: start,
            published: start,
            publish_at: start.wrapping_add(batch),
            mask: nslots - 1,
            batch,
            max_words: MAX_ARGS as u64,
        }
    }

    /// This consumer for a ring whose frames carry a conduit's hidden word before their
    /// args ([`MAX_WORDS`] words in all): a frame of more words is corrupt.
    ///
    /// ```
    /// use amrq::conduit::ring::Consumer;
    /// let c = Consumer::new(16, 0, 4).with_hidden_word();
    /// assert_eq!(c.nslots(), 16);
    /// ```
    pub const fn with_hidden_word(self) -> Self {
        Self {
            max_words: MAX_WORDS as u64,
            ..self
        }
    }

    /// The default batch for a ring of `nslots`: 64 slots (the producer learns of freed
    /// slots once per batch, not per frame), at most a quarter of the ring.
    ///
    /// ```
    /// use amrq::conduit::ring::Consumer;
    /// assert_eq!(Consumer::default_batch(1024), 64);
    /// assert_eq!(Consumer::default_batch(16), 4); // at most a quarter of the ring
    /// ```
    pub const fn default_batch(nslots: u64) -> u64 {
        let b = nslots / 4;
        if b > 64 {
            64
        } else if b == 0 {
            1
        } else {
            b
        }
    }

    /// Slots of its ring.
    ///
    /// ```
    /// assert_eq!(amrq::conduit::ring::Consumer::new(32, 0, 8).nslots(), 32);
    /// ```
    pub const fn nslots(&self) -> u64 {
        self.mask + 1
    }

    /// Slots consumed between two publications of the head.
    ///
    /// ```
    /// assert_eq!(amrq::conduit::ring::Consumer::new(32, 0, 0).batch(), 1); // 0 means every slot
    /// ```
    pub const fn batch(&self) -> u64 {
        self.batch
    }

    /// Position of the next frame to read.
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b""));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// c.release(&ring, &f);
    /// assert_eq!(c.head(), 1);
    /// ```
    pub const fn head(&self) -> u64 {
        self.head
    }

    /// True if a frame (or a pad) is readable at the head: one load and one compare, for
    /// scanning many rings. Like [`Consumer::peek`], finding the ring empty publishes
    /// the head if slots were consumed since the last publication (a local store: the
    /// producer reads the head only when its cached view says full).
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
    /// assert!(!c.ready(&ring));
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b""));
    /// assert!(c.ready(&ring));
    /// ```
    #[inline(always)]
    pub fn ready<M: RingMemory>(&mut self, mem: &M) -> bool {
        // ORDERING: Acquire pairs with the Release store of the sequence word in
        // `Producer::try_push` / `publish_pad` (the frame is then read by `peek`).
        if mem.seq(self.head & self.mask).load(Acquire) == self.head.wrapping_add(1) {
            return true;
        }
        self.publish_if_behind(mem);
        false
    }

    /// True if no frame is readable at the head and the head is published: nothing to
    /// do here, not even a store (for scans that find most rings idle). `false` says
    /// only that [`Consumer::ready`] has work: a frame, or a head to publish.
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
    /// assert!(c.quiet(&ring));
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b""));
    /// assert!(!c.quiet(&ring));
    /// ```
    #[inline(always)]
    pub fn quiet<M: RingMemory>(&self, mem: &M) -> bool {
        self.head == self.published
            && mem.seq(self.head & self.mask).load(Relaxed) != self.head.wrapping_add(1)
    }

    /// The next readable frame, `Ok(None)` if the ring is empty. Pad frames are skipped.
    /// Peeking again without a release returns the same frame.
    ///
    /// Finding the ring empty publishes the head if slots were consumed since the last
    /// publication: a producer waiting for room then always sees it eventually, whatever
    /// the batch and frame sizes. The store stays in this core's cache unless the
    /// producer has looked, which it does only when its cached view says full.
    ///
    /// A header the protocol cannot produce (a bad peer) gives [`Corrupt`]; the ring
    /// should not be read further.
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
    /// assert!(c.peek(&ring).unwrap().is_none());
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[5], b""));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// assert_eq!(c.read_args(&ring, &f)[0], 5);
    /// c.release(&ring, &f);
    /// ```
    #[inline(always)]
    pub fn peek<M: RingMemory>(&mut self, mem: &M) -> Result<Option<Peeked>, Corrupt> {
        loop {
            if !self.ready(mem) {
                return Ok(None);
            }
            if let Some(f) = self.take_ready(mem)? {
                return Ok(Some(f));
            }
        }
    }

    /// The frame at the head, which [`Consumer::ready`] has just seen: `Ok(None)` if it
    /// was a pad (now skipped; look again). The frame's bytes are read only after that
    /// Acquire, so there is no need to load the sequence word a second time.
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b"hi"));
    /// if c.ready(&ring) {
    ///     let f = c.take_ready(&ring).unwrap().expect("a frame, not a pad");
    ///     assert_eq!(f.header.len, 2);
    ///     c.release(&ring, &f);
    /// }
    /// ```
    #[inline(always)]
    pub fn take_ready<M: RingMemory>(&mut self, mem: &M) -> Result<Option<Peeked>, Corrupt> {
        let idx = self.head & self.mask;
        // SAFETY: `ready` saw the sequence word say the producer published this slot.
        let word = unsafe { mem.read_header(idx) };
        if let Some(p) = Self::express(self.head, word, ExpressGate::OPEN) {
            return Ok(Some(p)); // one slot, nothing more to check
        }
        let header = FrameHeader::unpack(word);
        if header.flags & FLAG_PAD != 0 {
            if u64::from(header.len) != self.nslots() - idx {
                return Err(self.corrupt("pad frame does not end at the ring's end"));
            }
            self.advance(mem, u64::from(header.len));
            return Ok(None);
        }
        if u64::from(header.nargs) > self.max_words {
            return Err(self.corrupt(match self.max_words > MAX_ARGS as u64 {
                true => "more than 8 args after the hidden word",
                false => "more than 8 args",
            }));
        }
        let slots = frame_slots(header.nargs as usize, header.len as usize);
        if slots > max_frame_slots(self.nslots()) || idx + slots > self.nslots() {
            return Err(self.corrupt("frame longer than the ring allows"));
        }
        Ok(Some(Peeked {
            position: self.head,
            header,
            slots,
        }))
    }

    /// What is at the head, in one look (for receive loops): [`Look::Express`] with the
    /// frame when it is Express, [`Look::Other`] when a frame or pad of another kind is
    /// readable (then [`Consumer::take_ready`]), [`Look::Empty`] otherwise, having
    /// published the head as [`Consumer::ready`] does. The head and the slot's address
    /// are read once, before the Acquire load, and used after it.
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], &[0; 100])); // two slots
    /// assert_eq!(c.look(&ring), Look::Other); // not Express: take it with take_ready
    /// ```
    #[inline(always)]
    pub fn look<M: RingMemory>(&mut self, mem: &M) -> Look {
        self.look_through(mem, ExpressGate::OPEN)
    }

    /// [`Consumer::look`] through `gate`: a reader that must not hand out some ring's
    /// frames as they are (its sender may not send, the ring is closed) keeps that
    /// ring's gate [shut](ExpressGate::SHUT) and sees [`Look::Other`] for every frame,
    /// in the look's one compare of the header word.
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[1], b""));
    /// assert_eq!(c.look_through(&ring, ExpressGate::SHUT), Look::Other);
    /// assert!(matches!(c.look_through(&ring, ExpressGate::OPEN), Look::Express(_)));
    /// ```
    #[inline(always)]
    pub fn look_through<M: RingMemory>(&mut self, mem: &M, gate: ExpressGate) -> Look {
        let head = self.head;
        // The memory's mask (the same value as ours): a caller that computes the
        // slot's address from it shares this index instead of computing it again.
        let idx = head & (mem.nslots() - 1);
        // ORDERING: as in `ready`: Acquire pairs with the producer's Release store of
        // the sequence word.
        if mem.seq(idx).load(Acquire) != head.wrapping_add(1) {
            self.publish_if_behind(mem);
            return Look::Empty;
        }
        // SAFETY: the sequence word says the producer published this slot.
        let w = unsafe { mem.read_header(idx) };
        match Self::express(head, w, gate) {
            Some(p) => Look::Express(p),
            None => Look::Other,
        }
    }

    /// The frame at `head`, whose header word is `w`, if `gate` lets it through as
    /// Express: one slot, no payload, at most [`EXPRESS_ARGS`](super::EXPRESS_ARGS)
    /// args, no pad, Long or Tag-On flag (the common case, told by one compare).
    #[inline(always)]
    fn express(head: u64, w: u64, gate: ExpressGate) -> Option<Peeked> {
        if !gate.lets_through(w) {
            return None;
        }
        Some(Peeked {
            position: head,
            header: FrameHeader::unpack(w),
            slots: 1,
        })
    }

    /// Copies the args of `f` out of the ring (the conduits borrow them in place instead).
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[1, 2, 3], b""));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// assert_eq!(c.read_args(&ring, &f)[..3], [1, 2, 3]);
    /// ```
    pub fn read_args<M: RingMemory>(&self, mem: &M, f: &Peeked) -> [u64; MAX_WORDS] {
        let mut bytes = [0u8; MAX_WORDS * 8];
        let n = f.header.nargs as usize * 8;
        // SAFETY: `f` is the frame peeked last and not released: its slots are ours.
        unsafe { mem.read_bytes(f.index(self.nslots()), ARGS_OFFSET, &mut bytes[..n]) };
        let mut args = [0u64; MAX_WORDS];
        for (a, c) in args.iter_mut().zip(bytes.chunks_exact(8)) {
            *a = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        }
        args
    }

    /// Copies the payload of `f` out of the ring into `dst` (`dst.len()` = payload length).
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[1], b"twelve bytes"));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// let mut out = [0u8; 12];
    /// c.read_payload(&ring, &f, &mut out);
    /// assert_eq!(&out, b"twelve bytes");
    /// ```
    pub fn read_payload<M: RingMemory>(&self, mem: &M, f: &Peeked, dst: &mut [u8]) {
        debug_assert_eq!(dst.len(), f.header.len as usize);
        // SAFETY: as in `read_args`.
        unsafe { mem.read_bytes(f.index(self.nslots()), f.payload_offset(), dst) };
    }

    /// Hands the frame `f` (the one [`Consumer::peek`] returned last) back to the producer.
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
    /// for i in 0..20u64 { // more frames than slots: each release makes room
    ///     assert!(p.try_push(&ring, FrameHeader::default(), &[i], b""));
    ///     let f = c.peek(&ring).unwrap().unwrap();
    ///     c.release(&ring, &f);
    /// }
    /// ```
    #[inline(always)]
    pub fn release<M: RingMemory>(&mut self, mem: &M, f: &Peeked) {
        debug_assert_eq!(f.position, self.head);
        let idx = f.index(self.nslots());
        // Args and payload overwrote the later slots' sequence words: give each back a
        // value from this lap so it cannot match a later position.
        for j in 1..f.slots {
            mem.seq(idx + j)
                .store(f.position.wrapping_add(j + 1), Relaxed);
        }
        self.advance(mem, f.slots);
    }

    /// [`Consumer::release`] of the one-slot frame at the head (an Express frame).
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
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[1], b""));
    /// if let Look::Express(_) = c.look(&ring) {
    ///     c.release_one(&ring);
    /// }
    /// assert_eq!(c.head(), 1);
    /// ```
    #[inline(always)]
    pub fn release_one<M: RingMemory>(&mut self, mem: &M) {
        self.advance(mem, 1);
    }

    /// Publishes the head if slots were consumed since the last publication: for a
    /// reader that leaves a ring before finding it empty.
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
    /// let (mut p, mut c) = (Producer::new(8, 0), Consumer::new(8, 0, 4));
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[], b""));
    /// let f = c.peek(&ring).unwrap().unwrap();
    /// c.release(&ring, &f); // 1 of a batch of 4: not published yet
    /// assert_eq!(ring.head().load(Ordering::Relaxed), 0);
    /// c.publish_if_behind(&ring);
    /// assert_eq!(ring.head().load(Ordering::Relaxed), 1);
    /// ```
    #[inline(always)]
    pub fn publish_if_behind<M: RingMemory>(&mut self, mem: &M) {
        if self.head != self.published {
            self.publish(mem);
        }
    }

    #[inline(always)]
    fn advance<M: RingMemory>(&mut self, mem: &M, slots: u64) {
        self.head = self.head.wrapping_add(slots);
        // At or past `publish_at`: the head is at most a ring ahead of it.
        if (self.head.wrapping_sub(self.publish_at) as i64) >= 0 {
            self.publish(mem);
        }
    }

    #[inline(always)]
    fn publish<M: RingMemory>(&mut self, mem: &M) {
        // ORDERING: Release orders our reads of the consumed slots and the Relaxed
        // restores of their sequence words before the producer's reuse; pairs with the
        // Acquire load of `head` in `Producer::refresh_head`.
        mem.head().store(self.head, Release);
        self.published = self.head;
        self.publish_at = self.head.wrapping_add(self.batch);
    }

    #[cold]
    fn corrupt(&self, what: &'static str) -> Corrupt {
        Corrupt {
            position: self.head,
            what,
        }
    }
}
