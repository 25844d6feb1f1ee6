//! Hardware references measured in the same run as amrq's figures (a VM's CPUs move, so
//! only ratios of one run compare): the raw cache-line round trip and the raw one-way stream between two
//! pinned ranks. No amrq code runs in either.
//!
//! - [`RawPingPong`] ping-pongs a flag over 256 rotating pairs of cache lines in one
//!   mapping, each side spinning tightly (no `pause`) — rotating, because which physical
//!   lines are used moves the figure by up to 40 %.
//! - [`RawStream`] streams 64-byte slots one way through a plain SPSC ring of 1024
//!   slots, the consumer freeing them 256 at a time.

use std::sync::atomic::{AtomicU64, Ordering};

/// Cache-line pairs the raw ping-pong rotates over.
///
/// ```
/// assert_eq!(amrq_bench::reference::RAW_PINGPONG_BYTES, 2 * amrq_bench::reference::LINE_PAIRS * 128);
/// ```
pub const LINE_PAIRS: usize = 256;

#[repr(C, align(128))]
struct Line(AtomicU64);

/// The shared lines of a raw ping-pong: `LINE_PAIRS` pings and `LINE_PAIRS` pongs, each
/// on its own 128-byte line pair. `#[repr(C)]` and all zero at rest, so it can be placed
/// in memory shared by two processes (see [`RawPingPong::in_memory`]).
///
/// ```
/// use amrq_bench::reference::RawPingPong;
/// let lines = RawPingPong::new();
/// let ns = std::thread::scope(|s| {
///     s.spawn(|| lines.respond(0, 1000));
///     lines.initiate(0, 1000)
/// });
/// assert!(ns > 0.0); // the cost of a cache-line round trip between the two threads
/// ```
#[repr(C)]
pub struct RawPingPong {
    ping: [Line; LINE_PAIRS],
    pong: [Line; LINE_PAIRS],
}

/// Bytes a [`RawPingPong`] takes.
///
/// ```
/// // What to allocate (128-aligned) for RawPingPong::in_memory.
/// assert_eq!(amrq_bench::reference::RAW_PINGPONG_BYTES, 65536);
/// ```
pub const RAW_PINGPONG_BYTES: usize = std::mem::size_of::<RawPingPong>();
const _: () = assert!(RAW_PINGPONG_BYTES == 2 * LINE_PAIRS * 128);

impl RawPingPong {
    /// Fresh lines on the heap (ranks as threads).
    ///
    /// ```
    /// let lines = amrq_bench::reference::RawPingPong::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| lines.respond(0, 10));
    ///     lines.initiate(0, 10);
    /// });
    /// ```
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
    ///
    /// ```
    /// use amrq_bench::reference::{RawPingPong, RAW_PINGPONG_BYTES};
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", RAW_PINGPONG_BYTES as u64).unwrap();
    /// let m = f.map(RAW_PINGPONG_BYTES).unwrap(); // another process maps the same file
    /// // SAFETY: page aligned, RAW_PINGPONG_BYTES long, zeroed, used for nothing else.
    /// let lines = unsafe { RawPingPong::in_memory(m.base()) };
    /// std::thread::scope(|s| {
    ///     s.spawn(|| lines.respond(0, 100));
    ///     assert!(lines.initiate(0, 100) > 0.0);
    /// });
    /// ```
    pub unsafe fn in_memory<'a>(p: std::ptr::NonNull<u8>) -> &'a Self {
        // SAFETY: the caller's guarantee; all-zero bytes are valid atomics.
        unsafe { &*p.as_ptr().cast::<Self>() }
    }

