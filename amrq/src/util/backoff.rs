//! Bounded spinning, then yielding: how every wait in amrq behaves, so that ranks that
//! outnumber cores still make progress (crossbeam issue #821 is what happens otherwise).

/// A wait strategy: spin with `pause` for a bounded number of rounds, then yield the
/// core to the scheduler on every further round.
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
}

/// Spin rounds before the first yield: each is one `pause` plus the caller's poll, so
/// this is some tens of µs — far longer than a round trip between two cores, far
/// shorter than a scheduler time slice. Every round is a single `pause`: a waiter that
/// backs off exponentially notices an arrival late, which showed up as twice the round
/// trip in `pingpong`.
const SPIN_ROUNDS: u32 = 1 << 11;

impl Backoff {
    /// A fresh backoff that starts by spinning.
    pub const fn new() -> Self {
        Self { rounds: 0 }
    }

    /// Waits a little: `pause` while under the spin limit, `yield_now` after it.
    #[inline]
    pub fn snooze(&mut self) {
        if self.rounds < SPIN_ROUNDS {
            std::hint::spin_loop();
            self.rounds += 1;
        } else {
            std::thread::yield_now();
        }
    }

    /// True once the spin budget is spent and every `snooze` yields.
    pub fn is_yielding(&self) -> bool {
        self.rounds >= SPIN_ROUNDS
    }

    /// Starts spinning again (call after progress was made).
    #[inline]
    pub fn reset(&mut self) {
        self.rounds = 0;
    }
}
