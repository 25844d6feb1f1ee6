//! A conduit over rings in one memory region: per (sender → receiver, channel) a
//! single-producer/single-consumer [`ring`](crate::conduit::ring), plus every rank's
//! registered segment, all mapped in every rank. The `threads` conduit puts them on the
//! heap; the `shm` conduit maps them from /dev/shm. The hot path is the same code in both.
//!
//! A *shared* channel has instead one ring per receiver that all senders write into,
//! reserving slots with a [`SharedProducer`]; the first arg word of each of its frames
//! is hidden and names the sender (checked against the channel's senders on receipt).
//!
//! A rank's endpoint keeps its producer and consumer states in `Local` cells: an
//! endpoint is used by one thread (`Send`, not `Sync`), and every operation takes
//! `&self`, so a handler can reply while the frame it handles is still borrowed in place.

mod interrupts;
mod region;
mod tag_on;

pub use interrupts::{Alarm, InterruptRx};

pub use region::{Doorbell, HeapRegion, RegionHeader, RegionLayout, REGION_MAGIC};
pub use tag_on::TagOnPool;

use super::ring::{
    max_frame_slots, Consumer, Peeked, Producer, RawRing, RingMemory, SharedProducer, ARGS_OFFSET,
    FLAG_LONG, FLAG_TAG_ON, MAX_ARGS, SLOT_BYTES, USER_FLAGS,
};
use super::{
    Caps, Channel, ChannelCaps, Conduit, ConduitError, ConduitSpec, Delivery, Message, PollSet,
    Rank, ReceivedFrame, TagOnData,
};
use crate::bootstrap::Boot;
use crate::conduit::ring::FrameHeader;
use std::cell::{Cell, UnsafeCell};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Keeps the memory of the rings and segments alive for as long as an endpoint uses it.
#[derive(Debug, Clone)]
pub enum RegionOwner {
    /// Heap memory shared by thread ranks: the rings, and one segment per rank.
    Heap(Arc<HeapRegion>, Arc<[HeapRegion]>),
    /// A job's shared memory object.
    Shm(Arc<crate::bootstrap::ShmJob>),
}

/// Everything an endpoint is built from.
#[derive(Debug)]
pub struct Parts<'a> {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the job.
    pub ranks: usize,
    /// The channels, and who may send into each.
    pub spec: &'a ConduitSpec,
    /// Where the rings are (made from `spec`).
    pub layout: &'a RegionLayout,
    /// The initialised ring region (see [`RegionLayout::init`]).
    pub rings: NonNull<u8>,
    /// Every rank's registered segment, as mapped in this process.
    pub segments: Vec<NonNull<u8>>,
    /// Bytes of each segment (`spec.segment_bytes`, or more where it was rounded up).
    pub segment_bytes: usize,
    /// Keeps all of it alive.
    pub owner: RegionOwner,
    /// Setup-time collectives and failure records.
    pub boot: Boot,
}

/// State of one end of a ring, private to the endpoint's thread.
///
/// `with` hands out `&mut T` for the length of a closure that runs only ring code (no
/// user code, no call back into the endpoint), so two `&mut` never coexist. Cheaper than
/// `Cell<T>`, whose get/set copy the whole state on every message.
struct Local<T>(UnsafeCell<T>);

impl<T> Local<T> {
    fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    #[inline(always)]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: every closure passed here (all in this module) runs ring code only
        // and cannot reach this cell again: see `get`.
        f(unsafe { self.get() })
    }

    /// The state, for the hot send path, where a closure passed to `with` would not
    /// always be inlined.
    ///
    /// # Safety
    /// The caller drops the reference before anything else can reach this cell (it
    /// runs ring code only, no user code, no call back into the endpoint).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self) -> &mut T {
        // SAFETY: `Local` is !Sync, so only this thread reaches it, and the caller
        // keeps the `&mut` unique while it lives.
        unsafe { &mut *self.0.get() }
    }
}

// SAFETY: the raw pointers of an endpoint (rings, segments) point into memory that its
// owner handle keeps alive and that is shared by design (the ring protocol decides who
// touches which bytes); moving the endpoint to another thread changes nothing about
// that. It stays !Sync through its cells.
unsafe impl Send for MemConduit {}

// Each rank's private ring states are allocated by the thread that builds the job, next
// to other ranks' states: align them to whole line pairs so that no two ranks' states
// share a cache line (false sharing doubled the round trip before this).
#[repr(align(128))]
struct TxRing {
    ring: RawRing,
    prod: Local<Tx>,
    /// Most args a frame may carry (one less on a shared channel).
    max_args: usize,
    /// This rank may send into the channel (the logical destination table).
    permitted: bool,
    /// The channel's doorbell bit if its frames ring the receiver's doorbell, else 0.
    notify_bit: u64,
    /// The receiver's doorbell.
    doorbell: *const Doorbell,
    /// The receiver's Tag-On pool for this sender, and where the next claim looks.
    pool: TagOnPool,
    pool_cursor: Cell<usize>,
}

/// How a sender reserves room in a ring.
enum Tx {
    /// The ring is this sender's alone.
    Own(Producer),
    /// Every sender to the receiver shares the ring and its tail word; frames start
    /// with a hidden word naming the sender.
    Shared {
        prod: SharedProducer,
        tail: *const crate::sync::AtomicU64,
        me: u64,
    },
}

