//! Selective interrupts and atomicity (RQ §2.2–2.3; Alewife's atomicity bit).
//!
//! Queues declared [`Delivery::Interrupt`](crate::conduit::Delivery) are drained by a
//! progress thread that runs the program's interrupt handler on each frame as it
//! arrives, while the rank computes. It sleeps on a shared futex when they are idle
//! (no spinning), and senders wake it only when it has armed its doorbell. Every other
//! queue is never touched by that thread: code stays atomic by default, as the paper
//! argues, and only the rank's own polls run their frames.
//!
//! [`Interrupts::hold`] protects a critical section against interrupt handlers:
//! handlers that would run meanwhile are deferred and run at release, on the owner's
//! thread, as Alewife takes a held interrupt when atomicity is re-enabled (running it
//! there is cheaper than waking the progress thread for it: a futex wake and a
//! `membarrier`; `amrq-bench rq-loop --hold` times the first). The channels
//! and the handler sit behind one lock that the progress thread takes per batch. The default is
//! the asymmetric scheme, which serves the paper's use (frequent sections,
//! rare interrupts): entering and leaving are plain stores with compiler fences
//! (0.5 ns), while the progress thread, before each batch of handlers, marks itself
//! running and issues `membarrier(PRIVATE_EXPEDITED)`, which orders the owner's stores
//! as if it had fenced (an interprocessor interrupt, ~15 µs when the owner runs). The
//! alternative — a locked state word — costs 11 ns per section and little per interrupt;
//! it is what this falls back to where `membarrier` is not available.

use crate::conduit::{ConduitError, InterruptAlarm, InterruptChannels, PayloadView, ReceivedFrame};
use crate::rq::QueueId;
use crate::util::atomicity::Atomicity;
use crate::util::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Most frames the owner's thread handles at the end of a section that deferred them
/// (the progress thread takes the rest).
const DEFERRED_BUDGET: usize = 256;

/// The Interrupt channels and the program's handler, behind one lock: the progress
/// thread drains them, and so does the owner when it ends a section that deferred
/// handlers.
struct Served<R, H> {
    rx: R,
    handler: H,
}

impl<R: InterruptChannels, H: FnMut(QueueId, usize, &[u64], PayloadView<'_>)> Served<R, H> {
    /// Runs the handler on up to `budget` frames; how many ran.
    fn run(&mut self, budget: usize) -> usize {
        let handler = &mut self.handler;
        // Bad frames are dropped and recorded in the rank's faults log by the conduit;
        // no error is left for this loop to report.
        self.rx
            .drain(budget, |ch, f| -> Result<(), ConduitError> {
                handler(QueueId::new(ch), f.source(), f.args(), f.payload());
                Ok(())
            })
            .unwrap_or(0)
    }
}

/// Runs deferred handlers on the owner's thread at the end of a section.
type RunDeferred = Box<dyn Fn() + Send + Sync>;

/// What the owner and its progress thread share: the atomicity state, the stop flag,
/// and the drain the owner runs at the end of a section that deferred handlers (on the
/// deferred path only: a dynamic call there costs nothing next to the frames it runs).
struct Shared {
    atomicity: Atomicity,
    stop: AtomicBool,
    run_deferred: RunDeferred,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("atomicity", &self.atomicity)
            .finish_non_exhaustive()
    }
}

/// A running progress thread for a rank's Interrupt queues. Dropping it stops the thread.
///
/// ```
/// use amrq::{config::{Delivery, QueueSpec}, rq::{Rq, RqError}, Config};
/// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
/// let mut cfg = Config::default();
/// let q = cfg.add(QueueSpec::new("events", 16).delivery(Delivery::Interrupt));
/// let mut eps = amrq::conduit::threads::endpoints_for(1, &cfg.conduit_spec()).unwrap();
/// let mut rq = Rq::new(eps.remove(0));
/// let n = Arc::new(AtomicU64::new(0));
/// let m = n.clone();
/// let intr = rq.start_interrupts(move |_q, _src, _args, _p| { m.fetch_add(1, Ordering::Relaxed); });
/// let intr = intr.expect("an Interrupt queue");
/// rq.enqueue(0, q, &[], &[])?;
/// while n.load(Ordering::Relaxed) == 0 {}
/// drop(intr); // stops the thread
/// # Ok::<(), amrq::Error>(())
/// ```
#[derive(Debug)]
pub struct Interrupts {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A critical section: while it lives, no interrupt handler runs; those that would
/// have are run when it ends.
///
/// ```
/// use amrq::{config::{Delivery, QueueSpec}, rq::{Rq, RqError}, Config};
/// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
/// let mut cfg = Config::default();
/// let q = cfg.add(QueueSpec::new("events", 16).delivery(Delivery::Interrupt));
/// let mut eps = amrq::conduit::threads::endpoints_for(1, &cfg.conduit_spec()).unwrap();
/// let mut rq = Rq::new(eps.remove(0));
/// let n = Arc::new(AtomicU64::new(0));
/// let m = n.clone();
/// let intr = rq.start_interrupts(move |_q, _src, _a, _p| { m.fetch_add(1, Ordering::SeqCst); }).unwrap();
/// {
///     let _section = intr.hold();
///     rq.enqueue(0, q, &[], &[])?;
///     std::thread::sleep(std::time::Duration::from_millis(20));
///     assert_eq!(n.load(Ordering::SeqCst), 0); // deferred while held
/// } // the section ends: the deferred handler runs here, on this thread
/// while n.load(Ordering::SeqCst) == 0 {}
/// # Ok::<(), amrq::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "the section ends when the guard is dropped"]
pub struct Hold<'a> {
    shared: &'a Shared,
}

