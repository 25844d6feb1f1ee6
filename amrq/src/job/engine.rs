//! A job whose handlers a progress engine serves while the program computes: a thread of
//! the rank that runs its request and reply handlers (which may reply and send, as
//! handlers do) whenever the program is not inside a section.
//!
//! The rank is one token: whoever holds it owns all of it (the AM layer and the layers
//! above). The program holds it for a section ([`EngineJob::hold`]) with a store and a
//! compiler fence; the engine takes it only between sections, and pays for the
//! handshake itself with `membarrier` ([`crate::util::atomicity`]). A section is
//! atomic against handlers, as RQ's `hold` is against interrupt handlers: a handler
//! that arrives meanwhile waits for the section's end.
//!
//! When nothing arrives the engine arms the AM queues' doorbell, lets the token go and
//! spins a little on the doorbell's word, then sleeps on it: a sender rings and wakes
//! it, as it would a rank blocked in a wait. A rank of a job across hosts has no single
//! word to sleep on, so its engine naps (100 µs) between looks.

use super::Job;
use crate::conduit::mem::{arming_stands, sleeper_stands, Doorbell, EngineArming};
use crate::conduit::Rank;
use crate::util::atomicity::Atomicity;
use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Rounds of spinning on the armed word before the engine sleeps on it (about a
/// microsecond): a message right behind the last costs no wake-up, and the program,
/// which may share the engine's core, loses little.
const SPIN_ROUNDS: u32 = 256;
/// The longest the engine sleeps before it checks, without the token, that its arming
/// still stands: the program's own polls and waits may have disarmed it.
const SLEEP_BACKSTOP: Duration = crate::util::SLEEP_BACKSTOP;
/// How often the engine of a rank of a job across hosts looks.
const ACROSS_NAP: Duration = Duration::from_micros(100);
/// The time slice the engine asks for: on wake-up it preempts the program's thread on
/// their shared core at once instead of after the program's slice (`util::slice`).
const ENGINE_SLICE: Duration = Duration::from_micros(100);
/// Polls the engine makes per turn while messages keep coming, before it lets the
/// token go (each turn costs it a `membarrier`; the program waits for a turn to end).
const POLLS_PER_TURN: u32 = 4;

/// A rank's job whose handlers a progress engine runs while the program computes
/// ([`Setup::start_engine`](crate::Setup::start_engine)). The program reaches the job
/// inside sections ([`EngineJob::hold`]); between them, requests to this rank are
/// served whatever the program computes, after the engine's
/// wake-up (tens of µs where it shares the program's core; the scheduler sets the
/// tail, milliseconds). The engine runs no handler during a section (the program's own
/// polls and waits in it do, on its thread).
///
/// ```
/// use amrq::prelude::*;
/// use std::sync::{atomic::{AtomicBool, Ordering}, Arc};
/// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
///     let answered = Arc::new(AtomicBool::new(false)); // seen without a section
///     let mut t = SendHandlerTable::new();
///     let square = t.call("square", |done: &Arc<AtomicBool>, _ctx, x: u64| {
///         done.store(true, Ordering::Release);
///         Ok(x * x)
///     });
///     let mut job = setup.start_engine(t, answered.clone())?;
///     if job.rank() == 0 {
///         assert_eq!(job.hold().call(1, square, 12)?.wait()?, 144);
///     } else {
///         // Rank 1 computes and never polls: its engine answers the call.
///         let mut x = 0u64;
///         while !answered.load(Ordering::Acquire) {
///             x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
///         }
///     }
///     job.finish()
/// })
/// .unwrap();
/// ```
pub struct EngineJob<S: 'static> {
    shared: Arc<Shared<S>>,
    engine: Option<std::thread::JoinHandle<()>>,
    rank: Rank,
    size: usize,
    /// The job was taken back (`finish`, `leave`).
    taken: bool,
    /// True while the engine serves (its calls' answers land).
    pub(super) serves: Arc<AtomicBool>,
}

