//! Requests from a rank's other threads: a [`Sender`] writes the destination's one
//! shared ring for them (`Config::sender_slots`),
//! reserving slots by compare-and-swap with no lock, and the destination polls that
//! ring with its AM requests. Handlers run only on the thread that holds the rank (the
//! one that started it): they see its state as `&S`, which need not be `Sync`, and
//! replies to a thread's requests run there too. In a job across hosts a thread's
//! frames wait in its rank's outbox, which the rank's thread empties when it polls,
//! sending them on as its own (`Conduit::forward_threads`).
//!
//! The job's end counts these requests: each `Sender` counts what it sent to each rank
//! in counts registered with its rank (read when the rank returns: every sender that
//! borrowed it is gone by then), the rank's `RETURNED` and `FLUSH` carry the sums, and
//! a peer counts as returned, or its answer to a flush as an answer, only once it has
//! taken that many from its shared ring.

use super::thread_calls::{OwnSlots, ThreadCalls};
use super::{Am, AmError, Answer, Args, Call, Handler, RequestHandler, CALL_ARGS};
use crate::conduit::mem::{Injector, MemConduit, Segments, ThreadOp, ThreadOpKind};
use crate::conduit::{Conduit, ConduitError, Message, Rank};
use crate::rq::{QueueId, RqError};
use crate::util::Backoff;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a sender that found no room sleeps between tries once it has spun.
const ROOM_NAP: Duration = Duration::from_micros(50);

/// What a rank knows of its senders: their counts, how many are alive, and whether the
/// rank's thread still serves them.
#[derive(Debug)]
pub(super) struct Threads {
    /// Each sender's requests per destination, registered when it is made, so that one
    /// forgotten (`mem::forget`) is counted too.
    counts: Mutex<Vec<Counts>>,
    /// Senders alive: while any is, a wait of this rank cannot conclude that nothing
    /// can arrive (one of them may send to it). A sender forgotten stays alive.
    live: AtomicUsize,
    /// The rank's thread has stopped serving (it unwound out of `run_workers`): a
    /// thread waiting for it fails instead.
    unserved: AtomicBool,
    /// The rank's thread, which alone runs its handlers.
    owner: std::thread::ThreadId,
}

/// One sender's requests per destination: written by that sender only.
type Counts = std::sync::Arc<[AtomicU64]>;

impl Threads {
    pub(super) fn new() -> Self {
        Self {
            counts: Mutex::new(Vec::new()),
            live: AtomicUsize::new(0),
            unserved: AtomicBool::new(false),
            owner: std::thread::current().id(),
        }
    }

    /// Registers a new sender's counts.
    fn register(&self, size: usize) -> Counts {
        let counts: Counts = (0..size).map(|_| AtomicU64::new(0)).collect();
        if let Ok(mut all) = self.counts.lock() {
            all.push(counts.clone());
        }
        counts
    }

    /// Requests the rank's senders sent to `dest` (at the rank's end: every sender that
    /// borrowed it is gone).
    pub(super) fn sent_to(&self, dest: Rank) -> u64 {
        let Ok(all) = self.counts.lock() else {
            return 0;
        };
        // ORDERING: Acquire pairs with each sender's Release store of its count.
        all.iter()
            .filter_map(|c| c.get(dest))
            .map(|n| n.load(Ordering::Acquire))
            .sum()
    }

    /// True while a sender of this rank is alive.
    pub(super) fn any_alive(&self) -> bool {
        // ORDERING: Acquire pairs with the Release decrement of a sender's drop.
        self.live.load(Ordering::Acquire) > 0
    }

    /// Why a wait of this thread for the rank's own thread cannot end, if it cannot:
    /// it is that thread, or that thread stopped serving.
    pub(super) fn unserved_here(&self) -> Option<AmError> {
        if std::thread::current().id() == self.owner {
            return Some(AmError::WaitOnRankThread);
        }
        self.stopped_serving()
    }

