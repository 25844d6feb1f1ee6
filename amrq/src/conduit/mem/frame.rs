//! A received frame, in place in its ring ([`MemFrame`]), and the checks a frame passes
//! before it is handed out.

use super::channels::{RxChannel, RxRing};
use super::TagOnPool;
use crate::conduit::ring::{ExpressGate, Peeked, ARGS_OFFSET, FLAG_LONG, FLAG_TAG_ON, USER_FLAGS};
use crate::conduit::{
    Channel, Fault, FaultKind, FaultLog, PayloadView, Rank, ReceivedFrame, TagOnData,
};

/// The (index, length) inline payload of a Long or Tag-On frame, if it is 16 bytes.
pub(super) fn inline_pair(inline: *const u8, p: &Peeked) -> Option<(usize, usize)> {
    if p.header.len != 16 {
        return None;
    }
    // SAFETY: 16 inline payload bytes are in the frame (checked above).
    unsafe {
        Some((
            inline.cast::<u64>().read_unaligned() as usize,
            inline.add(8).cast::<u64>().read_unaligned() as usize,
        ))
    }
}

/// Where a Tag-On frame's block is, checked against the pool.
#[cold]
pub(super) fn tag_on_payload(
    pool: &TagOnPool,
    inline: *const u8,
    p: &Peeked,
) -> Result<(*const u8, usize), FaultKind> {
    inline_pair(inline, p)
        .filter(|&(_, len)| len <= pool.bytes())
        .and_then(|(i, len)| Some((pool.block(i)?.cast_const(), len)))
        .ok_or(FaultKind::OutsidePool)
}

/// The hidden first arg word of frame `p` of ring `r`, if it has one.
#[inline(always)]
pub(super) fn hidden_word(r: &RxRing, p: &Peeked) -> Option<u64> {
    if p.header.nargs == 0 {
        return None;
    }
    let base = r.slot_of(p);
    // SAFETY: the consumer checked that the frame and its args lie in the ring, and
    // the frame is ours until released; args are 8-byte aligned in a slot.
    Some(unsafe { base.add(ARGS_OFFSET).cast::<u64>().read() })
}

/// Releases frame `p` of ring `r` of channel `ch` undelivered, counts it in `chan`'s
/// `dropped` and records it against `source` (see [`crate::conduit::Faults`]).
#[cold]
pub(super) fn drop_frame(
    faults: &FaultLog,
    (chan, ch): (&RxChannel, Channel),
    r: &RxRing,
    p: &Peeked,
    (source, kind): (Option<Rank>, FaultKind),
) {
    r.cons.with(|c| c.release(&r.ring, p));
    chan.dropped.set(chan.dropped.get() + 1);
    faults.record(Fault {
        source,
        channel: ch,
        kind,
    });
}

/// Closes ring `s` of channel `chan` (`ch`), whose frame boundaries are lost: it is
/// not read again, its sender learns it when it finds the ring full, and the fault is
/// recorded against that sender.
#[cold]
pub(super) fn close_ring(
    faults: &FaultLog,
    chan: &RxChannel,
    (s, ch): (usize, Channel),
    detail: crate::conduit::ring::Corrupt,
) {
    let r = &chan.rings[s];
    r.shut.set(true);
    r.gate.set(ExpressGate::SHUT);
    r.ring.close();
    faults.record(Fault {
        source: chan.sender(s),
        channel: ch,
        kind: FaultKind::Corrupt(detail),
    });
}

/// A frame in place in a [`MemConduit`](super::MemConduit) ring: args and payload are read where the
/// sender wrote them.
///
/// ```
/// use amrq::conduit::{mem::MemFrame, threads, Conduit, Message, ReceivedFrame};
/// let eps = threads::endpoints(1, &[16]).unwrap();
/// eps[0].try_send(0, 0, &Message { tag: 2, flags: 0, args: &[8], payload: b"in place" }).unwrap();
/// let f: MemFrame<'_> = eps[0].peek(0).unwrap().unwrap();
/// assert_eq!(f.payload(), b"in place"); // borrowed from the ring
/// f.release();
/// ```
pub struct MemFrame<'a> {
    pub(super) chan: &'a RxChannel,
    pub(super) ring: &'a RxRing,
    pub(super) source: Rank,
    /// The frame's user args (after the hidden word, if the ring has one) and how many.
    pub(super) args: (*const u64, usize),
    /// Its payload: in the ring, or for a Long frame in this rank's segment.
    pub(super) payload: (*const u8, usize),
    pub(super) peeked: Peeked,
    /// The index of its ring in the channel: a frame taken from it counts toward that
    /// ring's turn when it is released, not when it is looked at, so that looking
    /// without taking leaves the queue's head where it was.
    pub(super) at: usize,
}

impl std::fmt::Debug for MemFrame<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemFrame")
            .field("source", &self.source)
            .field("header", &self.peeked.header)
            .field("args", &self.args())
            .finish_non_exhaustive()
    }
}

