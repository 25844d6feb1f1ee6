//! The conduit interface: what a transport offers the layers above.

use super::{
    Armed, Arming, AtomicOp, ConduitError, InterruptChannels, OpToken, ReceivedFrame, Started,
};

/// A rank: `0..size`.
///
/// ```
/// use amrq::conduit::{threads, Conduit, Rank};
/// let eps = threads::endpoints(3, &[16]).unwrap();
/// let ranks: Vec<Rank> = eps.iter().map(|e| e.rank()).collect();
/// assert_eq!(ranks, [0, 1, 2]);
/// ```
pub type Rank = usize;
/// A channel: a named queue at the receiver, `0..caps().channels.len()`.
///
/// ```
/// use amrq::conduit::{threads, Channel, Conduit};
/// let eps = threads::endpoints(1, &[16, 64]).unwrap(); // channels 0 and 1
/// let ch: Channel = 1;
/// assert_eq!(eps[0].caps().channels[ch].slots, 64);
/// ```
pub type Channel = usize;

/// One outgoing frame: a tag, flags, up to [`super::ring::MAX_ARGS`] u64 args and a payload.
///
/// ```
/// use amrq::conduit::Message;
/// let m = Message { tag: 3, flags: 0, args: &[1, 2], payload: b"hi" };
/// assert_eq!(m.args.len(), 2);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Message<'a> {
    /// Upper-layer tag (an AM handler index, an RQ tag).
    pub tag: u16,
    /// Upper-layer flags (bits 0–3, delivered with the frame), and
    /// [`Message::INTERRUPT`].
    pub flags: u8,
    /// The args.
    pub args: &'a [u64],
    /// The payload.
    pub payload: &'a [u8],
}

impl Message<'_> {
    /// Flag: deliver this frame by the receiver's progress thread, as a frame of its
    /// channel, even if the channel is polled (the sender's selective interrupt). It
    /// travels on the receiver's interrupt channel ([`Caps::interrupt_channel`]) with
    /// at most `MAX_ARGS - 1` args; `try_send` only.
    pub const INTERRUPT: u8 = 0x10;
}

/// Which ranks may send into a channel (a queue): StarT-Voyager's logical destination
/// table, kept by the conduit like a network interface would. The same at every rank.
///
/// ```
/// use amrq::conduit::Senders;
/// assert!(Senders::All.allows(7));
/// assert!(Senders::Only(vec![0, 2]).allows(2));
/// assert!(!Senders::Only(vec![0, 2]).allows(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Senders {
    /// Every rank.
    #[default]
    All,
    /// Only these ranks.
    Only(Vec<Rank>),
}

impl Senders {
    /// True if `rank` may send into the channel.
    ///
    /// ```
    /// use amrq::conduit::Senders;
    /// assert!(Senders::Only(vec![1]).allows(1) && !Senders::Only(vec![1]).allows(0));
    /// ```
    pub fn allows(&self, rank: Rank) -> bool {
        match self {
            Senders::All => true,
            Senders::Only(v) => v.contains(&rank),
        }
    }
}

/// A set of channels for One-poll, in priority order, checked and summarised once
/// (like an epoll set), so that polling it costs O(1) when the receiver is idle.
///
/// ```
/// use amrq::conduit::{threads, Conduit};
/// let eps = threads::endpoints(1, &[16, 16]).unwrap();
/// let set = eps[0].poll_set(&[1, 0]).unwrap(); // channel 1 first
/// assert_eq!(set.channels, [1, 0]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollSet {
    /// The channels, highest priority first.
    pub channels: Vec<Channel>,
    /// Their doorbell bits.
    pub bits: u64,
    /// Every channel rings the doorbell (otherwise One-poll always scans).
    pub all_notify: bool,
}

/// What one channel of a conduit can carry.
///
/// ```
/// use amrq::conduit::{threads, Conduit, Senders};
/// let eps = threads::endpoints(2, &[32]).unwrap();
/// let ch = &eps[0].caps().channels[0];
/// assert_eq!((ch.slots, ch.shared, ch.senders.clone()), (32, false, Senders::All));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelCaps {
    /// Ranks that may send into it.
    pub senders: Senders,
    /// One ring per receiver shared by all senders (slots reserved by compare-and-swap)
    /// rather than one per sender.
    pub shared: bool,
    /// Most args one frame carries on it (one less than [`Caps::max_args`] when shared:
    /// a hidden word names the sender).
    pub max_args: usize,
    /// Its senders ring the receiver's doorbell when armed (O(1) empty One-poll).
    pub notify: bool,
    /// Delivered by interrupts: a progress thread, not the owner, drains it.
    pub interrupt: bool,
    /// Ring slots per sender (the queue's capacity in 64-byte slots).
    pub slots: u64,
    /// Largest payload of one frame on this channel, in bytes.
    pub max_payload: usize,
    /// Its frames are received with that channel's
    /// ([`ChannelSpec::received_with`](super::ChannelSpec::received_with)).
    pub received_with: Option<Channel>,
}

