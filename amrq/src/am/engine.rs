//! The AM runtime of one rank: sending requests and replies, polling and dispatch, and
//! the runtime's own barrier.

use super::barrier::{Barrier, TAG_BARRIER};
use super::error::Stop;
use super::handlers::FIRST_USER_TAG;
use super::payload::{Payload, ShortArgs};
use super::{AmError, HandlerTable, Msg, ReplyHandler, ReqCtx, RequestHandler};
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, ConduitError, Fault, FaultKind, PollSet, Rank, ReceivedFrame};
use crate::rq::{QueueId, Rq};
use crate::util::{Backoff, SLEEP_BACKSTOP};
use std::cell::Cell;

/// Replies run per `poll` before requests are looked at (GASNet polls 10 of each).
const REPLY_BUDGET: usize = 32;
/// Requests run per `poll`.
const REQUEST_BUDGET: usize = 64;
const _: () = assert!(super::segment_service::TAG_GET_PACKED < FIRST_USER_TAG);

/// One rank's Active Messages runtime: its queues, its handler table and the state its
/// handlers see.
///
/// ```
/// use amrq::prelude::*;
/// use std::cell::Cell;
///
/// struct Counter { hits: Cell<u64> }
/// let out = amrq::threads::run(4, &Config::default(), |conduit| {
///     let mut table = HandlerTable::new();
///     let hit = table.request("hit", |s: &Counter, _ctx, m| { s.hits.set(s.hits.get() + m.arg(0)?); Ok(()) });
///     let am = Am::new(conduit, table, Counter { hits: Cell::new(0) })?;
///     for dest in 0..am.size() {
///         am.request(dest, hit, &[1])?;
///     }
///     am.wait_until(|s| s.hits.get() == 4)?;
///     am.barrier()?;
///     Ok::<_, AmError>(am.state().hits.get())
/// }).unwrap();
/// assert!(out.into_iter().all(|r| r == Ok(4)));
/// ```
pub struct Am<S, C: Conduit = MemConduit> {
    rq: Rq<C>,
    pub(super) table: HandlerTable<S, C>,
    pub(super) state: S,
    /// The runtime's barrier.
    barrier: Barrier,
    /// Replies taken in a row by waits without a look at the requests.
    reply_streak: Cell<usize>,
    /// The AM queues, for a wait that has spun long enough to sleep on them.
    am_queues: PollSet,
    /// One-sided operations in flight through frames.
    pub(super) ops: std::cell::RefCell<super::ops::Ops>,
    /// Where this rank's segment is allocated: one allocator per segment, whatever
    /// uses it (every `Rma` over this `Am` shares it).
    segment_alloc: std::cell::RefCell<super::SegmentAllocator>,
    /// While a handler serves a call ([`Am::call`]): `Some`, with the value it answered.
    /// Handlers do not nest (a handler cannot send requests), so one is enough.
    pub(super) call_value: Cell<Option<Option<u64>>>,
}

