//! Own rings ([`PairRings`](crate::conduit::PairRings)): on a host of many ranks, a
//! per-sender channel has at each receiver a few rings that senders take, one each,
//! and one ring that the others share. A sender starts on the shared ring (its frames
//! name it in a hidden word); once it has sent `MOVE_AFTER` frames to that receiver it
//! takes the first free word of the receiver's directory ([`take_free`]), and each of
//! its channels moves at its next send: a marker frame through the shared ring names
//! the own ring, so the receiver, which reads the own ring only from that marker on
//! and only for the sender the directory names ([`taken_by`]), takes every frame in
//! the order sent.
//!
//! ```text
//! receiver r, channel ch:  own 0 │ own 1 │ … │ own K-1 │ tail │ shared
//! directory of r:          word 0 = 1 + sender that took own 0, … (0: free)
//! Tag-On pools of r:       pool 0 │ … │ pool K-1 │ shared pool
//! ```

use super::channels::{shared_push, with_hidden_word, RxChannel, RxRing, Tx, TxRing, FLAG_MOVED};
use super::frame::drop_frame;
use super::{MemConduit, TagOnPool};
use crate::conduit::claims::{take_free, taken_by};
use crate::conduit::ring::{
    ExpressGate, FrameHeader, Peeked, Producer, RawRing, RingMemory, ARGS_OFFSET,
};
use crate::conduit::{Channel, FaultKind, Rank};
use std::cell::Cell;

/// A sender's standing at one receiver of its host where senders share rings until
/// they take an own one: the frames it sent through the shared rings, and the own ring
/// (and Tag-On pool) it took, if any. Its channels move one by one, each at its next
/// send (a marker frame through the shared ring first, so that the receiver reads the
/// own ring only after the frames before it).
pub(super) struct Pair {
    /// Frames sent through the shared rings, up to [`PairRings::MOVE_AFTER`](crate::conduit::PairRings::MOVE_AFTER).
    pub(super) sent: Cell<u32>,
    /// The own ring taken at the receiver, [`Pair::NONE_YET`] or [`Pair::NONE_FREE`].
    pub(super) own: Cell<u32>,
    /// The receiver's directory of own rings.
    pub(super) directory: *const crate::sync::AtomicU64,
    pub(super) own_rings: usize,
    /// The receiver's first Tag-On pool (the others follow it).
    pub(super) pools: TagOnPool,
    /// This sender, as the directory names it (1 + its rank on the host).
    pub(super) claim: u64,
}

impl Pair {
    pub(super) const NONE_YET: u32 = u32::MAX;
    pub(super) const NONE_FREE: u32 = u32::MAX - 1;

    /// Counts a frame sent through a shared ring; at the count that moves a pair,
    /// takes the first free own ring at the receiver, if there is one.
    pub(super) fn sent_one(&self) {
        let sent = self.sent.get().saturating_add(1);
        self.sent.set(sent);
        if sent != crate::conduit::PairRings::MOVE_AFTER || self.own.get() != Self::NONE_YET {
            return;
        }
        // SAFETY: the directory has `own_rings` words inside the region the endpoint's
        // owner keeps alive; atomic only.
        let words = unsafe { std::slice::from_raw_parts(self.directory, self.own_rings) };
        let took = take_free(words, self.claim);
        self.own.set(took.map_or(Self::NONE_FREE, |k| k as u32));
    }

    /// The own ring taken, if any.
    pub(super) fn taken(&self) -> Option<usize> {
        let k = self.own.get();
        (k < Self::NONE_FREE).then_some(k as usize)
    }

    /// Tag-On pool `k` of the receiver.
    pub(super) fn pool(&self, k: usize) -> TagOnPool {
        debug_assert!(k <= self.own_rings);
        // SAFETY: the receiver's `own_rings + 1` pools lie end to end in the region.
        unsafe { self.pools.after(k) }
    }
}

/// The shared ring of a channel with own rings: the senders its frames may name (in
/// the numbering of its host), and the receiver's directory of own rings.
pub(super) struct OwnClaims {
    pub(super) senders: Box<[bool]>,
    pub(super) directory: *const crate::sync::AtomicU64,
    pub(super) own_rings: usize,
}

impl OwnClaims {
    /// Whether `named` (host numbering) took own ring `k`.
    pub(super) fn took(&self, named: usize, k: usize) -> bool {
        if k >= self.own_rings || named >= self.senders.len() {
            return false;
        }
        // SAFETY: the directory has `own_rings` words inside the region the endpoint's
        // owner keeps alive; atomic only.
        taken_by(unsafe { &*self.directory.add(k) }, named as u64 + 1)
    }
}