/// Optional abilities of a conduit.
///
/// ```
/// use amrq::conduit::{threads, Conduit};
/// let eps = threads::endpoints(2, &[16]).unwrap();
/// let f = eps[0].caps().flags;
/// assert!(f.peer_memory_mapped && f.put_get && f.atomics); // one host: all of them
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapFlags {
    /// Peers' registered memory is mapped in this process (one host).
    pub peer_memory_mapped: bool,
    /// The conduit moves bulk data itself: [`Conduit::put_nb`] and [`Conduit::get_nb`]
    /// (a copy into mapped memory on one host, RDMA across hosts). Otherwise the RMA
    /// layer carries put and get as AM frames.
    pub put_get: bool,
    /// The conduit performs remote atomics itself: [`Conduit::atomic_nb`] (processor
    /// atomics on mapped memory, network atomics). Otherwise they travel as AM frames.
    pub atomics: bool,
}

/// A conduit's self-description (UCX's `uct_iface_attr`).
///
/// ```
/// use amrq::conduit::{threads, Conduit};
/// let eps = threads::endpoints(2, &[256]).unwrap();
/// let caps = eps[0].caps();
/// assert_eq!(caps.max_args, 8);
/// assert!(caps.channels[0].max_payload >= 4096);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caps {
    /// Ranks in the job.
    pub ranks: usize,
    /// Bytes of each rank's registered segment.
    pub segment_bytes: usize,
    /// Bytes of a Tag-On block (the largest Tag-On payload; 0: no Tag-On).
    pub tag_on_bytes: usize,
    /// Most u64 args per frame.
    pub max_args: usize,
    /// Per channel.
    pub channels: Vec<ChannelCaps>,
    /// Optional abilities.
    pub flags: CapFlags,
    /// The channel that carries frames flagged [`Message::INTERRUPT`] to the
    /// receiver's progress thread, if the job has one.
    pub interrupt_channel: Option<Channel>,
}

/// A `drain` made of one-frame takes: runs `run` on up to `budget` items that `take`
/// hands out, releasing each after `run` returns (also when it fails: its error is
/// returned after the release). Returns how many ran. For conduits, and views, that
/// have no faster drain of their own.
pub(crate) fn drain_taken<T, E: From<ConduitError>>(
    budget: usize,
    mut take: impl FnMut() -> Result<Option<T>, ConduitError>,
    mut run: impl FnMut(&T) -> Result<(), E>,
    release: impl Fn(T),
) -> Result<usize, E> {
    let mut done = 0;
    while done < budget {
        let Some(item) = take()? else {
            break;
        };
        let r = run(&item);
        release(item);
        done += 1;
        r?;
    }
    Ok(done)
}

/// The operations every conduit offers. All calls are non-blocking, and a rank's conduit
/// is used by one thread (it is `Send`, not `Sync`).
///
/// ```
/// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
/// // Code written against the trait runs on any conduit (shared memory, UCX, both).
/// fn ping<C: Conduit>(c: &C, to: usize) -> bool {
///     c.try_send(to, 0, &Message { tag: 1, flags: 0, args: &[42], payload: &[] }).is_ok()
/// }
/// let eps = threads::endpoints(2, &[16]).unwrap();
/// assert!(ping(&eps[0], 1));
/// assert_eq!(eps[1].peek(0).unwrap().unwrap().args(), [42]);
/// ```
pub trait Conduit {
    /// A received frame, borrowed from the conduit.
    type Frame<'a>: ReceivedFrame<'a>
    where
        Self: 'a;

    /// The receive side of the Interrupt channels, for a progress thread
    /// ([`NoInterrupts`](super::NoInterrupts) where the conduit has none).
    type Interrupts: InterruptChannels;

