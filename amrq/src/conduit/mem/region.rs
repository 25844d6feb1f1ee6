//! Where every ring of a job sits in one region, and the heap region of the `threads`
//! conduit. Offsets only: each process may map the region at a different address.
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
//!     │ Tag-On pools: (recv 0 ← send 0), (0 ← 1), …        │ ranks² pools
//!     └────────────────────────────────────────────────────┘
//! ```
//! `ring_offset(ch, receiver, sender) = 128 + base[ch] + (receiver·ranks + sender)·ring_bytes[ch]`
//! for a per-pair channel, `128 + base[ch] + receiver·(128 + ring_bytes[ch]) + 128` for a
//! shared one (its tail word, which the senders reserve slots with, is the line
//! before), `doorbell_offset(rank) = rings_end + 256·rank`.

use crate::conduit::ring::RawRing;
use crate::conduit::{ConduitError, ConduitSpec};
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

/// A rank's doorbell, for One-poll: the receiver arms channels when it has gone idle;
/// a sender that publishes a frame on an armed channel then sets that channel's bit in
/// the summary, so the idle receiver polls one word instead of every ring.
///
/// Bit `ch % 64` stands for channel `ch`: One-poll channels sharing a bit only cost a
/// scan; an Interrupt channel has its bit to itself ([`ConduitSpec::check`]).
///
/// ```text
///   0 armed     8 heavy     16 … 127 (pad)        senders read this line on every send
/// 128 summary 136 wake 140 (pad) 144 sleepers …   senders write it only when armed
/// ```
///
/// ```
/// use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
/// use std::sync::atomic::Ordering;
/// let layout = RegionLayout::new(2, &ConduitSpec::new(vec![ChannelSpec::new(16)])).unwrap();
/// let region = HeapRegion::new(layout.total_bytes()).unwrap();
/// // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
/// unsafe { layout.init(region.base()) };
/// // SAFETY: the region is of this layout and outlives the reference.
/// let bell = unsafe { layout.doorbell(region.base(), 1) };
/// assert_eq!(bell.armed.load(Ordering::Relaxed), 0); // nothing armed in a fresh region
/// ```
#[repr(C, align(128))]
pub struct Doorbell {
    /// Channels armed by the receiver (written by it, read by senders).
    pub armed: crate::sync::AtomicU64,
    /// Channels whose arming issues `membarrier`, so that their senders leave out their
    /// fence (the asymmetric handshake of [`crate::conduit::doorbell`]). Written once
    /// by the receiver before it first arms, read by senders with `armed`.
    pub heavy: crate::sync::AtomicU64,
    _pad: [u8; 112],
    /// Channels on which a frame arrived while armed (set by senders, cleared by the
    /// receiver).
    pub summary: crate::sync::AtomicU64,
    /// Bumped by a sender that rang an armed channel someone sleeps on: the futex word
    /// the receiver (a blocking wait, or its progress thread) sleeps on (shared, not
    /// private).
    pub wake: std::sync::atomic::AtomicU32,
    _pad3: u32,
    /// Armed channels whose receiver sleeps rather than polls the summary: their
    /// senders also bump `wake` and wake it (set and cleared by the receiver).
    pub sleepers: crate::sync::AtomicU64,
    _pad2: [u8; 104],
}

impl Doorbell {
    /// Arms channels `bits` for a receiver about to sleep: its senders will ring and
    /// wake it. Returns the futex value to sleep on and the bits this call armed (bits
    /// armed already, by One-poll, stay armed after [`Doorbell::disarm_sleeper`]). The
    /// receiver must look at its channels once more before it sleeps: either a sender
    /// saw the arm, or that look sees the sender's frame. `alone`: the receiver is its
    /// only sender.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// use std::sync::atomic::Ordering;
    /// // SAFETY: as above.
    /// let bell = unsafe { layout.doorbell(region.base(), 0) };
    /// let (w, mine) = bell.arm_sleeper(0b1, false);
    /// assert_eq!((mine, bell.armed.load(Ordering::Relaxed) & 1), (0b1, 1));
    /// bell.disarm_sleeper(0b1, mine);
    /// # let _ = w;
    /// ```
    pub fn arm_sleeper(&self, bits: u64, alone: bool) -> (u32, u64) {
        use std::sync::atomic::Ordering;
        // ORDERING: Acquire pairs with the senders' Release increment of `wake`.
        let w = self.wake.load(Ordering::Acquire);
        // A rank alone on its host is its only sender, in program order: no
        // `membarrier` (an interrupt to every core) when it goes to sleep.
        let heavy = if alone {
            0
        } else {
            self.heavy.load(Ordering::Relaxed)
        };
        (
            w,
            crate::conduit::doorbell::arm(&self.armed, Some(&self.sleepers), bits, heavy),
        )
    }