#[repr(align(128))]
struct RxRing {
    ring: RawRing,
    cons: Local<Consumer>,
    broken: Cell<bool>,
    /// The sender may send into the channel; frames from one that may not are dropped.
    /// (A shared ring's frames are checked by the sender they name.)
    permitted: bool,
    /// Each frame's first arg word is the conduit's, not the user's: it names the
    /// sender on a shared ring, the channel on the interrupt channel's rings.
    hidden: bool,
}

#[repr(align(128))]
struct RxChannel {
    rings: Box<[RxRing]>,
    /// The sender whose ring is looked at first.
    cursor: Cell<usize>,
    /// Frames taken in a row from the cursor's ring.
    burst: Cell<u32>,
    outstanding: Cell<bool>,
    /// Frames dropped because their sender may not send here.
    dropped: Cell<u64>,
    /// The channel's receive side was moved to the progress thread's view.
    moved: bool,
    /// Of a shared channel (one ring): whether each rank may send into it.
    shared_senders: Box<[bool]>,
    /// This rank's Tag-On pool for each sender's blocks.
    pools: Box<[TagOnPool]>,
}

/// [`TxRing::push`] on a shared ring: out of line, so that the per-pair path stays
/// small enough to inline.
#[inline(never)]
fn shared_push(
    ring: &RawRing,
    (prod, tail, me): (&mut SharedProducer, *const crate::sync::AtomicU64, u64),
    header: FrameHeader,
    args: &[u64],
    payload: &[u8],
) -> bool {
    let (words, n) = with_hidden_word(me, args);
    // SAFETY: the tail word is inside the region the owner keeps alive.
    let tail = unsafe { &*tail };
    prod.try_push(ring, tail, header, &words[..n], payload)
}

/// The arg words of a hidden-word ring: `word` (the sender's rank on a shared ring, the
/// channel on the interrupt channel), then `args` (at most `MAX_ARGS - 1`); and how
/// many.
#[inline(always)]
fn with_hidden_word(me: u64, args: &[u64]) -> ([u64; MAX_ARGS], usize) {
    let mut words = [0u64; MAX_ARGS];
    words[0] = me;
    words[1..=args.len()].copy_from_slice(args);
    (words, args.len() + 1)
}

/// The doorbell bit of channel `ch` (an Interrupt channel's is its own:
/// [`ConduitSpec::check`]).
const fn doorbell_bit(ch: Channel) -> u64 {
    ConduitSpec::doorbell_bit(ch)
}

/// Empty polls in a row before One-poll arms the doorbell (ANCHORS.md: "after many
/// empty polls it arms a ring").
const ARM_AFTER: u32 = 32;

impl TxRing {
    /// Writes and publishes one frame; `false`, nothing written, if the ring lacks room.
    /// The caller checked `args.len() <= self.max_args`.
    #[inline(always)]
    fn push(&self, header: FrameHeader, args: &[u64], payload: &[u8]) -> bool {
        // SAFETY: only ring code runs while the state is borrowed.
        match unsafe { self.prod.get() } {
            Tx::Own(p) => p.try_push(&self.ring, header, args, payload),
            Tx::Shared { prod, tail, me } => {
                shared_push(&self.ring, (prod, *tail, *me), header, args, payload)
            }
        }
    }

    /// Publishes a frame of `msg`'s tag and args whose 16-byte payload is the pair
    /// `(a, b)` (a Long frame's offset and length, a Tag-On frame's block and length),
    /// with the conduit flag `flag`, after `write_data` has put in place the data the
    /// frame names. `false` if the ring lacks room: then `write_data` has not run.
    fn push_pair(
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
        let sent = self.prod.with(|tx| match tx {
            Tx::Own(p) => {
                let room = p.has_room_for(&self.ring, args.len(), inline.len());
                if room {
                    write_data();
                    p.try_push(&self.ring, header, args, &inline);
                }
                room
            }
            Tx::Shared { prod, tail, me } => {
                let (words, n) = with_hidden_word(*me, args);
                // SAFETY: the tail word is inside the region the owner keeps alive.
                let tail = unsafe { &**tail };
                match prod.try_reserve(&self.ring, tail, n, inline.len()) {
                    Some(slots) => {
                        write_data();
                        slots.publish(&self.ring, header, &words[..n], &inline);
                        true
                    }
                    None => false,
                }
            }
        });
        if sent && self.notify_bit != 0 {
            self.ring_doorbell();
        }
        sent
    }

    /// After publishing a frame: if the receiver has armed this channel, set its bit in
    /// the receiver's summary.
    #[inline(always)]
    fn ring_doorbell(&self) {
        // SAFETY: the doorbell is inside the region the owner keeps alive; atomic only.
        let d = unsafe { &*self.doorbell };
        if super::doorbell::ring(&d.armed, &d.summary, &d.sleepers, self.notify_bit) {
            // ORDERING: Release pairs with the sleeper's Acquire load of `wake` before
            // it sleeps; the futex wake ends its sleep.
            d.wake.fetch_add(1, Ordering::Release);
            crate::util::futex::wake_all(&d.wake);
        }
    }
}

impl RxRing {
    /// A frame is readable and the ring is not known to be corrupt.
    #[inline(always)]
    fn ready(&self) -> bool {
        self.cons.with(|c| c.ready(&self.ring)) && !self.broken.get()
    }
}

impl RxChannel {
    /// What stays behind of a channel whose receive side moved to another view.
    fn moved() -> Self {
        Self {
            rings: Box::new([]),
            cursor: Cell::new(0),
            burst: Cell::new(0),
            outstanding: Cell::new(false),
            dropped: Cell::new(0),
            moved: true,
            shared_senders: Box::new([]),
            pools: Box::new([]),
        }
    }