impl Interrupts {
    /// Starts the progress thread over `rx`, running `handler(queue, source, args,
    /// payload)` on every frame of the Interrupt queues: on the progress thread, or on
    /// the owner's thread at the end of a section that deferred it.
    pub(crate) fn start<R, H>(rx: R, handler: H) -> Self
    where
        R: InterruptChannels,
        H: FnMut(QueueId, usize, &[u64], PayloadView<'_>) + Send + 'static,
    {
        let (alarm, rank) = (rx.alarm(), rx.rank());
        let served = Arc::new(Mutex::new(Served { rx, handler }));
        let s = served.clone();
        let shared = Arc::new(Shared {
            atomicity: Atomicity::new(),
            stop: AtomicBool::new(false),
            run_deferred: Box::new(move || {
                lock(&s).run(DEFERRED_BUDGET);
            }),
        });
        let a = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("amrq-interrupts-{rank}"))
            .spawn(move || {
                let mut idle = 0u32;
                while !a.stop.load(Ordering::Relaxed) {
                    if !lock(&served).rx.any_ready() {
                        idle += 1;
                        if idle <= 200 {
                            std::hint::spin_loop();
                            continue;
                        }
                        // Sleep without the lock, so that the owner can run deferred
                        // handlers meanwhile.
                        alarm.sleep_if(|| !lock(&served).rx.any_ready(), Duration::from_millis(20));
                        continue;
                    }
                    idle = 0;
                    if !a.atomicity.try_enter() {
                        continue; // deferred: the owner runs them when its section ends
                    }
                    lock(&served).run(64);
                    a.atomicity.leave();
                }
            })
            .ok();
        Self { shared, thread }
    }

    /// Enters a critical section (see [`Hold`]). No system call when uncontended.
    ///
    /// ```
    /// use amrq::{config::{Delivery, QueueSpec}, rq::{Rq, RqError}, Config};
    /// use std::sync::{Arc, Mutex};
    /// let mut cfg = Config::default();
    /// let q = cfg.add(QueueSpec::new("events", 16).delivery(Delivery::Interrupt));
    /// let mut eps = amrq::conduit::threads::endpoints_for(1, &cfg.conduit_spec()).unwrap();
    /// let mut rq = Rq::new(eps.remove(0));
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let l = log.clone();
    /// let intr = rq.start_interrupts(move |_q, _s, a, _p| l.lock().unwrap().push(a[0])).unwrap();
    /// let section = intr.hold();
    /// rq.enqueue(0, q, &[1], &[])?;
    /// log.lock().unwrap().push(0); // no handler runs between these two lines
    /// assert_eq!(*log.lock().unwrap(), [0]);
    /// drop(section);
    /// while log.lock().unwrap().len() < 2 {}
    /// assert_eq!(*log.lock().unwrap(), [0, 1]);
    /// # Ok::<(), amrq::Error>(())
    /// ```
    #[inline(always)]
    pub fn hold(&self) -> Hold<'_> {
        self.shared.atomicity.hold();
        Hold {
            shared: &self.shared,
        }
    }

    /// True if `membarrier` is available (the cheap sections).
    ///
    /// ```
    /// use amrq::{config::{Delivery, QueueSpec}, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// cfg.add(QueueSpec::new("events", 16).delivery(Delivery::Interrupt));
    /// let mut eps = amrq::conduit::threads::endpoints_for(1, &cfg.conduit_spec()).unwrap();
    /// let mut rq = Rq::new(eps.remove(0));
    /// let intr = rq.start_interrupts(|_q, _s, _a, _p| {}).unwrap();
    /// // With membarrier (Linux ≥ 4.14) a section costs no fence.
    /// println!("cheap sections: {}", intr.asymmetric());
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn asymmetric(&self) -> bool {
        self.shared.atomicity.asymmetric()
    }
}

impl Drop for Hold<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.shared.atomicity.release() {
            self.run_deferred();
        }
    }
}

impl Hold<'_> {
    /// The end of a section during which the progress thread found frames: run their
    /// handlers here and now (as Alewife takes a held interrupt when atomicity is
    /// re-enabled), then let the progress thread go on.
    #[cold]
    #[inline(never)]
    fn run_deferred(&self) {
        (self.shared.run_deferred)();
        self.shared.atomicity.resume();
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
