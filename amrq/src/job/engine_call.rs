//! A call made from a job with a progress engine ([`EngineJob::call`]): its answer is
//! landed by the engine while the program computes, and wakes the thread or the task
//! that waits for it.

use super::EngineJob;
use crate::am::{AmError, Args, Call, Landing};
use crate::conduit::Rank;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Longest sleep between looks at the engine and the peers while waiting.
const NAP: Duration = Duration::from_millis(1);

/// The answer of a call made with [`EngineJob::call`], of type `R`: the engine lands it
/// outside the program's sections. [`EngineCall::wait`] blocks for it; `.await` awaits
/// it under any executor, the task woken by the engine when the answer lands (it never
/// wakes itself). `Send`: another thread may wait for it. Dropped first, the answer is
/// thrown away when it comes. Wait for it outside the job's sections: on the thread
/// that holds a section, a wait for it never returns (the engine cannot land it until
/// the section ends). A task awaiting it is woken when it lands or when the engine
/// gives up on it (a failed or departed target, an error that ends the engine); after
/// a handler's panic on the engine, which `finish` resumes, it is not.
///
/// ```
/// use amrq::prelude::*;
/// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
///     let mut t = SendHandlerTable::new();
///     let square = t.call("square", |_s: &(), _ctx, x: u64| Ok(x * x));
///     let mut job = setup.start_engine(t, ())?;
///     let peer = 1 - job.rank();
///     let answers: Vec<_> = (0..10).map(|x| job.call(peer, square, x)).collect::<Result<_, _>>()?;
///     // No section here: the engine lands the answers.
///     let sum: u64 = answers.into_iter().map(|a| a.wait()).sum::<Result<_, _>>()?;
///     assert_eq!(sum, 285);
///     job.hold().barrier()?;
///     job.finish()
/// })
/// .unwrap();
/// ```
#[must_use = "a call's answer is lost unless it is waited for or awaited"]
pub struct EngineCall<R> {
    outcome: Outcome<R>,
}

/// Where the answer is: to land, or there already (a job without its engine waited for
/// it in a section).
enum Outcome<R> {
    Landing {
        landing: Arc<Landing>,
        /// False once the engine has ended (then nobody lands it).
        engine_serves: Arc<AtomicBool>,
        boot: crate::bootstrap::Boot,
    },
    Ready(Option<Result<R, AmError>>),
}

impl<R> std::fmt::Debug for EngineCall<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let landed = match &self.outcome {
            Outcome::Landing { landing, .. } => landing.is_done(),
            Outcome::Ready(_) => true,
        };
        f.debug_struct("EngineCall")
            .field("landed", &landed)
            .finish_non_exhaustive()
    }
}

// Nothing in it is pinned: a future polled by reference.
impl<R> Unpin for EngineCall<R> {}

impl<S: Send + 'static> EngineJob<S> {
    /// Runs call handler `call` at `dest` on `args`; its answer is landed by the engine
    /// while the program computes ([`EngineCall`]). The request is sent in a section of
    /// its own (it waits for room as [`Am::request`](crate::am::Am::request) does).
    /// With the engine off ([`Config::engine`](crate::Config::engine)), the call waits
    /// for its answer in that section before it returns.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = SendHandlerTable::new();
    ///     let asker = t.call("asker", |_s: &(), ctx, (): ()| Ok(ctx.source() as u64));
    ///     let mut job = setup.start_engine(t, ())?;
    ///     let (me, peer) = (job.rank(), 1 - job.rank());
    ///     assert_eq!(job.call(peer, asker, ())?.wait()?, me as u64);
    ///     job.hold().barrier()?;
    ///     job.finish()
    /// })
    /// .unwrap();
    /// ```
    pub fn call<A: Args, R: Args>(
        &mut self,
        dest: Rank,
        call: Call<A, R>,
        args: A,
    ) -> Result<EngineCall<R>, AmError> {
        let (engine_serves, runs) = (self.serves.clone(), self.engine_runs());
        let held = self.hold();
        if !runs {
            let answer = held.call(dest, call, args)?.wait();
            return Ok(EngineCall {
                outcome: Outcome::Ready(Some(answer)),
            });
        }
        let landing = Arc::new(Landing::new(dest));
        held.am().call_detached(dest, call, args, landing.clone())?;
        let boot = held.am().rq().conduit().boot().clone();
        Ok(EngineCall {
            outcome: Outcome::Landing {
                landing,
                engine_serves,
                boot,
            },
        })
    }
}