    /// The first sender, from the cursor on (round-robin), whose ring has a frame.
    #[inline(always)]
    fn next_ready(&self) -> Option<usize> {
        let c = self.cursor.get();
        let (before, after) = self.rings.split_at(c);
        match after.iter().position(RxRing::ready) {
            Some(i) => Some(c + i),
            None => before.iter().position(RxRing::ready),
        }
    }

    /// A frame was taken from sender `s`: stay on its ring for up to `FAIR_BURST`
    /// frames in a row, then give the next sender the first look.
    #[inline(always)]
    fn took(&self, s: usize) {
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
const FAIR_BURST: u32 = 32;

/// One rank's endpoint of a ring-based conduit.
///
/// ```
/// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
/// let eps = threads::endpoints(1, &[256]).unwrap();
/// let me = &eps[0];
/// me.try_send(0, 0, &Message { tag: 1, args: &[7], ..Message::default() }).unwrap();
/// let f = me.peek(0).unwrap().unwrap();
/// assert_eq!((f.source(), f.tag(), f.args()), (0, 1, &[7u64][..]));
/// f.release();
/// assert!(me.peek(0).unwrap().is_none());
/// ```
pub struct MemConduit {
    rank: Rank,
    size: usize,
    caps: Caps,
    tx: Box<[TxRing]>,
    rx: Box<[RxChannel]>,
    segments: Box<[NonNull<u8>]>,
    segment_bytes: usize,
    /// This rank's doorbell, and what One-poll has armed of it / how many empty polls
    /// in a row it has seen.
    doorbell: *const Doorbell,
    one_poll_state: Cell<(u64, u32)>,
    boot: Boot,
    _owner: RegionOwner,
}

impl std::fmt::Debug for MemConduit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemConduit")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

/// Largest payload a channel of `slots` slots carries with the most args.
pub(super) fn max_payload(slots: u64) -> usize {
    let frame = (max_frame_slots(slots) as usize) * SLOT_BYTES;
    frame.saturating_sub(ARGS_OFFSET + MAX_ARGS * 8)
}

impl MemConduit {
    /// The endpoint of rank `parts.rank`.
    ///
    /// # Panics
    /// If `parts.layout` was not made from `parts.spec`.
    ///
    /// # Safety
    /// `parts.rings` holds an initialised ring region of `parts.layout`, each of
    /// `parts.segments` is valid for `parts.segment_bytes` bytes, `parts.owner` keeps all
    /// of it alive, and no other endpoint of this rank exists for it.
    pub unsafe fn new(parts: Parts<'_>) -> Self {
        let Parts {
            rank,
            ranks,
            spec,
            layout,
            rings: base,
            segments,
            segment_bytes,
            owner,
            boot,
        } = parts;
        let channels = layout.channels();
        assert_eq!(spec.channels.len(), channels, "the layout of this spec");
        let interrupt_channel = spec.interrupt_channel;
        let mut tx = Vec::with_capacity(channels * ranks);
        // SAFETY: caller guarantees `base` is a live region of `layout`.
        let pools: Box<[TagOnPool]> = (0..ranks)
            .map(|src| unsafe { layout.tag_on_pool(base, rank, src) })
            .collect();
        let mut rx = Vec::with_capacity(channels);
        for (ch, c) in spec.channels.iter().enumerate() {
            let (who, slots, shared) = (&c.senders, c.slots, c.shared);
            for dest in 0..ranks {
                let prod = if shared {
                    Tx::Shared {
                        prod: SharedProducer::new(0),
                        // SAFETY: caller guarantees `base` is a live region of `layout`.
                        tail: unsafe { layout.shared_tail(base, ch, dest) },
                        me: rank as u64,
                    }
                } else {
                    Tx::Own(Producer::new(slots, 0))
                };
                tx.push(TxRing {
                    // SAFETY: caller guarantees `base` is a live region of `layout`.
                    ring: unsafe { layout.ring(base, ch, dest, rank) },
                    prod: Local::new(prod),
                    max_args: MAX_ARGS - usize::from(shared),
                    permitted: who.allows(rank),
                    notify_bit: if c.rings_doorbell() {
                        doorbell_bit(ch)
                    } else {
                        0
                    },
                    // SAFETY: caller guarantees `base` is a live region of `layout`.
                    doorbell: unsafe { layout.doorbell(base, dest) },
                    // SAFETY: as above.
                    pool: unsafe { layout.tag_on_pool(base, dest, rank) },
                    pool_cursor: Cell::new(0),
                });
            }
            let rings = (0..if shared { 1 } else { ranks })
                .map(|src| RxRing {
                    // SAFETY: as above.
                    ring: unsafe { layout.ring(base, ch, rank, src) },
                    cons: Local::new(Consumer::new(slots, 0, Consumer::default_batch(slots))),
                    broken: Cell::new(false),
                    permitted: shared || who.allows(src),
                    hidden: shared || interrupt_channel == Some(ch),
                })
                .collect();
            rx.push(RxChannel {
                rings,
                cursor: Cell::new(0),
                burst: Cell::new(0),
                outstanding: Cell::new(false),
                dropped: Cell::new(0),
                moved: false,
                shared_senders: match shared {
                    true => (0..ranks).map(|src| who.allows(src)).collect(),
                    false => Box::new([]),
                },
                pools: pools.clone(),
            });
        }
        let caps = Caps {
            ranks,
            segment_bytes,
            tag_on_bytes: layout.tag_on_bytes(),
            max_args: MAX_ARGS,
            channels: spec
                .channels
                .iter()
                .map(|c| ChannelCaps {
                    senders: c.senders.clone(),
                    shared: c.shared,
                    max_args: MAX_ARGS - usize::from(c.shared),
                    notify: c.rings_doorbell(),
                    interrupt: c.delivery == Delivery::Interrupt,
                    slots: c.slots,
                    max_payload: max_payload(c.slots),
                })
                .collect(),
            flags: super::CapFlags {
                peer_memory_mapped: true,
                ..Default::default()
            },
            interrupt_channel,
        };
        Self {
            rank,
            size: ranks,
            caps,
            tx: tx.into_boxed_slice(),
            rx: rx.into_boxed_slice(),
            segments: segments.into_boxed_slice(),
            segment_bytes,
            // SAFETY: as above.
            doorbell: unsafe { layout.doorbell(base, rank) },
            one_poll_state: Cell::new((0, 0)),
            boot,
            _owner: owner,
        }
    }

    /// The frame at the head of ring `s` of `chan`, which `next_ready` saw, checked and
    /// handed out: `Ok(None)` if it was a pad, or a frame from a sender that may not
    /// send here (consumed, and counted in `dropped`); a corrupt ring is marked and
    /// reported.
    #[inline(always)]
    fn take<'a>(
        &'a self,
        chan: &'a RxChannel,
        s: usize,
        ch: Channel,
    ) -> Result<Option<MemFrame<'a>>, ConduitError> {
        let r = &chan.rings[s];
        let p = match r.cons.with(|c| c.take_ready(&r.ring)) {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(None),
            Err(detail) => return Err(broken(r, s, ch, detail)),
        };
        let source = if r.hidden {
            match self.hidden_word_checked(chan, r, s, &p) {
                Some(src) => src,
                None => return Ok(drop_frame(chan, r, &p)),
            }
        } else if r.permitted {
            s
        } else {
            // A sender that may not send here bypassed its own check: never deliver.
            return Ok(drop_frame(chan, r, &p));
        };
        match self.payload_of(chan, r, source, &p) {
            Ok(payload) => {
                chan.took(s);
                Ok(Some(MemFrame::out(chan, r, source, p, payload)))
            }
            Err(detail) => Err(broken(r, s, ch, detail)),
        }
    }

