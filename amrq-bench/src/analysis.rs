//! What the measurements are turned into: the LogP parameters from a signature (Culler
//! et al.; Begel et al. §6.1), and the least-squares line behind Table 5's `T = c + x / B`.

/// The LogP parameters, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// Derives LogP from a signature:
/// - `burst`: (burst length k, average ns per message) for bursts issued back to back
///   (Δ = 0). A short burst costs only its sends: `o_s` is the time per message of the
///   shortest one; a long burst settles at the gap: `g` is the median over the longest
///   third of the lengths.
/// - `rtt`: the round trip of one message and its reply, `2 (o_s + L + o_r)`.
/// - `o_r`: the receive overhead, measured directly (the time to poll in and handle a
///   reply that has already arrived).
///
/// Returns `None` without burst points. `L = rtt / 2 − o_s − o_r`, which can come out
/// negative when the overheads overlap the transfer (the paper's AMVIA case): it is
/// reported as measured.
///
/// ```
/// use amrq_bench::analysis::derive_logp;
/// let burst = [(1, 30.0), (4, 30.0), (16, 40.0), (64, 50.0), (256, 50.0), (1024, 50.0)];
/// let p = derive_logp(&burst, 200.0, 20.0).unwrap();
/// assert_eq!((p.o_s, p.g, p.o_r, p.l), (30.0, 50.0, 20.0, 50.0));
/// ```
pub fn derive_logp(burst: &[(usize, f64)], rtt: f64, o_r: f64) -> Option<LogP> {
    let mut pts = burst.to_vec();
    pts.sort_by_key(|&(k, _)| k);
    let o_s = pts.first()?.1;
    let tail = pts.len() - pts.len().div_ceil(3);
    let mut g: Vec<f64> = pts[tail..].iter().map(|&(_, t)| t).collect();
    let g = amrq::reference::median(&mut g);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic machine with known parameters: a burst of k messages issued back to
    /// back costs `o_s` per message until the queue fills (after `q` messages), then
    /// `g` per message; per message over the whole burst that is
    /// `(min(k, q)·o_s + max(k − q, 0)·g) / k`.
    #[test]
    fn the_parameters_of_a_synthetic_machine_come_back() {
        let (l, o_s, o_r, g, q) = (120.0, 25.0, 35.0, 60.0, 8usize);
        let burst: Vec<(usize, f64)> = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
            .iter()
            .map(|&k| {
                let fast = k.min(q) as f64;
                let slow = k.saturating_sub(q) as f64;
                (k, (fast * o_s + slow * g) / k as f64)
            })
            .collect();
        let rtt = 2.0 * (o_s + l + o_r);
        let p = derive_logp(&burst, rtt, o_r).unwrap();
        assert_eq!(p.o_s, o_s);
        assert!((p.g - g).abs() / g < 0.02, "g = {} (want {g})", p.g);
        assert!((p.l - l).abs() < 1e-9);
        assert_eq!(p.o_r, o_r);
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
        assert_eq!(derive_logp(&[], 100.0, 10.0), None);
    }

    #[test]
    fn the_bandwidth_fit_recovers_a_known_line_under_noise_free_data() {
        let pts: Vec<(f64, f64)> = (0..12)
            .map(|i| {
                let x = 8.0 * 4f64.powi(i);
                (x, 1500.0 + x / 12.5)
            })
            .collect();
        let (c, b) = amrq::reference::fit_latency_bandwidth(&pts);
        assert!(
            (c - 1500.0).abs() < 1e-6 && (b - 12.5).abs() < 1e-9,
            "{c} {b}"
        );
    }
}
