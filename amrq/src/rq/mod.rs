//! Remote Queues (Brewer, Chong, Liu, Sharma and Kubiatowicz, SPAA 1995): named queues
//! at each rank, filled by remote `enqueue` and drained by local `dequeue` (the whole
//! frame, or the paper's prefix), `read_queue` and `delete_queue`.
//!
//! A queue is named by (rank, [`QueueId`]). Queue 0 carries AM requests and queue 1 AM
//! replies (the AM layer is built on this one, as in the paper's Figure 3); user queues
//! are described by [`QueueSpec`]s (a job's settings add them), and [`channel_specs`]
//! makes each queue a conduit channel of the same index. Each queue at a receiver
//! is a set of per-sender rings, drained round-robin; per sender, frames arrive in order
//! and exactly once.
//!
//! `enqueue` never blocks and never overwrites: `Ok(false)` means the queue is full for
//! this sender, nothing was committed, and the caller still has its data.
//!
//! **Protection.** The AM queues are the runtime's: the calls here refuse to send
//! into them ([`RqError::RuntimeQueue`]), so a program cannot forge the runtime's
//! messages (barrier arrivals, one-sided operations) through them. (The conduit below
//! is the raw network: what is written there is treated as what any peer might send,
//! checked on receipt and recorded as that peer's fault when wrong.) A queue's [`QueueSpec`] says which ranks may
//! enqueue into it (StarT-Voyager's logical destination table). The conduit refuses a
//! send a rank may not make ([`ConduitError::NotPermitted`]), and drops and counts a
//! frame that arrives from such a rank anyway ([`Rq::dropped`]).
//!
//! **Flow control.** Two queue types, chosen per queue:
//!
//! | queue | room | a full queue | memory per receiver | enqueue cost |
//! |---|---|---|---|---|
//! | per-sender (default; the AM queues) | one ring per sender: its free slots are that sender's credits | `Ok(false)` to that sender only; no sender takes another's room | `ranks × slots × 64 B` | plain stores |
//! | [`shared`](QueueSpec::shared) | one ring; each enqueue reserves its slots by compare-and-swap on the ring's tail (T3D-style reservation) | `Ok(false)` to whoever finds it full | `slots × 64 B` | one locked instruction; 7 args at most |
//!
//! The T3D reserved with fetch-and-add; amrq checks room first and then swaps, because a
//! fetch-and-add cannot be taken back when the queue turns out to be full, and the
//! contract here is that a full queue commits nothing.

mod dequeued;
mod error;
mod interrupts;
mod queue_id;
mod spec;
mod take;

pub use dequeued::Dequeued;
pub use error::RqError;
pub use interrupts::{Hold, Interrupts};
pub use queue_id::QueueId;
pub use spec::{channel_specs, QueueSpec};

use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, ConduitError, Message, PayloadView, PollSet, Rank, ReceivedFrame};

