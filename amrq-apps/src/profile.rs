//! Where a rank's time goes, from one extra run after the timed ones, with the clock read
//! around each call that communicates: in **messages** (sending, storing, reading remote
//! data), in **waits** (barriers, store synchronisations, reductions, and the polls a
//! rank makes while it has nothing else to do, with any handlers they run), and the
//! rest, computing. The timed runs read no such clock: outside [`profiled`] a wrapper
//! is one thread-local flag test.
//!
//! A call counts when it involves another rank; the same call to the rank itself (a
//! store into its own part of a spread array) is a local copy and counts as
//! computing. Beside the shares, the bytes the rank moved to or from others, and how
//! long copying them would take at the copy bandwidth [`copy_gb_s`] measures in the
//! same job (buffers larger than the caches, so a bound on what the bytes need): the
//! memory traffic the messages cannot avoid.

use amrq_bench::report::{Figure, Outcome};
use std::cell::Cell;
use std::time::Instant;

/// What one profiled run spent outside computing, on one rank.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Tally {
    /// ns in calls that send, store or read remote data.
    pub messages_ns: f64,
    /// ns in barriers, synchronisations, reductions and idle polls.
    pub waits_ns: f64,
    /// Bytes this rank moved to (or read from) other ranks.
    pub bytes: u64,
    /// Calls timed.
    pub calls: u64,
    /// This rank's own ns of the run, when the run reports it through [`longest`]
    /// (its time is then the longest rank's).
    pub own_ns: Option<f64>,
}

thread_local! {
    // Per thread, so ranks run as threads keep their own.
    static ON: Cell<bool> = const { Cell::new(false) };
    static TALLY: Cell<Tally> = const {
        Cell::new(Tally { messages_ns: 0.0, waits_ns: 0.0, bytes: 0, calls: 0, own_ns: None })
    };
}

fn timed<T>(f: impl FnOnce() -> T, add: impl FnOnce(&mut Tally, f64)) -> T {
    if !ON.get() {
        return f();
    }
    ON.set(false); // a wrapped call inside another counts with its caller, once
    let t = Instant::now();
    let out = f();
    let ns = t.elapsed().as_secs_f64() * 1e9;
    let mut tally = TALLY.get();
    tally.calls += 1;
    add(&mut tally, ns);
    TALLY.set(tally);
    ON.set(true);
    out
}

/// Runs `f`, a call that moves `bytes` to or from another rank, counting its time as
/// messages when profiling.
///
/// ```
/// let (sent, tally) = amrq_apps::profile::profiled(|| amrq_apps::profile::messages(64, || 7));
/// assert_eq!((sent, tally.bytes), (7, 64));
/// ```
pub fn messages<T>(bytes: usize, f: impl FnOnce() -> T) -> T {
    timed(f, |t, ns| {
        t.messages_ns += ns;
        t.bytes += bytes as u64;
    })
}

/// Runs `f`, a call that waits for other ranks, counting its time as waits when
/// profiling.
///
/// ```
/// let ((), tally) = amrq_apps::profile::profiled(|| amrq_apps::profile::waits(|| {}));
/// assert!(tally.waits_ns >= 0.0 && tally.messages_ns == 0.0);
/// ```
pub fn waits<T>(f: impl FnOnce() -> T) -> T {
    timed(f, |t, ns| t.waits_ns += ns)
}

/// Runs `f` with the wrappers counting, and returns what it returned and what they
/// counted.
///
/// ```
/// use amrq_apps::profile::{profiled, waits};
/// let (_, tally) = profiled(|| waits(|| std::thread::sleep(std::time::Duration::from_millis(1))));
/// assert!(tally.waits_ns >= 1e6);
/// ```
pub fn profiled<T>(f: impl FnOnce() -> T) -> (T, Tally) {
    TALLY.set(Tally::default());
    ON.set(true);
    let out = f();
    ON.set(false);
    (out, TALLY.get())
}

/// ns a timed call costs outside the time it counts (a clock read and the tally): the
/// profiled run's overhead, which would otherwise count as computing. Measured once per
/// process, by 10 000 empty timed calls.
fn outside_ns() -> f64 {
    static NS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *NS.get_or_init(|| {
        const CALLS: u32 = 10_000;
        let saved = (ON.get(), TALLY.get());
        TALLY.set(Tally::default());
        ON.set(true);
        let t = Instant::now();
        for _ in 0..CALLS {
            waits(|| ());
        }
        let total = t.elapsed().as_secs_f64() * 1e9;
        let inside = TALLY.get().waits_ns;
        ON.set(saved.0);
        TALLY.set(saved.1);
        ((total - inside) / f64::from(CALLS)).max(0.0)
    })
}