impl<'a> MemFrame<'a> {
    /// The frame `p` of ring `r` (index `at` in `chan`), from `source`, now out of
    /// channel `chan`, with its checked payload.
    #[inline(always)]
    pub(super) fn out(
        chan: &'a RxChannel,
        (r, at): (&'a RxRing, usize),
        source: Rank,
        p: Peeked,
        payload: (*const u8, usize),
    ) -> Self {
        chan.busy.set(true);
        let base = r.slot_of(&p);
        let hidden = usize::from(r.hidden);
        // SAFETY: the consumer checked that the frame's args lie inside the ring, and
        // `take` that a hidden-word ring's frame has its hidden word.
        let args = unsafe { base.add(ARGS_OFFSET).cast::<u64>().add(hidden) };
        Self {
            chan,
            ring: r,
            source,
            args: (args, usize::from(p.header.nargs) - hidden),
            payload,
            peeked: p,
            at,
        }
    }
}

impl<'a> MemFrame<'a> {
    /// The Express frame `p` at the head of plain ring `s` of `chan` (its ring `r`), whose slot is at
    /// `base`, handed out by `drain` (which marks the channel once for all its frames).
    #[inline(always)]
    pub(super) fn express(
        chan: &'a RxChannel,
        r: &'a RxRing,
        s: Rank,
        p: Peeked,
        base: *const u8,
    ) -> Self {
        // SAFETY: an Express frame's args start inside its slot.
        let args = unsafe { base.add(ARGS_OFFSET) };
        Self {
            chan,
            ring: r,
            // The ring's sender (an own ring's index, or a merged channel's, is not).
            source: r.source.get(),
            args: (args.cast(), usize::from(p.header.nargs)),
            payload: (args, 0), // none (any address in the frame will do)
            peeked: p,
            at: s,
        }
    }

    /// Hands the frame's slots back to the producer, leaving the channel's mark alone
    /// (`drain`, which does not drop the frame).
    #[inline(always)]
    pub(super) fn release_slots(&self) {
        self.ring
            .cons
            .with(|c| c.release(&self.ring.ring, &self.peeked));
    }
}

impl<'a> ReceivedFrame<'a> for MemFrame<'a> {
    #[inline(always)]
    fn source(&self) -> Rank {
        self.source
    }
    #[inline(always)]
    fn tag(&self) -> u16 {
        self.peeked.header.tag
    }
    #[inline(always)]
    fn flags(&self) -> u8 {
        self.peeked.header.flags & USER_FLAGS
    }
    #[inline(always)]
    fn is_long(&self) -> bool {
        self.peeked.header.flags & FLAG_LONG != 0
    }
    #[inline(always)]
    fn is_tag_on(&self) -> bool {
        self.peeked.header.flags & FLAG_TAG_ON != 0
    }
    #[inline(always)]
    fn args(&self) -> &[u64] {
        // SAFETY: the consumer checked that there are at most 8 args (after the
        // hidden word, which `args` skips, where the ring has one: `take` checked it is
        // there) and that the frame lies inside the ring; its slots stay ours (the producer cannot reuse them) until `release`,
        // which consumes `self` and so ends this borrow. The args start 16 bytes into a
        // 64-byte aligned slot: aligned for u64.
        unsafe { std::slice::from_raw_parts(self.args.0, self.args.1) }
    }
    #[inline(always)]
    fn payload(&self) -> PayloadView<'_> {
        // SAFETY: `payload_of` checked the range: inside the frame or its Tag-On block
        // (which stay ours, unwritten, until `release` consumes `self`), or for a Long
        // frame inside this rank's segment, mapped as long as the conduit, where peers
        // may write meanwhile: shared.
        unsafe { PayloadView::from_raw(self.payload.0, self.payload.1, self.is_long()) }
    }
    #[inline(always)]
    fn release(self) {
        if self.is_tag_on() {
            // A Tag-On block not kept is freed with its frame (the handle's drop).
            drop(self.keep());
            return;
        }
        self.chan.took(self.at);
        self.release_slots();
        // `self` drops here and clears the channel's outstanding mark.
    }
    #[inline(always)]
    fn keep(self) -> Option<TagOnData<'a>> {
        self.chan.took(self.at);
        // Read what the frame says before handing its slots back: once the head is
        // published the producer may overwrite them.
        let index = if self.is_tag_on() {
            // SAFETY: the payload offset lies inside the frame, which is ours until the
            // release below.
            let inline = unsafe {
                self.ring
                    .slot_of(&self.peeked)
                    .add(self.peeked.payload_offset())
            };
            // `tag_on_payload` checked the index when the frame was taken.
            inline_pair(inline, &self.peeked).map(|(i, _)| i)
        } else {
            None
        };
        self.ring
            .cons
            .with(|c| c.release(&self.ring.ring, &self.peeked));
        let index = index?;
        // SAFETY: the block (not the frame) stays ours until its flag is cleared by the
        // handle's drop; the pool lives as long as the conduit this frame borrows.
        let data = unsafe { std::slice::from_raw_parts(self.payload.0, self.payload.1) };
        // The ring's pool (an own ring's), the sender's by its rank, or (a frame whose
        // sender was renumbered on its way out of a half of a job across hosts) the
        // pool that holds the block.
        let block = self.payload.0.cast_mut();
        let chan = self.chan;
        let pool = match self.ring.pool_for(chan, self.source) {
            Some(p) if p.block(index) == Some(block) => p,
            _ => chan.pools.iter().find(|p| p.block(index) == Some(block))?,
        };
        Some(TagOnData::new(data, pool.flag(index)?))
        // `self` drops here and clears the channel's outstanding mark.
    }
}

impl MemFrame<'_> {
    /// The hidden first arg word of a frame of a hidden-word ring (checked present
    /// when the frame was taken); 0 for other frames.
    pub(super) fn hidden_word(&self) -> u64 {
        if !self.ring.hidden {
            return 0;
        }
        // SAFETY: as in `args`: the frame is ours until `release`, and `take` checked
        // that it has its hidden word.
        unsafe {
            self.ring
                .slot_of(&self.peeked)
                .add(ARGS_OFFSET)
                .cast::<u64>()
                .read()
        }
    }
}

impl Drop for MemFrame<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.chan.busy.set(false);
    }
}