    /// The sender of frame `p` of ring `s` of `chan`, whose first arg word is hidden,
    /// if that word is valid: on a shared ring it names a sender allowed here; on the
    /// interrupt channel, a channel this sender may send into. `None`: drop the frame.
    #[cold]
    fn hidden_word_checked(
        &self,
        chan: &RxChannel,
        r: &RxRing,
        s: usize,
        p: &Peeked,
    ) -> Option<Rank> {
        let word = hidden_word(r, p)?;
        if !chan.shared_senders.is_empty() {
            let src = usize::try_from(word).ok()?;
            return (chan.shared_senders.get(src) == Some(&true)).then_some(src);
        }
        let ch = usize::try_from(word).ok()?;
        let allowed = Some(ch) != self.caps.interrupt_channel // never carried twice
            && self.caps.channels.get(ch)?.senders.allows(s);
        allowed.then_some(s)
    }

    /// Checks a frame before it is handed out: a Long frame must name a range inside
    /// this rank's segment. Returns where its payload is.
    #[inline(always)]
    fn payload_of(
        &self,
        chan: &RxChannel,
        r: &RxRing,
        source: Rank,
        p: &Peeked,
    ) -> Result<(*const u8, usize), super::ring::Corrupt> {
        let base = r.ring.slot_ptr(p.index(r.ring.nslots()));
        // SAFETY: the consumer checked that the frame, payload included, lies in the ring.
        let inline = unsafe { base.add(p.payload_offset()) };
        if p.header.flags & (FLAG_LONG | FLAG_TAG_ON) == 0 {
            return Ok((inline, p.header.len as usize));
        }
        if p.header.flags & FLAG_TAG_ON != 0 {
            return tag_on_payload(&chan.pools[source], inline, p);
        }
        self.long_payload(inline, p)
    }

    #[cold]
    fn long_payload(
        &self,
        inline: *const u8,
        p: &Peeked,
    ) -> Result<(*const u8, usize), super::ring::Corrupt> {
        let bad = super::ring::Corrupt {
            position: p.position,
            what: "Long frame outside the registered segment",
        };
        let Some((offset, len)) = inline_pair(inline, p) else {
            return Err(bad);
        };
        match offset.checked_add(len) {
            // SAFETY: offset + len ≤ segment length: inside this rank's segment.
            Some(end) if end <= self.segment_bytes => Ok((
                unsafe { self.segments[self.rank].as_ptr().add(offset) },
                len,
            )),
            _ => Err(bad),
        }
    }

    /// The registered segment of `rank` as mapped in this process (every segment of a
    /// job on one host is mapped everywhere). For measurements and tools that must
    /// touch peer memory directly; the layers above the conduit never do.
    pub fn mapped_segment(&self, rank: Rank) -> Option<(NonNull<u8>, usize)> {
        self.segments.get(rank).map(|&p| (p, self.segment_bytes))
    }

    /// The doorbell bits One-poll has armed (nonzero once an idle receiver polls one
    /// word instead of its rings). For tests and measurements.
    pub fn one_poll_armed(&self) -> u64 {
        self.one_poll_state.get().0
    }