/// RQ's answer to a conduit send: committed (`true`), full (`false`, nothing sent), or
/// an error.
#[inline(always)]
fn committed(sent: Result<(), ConduitError>) -> Result<bool, RqError> {
    match sent {
        Ok(()) => Ok(true),
        Err(ConduitError::Busy) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// [`RqError::RuntimeQueue`] for the AM queues, which only the AM layer sends into.
#[inline(always)]
pub(crate) fn user_queue(q: QueueId) -> Result<(), RqError> {
    if q.index() < QueueId::FIRST_USER {
        return Err(RqError::RuntimeQueue { queue: q.index() });
    }
    Ok(())
}

/// StarT-Voyager's message kinds, as RQ sends them.
///
/// ```
/// use amrq::{conduit::ReceivedFrame, rq::{Kind, Rq, RqError}, Config};
/// let mut cfg = Config::default();
/// let q = cfg.add_queue(64);
/// cfg.threads(1, |setup| -> amrq::Result<()> {
///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
///     let rq = job.rq();
///     for kind in [Kind::Express, Kind::Basic, Kind::TagOn] {
///         let payload: &[u8] = if kind == Kind::Express { b"tiny" } else { &[1; 600] };
///         assert!(rq.enqueue_as(0, q, kind, 0, &[], payload)?);
///         let f = rq.read_queue(q)?.expect("a frame");
///         assert_eq!(f.payload(), payload); // whatever the kind, the same frame
///         f.release();
///     }
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One 64-byte slot (header, up to 6 args, or fewer args and a few payload bytes),
    /// published by a single store of its sequence word.
    Express,
    /// Consecutive slots in the queue, cache-line granular.
    Basic,
    /// A small frame in the queue naming a block of the receiver's Tag-On pool, which
    /// the consumer reads in place and frees when done (see `ReceivedFrame::keep`).
    TagOn,
}

/// Payloads above this many bytes go Tag-On with the plain [`Rq::enqueue`] (when they
/// fit a Tag-On block): they then take no room in the queue.
///
/// ```
/// assert_eq!(amrq::rq::TAG_ON_ABOVE, 512);
/// ```
pub const TAG_ON_ABOVE: usize = 512;

/// The Remote Queues layer of one rank.
///
/// ```
/// use amrq::{Config, rq::Rq, conduit::ReceivedFrame};
/// let mut cfg = Config::default();
/// let q = cfg.add_queue(4);
/// cfg.threads(2, |setup| {
///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
///     let rq: &Rq = job.rq();
///     if rq.rank() == 0 {
///         assert!(rq.enqueue(1, q, &[1, 2], b"payload")?);
///     } else {
///         let frame = loop {
///             if let Some(f) = rq.read_queue(q)? { break f; }
///         };
///         assert_eq!((frame.source(), frame.args()), (0, &[1u64, 2][..]));
///         assert_eq!(frame.payload(), b"payload");
///         frame.release();
///     }
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Debug)]
pub struct Rq<C: Conduit = MemConduit> {
    conduit: C,
}

