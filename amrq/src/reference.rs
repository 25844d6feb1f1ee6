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
