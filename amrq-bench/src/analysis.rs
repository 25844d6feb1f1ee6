//! What the measurements are turned into: the LogP parameters from a signature (Culler
//! et al.; Begel et al. §6.1), and the least-squares line behind Table 5's `T = c + x / B`.

/// The LogP parameters, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LogP {
    /// Latency: the time a message spends between the processors.
    pub l: f64,
    /// Send overhead: the processor's time to issue one message.
    pub o_s: f64,
    /// Receive overhead: the processor's time to take one message in.
    pub o_r: f64,
    /// Gap: the least time between two messages of a long burst (the reciprocal of the
    /// sustained message rate).
    pub g: f64,
}

/// Derives LogP from a signature, as Culler et al. and Begel et al. (§6.1) do:
/// - `burst`: (burst length k, average ns per message) for bursts issued back to back
///   (Δ = 0). The time of a whole burst, `k · t(k)`, is a start cost (the clock read
///   once per burst, the first send's cold cache line) plus `o_s` per message while
///   the ring to the receiver has room, and `g` per message once it is full. `o_s` is
///   the least-squares slope of `k · t(k)` over the short bursts (`k ≤ short`), `g`
///   the slope over the long ones (`k ≥ long`): the start cost, whatever it is, falls
///   into the intercepts and is charged to neither.
/// - `rtt`: the round trip of one message and its reply, `2 (o_s + L + o_r)`.
/// - `o_r`: the receive overhead, measured on the receiving side (the time to poll in
///   and handle requests that have all arrived).
///
/// `L = rtt / 2 − o_s − o_r`. Returns `None` without two bursts in each range. A
/// negative figure is returned as measured: the model does not fit that machine (for
/// instance when the overheads overlap the transfer, the paper's AMVIA case), and the
/// report says so.
///
/// ```
/// use amrq_bench::analysis::derive_logp;
/// // 100 ns to start a burst, 30 ns per send while 8 fit, then 50 ns per message.
/// let burst: Vec<(usize, f64)> = [1usize, 2, 4, 8, 16, 32, 64]
///     .iter()
///     .map(|&k| (k, (100.0 + 30.0 * k.min(8) as f64 + 50.0 * k.saturating_sub(8) as f64) / k as f64))
///     .collect();
/// let p = derive_logp(&burst, 8, 16, 200.0, 20.0).unwrap();
/// assert!((p.o_s - 30.0).abs() < 1e-9 && (p.g - 50.0).abs() < 1e-9);
/// assert!((p.l - 50.0).abs() < 1e-9);
/// ```
pub fn derive_logp(
    burst: &[(usize, f64)],
    short: usize,
    long: usize,
    rtt: f64,
    o_r: f64,
) -> Option<LogP> {
    let total = |keep: &dyn Fn(usize) -> bool| -> Vec<(f64, f64)> {
        burst
            .iter()
            .filter(|&&(k, _)| keep(k))
            .map(|&(k, t)| (k as f64, k as f64 * t))
            .collect()
    };
    let slope = |pts: Vec<(f64, f64)>| {
        let distinct = pts.iter().any(|p| p.0 != pts.first().map_or(0.0, |f| f.0));
        (pts.len() >= 2 && distinct).then(|| least_squares(&pts).1)
    };
    let o_s = slope(total(&|k| k <= short))?;
    let g = slope(total(&|k| k >= long))?;
    Some(LogP {
        l: rtt / 2.0 - o_s - o_r,
        o_s,
        o_r,
        g,
    })
}

/// Ordinary least squares `y = a + b·x`: `(a, b)`; `(NaN, NaN)` with fewer than two
/// distinct x.
///
/// ```
/// let (a, b) = amrq_bench::analysis::least_squares(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]);
/// assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12);
/// ```
pub fn least_squares(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 || points.len() < 2 {
        return (f64::NAN, f64::NAN);
    }
    let b = sxy / sxx;
    (my - b * mx, b)
}

/// What getting one column of A costs, for the matrix multiply's model (the AM paper's
/// Figure 6, in LogP terms but for a column-sized message: the signature's o, g and L are
/// for one word), in nanoseconds, measured in the same run and on the same path as the
/// multiply.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColumnGet {
    /// The latency: a blocking get of one column (`2 (o_s + L + o_r)` plus the
    /// column's transfer), while the owner does the same, as in the multiply.
    pub latency: f64,
    /// The gap: time per column of gets issued back to back, one way (the link's
    /// capacity for columns).
    pub gap: f64,
    /// The processor's time per column when both ranks get from each other back to
    /// back: issuing, serving the peer's get and taking in the reply (the `o`s and the
    /// copies a rank cannot overlap with its computation).
    pub overhead: f64,
}