    /// [`AmError::RankNotServing`] if the rank's thread stopped serving.
    fn stopped_serving(&self) -> Option<AmError> {
        // ORDERING: Acquire pairs with the Release store of the serving thread's guard.
        self.unserved
            .load(Ordering::Acquire)
            .then_some(AmError::RankNotServing)
    }
}

/// Marks the rank unserved if the thread serving `run_workers` unwinds.
struct Serving<'a>(&'a Threads);

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // ORDERING: Release pairs with the Acquire load of `unserved_here`.
            self.0.unserved.store(true, Ordering::Release);
        }
    }
}

/// Sends AM requests from a thread of a rank other than the one that holds it: made by
/// [`Am::sender`] on the rank's thread and moved to the worker (`Send`, not `Sync`: one
/// per thread; [`Clone`] makes another). On one host requests go to the destination's
/// shared ring for threads, which its rank polls with its AM requests; across hosts
/// they wait in this rank's outbox until its thread polls and sends them on. The
/// handlers run on the destination rank's thread, and a reply to a thread's request
/// runs on the sending rank's thread. A frame carries at most 7 args (the eighth word
/// names the rank).
///
/// ```
/// use amrq::prelude::*;
/// use std::cell::Cell;
/// let mut cfg = Config::new();
/// cfg.sender_slots.set(256);
/// let out = cfg.threads(2, |setup| -> amrq::Result<u64> {
///     let mut t = HandlerTable::new();
///     let add = t.request("add", |sum: &Cell<u64>, _ctx, m| { sum.set(sum.get() + m.arg(0)?); Ok(()) });
///     let job = setup.start(t, Cell::new(0))?;
///     std::thread::scope(|s| -> amrq::Result<()> {
///         for w in 0..3u64 {
///             let mut sender = job.sender()?;
///             s.spawn(move || -> Result<(), AmError> {
///                 for dest in 0..sender.size() {
///                     sender.request(dest, add, &[w + 1])?;
///                 }
///                 Ok(())
///             });
///         }
///         // 2 ranks × 3 threads each send 1 + 2 + 3 here; this thread runs the handlers.
///         Ok(job.wait_until(|sum| sum.get() == 12)?)
///     })?;
///     job.barrier()?;
///     Ok(job.state().get())
/// })
/// .unwrap();
/// assert_eq!(out, [12, 12]);
/// ```
///
/// A sender cannot be shared between threads, and the rank it comes from cannot be
/// sent to one:
///
/// ```compile_fail,E0277
/// fn shared<T: Sync>() {}
/// shared::<amrq::am::Sender<'static>>();
/// ```
pub struct Sender<'a> {
    injector: Injector<'a>,
    /// Injectors into the job's shared queues, by queue index (none for the others).
    queues: Box<[Option<Injector<'a>>]>,
    /// Every rank's segment, mapped here (one host only).
    segments: Option<Segments<'a>>,
    threads: &'a Threads,
    /// Requests sent per destination (registered with the rank).
    sent: Counts,
    /// Where the answers of its calls land, and its own slots there.
    calls: &'a ThreadCalls,
    slots: OwnSlots,
}

impl<S> Am<S, MemConduit> {
    /// A [`Sender`] for another thread of this rank. [`AmError::NoSenderRing`] unless
    /// the job was started with `Config::sender_slots` (`AMRQ_SENDER_SLOTS`) above 0.
    /// In a job across hosts, its frames wait in the rank's outbox until the rank's
    /// thread next polls and sends them on as its own.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     assert!(matches!(job.sender(), Err(AmError::NoSenderRing)));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn sender(&self) -> Result<Sender<'_>, AmError> {
        let conduit = self.rq().conduit();
        let requests = Some(QueueId::AM_REQUEST.index());
        let ch = conduit
            .caps()
            .channels
            .iter()
            .position(|c| c.received_with == requests)
            .ok_or(AmError::NoSenderRing)?;
        let injector = conduit.injector(ch)?;
        let channels = &conduit.caps().channels;
        let queues = (0..channels.len())
            .map(|q| {
                let user_queue = q >= QueueId::FIRST_USER && channels[q].received_with.is_none();
                match user_queue && channels[q].shared && !channels[q].interrupt {
                    true => conduit.injector(q).map(Some),
                    false => Ok(None),
                }
            })
            .collect::<Result<_, _>>()?;
        // A job across hosts maps only this host's segments: its threads' one-sided
        // operations go through the rank's outbox (`Sender::through_rank`).
        let segments = conduit.segments_view().ok();
        self.thread_calls.set_boot(conduit.boot());
        let ways = Ways {
            injector,
            queues,
            segments,
        };
        Ok(Sender::new(ways, &self.threads, &self.thread_calls))
    }
}