    /// Sleeps until a sender bumps `wake` past `w` or `timeout` passes.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// use std::time::Duration;
    /// // SAFETY: as above.
    /// let bell = unsafe { layout.doorbell(region.base(), 0) };
    /// let (w, mine) = bell.arm_sleeper(0b1, false);
    /// bell.sleep(w, Duration::from_millis(1)); // nobody rings: back after 1 ms
    /// bell.disarm_sleeper(0b1, mine);
    /// ```
    pub fn sleep(&self, w: u32, timeout: std::time::Duration) {
        crate::util::futex::wait(&self.wake, w, timeout);
    }

    /// Undoes [`Doorbell::arm_sleeper`] (`bits`, and `mine` as it returned).
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// use std::sync::atomic::Ordering;
    /// // SAFETY: as above.
    /// let bell = unsafe { layout.doorbell(region.base(), 0) };
    /// let (_, mine) = bell.arm_sleeper(0b11, false);
    /// bell.disarm_sleeper(0b11, mine);
    /// assert_eq!(bell.armed.load(Ordering::Relaxed), 0);
    /// ```
    pub fn disarm_sleeper(&self, bits: u64, mine: u64) {
        use std::sync::atomic::Ordering;
        self.sleepers.fetch_and(!bits, Ordering::Relaxed);
        self.armed.fetch_and(!mine, Ordering::Relaxed);
        self.summary.fetch_and(!mine, Ordering::Relaxed);
    }
}

const DOORBELL_BYTES: usize = 256;
const _: () = {
    assert!(std::mem::size_of::<Doorbell>() == DOORBELL_BYTES);
    assert!(std::mem::offset_of!(Doorbell, heavy) == 8);
    assert!(std::mem::offset_of!(Doorbell, summary) == 128);
    assert!(std::mem::offset_of!(Doorbell, wake) == 136);
    assert!(std::mem::offset_of!(Doorbell, sleepers) == 144);
};

/// Where a channel's rings start in a region, and their shape.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placed {
    slots: u64,
    shared: bool,
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
    channels: Vec<Placed>,
    doorbells: usize,
    tag_on: usize,
    tag_on_buffers: usize,
    tag_on_bytes: usize,
    total: usize,
}

impl RegionLayout {
    /// Bytes of the line that holds a shared ring's tail word.
    const TAIL_BYTES: usize = 128;