/// What the program and its engine share.
struct Shared<S: 'static> {
    /// The rank's layers: reached only by the holder of the token (the program inside
    /// a section, the engine between `try_enter` and `leave`); taken out at the end.
    job: UnsafeCell<ManuallyDrop<Job<S>>>,
    /// The token.
    atomicity: Atomicity,
    /// Set by the program to stop the engine.
    stop: AtomicBool,
}

/// Says the engine no longer serves when its thread ends, however it ends (its calls'
/// waits then stop waiting).
struct Ended(Arc<AtomicBool>);

impl Drop for Ended {
    fn drop(&mut self) {
        // ORDERING: Release pairs with the Acquire load of an `EngineCall`'s check.
        self.0.store(false, Ordering::Release);
    }
}

/// Lets the token go if a handler the engine runs panics, so that the program's
/// sections go on; the panic reaches the program when it takes the job back.
struct LeaveOnPanic<'a>(&'a Atomicity);

impl Drop for LeaveOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.leave();
        }
    }
}

// SAFETY: a `Job<S>` is `Send` but for two parts. The handler table's captures are
// boxed as `dyn Any`: every handler of an engine's job was registered through
// `SendHandlerTable`, whose bounds make each `Send` (the runtime's own capture
// nothing). Split-C's pointers into the segment are addresses in this process's
// mapping, valid from any of its threads. The state is `Send` by the bound.
unsafe impl<S: Send> Send for Shared<S> {}
// SAFETY: the job is reached only by the token's holder (`Held`, and the engine between
// `try_enter` and `leave`), one thread at a time, and the token's hand-off orders their
// accesses (acquire/release, with the barrier on the engine's side): a `Mutex<Job<S>>`
// in effect, which is `Sync` for a `Send` job.
unsafe impl<S: Send> Sync for Shared<S> {}

/// A section of the program: while it lives the program owns the rank's job (it
/// dereferences to [`Job`]) and the engine runs no handler; those that arrive wait for
/// its end, or for the program's own polls and waits in it. Not `Send`: the section
/// ends on the thread that made it.
///
/// ```
/// use amrq::prelude::*;
/// use std::cell::Cell;
/// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
///     let mut t = SendHandlerTable::new();
///     let add = t.request("add", |n: &Cell<u64>, _ctx, m| { n.set(n.get() + m.arg(0)?); Ok(()) });
///     let mut job = setup.start_engine(t, Cell::new(0))?;
///     {
///         let held = job.hold();
///         held.request(0, add, &[5])?;
///         std::thread::sleep(std::time::Duration::from_millis(5));
///         assert_eq!(held.state().get(), 0); // the section does not poll: nothing ran
///     }
///     // After the section the engine runs it (or, with no engine, this wait does).
///     job.hold().wait_until(|n| n.get() == 5)?;
///     job.finish()
/// })
/// .unwrap();
/// ```
#[must_use = "the section ends when the guard is dropped"]
pub struct Held<'a, S: 'static> {
    shared: &'a Shared<S>,
    /// Not `Send`: the section is this thread's.
    _here: std::marker::PhantomData<*const ()>,
}

impl<S: 'static> std::ops::Deref for Held<'_, S> {
    type Target = Job<S>;

    #[inline(always)]
    fn deref(&self) -> &Job<S> {
        // SAFETY: the section holds the token: the engine does not touch the job until
        // it ends, and the `&mut EngineJob` it borrows keeps the program from making
        // another one or taking the job out.
        unsafe { &*self.shared.job.get() }
    }
}

impl<S: 'static> Drop for Held<'_, S> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.shared.atomicity.release() {
            self.shared.atomicity.resume(); // the engine waited: let it go on
        }
    }
}

impl<S: 'static> std::fmt::Debug for Held<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").finish_non_exhaustive()
    }
}

impl<S: 'static> std::fmt::Debug for EngineJob<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineJob")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("engine", &self.engine.is_some())
            .finish_non_exhaustive()
    }
}

