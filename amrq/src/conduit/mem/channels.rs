//! The per-ring state of an endpoint: the send side of each ring this rank writes
//! ([`TxRing`]), the receive side of each ring it reads ([`RxRing`]), grouped per
//! channel ([`RxChannel`]) and scanned round-robin.

use super::own_rings::{OwnClaims, Pair};
use super::{Doorbell, TagOnPool};
use crate::conduit::ring::{
    Consumer, ExpressGate, FrameHeader, Peeked, Producer, RawRing, RingMemory, SharedProducer,
    FLAG_LONG, FLAG_TAG_ON, MAX_ARGS, USER_FLAGS,
};
use crate::conduit::{doorbell, Channel, ConduitError, Message, Rank};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

/// State of one end of a ring, private to the endpoint's thread.
///
/// `with` hands out `&mut T` for the length of a closure that runs only ring code (no
/// user code, no call back into the endpoint), so two `&mut` never coexist. Cheaper than
/// `Cell<T>`, whose get/set copy the whole state on every message.
pub(super) struct Local<T>(UnsafeCell<T>);

impl<T> Local<T> {
    pub(super) fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    #[inline(always)]
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: every closure passed here (all in this module) runs ring code only
        // and cannot reach this cell again: see `get`.
        f(unsafe { self.get() })
    }

    /// Where the state lives, for an [`ExpressLane`](super::ExpressLane), whose writes
    /// through it take turns with `with` and `get` on this thread (never during one).
    pub(super) fn as_ptr(&self) -> *mut T {
        self.0.get()
    }

    /// The state, for the hot send path, where a closure passed to `with` would not
    /// always be inlined.
    ///
    /// # Safety
    /// The caller drops the reference before anything else can reach this cell (it
    /// runs ring code only, no user code, no call back into the endpoint).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn get(&self) -> &mut T {
        // SAFETY: `Local` is !Sync, so only this thread reaches it, and the caller
        // keeps the `&mut` unique while it lives.
        unsafe { &mut *self.0.get() }
    }
}

/// What [`TxRing::armed_word`] points to before the short test may be used: every bit
/// set, so that a channel that rings the doorbell takes the full handshake.
pub(super) static CHECK_SLOWLY: AtomicU64 = AtomicU64::new(u64::MAX);

// Each rank's private ring states are allocated by the thread that builds the job, next
// to other ranks' states: align them to whole line pairs so that no two ranks' states
// share a cache line (false sharing doubled the round trip before this).
#[repr(align(128))]
pub(super) struct TxRing {
    /// The ring frames go into (changes once, when a sender moves to an own ring).
    pub(super) ring: Cell<RawRing>,
    pub(super) prod: Local<Tx>,
    /// Most args a frame may carry (one less on a shared channel).
    pub(super) max_args: usize,
    /// This rank may send into the channel (the logical destination table).
    pub(super) permitted: bool,
    /// `max_args + 1` if `permitted` and the ring is this rank's own (`Tx::Own`), else
    /// 0: a send with fewer args needs no other check of the ring (see `try_send`).
    pub(super) own_args_below: Cell<usize>,
    /// The channel's doorbell bit if its frames ring the receiver's doorbell, else 0.
    pub(super) notify_bit: u64,
    /// The receiver's doorbell.
    pub(super) doorbell: *const Doorbell,
    /// `notify_bit` if this process is a target of the receivers' `membarrier`, else 0:
    /// it leaves out its fence if the receiver arms the bit with one (the doorbell's
    /// `heavy` bits).
    pub(super) light_bit: u64,
    /// The word a send tests with `notify_bit` after publishing a frame: the receiver's
    /// `armed` word once a send has seen `light_bit` among the receiver's `heavy` bits
    /// (which it sets once, at its setup, and never clears), so that the test needs no
    /// fence and no other load; until then, or where that never comes, [`CHECK_SLOWLY`],
    /// whose set bits send every ringing channel's test to the full handshake.
    pub(super) armed_word: Cell<*const AtomicU64>,
    /// The receiver's Tag-On pool this sender's blocks go into (its own, or the one
    /// the senders without an own ring share), and where the next claim looks.
    pub(super) pool: Cell<TagOnPool>,
    pub(super) pool_cursor: Cell<usize>,
}

