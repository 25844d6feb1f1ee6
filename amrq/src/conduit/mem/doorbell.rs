//! A rank's doorbell in the region: the words One-poll and sleeping receivers arm and
//! senders ring (the handshake itself is [`crate::conduit::doorbell`]).

/// A rank's doorbell, for One-poll: the receiver arms channels when it has gone idle;
/// a sender that publishes a frame on an armed channel then sets that channel's bit in
/// the summary, so the idle receiver polls one word instead of every ring.
///
/// Bit `ch % 64` stands for channel `ch`: One-poll channels sharing a bit only cost a
/// scan; an Interrupt channel has its bit to itself ([`ConduitSpec::check`](crate::conduit::ConduitSpec::check)).
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

/// Bytes of one rank's doorbell in a region.
pub(super) const DOORBELL_BYTES: usize = 256;
const _: () = {
    assert!(std::mem::size_of::<Doorbell>() == DOORBELL_BYTES);
    assert!(std::mem::offset_of!(Doorbell, heavy) == 8);
    assert!(std::mem::offset_of!(Doorbell, summary) == 128);
    assert!(std::mem::offset_of!(Doorbell, wake) == 136);
    assert!(std::mem::offset_of!(Doorbell, sleepers) == 144);
};