impl<S: Send + 'static> EngineJob<S> {
    /// Wraps `job`; starts its engine if `engine` (else the program's polls serve).
    pub(super) fn new(job: Job<S>, engine: bool) -> std::io::Result<Self> {
        let (rank, size) = (job.rank(), job.size());
        let shared = Arc::new(Shared {
            job: UnsafeCell::new(ManuallyDrop::new(job)),
            atomicity: Atomicity::new(),
            stop: AtomicBool::new(false),
        });
        let serves = Arc::new(AtomicBool::new(engine));
        let engine = match engine {
            true => {
                let (s, ends) = (shared.clone(), Ended(serves.clone()));
                Some(
                    std::thread::Builder::new()
                        .name(format!("amrq-engine-{rank}"))
                        .spawn(move || {
                            let _ends = ends;
                            serve(&s)
                        })?,
                )
            }
            false => None,
        };
        Ok(Self {
            shared,
            engine,
            rank,
            size,
            taken: false,
            serves,
        })
    }
}

impl<S: 'static> EngineJob<S> {
    /// Enters a section: the job is the program's until the guard drops, and the engine
    /// runs no handler meanwhile (see [`Held`]). A store and a compiler fence when the
    /// engine is idle; if it is running handlers, waits for their batch to end.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut job = setup.start_engine(SendHandlerTable::<()>::new(), ())?;
    ///     job.hold().barrier()?; // every layer of the job, inside a section
    ///     job.finish()
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn hold(&mut self) -> Held<'_, S> {
        self.shared.atomicity.hold();
        Held {
            shared: &self.shared,
            _here: std::marker::PhantomData,
        }
    }

    /// This rank.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let ranks = amrq::Config::new()
    ///     .threads(2, |s| Ok(s.start_engine(SendHandlerTable::<()>::new(), ())?.rank()))
    ///     .unwrap();
    /// assert_eq!(ranks, [0, 1]);
    /// ```
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Ranks in the job.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let sizes = amrq::Config::new()
    ///     .threads(3, |s| Ok(s.start_engine(SendHandlerTable::<()>::new(), ())?.size()))
    ///     .unwrap();
    /// assert_eq!(sizes, [3, 3, 3]);
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// True while the engine runs: on with the job's
    /// [`Config::engine`](crate::Config::engine) setting, until it ends (a failed peer,
    /// an error that ends it, a handler's panic). False, the program's polls and waits
    /// in sections serve the handlers: a loop that waits outside sections for what a
    /// handler does polls in a section then.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = amrq::Config::new();
    /// cfg.engine.set(false);
    /// let on = cfg.threads(1, |s| Ok(s.start_engine(SendHandlerTable::<()>::new(), ())?.engine_runs())).unwrap();
    /// assert_eq!(on, [false]);
    /// ```
    pub fn engine_runs(&self) -> bool {
        // ORDERING: Acquire pairs with the Release store of the engine's end.
        self.serves.load(Ordering::Acquire)
    }

    /// Starts the progress thread of the job's Interrupt queues, as
    /// [`Job::start_interrupts`] does: RQ's selective interrupts beside the engine,
    /// which serves the AM queues.
    ///
    /// ```
    /// use amrq::{config::{Delivery, QueueSpec}, prelude::*};
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
    /// let mut cfg = amrq::Config::new();
    /// let alarms = cfg.add(QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt));
    /// cfg.threads(1, |s| {
    ///     let mut job = s.start_engine(SendHandlerTable::<()>::new(), ())?;
    ///     let seen = Arc::new(AtomicU64::new(0));
    ///     let s2 = seen.clone();
    ///     let _intr = job
    ///         .start_interrupts(move |_q, _src, args, _p| { s2.fetch_add(args[0], Ordering::Relaxed); })
    ///         .expect("an Interrupt queue");
    ///     job.hold().rq().enqueue(0, alarms, &[5], &[])?;
    ///     while seen.load(Ordering::Relaxed) != 5 {}
    ///     job.finish()
    /// })
    /// .unwrap();
    /// ```
    pub fn start_interrupts<H>(&mut self, handler: H) -> Option<crate::rq::Interrupts>
    where
        H: FnMut(crate::rq::QueueId, Rank, &[u64], crate::conduit::PayloadView<'_>)
            + Send
            + 'static,
    {
        let held = self.hold();
        // SAFETY: the section holds the token (the engine stays out until it ends)
        // and borrows `self` mutably, so no other section exists: this is the only
        // reference to the job while it lives.
        unsafe { &mut *held.shared.job.get() }.start_interrupts(handler)
    }

    /// Stops the engine, then ends the job as [`Job::finish`] does.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     setup.start_engine(SendHandlerTable::<()>::new(), ())?.finish()
    /// })
    /// .unwrap();
    /// ```
    pub fn finish(mut self) -> crate::Result<()> {
        self.take_job().finish()
    }

    /// Stops the engine and leaves the job now, as [`Job::leave`] does.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut job = setup.start_engine(SendHandlerTable::<()>::new(), ())?;
    ///     job.hold().barrier()?;
    ///     job.leave();
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn leave(mut self) {
        self.take_job().leave()
    }

    /// Stops the engine (it disarms what it armed) and takes the job back, once. A
    /// handler's panic on the engine is the program's: it resumes here.
    fn take_job(&mut self) -> Job<S> {
        self.shared.stop.store(true, Ordering::Relaxed);
        let panic = self.engine.take().and_then(|engine| engine.join().err());
        let shared = Arc::get_mut(&mut self.shared).expect("the engine has ended");
        self.taken = true;
        // SAFETY: taken once (`taken` is checked by `Drop`, and `finish` and `leave`
        // consume `self`); nothing reaches the job after this.
        let job = unsafe { ManuallyDrop::take(shared.job.get_mut()) };
        match panic {
            Some(p) if !std::thread::panicking() => {
                drop(job);
                std::panic::resume_unwind(p)
            }
            _ => job,
        }
    }
}

