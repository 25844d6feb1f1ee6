//! A rank's job: how a program starts whatever its placement, and the one handle that
//! reaches every layer.
//!
//! A program is written once. Where its ranks run is decided when it starts:
//!
//! | started | its ranks |
//! |---|---|
//! | on its own (`cargo run`, `./program`) | it starts [`Config::ranks`](crate::Config) processes of itself on this host, or threads of itself with `AMRQ_THREADS=1` |
//! | by `amrun -n N`, `mpirun`, `srun` on one host | processes of this host, meeting in shared memory |
//! | by `amrun --hosts`, or `mpirun`/`srun` with `AMRQ_RENDEZVOUS` | processes on several hosts: shared memory inside a host, UCX between hosts |
//!
//! Each rank runs the program's rank main with a [`Setup`]; [`Setup::start`] registers
//! its handlers and state and returns the [`Job`]. The conduit under it is chosen here;
//! the program never names one.
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | [`Job`]: the handle, and the layers it owns |
//! | `setup.rs` | [`Setup`]: a rank's place before its job starts |
//! | `engine.rs` | [`EngineJob`]: a job whose handlers a progress engine serves while the program computes |
//! | `engine_call.rs` | [`EngineCall`]: a call's answer the engine lands, awaited outside sections |
//! | `run.rs` | the ways to start: [`Config::run`](crate::Config::run), [`Config::join`](crate::Config::join), [`Config::threads`](crate::Config::threads) |

mod end;
mod engine;
mod engine_call;
mod run;
mod setup;

pub use engine::{EngineJob, Held};
pub use engine_call::EngineCall;
pub use setup::Setup;

use crate::am::Am;
use crate::coll::Coll;
use crate::conduit::Rank;
use crate::rma::Rma;
use crate::rq::Rq;
use crate::splitc::SplitC;

/// One rank of a running job: its Active Messages, Remote Queues, one-sided
/// operations, collectives and Split-C, over whichever conduit its placement needs.
/// Made by [`Setup::start`]; when it drops, the rank leaves the job.
///
/// `S` is the state its handlers see. A `Job` dereferences to its Active Messages
/// layer ([`Am`]: `job.request(…)`, `job.wait_until(…)`); the other layers are
/// [`Job::rq`], [`Job::rma`], [`Job::coll`] and [`Job::splitc`].
///
/// ```
/// use amrq::prelude::*;
/// let sums = amrq::Config::new().threads(3, |setup| {
///     let job = setup.start(HandlerTable::new(), ())?;
///     let mut v = [job.rank() as u64 + 1];
///     job.coll().allreduce(&mut v, amrq::coll::sum)?;
///     Ok(v[0])
/// })
/// .unwrap();
/// assert_eq!(sums, [6, 6, 6]);
/// ```
pub struct Job<S: 'static = ()> {
    /// The layers: taken out by the drop only (`end.rs`).
    sc: std::mem::ManuallyDrop<SplitC<S>>,
    /// The rank takes no part in the job's end ([`Job::leave`], [`Job::finish`]).
    leaving: bool,
}

impl<S: 'static> Drop for Job<S> {
    /// Returning from a rank's main drops its `Job`: it serves its peers until every
    /// rank has returned and every message sent has been handled, then leaves (see
    /// [`Job::finish`]); a main that failed leaves at once, its failure recorded. Not
    /// after [`Job::leave`], nor while unwinding from a panic.
    fn drop(&mut self) {
        // SAFETY: `sc` is taken once, here, and not used after.
        let sc = unsafe { std::mem::ManuallyDrop::take(&mut self.sc) };
        if self.leaving || std::thread::panicking() {
            return;
        }
        if let Some(layers) = end::park(Box::new(sc)) {
            end::end_in_place(&*layers);
        }
    }
}

impl<S: 'static> std::fmt::Debug for Job<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish_non_exhaustive()
    }
}

impl<S: 'static> std::ops::Deref for Job<S> {
    type Target = Am<S>;

    fn deref(&self) -> &Am<S> {
        self.am()
    }
}

