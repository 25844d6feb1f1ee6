//! The raw cache-line round trip: rank 0 writes a word, rank 1 waits for it and writes
//! one back, with no amrq code between. How fast that is depends on the lines used and
//! on how each side waits, so several designs ([`Design`]) run in the same batches and
//! the fastest is the floor ([`Floor`]) amrq's round trip is read against.

use super::prefetch_write_8_lines;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Cache-line pairs the rotating designs go round.
///
/// ```
/// assert_eq!(amrq_bench::reference::LINE_PAIRS, 256);
/// ```
pub const LINE_PAIRS: usize = 256;

/// Slots of each of the ring design's two rings (as amrq's default rings).
///
/// ```
/// assert_eq!(amrq_bench::reference::RING_SLOTS, 256);
/// ```
pub const RING_SLOTS: usize = 256;

/// Slots the ring design prefetches at once, and how far ahead: amrq's ring producer's
/// group of 8 one-line slots, a sixteenth of the ring ahead.
const PREFETCH_GROUP: usize = 8;
const PREFETCH_AHEAD: usize = RING_SLOTS / 16;

/// A word on a 128-byte line pair of its own (the adjacent-line prefetcher moves lines
/// in pairs).
#[repr(C, align(128))]
pub(super) struct Line(pub(super) AtomicU64);

/// One 64-byte ring slot: its sequence word first, as in amrq's slots.
#[repr(C, align(64))]
struct Slot {
    seq: AtomicU64,
    _rest: [u64; 7],
}

/// A ping line and a pong line per round trip, round trip `i` on pair `i % LINE_PAIRS`.
#[repr(C)]
struct Rotating {
    ping: [Line; LINE_PAIRS],
    pong: [Line; LINE_PAIRS],
}

/// How a raw round trip is made. Each design has memory of its own.
///
/// ```
/// use amrq_bench::reference::Design;
/// assert_eq!(Design::ALL.len(), 6);
/// assert_eq!(Design::PrefetchedRing.key(), "ring");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Design {
    /// 256 rotating line pairs, each side spinning tightly: each round trip's lines were
    /// last touched 256 round trips before.
    Rotating,
    /// The rotating lines, with a `pause` in each spin.
    RotatingPause,
    /// The rotating lines, with a short busy delay between looks instead of `pause`
    /// ([`SPACING`] dependent additions): fewer looks than a tight spin, each noticed
    /// sooner than after a `pause`, as a poll loop that reads other lines between its
    /// looks behaves.
    RotatingSpaced,
    /// One line pair used by every round trip, tight spins.
    Hot,
    /// The one pair, with a `pause` in each spin.
    HotPause,
    /// Two rings of 64-byte slots (ping and pong), each side writing its next slot's
    /// sequence word and prefetching its slots for writing a group ahead, as amrq's ring
    /// producer does, and waiting with `pause`.
    PrefetchedRing,
}

impl Design {
    /// Every design, in the order [`RawPingPong::initiate_all`] runs them.
    pub const ALL: [Design; 6] = [
        Design::Rotating,
        Design::RotatingPause,
        Design::RotatingSpaced,
        Design::Hot,
        Design::HotPause,
        Design::PrefetchedRing,
    ];

    /// A short name for figure keys (`raw_{key}_ns`).
    ///
    /// ```
    /// assert_eq!(amrq_bench::reference::Design::HotPause.key(), "hot_pause");
    /// ```
    pub fn key(self) -> &'static str {
        match self {
            Design::Rotating => "rotating",
            Design::RotatingPause => "rotating_pause",
            Design::RotatingSpaced => "rotating_spaced",
            Design::Hot => "hot",
            Design::HotPause => "hot_pause",
            Design::PrefetchedRing => "ring",
        }
    }

    /// What it is, for a report.
    ///
    /// ```
    /// assert!(amrq_bench::reference::Design::Hot.describe().contains("one line pair"));
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            Design::Rotating => "256 rotating line pairs, tight spins",
            Design::RotatingPause => "256 rotating line pairs, spins with pause",
            Design::RotatingSpaced => "256 rotating line pairs, a short busy delay between looks",
            Design::Hot => "one line pair, tight spins",
            Design::HotPause => "one line pair, spins with pause",
            Design::PrefetchedRing => {
                "two rings of 64-byte slots, written slots prefetched ahead, spins with pause"
            }
        }
    }
}