/// How a sender reserves room in a ring.
pub(super) enum Tx {
    /// The ring is this sender's alone.
    Own(Producer),
    /// Every sender to the receiver shares the ring and its tail word; frames start
    /// with a hidden word naming the sender.
    Shared {
        prod: SharedProducer,
        tail: *const crate::sync::AtomicU64,
        me: u64,
    },
    /// The ring of a channel with own rings that the senders without one share at the
    /// receiver (frames start with a hidden word naming the sender), until this sender
    /// has taken an own ring there ([`Pair`]) and moves to it.
    Sharing {
        prod: SharedProducer,
        tail: *const crate::sync::AtomicU64,
        me: u64,
        pair: *const Pair,
        /// The receiver's first own ring of this channel (the others follow it).
        own_rings: std::ptr::NonNull<u8>,
    },
    /// A front's ring to a rank of a job across hosts (`across.rs`): no ring, the
    /// frame goes to the cluster at once.
    Network {
        dest: Rank,
        ch: Channel,
        across: *const super::across::Across,
    },
}

#[repr(align(128))]
pub(super) struct RxRing {
    pub(super) ring: RawRing,
    pub(super) cons: Local<Consumer>,
    /// Not read: closed as corrupt, or an own ring no sender has moved to yet.
    pub(super) shut: Cell<bool>,
    /// The sender of a ring of one sender (an own ring: once a sender moved to it);
    /// [`RxRing::NO_SOURCE`] on a ring whose frames name their sender.
    pub(super) source: Cell<Rank>,
    /// The Tag-On pool of this ring's frames; `None`: the sender's in the channel's
    /// `pools`.
    pub(super) pool: Option<TagOnPool>,
    /// Of an own ring: its index at the receiver.
    pub(super) own_index: Option<usize>,
    /// Of the shared ring of a channel with own rings: what checks the senders its
    /// frames name and the own rings they move to.
    pub(super) own_claims: Option<Box<OwnClaims>>,
    /// The sender may send into the channel; frames from one that may not are dropped.
    /// (A shared ring's frames are checked by the sender they name.)
    pub(super) permitted: Cell<bool>,
    /// Each frame's first arg word is the conduit's, not the user's: it names the
    /// sender on a shared ring, the channel on the interrupt channel's rings.
    pub(super) hidden: bool,
    /// The job ranks of the senders a shared ring's hidden words name, where they name
    /// them in another numbering: this host's ranks, in a channel of a job across
    /// hosts (`RxChannel::across`); `None`: the hidden word is the job rank.
    pub(super) hidden_ranks: Option<std::sync::Arc<[Rank]>>,
    /// The ring of a shared channel received with a per-sender one
    /// ([`ChannelSpec::received_with`](crate::conduit::ChannelSpec::received_with)):
    /// which senders its hidden words may name. Empty for every other ring.
    pub(super) joined_senders: Box<[bool]>,
    /// A joined ring's frames taken, by the sender they named (in its numbering, as
    /// `joined_senders`).
    pub(super) joined_taken: Box<[Cell<u64>]>,
    /// Open while the ring is plain — `permitted`, not `hidden` and not `shut`: an
    /// Express frame is handed out as it is — else shut. The look's one compare of the
    /// header word tells both.
    pub(super) gate: Cell<ExpressGate>,
}

#[repr(align(128))]
pub(super) struct RxChannel {
    pub(super) rings: Box<[RxRing]>,
    /// The sender whose ring is looked at first.
    pub(super) cursor: Cell<usize>,
    /// Frames taken in a row from the cursor's ring.
    pub(super) burst: Cell<u32>,
    /// No drain may take a frame now: one of the channel's frames is out, or it has no
    /// rings (its receive side moved). One test where a drain starts, not two.
    pub(super) busy: Cell<bool>,
    /// Frames dropped because their sender may not send here.
    pub(super) dropped: Cell<u64>,
    /// The channel's receive side was moved to the progress thread's view.
    pub(super) moved: bool,
    /// Of a shared channel (one ring): whether each rank may send into it.
    pub(super) shared_senders: Box<[bool]>,
    /// The Tag-On pool of each sender's blocks where its ring names none (its own, or
    /// the one the senders without an own ring share).
    pub(super) pools: Box<[TagOnPool]>,
}

