//! One rank's endpoint of the ring conduit: what it is made of ([`Parts`]), how it is
//! built from a [`ConduitSpec`], and what it offers beyond the [`Conduit`] trait
//! (mapped segments for tools, the interrupt view for the progress thread).

use super::channels::{Local, RxChannel, RxRing, Tx, TxRing, CHECK_SLOWLY};
use super::own_rings::{OwnClaims, Pair};
use super::{Doorbell, HeapRegion, InterruptRx, RegionLayout, TagOnPool};
use crate::bootstrap::Boot;
use crate::conduit::ring::{
    max_frame_slots, Consumer, ExpressGate, Producer, SharedProducer, ARGS_OFFSET, MAX_ARGS,
    SLOT_BYTES,
};
use crate::conduit::{Caps, Channel, ChannelCaps, ConduitSpec, Delivery, Rank};
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Keeps the memory of the rings and segments alive for as long as an endpoint uses it.
///
/// ```
/// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
/// # let layout = RegionLayout::new(2, &spec).unwrap();
/// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
/// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
/// # unsafe { layout.init(region.base()) };
/// use amrq::conduit::mem::RegionOwner;
/// use std::sync::Arc;
/// let segs: Arc<[HeapRegion]> = vec![HeapRegion::new(spec.segment_bytes).unwrap()].into();
/// let _owner = RegionOwner::Heap(Arc::new(region), segs); // what an endpoint keeps alive
/// ```
#[derive(Debug, Clone)]
pub enum RegionOwner {
    /// Heap memory shared by thread ranks: the rings, and one segment per rank.
    Heap(Arc<HeapRegion>, Arc<[HeapRegion]>),
    /// A job's shared memory object.
    Shm(Arc<crate::bootstrap::ShmJob>),
}

/// Everything an endpoint is built from.
///
/// ```
/// use amrq::bootstrap::{Boot, ThreadsBoot};
/// use amrq::conduit::mem::{HeapRegion, MemConduit, Parts, RegionLayout, RegionOwner};
/// use amrq::conduit::{ChannelSpec, Conduit, ConduitSpec};
/// use std::sync::Arc;
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16)]);
/// let layout = RegionLayout::new(1, &spec).unwrap();
/// let rings = Arc::new(HeapRegion::new(layout.total_bytes()).unwrap());
/// // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
/// unsafe { layout.init(rings.base()) };
/// let segs: Arc<[HeapRegion]> = vec![HeapRegion::new(spec.segment_bytes).unwrap()].into();
/// // SAFETY: the rings are initialised, the segment has spec.segment_bytes bytes, the owner
/// // keeps both alive, and this is rank 0's only endpoint.
/// let ep = unsafe {
///     MemConduit::new(Parts {
///         rank: 0,
///         ranks: 1,
///         spec: &spec,
///         layout: &layout,
///         rings: rings.base(),
///         segments: vec![segs[0].base()],
///         segment_bytes: spec.segment_bytes,
///         owner: RegionOwner::Heap(rings.clone(), segs.clone()),
///         boot: Boot::Threads(Arc::new(ThreadsBoot::new(1))),
///     })
/// };
/// assert_eq!(ep.size(), 1);
/// ```
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