/// The shared memory of the raw round trips, every design's. `#[repr(C)]` and all zero
/// at rest, so it can be placed in memory shared by two processes
/// ([`RawPingPong::in_memory`]).
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
    rotating: Rotating,
    rotating_pause: Rotating,
    rotating_spaced: Rotating,
    hot: [Line; 2],
    hot_pause: [Line; 2],
    ring: [[Slot; RING_SLOTS]; 2],
}

/// Bytes a [`RawPingPong`] takes.
///
/// ```
/// // What to allocate (128-aligned) for RawPingPong::in_memory.
/// assert_eq!(amrq_bench::reference::RAW_PINGPONG_BYTES, 3 * 65536 + 512 + 32768);
/// ```
pub const RAW_PINGPONG_BYTES: usize = std::mem::size_of::<RawPingPong>();
const _: () =
    assert!(RAW_PINGPONG_BYTES == 3 * (2 * LINE_PAIRS * 128) + 4 * 128 + 2 * 64 * RING_SLOTS);

/// Dependent additions between two looks of [`Design::RotatingSpaced`].
///
/// ```
/// assert_eq!(amrq_bench::reference::SPACING, 16);
/// ```
pub const SPACING: u64 = 16;

/// What a waiter does between two looks at the word it waits on.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Spin {
    Tight,
    Pause,
    Spaced,
}

/// Waits until `w` holds `i`, doing `spin` between looks.
#[inline(always)]
pub(super) fn wait_for(w: &AtomicU64, i: u64, spin: Spin) {
    // ORDERING: Acquire pairs with the other side's Release store of `i`.
    while w.load(Ordering::Acquire) != i {
        match spin {
            Spin::Tight => {}
            Spin::Pause => std::hint::spin_loop(),
            Spin::Spaced => {
                let mut x = 0u64;
                for k in 0..SPACING {
                    x = std::hint::black_box(x + k);
                }
            }
        }
    }
}

impl RawPingPong {
    /// Fresh memory on the heap (ranks as threads).
    ///
    /// ```
    /// let lines = amrq_bench::reference::RawPingPong::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| lines.respond(0, 10));
    ///     lines.initiate(0, 10);
    /// });
    /// ```
    pub fn new() -> Box<Self> {
        let line = || Line(AtomicU64::new(0));
        let rotating = || Rotating {
            ping: std::array::from_fn(|_| line()),
            pong: std::array::from_fn(|_| line()),
        };
        let ring = || {
            std::array::from_fn(|_| Slot {
                seq: AtomicU64::new(0),
                _rest: [0; 7],
            })
        };
        Box::new(Self {
            rotating: rotating(),
            rotating_pause: rotating(),
            rotating_spaced: rotating(),
            hot: [line(), line()],
            hot_pause: [line(), line()],
            ring: [ring(), ring()],
        })
    }

