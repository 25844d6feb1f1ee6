//! What a rank's main gets before its job starts: its place, the settings, and the
//! call that starts the job with the program's handlers.

use super::EngineJob;
use super::Job;
use crate::am::{Am, HandlerTable, SendHandlerTable};
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, Rank};
use crate::rma::Rma;
use crate::splitc::SplitC;
use crate::Config;

/// A rank of a job that has not started yet: the rank main registers its handlers and
/// makes its state, then calls [`Setup::start`].
///
/// ```
/// use amrq::prelude::*;
/// use std::cell::Cell;
/// let out = amrq::Config::new().threads(2, |setup| {
///     let mut handlers = HandlerTable::new();
///     let hit = handlers.request("hit", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
///     let job = setup.start(handlers, Cell::new(0))?;
///     job.am().request(1 - job.rank(), hit, &[])?;
///     job.am().wait_until(|n| n.get() == 1)?;
///     job.barrier()?;
///     Ok(job.state().get())
/// })
/// .unwrap();
/// assert_eq!(out, [1, 1]);
/// ```
#[derive(Debug)]
pub struct Setup {
    conduit: MemConduit,
    config: Config,
}

impl Setup {
    pub(super) fn new(conduit: MemConduit, config: Config) -> Self {
        Self { conduit, config }
    }

    /// This rank.
    ///
    /// ```
    /// let ranks = amrq::Config::new().threads(2, |s| Ok(s.rank())).unwrap();
    /// assert_eq!(ranks, [0, 1]);
    /// ```
    pub fn rank(&self) -> Rank {
        self.conduit.rank()
    }

    /// Ranks in the job (the launcher's count, where a launcher started it).
    ///
    /// ```
    /// let sizes = amrq::Config::new().threads(3, |s| Ok(s.size())).unwrap();
    /// assert_eq!(sizes, [3, 3, 3]);
    /// ```
    pub fn size(&self) -> usize {
        self.conduit.size()
    }

    /// The settings the job runs with: the program's, the environment's, the defaults.
    ///
    /// ```
    /// let mut cfg = amrq::Config::new();
    /// cfg.segment_bytes.set(1 << 20);
    /// let seg = cfg.threads(1, |s| Ok(s.config().segment_bytes.get())).unwrap();
    /// assert_eq!(seg, [1 << 20]);
    /// ```
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Starts this rank's job with the program's `handlers` (the same on every rank:
    /// checked) and the `state` they see: the AM layer, one-sided operations
    /// (as AM frames with [`Config::rma_frames`]), the collectives' mailboxes and
    /// Split-C's counters in the registered segment. Collective: every rank calls it.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let refused = amrq::Config::new().threads(2, |s| {
    ///     let mut h = HandlerTable::<()>::new();
    ///     if s.rank() == 1 {
    ///         h.request("only on rank 1", |_, _, _| Ok(())); // a different table
    ///     }
    ///     Ok(s.start(h, ()).is_err())
    /// })
    /// .unwrap();
    /// assert_eq!(refused, [true, true]); // every rank is told, none runs on
    /// ```
    pub fn start<S: 'static>(self, handlers: HandlerTable<S>, state: S) -> crate::Result<Job<S>> {
        let am = Am::new(self.conduit, handlers, state)?;
        let rma = Rma::new_or_over_frames(am, self.config.rma_frames.get());
        Ok(Job {
            sc: std::mem::ManuallyDrop::new(SplitC::new(rma)?),
            leaving: false,
        })
    }

    /// Starts this rank's job as [`Setup::start`] does, with a progress engine: a
    /// thread of the rank that runs its handlers while the program computes (see
    /// [`EngineJob`]). The handlers and the state must be `Send` (the table's bounds
    /// check it); the program reaches the job inside sections ([`EngineJob::hold`]).
    /// With [`Config::engine`] off (`AMRQ_ENGINE=0`) no engine starts and the
    /// program's polls and waits in sections serve (a program that waits outside
    /// sections for its handlers checks [`EngineJob::engine_runs`]).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<u64> {
    ///     let mut t = SendHandlerTable::new();
    ///     let add = t.request("add", |n: &Cell<u64>, _ctx, m| { n.set(n.get() + m.arg(0)?); Ok(()) });
    ///     let mut job = setup.start_engine(t, Cell::new(0))?;
    ///     let peer = 1 - job.rank();
    ///     job.hold().request(peer, add, &[7])?;
    ///     job.hold().barrier()?; // both requests were sent before it
    ///     let got = job.hold().wait_until(|n| n.get() == 7).map(|()| 7)?;
    ///     job.finish()?;
    ///     Ok(got)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [7, 7]);
    /// ```
    ///
    /// State that only one thread may own does not compile:
    ///
    /// ```compile_fail
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let state = std::rc::Rc::new(0u64);
    ///     setup.start_engine(SendHandlerTable::new(), state)?.finish() // error: `Rc` is not `Send`
    /// }).unwrap();
    /// ```
    pub fn start_engine<S: Send + 'static>(
        self,
        handlers: SendHandlerTable<S>,
        state: S,
    ) -> crate::Result<EngineJob<S>> {
        let engine = self.config.engine.get();
        let job = self.start(handlers.into_table(), state)?;
        EngineJob::new(job, engine).map_err(|e| {
            crate::Error::other(format!(
                "cannot start the progress engine's thread ({e}): raise the process's thread limit (ulimit -u) or set AMRQ_ENGINE=0"
            ))
        })
    }
}
