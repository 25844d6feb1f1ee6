//! The benchmarks' clock: `Instant`, with the cost of reading it measured once and
//! subtracted from every timed interval, as Liu & Culler do with their timers (§4).

use std::time::Instant;

/// A calibrated clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    overhead_ns: f64,
}

impl Clock {
    /// Measures the cost of one clock reading: the median over 11 batches of 10 000
    /// back-to-back readings. A timed interval includes one reading's cost (the end
    /// of the first and the start of the second), which [`Clock::since`] removes.
    ///
    /// ```
    /// let c = amrq_bench::clock::Clock::calibrate();
    /// assert!(c.overhead_ns() > 0.0 && c.overhead_ns() < 10_000.0);
    /// ```
    pub fn calibrate() -> Self {
        const READS: u32 = 10_000;
        let mut v: Vec<f64> = (0..11)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..READS {
                    std::hint::black_box(Instant::now());
                }
                t.elapsed().as_nanos() as f64 / f64::from(READS)
            })
            .collect();
        Self {
            overhead_ns: crate::reference::median(&mut v),
        }
    }

    /// The cost of one reading, ns.
    pub fn overhead_ns(&self) -> f64 {
        self.overhead_ns
    }

    /// Now.
    #[inline(always)]
    pub fn start(&self) -> Instant {
        Instant::now()
    }

    /// Nanoseconds since `t`, less the reading's cost (never below 0).
    ///
    /// ```
    /// let c = amrq_bench::clock::Clock::calibrate();
    /// let t = c.start();
    /// std::thread::sleep(std::time::Duration::from_millis(1));
    /// assert!(c.since(t) >= 1e6);
    /// ```
    #[inline(always)]
    pub fn since(&self, t: Instant) -> f64 {
        (t.elapsed().as_nanos() as f64 - self.overhead_ns).max(0.0)
    }
}

/// `n` steps of a dependent computation the compiler cannot drop: the "Δ of
/// computation" between sends, and the workload interrupts arrive into.
#[inline(never)]
pub fn work(n: u64, x: &mut u64) {
    for _ in 0..n {
        *x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
}

/// Steps of [`work`] per nanosecond on this core (measured over ~1 ms).
pub fn work_per_ns() -> f64 {
    let mut x = 1u64;
    let t = Instant::now();
    work(1_000_000, &mut x);
    1e6 / t.elapsed().as_nanos().max(1) as f64
}
