//! A bounded single-producer/single-consumer ring of 64-byte slots, placed in memory it
//! does not own (a heap region for the `threads` conduit, a shared mapping for `shm`).
//!
//! One ring per (sender → receiver, channel): the CM-5/Alewife "one NI queue per pair"
//! mapping, whose round trip is that of a raw cache-line ping-pong (a fetch-add shared
//! queue pays a contended atomic per frame).
//! No atomic read-modify-write anywhere on the fast path:
//!
//! - each slot starts with a **sequence word**, written last with Release by the producer
//!   and polled by the consumer (the Paragon/T3D presence flag); a frame that fits one
//!   slot (header + up to 6 u64 args, or fewer args and a few payload bytes) is
//!   StarT-Voyager's *Express* message: one line, published by one store;
//! - larger frames (*Basic*) take consecutive slots: args and payload run on contiguously
//!   from the first slot into the next, so a receiver borrows both in place; a frame
//!   never wraps: the producer pads to the end of the ring first;
//! - the consumer publishes its head in **batches** (every [`Consumer::batch`] slots, or
//!   when it finds the ring empty), and the producer works from a **cached view** of
//!   that head, re-reading it only when the cached view says full;
//! - the producer **prefetches** the slots it will write next for ownership (`prefetchw`).
//!
//! # Layout (offsets from the ring's base, which is 128-byte aligned)
//!
//! ```text
//!   0 ┌──────────────────────────────────────────────┐
//!     │ RingCtl: head, closed (u64 each,             │ own 128-byte line pair
//!     │          consumer → producer)                │
//! 128 ├──────────────────────────────────────────────┤
//!     │ slot 0: seq u64 │ header u64 │ args[0..6]     │ 64 B
//! 192 ├──────────────────────────────────────────────┤
//!     │ slot 1 …                                     │
//!     └──────────────────────────────────────────────┘  128 + 64 × nslots bytes
//!
//!  a frame, from byte 16 of its first slot on, contiguous across its slots:
//!     args[0..nargs] (8 B each), then the payload
//!  (in the 2nd.. slots of a frame these bytes cover the sequence words)
//! ```
//!
//! Positions are 64-bit and only ever compared with wrapping arithmetic; a slot's index is
//! `position & (nslots - 1)`. The frame at position `p` is readable when its first slot's
//! sequence word equals `p + 1`. Invariant: every slot's sequence word holds either the
//! value of a live frame, `q + 1` for some earlier position `q` of that slot, or 0 in a
//! ring never written (a zeroed ring is a ring at position 0) — so a stale value never
//! passes. Payload bytes overwrite the sequence words of continuation
//! slots, so the consumer restores them to `q + 1` before it hands those slots back.
//!
//! The algorithm is generic over [`RingMemory`]: raw mapped bytes in production, loom
//! cells in the loom models (which cannot model raw bytes).

mod consumer;
mod layout;
mod memory;
mod producer;
mod shared;

pub use consumer::{Consumer, ExpressGate, Look, Peeked};
pub use layout::{
    frame_slots, is_express, payload_offset, FrameHeader, RingCtl, Slot, ARGS_OFFSET, CTL_BYTES,
    EXPRESS_ARGS, EXPRESS_BELOW, FLAG_LONG, FLAG_PAD, FLAG_TAG_ON, HEADER_OFFSET, MAX_ARGS,
    MAX_WORDS, SLOT_BYTES, USER_FLAGS,
};
#[cfg(not(amrq_loom))]
pub use memory::RawRing;
pub use memory::RingMemory;
pub use producer::{tail_after, Producer};
pub use shared::{Reservation, SharedProducer};

/// The consumer found something in a ring that the protocol cannot produce.
///
/// ```
/// use amrq::conduit::ring::Corrupt;
/// let e = Corrupt { position: 12, what: "more than 8 args" };
/// assert_eq!(e.to_string(), "corrupt frame at ring position 12: more than 8 args");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt frame at ring position {position}: {what}")]
pub struct Corrupt {
    /// Position of the frame in the ring.
    pub position: u64,
    /// What was wrong.
    pub what: &'static str,
}

/// Largest frame, in slots, a ring of `nslots` slots accepts: with padding to the end of
/// the ring a frame of `k` slots needs up to `2k - 1` free slots.
///
/// ```
/// use amrq::conduit::ring::{frame_slots, max_frame_slots};
/// assert_eq!(max_frame_slots(256), 128);
/// assert!(frame_slots(8, 4096) <= max_frame_slots(256)); // a 4 KiB Medium fits 256 slots
/// ```
pub const fn max_frame_slots(nslots: u64) -> u64 {
    nslots.div_ceil(2)
}

#[cfg(all(test, not(amrq_loom)))]
mod tests;
