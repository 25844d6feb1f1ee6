//! Bounded spinning, then yielding or sleeping: how every wait in amrq behaves, so that
//! ranks that outnumber cores still make progress (crossbeam issue #821 is what happens
//! otherwise). Waits for an arrival sleep once the spin budget is spent
//! ([`SLEEP_BACKSTOP`]); waits for room yield.

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
    /// The round of the `CHECK` a wait started once every other rank had returned
    /// (`am/exit.rs`); 0 for none, [`Backoff::NO_CHECK`] for a wait that must not
    /// check. Beside `rounds`, so that a new `Backoff` is still one store.
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

impl Backoff {
    /// A fresh backoff that starts by spinning.
    ///
    /// ```
    /// let b = amrq::util::Backoff::new();
    /// assert!(!b.is_yielding());
    /// ```
    pub const fn new() -> Self {
        Self {
            rounds: 0,
            check_round: 0,
        }
    }

    /// `check_round` of a wait whose condition something else than the rank's own
    /// handlers may make true (a transfer the conduit completes, the job's end itself):
    /// it never concludes that nothing can arrive.
    pub(crate) const NO_CHECK: u32 = u32::MAX;

    /// A new `Backoff` for such a wait.
    pub(crate) const fn no_check() -> Self {
        Self {
            rounds: 0,
            check_round: Self::NO_CHECK,
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
        self.rounds = 0;
    }
}