    /// The initiator's side: `iters` round trips; returns nanoseconds per round trip.
    /// The responder runs [`RawPingPong::respond`] with the same `iters` and `base`.
    /// `base` must grow by at least `iters` between calls on the same lines.
    ///
    /// ```
    /// let lines = amrq_bench::reference::RawPingPong::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| { lines.respond(0, 500); lines.respond(500, 500); });
    ///     let first = lines.initiate(0, 500);
    ///     let second = lines.initiate(500, 500); // base grows by iters
    ///     assert!(first > 0.0 && second > 0.0);
    /// });
    /// ```
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
    ///
    /// ```
    /// let lines = amrq_bench::reference::RawPingPong::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| lines.initiate(0, 50));
    ///     lines.respond(0, 50); // returns after answering all 50
    /// });
    /// ```
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

/// Slots of the raw stream's ring.
///
/// ```
/// assert_eq!(amrq_bench::reference::STREAM_SLOTS, 1024); // the C reference's stream_spsc N1024
/// ```
pub const STREAM_SLOTS: usize = 1024;
/// Slots the raw stream's consumer takes between two publications of its head.
///
/// ```
/// assert_eq!(amrq_bench::reference::STREAM_SLOTS as u64 / amrq_bench::reference::STREAM_PUBLISH_EVERY, 4);
/// ```
pub const STREAM_PUBLISH_EVERY: u64 = 256;

/// One slot of the raw stream: a sequence word (position + 1 once written) and two
/// args, on a cache line of its own.
#[repr(C, align(64))]
struct StreamSlot {
    seq: AtomicU64,
    args: [AtomicU64; 2],
}

/// The shared memory of a raw one-way stream: the consumer's published head on its
/// own line pair, then [`STREAM_SLOTS`] one-line slots. `#[repr(C)]` and all zero at
/// rest, so it can be placed in memory shared by two processes
/// ([`RawStream::in_memory`]).
///
/// ```text
///  0        128       192       256                     128 + 64·1024
///  | head … | slot 0  | slot 1  | …                     |
///             seq args[0] args[1] (pad)
/// ```
///
/// The producer writes a slot's two args, then its sequence word (Release); it reads
/// the head only when its cached copy says the ring is full. The consumer spins on
/// each slot's sequence word (Acquire), reads and checks the two args, and publishes
/// its head every [`STREAM_PUBLISH_EVERY`] slots. No handler, no dispatch: the limit a
/// one-way message stream between the two cores can reach.
///
/// ```
/// use amrq_bench::reference::RawStream;
/// let ring = RawStream::new();
/// let rate = std::thread::scope(|s| {
///     s.spawn(|| assert_eq!(ring.receive(0, 10_000), 0)); // no message wrong
///     ring.send(0, 10_000)
/// });
/// println!("{:.0} M msgs/s", rate / 1e6);
/// ```
#[repr(C)]
pub struct RawStream {
    head: Line,
    slots: [StreamSlot; STREAM_SLOTS],
}

/// Bytes a [`RawStream`] takes.
///
/// ```
/// assert_eq!(amrq_bench::reference::RAW_STREAM_BYTES, 128 + 64 * 1024);
/// ```
pub const RAW_STREAM_BYTES: usize = std::mem::size_of::<RawStream>();
const _: () = {
    assert!(std::mem::size_of::<StreamSlot>() == 64);
    assert!(RAW_STREAM_BYTES == 128 + 64 * STREAM_SLOTS);
    assert!(std::mem::align_of::<RawStream>() == 128);
};

/// The second arg of message `i`: what the consumer checks it against.
#[inline(always)]
fn stream_mix(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5555
}

impl RawStream {
    /// A fresh ring on the heap (ranks as threads).
    ///
    /// ```
    /// use amrq_bench::reference::RawStream;
    /// let s = RawStream::new();
    /// std::thread::scope(|t| {
    ///     t.spawn(|| assert_eq!(s.receive(0, 5000), 0));
    ///     assert!(s.send(0, 5000) > 0.0);
    /// });
    /// ```
    pub fn new() -> Box<Self> {
        Box::new(Self {
            head: Line(AtomicU64::new(0)),
            slots: std::array::from_fn(|_| StreamSlot {
                seq: AtomicU64::new(0),
                args: [AtomicU64::new(0), AtomicU64::new(0)],
            }),
        })
    }

