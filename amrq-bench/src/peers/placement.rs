//! Where the VM has put the two cores, probed around each pair of measurements.
//!
//! This machine kind moves its vCPUs: the raw cache-line round trip between the two
//! cores sits near ~50, ~150 or ~600 ns for seconds to minutes at a time, and a
//! figure measured at one placement is not comparable with one measured at another.
//! The raw round trip is probed (two threads of this process, pinned to the cores
//! ranks 0 and 1 use, a few milliseconds) before amrq's measurement and after the
//! peer's. A pair whose probes differ by more than [`STRADDLE`]× straddled a change and
//! gives no ratio; the others are grouped by placement ([`classes`]).

use crate::reference::{median, RawPingPong};
use amrq::util::affinity::{allowed_cores, pin_to_core};

/// Probes further apart than this factor: the placement changed in between.
pub const STRADDLE: f64 = 1.5;

/// The raw cache-line round trip between the first two cores this process may use,
/// ns (median of 5 batches of 400: under a millisecond, and a few seconds at worst
/// where the two threads get one core between them); NaN with fewer than two cores.
pub fn raw_round_trip_ns() -> f64 {
    let cores = allowed_cores();
    let [a, b, ..] = cores[..] else {
        return f64::NAN;
    };
    const BATCHES: u64 = 5;
    const ITERS: u64 = 400;
    let lines = RawPingPong::new();
    let lines = &*lines;
    std::thread::scope(|s| {
        s.spawn(move || {
            let _ = pin_to_core(b);
            for i in 0..BATCHES {
                lines.respond(i * ITERS, ITERS);
            }
        });
        let initiator = s.spawn(move || {
            let _ = pin_to_core(a);
            let mut v: Vec<f64> = (0..BATCHES)
                .map(|i| lines.initiate(i * ITERS, ITERS))
                .collect();
            median(&mut v)
        });
        initiator.join().unwrap_or(f64::NAN)
    })
}

/// Whether two probes say the placement changed between them (unknown: no).
///
/// ```
/// use amrq_bench::peers::placement::straddled;
/// assert!(!straddled(150.0, 160.0));
/// assert!(straddled(150.0, 560.0) && straddled(560.0, 150.0));
/// assert!(!straddled(f64::NAN, 150.0));
/// ```
pub fn straddled(before: f64, after: f64) -> bool {
    let (lo, hi) = (before.min(after), before.max(after));
    lo > 0.0 && hi / lo > STRADDLE
}

/// The placements among `probes`: probes sorted and split where one is more than
/// [`STRADDLE`]× the one before; each class as (smallest, largest) probe.
///
/// ```
/// use amrq_bench::peers::placement::classes;
/// let c = classes(&[150.0, 560.0, 148.0, 610.0, 152.0, 49.0]);
/// assert_eq!(c, [(49.0, 49.0), (148.0, 152.0), (560.0, 610.0)]);
/// ```
pub fn classes(probes: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = probes.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let mut out: Vec<(f64, f64)> = Vec::new();
    for x in v {
        match out.last_mut() {
            Some(c) if x <= c.1 * STRADDLE => c.1 = x,
            _ => out.push((x, x)),
        }
    }
    out
}