    /// This rank.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert_eq!((eps[0].rank(), eps[1].rank()), (0, 1));
    /// ```
    fn rank(&self) -> Rank;
    /// Ranks in the job.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// assert!(threads::endpoints(3, &[16]).unwrap().iter().all(|e| e.size() == 3));
    /// ```
    fn size(&self) -> usize;
    /// What this conduit can do.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16, 64]).unwrap();
    /// assert_eq!((eps[0].caps().ranks, eps[0].caps().channels.len()), (2, 2));
    /// ```
    fn caps(&self) -> &Caps;

    /// Moves the receive side of every Interrupt channel (and of the interrupt
    /// channel, [`Caps::interrupt_channel`]) out of this endpoint, for a progress
    /// thread; `None` if the job has none, or they were taken already. From then on
    /// this endpoint answers [`ConduitError::DeliveredByInterrupts`] for them.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(1, &spec).unwrap();
    /// assert!(eps[0].take_interrupts().is_some()); // for a progress thread
    /// assert!(eps[0].take_interrupts().is_none()); // taken already
    /// assert!(eps[0].peek(1).is_err()); // DeliveredByInterrupts
    /// ```
    fn take_interrupts(&mut self) -> Option<Self::Interrupts>;

    /// Sends `msg` to channel `ch` of `dest`, or answers [`ConduitError::Busy`] with
    /// nothing sent if there is no room now ([`ConduitError::NotPermitted`] if this rank
    /// may not send into `ch`).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, ConduitError, Message};
    /// let eps = threads::endpoints(2, &[2]).unwrap(); // two slots
    /// let m = Message { tag: 0, flags: 0, args: &[1], payload: &[] };
    /// eps[0].try_send(1, 0, &m).unwrap();
    /// eps[0].try_send(1, 0, &m).unwrap();
    /// assert_eq!(eps[0].try_send(1, 0, &m), Err(ConduitError::Busy)); // full: nothing sent
    /// ```
    fn try_send(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> Result<(), ConduitError>;

    /// Sends an Express message (tag `tag`, `args`, no payload, no flags) to channel
    /// `ch` of `dest` on the conduit's quickest path, if it has one and the message
    /// can take it now: `true` if sent. `false` means only that this path did not
    /// send it (nothing was sent, nothing is wrong): the caller then calls
    /// [`Conduit::try_send`], which sends it or says why it cannot. The default never
    /// sends.
    ///
    /// The shared-memory conduit's quick path is a send to a per-pair ring this rank
    /// may use, of at most the six args an Express frame holds, while its cached view
    /// of the receiver's head shows room: the common AM send, with no call in it.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert!(eps[0].try_send_quick(1, 0, 7, &[42]));
    /// assert!(!eps[0].try_send_quick(2, 0, 7, &[42])); // no rank 2: `try_send` says so
    /// let f = eps[1].peek(0).unwrap().unwrap();
    /// assert_eq!((f.tag(), f.args()), (7, &[42][..]));
    /// ```
    #[inline(always)]
    fn try_send_quick(&self, dest: Rank, ch: Channel, tag: u16, args: &[u64]) -> bool {
        let _ = (dest, ch, tag, args);
        false
    }

    /// Sends a Long message: deposits `msg.payload` at byte `offset` of `dest`'s
    /// registered segment, then a frame with `msg.args` that tells where. The receiver
    /// sees the payload in place in its segment. [`ConduitError::OutOfSegment`] if the
    /// range does not fit; [`ConduitError::Busy`] (nothing written) if the ring is full.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// let m = Message { tag: 0, flags: 0, args: &[7], payload: &[9; 4096] };
    /// eps[0].try_send_long(1, 0, &m, 8192).unwrap(); // 4 KiB at byte 8192 of rank 1's segment
    /// let f = eps[1].peek(0).unwrap().unwrap();
    /// assert!(f.is_long() && f.payload().len() == 4096);
    /// let (base, _) = eps[1].segment();
    /// assert_eq!(f.payload().as_ptr(), base.as_ptr().wrapping_add(8192).cast_const());
    /// ```
    fn try_send_long(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        offset: usize,
    ) -> Result<(), ConduitError>;

    /// Sends a Tag-On message: `msg.payload` goes into a free block of `dest`'s pool for
    /// this rank (or the one it shares with others there), and a frame with `msg.args`
    /// names it. [`ConduitError::Busy`] (nothing
    /// sent) if the ring is full or every block is still in use;
    /// [`ConduitError::TagOnTooLarge`] above the block size.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, ConduitError, Message};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// let block = eps[0].caps().tag_on_bytes;
    /// let data = vec![1u8; block + 1];
    /// let m = |n| Message { tag: 0, flags: 0, args: &[], payload: &data[..n] };
    /// assert!(eps[0].try_send_tag_on(1, 0, &m(block)).is_ok());
    /// assert!(matches!(eps[0].try_send_tag_on(1, 0, &m(block + 1)), Err(ConduitError::TagOnTooLarge { .. })));
    /// ```
    fn try_send_tag_on(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError>;

    /// This rank's registered segment: its first byte and length, zeroed when the
    /// endpoint is made. Peers write into it (Long messages, later RMA), so it is
    /// handed out as a raw pointer.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// let (base, len) = eps[0].segment();
    /// assert!(len == eps[0].caps().segment_bytes && base.as_ptr() as usize % 4096 == 0);
    /// ```
    fn segment(&self) -> (std::ptr::NonNull<u8>, usize);

    /// The frame at the head of local channel `ch` (senders served round-robin), if any.
    /// Only one frame per channel can be out at a time:
    /// [`ConduitError::FrameOutstanding`] otherwise.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, ConduitError, Message, ReceivedFrame};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// assert!(eps[0].peek(0).unwrap().is_none());
    /// eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[1], payload: &[] }).unwrap();
    /// let f = eps[0].peek(0).unwrap().unwrap();
    /// assert!(matches!(eps[0].peek(0), Err(ConduitError::FrameOutstanding { .. }))); // one out at a time
    /// f.release();
    /// ```
    fn peek(&self, ch: Channel) -> Result<Option<Self::Frame<'_>>, ConduitError>;

    /// Runs `f` on up to `budget` frames of local channel `ch`, each in place, and removes
    /// each after `f` returns (also when `f` fails: its error is returned after the
    /// frame is removed). Returns how many frames `f` saw. The fast path of polling:
    /// the scan state stays in registers, no frame is returned through layers.
    ///
    /// While `f` runs, channel `ch` has a frame out: a `peek` or `drain` of `ch` from
    /// inside `f` gets [`ConduitError::FrameOutstanding`]; other channels work.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, ConduitError, Message, ReceivedFrame};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// for i in 0..5 {
    ///     eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[i], payload: &[] }).unwrap();
    /// }
    /// let mut sum = 0;
    /// let n = eps[0].drain(0, 3, |f| -> Result<(), ConduitError> { sum += f.args()[0]; Ok(()) }).unwrap();
    /// assert_eq!((n, sum), (3, 0 + 1 + 2)); // the budget: 3 frames, the rest stays queued
    /// ```
    fn drain<E, F>(&self, ch: Channel, budget: usize, f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&Self::Frame<'_>) -> Result<(), E>;

    /// [`Conduit::drain`] of at most one frame, for a wait that checks its condition
    /// after each (the AM round trip's reply): 0 at once when the channel is
    /// [quiet](Conduit::quiet). A conduit may find the frame and run it in one look.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, ConduitError, Message, ReceivedFrame};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// let mut got = Vec::new();
    /// let mut take_one = || {
    ///     eps[0].drain_one(0, |f| -> Result<(), ConduitError> {
    ///         got.push(f.args()[0]);
    ///         Ok(())
    ///     })
    /// };
    /// assert_eq!(take_one(), Ok(0)); // nothing there
    /// for i in 0..2 {
    ///     eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[i], payload: &[] }).unwrap();
    /// }
    /// assert_eq!([take_one(), take_one(), take_one()], [Ok(1), Ok(1), Ok(0)]);
    /// assert_eq!(got, [0, 1]);
    /// ```
    #[inline(always)]
    fn drain_one<E, F>(&self, ch: Channel, f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&Self::Frame<'_>) -> Result<(), E>,
    {
        match self.quiet(ch) {
            true => Ok(0),
            false => self.drain(ch, 1, f),
        }
    }

    /// Two [`Conduit::drain`]s in one call: up to `first.1` frames of local channel
    /// `first.0` through `on_first`, then up to `second.1` of `second.0` through
    /// `on_second` (not looked at if `on_first` failed); returns how many ran in all.
    /// A conduit pays its set-up once for both (the AM poll: replies, then requests).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::conduit::{threads, Conduit, ConduitError, ReceivedFrame};
    /// let eps = threads::endpoints_for(1, &amrq::Config::new().conduit_spec()).unwrap();
    /// let c = &eps[0];
    /// let (a, b) = (QueueId::AM_REPLY.index(), QueueId::AM_REQUEST.index());
    /// let msg = |tag| amrq::conduit::Message { tag, flags: 0, args: &[1], payload: &[] };
    /// c.try_send(0, b, &msg(7)).unwrap();
    /// c.try_send(0, a, &msg(9)).unwrap();
    /// let tags = std::cell::RefCell::new(vec![]);
    /// let took = c.drain_both::<ConduitError, _, _>(
    ///     (a, 8),
    ///     |f| Ok(tags.borrow_mut().push(f.tag())),
    ///     (b, 8),
    ///     |f| Ok(tags.borrow_mut().push(f.tag())),
    /// );
    /// assert_eq!(took, Ok(2));
    /// assert_eq!(tags.into_inner(), [9, 7]); // the first channel first
    /// ```
    #[inline(always)]
    fn drain_both<E, F1, F2>(
        &self,
        first: (Channel, usize),
        on_first: F1,
        second: (Channel, usize),
        on_second: F2,
    ) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F1: FnMut(&Self::Frame<'_>) -> Result<(), E>,
        F2: FnMut(&Self::Frame<'_>) -> Result<(), E>,
    {
        let took = match self.quiet(first.0) {
            true => 0,
            false => self.drain(first.0, first.1, on_first)?,
        };
        Ok(took + self.drain(second.0, second.1, on_second)?)
    }

    /// True if a [`Conduit::drain`] of local channel `ch` would now take nothing and
    /// change nothing: a cheap look for pollers that find most channels idle. `false`
    /// promises nothing (the default: drain and see).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints_for(1, &amrq::Config::new().conduit_spec()).unwrap();
    /// let c = &eps[0];
    /// let ch = amrq::rq::QueueId::AM_REQUEST.index();
    /// assert!(c.quiet(ch));
    /// let msg = amrq::conduit::Message { tag: 7, flags: 0, args: &[1], payload: &[] };
    /// c.try_send(0, ch, &msg).unwrap();
    /// assert!(!c.quiet(ch));
    /// ```
    #[inline(always)]
    fn quiet(&self, ch: Channel) -> bool {
        let _ = ch;
        false
    }

    /// The idle end of a blocking wait: returns when a frame may have arrived on one of
    /// `set`'s channels, or after `timeout` at most (a backstop: the caller checks its
    /// condition and peers, then waits again). Channels whose senders ring the
    /// doorbell are slept on (no spinning, and a sender makes a system call only when
    /// its receiver sleeps); for others this only yields the core.
    fn wait_for_arrival(
        &self,
        set: &PollSet,
        timeout: std::time::Duration,
    ) -> Result<(), ConduitError> {
        match self.arm_arrival(set)? {
            Arming::Armed(armed) => {
                crate::util::futex::wait(armed.word, armed.seen, timeout);
                self.disarm_arrival(set, armed);
            }
            Arming::Ready => {}
            Arming::CannotSleep => std::thread::yield_now(),
        }
        Ok(())
    }

    /// The first half of [`Conduit::wait_for_arrival`], for a conduit made of several
    /// that sleeps on all of them at once: arms `set`'s wake-up and looks once more
    /// (so that no frame sent meanwhile is slept through). A conduit whose wake-up is
    /// not a futex word (a network's file descriptor) gives one that a helper bumps
    /// when the descriptor becomes readable (see the module doc). Default:
    /// [`Arming::CannotSleep`].
    fn arm_arrival(&self, set: &PollSet) -> Result<Arming<'_>, ConduitError> {
        let _ = set;
        Ok(Arming::CannotSleep)
    }

    /// Undoes [`Conduit::arm_arrival`].
    fn disarm_arrival(&self, set: &PollSet, armed: Armed<'_>) {
        let _ = (set, armed);
    }

    /// Starts copying `data` to byte `offset` of `dest`'s registered segment (UCX's
    /// `ucp_put_nbx`); `data` may be reused when this returns. [`Started::Done`]: the
    /// bytes are in place; [`Started::InFlight`]: they are once [`Conduit::op_test`]
    /// says so or [`Conduit::flush`] returns. [`ConduitError::OutOfSegment`] (nothing
    /// written) if the range does not fit. The default, for conduits without
    /// [`CapFlags::put_get`]: [`ConduitError::Unsupported`].
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Started};
    /// let eps = threads::endpoints(2, &[256]).unwrap();
    /// assert_eq!(eps[0].put_nb(1, 64, b"hi").unwrap(), Started::Done(0));
    /// assert!(eps[0].put_nb(1, (64 << 10) - 1, b"hi").is_err()); // past the segment
    /// ```
    fn put_nb(&self, dest: Rank, offset: usize, data: &[u8]) -> Result<Started, ConduitError> {
        let _ = (dest, offset, data);
        Err(ConduitError::Unsupported { what: "put" })
    }

    /// [`Conduit::put_nb`] that may read `len` bytes at `data` until the operation is
    /// over instead of copying them: a network sends them from there. Default: the
    /// copying `put_nb`.
    ///
    /// # Safety
    /// `data` is valid for reads of `len` bytes, and if the answer is
    /// [`Started::InFlight`] it stays so, written by nobody, until [`Conduit::op_test`]
    /// answers `Some` or an error for it. (The RMA layer's safe `put_scope` waits for
    /// that before the borrow ends.)
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Started};
    /// let eps = threads::endpoints(2, &[256]).unwrap();
    /// let data = *b"hi";
    /// // SAFETY: `data` outlives the put, which mapped memory completes at once.
    /// let started = unsafe { eps[0].put_nb_borrowed(1, 64, data.as_ptr(), data.len()) };
    /// assert_eq!(started.unwrap(), Started::Done(0));
    /// ```
    unsafe fn put_nb_borrowed(
        &self,
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        // SAFETY: the caller's promise: `data` is valid for `len` bytes during the call.
        self.put_nb(dest, offset, unsafe {
            std::slice::from_raw_parts(data, len)
        })
    }

    /// Starts copying `len` bytes at `offset` of `src`'s segment to `buf`
    /// (`ucp_get_nbx`): complete when [`Started::Done`], else once [`Conduit::op_test`]
    /// answers or [`Conduit::flush`] returns. Default: [`ConduitError::Unsupported`].
    ///
    /// # Safety
    /// `buf` is valid for writes of `len` bytes, and if the answer is
    /// [`Started::InFlight`] it stays so, read and written by nobody else, until the
    /// operation is over (`op_test` answers `Some` or an error, or `flush` returns): the
    /// conduit writes it until then. (The RMA layer's safe calls complete such a get
    /// before they return.)
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Started};
    /// let eps = threads::endpoints(2, &[256]).unwrap();
    /// eps[0].put_nb(1, 64, b"hi").unwrap();
    /// let mut back = [0u8; 2];
    /// // SAFETY: `back` outlives the call, and the answer is checked to be Done.
    /// let got = unsafe { eps[0].get_nb(1, 64, back.as_mut_ptr(), back.len()) };
    /// assert_eq!((got.unwrap(), &back), (Started::Done(0), b"hi"));
    /// ```
    unsafe fn get_nb(
        &self,
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        let _ = (src, offset, buf, len);
        Err(ConduitError::Unsupported { what: "get" })
    }

    /// Starts the atomic `op` on the u64 at `offset` (8-byte aligned:
    /// [`ConduitError::Misaligned`]) of `dest`'s segment (`ucp_atomic_op_nbx`); its
    /// value before comes with completion. Atomic against every other rank's atomics on
    /// the word, whichever path they take. Default: [`ConduitError::Unsupported`] (for
    /// conduits without [`CapFlags::atomics`]).
    ///
    /// ```
    /// use amrq::conduit::{threads, AtomicOp, Conduit, Started};
    /// let eps = threads::endpoints(2, &[256]).unwrap();
    /// assert_eq!(eps[1].atomic_nb(0, 8, AtomicOp::FetchAdd(5)).unwrap(), Started::Done(0));
    /// assert_eq!(eps[0].atomic_nb(0, 8, AtomicOp::Swap(1)).unwrap(), Started::Done(5));
    /// assert!(eps[0].atomic_nb(0, 4, AtomicOp::Swap(1)).is_err()); // misaligned
    /// ```
    fn atomic_nb(&self, dest: Rank, offset: usize, op: AtomicOp) -> Result<Started, ConduitError> {
        let _ = (dest, offset, op);
        Err(ConduitError::Unsupported {
            what: "remote atomics",
        })
    }

    /// Progresses one-sided operations and tells whether `op` is complete: `Some` with
    /// an atomic's value before (0 for put and get), after which the token is spent. An
    /// error also ends the operation: its buffer is no longer written.
    fn op_test(&self, op: OpToken) -> Result<Option<u64>, ConduitError> {
        let _ = op;
        Err(ConduitError::Unsupported {
            what: "operations in flight",
        })
    }

    /// Completes every one-sided operation this rank has started (UCX's
    /// `ucp_worker_flush_nbx`): puts in place at their targets, gets' bytes in their
    /// buffers; their tokens still answer [`Conduit::op_test`]. Nothing to do where
    /// every operation completes when it starts (the default).
    fn flush(&self) -> Result<(), ConduitError> {
        Ok(())
    }

    /// A One-poll set of `channels` (highest priority first).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(1, &[16, 16]).unwrap();
    /// assert!(eps[0].poll_set(&[0, 1]).is_ok());
    /// assert!(eps[0].poll_set(&[5]).is_err()); // no such channel
    /// ```
    fn poll_set(&self, channels: &[Channel]) -> Result<PollSet, ConduitError>;

    /// One-poll (StarT-Voyager): the first frame of the first non-empty channel of
    /// `set`, in priority order. When every channel has `notify` and the receiver has
    /// been idle a while, an empty One-poll reads one word, whatever the number of
    /// channels and peers; otherwise it scans.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(1, &[16, 16]).unwrap();
    /// let set = eps[0].poll_set(&[1, 0]).unwrap();
    /// eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[0], payload: &[] }).unwrap();
    /// eps[0].try_send(0, 1, &Message { tag: 0, flags: 0, args: &[1], payload: &[] }).unwrap();
    /// let (ch, f) = eps[0].one_poll(&set).unwrap().unwrap();
    /// assert_eq!((ch, f.args()[0]), (1, 1)); // the higher-priority channel first
    /// f.release();
    /// ```
    #[allow(clippy::type_complexity)]
    fn one_poll(&self, set: &PollSet) -> Result<Option<(Channel, Self::Frame<'_>)>, ConduitError>;

    /// True if none of `set`'s channels can hold a frame: polls reported to
    /// [`Conduit::polled`] found them empty long enough that the set was armed, and no
    /// sender has rung since. One load on an idle receiver; `false` promises nothing
    /// (the default: look at the channels).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints_for(1, &amrq::Config::new().conduit_spec()).unwrap();
    /// let c = &eps[0];
    /// let set = c.poll_set(&[amrq::rq::QueueId::AM_REQUEST.index()]).unwrap();
    /// assert!(!c.nothing_arrived(&set)); // not armed yet
    /// while !c.nothing_arrived(&set) {
    ///     c.polled(&set, 0); // empty polls, until the set is armed
    /// }
    /// ```
    #[inline(always)]
    fn nothing_arrived(&self, set: &PollSet) -> bool {
        let _ = set;
        false
    }

    /// Tells the conduit that a look at all of `set`'s channels, made because
    /// [`Conduit::nothing_arrived`] said false, took `took` frames: it disarms a set
    /// that rang, and arms one found empty long enough. Default: nothing.
    #[inline(always)]
    fn polled(&self, set: &PollSet, took: usize) {
        let _ = (set, took);
    }

    /// Frames of local channel `ch` this conduit dropped undelivered: from a rank not
    /// allowed to send there (a sender that bypassed its own check), or naming memory
    /// outside this rank's segment or pool. Each is also in [`Conduit::faults`].
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert_eq!(eps[0].dropped(0), 0); // no frame from a sender the channel does not allow
    /// ```
    fn dropped(&self, ch: Channel) -> u64;

    /// The faults of peers this rank has seen: frames dropped because a correct peer
    /// never sends them (here or in the layers above, [`Conduit::record_fault`]), per
    /// sender, and the rings closed because their frame boundaries were lost.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert!(eps[0].faults().is_empty());
    /// ```
    fn faults(&self) -> super::Faults;

    /// Records a fault of a peer that a layer above found in a frame this conduit
    /// delivered (an unknown handler, a missing arg, …): the frame was dropped.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Fault, FaultKind};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// // A layer above found a peer's message wrong (here: a handler id it does not have).
    /// eps[0].record_fault(Fault { source: Some(1), channel: 0, kind: FaultKind::UnknownHandler { id: 77 } });
    /// assert_eq!(eps[0].faults().of(1), 1);
    /// ```
    fn record_fault(&self, fault: super::Fault);

    /// Setup-time all-gather of one word per rank (index = rank).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(3, &[16]).unwrap();
    /// let all = std::thread::scope(|s| {
    ///     let h: Vec<_> = eps.into_iter().map(|e| s.spawn(move || e.allgather(10 * e.rank() as u64))).collect();
    ///     h.into_iter().map(|h| h.join().unwrap().unwrap()).collect::<Vec<_>>()
    /// });
    /// assert!(all.iter().all(|v| v == &[0, 10, 20]));
    /// ```
    fn allgather(&self, mine: u64) -> Result<Vec<u64>, ConduitError>;

    /// Setup-time barrier over all ranks.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// std::thread::scope(|s| {
    ///     for e in eps {
    ///         s.spawn(move || e.barrier().unwrap()); // setup-time barrier, not the AM one
    ///     }
    /// });
    /// ```
    fn barrier(&self) -> Result<(), ConduitError>;

    /// [`ConduitError::PeerDead`] if a rank of the job is known to have failed. Waiting
    /// loops call it on their slow path so that nothing waits forever on a dead peer.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert!(eps[0].check_peers().is_ok()); // nobody failed
    /// ```
    fn check_peers(&self) -> Result<(), ConduitError>;

    /// True once `rank` has left the job cleanly (its endpoint is gone): it sends and
    /// drains nothing any more. Everything it sent before leaving is visible to a look
    /// at the queues made after this returns true. Waiting loops call it on their slow
    /// path: room in its queues will not come, and once every other rank has left,
    /// nothing can arrive.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert!(!eps[0].peer_left(1));
    /// eps[1].boot().mark_left(1); // what a job of threads does when rank 1's main returns
    /// assert!(eps[0].peer_left(1));
    /// ```
    fn peer_left(&self, rank: Rank) -> bool;

    /// Frames of `rank` this endpoint has taken from the channels received with
    /// another ([`ChannelSpec::received_with`](super::ChannelSpec::received_with)),
    /// which a rank's other threads send into: a layer above that must know all of
    /// them arrived compares it with the count the sender gives. 0 where there are none;
    /// `u64::MAX` once such a channel was closed as corrupt (nothing more will come),
    /// and where threads' frames never travel in them (a job across hosts: they go out
    /// as the rank's own, [`Conduit::forward_threads`]).
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitError, ConduitSpec, Message};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(16).shared(true).received_with(0)]);
    /// let eps = threads::endpoints_for(2, &spec).unwrap();
    /// eps[0].injector(1).unwrap().try_send(1, &Message::default()).unwrap();
    /// eps[1].drain(0, 8, |_f| -> Result<(), ConduitError> { Ok(()) }).unwrap();
    /// assert_eq!((eps[1].joined_taken(0), eps[1].joined_taken(1)), (1, 0));
    /// ```
    fn joined_taken(&self, rank: Rank) -> u64 {
        let _ = rank;
        0
    }

