//! Where every ring of a job sits in one region. Offsets only: each process may map
//! the region at a different address.
//!
//! ```text
//!   0 ┌────────────────────────────────────────────────────┐
//!     │ RegionHeader: magic, ranks, channels, total bytes  │ 128 B
//! 128 ├────────────────────────────────────────────────────┤
//!     │ channel 0: ring (recv 0 ← send 0), (0 ← 1), …      │ ranks² rings of
//!     │            (recv 1 ← send 0), …                    │ 128 + 64·slots₀ B
//!     ├────────────────────────────────────────────────────┤
//!     │ channel 1 (shared): tail line (128 B), ring of     │ ranks rings of
//!     │            recv 0 ← anyone; recv 1 ← anyone; …     │ 256 + 64·slots₁ B
//!     ├────────────────────────────────────────────────────┤
//!     │ doorbells: one per rank, 256 B (see `Doorbell`)    │
//!     ├────────────────────────────────────────────────────┤
//!     │ own-ring directories (with own rings only)         │
//!     ├────────────────────────────────────────────────────┤
//!     │ Tag-On pools: (recv 0 ← send 0), (0 ← 1), …        │ ranks² pools
//!     └────────────────────────────────────────────────────┘
//! ```
//! `ring_offset(ch, receiver, sender) = 128 + base[ch] + (r·ranks + sender)·ring_bytes[ch]`
//! for a per-pair channel, `128 + base[ch] + r·(128 + ring_bytes[ch]) + 128` for a
//! shared one (its tail word, which the senders reserve slots with, is the line
//! before), `doorbell_offset(rank) = rings_end + 256·r`, where `r` is the receiver's
//! place among those the region holds: every rank, or one
//! ([`RegionLayout::receiver`], the queues a network fills).
//!
//! With *own rings* ([`PairRings`], for a host of many ranks) a per-sender channel has
//! instead, per receiver, `own` rings that senders take one at a time (a sender's
//! claim is a word of the receiver's directory), then one ring shared by the senders
//! without one (its tail line before it); and each receiver has `own + 1` Tag-On
//! pools, the last shared. A ring or pool is then named by its index at the receiver:
//! `0..own` the own ones, `own` the shared one.

use super::doorbell::{Doorbell, DOORBELL_BYTES};
use crate::conduit::ring::RawRing;
use crate::conduit::{ConduitError, ConduitSpec, PairRings};
use std::ptr::NonNull;

/// "amrqRGN1": marks an initialised region.
///
/// ```
/// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
/// # let layout = RegionLayout::new(2, &spec).unwrap();
/// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
/// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
/// # unsafe { layout.init(region.base()) };
/// use amrq::conduit::mem::{RegionHeader, REGION_MAGIC};
/// // SAFETY: an initialised region starts with its header.
/// let h = unsafe { &*region.base().as_ptr().cast::<RegionHeader>() };
/// assert_eq!((h.magic, h.ranks, h.channels), (REGION_MAGIC, 2, 2));
/// ```
pub const REGION_MAGIC: u64 = u64::from_le_bytes(*b"amrqRGN1");

/// The first bytes of a region.
///
/// ```
/// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
/// # let layout = RegionLayout::new(2, &spec).unwrap();
/// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
/// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
/// # unsafe { layout.init(region.base()) };
/// use amrq::conduit::mem::RegionHeader;
/// // SAFETY: an initialised region starts with its header.
/// let h = unsafe { &*region.base().as_ptr().cast::<RegionHeader>() };
/// assert_eq!(h.total_bytes as usize, layout.total_bytes());
/// ```
#[repr(C, align(128))]
pub struct RegionHeader {
    /// [`REGION_MAGIC`].
    pub magic: u64,
    /// Ranks in the job.
    pub ranks: u64,
    /// Channels.
    pub channels: u64,
    /// Bytes of the whole region.
    pub total_bytes: u64,
}

const HEADER_BYTES: usize = 128;
const _: () = {
    assert!(std::mem::size_of::<RegionHeader>() == HEADER_BYTES);
    assert!(std::mem::align_of::<RegionHeader>() == HEADER_BYTES);
};

/// How a channel's rings are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rings {
    /// One per (receiver, sender).
    PerSender,
    /// One per receiver, shared by every sender.
    Shared,
    /// Per receiver, the layout's own rings, then one shared by the other senders.
    Own,
}