impl<S: 'static> Drop for EngineJob<S> {
    /// As a dropped [`Job`]: its end is reached after the rank's main returns. The
    /// engine stops first; the job is dropped on the program's thread.
    fn drop(&mut self) {
        if !self.taken {
            drop(self.take_job());
        }
    }
}

/// The engine's armed sleep: the doorbell's word and the value it had, and the doorbell
/// and bits whose arming it checks.
struct Sleep {
    word: *const AtomicU32,
    seen: u32,
    bell: *const Doorbell,
    bits: u64,
}

/// The engine's loop: takes the token when the program does not hold it, serves what
/// arrived, and sleeps armed when nothing does. The bits it armed stay armed across its
/// wake-ups (arming them again would cost a `membarrier` each time: only the sleeper's
/// mark is set again, which is a fence), until the rank's own polls disarm them or the
/// engine stops; meanwhile senders set the summary bit, an atomic per message.
fn serve<S>(shared: &Shared<S>) {
    crate::util::slice::request_short_slice(ENGINE_SLICE);
    // The bits this engine armed and has not disarmed.
    let mut kept = 0u64;
    let mut sleep: Option<Sleep> = None;
    // A quiet while has passed: look for calls no answer can come to.
    let mut look_at_calls = false;
    loop {
        let stopping = shared.stop.load(Ordering::Relaxed);
        if stopping && kept == 0 && sleep.is_none() {
            return;
        }
        if !shared.atomicity.try_enter() {
            if stopping {
                return; // a section that never ended (its guard forgotten): bits stay armed
            }
            continue; // the program held: it let us go on at its section's end
        }
        let _entered = LeaveOnPanic(&shared.atomicity);
        // SAFETY: entered: the program makes no section until `leave`.
        let job: &Job<S> = unsafe { &*shared.job.get() };
        let (am, conduit) = (job.am(), job.am().rq().conduit());
        if let Some(s) = sleep.take() {
            // SAFETY: the doorbell is in the rank's region, which the job keeps mapped
            // until it is taken back after this thread has ended.
            if !arming_stands(unsafe { &*s.bell }, s.bits) {
                conduit.disarm_for_engine(am.am_queues(), kept);
                kept = 0;
            }
        }
        if stopping {
            conduit.disarm_for_engine(am.am_queues(), kept);
            shared.atomicity.leave();
            return;
        }
        if std::mem::take(&mut look_at_calls) {
            // Calls to a rank that failed or left: their waits end with why.
            am.give_up_detached(|target| unanswerable(conduit, target));
        }
        let mut took = 0;
        let mut fatal = None;
        for _ in 0..POLLS_PER_TURN {
            match am.poll_runtime() {
                Ok(0) => break,
                Ok(n) => took += n,
                Err(e) => {
                    // The program's next poll or wait returns it; one that ends the
                    // rank's part in the job (a peer failed) ends the engine's too.
                    if e.conduit().is_some() {
                        fatal = Some(e.to_string());
                    }
                    am.keep_error(e);
                    break;
                }
            }
        }
        let armed = match (fatal, took) {
            (Some(why), _) => Err(why),
            (None, 0) => conduit.arm_for_engine(am.am_queues()).map_err(|e| {
                let why = e.to_string();
                am.keep_error(e.into());
                why
            }),
            (None, _) => {
                shared.atomicity.leave();
                continue;
            }
        };
        let nap = match armed {
            Ok(EngineArming::Armed {
                wake,
                seen,
                token,
                bell,
                bits,
            }) => {
                kept |= token;
                sleep = Some(Sleep {
                    word: wake,
                    seen,
                    bell,
                    bits,
                });
                None
            }
            Ok(EngineArming::Ready) => None,
            Ok(EngineArming::Nap) => Some(ACROSS_NAP),
            Err(why) => {
                // Nobody will land the answers of this rank's calls: their waits end.
                am.give_up_detached(|_| {
                    Some(crate::am::AmError::Failed(format!(
                        "the progress engine stopped: {why}"
                    )))
                });
                conduit.disarm_for_engine(am.am_queues(), kept);
                shared.atomicity.leave();
                return;
            }
        };
        shared.atomicity.leave();
        if let Some(nap) = nap {
            std::thread::sleep(nap);
            look_at_calls = true;
        }
        if let Some(s) = &sleep {
            // SAFETY: as above, for the word and the doorbell.
            let (word, bell) = unsafe { (&*s.word, &*s.bell) };
            let woke = sleep_on(word, s.seen, || sleeper_stands(bell, s.bits), &shared.stop);
            look_at_calls = woke == Woke::Quiet;
        }
    }
}