// SAFETY: the raw pointers of an endpoint (rings, segments) point into memory that its
// owner handle keeps alive and that is shared by design (the ring protocol decides who
// touches which bytes); moving the endpoint to another thread changes nothing about
// that. Its `Rc` of pairs is never cloned: the endpoint moves it whole. It stays !Sync
// through its cells.
unsafe impl Send for MemConduit {}

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
    pub(super) rank: Rank,
    pub(super) size: usize,
    pub(super) caps: Caps,
    /// The send side of each (channel, destination) pair, at `ch * size + dest` (of an
    /// inlet: each (channel, source)).
    pub(super) tx: Box<[TxRing]>,
    /// With own rings: this rank's standing at each receiver, which `tx` points to
    /// (kept alive for it, in an `Rc`, which moves without asserting it is alone).
    pub(super) _pairs: std::rc::Rc<[Pair]>,
    /// Channels this endpoint sends on: `tx.len() / size` (0 for a view that only
    /// receives), so that a channel and destination in range index `tx` in bounds.
    pub(super) tx_channels: usize,
    pub(super) rx: Box<[RxChannel]>,
    pub(super) segments: Box<[NonNull<u8>]>,
    pub(super) segment_bytes: usize,
    /// This rank's doorbell.
    pub(super) doorbell: *const Doorbell,
    /// The doorbell bits One-poll has armed.
    pub(super) one_poll_armed: Cell<u64>,
    /// Empty polls in a row. Apart from `one_poll_armed`, so that a poll that took
    /// frames clears it with one store, and an unarmed poll is told by one test
    /// (callgrind: 1.9 instructions fewer per one-way AM, the whole iteration).
    pub(super) one_poll_idle: Cell<u32>,
    pub(super) boot: Boot,
    /// Bad frames of peers, recorded per sender (shared with the interrupt view).
    pub(super) faults: crate::conduit::FaultLog,
    pub(super) _owner: RegionOwner,
    /// The job across hosts this endpoint fronts (see `across.rs`); `None`: the job's
    /// ranks are all in this endpoint's region.
    pub(super) across: Option<super::across::AcrossOwner>,
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

/// What an endpoint does with the rings of its region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A rank of the job: sends into every rank's rings, reads its own.
    Rank,
    /// Reads its own rings only.
    Receiver,
    /// Pushes into its rank's rings on behalf of each sender.
    Inlet,
}

/// Largest payload a channel of `slots` slots carries with the most args.
pub(crate) fn max_payload(slots: u64) -> usize {
    let frame = (max_frame_slots(slots) as usize) * SLOT_BYTES;
    frame.saturating_sub(ARGS_OFFSET + MAX_ARGS * 8)
}

/// Moves the ring of shared channel `ch` to the end of channel `into`'s rings, its
/// hidden words naming senders among `senders`: a drain of `into` takes its frames, and
/// `ch` is left with no rings (its drains take nothing).
fn join_channel(
    rx: &mut [RxChannel],
    ch: Channel,
    into: Channel,
    senders: &crate::conduit::Senders,
    ranks: usize,
) {
    let mut joined = std::mem::replace(&mut rx[ch].rings, Box::new([]));
    rx[ch].busy.set(true);
    for ring in joined.iter_mut() {
        ring.joined_senders = (0..ranks).map(|src| senders.allows(src)).collect();
        ring.joined_taken = (0..ranks).map(|_| Cell::new(0)).collect();
    }
    let target = &mut rx[into];
    let mut rings = std::mem::replace(&mut target.rings, Box::new([])).into_vec();
    rings.extend(joined.into_vec());
    target.busy.set(rings.is_empty());
    target.rings = rings.into_boxed_slice();
}

/// Largest payload of a channel of `slots` slots, with own rings or not: the shared
/// ring's frames carry a hidden word more.
pub(crate) fn channel_max_payload(slots: u64, owns: bool) -> usize {
    max_payload(slots).saturating_sub(8 * usize::from(owns))
}

/// Most args a frame carries on a channel with own rings: its shared ring's frames
/// carry a hidden word more, which the ring takes beside [`MAX_ARGS`].
fn own_max_args(slots: u64) -> usize {
    let frame = (max_frame_slots(slots) as usize) * SLOT_BYTES;
    ((frame - ARGS_OFFSET) / 8 - 1).min(MAX_ARGS)
}

/// Most args a frame without payload carries on a channel of `slots` slots (of which
/// `hidden` words the conduit adds): every arg count the caps allow then fits the
/// ring, so the send path's check of the arg count covers the frame's size too.
fn max_args(slots: u64, hidden: usize) -> usize {
    let frame = (max_frame_slots(slots) as usize) * SLOT_BYTES;
    ((frame - ARGS_OFFSET) / 8).min(MAX_ARGS) - hidden
}

