//! Atomicity between a rank's thread and a progress thread (Alewife's atomicity bit, RQ
//! §2.3): the rank's thread *holds* for a critical section, the progress thread *enters*
//! to run handlers, and never both at once. A progress thread that finds the rank
//! holding defers: it marks itself pending and sleeps until the section ends, and the
//! rank's thread, leaving the section, sees the mark and lets it go on.
//!
//! The scheme is asymmetric, for frequent sections and rare handlers: holding and
//! releasing are plain stores with compiler fences (no locked instruction), while the
//! progress thread, before it enters, marks itself running and issues
//! `membarrier(PRIVATE_EXPEDITED)`, which orders the rank's stores as if it had fenced.
//! Where `membarrier` is missing both sides fence (a locked instruction per section).
//! The loom model in `tests/loom_atomicity.rs` runs this code with the fences
//! symmetric, the stand-in for the barrier.

use crate::sync::{fence, AtomicBool, AtomicU32, Ordering};
use std::sync::atomic::compiler_fence;
use std::time::Duration;

/// The longest a deferred progress thread, or a rank's thread waiting for a batch,
/// sleeps before it looks again (a backstop: the other side wakes it).
const DEFERRED_NAP: Duration = Duration::from_millis(10);
/// Rounds a rank's thread spins on a running batch before it sleeps.
const BATCH_SPINS: u32 = 1_000;

/// The state one rank's thread shares with its progress thread.
///
/// ```
/// use amrq::util::atomicity::Atomicity;
/// let a = Atomicity::new();
/// a.hold(); // the rank's thread: no handler runs until the release
/// assert!(!a.try_enter()); // the progress thread defers
/// if a.release() {
///     a.resume(); // it was deferred: let it go on
/// }
/// assert!(a.try_enter()); // now it may run handlers
/// a.leave();
/// ```
#[derive(Debug)]
pub struct Atomicity {
    /// The rank's thread is in a section.
    held: AtomicBool,
    /// The progress thread runs handlers (1) or not (0): a futex word the rank's thread
    /// sleeps on when a batch lasts.
    running: AtomicU32,
    /// The rank's thread sleeps on `running`: the end of the batch wakes it.
    waiting: AtomicBool,
    /// The progress thread was deferred: the release lets it go on.
    pending: AtomicBool,
    /// Bumped by a release that found the progress thread deferred (a futex word).
    released: AtomicU32,
    /// `membarrier` works here (else both sides fence).
    asymmetric: bool,
}

impl Default for Atomicity {
    fn default() -> Self {
        Self::new()
    }
}

impl Atomicity {
    /// The state for a new progress thread: asymmetric where `membarrier` works.
    ///
    /// ```
    /// let a = amrq::util::atomicity::Atomicity::new();
    /// println!("cheap sections: {}", a.asymmetric());
    /// ```
    pub fn new() -> Self {
        #[cfg(not(amrq_loom))]
        let asymmetric = crate::util::membarrier::register_private();
        #[cfg(amrq_loom)]
        let asymmetric = false;
        Self {
            held: AtomicBool::new(false),
            running: AtomicU32::new(0),
            waiting: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            released: AtomicU32::new(0),
            asymmetric,
        }
    }

    /// True if sections cost no fence (`membarrier` works here).
    ///
    /// ```
    /// let a = amrq::util::atomicity::Atomicity::new();
    /// let _cheap: bool = a.asymmetric();
    /// ```
    pub fn asymmetric(&self) -> bool {
        self.asymmetric
    }

    /// The rank's thread enters a section: from here to [`Atomicity::release`] the
    /// progress thread runs nothing. Waits for a batch it is running to end. No system
    /// call and no locked instruction when uncontended.
    ///
    /// ```
    /// let a = amrq::util::atomicity::Atomicity::new();
    /// a.hold();
    /// assert!(!a.try_enter());
    /// # if a.release() { a.resume() }
    /// ```
    #[inline(always)]
    pub fn hold(&self) {
        self.held.store(true, Ordering::Relaxed);
        // The progress thread's membarrier orders this store before the load below
        // (asymmetric); otherwise a fence, out of line so that the common case falls
        // through.
        compiler_fence(Ordering::SeqCst);
        if !self.asymmetric {
            symmetric_fence();
        }
        // ORDERING: Acquire pairs with the Release store of `running` in
        // `clear_running`: what a batch of handlers did happens before the section.
        if self.running.load(Ordering::Acquire) != 0 {
            self.wait_for_batch();
        }
    }

    /// The rank's thread found a batch of handlers running: spins a little, then
    /// sleeps until the batch ends (a handler may take long, and the progress thread
    /// may share the core).
    #[cold]
    #[inline(never)]
    fn wait_for_batch(&self) {
        for _ in 0..BATCH_SPINS {
            // ORDERING: as in `hold`.
            if self.running.load(Ordering::Acquire) == 0 {
                return;
            }
            spin();
        }
        loop {
            self.waiting.store(true, Ordering::Relaxed);
            // ORDERING: SeqCst fence between the mark and the look; pairs with the one
            // in `clear_running` (Dekker): either it sees the mark and wakes us, or we
            // see the batch over.
            fence(Ordering::SeqCst);
            // ORDERING: as in `hold`.
            if self.running.load(Ordering::Acquire) == 0 {
                break;
            }
            nap(&self.running, 1);
        }
        self.waiting.store(false, Ordering::Relaxed);
    }