impl<R: Args> EngineCall<R> {
    /// True once the answer (or the failure) is in: [`EngineCall::wait`] then returns
    /// at once.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = SendHandlerTable::new();
    ///     let id = t.call("id", |_s: &(), _ctx, x: u64| Ok(x));
    ///     let mut job = setup.start_engine(t, ())?;
    ///     let a = job.call(0, id, 5)?;
    ///     while !a.is_ready() {} // the engine answers and lands it
    ///     assert_eq!(a.wait()?, 5);
    ///     job.finish()
    /// })
    /// .unwrap();
    /// ```
    pub fn is_ready(&self) -> bool {
        match &self.outcome {
            Outcome::Landing { landing, .. } => landing.is_done(),
            Outcome::Ready(_) => true,
        }
    }

    /// Waits for the answer: spins a bounded time, then sleeps until the engine lands
    /// it, checking between sleeps that the engine still serves and the peers live.
    /// The call's own failure is [`AmError::RequestFailed`].
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = SendHandlerTable::new();
    ///     let half = t.call("half", |_s: &(), _ctx, x: u64| match x % 2 {
    ///         0 => Ok(x / 2),
    ///         _ => Err(AmError::from("odd")),
    ///     });
    ///     let mut job = setup.start_engine(t, ())?;
    ///     let peer = 1 - job.rank();
    ///     assert_eq!(job.call(peer, half, 8)?.wait()?, 4);
    ///     assert!(matches!(job.call(peer, half, 7)?.wait(), Err(AmError::RequestFailed(_))));
    ///     job.hold().barrier()?;
    ///     job.finish()
    /// })
    /// .unwrap();
    /// ```
    pub fn wait(mut self) -> Result<R, AmError> {
        let mut backoff = crate::util::Backoff::new();
        loop {
            if let Some(outcome) = self.take() {
                return outcome;
            }
            if !backoff.is_yielding() {
                backoff.snooze();
                continue;
            }
            if let Outcome::Landing { landing, .. } = &self.outcome {
                self.check()?;
                landing.sleep(NAP);
            }
        }
    }

    /// The outcome, if it is in.
    fn take(&mut self) -> Option<Result<R, AmError>> {
        match &mut self.outcome {
            Outcome::Ready(r) => r.take(),
            Outcome::Landing { landing, .. } => Some(landing.take()?.and_then(|(len, words)| {
                R::from_words(&words[..len]).map_err(|e| e.of(landing.target(), len))
            })),
        }
    }

    /// Why no answer can come, if none can: a peer failed, the target left, or the
    /// engine has ended (the job did, or the engine met an error, which the job's next
    /// poll or wait returns; a handler's panic, `finish`). The engine also lands such
    /// an error itself when it finds one, which wakes an awaiting task.
    fn check(&self) -> Result<(), AmError> {
        let Outcome::Landing {
            engine_serves,
            boot,
            ..
        } = &self.outcome
        else {
            return Ok(());
        };
        boot.check_peers()
            .map_err(crate::conduit::ConduitError::from)?;
        // ORDERING: Acquire pairs with the engine's Release store as it ends.
        match engine_serves.load(Ordering::Acquire) {
            true => Ok(()),
            false => Err(AmError::Failed(
                "the progress engine has stopped: the job ended, or the engine met an error (the job's next poll or wait returns it; a handler's panic, finish)".into(),
            )),
        }
    }
}

impl<R: Args> std::future::Future for EngineCall<R> {
    type Output = Result<R, AmError>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(outcome) = this.take() {
            return Poll::Ready(outcome);
        }
        if let Err(e) = this.check() {
            return Poll::Ready(Err(e));
        }
        let landed = match &this.outcome {
            Outcome::Landing { landing, .. } => landing.wake_on_landing(cx.waker()),
            Outcome::Ready(_) => true,
        };
        match landed.then(|| this.take()).flatten() {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending, // the engine wakes the task when the answer lands
        }
    }
}
