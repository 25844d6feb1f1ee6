//! The raw exchange: both ranks write a word and wait for the other's at the same time,
//! with no amrq code between: the floor of a 2-rank barrier, whose one round sends a
//! message each way at once (so it may take less than a round trip).

use super::round_trip::{Line, LINE_PAIRS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Each side's lines: one pair used by every exchange, then 256 rotating pairs.
#[repr(C)]
pub struct RawExchange {
    hot: [Line; 2],
    rotating: [[Line; LINE_PAIRS]; 2],
}

/// Bytes a [`RawExchange`] takes.
///
/// ```
/// assert_eq!(amrq_bench::reference::RAW_EXCHANGE_BYTES, 2 * 128 + 2 * 256 * 128);
/// ```
pub const RAW_EXCHANGE_BYTES: usize = std::mem::size_of::<RawExchange>();

impl RawExchange {
    /// Fresh memory on the heap (ranks as threads).
    ///
    /// ```
    /// let x = amrq_bench::reference::RawExchange::new();
    /// let [a, b] = std::thread::scope(|s| {
    ///     let other = s.spawn(|| x.exchange(1, 0, 1000));
    ///     [x.exchange(0, 0, 1000), other.join().unwrap()]
    /// });
    /// assert!(a[0] > 0.0 && b[1] > 0.0);
    /// ```
    pub fn new() -> Box<Self> {
        let line = || Line(AtomicU64::new(0));
        Box::new(Self {
            hot: [line(), line()],
            rotating: std::array::from_fn(|_| std::array::from_fn(|_| line())),
        })
    }

    /// The memory at `p`, which both ranks map (ranks as processes).
    ///
    /// # Safety
    /// `p` is 128-byte aligned, valid for [`RAW_EXCHANGE_BYTES`] bytes for `'a`, zeroed
    /// before either rank first uses it, and used for nothing else meanwhile.
    pub unsafe fn in_memory<'a>(p: std::ptr::NonNull<u8>) -> &'a Self {
        // SAFETY: the caller's guarantee; all-zero bytes are valid atomics.
        unsafe { &*p.as_ptr().cast::<Self>() }
    }

    /// Side `me` (0 or 1) of `iters` exchanges on the hot pair, then `iters` on the
    /// rotating pairs, each side spinning with `pause`: ns per exchange of each. The
    /// other side calls it with the same `base`, which grows by at least `iters`
    /// between calls on the same memory.
    pub fn exchange(&self, me: usize, base: u64, iters: u64) -> [f64; 2] {
        let hot = timed(base, iters, |i| {
            swap(&self.hot[me].0, &self.hot[1 - me].0, i)
        });
        let rotating = timed(base, iters, |i| {
            let k = i as usize % LINE_PAIRS;
            swap(&self.rotating[me][k].0, &self.rotating[1 - me][k].0, i)
        });
        [hot, rotating]
    }
}

/// ns per call of `f(i)` for i in `base + 1 ..= base + iters`.
#[inline(always)]
fn timed(base: u64, iters: u64, f: impl Fn(u64)) -> f64 {
    let t = Instant::now();
    for i in base + 1..=base + iters {
        f(i);
    }
    t.elapsed().as_nanos() as f64 / iters.max(1) as f64
}

/// Writes `i` to this side's word and waits for the other side's to reach it.
#[inline(always)]
fn swap(mine: &AtomicU64, theirs: &AtomicU64, i: u64) {
    // ORDERING: Release pairs with the other side's Acquire wait for `i`.
    mine.store(i, Ordering::Release);
    // At least `i`: the other side, having seen this side's `i`, may have written
    // `i + 1` before this side looks.
    // ORDERING: Acquire pairs with the other side's Release store.
    while theirs.load(Ordering::Acquire) < i {
        std::hint::spin_loop();
    }
}