    /// Moves the receive side of every Interrupt channel out of this endpoint into a
    /// view for a progress thread; `None` if the job has no Interrupt channel. From then
    /// on this endpoint answers [`ConduitError::DeliveredByInterrupts`] for them, and
    /// each consumer state still has one owner.
    pub fn take_interrupts(&mut self) -> Option<InterruptRx> {
        let channels: Vec<Channel> = (0..self.rx.len())
            .filter(|&ch| self.caps.channels[ch].interrupt && !self.rx[ch].moved)
            .collect();
        if channels.is_empty() {
            return None;
        }
        let rx: Box<[RxChannel]> = (0..self.rx.len())
            .map(|ch| {
                if channels.contains(&ch) {
                    std::mem::replace(&mut self.rx[ch], RxChannel::moved())
                } else {
                    RxChannel::moved()
                }
            })
            .collect();
        let view = MemConduit {
            rank: self.rank,
            size: self.size,
            caps: self.caps.clone(),
            tx: Box::new([]),
            rx,
            segments: self.segments.clone(),
            segment_bytes: self.segment_bytes,
            doorbell: self.doorbell,
            one_poll_state: Cell::new((0, 0)),
            boot: self.boot.clone(),
            _owner: self._owner.clone(),
        };
        Some(InterruptRx::new(view, channels))
    }

    /// Sleeps until a frame may have arrived on the doorbell channels `bits`, or
    /// `timeout` passes (a backstop). Arms them as a sleeper, fences, and runs
    /// `any_ready` once more before sleeping, so a frame sent meanwhile is never slept
    /// through: either its sender saw the arm and bumps the futex word, or this look
    /// sees the frame. Bits that were armed already (by One-poll) stay armed.
    fn sleep_on(&self, bits: u64, any_ready: impl Fn() -> bool, timeout: std::time::Duration) {
        // SAFETY: this rank's doorbell, inside the region the owner keeps alive.
        let d = unsafe { &*self.doorbell };
        let (w, mine) = d.arm_sleeper(bits);
        if !any_ready() {
            d.sleep(w, timeout);
        }
        d.disarm_sleeper(bits, mine);
    }

    /// The bootstrap this endpoint's job uses.
    pub fn boot(&self) -> &Boot {
        &self.boot
    }

