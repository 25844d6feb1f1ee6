//! The bytes of a ring: control block, slots and the frame header word.

use crate::sync::AtomicU64;

/// Bytes per slot: one cache line.
///
/// ```
/// assert_eq!(amrq::conduit::ring::SLOT_BYTES, 64); // one cache line
/// ```
pub const SLOT_BYTES: usize = 64;
/// Bytes of the control block that precedes the slots (two cache lines, because the
/// adjacent-line prefetcher pulls lines in pairs).
///
/// ```
/// use amrq::conduit::ring::{RawRing, CTL_BYTES, SLOT_BYTES};
/// assert_eq!(RawRing::bytes(4), CTL_BYTES + 4 * SLOT_BYTES);
/// ```
pub const CTL_BYTES: usize = 128;
/// u64 args that fit the first slot beside the header and the sequence word.
///
/// ```
/// use amrq::conduit::ring::{frame_slots, EXPRESS_ARGS};
/// assert_eq!(frame_slots(EXPRESS_ARGS, 0), 1);
/// assert_eq!(frame_slots(EXPRESS_ARGS + 1, 0), 2);
/// ```
pub const EXPRESS_ARGS: usize = 6;
/// Most u64 args a frame carries.
///
/// ```
/// assert_eq!(amrq::conduit::ring::MAX_ARGS, 8);
/// ```
pub const MAX_ARGS: usize = 8;
/// Most u64 words a frame carries: [`MAX_ARGS`] args and the hidden word a conduit
/// may put before them.
///
/// ```
/// use amrq::conduit::ring::{MAX_ARGS, MAX_WORDS};
/// assert_eq!(MAX_WORDS, MAX_ARGS + 1);
/// ```
pub const MAX_WORDS: usize = MAX_ARGS + 1;
/// Header flag reserved for the ring: this frame is padding up to the end of the ring.
///
/// ```
/// use amrq::conduit::ring::{is_express, FrameHeader, FLAG_PAD};
/// assert!(!is_express(FrameHeader { flags: FLAG_PAD, ..Default::default() }.pack()));
/// ```
pub const FLAG_PAD: u8 = 0x80;
/// Header flag reserved for conduits: the payload is a Long message's (offset, length)
/// in the receiver's registered segment, not the data itself.
///
/// ```
/// use amrq::conduit::ring::{FLAG_LONG, USER_FLAGS};
/// assert_eq!(FLAG_LONG & USER_FLAGS, 0); // the conduit's, not the layers' above
/// ```
pub const FLAG_LONG: u8 = 0x40;
/// Header flag reserved for conduits: the payload is a Tag-On block's (index, length)
/// in the receiver's pool for this sender.
///
/// ```
/// use amrq::conduit::ring::{FLAG_LONG, FLAG_PAD, FLAG_TAG_ON};
/// assert_eq!(FLAG_TAG_ON & (FLAG_LONG | FLAG_PAD), 0);
/// ```
pub const FLAG_TAG_ON: u8 = 0x20;
/// Flag bits the layers above the conduit may use.
///
/// ```
/// use amrq::conduit::ring::USER_FLAGS;
/// assert_eq!(USER_FLAGS.count_ones(), 5); // bits 0-4 for the layers above
/// ```
pub const USER_FLAGS: u8 = 0x1f;

/// The control block: the consumer's published head and its closed mark, alone on
/// their line pair (both consumer → producer).
///
/// ```
/// use amrq::conduit::ring::{RingCtl, CTL_BYTES};
/// assert_eq!(std::mem::size_of::<RingCtl>(), CTL_BYTES); // a line pair of its own
/// ```
#[repr(C, align(128))]
pub struct RingCtl {
    /// Position of the first slot the consumer has not handed back yet. Written by the
    /// consumer in batches, read by the producer only when its cached view says full.
    pub head: AtomicU64,
    /// Nonzero once the consumer has stopped reading this ring (it found a frame the
    /// protocol cannot produce). Read by a sender only when the ring is full.
    pub closed: AtomicU64,
}