/// How a sender reaches the job: the ring for threads' requests, the shared queues,
/// the segments.
struct Ways<'a> {
    injector: Injector<'a>,
    queues: Box<[Option<Injector<'a>>]>,
    segments: Option<Segments<'a>>,
}

impl<S> Am<S, MemConduit> {
    /// Runs `f(i, sender)` for `i` in `0..n` on `n` new threads of this rank, each with
    /// its own [`Sender`], while this thread runs the rank's handlers until every one
    /// has returned; then their results, in
    /// order. The first error of any, or of this thread's waits, is returned once all
    /// have ended: this thread serves the rank until then whatever happens, so a thread
    /// waiting for room in a ring of this rank is never left waiting. A thread's panic
    /// is resumed here after the others ended. The threads' error type is the caller's
    /// (`AmError`, `amrq::Error` for one-sided operations and queues too, or its own),
    /// named in the closure's signature; this thread's errors convert into it.
    ///
    /// A thread that sends to this rank needs this thread to poll: one that only joins
    /// its threads (as `std::thread::scope` does at its end) serves nothing meanwhile.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(256);
    /// let out = cfg.threads(2, |setup| -> amrq::Result<Vec<u64>> {
    ///     let mut t = HandlerTable::new();
    ///     let add = t.request("add", |sum: &Cell<u64>, _ctx, m| { sum.set(sum.get() + m.arg(0)?); Ok(()) });
    ///     let job = setup.start(t, Cell::new(0))?;
    ///     let sent = job.run_workers(4, |i, mut sender| -> Result<u64, AmError> {
    ///         for _ in 0..1000 {
    ///             sender.request(0, add, &[1])?;
    ///         }
    ///         Ok(i as u64)
    ///     })?;
    ///     job.barrier()?;
    ///     Ok(sent)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [vec![0, 1, 2, 3], vec![0, 1, 2, 3]]);
    /// ```
    pub fn run_workers<T, E, F>(&self, n: usize, f: F) -> Result<Vec<T>, E>
    where
        T: Send,
        E: From<AmError> + Send,
        F: Fn(usize, Sender<'_>) -> Result<T, E> + Sync,
    {
        let senders = (0..n)
            .map(|_| self.sender())
            .collect::<Result<Vec<_>, _>>()?;
        let ended = AtomicUsize::new(0);
        let (f, ended_ref) = (&f, &ended);
        let mut first_error: Option<E> = None;
        let serving = Serving(&self.threads);
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = senders
                .into_iter()
                .enumerate()
                .map(|(i, sender)| {
                    s.spawn(move || {
                        let _counted = Ended(ended_ref);
                        f(i, sender)
                    })
                })
                .collect();
            let all_ended = || ended.load(Ordering::Acquire) == n;
            // A runtime wait: its condition is the threads', not the handlers', and a
            // failure notice it runs is kept (returned below).
            if let Err(e) = self.wait_runtime(|_| all_ended()) {
                first_error.get_or_insert_with(|| e.into());
                // The rank is still served, a little more slowly, until they end.
                while !all_ended() {
                    if let Err(e) = self.poll().map(drop).or_else(|e| self.keep_failure(e)) {
                        first_error.get_or_insert_with(|| e.into());
                    }
                    std::thread::sleep(ROOM_NAP);
                }
            }
            handles.into_iter().map(|h| h.join()).collect()
        });
        drop(serving);
        if let Err(e) = self.attend() {
            first_error.get_or_insert(e.into());
        }
        let mut out = Vec::with_capacity(n);
        for outcome in outcomes {
            match outcome {
                Ok(Ok(v)) => out.push(v),
                Ok(Err(e)) => drop(first_error.get_or_insert(e)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// Counts a worker of [`Am::run_workers`] as ended when it returns or unwinds.
struct Ended<'a>(&'a AtomicUsize);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        // ORDERING: Release pairs with the Acquire load of the serving thread's wait:
        // what the worker did (its sender's drop among it) comes before.
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl<'a> Sender<'a> {
    fn new(ways: Ways<'a>, threads: &'a Threads, calls: &'a ThreadCalls) -> Self {
        // ORDERING: Relaxed: the count is read only after every sender's drop, whose
        // Release decrement orders this increment before it.
        threads.live.fetch_add(1, Ordering::Relaxed);
        let sent = threads.register(ways.injector.size());
        Self {
            injector: ways.injector,
            queues: ways.queues,
            segments: ways.segments,
            threads,
            sent,
            calls,
            slots: OwnSlots::default(),
        }
    }

    /// The rank this sender sends from.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # let mut cfg = Config::new();
    /// # cfg.sender_slots.set(64);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     assert_eq!(job.sender()?.rank(), job.rank());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn rank(&self) -> Rank {
        self.injector.rank()
    }

    /// Ranks in the job.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # let mut cfg = Config::new();
    /// # cfg.sender_slots.set(64);
    /// cfg.threads(3, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     assert_eq!(job.sender()?.size(), 3);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn size(&self) -> usize {
        self.injector.size()
    }

    /// Sends a Short request (0–7 args) to `dest`, waiting for room if its ring is full
    /// (spinning a bounded time, then sleeping 50 µs between tries and checking that the
    /// job's ranks are alive and `dest` is still in it).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let hit = t.request("hit", |n: &Cell<u64>, _ctx, m| { n.set(n.get() + m.args().len() as u64); Ok(()) });
    ///     let job = setup.start(t, Cell::new(0))?;
    ///     let mut sender = job.sender()?;
    ///     std::thread::scope(|s| s.spawn(move || sender.request(0, hit, &[1; 7])).join().unwrap())?;
    ///     Ok(job.wait_until(|n| n.get() == 7)?)
    /// })
    /// .unwrap();
    /// ```
    pub fn request(
        &mut self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
    ) -> Result<(), AmError> {
        self.send_frame(dest, handler.0, args, &[])
    }

    /// Sends typed request handler `handler` to `dest` with `args` (at most 7 words),
    /// waiting for room as [`Sender::request`] does.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let set = t.handler("set", |s: &Cell<(i32, f64)>, _ctx, v: (i32, f64)| { s.set(v); Ok(()) });
    ///     let job = setup.start(t, Cell::new((0, 0.0)))?;
    ///     let mut sender = job.sender()?;
    ///     std::thread::scope(|s| s.spawn(move || sender.send(0, set, (-2, 0.5))).join().unwrap())?;
    ///     Ok(job.wait_until(|s| s.get() == (-2, 0.5))?)
    /// })
    /// .unwrap();
    /// ```
    pub fn send<A: Args>(
        &mut self,
        dest: Rank,
        handler: Handler<A>,
        args: A,
    ) -> Result<(), AmError> {
        let mut words = [0u64; crate::conduit::ring::MAX_ARGS];
        let n = args.to_words(&mut words);
        self.send_frame(dest, handler.tag, &words[..n], &[])
    }

    /// Runs call handler `call` at `dest` on `args` (at most 6 words: the call's word
    /// and the rank's name take the other two) and returns its [`Answer`], which this
    /// thread (or another) waits for; sending waits for room as [`Sender::request`]
    /// does. Any number of calls may be in flight, up to 16 384 per rank.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(256);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // Adds to this rank's counter; answers the value before.
    ///     let fetch_add = t.call("fetch_add", |n: &Cell<u64>, _ctx, k: u64| Ok(n.replace(n.get() + k)));
    ///     let job = setup.start(t, Cell::new(0))?;
    ///     job.run_workers(3, |_, mut sender| -> Result<(), AmError> {
    ///         for _ in 0..100 {
    ///             sender.call(0, fetch_add, 1)?.wait()?;
    ///         }
    ///         Ok(())
    ///     })?;
    ///     job.barrier()?;
    ///     if job.rank() == 0 {
    ///         assert_eq!(job.state().get(), 600); // 2 ranks × 3 threads × 100
    ///     }
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    ///
    /// Args that leave no room for the call's word and the rank's do not compile:
    ///
    /// ```compile_fail,E0080
    /// use amrq::prelude::*;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let seven = t.call("seven", |_s: &(), _ctx, _a: (u64, u64, u64, u64, u64, u64, u64)| Ok(()));
    ///     let job = setup.start(t, ())?;
    ///     let _ = job.sender()?.call(0, seven, (0, 0, 0, 0, 0, 0, 0));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn call<A: Args, R: Args>(
        &mut self,
        dest: Rank,
        call: Call<A, R>,
        args: A,
    ) -> Result<Answer<'a, R>, AmError> {
        const {
            assert!(
                A::WORDS < CALL_ARGS,
                "a thread's call carries at most 6 words of args (the call's word and the rank's take two)"
            )
        };
        if dest >= self.size() {
            return Err(ConduitError::NoSuchRank {
                rank: dest,
                size: self.size(),
            }
            .into());
        }
        let word = self.slots.open(self.calls, dest)?;
        let mut words = [0u64; crate::conduit::ring::MAX_ARGS];
        words[0] = word;
        let n = args.to_words(&mut words[1..]);
        match self.send_frame(dest, call.id(), &words[..1 + n], &[]) {
            Ok(()) => Ok(Answer::new(
                self.calls,
                self.threads,
                self.injector.waker(),
                word,
            )),
            Err(e) => {
                self.slots.unsend(self.calls, word);
                Err(e)
            }
        }
    }

    /// Sends a Medium request: args plus a payload of up to [`Sender::max_medium`]
    /// bytes, waiting for room as [`Sender::request`] does.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::RefCell;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(256);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let text = t.request("text", |got: &RefCell<String>, _ctx, m| {
    ///         got.borrow_mut().push_str(std::str::from_utf8(&m.payload()).map_err(|_| "not UTF-8")?);
    ///         Ok(())
    ///     });
    ///     let job = setup.start(t, RefCell::new(String::new()))?;
    ///     let mut sender = job.sender()?;
    ///     std::thread::scope(|s| s.spawn(move || sender.request_medium(0, text, &[], b"from a worker")).join().unwrap())?;
    ///     Ok(job.wait_until(|got| *got.borrow() == "from a worker")?)
    /// })
    /// .unwrap();
    /// ```
    pub fn request_medium(
        &mut self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        self.send_frame(dest, handler.0, args, payload)
    }

    /// Sends a request if there is room now: `Ok(false)` (nothing sent) otherwise.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(4);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let nop = t.request("nop", |_s: &(), _ctx, _m| Ok(()));
    ///     let job = setup.start(t, ())?;
    ///     let mut sender = job.sender()?;
    ///     let mut sent = 0;
    ///     while sender.try_request(0, nop, &[], &[])? {
    ///         sent += 1; // until the ring is full: rank 0 has not polled
    ///     }
    ///     assert!(sent > 0);
    ///     while job.poll()? == 0 {}
    ///     assert!(sender.try_request(0, nop, &[], &[])?);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_request(
        &mut self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, AmError> {
        match self.try_frame(dest, handler.0, args, payload) {
            Ok(()) => Ok(true),
            Err(ConduitError::Busy) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Largest Medium payload in bytes a sender carries (set by
    /// `Config::sender_slots`).
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # let mut cfg = Config::new();
    /// cfg.sender_slots.set(256);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     assert!(job.sender()?.max_medium() >= 4096);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn max_medium(&self) -> usize {
        self.injector.max_payload()
    }

    /// Enqueues `args` (at most 7) and `payload` into shared queue `q` of `dest`, as
    /// [`Rq::enqueue`](crate::rq::Rq::enqueue) does: `Ok(true)` committed, `Ok(false)`
    /// the queue is full and nothing was committed (once `dest` has failed or left, its
    /// error instead, so that a caller trying again learns it). [`RqError::NotShared`]
    /// for a queue not declared shared with Poll delivery (its rings have one writer
    /// each). In a job across hosts the rank's thread tries the enqueue when it next
    /// polls, and this thread waits for its answer.
    ///
    /// ```
    /// use amrq::{prelude::*, rq::QueueSpec};
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// let work = cfg.add(QueueSpec::new("work", 256).shared());
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     job.run_workers(2, |i, mut sender| -> amrq::Result<()> {
    ///         while !sender.enqueue(0, work, &[i as u64], b"item")? {} // full: try again
    ///         Ok(())
    ///     })?;
    ///     job.barrier()?;
    ///     if job.rank() == 0 {
    ///         let (mut args, mut buf) = ([0u64; 8], [0u8; 8]);
    ///         let mut got = 0;
    ///         while let Some(d) = job.rq().dequeue(work, &mut args, &mut buf)? {
    ///             assert_eq!(&buf[..d.len], b"item");
    ///             got += 1;
    ///         }
    ///         assert_eq!(got, 4); // 2 ranks × 2 threads
    ///     }
    ///     job.barrier()
    /// })
    /// .unwrap();
    /// ```
    pub fn enqueue(
        &mut self,
        dest: Rank,
        q: QueueId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, AmError> {
        self.enqueue_tagged(dest, q, 0, args, payload)
    }

    /// [`Sender::enqueue`] with a 16-bit tag carried in the frame header.
    ///
    /// ```
    /// use amrq::{conduit::ReceivedFrame, prelude::*, rq::{QueueSpec, RqError}};
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// let (shared, plain) = (cfg.add(QueueSpec::new("s", 16).shared()), cfg.add_queue(16));
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let mut sender = job.sender()?;
    ///     assert!(sender.enqueue_tagged(0, shared, 42, &[], &[])?);
    ///     let refused = sender.enqueue(0, plain, &[], &[]).unwrap_err();
    ///     assert!(matches!(refused, AmError::Rq(RqError::NotShared { .. })), "{refused}");
    ///     assert_eq!(job.rq().read_queue(shared)?.map(|f| f.tag()), Some(42));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn enqueue_tagged(
        &mut self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, AmError> {
        let queue = q.index();
        let Some(Some(injector)) = self.queues.get_mut(queue) else {
            let channels = self.queues.len();
            return Err(match queue {
                _ if queue < QueueId::FIRST_USER => RqError::RuntimeQueue { queue }.into(),
                _ if queue >= channels => ConduitError::NoSuchChannel {
                    channel: queue,
                    channels,
                }
                .into(),
                _ => RqError::NotShared { queue }.into(),
            });
        };
        let msg = Message {
            tag,
            args,
            payload,
            ..Message::default()
        };
        if injector.forwards() {
            injector.check(dest, &msg)?; // the queue's limits, here where they differ
            let what = ThreadOpKind::Enqueue {
                ch: queue,
                tag,
                args,
                payload,
            };
            return Ok(self.through_rank(dest, 0, what)?.outcome()? == 1);
        }
        match injector.try_send(dest, &msg) {
            Ok(()) => Ok(true),
            Err(ConduitError::Busy) => {
                // Full: a caller that tries again must learn if `dest` cannot make room.
                self.injector.check_peer(dest)?;
                match dest == self.rank() {
                    true => self.threads.stopped_serving().map_or(Ok(false), Err),
                    false => Ok(false),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`ConduitError::NoSuchRank`] or [`ConduitError::OutOfSegment`] unless `len`
    /// bytes at `offset` of `rank`'s segment are in the job.
    pub(crate) fn in_segment(
        &self,
        rank: Rank,
        offset: usize,
        len: usize,
    ) -> Result<(), ConduitError> {
        self.injector.in_segment(rank, offset, len)
    }

    /// Every rank's segment as mapped here (`rma`'s operations from threads); `None`
    /// in a job across hosts, where they go through the rank's outbox
    /// ([`Sender::through_rank`]).
    pub(crate) fn segments(&self) -> Option<&Segments<'a>> {
        self.segments.as_ref()
    }

    /// One try to send a frame, counted if it went.
    #[inline(always)]
    fn try_frame(
        &mut self,
        dest: Rank,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), ConduitError> {
        let msg = Message {
            tag,
            args,
            payload,
            ..Message::default()
        };
        self.injector.try_send(dest, &msg)?;
        // `dest` is in range: the send took it.
        if let Some(n) = self.sent.get(dest) {
            // ORDERING: this sender alone writes its counts (no read-modify-write
            // needed); Release pairs with the Acquire load of `Threads::sent_to`.
            n.store(n.load(Ordering::Relaxed) + 1, Ordering::Release);
        }
        Ok(())
    }

    /// Sends one frame, waiting for room: one try inline, anything else out of line.
    #[inline(always)]
    fn send_frame(
        &mut self,
        dest: Rank,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        match self.try_frame(dest, tag, args, payload) {
            Ok(()) => Ok(()),
            Err(_) => self.send_when_room(dest, tag, args, payload),
        }
    }

    /// [`Sender::send_frame`] past its first try: the try's error, or tries until there
    /// is room.
    #[cold]
    #[inline(never)]
    fn send_when_room(
        &mut self,
        dest: Rank,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        let handler = RequestHandler(tag);
        let mut backoff = Backoff::new();
        while !self.try_request(dest, handler, args, payload)? {
            self.between_tries(dest, &mut backoff, || std::thread::sleep(ROOM_NAP))?;
        }
        Ok(())
    }

    /// Between two tries of something that `dest`, or this sender's own rank, must
    /// make possible: spins a bounded time, then checks that both are alive and served
    /// and `sleep`s.
    fn between_tries(
        &self,
        dest: Rank,
        backoff: &mut Backoff,
        sleep: impl FnOnce(),
    ) -> Result<(), AmError> {
        if !backoff.is_yielding() {
            backoff.snooze();
            return Ok(());
        }
        self.injector.check_peer(dest)?;
        if dest == self.rank() || self.injector.forwards() {
            // Its own rank's thread must make the room (its ring, or the outbox it
            // sends on).
            self.threads.unserved_here().map_or(Ok(()), Err)?;
        }
        sleep();
        Ok(())
    }

    /// A one-sided operation through the rank's outbox (a job across hosts): started
    /// when there is room, then waited for; its outcome is the caller's to read.
    pub(crate) fn through_rank(
        &mut self,
        dest: Rank,
        offset: usize,
        what: ThreadOpKind<'_>,
    ) -> Result<Arc<ThreadOp>, AmError> {
        let mut backoff = Backoff::new();
        let op = loop {
            match self.injector.try_start(dest, offset, what) {
                Err(ConduitError::Busy) => {
                    self.between_tries(dest, &mut backoff, || std::thread::sleep(ROOM_NAP))?
                }
                started => break started?,
            }
        };
        let mut backoff = Backoff::new();
        while !op.is_done() {
            self.between_tries(dest, &mut backoff, || op.sleep(ROOM_NAP))?;
        }
        Ok(op)
    }
}

impl Clone for Sender<'_> {
    /// Another sender of the same rank, for one more thread.
    fn clone(&self) -> Self {
        let ways = Ways {
            injector: self.injector.clone(),
            queues: self.queues.clone(),
            segments: self.segments.clone(),
        };
        Self::new(ways, self.threads, self.calls)
    }
}

impl Drop for Sender<'_> {
    fn drop(&mut self) {
        self.calls.give_back(&self.slots.blocks);
        // ORDERING: Release pairs with the Acquire load of `any_alive`.
        self.threads.live.fetch_sub(1, Ordering::Release);
    }
}

impl std::fmt::Debug for Sender<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish_non_exhaustive()
    }
}