    /// The ring to `dest` on channel `ch` for a Long or Tag-On `msg`, after the checks
    /// every send makes (rank, channel, args, permission).
    fn sender(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> Result<&TxRing, ConduitError> {
        if dest >= self.size || ch >= self.rx.len() {
            return Err(self.check_send(dest, ch, msg));
        }
        let t = &self.tx[ch * self.size + dest];
        if msg.args.len() > t.max_args {
            return Err(self.check_send(dest, ch, msg));
        }
        if !t.permitted {
            return Err(ConduitError::NotPermitted {
                rank: self.rank,
                channel: ch,
            });
        }
        Ok(t)
    }

    /// Sends a frame of channel `ch` flagged [`Message::INTERRUPT`] on `dest`'s
    /// interrupt channel, its first arg word naming `ch`. The caller checked `dest`,
    /// `ch` and this rank's permission for `ch`.
    #[cold]
    #[inline(never)]
    fn send_flagged(
        &self,
        dest: Rank,
        ch: Channel,
        header: FrameHeader,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        let Some(via) = self.caps.interrupt_channel else {
            return Err(ConduitError::NoInterruptChannel);
        };
        if ch == via {
            return Err(self.no_channel(ch)); // it carries frames for others only
        }
        if msg.args.len() >= MAX_ARGS {
            return Err(ConduitError::TooManyArgs {
                nargs: msg.args.len(),
                max: MAX_ARGS - 1,
            });
        }
        let max = self.caps.channels[via].max_payload;
        if msg.payload.len() > max {
            return Err(ConduitError::PayloadTooLarge {
                len: msg.payload.len(),
                max,
                channel: ch,
            });
        }
        let t = &self.tx[via * self.size + dest];
        let (words, n) = with_hidden_word(ch as u64, msg.args);
        if !t.push(header, &words[..n], msg.payload) {
            return Err(ConduitError::Busy);
        }
        t.ring_doorbell();
        Ok(())
    }

    #[cold]
    fn no_channel(&self, ch: Channel) -> ConduitError {
        ConduitError::NoSuchChannel {
            channel: ch,
            channels: self.rx.len(),
        }
    }

    #[cold]
    fn check_send(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> ConduitError {
        if dest >= self.size {
            ConduitError::NoSuchRank {
                rank: dest,
                size: self.size,
            }
        } else if ch >= self.rx.len() {
            ConduitError::NoSuchChannel {
                channel: ch,
                channels: self.rx.len(),
            }
        } else if msg.args.len() > self.caps.channels[ch].max_args {
            ConduitError::TooManyArgs {
                nargs: msg.args.len(),
                max: self.caps.channels[ch].max_args,
            }
        } else {
            ConduitError::PayloadTooLarge {
                len: msg.payload.len(),
                max: self.caps.channels[ch].max_payload,
                channel: ch,
            }
        }
    }
}

impl Conduit for MemConduit {
    type Frame<'a> = MemFrame<'a>;

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn caps(&self) -> &Caps {
        &self.caps
    }

    #[inline(always)]
    fn try_send(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> Result<(), ConduitError> {
        let ok = dest < self.size
            && ch < self.rx.len()
            && msg.args.len() <= MAX_ARGS
            && (msg.payload.is_empty() || msg.payload.len() <= self.caps.channels[ch].max_payload);
        if !ok {
            return Err(self.check_send(dest, ch, msg));
        }
        let t = &self.tx[ch * self.size + dest];
        if !t.permitted {
            return Err(ConduitError::NotPermitted {
                rank: self.rank,
                channel: ch,
            });
        }
        let header = FrameHeader {
            tag: msg.tag,
            flags: msg.flags & USER_FLAGS,
            ..FrameHeader::default()
        };
        if msg.flags & Message::INTERRUPT != 0 {
            return self.send_flagged(dest, ch, header, msg);
        }
        if msg.args.len() > t.max_args {
            return Err(self.check_send(dest, ch, msg)); // the hidden word of a shared ring
        }
        if t.push(header, msg.args, msg.payload) {
            if t.notify_bit != 0 {
                t.ring_doorbell();
            }
            Ok(())
        } else {
            Err(ConduitError::Busy)
        }
    }

    fn try_send_long(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        offset: usize,
    ) -> Result<(), ConduitError> {
        let t = self.sender(dest, ch, msg)?;
        let len = msg.payload.len();
        if offset
            .checked_add(len)
            .is_none_or(|end| end > self.segment_bytes)
        {
            return Err(ConduitError::OutOfSegment {
                rank: dest,
                offset,
                len,
                segment_bytes: self.segment_bytes,
            });
        }
        let to = self.segments[dest].as_ptr();
        // Room first (`push_pair`): the data is never written for a frame that cannot
        // follow.
        let write = || {
            // SAFETY: the range is inside `dest`'s segment (checked above), mapped here;
            // the source is a distinct slice. Concurrent writes to the same bytes by
            // other ranks are the application's protocol, as with any RMA.
            unsafe { std::ptr::copy_nonoverlapping(msg.payload.as_ptr(), to.add(offset), len) }
        };
        if t.push_pair(msg, FLAG_LONG, (offset, len), write) {
            Ok(())
        } else {
            Err(ConduitError::Busy)
        }
    }

    fn try_send_tag_on(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        let t = self.sender(dest, ch, msg)?;
        let len = msg.payload.len();
        if len > t.pool.bytes() {
            return Err(ConduitError::PayloadTooLarge {
                len,
                max: t.pool.bytes(),
                channel: ch,
            });
        }
        let mut cursor = t.pool_cursor.get();
        let Some(i) = t.pool.claim(&mut cursor) else {
            return Err(ConduitError::Busy); // every block still in the receiver's hands
        };
        let write = || {
            // SAFETY: block `i` is ours (claimed: the receiver freed it); `len` fits it.
            unsafe { std::ptr::copy_nonoverlapping(msg.payload.as_ptr(), t.pool.block(i), len) }
        };
        if t.push_pair(msg, FLAG_TAG_ON, (i, len), write) {
            t.pool_cursor.set(cursor);
            Ok(())
        } else {
            t.pool.unclaim(i);
            Err(ConduitError::Busy)
        }
    }

    fn segment(&self) -> (NonNull<u8>, usize) {
        (self.segments[self.rank], self.segment_bytes)
    }

    #[inline(always)]
    fn peek(&self, ch: Channel) -> Result<Option<MemFrame<'_>>, ConduitError> {
        let Some(chan) = self.rx.get(ch) else {
            return Err(self.no_channel(ch));
        };
        if chan.outstanding.get() {
            return Err(ConduitError::FrameOutstanding { channel: ch });
        }
        loop {
            let Some(s) = chan.next_ready() else {
                return if chan.moved {
                    Err(ConduitError::DeliveredByInterrupts { channel: ch })
                } else {
                    Ok(None)
                };
            };
            match self.take(chan, s, ch) {
                Ok(Some(frame)) => return Ok(Some(frame)),
                Ok(None) => {} // a pad, or a dropped frame: look again
                Err(e) => return Err(e),
            }
        }
    }

    #[inline(always)]
    fn drain<E, F>(&self, ch: Channel, budget: usize, mut f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        let Some(chan) = self.rx.get(ch) else {
            return Err(self.no_channel(ch).into());
        };
        if chan.outstanding.get() {
            return Err(ConduitError::FrameOutstanding { channel: ch }.into());
        }
        let mut done = 0;
        while done < budget {
            let Some(s) = chan.next_ready() else {
                if chan.moved {
                    return Err(ConduitError::DeliveredByInterrupts { channel: ch }.into());
                }
                break;
            };
            let frame = match self.take(chan, s, ch) {
                Ok(Some(frame)) => frame,
                Ok(None) => continue, // a pad, or a dropped frame: look again
                Err(e) => return Err(e.into()),
            };
            let result = f(&frame);
            frame.release();
            done += 1;
            result?;
        }
        Ok(done)
    }

    fn poll_set(&self, channels: &[Channel]) -> Result<PollSet, ConduitError> {
        let mut set = PollSet {
            channels: channels.to_vec(),
            bits: 0,
            all_notify: !channels.is_empty(),
        };
        for &ch in channels {
            match self.caps.channels.get(ch) {
                Some(c) if c.notify => set.bits |= doorbell_bit(ch),
                Some(_) => set.all_notify = false,
                None => return Err(self.no_channel(ch)),
            }
        }
        Ok(set)
    }

    #[inline]
    fn one_poll(&self, set: &PollSet) -> Result<Option<(Channel, MemFrame<'_>)>, ConduitError> {
        let (bits, all_notify, channels) = (set.bits, set.all_notify, &set.channels[..]);
        // SAFETY: this rank's doorbell, inside the region the owner keeps alive.
        let d = unsafe { &*self.doorbell };
        let (mut armed, idle) = self.one_poll_state.get();
        if all_notify && armed & bits == bits {
            // Idle and armed: one word says whether anything arrived.
            // ORDERING: Acquire pairs with the senders' Release fetch_or in `ring_doorbell`.
            if d.summary.load(Ordering::Acquire) & bits == 0 {
                return Ok(None);
            }
            d.armed.fetch_and(!bits, Ordering::Relaxed);
            d.summary.fetch_and(!bits, Ordering::Relaxed);
            armed &= !bits;
            self.one_poll_state.set((armed, 0));
        }
        for &ch in channels {
            if let Some(f) = self.peek(ch)? {
                self.one_poll_state.set((armed, 0));
                return Ok(Some((ch, f)));
            }
        }
        let idle = idle.saturating_add(1);
        self.one_poll_state.set((armed, idle));
        if all_notify && idle >= ARM_AFTER && armed & bits != bits {
            super::doorbell::arm(&d.armed, None, bits);
            armed |= bits;
            self.one_poll_state.set((armed, idle));
            for &ch in channels {
                if let Some(f) = self.peek(ch)? {
                    d.armed.fetch_and(!bits, Ordering::Relaxed);
                    self.one_poll_state.set((armed & !bits, 0));
                    return Ok(Some((ch, f)));
                }
            }
        }
        Ok(None)
    }

    fn wait_for_arrival(
        &self,
        set: &PollSet,
        timeout: std::time::Duration,
    ) -> Result<(), ConduitError> {
        if !set.all_notify {
            std::thread::yield_now(); // no doorbell to be woken by
            return Ok(());
        }
        let any_ready = || {
            set.channels
                .iter()
                .any(|&ch| self.rx[ch].next_ready().is_some())
        };
        self.sleep_on(set.bits, any_ready, timeout);
        Ok(())
    }

    fn peer_segment(&self, rank: Rank) -> Option<(NonNull<u8>, usize)> {
        self.mapped_segment(rank)
    }

    fn dropped(&self, ch: Channel) -> u64 {
        self.rx.get(ch).map_or(0, |c| c.dropped.get())
    }

    fn allgather(&self, mine: u64) -> Result<Vec<u64>, ConduitError> {
        Ok(self.boot.allgather(self.rank, mine)?)
    }

    fn barrier(&self) -> Result<(), ConduitError> {
        Ok(self.boot.barrier()?)
    }

    fn check_peers(&self) -> Result<(), ConduitError> {
        Ok(self.boot.check_peers()?)
    }

    fn peer_left(&self, rank: Rank) -> bool {
        self.boot.has_left(rank)
    }
}

/// The (index, length) inline payload of a Long or Tag-On frame, if it is 16 bytes.
fn inline_pair(inline: *const u8, p: &Peeked) -> Option<(usize, usize)> {
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
fn tag_on_payload(
    pool: &TagOnPool,
    inline: *const u8,
    p: &Peeked,
) -> Result<(*const u8, usize), super::ring::Corrupt> {
    match inline_pair(inline, p) {
        Some((i, len)) if i < pool.buffers() && len <= pool.bytes() => Ok((pool.block(i), len)),
        _ => Err(super::ring::Corrupt {
            position: p.position,
            what: "Tag-On frame outside the pool",
        }),
    }
}

/// The hidden first arg word of frame `p` of ring `r`, if it has one.
#[inline(always)]
fn hidden_word(r: &RxRing, p: &Peeked) -> Option<u64> {
    if p.header.nargs == 0 {
        return None;
    }
    let base = r.ring.slot_ptr(p.index(r.ring.nslots()));
    // SAFETY: the consumer checked that the frame and its args lie in the ring, and
    // the frame is ours until released; args are 8-byte aligned in a slot.
    Some(unsafe { base.add(ARGS_OFFSET).cast::<u64>().read() })
}

/// Releases frame `p` of ring `r` undelivered and counts it in `chan`'s `dropped`.
#[cold]
fn drop_frame<'a>(chan: &RxChannel, r: &RxRing, p: &Peeked) -> Option<MemFrame<'a>> {
    r.cons.with(|c| c.release(&r.ring, p));
    chan.dropped.set(chan.dropped.get() + 1);
    None
}

/// Marks sender `s`'s ring `r` of channel `ch` as corrupt (it is not read again) and
/// says why.
#[cold]
fn broken(r: &RxRing, s: Rank, ch: Channel, detail: super::ring::Corrupt) -> ConduitError {
    r.broken.set(true);
    ConduitError::Corrupt {
        source_rank: s,
        channel: ch,
        detail,
    }
}

/// A frame in place in a [`MemConduit`] ring: args and payload are read where the
/// sender wrote them.
pub struct MemFrame<'a> {
    chan: &'a RxChannel,
    ring: &'a RxRing,
    source: Rank,
    /// The frame's first slot.
    base: *const u8,
    /// Its payload: in the ring, or for a Long frame in this rank's segment.
    payload: (*const u8, usize),
    peeked: Peeked,
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
    /// The frame `p` of ring `r`, from `source`, now out of channel `chan`, with its
    /// checked payload.
    #[inline(always)]
    fn out(
        chan: &'a RxChannel,
        r: &'a RxRing,
        source: Rank,
        p: Peeked,
        payload: (*const u8, usize),
    ) -> Self {
        chan.outstanding.set(true);
        Self {
            chan,
            ring: r,
            source,
            base: r.ring.slot_ptr(p.index(r.ring.nslots())),
            payload,
            peeked: p,
        }
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
        // The first word of a hidden-word ring is the conduit's, not the user's.
        let hidden = usize::from(self.ring.hidden);
        // SAFETY: the consumer checked that nargs ≤ 8 and that the frame lies inside the
        // ring (and `take` that a shared ring's frame has its hidden word); its slots
        // stay ours (the producer cannot reuse them) until `release`, which consumes
        // `self` and so ends this borrow. The args start 16 bytes into a 64-byte
        // aligned slot: aligned for u64.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(ARGS_OFFSET).cast::<u64>().add(hidden),
                self.peeked.header.nargs as usize - hidden,
            )
        }
    }
    #[inline(always)]
    fn payload(&self) -> &[u8] {
        // SAFETY: `payload_of` checked the range: inside the frame (which stays ours
        // until `release`), or inside this rank's segment for a Long frame. A Long
        // payload can be overwritten by a peer that sends another Long to the same
        // bytes; that is the application's protocol, as with any RMA.
        unsafe { std::slice::from_raw_parts(self.payload.0, self.payload.1) }
    }
    #[inline(always)]
    fn release(self) {
        if self.is_tag_on() {
            // A Tag-On block not kept is freed with its frame (the handle's drop).
            drop(self.keep());
            return;
        }
        self.ring
            .cons
            .with(|c| c.release(&self.ring.ring, &self.peeked));
        // `self` drops here and clears the channel's outstanding mark.
    }
    #[inline(always)]
    fn keep(self) -> Option<TagOnData<'a>> {
        // Read what the frame says before handing its slots back: once the head is
        // published the producer may overwrite them.
        let index = if self.is_tag_on() {
            // SAFETY: the payload offset lies inside the frame, which is ours until the
            // release below.
            let inline = unsafe { self.base.add(self.peeked.payload_offset()) };
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
        Some(TagOnData::new(
            data,
            self.chan.pools[self.source].flag(index),
        ))
        // `self` drops here and clears the channel's outstanding mark.
    }
}