/// [`TxRing::push`] on a shared ring: out of line, so that the per-pair path stays
/// small enough to inline.
#[inline(never)]
pub(super) fn shared_push(
    ring: &RawRing,
    (prod, tail): (&mut SharedProducer, *const crate::sync::AtomicU64),
    header: FrameHeader,
    (words, n): ([u64; MAX_ARGS + 1], usize),
    payload: &[u8],
) -> bool {
    // SAFETY: the tail word is inside the region the owner keeps alive.
    let tail = unsafe { &*tail };
    prod.try_push(ring, tail, header, &words[..n], payload)
}

/// The flags of a frame of the shared ring of a channel with own rings that moves its
/// sender to the own ring its first word names: Long and Tag-On at once, as no other
/// frame is flagged.
pub(super) const FLAG_MOVED: u8 = FLAG_LONG | FLAG_TAG_ON;

/// The arg words of a hidden-word ring: `word` (the sender's rank on a shared ring, the
/// channel on the interrupt channel), then `args` (at most `MAX_ARGS`); and how many.
#[inline(always)]
pub(super) fn with_hidden_word(me: u64, args: &[u64]) -> ([u64; MAX_ARGS + 1], usize) {
    let mut words = [0u64; MAX_ARGS + 1];
    words[0] = me;
    words[1..=args.len()].copy_from_slice(args);
    (words, args.len() + 1)
}

impl TxRing {
    /// The ring frames go into, in place (a copy out of the cell cost the send path
    /// a store and a load).
    #[inline(always)]
    pub(super) fn ring_now(&self) -> &RawRing {
        // SAFETY: the cell is written only by `settle`, on this thread (`TxRing` is
        // not `Sync`), which holds no reference from here while it writes, and no
        // reference from here outlives the push it was taken for.
        unsafe { &*self.ring.as_ptr() }
    }

    /// Writes and publishes one frame; `false`, nothing written, if the ring lacks room.
    /// The caller checked `args.len() <= self.max_args`.
    #[inline(always)]
    pub(super) fn push(&self, header: FrameHeader, args: &[u64], payload: &[u8]) -> bool {
        // SAFETY: only ring code runs while the state is borrowed.
        if let Tx::Own(p) = unsafe { self.prod.get() } {
            return p.try_push(self.ring_now(), header, args, payload);
        }
        self.push_through_others(header, args, payload)
    }

    /// [`TxRing::push`] into a ring this sender shares, or through the network: out of
    /// line, so that the push into its own ring stays small.
    #[inline(never)]
    fn push_through_others(&self, header: FrameHeader, args: &[u64], payload: &[u8]) -> bool {
        // SAFETY: only ring code runs while the state is borrowed.
        match unsafe { self.prod.get() } {
            Tx::Own(p) => p.try_push(self.ring_now(), header, args, payload),
            Tx::Shared { prod, tail, me } => {
                // The words by value: a slice would keep the caller's args in memory.
                let words = with_hidden_word(*me, args);
                shared_push(self.ring_now(), (prod, *tail), header, words, payload)
            }
            Tx::Sharing { .. } => self.sharing_push(header, args, payload),
            Tx::Network { dest, ch, across } => {
                let mut words = [0u64; MAX_ARGS];
                words[..args.len()].copy_from_slice(args);
                // SAFETY: the front that holds this ring holds the `Across` too
                // (`AcrossOwner`), alive as long as it is.
                let across = unsafe { &**across };
                across.send(*dest, *ch, header, (words, args.len()), payload)
            }
        }
    }

    /// Pushes an Express frame into this rank's own ring if the producer's cached view
    /// of the head shows room (see [`Producer::try_push_express`]); `false` (nothing
    /// written) otherwise. Only for a ring whose `own_args_below` is not 0.
    #[inline(always)]
    pub(super) fn push_express(&self, header: FrameHeader, args: &[u64]) -> bool {
        debug_assert!(self.own_args_below.get() != 0);
        // SAFETY: only ring code runs while the state is borrowed.
        let Tx::Own(p) = (unsafe { self.prod.get() }) else {
            // SAFETY: `own_args_below` is not 0 only on a ring of `Tx::Own`: built so
            // (see `MemConduit::new`), or moved to an own ring (`settle` sets it after
            // the `Tx`), and an `Own` ring's `Tx` never changes again.
            unsafe { std::hint::unreachable_unchecked() }
        };
        p.try_push_express(self.ring_now(), header, args)
    }

