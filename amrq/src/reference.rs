//! Hardware references measured in the same run as amrq's figures (DESIGN.md,
//! "Conventions"): the raw cache-line round trip between two pinned ranks.
//!
//! The raw round trip ping-pongs a flag over 256 rotating pairs of cache lines in one
//! mapping, each side spinning tightly (no `pause`) — rotating, because which physical lines are used moves the figure by up to
//! 40 % (ANCHORS.md) — and reports a median over batches.

use crate::sync::{AtomicU64, Ordering};

/// Cache-line pairs the raw ping-pong rotates over.
pub const LINE_PAIRS: usize = 256;

#[repr(C, align(128))]
struct Line(AtomicU64);

/// The shared lines of a raw ping-pong: `LINE_PAIRS` pings and `LINE_PAIRS` pongs, each
/// on its own 128-byte line pair. `#[repr(C)]` and all zero at rest, so it can be placed
/// in memory shared by two processes (see [`RawPingPong::in_memory`]).
#[repr(C)]
pub struct RawPingPong {
    ping: [Line; LINE_PAIRS],
    pong: [Line; LINE_PAIRS],
}

/// Bytes a [`RawPingPong`] takes.
pub const RAW_PINGPONG_BYTES: usize = std::mem::size_of::<RawPingPong>();
const _: () = assert!(RAW_PINGPONG_BYTES == 2 * LINE_PAIRS * 128);

impl RawPingPong {
    /// Fresh lines on the heap (ranks as threads).
    pub fn new() -> Box<Self> {
        Box::new(Self {
            ping: std::array::from_fn(|_| Line(AtomicU64::new(0))),
            pong: std::array::from_fn(|_| Line(AtomicU64::new(0))),
        })
    }

    /// The lines at `p`, in memory both ranks map (ranks as processes).
    ///
    /// # Safety
    /// `p` is 128-byte aligned, valid for [`RAW_PINGPONG_BYTES`] bytes for `'a`, zeroed
    /// before either rank first uses it, and used for nothing else meanwhile.
    pub unsafe fn in_memory<'a>(p: std::ptr::NonNull<u8>) -> &'a Self {
        // SAFETY: the caller's guarantee; all-zero bytes are valid atomics.
        unsafe { &*p.as_ptr().cast::<Self>() }
    }

    /// The initiator's side: `iters` round trips; returns nanoseconds per round trip.
    /// The responder runs [`RawPingPong::respond`] with the same `iters` and `base`.
    /// `base` must grow by at least `iters` between calls on the same lines.
    pub fn initiate(&self, base: u64, iters: u64) -> f64 {
        let t = std::time::Instant::now();
        for i in base + 1..=base + iters {
            let k = i as usize % LINE_PAIRS;
            // ORDERING: Release/Acquire pair with `respond`'s loads and stores; a raw
            // ping-pong is what a message round trip costs at least.
            self.ping[k].0.store(i, Ordering::Release);
            // A tight spin, no `pause` (28 ns on the development VM): the limit.
            while self.pong[k].0.load(Ordering::Acquire) != i {}
        }
        t.elapsed().as_nanos() as f64 / iters as f64
    }

    /// The responder's side of [`RawPingPong::initiate`].
    pub fn respond(&self, base: u64, iters: u64) {
        for i in base + 1..=base + iters {
            let k = i as usize % LINE_PAIRS;
            // ORDERING: pairs with the Release store in `initiate`.
            while self.ping[k].0.load(Ordering::Acquire) != i {}
            // ORDERING: pairs with the Acquire load in `initiate`.
            self.pong[k].0.store(i, Ordering::Release);
        }
    }
}

/// Median of `v` (sorted in place); NaN-free input expected, 0.0 for an empty slice.
///
/// ```
/// assert_eq!(amrq::reference::median(&mut [3.0, 1.0, 2.0]), 2.0);
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
/// single-core copy that bulk transfers are measured against (DESIGN.md "Conventions":
/// same size, both buffers warm, same run).
///
/// ```
/// let (src, mut dst) = (vec![1u8; 4096], vec![0u8; 4096]);
/// assert!(amrq::reference::memcpy_ns(&src, &mut dst, 100) > 0.0);
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
/// let (c, b) = amrq::reference::fit_latency_bandwidth(&pts);
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