/// One slot as the first slot of a frame sees it. Args, then payload, run on
/// contiguously from byte [`ARGS_OFFSET`] into the following slots, so a receiver can
/// borrow both in place.
///
/// ```
/// use amrq::conduit::ring::{Slot, SLOT_BYTES};
/// assert_eq!(std::mem::size_of::<Slot>(), SLOT_BYTES);
/// ```
#[repr(C, align(64))]
pub struct Slot {
    /// Position + 1 when the frame starting here is readable (written last, Release).
    pub seq: AtomicU64,
    /// The packed [`FrameHeader`].
    pub header: u64,
    /// The first six args (an Express frame's all).
    pub args: [u64; EXPRESS_ARGS],
}

/// Byte offset of the header in a frame's first slot.
///
/// ```
/// use amrq::conduit::ring::{Slot, HEADER_OFFSET};
/// assert_eq!(std::mem::offset_of!(Slot, header), HEADER_OFFSET);
/// ```
pub const HEADER_OFFSET: usize = 8;
/// Byte offset of the first arg in a frame's first slot.
///
/// ```
/// use amrq::conduit::ring::{payload_offset, ARGS_OFFSET};
/// assert_eq!(payload_offset(0), ARGS_OFFSET); // no args: the payload starts there
/// ```
pub const ARGS_OFFSET: usize = 16;

#[cfg(not(amrq_loom))]
const _: () = {
    assert!(std::mem::size_of::<Slot>() == SLOT_BYTES);
    assert!(std::mem::align_of::<Slot>() == SLOT_BYTES);
    assert!(std::mem::offset_of!(Slot, seq) == 0);
    assert!(std::mem::offset_of!(Slot, header) == HEADER_OFFSET);
    assert!(std::mem::offset_of!(Slot, args) == ARGS_OFFSET);
    assert!(ARGS_OFFSET + EXPRESS_ARGS * 8 == SLOT_BYTES);
    assert!(std::mem::size_of::<RingCtl>() == CTL_BYTES);
    assert!(std::mem::align_of::<RingCtl>() == CTL_BYTES);
    assert!(std::mem::offset_of!(RingCtl, head) == 0);
    assert!(std::mem::offset_of!(RingCtl, closed) == 8);
};

/// The first word of every frame.
///
/// Bit layout of the packed word (little end first): `tag` bits 0–15 (the upper
/// layer's: AM handler index, RQ tag), the upper layers' flag bits 0–4 at bits 16–20,
/// `nargs` bits 21–28, the ring's and conduits' flags ([`FLAG_TAG_ON`], [`FLAG_LONG`],
/// [`FLAG_PAD`], flag bits 5–7) at bits 29–31, `len` bits 32–63 (payload bytes; for a
/// pad frame, slots skipped). What may be anything in an Express frame (tag, the upper
/// layers' flags) lies below `nargs`, and what must be zero above it, so the Express
/// test is one compare of the word ([`is_express`]).
///
/// ```text
///  63              32 31  29 28    21 20   16 15            0
/// ┌──────────────────┬──────┬────────┬───────┬───────────────┐
/// │ len              │ PLT  │ nargs  │ user  │ tag           │
/// └──────────────────┴──────┴────────┴───────┴───────────────┘
///                     P = pad, L = Long, T = Tag-On
/// ```
///
/// ```
/// use amrq::conduit::ring::FrameHeader;
/// let h = FrameHeader { len: 4096, tag: 7, nargs: 2, flags: 1 };
/// assert_eq!(FrameHeader::unpack(h.pack()), h);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameHeader {
    /// Payload bytes.
    pub len: u32,
    /// Upper-layer tag.
    pub tag: u16,
    /// Number of u64 args (0..=8).
    pub nargs: u8,
    /// Flags; bits 5–7 are reserved.
    pub flags: u8,
}

impl FrameHeader {
    /// The header as one word.
    ///
    /// ```
    /// use amrq::conduit::ring::{FrameHeader, FLAG_LONG};
    /// let w = FrameHeader { len: 1, tag: 2, nargs: 3, flags: 4 | FLAG_LONG }.pack();
    /// assert_eq!(w, 1 << 32 | 2 | 3 << 21 | 4 << 16 | 2 << 29);
    /// ```
    #[inline(always)]
    pub const fn pack(self) -> u64 {
        self.tag as u64
            | ((self.flags & USER_FLAGS) as u64) << USER_FLAGS_AT
            | (self.nargs as u64) << NARGS_AT
            | ((self.flags >> RING_FLAGS_SHIFT) as u64) << RING_FLAGS_AT
            | (self.len as u64) << LEN_AT
    }