    /// Publishes a frame of `msg`'s tag and args whose 16-byte payload is the pair
    /// `(a, b)` (a Long frame's offset and length, a Tag-On frame's block and length),
    /// with the conduit flag `flag`, after `write_data` has put in place the data the
    /// frame names. `false` if the ring lacks room: then `write_data` has not run.
    pub(super) fn push_pair(
        &self,
        msg: &Message<'_>,
        flag: u8,
        (a, b): (usize, usize),
        write_data: impl FnOnce(),
    ) -> bool {
        let mut inline = [0u8; 16];
        inline[..8].copy_from_slice(&(a as u64).to_ne_bytes());
        inline[8..].copy_from_slice(&(b as u64).to_ne_bytes());
        let header = FrameHeader {
            tag: msg.tag,
            flags: (msg.flags & USER_FLAGS) | flag,
            ..FrameHeader::default()
        };
        // The Release store of the frame's sequence word also publishes the data the
        // caller wrote (segment bytes, pool block) before.
        let args = msg.args;
        let ring = self.ring.get();
        // Whether it was sent, and the pair whose count it adds to (through a ring of
        // `Tx::Sharing`).
        let (sent, pair) = self.prod.with(|tx| match tx {
            Tx::Own(p) => {
                let room = p.has_room_for(&ring, args.len(), inline.len());
                if room {
                    write_data();
                    p.try_push(&ring, header, args, &inline);
                }
                (room, None)
            }
            Tx::Network { .. } => {
                unreachable!("a front sends Long and Tag-On frames through its cluster")
            }
            Tx::Shared { prod, tail, me } | Tx::Sharing { prod, tail, me, .. } => {
                let (words, n) = with_hidden_word(*me, args);
                // SAFETY: the tail word is inside the region the owner keeps alive.
                let tail = unsafe { &**tail };
                let sent = match prod.try_reserve(&ring, tail, n, inline.len()) {
                    Some(slots) => {
                        write_data();
                        slots.publish(&ring, header, &words[..n], &inline);
                        true
                    }
                    None => false,
                };
                let pair = match tx {
                    Tx::Sharing { pair, .. } => Some(*pair),
                    _ => None,
                };
                (sent, pair)
            }
        });
        if let (true, Some(pair)) = (sent, pair) {
            // SAFETY: the endpoint that holds this ring holds its pairs, alive as long.
            unsafe { &*pair }.sent_one();
        }
        if sent {
            self.ring_doorbell();
        }
        sent
    }

    /// Why a frame to `dest` on channel `ch` found no room: `Busy`, or the receiver
    /// closed this ring ([`ConduitError::ChannelClosed`]), so room will never come.
    #[cold]
    #[inline(never)]
    pub(super) fn no_room(&self, dest: Rank, ch: Channel) -> ConduitError {
        // SAFETY: only ring code runs while the state is borrowed.
        if let Tx::Network { across, .. } = unsafe { self.prod.get() } {
            // SAFETY: as in `push`.
            return unsafe { &**across }.refusal();
        }
        if self.ring.get().is_closed() {
            ConduitError::ChannelClosed {
                rank: dest,
                channel: ch,
            }
        } else {
            ConduitError::Busy
        }
    }

    /// After publishing a frame: if the channel rings the receiver's doorbell and the
    /// receiver has armed it, set its bit in the receiver's summary. One load of
    /// [`TxRing::armed_word`] and one test; the full handshake only when that test
    /// says so.
    #[inline(always)]
    pub(super) fn ring_doorbell(&self) {
        // ORDERING: the frame's Release store (just done) stays before the load below in
        // program order. Where `armed_word` is the receiver's `armed`, the receiver arms
        // with `membarrier` and this process is one of its targets: the light handshake
        // of `doorbell::is_armed` (the same fence and load; the loom model runs that
        // one), which pairs with the receiver's `arm`. Anywhere else the test only sends
        // a ringing channel to the full handshake.
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `armed_word` is CHECK_SLOWLY (a static) or the receiver's doorbell's
        // word, inside the region the owner keeps alive; atomic only.
        let armed = unsafe { &*self.armed_word.get() }.load(Ordering::Relaxed);
        if armed & self.notify_bit != 0 {
            self.ring_doorbell_fully();
        }
    }

