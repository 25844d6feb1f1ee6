//! Requests from a rank's other threads: a [`Sender`] writes the destination's one
//! shared ring for them ([`Config::sender_slots`](crate::Config::sender_slots)),
//! reserving slots by compare-and-swap with no lock, and the destination polls that
//! ring with its AM requests. Handlers run only on the thread that holds the rank (the
//! one that started it): they see its state as `&S`, which need not be `Sync`, and
//! replies to a thread's requests run there too.
//!
//! The job's end counts these requests: each `Sender` adds what it sent to each rank
//! when it drops (before the rank can return, since it borrows the rank), the rank's
//! `RETURNED` carries the sum, and the receiver treats the rank as returned only once it
//! has taken that many from the shared ring.

use super::thread_calls::{OwnSlots, ThreadCalls};
use super::{Am, AmError, Answer, Args, Call, Handler, RequestHandler, CALL_ARGS};
use crate::conduit::mem::{Injector, MemConduit};
use crate::conduit::{Conduit, ConduitError, Message, Rank};
use crate::rq::QueueId;
use crate::util::Backoff;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How long a sender that found no room sleeps between tries once it has spun.
const ROOM_NAP: Duration = Duration::from_micros(50);

/// What a rank's senders leave behind: their counts, and how many are alive.
#[derive(Debug)]
pub(super) struct Threads {
    /// Requests the rank's dropped senders sent, per destination.
    sent: Box<[AtomicU64]>,
    /// Senders alive: while any is, a wait of this rank cannot conclude that nothing
    /// can arrive (one of them may send to it).
    live: AtomicUsize,
}

impl Threads {
    pub(super) fn new(size: usize) -> Self {
        Self {
            sent: (0..size).map(|_| AtomicU64::new(0)).collect(),
            live: AtomicUsize::new(0),
        }
    }

    /// Requests the rank's senders sent to `dest` (all dropped by now).
    pub(super) fn sent_to(&self, dest: Rank) -> u64 {
        // ORDERING: Acquire pairs with the Release add of each sender's drop (on
        // another thread, joined since, which orders it already; this says so).
        self.sent.get(dest).map_or(0, |n| n.load(Ordering::Acquire))
    }

    /// True while a sender of this rank is alive.
    pub(super) fn any_alive(&self) -> bool {
        // ORDERING: Acquire pairs with the Release decrement of a sender's drop.
        self.live.load(Ordering::Acquire) > 0
    }
}

/// Sends AM requests from a thread of a rank other than the one that holds it: made by
/// [`Am::sender`] on the rank's thread and moved to the worker (`Send`, not `Sync`: one
/// per thread; [`Clone`] makes another). Requests go to the destination's shared ring
/// for threads, which its rank polls with its AM requests; the handlers run on the
/// destination rank's thread, and a reply to a thread's request runs on the sending
/// rank's thread. A frame carries at most 7 args (the eighth word names the rank).
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
    threads: &'a Threads,
    /// Requests sent per destination, added to the rank's count on drop.
    sent: Box<[u64]>,
    /// Where the answers of its calls land, and its own slots there.
    calls: &'a ThreadCalls,
    slots: OwnSlots,
}

impl<S> Am<S, MemConduit> {
    /// A [`Sender`] for another thread of this rank. [`AmError::NoSenderRing`] unless
    /// the job was started with [`Config::sender_slots`](crate::Config::sender_slots)
    /// (`AMRQ_SENDER_SLOTS`) above 0; [`ConduitError::Unsupported`] in a job across
    /// hosts.
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
        self.thread_calls.set_boot(conduit.boot());
        Ok(Sender::new(injector, &self.threads, &self.thread_calls))
    }
}

impl<S> Am<S, MemConduit> {
    /// Runs `f(i, sender)` for `i` in `0..n` on `n` new threads of this rank, each with
    /// its own [`Sender`], while this thread runs the rank's handlers (as
    /// [`Am::wait_until`] does) until every one has returned; then their results, in
    /// order. The first error of any, or of this thread's waits, is returned once all
    /// have ended: this thread serves the rank until then whatever happens, so a thread
    /// waiting for room in a ring of this rank is never left waiting. A thread's panic
    /// is resumed here after the others ended.
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
    pub fn run_workers<T, F>(&self, n: usize, f: F) -> Result<Vec<T>, AmError>
    where
        T: Send,
        F: Fn(usize, Sender<'_>) -> Result<T, AmError> + Sync,
    {
        let senders = (0..n)
            .map(|_| self.sender())
            .collect::<Result<Vec<_>, _>>()?;
        let ended = AtomicUsize::new(0);
        let (f, ended_ref) = (&f, &ended);
        let mut first_error = None;
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
            while let Err(e) = self.wait_until(|_| all_ended()) {
                first_error.get_or_insert(e);
                // The rank is still served, a little more slowly, until they end.
                while !all_ended() {
                    let _ = self.poll();
                    std::thread::sleep(ROOM_NAP);
                }
            }
            handles.into_iter().map(|h| h.join()).collect()
        });
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
    fn new(injector: Injector<'a>, threads: &'a Threads, calls: &'a ThreadCalls) -> Self {
        // ORDERING: Relaxed: the count is read only after every sender's drop, whose
        // Release decrement orders this increment before it.
        threads.live.fetch_add(1, Ordering::Relaxed);
        let sent = vec![0; injector.size()].into();
        Self {
            injector,
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
    ///     job.run_workers(3, |_, mut sender| {
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
    /// ```compile_fail
    /// # use amrq::prelude::*;
    /// fn seven(sender: &mut amrq::am::Sender<'_>, c: Call<(u64, u64, u64, u64, u64, u64, u64), ()>) {
    ///     let _ = sender.call(0, c, (0, 0, 0, 0, 0, 0, 0));
    /// }
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
            Ok(()) => Ok(Answer::new(self.calls, word)),
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
        let msg = Message {
            tag: handler.0,
            args,
            payload,
            ..Message::default()
        };
        match self.injector.try_send(dest, &msg) {
            Ok(()) => {
                self.sent[dest] += 1;
                Ok(true)
            }
            Err(ConduitError::Busy) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Largest Medium payload in bytes a sender carries (set by
    /// [`Config::sender_slots`](crate::Config::sender_slots)).
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

    /// Sends one frame, waiting for room: one try inline, anything else out of line.
    #[inline(always)]
    fn send_frame(
        &mut self,
        dest: Rank,
        tag: u16,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        let msg = Message {
            tag,
            args,
            payload,
            ..Message::default()
        };
        match self.injector.try_send(dest, &msg) {
            // `dest` is in range: the send took it.
            Ok(()) => self.sent[dest] += 1,
            Err(_) => self.send_when_room(dest, tag, args, payload)?,
        }
        Ok(())
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
            if backoff.is_yielding() {
                self.injector.check_peer(dest)?;
                std::thread::sleep(ROOM_NAP);
            } else {
                backoff.snooze();
            }
        }
        Ok(())
    }
}

impl Clone for Sender<'_> {
    /// Another sender of the same rank, for one more thread.
    fn clone(&self) -> Self {
        Self::new(self.injector.clone(), self.threads, self.calls)
    }
}

impl Drop for Sender<'_> {
    fn drop(&mut self) {
        for (total, &n) in self.threads.sent.iter().zip(self.sent.iter()) {
            if n > 0 {
                // ORDERING: Release pairs with the Acquire load of `sent_to` at the
                // rank's end.
                total.fetch_add(n, Ordering::Release);
            }
        }
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