    /// The memory at `p`, which both ranks map (ranks as processes).
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
        // SAFETY: the caller's guarantee; all-zero bytes are valid atomics and words.
        unsafe { &*p.as_ptr().cast::<Self>() }
    }

    /// [`Design::Rotating`]'s initiator: `iters` round trips; ns per round trip. The
    /// responder runs [`RawPingPong::respond`] with the same `iters` and `base`, which
    /// grows by at least `iters` between calls on the same memory.
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
        self.initiate_as(Design::Rotating, base, iters)
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
        self.respond_as(Design::Rotating, base, iters)
    }

    /// Every design in turn ([`Design::ALL`]'s order), `iters` round trips each; ns per
    /// round trip of each. The responder runs [`RawPingPong::respond_all`].
    ///
    /// ```
    /// let lines = amrq_bench::reference::RawPingPong::new();
    /// let ns = std::thread::scope(|s| {
    ///     s.spawn(|| lines.respond_all(0, 200));
    ///     lines.initiate_all(0, 200)
    /// });
    /// assert!(ns.iter().all(|&t| t > 0.0));
    /// ```
    pub fn initiate_all(&self, base: u64, iters: u64) -> [f64; 6] {
        Design::ALL.map(|d| self.initiate_as(d, base, iters))
    }

    /// The responder's side of [`RawPingPong::initiate_all`].
    ///
    /// ```
    /// let lines = amrq_bench::reference::RawPingPong::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| lines.initiate_all(0, 20));
    ///     lines.respond_all(0, 20);
    /// });
    /// ```
    pub fn respond_all(&self, base: u64, iters: u64) {
        for d in Design::ALL {
            self.respond_as(d, base, iters);
        }
    }

    /// One design's initiator (see [`RawPingPong::initiate`]).
    ///
    /// ```
    /// use amrq_bench::reference::{Design, RawPingPong};
    /// let lines = RawPingPong::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| lines.respond_as(Design::PrefetchedRing, 0, 1000));
    ///     assert!(lines.initiate_as(Design::PrefetchedRing, 0, 1000) > 0.0);
    /// });
    /// ```
    pub fn initiate_as(&self, d: Design, base: u64, iters: u64) -> f64 {
        let t = Instant::now();
        let range = base + 1..=base + iters;
        match d {
            Design::Rotating => Self::rotate_initiate(&self.rotating, range, Spin::Tight),
            Design::RotatingPause => {
                Self::rotate_initiate(&self.rotating_pause, range, Spin::Pause)
            }
            Design::RotatingSpaced => {
                Self::rotate_initiate(&self.rotating_spaced, range, Spin::Spaced)
            }
            Design::Hot => Self::hot_initiate(&self.hot, range, Spin::Tight),
            Design::HotPause => Self::hot_initiate(&self.hot_pause, range, Spin::Pause),
            Design::PrefetchedRing => self.ring_side(0, range, true),
        }
        t.elapsed().as_nanos() as f64 / iters.max(1) as f64
    }

    /// One design's responder (see [`RawPingPong::respond`]).
    ///
    /// ```
    /// use amrq_bench::reference::{Design, RawPingPong};
    /// let lines = RawPingPong::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| lines.initiate_as(Design::HotPause, 0, 100));
    ///     lines.respond_as(Design::HotPause, 0, 100);
    /// });
    /// ```
    pub fn respond_as(&self, d: Design, base: u64, iters: u64) {
        let range = base + 1..=base + iters;
        match d {
            Design::Rotating => Self::rotate_respond(&self.rotating, range, Spin::Tight),
            Design::RotatingPause => Self::rotate_respond(&self.rotating_pause, range, Spin::Pause),
            Design::RotatingSpaced => {
                Self::rotate_respond(&self.rotating_spaced, range, Spin::Spaced)
            }
            Design::Hot => Self::hot_respond(&self.hot, range, Spin::Tight),
            Design::HotPause => Self::hot_respond(&self.hot_pause, range, Spin::Pause),
            Design::PrefetchedRing => self.ring_side(1, range, false),
        }
    }

    #[inline(always)]
    fn rotate_initiate(l: &Rotating, range: std::ops::RangeInclusive<u64>, spin: Spin) {
        for i in range {
            let k = i as usize % LINE_PAIRS;
            // ORDERING: Release pairs with the responder's Acquire wait for `i`.
            l.ping[k].0.store(i, Ordering::Release);
            wait_for(&l.pong[k].0, i, spin);
        }
    }

    #[inline(always)]
    fn rotate_respond(l: &Rotating, range: std::ops::RangeInclusive<u64>, spin: Spin) {
        for i in range {
            let k = i as usize % LINE_PAIRS;
            wait_for(&l.ping[k].0, i, spin);
            // ORDERING: Release pairs with the initiator's Acquire wait for `i`.
            l.pong[k].0.store(i, Ordering::Release);
        }
    }

    #[inline(always)]
    fn hot_initiate(l: &[Line; 2], range: std::ops::RangeInclusive<u64>, spin: Spin) {
        for i in range {
            // ORDERING: Release pairs with the responder's Acquire wait for `i`.
            l[0].0.store(i, Ordering::Release);
            wait_for(&l[1].0, i, spin);
        }
    }

    #[inline(always)]
    fn hot_respond(l: &[Line; 2], range: std::ops::RangeInclusive<u64>, spin: Spin) {
        for i in range {
            wait_for(&l[0].0, i, spin);
            // ORDERING: Release pairs with the initiator's Acquire wait for `i`.
            l[1].0.store(i, Ordering::Release);
        }
    }

    /// Side `me` (0 initiates) of the ring design: it writes ring `me` and reads ring
    /// `1 - me`, slot `i % RING_SLOTS` for round trip `i`.
    #[inline(always)]
    fn ring_side(&self, me: usize, range: std::ops::RangeInclusive<u64>, initiates: bool) {
        let (mine, theirs) = (&self.ring[me], &self.ring[1 - me]);
        for i in range {
            let k = i as usize % RING_SLOTS;
            if !initiates {
                wait_for(&theirs[k].seq, i, Spin::Pause);
            }
            // ORDERING: Release pairs with the other side's Acquire wait for `i`.
            mine[k].seq.store(i, Ordering::Release);
            if k.is_multiple_of(PREFETCH_GROUP) {
                let ahead = (k + PREFETCH_AHEAD) % RING_SLOTS;
                prefetch_write_8_lines((&mine[ahead] as *const Slot).cast());
            }
            if initiates {
                wait_for(&theirs[k].seq, i, Spin::Pause);
            }
        }
    }
}