impl<S, C: Conduit> std::fmt::Debug for Am<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Am")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl<S, C: Conduit> Am<S, C> {
    /// Starts the AM layer of this rank. Collective: every rank calls it with a table of
    /// the same shape, or every rank gets [`AmError::HandlerTableMismatch`].
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let out = amrq::threads::run(2, &Config::default(), |c| {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     Ok::<_, AmError>((am.rank(), am.size()))
    /// })
    /// .unwrap();
    /// assert_eq!(out, [Ok((0, 2)), Ok((1, 2))]);
    /// ```
    pub fn new(conduit: C, table: HandlerTable<S, C>, state: S) -> Result<Self, AmError> {
        let me = conduit.rank();
        let lens = conduit.allgather(table.len() as u64)?;
        let fps = conduit.allgather(table.fingerprint())?;
        let (my_len, my_fp) = (table.len(), table.fingerprint());
        if let Some(rank) = (0..lens.len()).find(|&r| lens[r] != my_len as u64 || fps[r] != my_fp) {
            return Err(AmError::HandlerTableMismatch {
                me,
                rank,
                my_len,
                their_len: lens[rank] as usize,
                my_fingerprint: my_fp,
                their_fingerprint: fps[rank],
            });
        }
        let am_queues =
            conduit.poll_set(&[QueueId::AM_REPLY.index(), QueueId::AM_REQUEST.index()])?;
        let conduit_size = conduit.size();
        let segment_bytes = conduit.caps().segment_bytes;
        Ok(Self {
            am_queues,
            ops: Default::default(),
            segment_alloc: std::cell::RefCell::new(super::SegmentAllocator::new(segment_bytes)),
            rq: Rq::new(conduit),
            table,
            state,
            barrier: Barrier::new(conduit_size),
            reply_streak: Cell::new(0),
            call_value: Cell::new(None),
        })
    }

    /// This rank.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// let ranks = amrq::threads::run(3, &Config::default(), |c| {
    ///     Am::new(c, HandlerTable::<()>::new(), ()).map(|am| am.rank())
    /// })
    /// .unwrap();
    /// assert_eq!(ranks.into_iter().collect::<Result<Vec<_>, _>>().unwrap(), [0, 1, 2]);
    /// ```
    pub fn rank(&self) -> Rank {
        self.rq.rank()
    }

    /// Ranks in the job.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// let sizes = amrq::threads::run(2, &Config::default(), |c| {
    ///     Am::new(c, HandlerTable::<()>::new(), ()).map(|am| am.size())
    /// })
    /// .unwrap();
    /// assert!(sizes.iter().all(|s| *s == Ok(2)));
    /// ```
    pub fn size(&self) -> usize {
        self.rq.size()
    }

    /// The state handlers see.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::threads::run(1, &Config::default(), |c| -> Result<(), AmError> {
    ///     let mut t = HandlerTable::new();
    ///     let bump = t.request("bump", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    ///     let am = Am::new(c, t, Cell::new(0))?;
    ///     am.request(0, bump, &[])?;
    ///     am.wait_until(|n| n.get() == 1)?;
    ///     assert_eq!(am.state().get(), 1);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The Remote Queues layer below (user queues live there too).
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16); // a user queue beside the AM queues
    /// amrq::threads::run(1, &cfg, |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     assert!(am.rq().enqueue(0, q, &[7], &[])?);
    ///     let mut args = [0u64; 8];
    ///     let got = am.rq().dequeue(q, &mut args, &mut [])?;
    ///     assert_eq!((got.map(|d| d.nargs), args[0]), (Some(1), 7));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn rq(&self) -> &Rq<C> {
        &self.rq
    }

    /// Starts the progress thread of the job's Interrupt queues
    /// ([`Rq::start_interrupts`]) under an AM layer, which owns the queues: the AM queues
    /// stay with this thread's polls.
    ///
    /// ```
    /// use amrq::{config::{Delivery, QueueSpec}, prelude::*};
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
    /// let mut cfg = Config::default();
    /// let alarms = cfg.add(QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt));
    /// amrq::threads::run(1, &cfg, |c| -> Result<(), AmError> {
    ///     let mut am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     let seen = Arc::new(AtomicU64::new(0));
    ///     let s = seen.clone();
    ///     let _intr = am
    ///         .start_interrupts(move |_q, _src, args, _p| { s.fetch_add(args[0], Ordering::Relaxed); })
    ///         .expect("an Interrupt queue");
    ///     am.rq().enqueue(0, alarms, &[5], &[])?;
    ///     while seen.load(Ordering::Relaxed) != 5 {} // no poll: the handler ran anyway
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn start_interrupts<H>(&mut self, handler: H) -> Option<crate::rq::Interrupts>
    where
        H: FnMut(QueueId, Rank, &[u64], &[u8]) + Send + 'static,
    {
        self.rq.start_interrupts(handler)
    }

    /// The allocator of this rank's registered segment: one per segment, shared by
    /// everything that allocates in it (every `Rma` over this `Am`).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::threads::run(1, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     let at = am.segment_allocator().borrow_mut().alloc_local(64, 8);
    ///     assert!(at.is_some_and(|off| off % 8 == 0));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn segment_allocator(&self) -> &std::cell::RefCell<super::SegmentAllocator> {
        &self.segment_alloc
    }

    /// Largest Medium payload in bytes, requests and replies alike (≥ 4096 with the
    /// default ring of 256 slots).
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// amrq::threads::run(1, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     assert!(am.max_medium() >= 4096);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn max_medium(&self) -> usize {
        let ch = &self.rq.conduit().caps().channels;
        ch[QueueId::AM_REQUEST.index()]
            .max_payload
            .min(ch[QueueId::AM_REPLY.index()].max_payload)
    }

    /// Waits until every rank has called it ([`Am::barrier_notify`] then
    /// [`Am::barrier_wait`]), running handlers meanwhile.
    ///
    /// If an error interrupted this rank's last barrier (a handler returned one while
    /// it waited), the next call finishes that barrier rather than entering a new one,
    /// so a program that handles the error and calls `barrier` again stays in step
    /// with the others. Errors of peers' messages never interrupt it: they are
    /// recorded as the peers' faults ([`Am::faults`]).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let arrived = AtomicUsize::new(0);
    /// amrq::threads::run(3, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     arrived.fetch_add(1, Ordering::SeqCst);
    ///     am.barrier()?;
    ///     assert_eq!(arrived.load(Ordering::SeqCst), 3); // nobody leaves before all came
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn barrier(&self) -> Result<(), AmError> {
        if !self.barrier.interrupted() {
            self.barrier_notify()?;
        }
        self.barrier_wait()
    }

    /// Enters the barrier without waiting (split phase): the program computes, then
    /// calls [`Am::barrier_wait`] or polls [`Am::barrier_try`] until it says done.
    /// Entering again before that is [`AmError::BarrierInProgress`].
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::threads::run(3, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     am.barrier_notify()?;
    ///     let mut overlapped = 0u64;
    ///     while !am.barrier_try()? {
    ///         overlapped += 1; // work that does not need the others
    ///     }
    ///     am.barrier_notify()?; // the next one
    ///     am.barrier_wait()
    /// }).unwrap();
    /// ```
    pub fn barrier_notify(&self) -> Result<(), AmError> {
        self.barrier.notify(self)
    }

    /// Makes progress on the barrier this rank entered (polling once); `Ok(true)` once
    /// every rank has entered it, which ends it. [`AmError::NoBarrier`] if this rank has
    /// not entered one.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// amrq::threads::run(2, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     assert!(matches!(am.barrier_try(), Err(AmError::NoBarrier)));
    ///     am.barrier_notify()?;
    ///     while !am.barrier_try()? {}
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn barrier_try(&self) -> Result<bool, AmError> {
        self.barrier.try_complete(self)
    }

    /// Waits for the barrier this rank entered to complete, running handlers meanwhile
    /// (spinning a bounded time, then sleeping until a message arrives).
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// amrq::threads::run(2, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     am.barrier_notify()?;
    ///     let overlapped: u64 = (1..=100).sum(); // work done while the others arrive
    ///     am.barrier_wait()?;
    ///     assert_eq!(overlapped, 5050);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn barrier_wait(&self) -> Result<(), AmError> {
        self.barrier.wait(self)
    }

    /// Sends a Short request (0–8 args) to `dest`, waiting for room if needed (running
    /// handlers meanwhile).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::threads::run(2, &Config::default(), |c| -> Result<(), AmError> {
    ///     let mut t = HandlerTable::new();
    ///     let add = t.request("add", |sum: &Cell<u64>, _ctx, m| {
    ///         sum.set(sum.get() + m.args().iter().sum::<u64>());
    ///         Ok(())
    ///     });
    ///     let am = Am::new(c, t, Cell::new(0))?;
    ///     if am.rank() == 0 {
    ///         am.request(1, add, &[1, 2, 3])?;
    ///     } else {
    ///         am.wait_until(|sum| sum.get() == 6)?;
    ///     }
    ///     am.barrier()
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn request(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
    ) -> Result<(), AmError> {
        let empty = Payload::Inline(&[]);
        if self.enqueue(dest, QueueId::AM_REQUEST, handler.0, args, empty)? {
            return Ok(());
        }
        self.short_when_room(dest, QueueId::AM_REQUEST, handler.0, ShortArgs::of(args))
    }

    /// [`Am::send_when_room`] for a Short request or reply (queue `q`), polling what
    /// that queue's sender may run while it waits. Its own function, with the args by
    /// value, so that the inlined send neither builds the retry's `Payload` nor stores
    /// the caller's args on every send (3 stores and instructions fewer per send under
    /// callgrind, and one store fewer). A sender whose slot stores wait for their cache
    /// lines runs only as many sends ahead as the store buffer holds stores: 16 more
    /// stack stores per send slowed the stream's sender from 28 to 71 ns.
    #[cold]
    #[inline(never)]
    pub(crate) fn short_when_room(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: ShortArgs,
    ) -> Result<(), AmError> {
        let args = args.as_slice();
        let empty = Payload::Inline(&[]);
        let poll: fn(&Self) -> Result<usize, AmError> = match q == QueueId::AM_REPLY {
            true => Self::poll_replies,
            false => Self::poll,
        };
        self.send_when_room(dest, q, tag, args, empty, poll)
    }

    /// What a rank waiting for room for a reply runs: only reply handlers, which never
    /// send, so this wait cannot grow into a cycle of ranks each waiting for the next
    /// (the request/reply rule).
    fn poll_replies(&self) -> Result<usize, AmError> {
        Ok(self.drain(QueueId::AM_REPLY, REPLY_BUDGET)?)
    }

    /// Sends a Medium request: args plus a payload of up to [`Am::max_medium`] bytes.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::RefCell;
    /// amrq::threads::run(2, &Config::default(), |c| -> Result<(), AmError> {
    ///     let mut t = HandlerTable::new();
    ///     let text = t.request("text", |got: &RefCell<String>, _ctx, m| {
    ///         got.borrow_mut().push_str(&String::from_utf8_lossy(m.payload()));
    ///         Ok(())
    ///     });
    ///     let am = Am::new(c, t, RefCell::new(String::new()))?;
    ///     if am.rank() == 0 {
    ///         am.request_medium(1, text, &[], b"hello")?;
    ///     } else {
    ///         am.wait_until(|got| got.borrow().as_str() == "hello")?;
    ///     }
    ///     am.barrier()
    /// })
    /// .unwrap();
    /// ```
    pub fn request_medium(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        self.send_request(dest, handler.0, args, Payload::Inline(payload))
    }

    /// Sends a Long request: `payload` is deposited at byte `offset` of `dest`'s
    /// registered segment before the handler runs there, and handed to it in place.
    /// [`ConduitError::OutOfSegment`](crate::conduit::ConduitError::OutOfSegment) if the
    /// range does not fit; who may write which bytes of a segment is the program's
    /// protocol (as with put).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::threads::run(2, &Config::default(), |c| -> Result<(), AmError> {
    ///     let mut t = HandlerTable::new();
    ///     // The payload is already in place in this rank's segment when the handler runs.
    ///     let landed = t.request("landed", |sum: &Cell<u64>, _ctx, m| {
    ///         sum.set(m.payload().iter().map(|&b| u64::from(b)).sum());
    ///         Ok(())
    ///     });
    ///     let am = Am::new(c, t, Cell::new(0))?;
    ///     if am.rank() == 0 {
    ///         am.request_long(1, landed, &[], &[1u8; 1000], 4096)?;
    ///     } else {
    ///         am.wait_until(|sum| sum.get() == 1000)?;
    ///     }
    ///     am.barrier()
    /// })
    /// .unwrap();
    /// ```
    pub fn request_long(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<(), AmError> {
        self.send_request(dest, handler.0, args, Payload::Long(payload, offset))
    }

    /// This rank's registered segment (first byte, length): where Long messages to
    /// this rank land.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// amrq::threads::run(1, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     let (base, len) = am.segment();
    ///     assert!(len > 0 && base.as_ptr() as usize % 8 == 0);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn segment(&self) -> (std::ptr::NonNull<u8>, usize) {
        self.rq.segment()
    }

    /// One attempt to enqueue into queue `q` of `dest`; `Ok(false)` if full.
    #[inline(always)]
    pub(crate) fn enqueue(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: Payload<'_>,
    ) -> Result<bool, AmError> {
        Ok(match payload {
            Payload::Inline(p) => self.rq.enqueue_runtime(dest, q, tag, args, p)?,
            Payload::Long(p, offset) => self
                .rq
                .enqueue_runtime_long(dest, q, tag, args, p, offset)?,
        })
    }

    /// Sends a request if there is room now: `Ok(false)` (nothing sent) otherwise.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::threads::run(1, &Config::default(), |c| -> Result<(), AmError> {
    ///     let mut t = HandlerTable::new();
    ///     let count = t.request("count", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    ///     let am = Am::new(c, t, Cell::new(0))?;
    ///     let mut sent = 0;
    ///     while am.try_request(0, count, &[], &[])? {
    ///         sent += 1; // until the ring to itself is full: nothing is polled meanwhile
    ///     }
    ///     am.wait_until(|n| n.get() == sent)?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn try_request(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, AmError> {
        self.enqueue(
            dest,
            QueueId::AM_REQUEST,
            handler.0,
            args,
            Payload::Inline(payload),
        )
    }

    #[inline]
    pub(crate) fn send_request(
        &self,
        dest: Rank,
        tag: u16,
        args: &[u64],
        payload: Payload<'_>,
    ) -> Result<(), AmError> {
        if self.enqueue(dest, QueueId::AM_REQUEST, tag, args, payload)? {
            return Ok(());
        }
        // Room appears when `dest` drains its queue; meanwhile we drain ours, so two
        // ranks flooding each other both make progress.
        self.send_when_room(dest, QueueId::AM_REQUEST, tag, args, payload, Self::poll)
    }

    #[inline(always)]
    pub(crate) fn send_reply(
        &self,
        dest: Rank,
        h: ReplyHandler,
        args: &[u64],
        payload: Payload<'_>,
    ) -> Result<(), AmError> {
        if self.enqueue(dest, QueueId::AM_REPLY, h.0, args, payload)? {
            return Ok(());
        }
        self.send_when_room(
            dest,
            QueueId::AM_REPLY,
            h.0,
            args,
            payload,
            Self::poll_replies,
        )
    }

    /// Retries a send into queue `q` of `dest` until there is room, running `poll`
    /// (which returns how many handlers ran) between attempts.
    #[cold]
    #[inline(never)]
    fn send_when_room(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: Payload<'_>,
        poll: impl Fn(&Self) -> Result<usize, AmError>,
    ) -> Result<(), AmError> {
        let mut backoff = Backoff::new();
        loop {
            if poll(self)? == 0 {
                // A failure anywhere in the job is reported before "it left": a rank
                // that left because another failed is not the one to blame.
                if backoff.is_yielding() {
                    self.rq.conduit().check_peers()?;
                }
                if backoff.is_yielding() && self.rq.conduit().peer_left(dest) {
                    // Its last drain is visible now: one more try, then no room will come.
                    return match self.enqueue(dest, q, tag, args, payload)? {
                        true => Ok(()),
                        false => Err(ConduitError::PeerLeft { rank: dest }.into()),
                    };
                }
                // Room comes from the receiver draining, which sends us nothing: yield.
                self.snooze(&mut backoff, false)?;
            } else {
                backoff.reset();
            }
            if self.enqueue(dest, q, tag, args, payload)? {
                return Ok(());
            }
        }
    }

    /// Waits a little after an empty poll: spins a bounded time, then (with `sleep`)
    /// sleeps until an AM frame arrives or [`SLEEP_BACKSTOP`](crate::util::SLEEP_BACKSTOP) passes, or yields. Once
    /// past spinning it checks that every peer is alive, and (waiting for an arrival)
    /// that some peer is still there to send.
    fn snooze(&self, backoff: &mut Backoff, sleep: bool) -> Result<(), AmError> {
        if !backoff.is_yielding() {
            backoff.snooze();
            return Ok(());
        }
        let conduit = self.rq.conduit();
        conduit.check_peers()?;
        if sleep && conduit.all_peers_left() {
            // What they sent before leaving is visible now: one last look.
            return match self.poll()? {
                0 => Err(ConduitError::AllPeersLeft.into()),
                _ => Ok(()),
            };
        }
        if sleep {
            conduit.wait_for_arrival(&self.am_queues, SLEEP_BACKSTOP)?;
        } else {
            backoff.snooze();
        }
        Ok(())
    }

    /// Runs the handlers of arrived messages: up to 32 replies first, then up to 64
    /// requests. Returns how many messages were taken.
    ///
    /// A message a correct peer never sends (a handler id this rank does not have, a
    /// request naming a reply handler, one whose handler finds an arg missing) is
    /// dropped and recorded as its sender's fault ([`Am::faults`]); it is not an error
    /// of this call, which goes on with the next message. An error a handler returns
    /// for other reasons is returned, after its message was removed.
    ///
    /// A rank that has polled in vain a long while (thousands of polls) arms its AM
    /// queues, as One-poll does: then an empty poll reads one word, and the first
    /// message disarms them.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::threads::run(1, &Config::default(), |c| -> Result<(), AmError> {
    ///     let mut t = HandlerTable::new();
    ///     let hit = t.request("hit", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    ///     let am = Am::new(c, t, Cell::new(0))?;
    ///     assert_eq!(am.poll()?, 0);
    ///     am.request(0, hit, &[])?;
    ///     while am.poll()? == 0 {}
    ///     assert_eq!(am.state().get(), 1);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn poll(&self) -> Result<usize, AmError> {
        if self.rq.conduit().nothing_arrived(&self.am_queues) {
            return Ok(0); // inline in the caller's loop: a few instructions
        }
        self.poll_queues()
    }

    /// [`Am::poll`] past the armed check: drains the queues.
    #[inline(never)]
    fn poll_queues(&self) -> Result<usize, AmError> {
        let (rep, req) = (QueueId::AM_REPLY, QueueId::AM_REQUEST);
        let took = self.rq.conduit().drain_both::<Stop, _, _>(
            (rep.index(), REPLY_BUDGET),
            |frame| self.run_reply(frame),
            (req.index(), REQUEST_BUDGET),
            |frame| self.run_request(frame),
        )?;
        self.rq.conduit().polled(&self.am_queues, took);
        Ok(took)
    }

    /// Polls until `done(state)` holds. Spins a bounded time between empty polls, then
    /// yields; ends with [`ConduitError::PeerDead`](crate::conduit::ConduitError::PeerDead)
    /// if a rank of the job has failed.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// struct S { pong: ReplyHandler, got: Cell<u64> }
    /// amrq::threads::run(2, &Config::default(), |c| -> Result<(), AmError> {
    ///     let mut t = HandlerTable::new();
    ///     let pong = t.reply("pong", |s: &S, m| { s.got.set(m.arg(0)?); Ok(()) });
    ///     let ping = t.request("ping", |s: &S, ctx, m| ctx.reply(s.pong, &[m.arg(0)? * 2]));
    ///     let am = Am::new(c, t, S { pong, got: Cell::new(0) })?;
    ///     if am.rank() == 0 {
    ///         am.request(1, ping, &[21])?;
    ///         am.wait_until(|s| s.got.get() == 42)?; // rank 1 serves it in its barrier
    ///     }
    ///     am.barrier()
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn wait_until(&self, mut done: impl FnMut(&S) -> bool) -> Result<(), AmError> {
        let mut backoff = Backoff::new();
        while !done(&self.state) {
            self.wait_round(&mut backoff)?;
        }
        Ok(())
    }

    /// [`Am::wait_until`] for a condition that only a message of `from` can make true:
    /// [`ConduitError::PeerLeft`] once `from` has left the job and the condition still
    /// does not hold after a last look (what it sent before leaving is visible then).
    pub(crate) fn wait_on(
        &self,
        from: Rank,
        mut done: impl FnMut(&S) -> bool,
    ) -> Result<(), AmError> {
        let mut backoff = Backoff::new();
        while !done(&self.state) {
            if backoff.is_yielding() && self.rq.conduit().peer_left(from) {
                self.poll()?;
                if done(&self.state) {
                    break;
                }
                self.rq.conduit().check_peers()?; // a failure is reported before "left"
                return Err(ConduitError::PeerLeft { rank: from }.into());
            }
            self.wait_round(&mut backoff)?;
        }
        Ok(())
    }

    /// One round of a wait: at most one reply when one is there (so that the caller
    /// checks its condition right after it, which is the round trip's critical path),
    /// otherwise the requests; requests are polled at least once every
    /// [`REPLY_BUDGET`] replies, so a stream of replies cannot starve them.
    #[inline(always)]
    fn wait_round(&self, backoff: &mut Backoff) -> Result<(), AmError> {
        let streak = self.reply_streak.get();
        if streak < REPLY_BUDGET && self.drain(QueueId::AM_REPLY, 1)? == 1 {
            self.reply_streak.set(streak + 1);
            backoff.reset();
            return Ok(());
        }
        self.reply_streak.set(0);
        if self.drain(QueueId::AM_REQUEST, REQUEST_BUDGET)? == 0 {
            self.snooze(backoff, true)
        } else {
            backoff.reset();
            Ok(())
        }
    }

    /// [`Am::wait_until`] with a deadline: [`AmError::Timeout`] if `done(state)` still
    /// does not hold after `timeout`.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # use std::time::Duration;
    /// let out = amrq::threads::run(1, &Config::default(), |c| {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     am.wait_until_for(Duration::from_millis(10), |_| false)
    /// }).unwrap();
    /// assert!(matches!(out[0], Err(AmError::Timeout { .. })));
    /// ```
    pub fn wait_until_for(
        &self,
        timeout: std::time::Duration,
        mut done: impl FnMut(&S) -> bool,
    ) -> Result<(), AmError> {
        let start = std::time::Instant::now();
        let mut backoff = Backoff::new();
        while !done(&self.state) {
            if self.poll()? == 0 {
                if start.elapsed() > timeout {
                    return Err(AmError::Timeout {
                        waited: start.elapsed(),
                    });
                }
                self.snooze(&mut backoff, true)?;
            } else {
                backoff.reset();
            }
        }
        Ok(())
    }

    /// Drains up to `budget` frames of queue `q`; returns how many were taken.
    ///
    /// The reply queue, empty in most polls, is first asked whether it is quiet (a few
    /// loads); the request queue is drained at once: its drain finds an empty ring in
    /// a look, and a poll that has a request to run saves the quiet scan before it
    /// (callgrind: 28 instructions fewer per AM round trip, 22 per one-way AM; the
    /// `pingpong` example's ratio to raw fell from a median of 1.074 to 1.043 at the
    /// ~145 ns placement, 6 pairs of runs alternating, 5 in its favour).
    #[inline(always)]
    fn drain(&self, q: QueueId, budget: usize) -> Result<usize, Stop> {
        let conduit = self.rq.conduit();
        // One closure per queue, so that which table to look in is known where the
        // closure is compiled, not read back from its captures per frame (13
        // instructions per one-word AM under callgrind).
        match q == QueueId::AM_REQUEST {
            true => conduit.drain(q.index(), budget, |frame| self.run_request(frame)),
            false if conduit.quiet(q.index()) => Ok(0),
            false => conduit.drain(q.index(), budget, |frame| self.run_reply(frame)),
        }
    }

    /// Runs the request handler `frame` names; a peer's fault is contained.
    #[inline(always)]
    fn run_request(&self, frame: &C::Frame<'_>) -> Result<(), Stop> {
        match self.dispatch_request(frame) {
            Ok(()) => Ok(()),
            Err(e) => self.contain(QueueId::AM_REQUEST, e),
        }
    }

    /// Runs the reply handler `frame` names; a peer's fault is contained.
    #[inline(always)]
    fn run_reply(&self, frame: &C::Frame<'_>) -> Result<(), Stop> {
        match self.dispatch_reply(frame) {
            Ok(()) => Ok(()),
            Err(e) => self.contain(QueueId::AM_REPLY, e),
        }
    }

    /// Runs the request handler `frame` names.
    #[inline(always)]
    fn dispatch_request(&self, frame: &C::Frame<'_>) -> Result<(), AmError> {
        let msg = Self::msg_of(frame);
        match self.table.request_fn(frame.tag()) {
            Some(h) => {
                let source = msg.source;
                h(&self.state, ReqCtx { am: self, source }, msg)
            }
            None => self.dispatch_other(true, frame.tag(), msg),
        }
    }

    /// Runs the reply handler `frame` names.
    #[inline(always)]
    fn dispatch_reply(&self, frame: &C::Frame<'_>) -> Result<(), AmError> {
        let msg = Self::msg_of(frame);
        match self.table.reply_fn(frame.tag()) {
            Some(h) => h(&self.state, msg),
            None => self.dispatch_other(false, frame.tag(), msg),
        }
    }

    /// What a handler is handed of `frame`.
    #[inline(always)]
    fn msg_of<'f>(frame: &'f C::Frame<'_>) -> Msg<'f> {
        Msg {
            source: frame.source(),
            args: frame.args(),
            payload: frame.payload(),
        }
    }

    /// A handler's error: a peer's fault is recorded against it (the message is
    /// dropped, the poll goes on); any other error is returned.
    #[cold]
    #[inline(never)]
    fn contain(&self, q: QueueId, e: AmError) -> Result<(), Stop> {
        match e.peer_fault() {
            Some((source, kind)) => {
                self.record_fault(q, source, kind);
                Ok(())
            }
            None => Err(e.into()),
        }
    }

    #[cold]
    fn record_fault(&self, q: QueueId, source: Rank, kind: FaultKind) {
        self.rq.conduit().record_fault(Fault {
            source: Some(source),
            channel: q.index(),
            kind,
        });
    }

    /// The faults of peers this rank has seen: messages dropped because a correct peer
    /// never sends them (unknown handlers, missing args, malformed runtime messages,
    /// frames outside this rank's memory, corrupt rings), per sender. See
    /// [`Faults`](crate::conduit::Faults).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let out = amrq::threads::run(2, &Config::default(), |c| -> Result<u64, AmError> {
    ///     let mut t = HandlerTable::<()>::new();
    ///     let one = t.request("one", |_, _ctx, m| m.arg(0).map(drop));
    ///     let am = Am::new(c, t, ())?;
    ///     am.request(1 - am.rank(), one, &[])?; // no arg: a bad message
    ///     am.wait_until(|_| am.faults().total() == 1)?;
    ///     am.barrier()?;
    ///     Ok(am.faults().of(1 - am.rank()))
    /// })
    /// .unwrap();
    /// assert_eq!(out, [Ok(1), Ok(1)]);
    /// ```
    pub fn faults(&self) -> crate::conduit::Faults {
        self.rq.faults()
    }

    #[cold]
    fn dispatch_other(&self, is_request: bool, tag: u16, msg: Msg<'_>) -> Result<(), AmError> {
        if self.serve_one_sided(is_request, tag, msg)? || self.serve_call(is_request, tag, msg)? {
            return Ok(());
        }
        if tag == TAG_BARRIER && is_request {
            return self.barrier.arrived(msg.arg(0)?, msg.source);
        }
        let (q, arrived_as) = match is_request {
            true => (QueueId::AM_REQUEST, "request"),
            false => (QueueId::AM_REPLY, "reply"),
        };
        let kind = match self.table.kind(tag) {
            Some(_) => FaultKind::WrongHandlerKind {
                id: tag,
                name: self.table.name(tag),
                arrived_as,
            },
            None => FaultKind::UnknownHandler { id: tag },
        };
        self.record_fault(q, msg.source, kind);
        Ok(())
    }
}