    /// The ring at `p`, in memory both ranks map (ranks as processes).
    ///
    /// # Safety
    /// `p` is 128-byte aligned, valid for [`RAW_STREAM_BYTES`] bytes for `'a`, zeroed
    /// before either rank first uses it, and used for nothing else meanwhile.
    ///
    /// ```
    /// use amrq_bench::reference::{RawStream, RAW_STREAM_BYTES};
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", RAW_STREAM_BYTES as u64).unwrap();
    /// let m = f.map(RAW_STREAM_BYTES).unwrap();
    /// // SAFETY: page aligned, RAW_STREAM_BYTES long, zeroed, used for nothing else.
    /// let ring = unsafe { RawStream::in_memory(m.base()) };
    /// std::thread::scope(|s| {
    ///     s.spawn(|| assert_eq!(ring.receive(0, 3000), 0));
    ///     ring.send(0, 3000);
    /// });
    /// ```
    pub unsafe fn in_memory<'a>(p: std::ptr::NonNull<u8>) -> &'a Self {
        // SAFETY: the caller's guarantee; all-zero bytes are valid atomics.
        unsafe { &*p.as_ptr().cast::<Self>() }
    }

    /// The producer's side: messages `base .. base + n`, then waits until the consumer
    /// has taken them all; returns messages per second. The consumer runs
    /// [`RawStream::receive`] with the same `base` and `n`; `base` continues where the
    /// last call on the same ring ended (0 on a fresh ring).
    ///
    /// ```
    /// let ring = amrq_bench::reference::RawStream::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| { ring.receive(0, 2000); ring.receive(2000, 2000); });
    ///     ring.send(0, 2000);
    ///     ring.send(2000, 2000); // continues where the last call ended
    /// });
    /// ```
    pub fn send(&self, base: u64, n: u64) -> f64 {
        let t = std::time::Instant::now();
        // ORDERING: Acquire pairs with the consumer's Release store of its head: its
        // reads of the slots it handed back happen before we overwrite them.
        let mut cached_head = self.head.0.load(Ordering::Acquire);
        for i in base..base + n {
            while i - cached_head >= STREAM_SLOTS as u64 {
                // ORDERING: as above.
                cached_head = self.head.0.load(Ordering::Acquire);
            }
            let s = &self.slots[i as usize % STREAM_SLOTS];
            s.args[0].store(i, Ordering::Relaxed);
            s.args[1].store(stream_mix(i), Ordering::Relaxed);
            // ORDERING: Release publishes the args above; pairs with the consumer's
            // Acquire load of the sequence word.
            s.seq.store(i + 1, Ordering::Release);
        }
        // ORDERING: Acquire pairs with the consumer's last Release store of its head.
        while self.head.0.load(Ordering::Acquire) != base + n {
            std::hint::spin_loop();
        }
        n as f64 / t.elapsed().as_secs_f64()
    }

    /// The consumer's side of [`RawStream::send`]: takes messages `base .. base + n`,
    /// checking each one's args; returns how many were wrong (0 unless the memory is
    /// shared wrongly).
    ///
    /// ```
    /// let ring = amrq_bench::reference::RawStream::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| ring.send(0, 100));
    ///     assert_eq!(ring.receive(0, 100), 0); // every message's args as sent
    /// });
    /// ```
    pub fn receive(&self, base: u64, n: u64) -> u64 {
        let mut bad = 0;
        for i in base..base + n {
            let s = &self.slots[i as usize % STREAM_SLOTS];
            // ORDERING: Acquire pairs with the producer's Release store of the sequence
            // word: the args written before it are visible.
            while s.seq.load(Ordering::Acquire) != i + 1 {}
            let (a, b) = (
                s.args[0].load(Ordering::Relaxed),
                s.args[1].load(Ordering::Relaxed),
            );
            bad += u64::from(a != i || b != stream_mix(i));
            if (i + 1) % STREAM_PUBLISH_EVERY == 0 {
                // ORDERING: Release orders our reads of the slots before the producer's
                // reuse; pairs with its Acquire loads of the head.
                self.head.0.store(i + 1, Ordering::Release);
            }
        }
        // ORDERING: as above; also tells the producer the batch is done.
        self.head.0.store(base + n, Ordering::Release);
        bad
    }
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