/// Every design's samples, batch by batch; the floor is the design whose median is
/// lowest in the run.
///
/// ```
/// use amrq_bench::reference::{Design, Floor};
/// let mut f = Floor::default();
/// f.push([120.0, 110.0, 105.0, 100.0, 95.0, 90.0]);
/// f.push([122.0, 111.0, 106.0, 101.0, 97.0, 91.0]);
/// assert_eq!(f.winner(), Design::PrefetchedRing);
/// assert_eq!(f.samples(Design::Hot), [100.0, 101.0]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Floor {
    samples: [Vec<f64>; 6],
}

impl Floor {
    /// One batch of [`RawPingPong::initiate_all`].
    pub fn push(&mut self, batch: [f64; 6]) {
        for (v, x) in self.samples.iter_mut().zip(batch) {
            v.push(x);
        }
    }

    /// The samples of `d`, in batch order.
    pub fn samples(&self, d: Design) -> &[f64] {
        &self.samples[Design::ALL.iter().position(|&x| x == d).unwrap_or(0)]
    }

    /// The floor: the design of lowest median, and that median (0 with no samples).
    ///
    /// ```
    /// use amrq_bench::reference::{Design, Floor};
    /// let mut f = Floor::default();
    /// f.push([120.0, 110.0, 105.0, 100.0, 85.0, 90.0]);
    /// assert_eq!(f.floor(), (Design::HotPause, 85.0));
    /// ```
    pub fn floor(&self) -> (Design, f64) {
        let d = self.winner();
        (d, super::median(&mut self.samples(d).to_vec()))
    }

    /// The design of lowest median (the first of [`Design::ALL`] when none has samples).
    pub fn winner(&self) -> Design {
        let med = |d: Design| super::median(&mut self.samples(d).to_vec());
        Design::ALL
            .into_iter()
            .min_by(|&a, &b| med(a).total_cmp(&med(b)))
            .unwrap_or(Design::Rotating)
    }
}