impl MemFrame<'_> {
    /// The hidden first arg word of a frame of a hidden-word ring (checked present
    /// when the frame was taken); 0 for other frames.
    fn hidden_word(&self) -> u64 {
        if !self.ring.hidden {
            return 0;
        }
        // SAFETY: as in `args`: the frame is ours until `release`, and `take` checked
        // that it has its hidden word.
        unsafe { self.base.add(ARGS_OFFSET).cast::<u64>().read() }
    }
}

impl Drop for MemFrame<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.chan.outstanding.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::ThreadsBoot;
    use crate::conduit::{ChannelSpec, Senders};

    /// Two endpoints over one region whose logical destination tables disagree: rank 1
    /// believes it may send into channel 0, rank 0 (the receiver) says only rank 0 may.
    #[test]
    fn frames_from_a_sender_that_may_not_send_are_dropped_and_counted() {
        rogue_frames_are_dropped(false);
    }

    #[test]
    fn frames_from_a_sender_that_may_not_send_are_dropped_and_counted_on_a_shared_ring() {
        rogue_frames_are_dropped(true);
    }

    fn rogue_frames_are_dropped(shared: bool) {
        let spec_of = |senders: Senders| ConduitSpec {
            tag_on_buffers: 0,
            segment_bytes: 4096,
            ..ConduitSpec::new(vec![ChannelSpec::new(8).shared(shared).senders(senders)])
        };
        let layout = RegionLayout::new(2, &spec_of(Senders::All)).unwrap();
        let region = Arc::new(HeapRegion::new(layout.total_bytes()).unwrap());
        // SAFETY: fresh zeroed region of the layout's size.
        unsafe { layout.init(region.base()) };
        let segs: Arc<[HeapRegion]> = vec![
            HeapRegion::new(4096).unwrap(),
            HeapRegion::new(4096).unwrap(),
        ]
        .into();
        let boot = Boot::Threads(Arc::new(ThreadsBoot::new(2)));
        let make = |rank: usize, senders: Senders| {
            // SAFETY: initialised region and segments kept alive by the owner; one
            // endpoint per rank.
            unsafe {
                MemConduit::new(Parts {
                    rank,
                    ranks: 2,
                    spec: &spec_of(senders),
                    layout: &layout,
                    rings: region.base(),
                    segments: segs.iter().map(HeapRegion::base).collect(),
                    segment_bytes: 4096,
                    owner: RegionOwner::Heap(region.clone(), segs.clone()),
                    boot: boot.clone(),
                })
            }
        };
        let receiver = make(0, Senders::Only(vec![0]));
        let rogue = make(1, Senders::All);
        let msg = |a: &'static [u64]| Message {
            tag: 1,
            flags: 0,
            args: a,
            payload: &[],
        };
        rogue.try_send(0, 0, &msg(&[13])).unwrap();
        receiver.try_send(0, 0, &msg(&[7])).unwrap();
        rogue.try_send(0, 0, &msg(&[14])).unwrap();
        let mut seen = Vec::new();
        let n = receiver
            .drain(0, 10, |f| -> Result<(), ConduitError> {
                seen.push((f.source(), f.args()[0]));
                Ok(())
            })
            .unwrap();
        assert_eq!(
            (n, seen),
            (1, vec![(0, 7)]),
            "only the permitted frame is delivered"
        );
        assert_eq!(receiver.dropped(0), 2, "both rogue frames counted");
        assert!(receiver.peek(0).unwrap().is_none());
        // And a rank that knows it may not send is refused before anything is written.
        let honest = make(1, Senders::Only(vec![0]));
        assert_eq!(
            honest.try_send(0, 0, &msg(&[1])),
            Err(ConduitError::NotPermitted {
                rank: 1,
                channel: 0
            })
        );
    }
}