/// Where a channel's rings start in a region, and their shape.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placed {
    slots: u64,
    rings: Rings,
    /// Offset of its first ring's block after the header.
    base: usize,
}

/// The offsets of every ring in a region.
///
/// ```
/// use amrq::conduit::{mem::RegionLayout, ChannelSpec, ConduitSpec};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(256), ChannelSpec::new(64)]);
/// let l = RegionLayout::new(2, &spec).unwrap();
/// assert_eq!(l.ring_offset(0, 0, 0), 128);
/// assert!(l.total_bytes() > 4 * (128 + 64 * 256));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionLayout {
    ranks: usize,
    /// The ranks whose rings, doorbells and pools the region holds: every rank, or
    /// one ([`RegionLayout::receiver`]).
    receivers: std::ops::Range<usize>,
    channels: Vec<Placed>,
    /// Own rings per receiver; `None`: every sender has its own.
    own: Option<usize>,
    doorbells: usize,
    directories: usize,
    tag_on: usize,
    tag_on_buffers: usize,
    tag_on_bytes: usize,
    total: usize,
}

impl RegionLayout {
    /// Bytes of the line that holds a shared ring's tail word.
    const TAIL_BYTES: usize = 128;

    /// The layout for `ranks` ranks of the channels and Tag-On pools of `spec`, with as
    /// many own rings per receiver as `spec.pair_rings` gives for `ranks`.
    ///
    /// ```
    /// use amrq::conduit::{mem::RegionLayout, ChannelSpec, ConduitSpec};
    /// let spec = |shared| ConduitSpec {
    ///     tag_on_buffers: 0,
    ///     ..ConduitSpec::new(vec![ChannelSpec::new(256).shared(shared)])
    /// };
    /// let pairs = RegionLayout::new(8, &spec(false)).unwrap();
    /// let shared = RegionLayout::new(8, &spec(true)).unwrap();
    /// assert!(shared.total_bytes() * 7 < pairs.total_bytes()); // ranks rings, not ranks²
    /// ```
    pub fn new(ranks: usize, spec: &ConduitSpec) -> Result<Self, ConduitError> {
        spec.check()?;
        if ranks == 0 {
            return Err(ConduitError::Setup("a job needs at least one rank".into()));
        }
        let own = match spec.pair_rings {
            PairRings::Every => None,
            PairRings::Own(k) => Some(k),
            PairRings::Auto => {
                let every = Self::with_own(ranks, 0..ranks, spec, None)?;
                if every.total <= PairRings::AUTO_BYTES {
                    None
                } else {
                    // Bytes per receiver with no own ring, and what each adds.
                    let none = Self::with_own(ranks, 0..ranks, spec, Some(0))?.total / ranks;
                    let one = Self::with_own(ranks, 0..ranks, spec, Some(1))?.total / ranks - none;
                    let fit = (PairRings::AUTO_BYTES / ranks).saturating_sub(none) / one.max(1);
                    Some(fit.max(PairRings::AUTO_LEAST))
                }
            }
        };
        Self::with_own(ranks, 0..ranks, spec, own.filter(|&k| k < ranks))
    }

    /// The layout of one receiver's queues in a job of `ranks`: a ring from each
    /// sender on each per-sender channel, one on each shared channel, its doorbell and a
    /// Tag-On pool per sender; the region of the queues a network fills (the UCX
    /// conduit's), which grows as `ranks`, not as `ranks²`. Rings, doorbells and pools
    /// of other receivers are not in it.
    ///
    /// ```
    /// use amrq::conduit::{mem::RegionLayout, ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(256), ChannelSpec::new(64).shared(true)]);
    /// let one = RegionLayout::receiver(1000, 7, &spec).unwrap();
    /// let all = RegionLayout::new(10, &spec).unwrap();
    /// assert!(one.total_bytes() < 100 * all.total_bytes() / 10); // 1000 senders, one receiver
    /// ```
    pub fn receiver(ranks: usize, me: usize, spec: &ConduitSpec) -> Result<Self, ConduitError> {
        spec.check()?;
        if me >= ranks {
            return Err(ConduitError::Setup(format!(
                "rank {me} of a job of {ranks}"
            )));
        }
        Self::with_own(ranks, me..me + 1, spec, None)
    }