impl<C: Conduit> Rq<C> {
    /// Starts this rank's progress thread for its Interrupt queues
    /// ([`Delivery::Interrupt`](crate::conduit::Delivery)) and for frames flagged
    /// interrupt by their senders: it runs `handler(queue, source, args, payload)` on
    /// each of their frames as it arrives, sleeping when they are idle. A frame that
    /// arrives during an [`Interrupts::hold`] section is handled when the section ends,
    /// on the thread that ends it. Those queues are no longer polled by this rank (polling them is
    /// `DeliveredByInterrupts`); all others are never touched by the thread.
    /// `None` if the job has no Interrupt queue.
    ///
    /// ```
    /// use amrq::{config::{Delivery, QueueSpec}, rq::{Rq, RqError}, Config};
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
    /// let mut cfg = Config::default();
    /// let alarms = cfg.add(QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt));
    /// let mut eps = amrq::conduit::threads::endpoints_for(1, &cfg.conduit_spec()).unwrap();
    /// let mut rq = Rq::new(eps.remove(0));
    /// let seen = Arc::new(AtomicU64::new(0));
    /// let s = seen.clone();
    /// let intr = rq.start_interrupts(move |_q, _src, args, _p| { s.fetch_add(args[0], Ordering::Relaxed); })
    ///     .expect("an Interrupt queue");
    /// rq.enqueue(0, alarms, &[5], &[])?;
    /// while seen.load(Ordering::Relaxed) != 5 {} // no poll: the handler ran anyway
    /// drop(intr);
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn start_interrupts<H>(&mut self, handler: H) -> Option<Interrupts>
    where
        H: FnMut(QueueId, Rank, &[u64], PayloadView<'_>) + Send + 'static,
    {
        let rx = self.conduit.take_interrupts()?;
        Some(Interrupts::start(rx, handler))
    }

    /// The queues of the rank that owns `conduit`.
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     assert!(rq.rank() < rq.size());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn new(conduit: C) -> Self {
        Self { conduit }
    }

    /// The conduit below.
    ///
    /// ```
    /// use amrq::{conduit::Conduit, rq::{Rq, RqError}, Config};
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     assert!(rq.conduit().caps().segment_bytes > 0);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn conduit(&self) -> &C {
        &self.conduit
    }

    /// This rank.
    ///
    /// ```
    /// use amrq::{rq::Rq, Config};
    /// let eps = amrq::conduit::threads::endpoints_for(2, &Config::new().conduit_spec()).unwrap();
    /// let ranks: Vec<usize> = eps.into_iter().map(|c| Rq::new(c).rank()).collect();
    /// assert_eq!(ranks, [0, 1]);
    /// ```
    pub fn rank(&self) -> Rank {
        self.conduit.rank()
    }

    /// Ranks in the job.
    ///
    /// ```
    /// use amrq::{rq::Rq, Config};
    /// let eps = amrq::conduit::threads::endpoints_for(3, &Config::new().conduit_spec()).unwrap();
    /// let sizes: Vec<usize> = eps.into_iter().map(|c| Rq::new(c).size()).collect();
    /// assert_eq!(sizes, [3, 3, 3]);
    /// ```
    pub fn size(&self) -> usize {
        self.conduit.size()
    }

    /// Enqueues `args` and `payload` into queue `q` of rank `dest`. `Ok(true)`: committed
    /// (it will be delivered); `Ok(false)`: the queue is full, nothing was committed.
    /// The kind follows the size: Express if one slot holds it, Basic up to
    /// [`TAG_ON_ABOVE`] bytes of payload, Tag-On above that when a Tag-On block holds
    /// it (then `Ok(false)` also when every block is still in use), Basic otherwise.
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(4); // 4 slots per sender
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     let mut accepted = 0;
    ///     while rq.enqueue(0, q, &[accepted], b"one slot")? {
    ///         accepted += 1;
    ///     }
    ///     assert_eq!(accepted, 4); // then full: the fifth was not sent
    ///     let (mut args, mut buf) = ([0u64; 8], [0u8; 16]);
    ///     let d = rq.dequeue(q, &mut args, &mut buf)?.expect("a frame");
    ///     assert_eq!((args[0], &buf[..d.len]), (0, &b"one slot"[..]));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn enqueue(
        &self,
        dest: Rank,
        q: QueueId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, RqError> {
        let len = payload.len();
        let kind = if len > TAG_ON_ABOVE && len <= self.conduit.caps().tag_on_bytes {
            Kind::TagOn
        } else {
            Kind::Basic // or Express: the ring takes the slots the frame needs
        };
        self.enqueue_as(dest, q, kind, 0, args, payload)
    }

    /// [`Rq::enqueue`] of a chosen kind, with a tag. [`RqError::NotExpress`] if `kind` is
    /// Express and the frame needs more than one slot.
    ///
    /// ```
    /// use amrq::{rq::{Kind, Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     assert!(rq.enqueue_as(0, q, Kind::Basic, 7, &[1], &[0u8; 200])?);
    ///     let too_big = rq.enqueue_as(0, q, Kind::Express, 7, &[1], &[0u8; 200]);
    ///     assert!(matches!(too_big, Err(RqError::NotExpress { .. })));
    ///     let f = rq.read_queue(q)?.expect("the Basic frame");
    ///     # use amrq::conduit::ReceivedFrame;
    ///     assert_eq!((f.tag(), f.payload().len()), (7, 200));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn enqueue_as(
        &self,
        dest: Rank,
        q: QueueId,
        kind: Kind,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, RqError> {
        user_queue(q)?;
        match kind {
            Kind::Express if crate::conduit::ring::frame_slots(args.len(), payload.len()) > 1 => {
                Err(RqError::NotExpress {
                    nargs: args.len(),
                    len: payload.len(),
                })
            }
            Kind::Express | Kind::Basic => {
                if payload.is_empty() && self.conduit.try_send_quick(dest, q.index(), tag, args) {
                    return Ok(true);
                }
                self.enqueue_runtime(dest, q, tag, args, payload)
            }
            Kind::TagOn => {
                let msg = Message {
                    tag,
                    flags: 0,
                    args,
                    payload,
                };
                committed(self.conduit.try_send_tag_on(dest, q.index(), &msg))
            }
        }
    }

    /// [`Rq::enqueue`] with a 16-bit tag carried in the frame header (the AM layer puts
    /// its handler index there).
    ///
    /// ```
    /// use amrq::{conduit::ReceivedFrame, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     rq.enqueue_tagged(0, q, 42, &[], &[])?;
    ///     assert_eq!(rq.read_queue(q)?.map(|f| f.tag()), Some(42));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn enqueue_tagged(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, RqError> {
        self.enqueue_as(dest, q, Kind::Basic, tag, args, payload)
    }

