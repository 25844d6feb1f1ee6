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
/// on its own 128-byte line pair.
pub struct RawPingPong {
    ping: Box<[Line]>,
    pong: Box<[Line]>,
}

impl Default for RawPingPong {
    fn default() -> Self {
        Self::new()
    }
}

impl RawPingPong {
    /// Fresh lines.
    pub fn new() -> Self {
        let lines = || (0..LINE_PAIRS).map(|_| Line(AtomicU64::new(0))).collect();
        Self {
            ping: lines(),
            pong: lines(),
        }
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