    /// The layout of `receivers`' queues with `own` rings per receiver (`None`: one
    /// per sender).
    fn with_own(
        ranks: usize,
        receivers: std::ops::Range<usize>,
        spec: &ConduitSpec,
        own: Option<usize>,
    ) -> Result<Self, ConduitError> {
        let held = receivers.len();
        let (buffers, bytes) = (spec.tag_on_buffers, spec.tag_on_bytes);
        let overflow = || ConduitError::Setup("region size overflows".into());
        let mut channels = Vec::with_capacity(spec.channels.len());
        let mut total = HEADER_BYTES;
        for (ch, c) in spec.channels.iter().enumerate() {
            let s = c.slots;
            if !s.is_power_of_two() || !(2..=1 << 24).contains(&s) {
                return Err(ConduitError::Setup(format!(
                    "channel {ch}: ring of {s} slots; use a power of two from 2 to 2^24"
                )));
            }
            let rings = match (c.shared, own) {
                (true, _) => Rings::Shared,
                // The interrupt channel's hidden word names the channel: a ring per sender.
                (false, Some(_)) if spec.interrupt_channel != Some(ch) => Rings::Own,
                (false, _) => Rings::PerSender,
            };
            let carries = super::channel_max_payload(s, rings == Rings::Own);
            if let Some(need) = c.max_payload.filter(|&n| n > carries) {
                return Err(ConduitError::Setup(format!(
                    "channel {ch}: frames must carry {need} bytes, a ring of {s} slots carries {carries} at most; give it more slots"
                )));
            }
            channels.push(Placed {
                slots: s,
                rings,
                base: total - HEADER_BYTES,
            });
            let ring = RawRing::bytes(s);
            let block = match rings {
                Rings::PerSender => ranks.checked_mul(ring),
                Rings::Shared => Some(Self::TAIL_BYTES + ring),
                Rings::Own => own
                    .and_then(|k| k.checked_add(1))
                    .and_then(|n| n.checked_mul(ring))
                    .map(|b| b + Self::TAIL_BYTES),
            };
            total = block
                .and_then(|b| b.checked_mul(held))
                .and_then(|b| b.checked_add(total))
                .ok_or_else(overflow)?;
        }
        let doorbells = total;
        let directories = held
            .checked_mul(DOORBELL_BYTES)
            .and_then(|b| b.checked_add(total))
            .ok_or_else(overflow)?;
        let tag_on = held
            .checked_mul(Self::directory_bytes(own))
            .and_then(|b| b.checked_add(directories))
            .ok_or_else(overflow)?;
        let pools_each = own.map_or(Some(ranks), |k| k.checked_add(1));
        let total = pools_each
            .and_then(|n| n.checked_mul(held))
            .and_then(|pools| pools.checked_mul(super::tag_on::pool_bytes(buffers, bytes)))
            .and_then(|b| b.checked_add(tag_on))
            .ok_or_else(overflow)?;
        Ok(Self {
            ranks,
            receivers,
            channels,
            own,
            doorbells,
            directories,
            tag_on,
            tag_on_buffers: buffers,
            tag_on_bytes: bytes,
            total,
        })
    }

    /// Where `receiver`'s rings, doorbell and pools are among those the region holds.
    fn held(&self, receiver: usize) -> usize {
        // A real check: a rank the region does not hold would address memory past it.
        assert!(
            self.receivers.contains(&receiver),
            "rank {receiver} of a region that holds {:?}",
            self.receivers
        );
        receiver - self.receivers.start
    }

    /// The region holds `rank`'s rings, doorbell and pools.
    ///
    /// ```
    /// use amrq::conduit::{mem::RegionLayout, ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16)]);
    /// let one = RegionLayout::receiver(4, 2, &spec).unwrap();
    /// assert!(one.holds(2) && !one.holds(1));
    /// assert!(RegionLayout::new(4, &spec).unwrap().holds(3));
    /// ```
    pub fn holds(&self, rank: usize) -> bool {
        self.receivers.contains(&rank)
    }

    /// Bytes of a receiver's directory of `own` rings: a word per ring, in whole line
    /// pairs.
    fn directory_bytes(own: Option<usize>) -> usize {
        own.map_or(0, |k| (k * 8).div_ceil(128) * 128)
    }