    /// Enqueues a frame into queue `q` of `dest` flagged *interrupt* (the sender's
    /// selective interrupt): `dest`'s progress thread runs its handler on it as a frame
    /// of `q` as soon as it arrives, even if `q` is a Poll queue that the owner polls.
    /// It travels on `dest`'s interrupt queue (`interrupt_slots` of [`channel_specs`],
    /// slots per sender; [`ConduitError::NoInterruptChannel`] if the job has none),
    /// with at most 7 args; `Ok(false)` when that queue is full. The permissions are
    /// `q`'s. A rank that never starts its progress thread leaves such frames queued.
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16); // a Poll queue
    /// cfg.interrupt_slots.set(8);
    /// let mut eps = amrq::conduit::threads::endpoints_for(1, &cfg.conduit_spec()).unwrap();
    /// let mut rq = Rq::new(eps.remove(0));
    /// let seen = Arc::new(AtomicU64::new(0));
    /// let s = seen.clone();
    /// let _intr = rq.start_interrupts(move |queue, _src, args, _p| {
    ///     assert_eq!(queue, q);
    ///     s.store(args[0], Ordering::Release);
    /// });
    /// rq.enqueue_interrupt(0, q, &[9], &[])?;
    /// while seen.load(Ordering::Acquire) != 9 {} // the owner never polls `q`
    /// assert!(rq.read_queue(q)?.is_none());
    /// # Ok::<(), RqError>(())
    /// ```
    pub fn enqueue_interrupt(
        &self,
        dest: Rank,
        q: QueueId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, RqError> {
        user_queue(q)?;
        let msg = Message {
            tag: 0,
            flags: Message::INTERRUPT,
            args,
            payload,
        };
        committed(self.conduit.try_send(dest, q.index(), &msg))
    }

    /// Enqueues a Long message: `payload` is deposited at byte `offset` of `dest`'s
    /// registered segment, then `args` and the tag are enqueued into `q`; the receiver
    /// reads the payload in place in its segment. `Ok(false)`: the queue is full and
    /// nothing was written. A range outside the segment is
    /// [`ConduitError::OutOfSegment`].
    ///
    /// ```
    /// use amrq::{conduit::ReceivedFrame, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     if rq.rank() == 0 {
    ///         // 4 KiB written at byte 8192 of rank 1's segment, then a frame naming them.
    ///         assert!(rq.enqueue_long(1, q, 0, &[1], &[3u8; 4096], 8192)?);
    ///     } else {
    ///         let f = loop {
    ///             if let Some(f) = rq.read_queue(q)? { break f; }
    ///         };
    ///         // In the segment, where peers may write: copied out, never lent.
    ///         assert!(f.payload().is_shared() && f.payload().to_vec() == [3u8; 4096]);
    ///         f.release();
    ///     }
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn enqueue_long(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<bool, RqError> {
        user_queue(q)?;
        self.enqueue_runtime_long(dest, q, tag, args, payload, offset)
    }

    /// [`Rq::enqueue_tagged`] into any queue, the runtime's too: the AM layer's send.
    #[inline(always)]
    pub(crate) fn enqueue_runtime(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, RqError> {
        let msg = Message {
            tag,
            flags: 0,
            args,
            payload,
        };
        committed(self.conduit.try_send(dest, q.index(), &msg))
    }

    /// [`Rq::enqueue_long`] into any queue, the runtime's too: the AM layer's send.
    #[inline]
    pub(crate) fn enqueue_runtime_long(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<bool, RqError> {
        let msg = Message {
            tag,
            flags: 0,
            args,
            payload,
        };
        committed(self.conduit.try_send_long(dest, q.index(), &msg, offset))
    }

    /// A One-poll set of `queues`, highest priority first (checked once; poll it with
    /// [`Rq::one_poll`]).
    ///
    /// ```
    /// use amrq::{config::QueueSpec, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let urgent = cfg.add(QueueSpec::new("urgent", 16).one_poll());
    /// let bulk = cfg.add(QueueSpec::new("bulk", 64).one_poll());
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     let set = rq.poll_set(&[urgent, bulk])?; // urgent first
    ///     rq.enqueue(0, bulk, &[2], &[])?;
    ///     rq.enqueue(0, urgent, &[1], &[])?;
    ///     let (q, f) = rq.one_poll(&set)?.expect("a frame");
    ///     assert_eq!(q, urgent);
    ///     # use amrq::conduit::ReceivedFrame;
    ///     f.release();
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_set(&self, queues: &[QueueId]) -> Result<PollSet, RqError> {
        let chans: Vec<usize> = queues.iter().map(|q| q.index()).collect();
        Ok(self.conduit.poll_set(&chans)?)
    }

    /// One-poll: the first frame of the first non-empty queue of `set` (priority order),
    /// with its queue. Over queues declared
    /// [`one_poll`](QueueSpec::one_poll), an empty One-poll of an idle
    /// receiver reads one word, whatever the number of queues and peers (the receiver
    /// arms a doorbell after some empty polls; senders ring it only then).
    ///
    /// ```
    /// use amrq::{config::QueueSpec, conduit::ReceivedFrame, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let low = cfg.add(QueueSpec::new("low", 16).one_poll());
    /// let high = cfg.add(QueueSpec::new("high", 16).one_poll());
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     let set = rq.poll_set(&[high, low])?;
    ///     rq.enqueue(0, low, &[1], &[])?;
    ///     rq.enqueue(0, high, &[2], &[])?;
    ///     let (q, f) = rq.one_poll(&set)?.expect("a frame");
    ///     assert_eq!((q, f.args()[0]), (high, 2));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    pub fn one_poll(&self, set: &PollSet) -> Result<Option<(QueueId, C::Frame<'_>)>, RqError> {
        Ok(self
            .conduit
            .one_poll(set)?
            .map(|(ch, f)| (QueueId::new(ch), f)))
    }

    /// Blocking One-poll: waits until one of `set`'s queues has a frame and returns it
    /// (priority order, as [`Rq::one_poll`]). Spins a bounded time, then sleeps until a
    /// sender rings (its queues must be [`one_poll`](QueueSpec::one_poll)
    /// queues to be slept on; otherwise it yields between looks), waking at least every
    /// [`SLEEP_BACKSTOP`](crate::util::SLEEP_BACKSTOP) to check that its peers are alive.
    /// [`RqError::Timeout`] after `timeout`, if given.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, conduit::ReceivedFrame, rq::{Rq, RqError}, Config};
    /// use std::time::Duration;
    /// let mut cfg = Config::default();
    /// let q = cfg.add(QueueSpec::new("work", 16).one_poll());
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     let set = rq.poll_set(&[q])?;
    ///     if rq.rank() == 0 {
    ///         std::thread::sleep(Duration::from_millis(5));
    ///         rq.enqueue(1, q, &[7], &[])?;
    ///     } else {
    ///         let (_, f) = rq.wait(&set, None)?; // sleeps, then wakes on the enqueue
    ///         assert_eq!(f.args(), &[7]);
    ///         f.release();
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn wait(
        &self,
        set: &PollSet,
        timeout: Option<std::time::Duration>,
    ) -> Result<(QueueId, C::Frame<'_>), RqError> {
        let start = std::time::Instant::now();
        let mut backoff = crate::util::Backoff::new();
        let mut last_look = false;
        loop {
            if let Some(found) = self.one_poll(set)? {
                return Ok(found);
            }
            if last_look {
                return Err(ConduitError::AllPeersLeft.into());
            }
            // One reading of the clock: two could straddle the deadline.
            let left = match timeout.map(|t| (t, start.elapsed())) {
                Some((t, waited)) if waited >= t => return Err(RqError::Timeout { waited }),
                Some((t, waited)) => t - waited,
                None => crate::util::SLEEP_BACKSTOP,
            };
            if backoff.is_yielding() {
                self.conduit.check_peers()?;
                if self.conduit.all_peers_left() {
                    // What they sent before leaving is visible now: one last look.
                    last_look = true;
                    continue;
                }
                let nap = left.min(crate::util::SLEEP_BACKSTOP);
                self.conduit.wait_for_arrival(set, nap)?;
            } else {
                backoff.snooze();
            }
        }
    }

    /// Blocking enqueue: while queue `q` of `dest` is full, serves the caller's own
    /// queues `own` (One-poll order), handing each frame to `serve`, so that two ranks
    /// filling each other's queues cannot deadlock. Returns once the frame is committed.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, conduit::ReceivedFrame, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add(QueueSpec::new("tiny", 2));
    /// let sums = cfg.threads(2, |setup| -> amrq::Result<u64> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     let own = rq.poll_set(&[q])?;
    ///     let (peer, mut sum) = (1 - rq.rank(), 0);
    ///     // Both ranks send 1000 frames into the other's 2-slot queue at once.
    ///     for i in 0..1000 {
    ///         rq.enqueue_or_serve(peer, q, &[i], &[], &own, |_, f| sum += f.args()[0])?;
    ///     }
    ///     while let Ok((_, f)) = rq.wait(&own, Some(std::time::Duration::from_millis(50))) {
    ///         sum += f.args()[0];
    ///         f.release(); // dropped without `release`, the frame would stay queued
    ///     }
    ///     Ok(sum)
    /// }).unwrap();
    /// assert_eq!(sums, [999 * 1000 / 2; 2]);
    /// ```
    pub fn enqueue_or_serve(
        &self,
        dest: Rank,
        q: QueueId,
        args: &[u64],
        payload: &[u8],
        own: &PollSet,
        mut serve: impl FnMut(QueueId, &C::Frame<'_>),
    ) -> Result<(), RqError> {
        let mut backoff = crate::util::Backoff::new();
        while !self.enqueue(dest, q, args, payload)? {
            match self.one_poll(own)? {
                Some((from, f)) => {
                    serve(from, &f);
                    f.release();
                    backoff.reset();
                }
                None => {
                    if backoff.is_yielding() {
                        self.conduit.check_peers()?;
                        if self.conduit.peer_left(dest) {
                            // Its last drain is visible now: one more try.
                            if self.enqueue(dest, q, args, payload)? {
                                return Ok(());
                            }
                            return Err(ConduitError::PeerLeft { rank: dest }.into());
                        }
                    }
                    backoff.snooze(); // room comes from the peer draining: no arrival to sleep on
                }
            }
        }
        Ok(())
    }

    /// Frames that arrived on local queue `q` from a rank its senders do not include:
    /// dropped, never delivered.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add(QueueSpec::new("from 0 only", 16).senders_only(vec![0]));
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     rq.enqueue(0, q, &[1], &[])?; // rank 0 may send: delivered
    ///     assert_eq!(rq.dropped(q), 0);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn dropped(&self, q: QueueId) -> u64 {
        self.conduit.dropped(q.index())
    }

    /// The faults of peers this rank has seen: frames dropped because a correct peer
    /// never sends them, per sender, and rings closed for corrupt headers (see
    /// [`Faults`](crate::conduit::Faults)).
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     let f = rq.faults(); // correct peers: nothing dropped, no ring closed
    ///     assert_eq!((f.total(), f.of(1 - rq.rank()), f.closed().len()), (0, 0, 0));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn faults(&self) -> crate::conduit::Faults {
        self.conduit.faults()
    }

    /// This rank's registered segment (first byte, length): where Long messages to this
    /// rank land.
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// let mut eps = amrq::conduit::threads::endpoints_for(1, &Config::new().conduit_spec()).unwrap();
    /// let (base, len) = Rq::new(eps.remove(0)).segment();
    /// assert!(len >= 4096 && !base.as_ptr().is_null());
    /// ```
    pub fn segment(&self) -> (std::ptr::NonNull<u8>, usize) {
        self.conduit.segment()
    }
}