impl MemConduit {
    /// The endpoint of rank `parts.rank`.
    ///
    /// # Panics
    /// If `parts.layout` was not made from `parts.spec` or does not hold every rank.
    ///
    /// # Safety
    /// `parts.rings` holds an initialised ring region of `parts.layout`, each of
    /// `parts.segments` is valid for `parts.segment_bytes` bytes, `parts.owner` keeps all
    /// of it alive, and no other endpoint of this rank exists for it.
    ///
    /// ```
    /// // Made by threads::endpoints (heap regions) and shm::attach (a job's shared memory);
    /// // see Parts for a hand-made one.
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert_eq!(eps[1].rank(), 1);
    /// ```
    pub unsafe fn new(parts: Parts<'_>) -> Self {
        // SAFETY: the caller's guarantee.
        unsafe { Self::build(parts, Role::Rank) }
    }

    /// The receive side alone of rank `parts.rank` (no send side): over a region of
    /// its queues alone ([`RegionLayout::receiver`]), which a network fills through an
    /// [`MemConduit::inlet`].
    ///
    /// # Panics
    /// If the layout does not hold this rank's rings, or was not made from the spec.
    ///
    /// # Safety
    /// As for [`MemConduit::new`], but for the one inlet that may exist beside it.
    ///
    /// ```
    /// # use amrq::bootstrap::{Boot, ThreadsBoot};
    /// # use amrq::conduit::mem::{HeapRegion, MemConduit, Parts, RegionLayout, RegionOwner};
    /// # use amrq::conduit::{ChannelSpec, Conduit, ConduitSpec, Message, ReceivedFrame};
    /// # use std::sync::Arc;
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16)]);
    /// let layout = RegionLayout::receiver(3, 2, &spec).unwrap(); // rank 2's queues
    /// let rings = Arc::new(HeapRegion::new(layout.total_bytes()).unwrap());
    /// // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// unsafe { layout.init(rings.base()) };
    /// let seg = HeapRegion::new(spec.segment_bytes).unwrap();
    /// let parts = |boot| Parts {
    ///     rank: 2, ranks: 3, spec: &spec, layout: &layout, rings: rings.base(),
    ///     segments: vec![seg.base(); 3], segment_bytes: spec.segment_bytes,
    ///     owner: RegionOwner::Heap(rings.clone(), Arc::new([])), boot,
    /// };
    /// let boot = Boot::Threads(Arc::new(ThreadsBoot::new(3)));
    /// // SAFETY: the region is initialised and kept alive by the owners, the segment
    /// // outlives both endpoints; one receiver and one inlet for rank 2.
    /// let (me, inlet) = unsafe {
    ///     (MemConduit::receiver(parts(boot.clone())), MemConduit::inlet(parts(boot)))
    /// };
    /// // Rank 0's frame, as a network delivers it: through the inlet's side to rank 0.
    /// inlet.try_send(0, 0, &Message { tag: 5, args: &[1], ..Message::default() }).unwrap();
    /// let f = me.peek(0).unwrap().unwrap();
    /// assert_eq!((f.source(), f.tag()), (0, 5));
    /// ```
    pub unsafe fn receiver(parts: Parts<'_>) -> Self {
        // SAFETY: the caller's guarantee.
        unsafe { Self::build(parts, Role::Receiver) }
    }

    /// The senders into rank `parts.rank`'s queues, all in one endpoint: its send side
    /// "to" rank `s` pushes into `parts.rank`'s ring from `s`, with `s`'s permissions,
    /// hidden word and Tag-On pool (the frames a network delivers from `s`). Its
    /// receive side is empty. See [`MemConduit::receiver`].
    ///
    /// # Panics
    /// If the layout does not hold this rank's rings, has own rings, or was not made
    /// from the spec.
    ///
    /// # Safety
    /// As for [`MemConduit::receiver`]; it is the only inlet of that rank.
    pub unsafe fn inlet(parts: Parts<'_>) -> Self {
        // SAFETY: the caller's guarantee.
        unsafe { Self::build(parts, Role::Inlet) }
    }

    /// [`MemConduit::new`] in `role`.
    ///
    /// # Safety
    /// As for [`MemConduit::new`].
    unsafe fn build(parts: Parts<'_>, role: Role) -> Self {
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
        // A rank sends into every rank's rings; an inlet fills its rank's rings as
        // each sender, which shares no ring it could move out of.
        match role {
            Role::Rank => assert!(
                layout.holds(0) && layout.holds(ranks - 1),
                "a region of every rank"
            ),
            Role::Receiver => assert!(layout.holds(rank), "a region that holds this rank"),
            Role::Inlet => assert!(
                layout.holds(rank) && layout.own_rings().is_none(),
                "a region of this rank's rings, one per sender"
            ),
        }
        let interrupt_channel = spec.interrupt_channel;
        let mut tx = Vec::with_capacity(channels * ranks);
        let own = layout.own_rings();
        // Where senders share rings until they take an own one: this sender's standing
        // at each receiver, and the pool index of the shared Tag-On pool.
        let pairs: std::rc::Rc<[Pair]> = match own {
            Some(k) => (0..ranks)
                .map(|dest| Pair {
                    sent: Cell::new(0),
                    own: Cell::new(Pair::NONE_YET),
                    // SAFETY: caller guarantees `base` is a live region of `layout`.
                    directory: unsafe { layout.directory(base, dest) }.as_ptr(),
                    own_rings: k,
                    // SAFETY: as above.
                    pools: unsafe { layout.tag_on_pool(base, dest, 0) },
                    claim: rank as u64 + 1,
                })
                .collect(),
            None => std::rc::Rc::new([]),
        };
        // The pool of a sender's frames at a receiver where no ring names it: its own
        // pool, or with own rings the shared one.
        let pool_index = |sender: Rank| own.unwrap_or(sender);
        // SAFETY: caller guarantees `base` is a live region of `layout`.
        let pools: Box<[TagOnPool]> = (0..ranks)
            .map(|src| unsafe { layout.tag_on_pool(base, rank, pool_index(src)) })
            .collect();
        let mut rx = Vec::with_capacity(channels);
        let asymmetric = spec.doorbell_fence.asymmetric_here(ranks);
        for (ch, c) in spec.channels.iter().enumerate() {
            let (who, slots, shared) = (&c.senders, c.slots, c.shared);
            let owns = layout.has_own_rings(ch);
            let notify_bit = match c.rings_doorbell() {
                // A channel received with another rings that one's bit.
                true => ConduitSpec::doorbell_bit(c.received_with.unwrap_or(ch)),
                false => 0,
            };
            let max_args = match owns {
                true => own_max_args(slots),
                false => max_args(slots, usize::from(shared)),
            };
            let senders_to = match role {
                Role::Rank => 0..ranks,
                Role::Receiver => 0..0,
                Role::Inlet => 0..ranks,
            };
            for to in senders_to {
                // A rank's send side to `to`, or an inlet's from `to` into this rank.
                let (rank, dest) = match role {
                    Role::Inlet => (to, rank),
                    _ => (rank, to),
                };
                // SAFETY: caller guarantees `base` is a live region of `layout`: the
                // tail words and rings it names are inside it.
                let (prod, ring) = unsafe {
                    if shared {
                        let tail = layout.shared_tail(base, ch, dest);
                        let prod = SharedProducer::new(0);
                        let ring = layout.ring(base, ch, dest, 0);
                        (
                            Tx::Shared {
                                prod,
                                tail,
                                me: rank as u64,
                            },
                            ring,
                        )
                    } else if let (true, Some(k)) = (owns, own) {
                        let sharing = Tx::Sharing {
                            prod: SharedProducer::new(0),
                            tail: layout.shared_tail(base, ch, dest),
                            me: rank as u64,
                            pair: &pairs[dest],
                            own_rings: base.add(layout.ring_offset(ch, dest, 0)),
                        };
                        (sharing, layout.ring(base, ch, dest, k))
                    } else {
                        let ring = layout.ring(base, ch, dest, rank);
                        (Tx::Own(Producer::new(slots, 0)), ring)
                    }
                };
                // The interrupt channel carries flagged frames of other channels only
                // (`send_flagged` writes it): no frame is sent into it directly.
                let permitted = who.allows(rank) && interrupt_channel != Some(ch);
                let own_ring = matches!(prod, Tx::Own(_));
                tx.push(TxRing {
                    ring: Cell::new(ring),
                    prod: Local::new(prod),
                    max_args,
                    permitted,
                    own_args_below: Cell::new(match permitted && own_ring {
                        true => max_args + 1,
                        false => 0,
                    }),
                    notify_bit,
                    // SAFETY: as above.
                    doorbell: unsafe { layout.doorbell(base, dest) },
                    light_bit: if asymmetric { notify_bit } else { 0 },
                    armed_word: Cell::new(&CHECK_SLOWLY),
                    // SAFETY: as above.
                    pool: Cell::new(unsafe { layout.tag_on_pool(base, dest, pool_index(rank)) }),
                    pool_cursor: Cell::new(0),
                });
            }
            let ring_of = |index: usize| {
                let hidden = shared || interrupt_channel == Some(ch);
                let permitted = shared || who.allows(index);
                RxRing {
                    // SAFETY: as above.
                    ring: unsafe { layout.ring(base, ch, rank, index) },
                    cons: Local::new(Consumer::new(slots, 0, Consumer::default_batch(slots))),
                    shut: Cell::new(false),
                    source: Cell::new(match shared {
                        true => RxRing::NO_SOURCE,
                        false => index,
                    }),
                    pool: None,
                    own_index: None,
                    own_claims: None,
                    permitted: Cell::new(permitted),
                    hidden,
                    hidden_ranks: None,
                    joined_senders: Box::new([]),
                    joined_taken: Box::new([]),
                    gate: Cell::new(match permitted && !hidden {
                        true => ExpressGate::OPEN,
                        false => ExpressGate::SHUT,
                    }),
                }
            };
            let rings: Box<[RxRing]> = match (shared, owns.then_some(own).flatten()) {
                _ if role == Role::Inlet => Box::new([]),
                (true, _) => Box::new([ring_of(0)]),
                (false, None) => (0..ranks).map(ring_of).collect(),
                (false, Some(k)) => (0..=k)
                    .map(|index| {
                        let mut r = ring_of(index);
                        r.source.set(RxRing::NO_SOURCE);
                        if index < k {
                            // Read once a sender has moved to it (`open_own_ring`).
                            r.shut.set(true);
                            r.permitted.set(false);
                            r.gate.set(ExpressGate::SHUT);
                            r.own_index = Some(index);
                            // SAFETY: as above.
                            r.pool = Some(unsafe { layout.tag_on_pool(base, rank, index) });
                        } else {
                            r.hidden = true;
                            r.cons.with(|c| *c = c.with_hidden_word());
                            r.permitted.set(true); // each frame checked by the sender it names
                            r.gate.set(ExpressGate::SHUT);
                            r.own_claims = Some(Box::new(OwnClaims {
                                senders: (0..ranks).map(|src| who.allows(src)).collect(),
                                // SAFETY: as above.
                                directory: unsafe { layout.directory(base, rank) }.as_ptr(),
                                own_rings: k,
                            }));
                        }
                        r
                    })
                    .collect(),
            };
            rx.push(RxChannel {
                busy: Cell::new(rings.is_empty()),
                rings,
                cursor: Cell::new(0),
                burst: Cell::new(0),
                dropped: Cell::new(0),
                moved: false,
                shared_senders: match shared {
                    true => (0..ranks).map(|src| who.allows(src)).collect(),
                    false => Box::new([]),
                },
                pools: pools.clone(),
            });
        }
        for (ch, c) in spec.channels.iter().enumerate() {
            if let Some(into) = c.received_with {
                join_channel(&mut rx, ch, into, &c.senders, ranks);
            }
        }
        // `try_send_quick` indexes `tx` unchecked on this.
        let tx_channels = if role == Role::Receiver { 0 } else { channels };
        assert_eq!(
            tx.len(),
            tx_channels * ranks,
            "one send side per channel and rank"
        );
        let caps = Caps {
            ranks,
            segment_bytes,
            tag_on_bytes: layout.tag_on_bytes(),
            max_args: MAX_ARGS,
            channels: spec
                .channels
                .iter()
                .enumerate()
                .map(|(ch, c)| ChannelCaps {
                    senders: c.senders.clone(),
                    shared: c.shared,
                    max_args: match layout.has_own_rings(ch) {
                        true => own_max_args(c.slots),
                        false => max_args(c.slots, usize::from(c.shared)),
                    },
                    notify: c.rings_doorbell(),
                    interrupt: c.delivery == Delivery::Interrupt,
                    slots: c.slots,
                    max_payload: channel_max_payload(c.slots, layout.has_own_rings(ch)),
                    received_with: c.received_with,
                })
                .collect(),
            flags: crate::conduit::CapFlags {
                peer_memory_mapped: true,
                put_get: true,
                atomics: true,
            },
            interrupt_channel,
        };
        // SAFETY: as above.
        let doorbell = unsafe { layout.doorbell(base, rank) };
        if asymmetric {
            // The channels this rank arms with `membarrier`: all that ring its doorbell
            // but the Interrupt ones (armed by the progress thread after every
            // interrupt: their senders keep their fence, and it pays no system call).
            let heavy = spec
                .channels
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.rings_doorbell()
                        && c.delivery != Delivery::Interrupt
                        && c.received_with.is_none()
                })
                .fold(0, |bits, (ch, _)| bits | ConduitSpec::doorbell_bit(ch));
            // Relaxed: a sender that reads the bits before this store fences (safe
            // either way); this rank arms only after it, in program order.
            doorbell.heavy.store(heavy, Ordering::Relaxed);
        }
        Self {
            rank,
            size: ranks,
            caps,
            tx_channels,
            tx: tx.into_boxed_slice(),
            _pairs: pairs,
            rx: rx.into_boxed_slice(),
            segments: segments.into_boxed_slice(),
            segment_bytes,
            doorbell,
            one_poll_armed: Cell::new(0),
            one_poll_idle: Cell::new(0),
            boot,
            faults: crate::conduit::FaultLog::new(rank),
            _owner: owner,
            across: None,
        }
    }

    /// The registered segment of `rank` as mapped in this process (every segment of a
    /// job on one host is mapped everywhere). For measurements and tools that must
    /// touch peer memory directly; the layers above the conduit never do.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// let (theirs, len) = eps[0].mapped_segment(1).unwrap();
    /// assert_eq!((theirs, len), eps[1].segment()); // one host: every segment mapped here
    /// assert!(eps[0].mapped_segment(2).is_none());
    /// ```
    pub fn mapped_segment(&self, rank: Rank) -> Option<(NonNull<u8>, usize)> {
        self.segments.get(rank).map(|&p| (p, self.segment_bytes))
    }

    /// The doorbell bits One-poll, or a poller through [`Conduit::polled`](crate::conduit::Conduit::polled)
    /// (`Am::poll`), has armed: nonzero once an idle receiver polls one word instead of
    /// its rings. For tests and measurements.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true)]);
    /// let eps = threads::endpoints_for(1, &spec).unwrap();
    /// let set = eps[0].poll_set(&[0]).unwrap();
    /// assert_eq!(eps[0].one_poll_armed(), 0);
    /// let mut polls = 0;
    /// while eps[0].one_poll_armed() == 0 && polls < 1_000_000 {
    ///     assert!(eps[0].one_poll(&set).unwrap().is_none()); // idle polls arm the doorbell
    ///     polls += 1;
    /// }
    /// assert_ne!(eps[0].one_poll_armed(), 0, "still unarmed after {polls} idle polls");
    /// ```
    pub fn one_poll_armed(&self) -> u64 {
        self.one_poll_armed.get()
    }

    /// [`Conduit::take_interrupts`](crate::conduit::Conduit::take_interrupts): the
    /// receive sides of the Interrupt channels move into a view (an endpoint with no
    /// senders), so that each consumer state still has one owner.
    pub(super) fn interrupts_view(&mut self) -> Option<InterruptRx> {
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
            _pairs: std::rc::Rc::new([]),
            tx_channels: 0,
            rx,
            segments: self.segments.clone(),
            segment_bytes: self.segment_bytes,
            doorbell: self.doorbell,
            one_poll_armed: Cell::new(0),
            one_poll_idle: Cell::new(0),
            boot: self.boot.clone(),
            faults: self.faults.clone(),
            _owner: self._owner.clone(),
            across: None,
        };
        Some(InterruptRx::new(view, channels))
    }

    /// The log of peers' faults this endpoint records into.
    pub(crate) fn fault_log(&self) -> crate::conduit::FaultLog {
        self.faults.clone()
    }

    /// Publishes each ring's head as soon as a frame is released, not in batches: for
    /// local queues whose producer is a network peer, which learns of the room only
    /// from credits the receiver sends when it sees the head move.
    pub(crate) fn publish_heads_at_once(&mut self) {
        for chan in self.rx.iter_mut() {
            for r in chan.rings.iter_mut() {
                let (n, head) = r.cons.with(|c| (c.nslots(), c.head()));
                let cons = Consumer::new(n, head, 1);
                r.cons = Local::new(match r.own_claims.is_some() {
                    true => cons.with_hidden_word(),
                    false => cons,
                });
            }
        }
    }

    /// The doorbell word a sleeper of this rank waits on.
    pub(crate) fn wake_word(&self) -> &std::sync::atomic::AtomicU32 {
        &self.doorbell().wake
    }

    /// This rank's doorbell.
    pub(super) fn doorbell(&self) -> &super::Doorbell {
        // SAFETY: this rank's doorbell, inside the region the owner keeps alive.
        unsafe { &*self.doorbell }
    }

    /// The bootstraps of every job this endpoint is a rank of, and its rank in each:
    /// one, or both halves' of a job across hosts. A clone keeps a job's shared memory
    /// from saying this rank left until it is dropped, so that a failure recorded
    /// first is what the others see.
    ///
    /// ```
    /// use amrq::conduit::threads;
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// let boots = eps[1].boots();
    /// assert_eq!(boots.len(), 1);
    /// assert_eq!(boots[0].1, 1); // rank 1 of its one job
    /// ```
    pub fn boots(&self) -> Vec<(Boot, Rank)> {
        match &self.across {
            Some(a) => {
                let local = a.cluster.local();
                vec![
                    (local.boot.clone(), local.rank),
                    (self.boot.clone(), self.rank),
                ]
            }
            None => vec![(self.boot.clone(), self.rank)],
        }
    }

    /// The bootstrap this endpoint's job uses.
    ///
    /// ```
    /// use amrq::conduit::threads;
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert!(eps[0].boot().check_peers().is_ok());
    /// ```
    pub fn boot(&self) -> &Boot {
        &self.boot
    }
}