    /// Own rings per receiver (and Tag-On pools besides the shared one); `None` where
    /// every sender has its own ring at every receiver.
    ///
    /// ```
    /// use amrq::conduit::{mem::RegionLayout, ChannelSpec, ConduitSpec, PairRings};
    /// let spec = |p| ConduitSpec { pair_rings: p, ..ConduitSpec::new(vec![ChannelSpec::new(256)]) };
    /// assert_eq!(RegionLayout::new(64, &spec(PairRings::Own(6))).unwrap().own_rings(), Some(6));
    /// assert_eq!(RegionLayout::new(4, &spec(PairRings::Own(6))).unwrap().own_rings(), None); // 6 ≥ 4 ranks
    /// assert_eq!(RegionLayout::new(64, &spec(PairRings::Every)).unwrap().own_rings(), None);
    /// ```
    pub fn own_rings(&self) -> Option<usize> {
        self.own
    }

    /// Channel `ch` has own rings and a shared one per receiver (see
    /// [`RegionLayout::own_rings`]).
    ///
    /// ```
    /// use amrq::conduit::{mem::RegionLayout, ChannelSpec, ConduitSpec, PairRings};
    /// let spec = ConduitSpec {
    ///     pair_rings: PairRings::Own(2),
    ///     ..ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(16).shared(true)])
    /// };
    /// let l = RegionLayout::new(8, &spec).unwrap();
    /// assert!(l.has_own_rings(0) && !l.has_own_rings(1));
    /// ```
    pub fn has_own_rings(&self, ch: usize) -> bool {
        self.channels[ch].rings == Rings::Own
    }