/// GB/s (bytes per ns) one core copies between two buffers of 32 MiB (larger than the
/// caches): the median of five copies.
///
/// ```
/// assert!(amrq_apps::profile::copy_gb_s() > 0.0);
/// ```
pub fn copy_gb_s() -> f64 {
    const BYTES: usize = 32 << 20;
    let src = vec![1u8; BYTES];
    let mut dst = vec![0u8; BYTES];
    let mut rates: Vec<f64> = (0..5)
        .map(|_| {
            let ns = crate::ns_of(|| {
                dst.copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&mut dst);
            });
            BYTES as f64 / ns
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[2]
}

/// The job's time for a run that started at `t` on this rank: the longest rank's,
/// which `max_over_ranks` gives from this rank's. Ranks sharing cores leave the
/// barrier before a run at different times, so one rank's time can miss another's
/// start. A profiled run keeps this rank's own time for its shares.
///
/// ```
/// let t = std::time::Instant::now();
/// let ns = amrq_apps::profile::longest(t, |mine| Ok::<_, ()>(mine * 2.0)).unwrap();
/// assert!(ns >= 0.0);
/// ```
pub fn longest<E>(
    t: Instant,
    max_over_ranks: impl FnOnce(f64) -> Result<f64, E>,
) -> Result<f64, E> {
    let own = t.elapsed().as_secs_f64() * 1e9;
    if ON.get() {
        let mut tally = TALLY.get();
        tally.own_ns = Some(tally.own_ns.unwrap_or(0.0) + own); // a run of several sums
        TALLY.set(tally);
    }
    max_over_ranks(own)
}

/// A profiled run on one rank, for rank 0's outcome ([`Profile::push`]).
pub(crate) struct Profile {
    tally: Tally,
    /// The run's ns: this rank's own where the run gave it, else the run's result.
    elapsed_ns: f64,
    /// ns one core takes for the same problem (the sequential runs' median).
    sequential_ns: f64,
    /// GB/s of [`copy_gb_s`] (rank 0's; 0 elsewhere).
    copy_gb_s: f64,
}

/// Measures the copy bandwidth on rank 0 alone, then makes one more run, profiled:
/// `run` gives its ns; `sequential_ns` is one core's time for the same problem.
pub(crate) fn measure<S, C: amrq::conduit::Conduit>(
    am: &amrq::am::Am<S, C>,
    sequential_ns: f64,
    run: impl FnOnce() -> Result<f64, crate::AppError>,
) -> Result<Profile, crate::AppError> {
    let copy_gb_s = crate::on_rank_0_alone(am, copy_gb_s)?;
    let (ns, tally) = profiled(run);
    let ns = ns?;
    Ok(Profile {
        elapsed_ns: tally.own_ns.unwrap_or(ns),
        tally,
        sequential_ns,
        copy_gb_s,
    })
}

impl Profile {
    /// Adds the run's figures to `o`: its time (`profile_ns`); the shares of it in
    /// messages, in waits, in the profiler's own clock reads (`profiler_share`) and
    /// computing (the rest: local work, local copies, load imbalance); the computing
    /// time over this rank's share of one core's time (`compute_stretch`: above 1,
    /// the ranks compute slower side by side than one core alone, this rank has more
    /// than its share, or the parallel code computes more); the bytes moved to or from
    /// other ranks; and the share a copy of those bytes at the copy bandwidth would
    /// take (`traffic_share`).
    pub(crate) fn push(self, o: &mut Outcome) {
        let (tally, elapsed) = (self.tally, self.elapsed_ns.max(1.0));
        let share = |ns: f64| ns / elapsed;
        let (m, w) = (share(tally.messages_ns), share(tally.waits_ns));
        let clock = share(tally.calls as f64 * outside_ns());
        let compute = (1.0 - m - w - clock).max(0.0);
        let fair = self.sequential_ns / o.ranks.max(1) as f64;
        for (key, v) in [
            ("profile_ns", elapsed),
            ("messages_share", m),
            ("waits_share", w),
            ("profiler_share", clock),
            ("compute_share", compute),
            ("compute_stretch", compute * elapsed / fair),
            ("bytes_moved", tally.bytes as f64),
            ("copy_gb_s", self.copy_gb_s),
            ("traffic_share", share(tally.bytes as f64 / self.copy_gb_s)),
        ] {
            o.figures.push(Figure::single(key, v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_counted_outside_a_profiled_run_and_nested_calls_count_once() {
        messages(10, || waits(|| ()));
        let ((), t) = profiled(|| {
            messages(10, || {
                waits(|| std::thread::sleep(std::time::Duration::from_millis(2)))
            })
        });
        assert_eq!(t.bytes, 10);
        assert_eq!(
            t.waits_ns, 0.0,
            "the wait inside the send counts as the send's"
        );
        assert!(t.messages_ns >= 2e6);
        let ((), again) = profiled(|| ());
        assert_eq!(again, Tally::default(), "a new run starts from nothing");
    }
}