    /// The rank's thread leaves its section. True if the progress thread was deferred
    /// meanwhile: the caller runs what it may in its place and then calls
    /// [`Atomicity::resume`].
    ///
    /// ```
    /// let a = amrq::util::atomicity::Atomicity::new();
    /// a.hold();
    /// assert!(!a.release()); // nobody waited
    /// ```
    #[inline(always)]
    pub fn release(&self) -> bool {
        // ORDERING: Release: the section happens before handlers that run after it;
        // pairs with the Acquire load of `held` in `try_enter`.
        self.held.store(false, Ordering::Release);
        compiler_fence(Ordering::SeqCst);
        if !self.asymmetric {
            symmetric_fence();
        }
        self.pending.load(Ordering::Relaxed)
    }

    /// After a [`Atomicity::release`] that answered true: wakes the deferred progress
    /// thread.
    ///
    /// ```
    /// let a = amrq::util::atomicity::Atomicity::new();
    /// a.resume(); // harmless when nobody waits
    /// ```
    #[cold]
    #[inline(never)]
    pub fn resume(&self) {
        self.pending.store(false, Ordering::Relaxed);
        // ORDERING: Release pairs with the Acquire load of `released` in `try_enter`
        // before it sleeps.
        self.released.fetch_add(1, Ordering::Release);
        wake(&self.released);
    }

    /// The progress thread: may it run handlers now? If so it is running until
    /// [`Atomicity::leave`]. If the rank's thread holds, it marks itself deferred,
    /// sleeps until the section ends (or a backstop passes) and answers false.
    ///
    /// ```
    /// let a = amrq::util::atomicity::Atomicity::new();
    /// assert!(a.try_enter());
    /// a.leave();
    /// ```
    pub fn try_enter(&self) -> bool {
        self.running.store(1, Ordering::Relaxed);
        self.heavy_fence();
        // ORDERING: Acquire pairs with the Release store of `held` in `release`.
        if !self.held.load(Ordering::Acquire) {
            return true;
        }
        self.clear_running();
        // ORDERING: Acquire pairs with the Release increment in `resume`.
        let seen = self.released.load(Ordering::Acquire);
        self.pending.store(true, Ordering::Relaxed);
        self.heavy_fence();
        // Either the release sees `pending` (and wakes us), or we see it released.
        if self.held.load(Ordering::Relaxed) {
            nap(&self.released, seen);
        }
        false
    }

    /// The progress thread's batch is over: the rank's thread may hold again.
    ///
    /// ```
    /// let a = amrq::util::atomicity::Atomicity::new();
    /// if a.try_enter() {
    ///     a.leave();
    /// }
    /// ```
    pub fn leave(&self) {
        self.clear_running();
    }

    /// The progress thread is no longer running handlers; wakes the rank's thread if
    /// it sleeps waiting for that.
    fn clear_running(&self) {
        // ORDERING: Release: the handlers' effects happen before a section that
        // follows; pairs with the Acquire loads of `running` in `hold`.
        self.running.store(0, Ordering::Release);
        // ORDERING: pairs with the SeqCst fence in `wait_for_batch` (Dekker).
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::Relaxed) {
            wake(&self.running);
        }
    }

    /// The progress thread's side of the handshake: `membarrier` (a barrier in the rank's
    /// thread too) where it works, else a fence that pairs with the rank's.
    fn heavy_fence(&self) {
        if self.asymmetric {
            #[cfg(not(amrq_loom))]
            crate::util::membarrier::private_expedited();
        } else {
            // ORDERING: SeqCst fence pairs with the rank's SeqCst fence in `hold` and
            // `release` (Dekker).
            fence(Ordering::SeqCst);
        }
    }
}

/// The rank's fence of a section's start and end where `membarrier` is missing.
#[cold]
#[inline(never)]
fn symmetric_fence() {
    // ORDERING: pairs with the SeqCst fence in `heavy_fence`.
    fence(Ordering::SeqCst);
}

/// A round of the rank's wait for a running batch (under loom, a yield: the model's
/// scheduler must run the progress thread).
#[inline(always)]
fn spin() {
    #[cfg(not(amrq_loom))]
    std::hint::spin_loop();
    #[cfg(amrq_loom)]
    loom::thread::yield_now();
}

/// Sleeps until `word` moves past `seen` (or a backstop).
#[cfg(not(amrq_loom))]
fn nap(word: &AtomicU32, seen: u32) {
    crate::util::futex::wait(word, seen, DEFERRED_NAP);
}

/// Wakes the sleepers of `word`.
#[cfg(not(amrq_loom))]
fn wake(word: &AtomicU32) {
    crate::util::futex::wake_all(word);
}

/// Under loom a sleeper yields until the word moves: nothing to wake.
#[cfg(amrq_loom)]
fn wake(_word: &AtomicU32) {}

/// Under loom, the futex wait without its backstop: yield until the word moves (a
/// release that forgot to bump it leaves the model spinning, which loom reports).
#[cfg(amrq_loom)]
fn nap(word: &AtomicU32, seen: u32) {
    let _ = DEFERRED_NAP;
    while word.load(Ordering::Acquire) == seen {
        loom::thread::yield_now();
    }
}