    /// [`TxRing::ring_doorbell`]'s full handshake, out of line: reads the receiver's
    /// `heavy` bits (and keeps its `armed` word for the short test once this channel's
    /// is there), fences if the receiver does not, and rings if it armed the channel.
    #[inline(never)]
    fn ring_doorbell_fully(&self) {
        // SAFETY: the doorbell is inside the region the owner keeps alive; atomic only.
        let d = unsafe { &*self.doorbell };
        let light = d.heavy.load(Ordering::Relaxed) & self.light_bit != 0;
        if light {
            self.armed_word.set(&d.armed);
        }
        if doorbell::is_armed(&d.armed, self.notify_bit, light) {
            self.ring_armed_doorbell();
        }
    }

    /// The rest of [`TxRing::ring_doorbell`] when the receiver has armed the channel,
    /// out of line: the send stays free of calls and of the registers they need.
    #[cold]
    #[inline(never)]
    fn ring_armed_doorbell(&self) {
        // SAFETY: as in `ring_doorbell`.
        let d = unsafe { &*self.doorbell };
        if doorbell::ring_armed(&d.summary, &d.sleepers, self.notify_bit) {
            // ORDERING: Release pairs with the sleeper's Acquire load of `wake` before
            // it sleeps; the futex wake ends its sleep.
            d.wake.fetch_add(1, Ordering::Release);
            crate::util::futex::wake_all(&d.wake);
        }
    }
}

impl RxRing {
    /// [`RxRing::source`] of a ring whose frames name their sender, or of an own ring
    /// nobody moved to yet.
    pub(super) const NO_SOURCE: Rank = Rank::MAX;

    /// A frame is readable and the ring is not known to be corrupt.
    #[inline(always)]
    pub(super) fn ready(&self) -> bool {
        self.cons.with(|c| c.ready(&self.ring)) && !self.shut.get()
    }

    /// Nothing readable and nothing to publish (see [`Consumer::quiet`]).
    #[inline(always)]
    pub(super) fn quiet(&self) -> bool {
        self.cons.with(|c| c.quiet(&self.ring))
    }

    /// Publishes the head if slots were read since (see [`Consumer::publish_if_behind`]).
    #[inline(always)]
    pub(super) fn publish_if_behind(&self) {
        self.cons.with(|c| c.publish_if_behind(&self.ring));
    }

    /// The Tag-On pool of this ring's frames from `source`: the ring's own (an own
    /// ring's), else the one `chan` keeps for that sender.
    #[inline(always)]
    pub(super) fn pool_for<'a>(
        &'a self,
        chan: &'a RxChannel,
        source: Rank,
    ) -> Option<&'a TagOnPool> {
        self.pool.as_ref().or_else(|| chan.pools.get(source))
    }

    /// The first slot of frame `p` of this ring.
    #[inline(always)]
    pub(super) fn slot_of(&self, p: &Peeked) -> *const u8 {
        self.ring.slot_ptr(p.index(self.ring.nslots()))
    }
}

impl RxChannel {
    /// A drain would take nothing and change nothing: no frame out, and every ring
    /// (at least one) [`RxRing::quiet`]. (A moved channel has no rings: its drain
    /// reports the move.)
    #[inline(always)]
    pub(super) fn quiet(&self) -> bool {
        !self.busy.get() && self.rings.iter().all(RxRing::quiet)
    }