    /// The directory of `receiver`'s own rings in the region at `base`: word `i` is 0
    /// while own ring `i` is free, then 1 + the sender that took it (and never changes
    /// again). Empty without own rings.
    ///
    /// # Safety
    /// `base` is a region of this layout, valid for as long as the words are used.
    ///
    /// ```
    /// use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec, PairRings};
    /// let spec = ConduitSpec { pair_rings: PairRings::Own(3), ..ConduitSpec::new(vec![ChannelSpec::new(16)]) };
    /// let layout = RegionLayout::new(8, &spec).unwrap();
    /// let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// unsafe { layout.init(region.base()) };
    /// // SAFETY: the region is of this layout and outlives the words.
    /// let dir = unsafe { layout.directory(region.base(), 5) };
    /// assert_eq!(dir.len(), 3);
    /// ```
    pub unsafe fn directory<'a>(
        &self,
        base: NonNull<u8>,
        receiver: usize,
    ) -> &'a [crate::sync::AtomicU64] {
        let off = self.directories + self.held(receiver) * Self::directory_bytes(self.own);
        // SAFETY: each receiver's directory is `own` words inside the region, 128-byte
        // aligned; they are only accessed atomically.
        unsafe {
            std::slice::from_raw_parts(
                base.as_ptr().add(off).cast::<crate::sync::AtomicU64>(),
                self.own.unwrap_or(0),
            )
        }
    }

    /// Bytes of the whole region.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// assert_eq!(region_len(&region), layout.total_bytes());
    /// # fn region_len(_: &HeapRegion) -> usize { RegionLayout::new(2, &ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)])).unwrap().total_bytes() }
    /// ```
    pub fn total_bytes(&self) -> usize {
        self.total
    }

    /// Bytes of a Tag-On block (0: no pools).
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// assert_eq!(layout.tag_on_bytes(), spec.tag_on_bytes);
    /// ```
    pub fn tag_on_bytes(&self) -> usize {
        if self.tag_on_buffers == 0 {
            0
        } else {
            self.tag_on_bytes
        }
    }

    /// Ring slots of channel `ch`.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// assert_eq!((layout.slots(0), layout.slots(1)), (16, 64));
    /// ```
    pub fn slots(&self, ch: usize) -> u64 {
        self.channels[ch].slots
    }

    /// Channels.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// assert_eq!(layout.channels(), 2);
    /// ```
    pub fn channels(&self) -> usize {
        self.channels.len()
    }

    /// Channel `ch` has one ring per receiver that all senders share.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// assert!(!layout.is_shared(0) && layout.is_shared(1));
    /// ```
    pub fn is_shared(&self, ch: usize) -> bool {
        self.channels[ch].rings == Rings::Shared
    }

    /// Offset of the ring that carries `sender`'s frames to `receiver` on channel `ch`
    /// (of a shared channel: everyone's frames to `receiver`; of a channel with own
    /// rings: `sender` is the ring's index at the receiver, see the module doc).
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // Per pair on channel 0: each sender its own ring; channel 1: one ring per receiver.
    /// assert_ne!(layout.ring_offset(0, 1, 0), layout.ring_offset(0, 1, 1));
    /// assert_eq!(layout.ring_offset(1, 1, 0), layout.ring_offset(1, 1, 1));
    /// ```
    pub fn ring_offset(&self, ch: usize, receiver: usize, sender: usize) -> usize {
        let c = &self.channels[ch];
        let start = HEADER_BYTES + c.base;
        let ring = RawRing::bytes(c.slots);
        let receiver = self.held(receiver);
        match c.rings {
            Rings::PerSender => start + (receiver * self.ranks + sender) * ring,
            Rings::Shared => start + receiver * (Self::TAIL_BYTES + ring) + Self::TAIL_BYTES,
            Rings::Own => {
                let own = self.own.unwrap_or(0);
                let block = start + receiver * ((own + 1) * ring + Self::TAIL_BYTES);
                match sender < own {
                    true => block + sender * ring,
                    false => block + own * ring + Self::TAIL_BYTES,
                }
            }
        }
    }

    /// The tail word of shared channel `ch`'s ring at `receiver` (of a channel with own
    /// rings: of its shared ring), in the region at `base` (zero in a fresh region,
    /// like the ring's positions).
    ///
    /// # Safety
    /// `base` is a region of this layout, valid for as long as the reference is used,
    /// and `ch` is shared or has own rings.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// use std::sync::atomic::Ordering;
    /// // SAFETY: the region is of this layout and outlives the reference; channel 1 is shared.
    /// let tail = unsafe { layout.shared_tail(region.base(), 1, 0) };
    /// assert_eq!(tail.load(Ordering::Relaxed), 0);
    /// ```
    pub unsafe fn shared_tail<'a>(
        &self,
        base: NonNull<u8>,
        ch: usize,
        receiver: usize,
    ) -> &'a crate::sync::AtomicU64 {
        debug_assert!(self.channels[ch].rings != Rings::PerSender);
        let off = self.ring_offset(ch, receiver, self.own.unwrap_or(0)) - Self::TAIL_BYTES;
        // SAFETY: the tail line precedes the ring inside the region, 128-byte aligned;
        // it is only accessed atomically.
        unsafe { &*base.as_ptr().add(off).cast::<crate::sync::AtomicU64>() }
    }

    /// The doorbell of `rank` in the region at `base` (zero in a fresh region: nothing
    /// armed, nothing pending).
    ///
    /// # Safety
    /// `base` is a region of this layout, valid for as long as the reference is used.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// use std::sync::atomic::Ordering;
    /// // SAFETY: the region is of this layout and outlives the reference.
    /// let bell = unsafe { layout.doorbell(region.base(), 0) };
    /// assert_eq!(bell.summary.load(Ordering::Relaxed), 0);
    /// ```
    pub unsafe fn doorbell<'a>(&self, base: NonNull<u8>, rank: usize) -> &'a Doorbell {
        let at = self.doorbells + self.held(rank) * DOORBELL_BYTES;
        // SAFETY: the doorbells follow the rings inside the region, 128-byte aligned
        // (ring sizes are multiples of 128); they are only accessed atomically.
        unsafe { &*base.as_ptr().add(at).cast::<Doorbell>() }
    }

    /// The Tag-On pool for `sender`'s blocks to `receiver` in the region at `base`
    /// (with own rings: `sender` is the pool's index at the receiver, the last one
    /// shared by the senders without an own ring).
    ///
    /// # Safety
    /// `base` is a region of this layout, valid for as long as the pool is used.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // SAFETY: the region is of this layout and outlives the pool.
    /// let pool = unsafe { layout.tag_on_pool(region.base(), 1, 0) };
    /// assert_eq!((pool.buffers(), pool.bytes()), (spec.tag_on_buffers, spec.tag_on_bytes));
    /// ```
    pub unsafe fn tag_on_pool(
        &self,
        base: NonNull<u8>,
        receiver: usize,
        sender: usize,
    ) -> super::tag_on::TagOnPool {
        let size = super::tag_on::pool_bytes(self.tag_on_buffers, self.tag_on_bytes);
        let each = self.own.map_or(self.ranks, |k| k + 1);
        let off = self.tag_on + (self.held(receiver) * each + sender) * size;
        // SAFETY: pools follow the doorbells inside the region, each `size` bytes, a
        // multiple of 64 from a 128-aligned start; zero in a fresh region.
        unsafe {
            super::tag_on::TagOnPool::new(base.add(off), self.tag_on_buffers, self.tag_on_bytes)
        }
    }

    /// Writes the header. `base` must be zeroed memory of
    /// [`RegionLayout::total_bytes`] bytes that nobody else uses yet: a zeroed ring is
    /// a ring at position 0 (its sequence words match no position a consumer looks
    /// for until a producer writes one), so no ring is written, and a ring's pages are
    /// touched only once a sender uses it.
    ///
    /// # Safety
    /// `base` is 128-byte aligned, zeroed and valid for writes of `total_bytes()` bytes.
    ///
    /// ```
    /// use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// let layout = RegionLayout::new(3, &ConduitSpec::new(vec![ChannelSpec::new(16)])).unwrap();
    /// let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// // SAFETY: fresh, zeroed, page-aligned memory of the layout's size, used by nobody else.
    /// unsafe { layout.init(region.base()) };
    /// ```
    pub unsafe fn init(&self, base: NonNull<u8>) {
        // SAFETY: the caller's guarantee.
        unsafe { self.write_header(base) };
    }

    /// Writes the region's header.
    ///
    /// # Safety
    /// As for [`RegionLayout::init`].
    unsafe fn write_header(&self, base: NonNull<u8>) {
        let header = RegionHeader {
            magic: REGION_MAGIC,
            ranks: self.ranks as u64,
            channels: self.channels.len() as u64,
            total_bytes: self.total as u64,
        };
        // SAFETY: the header fits the first 128 aligned bytes (asserted above).
        unsafe { base.cast::<RegionHeader>().write(header) };
    }

    /// The ring `(ch, receiver ← sender)` of the region at `base`.
    ///
    /// # Safety
    /// `base` is a region of this layout, 128-byte aligned, valid while the ring is used.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// use amrq::conduit::ring::{Consumer, FrameHeader, Producer};
    /// // SAFETY: the region is of this layout, initialised, and outlives the ring.
    /// let ring = unsafe { layout.ring(region.base(), 0, 1, 0) }; // channel 0: rank 0 → rank 1
    /// let (mut p, mut c) = (Producer::new(16, 0), Consumer::new(16, 0, 4));
    /// assert!(p.try_push(&ring, FrameHeader::default(), &[5], b""));
    /// assert!(c.peek(&ring).unwrap().is_some());
    /// ```
    pub unsafe fn ring(
        &self,
        base: NonNull<u8>,
        ch: usize,
        receiver: usize,
        sender: usize,
    ) -> RawRing {
        let off = self.ring_offset(ch, receiver, sender);
        // SAFETY: offsets of this layout stay inside the region and are 128-aligned
        // (header and ring sizes are multiples of 128 bytes).
        unsafe { RawRing::new(base.add(off), self.channels[ch].slots) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::HeapRegion;
    use super::RegionLayout;
    use crate::conduit::ring::{Consumer, FrameHeader, Producer, RawRing};
    use crate::conduit::{ChannelSpec, ConduitSpec, PairRings};
    use std::ptr::NonNull;

    /// Bytes of the `len` bytes at `base` (page-aligned, mapped) that are in memory.
    fn resident_bytes(base: NonNull<u8>, len: usize) -> usize {
        const PAGE: usize = 4096;
        let mut pages = vec![0u8; len.div_ceil(PAGE)];
        // SAFETY: `base` starts a mapping of `len` bytes; one byte per page out.
        let rc = unsafe { libc::mincore(base.as_ptr().cast(), len, pages.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        pages.iter().filter(|&&p| p & 1 != 0).count() * PAGE
    }

    #[test]
    fn a_receivers_region_holds_its_rings_alone_and_grows_as_the_ranks() {
        let spec = ConduitSpec::new(vec![
            ChannelSpec::new(256),
            ChannelSpec::new(64).shared(true),
        ]);
        let me = 5;
        let size = |ranks| {
            RegionLayout::receiver(ranks, me, &spec)
                .unwrap()
                .total_bytes()
        };
        // A ring per sender on channel 0, one shared ring, a doorbell, a pool per sender.
        let per_sender = RawRing::bytes(256) + super::super::tag_on::pool_bytes(8, 4096);
        assert_eq!(size(128) - size(64), 64 * per_sender);
        let (ranks, layout) = (64, RegionLayout::receiver(64, me, &spec).unwrap());
        let region = HeapRegion::new(layout.total_bytes()).unwrap();
        // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
        unsafe { layout.init(region.base()) };
        // Written by the init: the header alone, no ring, no pool.
        let resident = resident_bytes(region.base(), layout.total_bytes());
        assert!(resident <= 4096, "{resident} bytes");
        for s in 0..ranks {
            // SAFETY: rank 5's rings, initialised; the region outlives them.
            let ring = unsafe { layout.ring(region.base(), 0, me, s) };
            let (mut p, mut c) = (Producer::new(256, 0), Consumer::new(256, 0, 64));
            assert!(c.peek(&ring).unwrap().is_none(), "ring {s} reads empty");
            assert!(p.try_push(&ring, FrameHeader::default(), &[s as u64], b""));
            assert!(c.peek(&ring).unwrap().is_some(), "ring {s} reads the frame");
        }
        assert!(
            RegionLayout::receiver(4, 4, &spec).is_err(),
            "no rank 4 of 4"
        );
    }

    #[test]
    fn a_payload_floor_the_ring_cannot_carry_is_refused_at_setup() {
        let spec = |slots, need| ConduitSpec::new(vec![ChannelSpec::new(slots).max_payload(need)]);
        assert!(RegionLayout::new(2, &spec(256, 4096)).is_ok());
        let e = RegionLayout::new(2, &spec(4, 4096))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("must carry 4096 bytes") && e.contains("more slots"),
            "{e}"
        );
    }

    #[test]
    fn own_rings_keep_a_host_of_many_ranks_within_the_auto_budget() {
        // The AM channels' shape: two per-sender channels of 256 slots, 8 Tag-On blocks.
        let spec = |p| ConduitSpec {
            pair_rings: p,
            ..ConduitSpec::new(vec![ChannelSpec::new(256), ChannelSpec::new(256)])
        };
        let every = |ranks| RegionLayout::new(ranks, &spec(PairRings::Every)).unwrap();
        let auto = |ranks| RegionLayout::new(ranks, &spec(PairRings::Auto)).unwrap();
        // Few ranks: every pair its own ring, as before.
        assert_eq!(auto(16), every(16));
        for ranks in [64, 128, 256, 1024] {
            let l = auto(ranks);
            let k = l.own_rings().expect("own rings beyond the budget");
            assert!(k >= PairRings::AUTO_LEAST, "{ranks} ranks: {k} own rings");
            if k > PairRings::AUTO_LEAST {
                assert!(l.total_bytes() <= PairRings::AUTO_BYTES, "{ranks} ranks");
            }
            // Linear in ranks: a receiver's share does not grow with them.
            assert!(l.total_bytes() / ranks <= auto(64).total_bytes() / 64 + 4096);
        }
        assert_eq!(auto(64).own_rings(), Some(6));
        assert!(every(64).total_bytes() > 8 * auto(64).total_bytes());
    }

    #[test]
    fn own_rings_and_the_shared_ring_do_not_overlap() {
        let spec = ConduitSpec {
            pair_rings: PairRings::Own(3),
            ..ConduitSpec::new(vec![
                ChannelSpec::new(16),
                ChannelSpec::new(32).shared(true),
                ChannelSpec::new(64),
            ])
        };
        let (ranks, l) = (5, RegionLayout::new(5, &spec).unwrap());
        let mut spans = Vec::new();
        for ch in 0..3 {
            let rings = if l.is_shared(ch) { 1 } else { 4 };
            for r in 0..ranks {
                for i in 0..rings {
                    let at = l.ring_offset(ch, r, i);
                    spans.push((at, at + RawRing::bytes(l.slots(ch)), "ring"));
                    if !l.is_shared(ch) && i == 3 || l.is_shared(ch) {
                        spans.push((at - 128, at, "tail"));
                    }
                }
            }
        }
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
        }
        assert!(spans.last().unwrap().1 <= l.doorbells);
        let region = HeapRegion::new(l.total_bytes()).unwrap();
        // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
        unsafe { l.init(region.base()) };
        // SAFETY: the region is of this layout and outlives the words and pools.
        let (dir, pool) = unsafe {
            (
                l.directory(region.base(), 4),
                l.tag_on_pool(region.base(), 4, 3),
            )
        };
        assert_eq!(dir.len(), 3);
        let end = region.base().as_ptr() as usize + l.total_bytes();
        assert!(pool.block(pool.buffers() - 1).unwrap() as usize + pool.bytes() <= end);
    }
}