/// Why no answer can come from `target` to a call of this rank, if none can: a rank
/// of the job failed, or `target` left.
fn unanswerable(
    conduit: &crate::conduit::mem::MemConduit,
    target: Rank,
) -> Option<crate::am::AmError> {
    use crate::conduit::{Conduit, ConduitError};
    let why = match conduit.check_peers() {
        Err(e) => e,
        Ok(()) if conduit.peer_left(target) => ConduitError::PeerLeft { rank: target },
        Ok(()) => return None,
    };
    Some(why.into())
}

/// Why the engine's sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Woke {
    /// The word moved (a frame), the arming no longer stands, or the engine is stopped.
    Moved,
    /// A quiet while ([`QUIET_SLEEPS`] backstops) passed.
    Quiet,
}

/// Backstops of an undisturbed sleep after which the engine looks at its calls.
const QUIET_SLEEPS: u32 = 10;

/// Spins a little on the armed word, then sleeps on it until it moves, the arming no
/// longer stands, or the engine is stopped (each checked at least every backstop), or
/// a quiet while passes.
fn sleep_on(word: &AtomicU32, seen: u32, armed: impl Fn() -> bool, stop: &AtomicBool) -> Woke {
    // ORDERING: Acquire pairs with a sender's Release increment of the word.
    let moved = || word.load(Ordering::Acquire) != seen || stop.load(Ordering::Relaxed);
    for _ in 0..SPIN_ROUNDS {
        if moved() {
            return Woke::Moved;
        }
        std::hint::spin_loop();
    }
    for _ in 0..QUIET_SLEEPS {
        if moved() || !armed() {
            return Woke::Moved;
        }
        crate::util::futex::wait(word, seen, SLEEP_BACKSTOP);
    }
    Woke::Quiet
}