impl<S: 'static> Job<S> {
    /// This rank.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let ranks = amrq::Config::new().threads(2, |s| Ok(s.start(HandlerTable::new(), ())?.rank())).unwrap();
    /// assert_eq!(ranks, [0, 1]);
    /// ```
    pub fn rank(&self) -> Rank {
        self.sc.my_proc()
    }

    /// Ranks in the job.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let sizes = amrq::Config::new().threads(2, |s| Ok(s.start(HandlerTable::new(), ())?.size())).unwrap();
    /// assert_eq!(sizes, [2, 2]);
    /// ```
    pub fn size(&self) -> usize {
        self.sc.procs()
    }

    /// The state the handlers see.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |s| {
    ///     let mut h = HandlerTable::new();
    ///     let bump = h.request("bump", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    ///     let job = s.start(h, Cell::new(0))?;
    ///     job.am().request(0, bump, &[])?;
    ///     job.am().wait_until(|n| n.get() == 1)?;
    ///     assert_eq!(job.state().get(), 1);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn state(&self) -> &S {
        self.am().state()
    }

    /// Waits until every rank has called it, running handlers meanwhile
    /// ([`Am::barrier`]).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |s| s.start(HandlerTable::new(), ())?.barrier()).unwrap();
    /// ```
    pub fn barrier(&self) -> crate::Result<()> {
        Ok(self.am().barrier()?)
    }

    /// Active Messages: handlers, requests and replies, polling and waiting, calls.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |s| {
    ///     let job = s.start(HandlerTable::new(), ())?;
    ///     assert_eq!(job.am().poll()?, 0); // nothing arrived
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn am(&self) -> &Am<S> {
        self.sc.am()
    }

    /// Remote Queues: the program's named queues ([`Config::add_queue`](crate::Config::add_queue)).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = amrq::Config::new();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |s| {
    ///     let job = s.start(HandlerTable::new(), ())?;
    ///     job.rq().enqueue(0, q, &[7], &[])?;
    ///     let f = job.rq().read_queue(q)?.expect("the frame");
    ///     # use amrq::conduit::ReceivedFrame;
    ///     assert_eq!(f.args(), [7]);
    ///     f.release();
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn rq(&self) -> &Rq {
        self.am().rq()
    }

    /// One-sided operations: put, get, atomics, allocation in the segments.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |s| {
    ///     let job = s.start(HandlerTable::new(), ())?;
    ///     let at = job.rma().alloc_symmetric(8, 8)?; // the same offset on every rank
    ///     job.rma().put_slice(1 - job.rank(), at, &[job.rank() as u64])?;
    ///     job.barrier()?;
    ///     let mut got = [0u64];
    ///     job.rma().get_slice(job.rank(), at, &mut got)?;
    ///     assert_eq!(got[0], 1 - job.rank() as u64);
    ///     Ok(job.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn rma(&self) -> &Rma<S> {
        self.sc.rma()
    }

    /// Collectives: broadcast, reduce, allreduce, scan, gather, exchange.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let out = amrq::Config::new().threads(2, |s| {
    ///     let job = s.start(HandlerTable::new(), ())?;
    ///     let mut v = [0u32; 2];
    ///     job.coll().allgather(&[job.rank() as u32 * 7], &mut v)?;
    ///     Ok(v)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [[0, 7]; 2]);
    /// ```
    pub fn coll(&self) -> &Coll<S> {
        self.sc.coll()
    }

    /// Split-C: global pointers, spread arrays, split-phase access, stores.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::splitc::GlobalPtr;
    /// amrq::Config::new().threads(2, |s| {
    ///     let job = s.start(HandlerTable::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = GlobalPtr::<u64>::new(0, job.rma().alloc_symmetric(8, 8)?);
    ///     if sc.my_proc() == 1 {
    ///         sc.write(at, 42)?; // into rank 0's segment
    ///     }
    ///     sc.barrier()?;
    ///     assert_eq!(sc.read(at)?, 42);
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn splitc(&self) -> &SplitC<S> {
        &self.sc
    }

    /// Ends this rank's part, as returning from its main does: serves its peers until
    /// the job is quiescent — every rank has returned (or called `finish`), every Active
    /// Message sent has been handled — and then leaves, so that no message in flight is
    /// lost and no peer waits on a rank that has gone. Returns what prevented that (a
    /// peer failed: its `PeerDead`, which returning from the main leaves to that peer
    /// to report). Messages left in Remote Queues' user queues are the program's.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let add = t.request("add", |n: &Cell<u64>, _ctx, m| { n.set(n.get() + m.arg(0)?); Ok(()) });
    ///     let job = setup.start(t, Cell::new(0))?;
    ///     if job.rank() == 0 {
    ///         for _ in 0..1000 {
    ///             job.request(1, add, &[1])?; // then return at once: safe
    ///         }
    ///         return job.finish();
    ///     }
    ///     job.wait_until(|n| n.get() == 1000)?;
    ///     job.finish()
    /// })
    /// .unwrap();
    /// ```
    pub fn finish(mut self) -> crate::Result<()> {
        self.leaving = true; // the drop has nothing left to do
        Ok(self.am().quiesce()?)
    }

    /// Leaves the job now, without waiting for the others: the way for a rank to leave
    /// early. A message in flight to it is lost; a peer that waits for it, or for its
    /// barrier, gets [`ConduitError::PeerLeft`](crate::conduit::ConduitError::PeerLeft).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     job.barrier()?;
    ///     job.leave(); // nobody needs this rank any more
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn leave(mut self) {
        self.leaving = true;
    }

    /// Starts the progress thread of the job's Interrupt queues ([`Am::start_interrupts`]).
    ///
    /// ```
    /// use amrq::{config::{Delivery, QueueSpec}, prelude::*};
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
    /// let mut cfg = amrq::Config::new();
    /// let alarms = cfg.add(QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt));
    /// cfg.threads(1, |s| {
    ///     let mut job = s.start(HandlerTable::new(), ())?;
    ///     let seen = Arc::new(AtomicU64::new(0));
    ///     let s2 = seen.clone();
    ///     let _intr = job
    ///         .start_interrupts(move |_q, _src, args, _p| { s2.fetch_add(args[0], Ordering::Relaxed); })
    ///         .expect("an Interrupt queue");
    ///     job.rq().enqueue(0, alarms, &[5], &[])?;
    ///     while seen.load(Ordering::Relaxed) != 5 {} // no poll: the handler ran anyway
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn start_interrupts<H>(&mut self, handler: H) -> Option<crate::rq::Interrupts>
    where
        H: FnMut(crate::rq::QueueId, Rank, &[u64], crate::conduit::PayloadView<'_>)
            + Send
            + 'static,
    {
        self.sc
            .coll_mut()
            .rma_mut()
            .am_mut()
            .start_interrupts(handler)
    }
}
