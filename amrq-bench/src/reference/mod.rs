//! Hardware references measured in the same run as amrq's figures (a VM's CPUs move, so
//! only ratios of one run compare). No amrq code runs in any of them.
//!
//! - [`RawPingPong`]: the raw cache-line round trip between two pinned ranks, in
//!   several designs ([`Design`]); the fastest in a run is the floor ([`Floor`]).
//! - [`RawStream`]: 64-byte slots streamed one way through an SPSC ring of 1024 slots,
//!   the consumer freeing them 256 at a time; plain, or with the producer prefetching its
//!   slots (`send_prefetched`), the faster of the two being the stream's floor.
//! - [`RawExchange`]: both ranks write a line and wait for the other's at once (what a
//!   2-rank barrier does), on one line pair or rotating pairs; the faster is the floor.
//! - [`memcpy_ns`]: a single-core copy of the same size; [`fit_latency_bandwidth`] the
//!   fit `T = c + x / B`.

mod exchange;
mod round_trip;
mod stream;

pub use exchange::{RawExchange, RAW_EXCHANGE_BYTES};
pub use round_trip::{
    Design, Floor, RawPingPong, LINE_PAIRS, RAW_PINGPONG_BYTES, RING_SLOTS, SPACING,
};
pub use stream::{RawStream, RAW_STREAM_BYTES, STREAM_PUBLISH_EVERY, STREAM_SLOTS};

/// Hints that the 8 consecutive 64-byte lines from `p` on will be written soon
/// (`prefetchw`, as amrq's ring producer issues; the reference runs no amrq code).
#[inline(always)]
pub(crate) fn prefetch_write_8_lines(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` is a hint: it never faults, reads no register but `p`, writes
    // no memory and leaves flags alone; CPUs without PRFCHW decode it as a no-op.
    unsafe {
        std::arch::asm!(
            "prefetchw [{0}]",
            "prefetchw [{0} + 64]",
            "prefetchw [{0} + 128]",
            "prefetchw [{0} + 192]",
            "prefetchw [{0} + 256]",
            "prefetchw [{0} + 320]",
            "prefetchw [{0} + 384]",
            "prefetchw [{0} + 448]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Median of `v` (sorted in place); NaN-free input expected, 0.0 for an empty slice.
///
/// ```
/// assert_eq!(amrq_bench::reference::median(&mut [3.0, 1.0, 2.0]), 2.0);
/// ```
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Nanoseconds per `memcpy` of `src` into `dst` (same length), over `reps` copies: the
/// single-core copy that bulk transfers are measured against (same size, both buffers
/// warm, same run).
///
/// ```
/// let (src, mut dst) = (vec![1u8; 4096], vec![0u8; 4096]);
/// assert!(amrq_bench::reference::memcpy_ns(&src, &mut dst, 100) > 0.0);
/// assert_eq!(dst, src);
/// ```
pub fn memcpy_ns(src: &[u8], dst: &mut [u8], reps: u64) -> f64 {
    let t = std::time::Instant::now();
    for _ in 0..reps {
        dst.copy_from_slice(std::hint::black_box(src));
        std::hint::black_box(&mut *dst);
    }
    t.elapsed().as_nanos() as f64 / reps.max(1) as f64
}

/// The least-squares fit of `T = c + x / B` to points `(x bytes, T ns)`: returns
/// `(c ns, B bytes/ns)` (B is infinite when T does not grow with x). The fit of Liu &
/// Culler's Table 5, weighted by `1 / T²` (relative errors), so that sizes spanning six
/// orders of magnitude all count and `c` stays the small-message time.
///
/// ```
/// let pts: Vec<(f64, f64)> = [8.0, 1024.0, 65536.0].iter().map(|&x| (x, 50.0 + x / 4.0)).collect();
/// let (c, b) = amrq_bench::reference::fit_latency_bandwidth(&pts);
/// assert!((c - 50.0).abs() < 1e-6 && (b - 4.0).abs() < 1e-9);
/// ```
pub fn fit_latency_bandwidth(points: &[(f64, f64)]) -> (f64, f64) {
    let w = |y: f64| if y > 0.0 { 1.0 / (y * y) } else { 1.0 };
    let sw: f64 = points.iter().map(|&(_, y)| w(y)).sum();
    if points.is_empty() || sw == 0.0 {
        return (0.0, f64::INFINITY);
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + w(y) * x, b + w(y) * y));
    let (mx, my) = (sx / sw, sy / sw);
    let (sxx, sxy) = points.iter().fold((0.0, 0.0), |(a, b), &(x, y)| {
        (
            a + w(y) * (x - mx) * (x - mx),
            b + w(y) * (x - mx) * (y - my),
        )
    });
    if sxx == 0.0 {
        return (my, f64::INFINITY);
    }
    let slope = sxy / sxx;
    let c = my - slope * mx;
    (
        c,
        if slope > 0.0 {
            1.0 / slope
        } else {
            f64::INFINITY
        },
    )
}