    /// Sends on what this rank's other threads handed the endpoint to send, as far as
    /// there is room: `Ok(true)` once nothing is left (at once where threads send
    /// themselves). A rank of a job across hosts (`MemConduit::across`) holds its
    /// threads' frames in an outbox that its drains empty too; the job's end empties it
    /// before the rank says it has returned.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// assert!(eps[0].forward_threads().unwrap()); // one host: threads write the rings
    /// ```
    fn forward_threads(&self) -> Result<bool, ConduitError> {
        Ok(true)
    }

    /// True if the job has other ranks and all of them have left.
    fn all_peers_left(&self) -> bool {
        self.size() > 1 && (0..self.size()).all(|r| r == self.rank() || self.peer_left(r))
    }

    /// False only if this endpoint has certainly sent `peer` nothing (a conduit that
    /// connects at the first message never connected to it): the job's end asks only
    /// the peers that may hold this rank's messages. True where a conduit cannot tell.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// assert!(eps[0].contacted(1)); // shared memory cannot tell: it says true
    /// ```
    fn contacted(&self, peer: Rank) -> bool {
        let _ = peer;
        true
    }

    /// Told by the layer above once every message of the job has been handled (every
    /// rank returned): nobody waits for this rank any more, so leaving needs a goodbye
    /// only to the peers it talked to (without it, a conduit says goodbye to every
    /// peer: a rank that leaves early may be waited for by any). A conduit that makes
    /// connections lets those still being set up settle before it returns; the layer
    /// above then makes sure every rank has, before any leaves.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// eps[0].quiescent(); // shared memory: nothing to do
    /// ```
    fn quiescent(&self) {}
}