    /// One channel of a rank of a job across hosts, in the job's numbering, made of the
    /// channel of the same queue of each half: `here`, this host's ranks (its ring `i`
    /// from job rank `local_ranks[i]`, from shared memory) and `there`, every job rank's
    /// ring (filled by the network for the ranks of other hosts). A per-sender channel
    /// takes each sender's ring from the half that carries its frames; a shared channel
    /// has both halves' rings, the first naming its senders by host rank.
    pub(super) fn across(here: Self, there: Self, local_ranks: &[Rank]) -> Self {
        let ranks = there.pools.len();
        let mut local_of = vec![None; ranks];
        for (i, &r) in local_ranks.iter().enumerate() {
            local_of[r] = Some(i);
        }
        let mut near: Vec<Option<RxRing>> = Vec::from(here.rings).into_iter().map(Some).collect();
        let mut far: Vec<Option<RxRing>> = Vec::from(there.rings).into_iter().map(Some).collect();
        let shared = !there.shared_senders.is_empty();
        // This host's half with own rings: its rings are not one per sender.
        let owned = near
            .iter()
            .flatten()
            .any(|r| r.own_index.is_some() || r.own_claims.is_some());
        let mut rings: Vec<RxRing> = match (shared, owned) {
            (true, _) => Vec::new(),
            (false, true) => (0..ranks)
                .filter(|&s| local_of[s].is_none())
                .map(|s| far[s].take().expect("each sender's ring taken once"))
                .collect(),
            (false, false) => (0..ranks)
                .map(|s| {
                    let ring = match local_of[s] {
                        Some(i) => near[i].take(),
                        None => far[s].take(),
                    };
                    let ring = ring.expect("each sender's ring taken once");
                    ring.source.set(s); // in the job's numbering, not its host's
                    ring
                })
                .collect(),
        };
        // A shared channel's rings, this host's own rings and the one they share, or
        // the rings of a shared channel received with this one (after the senders'
        // own): both halves', this host's naming its senders by host rank. A channel
        // received with another has none here.
        let (own_near, own_far) = match (shared, owned) {
            (true, _) => (0, 0),
            (false, true) => (0, ranks),
            (false, false) => (local_ranks.len(), ranks),
        };
        let local_ranks: std::sync::Arc<[Rank]> = local_ranks.into();
        rings.extend(
            near.drain(own_near.min(near.len())..)
                .flatten()
                .map(|mut r| {
                    r.hidden_ranks = Some(local_ranks.clone());
                    r
                }),
        );
        rings.extend(far.drain(own_far.min(far.len())..).flatten());
        let rings = rings.into_boxed_slice();
        let pools = (0..ranks)
            .map(|s| match local_of[s] {
                Some(i) => here.pools[i],
                None => there.pools[s],
            })
            .collect();
        Self {
            busy: Cell::new(rings.is_empty()),
            rings,
            cursor: Cell::new(0),
            burst: Cell::new(0),
            dropped: Cell::new(0),
            moved: false,
            shared_senders: there.shared_senders,
            pools,
        }
    }

    /// What stays behind of a channel whose receive side moved to another view.
    pub(super) fn moved() -> Self {
        Self {
            rings: Box::new([]),
            cursor: Cell::new(0),
            burst: Cell::new(0),
            busy: Cell::new(true), // no rings
            dropped: Cell::new(0),
            moved: true,
            shared_senders: Box::new([]),
            pools: Box::new([]),
        }
    }

    /// The sender of ring `s`, as far as the ring tells: a shared ring's senders are
    /// named in its frames only.
    pub(super) fn sender(&self, s: usize) -> Option<usize> {
        let source = self.rings.get(s)?.source.get();
        (self.shared_senders.is_empty() && source != RxRing::NO_SOURCE).then_some(source)
    }

    /// The first sender, from the cursor on (round-robin), whose ring has a frame.
    #[inline(always)]
    pub(super) fn next_ready(&self) -> Option<usize> {
        let n = self.rings.len();
        let mut s = self.cursor.get();
        for _ in 0..n {
            if self.rings.get(s).is_some_and(RxRing::ready) {
                return Some(s);
            }
            s = if s + 1 >= n { 0 } else { s + 1 };
        }
        None
    }

    /// The head of ring `s` was looked at: later looks start at that ring, so that a
    /// frame looked at and left stays the head even if another sender's frame arrives
    /// meanwhile in a ring looked at before it.
    #[inline(always)]
    pub(super) fn looked_at(&self, s: usize) {
        if s != self.cursor.get() {
            self.cursor.set(s);
            self.burst.set(0);
        }
    }

    /// A frame was taken from sender `s`: stay on its ring for up to `FAIR_BURST`
    /// frames in a row, then give the next sender the first look.
    #[inline(always)]
    pub(super) fn took(&self, s: usize) {
        let burst = if s == self.cursor.get() {
            self.burst.get() + 1
        } else {
            1
        };
        if burst >= FAIR_BURST {
            self.cursor
                .set(if s + 1 == self.rings.len() { 0 } else { s + 1 });
            self.burst.set(0);
        } else {
            self.cursor.set(s);
            self.burst.set(burst);
        }
    }
}

/// Frames taken in a row from one sender's ring before the next sender gets the first
/// look: draining a stream without re-checking idle rings, yet fair to every sender.
pub(super) const FAIR_BURST: u32 = 32;