/// The model's prediction for one m.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatmulPrediction {
    /// Flop rate with split-phase gets over the rate of the kernel alone.
    pub efficiency: f64,
    /// The same with a blocking read per column.
    pub blocking_efficiency: f64,
    /// The fraction of the link's capacity (one column per `gap`) in use.
    pub network_use: f64,
}

/// The matrix multiply's model (AM paper §2.3, Figure 6): per column of A a rank
/// computes for `compute` ns (m DAXPYs of N), and the split-phase loop overlaps the
/// next column's get with that computation. A fraction `remote` of the columns
/// ((P − 1)/P: the others are the rank's own) are got from a peer; an own column costs
/// only its computation (its copy, tens of ns, is left out). For a remote column, on
/// the message path (`polls`: how often per column the owner polls, its `sync`
/// included) an iteration takes the longer of
/// - the processor's work, `compute + overhead` (the communication the processor does
///   itself cannot overlap), and
/// - the get's latency plus the wait for the owner's next poll, at worst the
///   computation between two of its polls: `latency + compute / polls`.
///
/// On the direct path (`polls` = `None`) the requester copies the column itself, so
/// nothing overlaps: `compute + latency`, as blocking. The blocking loop takes
/// `compute + latency`. Efficiency is `compute` over the average iteration; network
/// use is the gaps of the remote columns over it.
///
/// ```
/// use amrq_bench::analysis::{matmul_model, ColumnGet};
/// let get = ColumnGet { latency: 1000.0, gap: 300.0, overhead: 200.0 };
/// // Little computation, every column remote: the latency shows (1000 + 100).
/// let small = matmul_model(&get, 100.0, Some(1), 1.0);
/// assert!((small.efficiency - 100.0 / 1100.0).abs() < 1e-12);
/// // Much: computation-bound, only the overhead shows.
/// let large = matmul_model(&get, 8000.0, Some(2), 1.0);
/// assert!((large.efficiency - 8000.0 / 8200.0).abs() < 1e-12);
/// assert!((large.blocking_efficiency - 8000.0 / 9000.0).abs() < 1e-12);
/// assert!((large.network_use - 300.0 / 8200.0).abs() < 1e-12);
/// // The direct path overlaps nothing.
/// assert_eq!(matmul_model(&get, 8000.0, None, 1.0).efficiency, large.blocking_efficiency);
/// // Two ranks: half the columns are local.
/// let half = matmul_model(&get, 100.0, Some(1), 0.5);
/// assert!((half.efficiency - 100.0 / 600.0).abs() < 1e-12);
/// ```
pub fn matmul_model(
    get: &ColumnGet,
    compute: f64,
    polls: Option<usize>,
    remote: f64,
) -> MatmulPrediction {
    let blocking = compute + get.latency;
    let split = match polls {
        Some(n) => (compute + get.overhead).max(get.latency + compute / n.max(1) as f64),
        None => blocking,
    };
    let average = |remote_ns: f64| remote * remote_ns + (1.0 - remote) * compute;
    MatmulPrediction {
        efficiency: compute / average(split),
        blocking_efficiency: compute / average(blocking),
        network_use: remote * get.gap / average(split),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic machines with known parameters, from overhead-bound to
    /// latency-bound: a burst of k messages issued back to back costs a start cost
    /// `c`, then `o_s` per message while `q` fit in the ring, then `g` per message;
    /// the round trip is `2 (o_s + L + o_r)`. Each burst time carries ±2 % of
    /// alternating noise, as a measured one would.
    #[test]
    fn the_parameters_of_synthetic_machines_come_back() {
        // (L, o_s, o_r, g, c, q)
        let machines = [
            (120.0, 25.0, 35.0, 60.0, 100.0, 256usize), // this machine's shape
            (5.0, 400.0, 300.0, 450.0, 2_000.0, 64),    // overheads dwarf the latency
            (5_000.0, 10.0, 15.0, 20.0, 50.0, 256),     // latency dwarfs the overheads
            (50.0, 40.0, 20.0, 40.0, 0.0, 128),         // the sender is the bottleneck
            (1.0, 30.0, 30.0, 300.0, 500.0, 32),        // a slow wire: g ≫ o
        ];
        for (l, o_s, o_r, g, c, q) in machines {
            let burst: Vec<(usize, f64)> = (0..13)
                .map(|i| {
                    let k = 1usize << i;
                    let fast = k.min(q) as f64;
                    let slow = k.saturating_sub(q) as f64;
                    let noise = if i % 2 == 0 { 1.02 } else { 0.98 };
                    (k, noise * (c + fast * o_s + slow * g) / k as f64)
                })
                .collect();
            let rtt = 2.0 * (o_s + l + o_r);
            let p = derive_logp(&burst, 16, 2 * q, rtt, o_r).unwrap();
            let near = |got: f64, want: f64, tol: f64| (got - want).abs() <= tol;
            // The noise on the start cost and on the shortest bursts moves o_s by a
            // few ns at most; g is read over thousands of messages.
            let tol_o = 0.1 * o_s + 0.05 * c / 16.0;
            assert!(
                near(p.o_s, o_s, tol_o),
                "o_s {} want {o_s} ({l}, {c})",
                p.o_s
            );
            assert!(near(p.g, g, 0.05 * g), "g {} want {g}", p.g);
            assert!(near(p.l, l, tol_o), "L {} want {l}", p.l);
            assert_eq!(p.o_r, o_r);
            assert!(p.o_s > 0.0 && p.g > 0.0);
        }
    }

    /// With too few bursts in a range there is no slope to read.
    #[test]
    fn a_signature_without_two_bursts_per_range_gives_nothing() {
        let burst = [(1, 30.0), (2, 30.0), (1024, 50.0)];
        assert_eq!(derive_logp(&burst, 16, 512, 200.0, 20.0), None);
        assert!(derive_logp(
            &[(1, 3.0), (2, 3.0), (512, 5.0), (1024, 5.0)],
            16,
            512,
            100.0,
            1.0
        )
        .is_some());
    }

    /// Table 5's fit on a synthetic transfer `T = 1500 + x / 12.5` (12.5 B/ns =
    /// 12 500 MB/s) sampled at the suite's sizes, with ±1 % alternating noise.
    #[test]
    fn the_table_5_fit_recovers_start_up_and_bandwidth() {
        let pts: Vec<crate::report::Point> = crate::array::sizes(false, true)
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let t = 1500.0 + x as f64 / 12.5;
                let noise = if i % 2 == 0 { 1.01 } else { 0.99 };
                crate::report::Point::of(x as f64, &mut [t * noise])
            })
            .collect();
        let (c, mb_s) = crate::array::fit_row(&pts);
        assert!((mb_s - 12_500.0).abs() / 12_500.0 < 0.02, "B = {mb_s}");
        assert!((c - 1500.0).abs() < 200.0, "c = {c}");
        let exact: Vec<(f64, f64)> = pts.iter().map(|p| (p.x, 1500.0 + p.x / 12.5)).collect();
        let (c, b) = least_squares(&exact);
        assert!((c - 1500.0).abs() < 1e-6 && (b - 0.08).abs() < 1e-12);
    }

    #[test]
    fn a_flat_series_has_no_bandwidth() {
        let pts: Vec<crate::report::Point> = [2.0, 64.0, 4096.0]
            .iter()
            .map(|&x| crate::report::Point::of(x, &mut [100.0]))
            .collect();
        assert!(crate::array::fit_row(&pts).1.is_nan());
        assert!(least_squares(&[(1.0, 2.0)]).0.is_nan());
    }

    #[test]
    fn no_points_no_parameters() {
        assert_eq!(derive_logp(&[], 16, 512, 100.0, 10.0), None);
    }

    #[test]
    fn the_bandwidth_fit_recovers_a_known_line_under_noise_free_data() {
        let pts: Vec<(f64, f64)> = (0..12)
            .map(|i| {
                let x = 8.0 * 4f64.powi(i);
                (x, 1500.0 + x / 12.5)
            })
            .collect();
        let (c, b) = crate::reference::fit_latency_bandwidth(&pts);
        assert!(
            (c - 1500.0).abs() < 1e-6 && (b - 12.5).abs() < 1e-9,
            "{c} {b}"
        );
    }
}