    /// The layout for `ranks` ranks of the channels and Tag-On pools of `spec`.
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
        let (buffers, bytes) = (spec.tag_on_buffers, spec.tag_on_bytes);
        if ranks == 0 {
            return Err(ConduitError::Setup("a job needs at least one rank".into()));
        }
        let mut channels = Vec::with_capacity(spec.channels.len());
        let mut total = HEADER_BYTES;
        for (ch, c) in spec.channels.iter().enumerate() {
            let s = c.slots;
            if !s.is_power_of_two() || !(2..=1 << 24).contains(&s) {
                return Err(ConduitError::Setup(format!(
                    "channel {ch}: ring of {s} slots; use a power of two from 2 to 2^24"
                )));
            }
            if let Some(need) = c.max_payload.filter(|&n| n > super::max_payload(s)) {
                return Err(ConduitError::Setup(format!(
                    "channel {ch}: frames must carry {need} bytes, a ring of {s} slots carries {} at most; give it more slots",
                    super::max_payload(s)
                )));
            }
            channels.push(Placed {
                slots: s,
                shared: c.shared,
                base: total - HEADER_BYTES,
            });
            let (rings, ring_bytes) = if c.shared {
                (Some(ranks), RawRing::bytes(s) + Self::TAIL_BYTES)
            } else {
                (ranks.checked_mul(ranks), RawRing::bytes(s))
            };
            total = rings
                .and_then(|n| n.checked_mul(ring_bytes))
                .and_then(|b| b.checked_add(total))
                .ok_or_else(|| ConduitError::Setup("region size overflows".into()))?;
        }
        let overflow = || ConduitError::Setup("region size overflows".into());
        let doorbells = total;
        let tag_on = ranks
            .checked_mul(DOORBELL_BYTES)
            .and_then(|b| b.checked_add(total))
            .ok_or_else(overflow)?;
        let total = ranks
            .checked_mul(ranks)
            .and_then(|pairs| pairs.checked_mul(super::tag_on::pool_bytes(buffers, bytes)))
            .and_then(|b| b.checked_add(tag_on))
            .ok_or_else(overflow)?;
        Ok(Self {
            ranks,
            channels,
            doorbells,
            tag_on,
            tag_on_buffers: buffers,
            tag_on_bytes: bytes,
            total,
        })
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
        self.channels[ch].shared
    }

    /// Offset of the ring that carries `sender`'s frames to `receiver` on channel `ch`
    /// (of a shared channel: everyone's frames to `receiver`).
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
        if c.shared {
            start + receiver * (Self::TAIL_BYTES + ring) + Self::TAIL_BYTES
        } else {
            start + (receiver * self.ranks + sender) * ring
        }
    }

    /// The tail word of shared channel `ch`'s ring at `receiver`, in the region at
    /// `base` (zero in a fresh region, like the ring's positions).
    ///
    /// # Safety
    /// `base` is a region of this layout, valid for as long as the reference is used,
    /// and `ch` is shared.
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
        debug_assert!(self.channels[ch].shared && receiver < self.ranks);
        let off = self.ring_offset(ch, receiver, 0) - Self::TAIL_BYTES;
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
        debug_assert!(rank < self.ranks);
        // SAFETY: the doorbells follow the rings inside the region, 128-byte aligned
        // (ring sizes are multiples of 128); they are only accessed atomically.
        unsafe {
            &*base
                .as_ptr()
                .add(self.doorbells + rank * DOORBELL_BYTES)
                .cast::<Doorbell>()
        }
    }

    /// The Tag-On pool for `sender`'s blocks to `receiver` in the region at `base`.
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
        let off = self.tag_on + (receiver * self.ranks + sender) * size;
        // SAFETY: pools follow the doorbells inside the region, each `size` bytes, a
        // multiple of 64 from a 128-aligned start; zero in a fresh region.
        unsafe {
            super::tag_on::TagOnPool::new(base.add(off), self.tag_on_buffers, self.tag_on_bytes)
        }
    }

    /// Writes the header and initialises every ring. `base` must be zeroed memory of
    /// [`RegionLayout::total_bytes`] bytes that nobody else uses yet.
    ///
    /// # Safety
    /// `base` is 128-byte aligned and valid for writes of `total_bytes()` bytes.
    ///
    /// ```
    /// use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// let layout = RegionLayout::new(3, &ConduitSpec::new(vec![ChannelSpec::new(16)])).unwrap();
    /// let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// // SAFETY: fresh, zeroed, page-aligned memory of the layout's size, used by nobody else.
    /// unsafe { layout.init(region.base()) };
    /// ```
    pub unsafe fn init(&self, base: NonNull<u8>) {
        for r in 0..self.ranks {
            // SAFETY: the caller's guarantee covers every ring's bytes.
            unsafe { self.init_rings_of(base, r) };
        }
        // SAFETY: as above.
        unsafe { self.write_header(base) };
    }

    /// [`RegionLayout::init`] for a region in which only `receiver` reads rings (the
    /// UCX conduit's local queues: a frame from any peer lands in `receiver`'s ring
    /// from that peer): the header and `receiver`'s rings, nothing else, so that the
    /// rest of a [`HeapRegion::sparse`] mapping is never touched. Of the P² rings laid
    /// out, the P in use cost memory (and set-up time): 2 MiB of 128 MiB at P = 64.
    ///
    /// # Safety
    /// As for [`RegionLayout::init`]; and no ring of another receiver is ever used.
    ///
    /// ```
    /// use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// let layout = RegionLayout::new(64, &ConduitSpec::new(vec![ChannelSpec::new(256)])).unwrap();
    /// let region = HeapRegion::sparse(layout.total_bytes()).unwrap(); // 195 MiB, untouched
    /// // SAFETY: fresh, zeroed, page-aligned memory of the layout's size; only rank 5's
    /// // rings are used.
    /// unsafe { layout.init_receiver(region.base(), 5) }; // its 64 rings, 1 MiB, written
    /// ```
    pub unsafe fn init_receiver(&self, base: NonNull<u8>, receiver: usize) {
        // SAFETY: the caller's guarantee.
        unsafe {
            self.init_rings_of(base, receiver);
            self.write_header(base);
        }
    }

    /// Initialises the rings read by `receiver`, from every sender, on every channel.
    ///
    /// # Safety
    /// As for [`RegionLayout::init`].
    unsafe fn init_rings_of(&self, base: NonNull<u8>, receiver: usize) {
        for ch in 0..self.channels() {
            let senders = if self.channels[ch].shared {
                1
            } else {
                self.ranks
            };
            for s in 0..senders {
                // SAFETY: the caller's guarantee covers this ring's bytes.
                unsafe { self.ring(base, ch, receiver, s) }.init(0);
            }
        }
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

/// Zeroed, page-aligned private memory holding a region (the `threads` conduit): an
/// anonymous mapping, so pages are zeroed by the kernel when first touched (a 64 MiB
/// segment that is never written costs nothing; `alloc_zeroed` with page alignment
/// would `memset` all of it).
///
/// ```
/// use amrq::conduit::mem::HeapRegion;
/// let r = HeapRegion::new(64 << 20).unwrap(); // 64 MiB that cost nothing until touched
/// assert_eq!(r.base().as_ptr() as usize % 4096, 0);
/// ```
#[derive(Debug)]
pub struct HeapRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain bytes; which thread touches which bytes is decided by
// the ring protocol, as for memory shared with another process.
unsafe impl Send for HeapRegion {}
// SAFETY: as above; &HeapRegion only hands out the base address.
unsafe impl Sync for HeapRegion {}

impl HeapRegion {
    /// Maps `bytes` zeroed bytes.
    ///
    /// ```
    /// use amrq::conduit::mem::HeapRegion;
    /// let r = HeapRegion::new(4096).unwrap();
    /// // SAFETY: inside the fresh region.
    /// assert_eq!(unsafe { r.base().as_ptr().read() }, 0);
    /// ```
    pub fn new(bytes: usize) -> Result<Self, ConduitError> {
        Self::map(bytes, 0)
    }

    /// Maps `bytes` zeroed bytes of which most will never be touched: no swap or
    /// commit charge is reserved for them (`MAP_NORESERVE`), so that the kernel's
    /// overcommit check does not refuse a layout far larger than what is used (the
    /// UCX conduit's local queues: P² rings laid out, P used; 31 GiB at P = 1 000).
    ///
    /// ```
    /// use amrq::conduit::mem::HeapRegion;
    /// let r = HeapRegion::sparse(1 << 30).unwrap(); // 1 GiB laid out, nothing used yet
    /// // SAFETY: inside the fresh region.
    /// assert_eq!(unsafe { r.base().as_ptr().add(12345).read() }, 0);
    /// ```
    pub fn sparse(bytes: usize) -> Result<Self, ConduitError> {
        Self::map(bytes, libc::MAP_NORESERVE)
    }

    fn map(bytes: usize, flags: libc::c_int) -> Result<Self, ConduitError> {
        let len = bytes.max(1);
        // SAFETY: a fresh private anonymous mapping; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ConduitError::Setup(format!(
                "cannot map a {bytes}-byte region: {} (lower the ring or segment size)",
                std::io::Error::last_os_error()
            )));
        }
        let ptr = NonNull::new(p.cast())
            .ok_or_else(|| ConduitError::Setup("mmap returned null".into()))?;
        Ok(Self { ptr, len })
    }

    /// The region's first byte.
    ///
    /// ```
    /// use amrq::conduit::mem::HeapRegion;
    /// let r = HeapRegion::new(8192).unwrap();
    /// // SAFETY: inside the region, which nobody else uses.
    /// unsafe { r.base().as_ptr().add(8191).write(1) };
    /// ```
    pub fn base(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for HeapRegion {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::{HeapRegion, RegionLayout};
    use crate::conduit::ring::{Consumer, FrameHeader, Producer, RawRing};
    use crate::conduit::{ChannelSpec, ConduitSpec};
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
    fn a_receivers_init_writes_its_own_rings_and_nothing_else() {
        let spec = ConduitSpec::new(vec![
            ChannelSpec::new(256),
            ChannelSpec::new(64).shared(true),
        ]);
        let (ranks, me) = (64, 5);
        let layout = RegionLayout::new(ranks, &spec).unwrap();
        let region = HeapRegion::sparse(layout.total_bytes()).unwrap();
        assert_eq!(resident_bytes(region.base(), layout.total_bytes()), 0);
        // SAFETY: fresh, zeroed, page-aligned memory of the layout's size; only rank
        // 5's rings are used below.
        unsafe { layout.init_receiver(region.base(), me) };
        // Its 64 rings of channel 0, its shared ring, the header: each channel's run
        // of rings may straddle a page more at either end.
        let mine = ranks * RawRing::bytes(256) + RawRing::bytes(64) + 128;
        let resident = resident_bytes(region.base(), layout.total_bytes());
        assert!(
            (mine..=mine + 6 * 4096).contains(&resident),
            "{resident} bytes resident of {} laid out; rank {me}'s rings are {mine}",
            layout.total_bytes()
        );
        for s in 0..ranks {
            // SAFETY: rank 5's rings, initialised; the region outlives them.
            let ring = unsafe { layout.ring(region.base(), 0, me, s) };
            let (mut p, mut c) = (Producer::new(256, 0), Consumer::new(256, 0, 64));
            assert!(c.peek(&ring).unwrap().is_none(), "ring {s} reads empty");
            assert!(p.try_push(&ring, FrameHeader::default(), &[s as u64], b""));
            assert!(c.peek(&ring).unwrap().is_some(), "ring {s} reads the frame");
        }
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
}
