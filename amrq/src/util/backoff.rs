//! Bounded spinning, then yielding or sleeping: how every wait in amrq behaves, so that
//! ranks that outnumber cores still make progress (crossbeam issue #821 is what happens
//! otherwise). Waits for an arrival sleep once the spin budget is spent
//! ([`SLEEP_BACKSTOP`]); waits for room yield. On a host with more ranks than cores the
//! budget is a few rounds ([`crowd`]).

use std::sync::atomic::{AtomicU32, Ordering};

/// A wait strategy in three phases: poll tightly for a bounded number of rounds, then
/// poll with a `pause` between rounds, then yield the core to the scheduler on every
/// further round.
///
/// The tight phase matters: a `pause` costs ~28 ns on the development VM (more than a
/// tenth of a cross-core round trip), and a waiter notices an arrival on average half a
/// polling period late.
///
/// ```
/// use amrq::util::Backoff;
/// let mut b = Backoff::new();
/// let mut n = 0;
/// while n < 5000 {
///     n += 1; // poll something here
///     b.snooze();
/// }
/// assert!(b.is_yielding());
/// ```
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    rounds: u32,
    /// The round of the `CHECK` a wait started once every other rank had flushed
    /// (`am/exit.rs`); 0 for none, [`Backoff::NO_CHECK`] for a wait that must not
    /// check. Beside `rounds`, so that a new `Backoff` is a load and one 8-byte store.
    pub(crate) check_round: u32,
}

/// Longest sleep of a blocking wait between two looks at its condition and its peers:
/// a condition that no frame announces (a flag set by another thread) is seen this late
/// at worst, and a dead peer this soon.
///
/// ```
/// assert!(amrq::util::backoff::SLEEP_BACKSTOP <= std::time::Duration::from_millis(10));
/// ```
pub const SLEEP_BACKSTOP: std::time::Duration = std::time::Duration::from_millis(1);

/// Rounds of tight polling (a few µs: several round trips between two cores).
const TIGHT_ROUNDS: u32 = 1 << 10;
/// Rounds, tight ones included, before the first yield: with one `pause` per round
/// after the tight phase, some tens of µs in all — far shorter than a scheduler time
/// slice. Every round is at most a single `pause`: a waiter that backs off
/// exponentially notices an arrival late, which showed up as twice the round trip in
/// `amrq-bench round-trip`.
const SPIN_ROUNDS: u32 = 1 << 11;

/// Rounds of spinning (each a `pause`, ~28 ns) a wait gets on a crowded host.
const CROWDED_ROUNDS: u32 = 32;

/// The round every wait starts at: 0 (the tight phase first), or on a host with more
/// ranks than cores ([`crowd`]) [`CROWDED_ROUNDS`] short of the spin budget: the rank a
/// wait needs is then likely not running, and a spinning waiter keeps it from a core
/// (polls that progress the network cost a system call each, so 2 048 rounds were
/// milliseconds of a core per wait).
static START: AtomicU32 = AtomicU32::new(0);

/// Tells this process's waits how many ranks share its host: past one per core they
/// spin about a microsecond, then yield or sleep. Called when a job starts (the last
/// call wins, for a process that runs several jobs of threads).
///
/// ```
/// use amrq::util::backoff::{crowd, Backoff};
/// crowd(1 << 20); // a million ranks on this host: surely more than its cores
/// let mut b = Backoff::new();
/// (0..32).for_each(|_| b.snooze());
/// assert!(b.is_yielding());
/// crowd(1); // back to spinning first
/// assert!(!Backoff::new().is_yielding());
/// ```
pub fn crowd(ranks_here: usize) {
    // The host's, not this thread's: a pinned rank is allowed one core.
    let start = if ranks_here > super::affinity::host_cores() {
        SPIN_ROUNDS - CROWDED_ROUNDS
    } else {
        0
    };
    START.store(start, Ordering::Relaxed);
}

impl Backoff {
    /// A fresh backoff that starts by spinning (briefly on a crowded host: [`crowd`]).
    ///
    /// ```
    /// let b = amrq::util::Backoff::new();
    /// assert!(!b.is_yielding());
    /// ```
    #[inline]
    pub fn new() -> Self {
        Self {
            rounds: START.load(Ordering::Relaxed),
            check_round: 0,
        }
    }

    /// `check_round` of a wait whose condition something else than the rank's own
    /// handlers may make true (a transfer the conduit completes, the job's end itself):
    /// it never concludes that nothing can arrive.
    pub(crate) const NO_CHECK: u32 = u32::MAX;

    /// A new `Backoff` for such a wait.
    pub(crate) fn no_check() -> Self {
        Self {
            check_round: Self::NO_CHECK,
            ..Self::new()
        }
    }

    /// Waits a little: `pause` while under the spin limit, `yield_now` after it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// let ready = AtomicBool::new(false);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| ready.store(true, Ordering::Release));
    ///     let mut b = amrq::util::Backoff::new();
    ///     while !ready.load(Ordering::Acquire) {
    ///         b.snooze(); // spins first, then yields the core
    ///     }
    /// });
    /// ```
    #[inline]
    pub fn snooze(&mut self) {
        if self.rounds < TIGHT_ROUNDS {
            self.rounds += 1;
        } else if self.rounds < SPIN_ROUNDS {
            std::hint::spin_loop();
            self.rounds += 1;
        } else {
            std::thread::yield_now();
        }
    }

    /// True once the spin budget is spent and every `snooze` yields.
    ///
    /// ```
    /// let mut b = amrq::util::Backoff::new();
    /// while !b.is_yielding() {
    ///     b.snooze();
    /// }
    /// // A waiter that has yielded this long may go to sleep on a futex instead.
    /// ```
    pub fn is_yielding(&self) -> bool {
        self.rounds >= SPIN_ROUNDS
    }

    /// Starts spinning again (call after progress was made).
    ///
    /// ```
    /// let mut b = amrq::util::Backoff::new();
    /// for _ in 0..100_000 { b.snooze(); }
    /// b.reset(); // something arrived: spin tightly again
    /// assert!(!b.is_yielding());
    /// ```
    #[inline]
    pub fn reset(&mut self) {
        self.rounds = START.load(Ordering::Relaxed);
    }
}