impl TxRing {
    /// [`TxRing::push`] through the shared ring of a channel with own rings: moves to
    /// the own ring first if the pair took one ([`TxRing::settle`]).
    #[inline(never)]
    pub(super) fn sharing_push(&self, header: FrameHeader, args: &[u64], payload: &[u8]) -> bool {
        if self.settle() {
            return self.push(header, args, payload);
        }
        // SAFETY: only ring code runs while the state is borrowed.
        let Tx::Sharing {
            prod,
            tail,
            me,
            pair,
            ..
        } = (unsafe { self.prod.get() })
        else {
            return false; // `settle` leaves a ring it did not move as it was
        };
        let words = with_hidden_word(*me, args);
        let pair = *pair;
        let pushed = shared_push(self.ring_now(), (prod, *tail), header, words, payload);
        if pushed {
            // SAFETY: the endpoint that holds this ring holds its pairs, alive as long.
            unsafe { &*pair }.sent_one();
        }
        pushed
    }

    /// Moves a ring of [`Tx::Sharing`] to the own ring its pair took, if it took one:
    /// a marker frame through the shared ring names it, so that the receiver reads the
    /// own ring only after the frames sent before. True if the ring moved; false if
    /// there is nothing to move to or the shared ring has no room for the marker (the
    /// frame then goes through the shared ring, and the next send tries again).
    pub(super) fn settle(&self) -> bool {
        // SAFETY: only ring code runs while the state is borrowed.
        let Tx::Sharing {
            prod,
            tail,
            me,
            pair,
            own_rings,
        } = (unsafe { self.prod.get() })
        else {
            return false;
        };
        // SAFETY: as in `sharing_push`.
        let pair = unsafe { &**pair };
        let Some(k) = pair.taken() else {
            return false;
        };
        let (words, n) = with_hidden_word(*me, &[k as u64]);
        let marker = FrameHeader {
            flags: FLAG_MOVED,
            ..FrameHeader::default()
        };
        let ring = self.ring.get();
        // SAFETY: the tail word is inside the region the owner keeps alive.
        if !prod.try_push(&ring, unsafe { &**tail }, marker, &words[..n], b"") {
            return false;
        }
        let slots = ring.nslots();
        // SAFETY: own ring `k` of this channel at the receiver follows its first one,
        // inside the region; initialised, and written by this sender alone (its claim).
        let own = unsafe { RawRing::new(own_rings.add(k * RawRing::bytes(slots)), slots) };
        let pool = pair.pool(k);
        // SAFETY: as above; the borrow above has ended.
        *unsafe { self.prod.get() } = Tx::Own(Producer::new(slots, 0));
        self.ring.set(own);
        self.own_args_below
            .set(if self.permitted { self.max_args + 1 } else { 0 });
        self.pool.set(pool);
        self.pool_cursor.set(0);
        true
    }
}

impl MemConduit {
    /// Frame `p` of ring `s` of `chan` (channel `ch`) from `source` has no payload to
    /// hand out (`bad` says why): a sender's move to an own ring, or a frame to drop.
    #[cold]
    #[inline(never)]
    pub(super) fn undelivered(
        &self,
        chan: &RxChannel,
        (s, ch): (usize, Channel),
        source: Rank,
        p: &Peeked,
        bad: FaultKind,
    ) {
        let r = &chan.rings[s];
        if p.header.flags & FLAG_MOVED == FLAG_MOVED && r.hidden {
            self.open_own_ring(chan, (s, ch), source, p);
        } else {
            drop_frame(&self.faults, (chan, ch), r, p, (Some(source), bad));
        }
    }

    /// Frame `p` of the shared ring `s` of `chan` (channel `ch`) says that its sender
    /// `src` (in the channel's numbering) moves to the own ring its first arg names:
    /// that ring is read from now on, as `src`'s, if the receiver's directory says
    /// `src` took it and nobody moved to it before; otherwise the frame is dropped as
    /// one a correct sender never sends.
    #[cold]
    fn open_own_ring(&self, chan: &RxChannel, (s, ch): (usize, Channel), src: Rank, p: &Peeked) {
        let r = &chan.rings[s];
        // SAFETY: the frame has its hidden word and one arg (checked below before use:
        // `nargs` 2); it is ours until released.
        let word = |i: usize| unsafe { r.slot_of(p).add(ARGS_OFFSET).cast::<u64>().add(i).read() };
        let target = match (&r.own_claims, p.header.nargs) {
            (Some(claims), 2) => {
                // Read once: the sender named and the ring it took must be what the
                // frame said when its sender was checked (`src`), and no more.
                let named = usize::try_from(word(0)).ok();
                let same = named.filter(|&n| match &r.hidden_ranks {
                    Some(ranks) => ranks.get(n) == Some(&src),
                    None => n == src,
                });
                let k = usize::try_from(word(1)).ok();
                let fresh = |o: &&RxRing| o.own_index == k && o.source.get() == RxRing::NO_SOURCE;
                match (same, k) {
                    (Some(named), Some(k)) if claims.took(named, k) => {
                        chan.rings.iter().find(fresh)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let Some(own) = target else {
            drop_frame(
                &self.faults,
                (chan, ch),
                r,
                p,
                (Some(src), FaultKind::NotPermitted),
            );
            return;
        };
        own.source.set(src);
        own.permitted.set(true);
        own.gate.set(ExpressGate::OPEN);
        own.shut.set(false);
        r.cons.with(|c| c.release(&r.ring, p));
    }
}
