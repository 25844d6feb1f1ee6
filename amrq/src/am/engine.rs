//! The AM runtime of one rank: what it holds, its set-up and the runtime's own barrier;
//! sending is in [`send`], polling and dispatch in [`poll`].

use super::barrier::Barrier;
use super::handlers::FIRST_USER_TAG;
use super::{AmError, HandlerTable};
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, PayloadView, PollSet, Rank};
use crate::rq::{QueueId, Rq};
use std::cell::Cell;

mod poll;
mod send;

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
/// let out = amrq::Config::new().threads(4, |setup| {
///     let mut table = HandlerTable::new();
///     let hit = table.request("hit", |s: &Counter, _ctx, m| { s.hits.set(s.hits.get() + m.arg(0)?); Ok(()) });
///     let am = setup.start(table, Counter { hits: Cell::new(0) })?;
///     for dest in 0..am.size() {
///         am.request(dest, hit, &[1])?;
///     }
///     am.wait_until(|s| s.hits.get() == 4)?;
///     am.barrier()?;
///     Ok(am.state().hits.get())
/// }).unwrap();
/// assert_eq!(out, [4; 4]);
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
    /// Calls in flight ([`Am::call`](super::Am::call)).
    pub(super) calls: super::pending::CallTable,
    /// Request failures the runtime's own waits ran, and errors the progress engine
    /// met, for the program's next poll or wait (`failure.rs`).
    pub(super) kept_failures: std::cell::RefCell<std::collections::VecDeque<AmError>>,
    /// Completion events not yet posted (`events.rs`).
    pub(super) events: std::cell::RefCell<super::events::Events>,
    /// Whether there are any kept failures or events not yet posted, in one load.
    pub(super) attention: Cell<bool>,
    /// The job's end, as this rank sees it (`exit.rs`).
    pub(super) exit: super::exit::Exit,
    /// What this rank's other threads' senders sent (`sender.rs`).
    pub(super) threads: super::sender::Threads,
    /// Calls of this rank's other threads in flight (`thread_calls.rs`).
    pub(super) thread_calls: super::thread_calls::ThreadCalls,
}

impl<S, C: Conduit> Drop for Am<S, C> {
    fn drop(&mut self) {
        self.say_unposted_events();
        self.say_unreturned_failures();
    }
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
    /// The AM queues as one poll set, for a progress engine that sleeps on them.
    pub(crate) fn am_queues(&self) -> &PollSet {
        &self.am_queues
    }
}

impl<S, C: Conduit> Am<S, C> {
    /// Starts the AM layer of this rank. Collective: every rank calls it with a table of
    /// the same shape, or every rank gets [`AmError::HandlerTableMismatch`].
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let out = amrq::Config::new().threads(2, |setup| {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     Ok((am.rank(), am.size()))
    /// })
    /// .unwrap();
    /// assert_eq!(out, [(0, 2), (1, 2)]);
    /// ```
    pub fn new(conduit: C, table: HandlerTable<S, C>, state: S) -> Result<Self, AmError> {
        let me = conduit.rank();
        let (my_len, my_fp) = (table.len(), table.fingerprint());
        // One all-gather of both in a word; the two apart, for the error, only when the
        // words differ (every rank sees that, so every rank takes part).
        let mine = my_fp ^ (my_len as u64).rotate_left(32);
        let words = conduit.allgather(mine)?;
        if words.iter().any(|&w| w != mine) {
            let lens = conduit.allgather(my_len as u64)?;
            let fps = conduit.allgather(my_fp)?;
            let rank = (0..lens.len())
                .find(|&r| lens[r] != my_len as u64 || fps[r] != my_fp)
                .unwrap_or(me);
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
            calls: Default::default(),
            kept_failures: Default::default(),
            events: Default::default(),
            attention: Cell::new(false),
            exit: super::exit::Exit::new(me, conduit_size),
            threads: super::sender::Threads::new(),
            thread_calls: Default::default(),
        })
    }

    /// This rank.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// let ranks = amrq::Config::new().threads(3, |setup| {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let am: &Am<()> = job.am();
    ///     Ok(am.rank())
    /// })
    /// .unwrap();
    /// assert_eq!(ranks, [0, 1, 2]);
    /// ```
    pub fn rank(&self) -> Rank {
        self.rq.rank()
    }

    /// Ranks in the job.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// let sizes = amrq::Config::new().threads(2, |setup| {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     Ok(job.am().size())
    /// })
    /// .unwrap();
    /// assert_eq!(sizes, [2, 2]);
    /// ```
    pub fn size(&self) -> usize {
        self.rq.size()
    }

    /// The state handlers see.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let bump = t.request("bump", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    ///     let am = setup.start(t, Cell::new(0))?;
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
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
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
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut am = setup.start(HandlerTable::<()>::new(), ())?;
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
        H: FnMut(QueueId, Rank, &[u64], PayloadView<'_>) + Send + 'static,
    {
        self.rq.start_interrupts(handler)
    }

    /// This rank's registered segment (first byte, length): where Long messages to
    /// this rank land.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let (base, len) = am.segment();
    ///     assert!(len > 0 && base.as_ptr() as usize % 8 == 0);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn segment(&self) -> (std::ptr::NonNull<u8>, usize) {
        self.rq.segment()
    }

    /// The allocator of this rank's registered segment: one per segment, shared by
    /// everything that allocates in it (every `Rma` over this `Am`).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
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
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
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
    /// amrq::Config::new().threads(3, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
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
    /// amrq::Config::new().threads(3, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     am.barrier_notify()?;
    ///     let mut overlapped = 0u64;
    ///     while !am.barrier_try()? {
    ///         overlapped += 1; // work that does not need the others
    ///     }
    ///     am.barrier_notify()?; // the next one
    ///     Ok(am.barrier_wait()?)
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
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
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
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
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
}