    /// The header from its word.
    ///
    /// ```
    /// use amrq::conduit::ring::FrameHeader;
    /// assert_eq!(FrameHeader::unpack(5).tag, 5);
    /// ```
    #[inline(always)]
    pub const fn unpack(w: u64) -> Self {
        Self {
            len: (w >> LEN_AT) as u32,
            tag: w as u16,
            nargs: (w >> NARGS_AT) as u8,
            flags: ((w >> USER_FLAGS_AT) as u8 & USER_FLAGS)
                | ((w >> RING_FLAGS_AT) as u8 & RING_FLAGS) << RING_FLAGS_SHIFT,
        }
    }
}

/// Where the fields of the header word start (see [`FrameHeader`]).
const USER_FLAGS_AT: u32 = 16;
const NARGS_AT: u32 = 21;
const RING_FLAGS_AT: u32 = 29;
const LEN_AT: u32 = 32;
/// The flag bits above [`USER_FLAGS`] (pad, Long, Tag-On), moved down to bit 0.
const RING_FLAGS_SHIFT: u32 = USER_FLAGS.count_ones();
const RING_FLAGS: u8 = (FLAG_PAD | FLAG_LONG | FLAG_TAG_ON) >> RING_FLAGS_SHIFT;
const _: () = {
    assert!(USER_FLAGS == (1 << RING_FLAGS_SHIFT) - 1 && RING_FLAGS == 0b111);
    assert!(USER_FLAGS_AT == 16 && NARGS_AT == USER_FLAGS_AT + RING_FLAGS_SHIFT);
    assert!(RING_FLAGS_AT == NARGS_AT + 8 && LEN_AT == RING_FLAGS_AT + 8 - RING_FLAGS_SHIFT);
};

/// Header words below this are Express frames' (see [`is_express`]): `nargs` at most
/// [`EXPRESS_ARGS`], with zero above it.
///
/// ```
/// use amrq::conduit::ring::{FrameHeader, EXPRESS_ARGS, EXPRESS_BELOW};
/// let most = FrameHeader { tag: u16::MAX, flags: 0x1f, nargs: EXPRESS_ARGS as u8, len: 0 };
/// assert_eq!(most.pack() + 1, EXPRESS_BELOW);
/// ```
pub const EXPRESS_BELOW: u64 = ((EXPRESS_ARGS as u64) + 1) << NARGS_AT;

/// True if `w` is the header word of an Express frame: no payload, at most
/// [`EXPRESS_ARGS`] args, none of the pad, Long and Tag-On flags (so one slot).
///
/// One compare: `len` and those flags lie above `nargs` in the word, the tag and the
/// upper layers' flags below it, so the word is below [`EXPRESS_BELOW`] exactly when
/// `len` and the flags are zero and `nargs` is small enough (the tests hold it to the
/// field-by-field definition).
///
/// ```
/// use amrq::conduit::ring::{is_express, FrameHeader};
/// assert!(is_express(FrameHeader { tag: 9, nargs: 6, flags: 1, len: 0 }.pack()));
/// assert!(!is_express(FrameHeader { nargs: 7, ..Default::default() }.pack()));
/// assert!(!is_express(FrameHeader { len: 1, ..Default::default() }.pack()));
/// ```
#[inline(always)]
pub const fn is_express(w: u64) -> bool {
    w < EXPRESS_BELOW
}

/// Slots taken by a frame with `nargs` args and `len` payload bytes.
///
/// ```
/// use amrq::conduit::ring::frame_slots;
/// assert_eq!(frame_slots(6, 0), 1); // Express
/// assert_eq!(frame_slots(1, 40), 1); // a small payload fits the first line too
/// assert_eq!(frame_slots(8, 0), 2);
/// assert_eq!(frame_slots(0, 4096), 65);
/// ```
#[inline(always)]
pub const fn frame_slots(nargs: usize, len: usize) -> u64 {
    (ARGS_OFFSET + nargs * 8 + len).div_ceil(SLOT_BYTES) as u64
}

/// Byte offset of the payload from the start of a frame's first slot.
///
/// ```
/// use amrq::conduit::ring::payload_offset;
/// assert_eq!(payload_offset(2), 16 + 2 * 8);
/// ```
#[inline(always)]
pub const fn payload_offset(nargs: usize) -> usize {
    ARGS_OFFSET + nargs * 8
}
