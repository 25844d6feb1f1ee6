//! Liu & Culler §5.2.1, array transfer: Long Active Messages (the array lands in the
//! target's segment, then its handler runs) of 2 B to 64 KiB and beyond, the
//! destination (and source) aligned to a byte, a word (4 B) or a double word (8 B).
//!
//! - *one-to-one blocking*: send, then wait for the acknowledgement that the whole
//!   array has arrived; *non-blocking*: the clock stops when the send returns (the
//!   acknowledgement is awaited outside the timed part);
//! - *swap*: rank 0 asks rank 1 for its array (sent back by a Long reply), sends its
//!   own, and waits for both and the acknowledgement;
//! - *put*: a blocking one-sided put of the same array, beside a single-core `memcpy`
//!   of it measured in the same run;
//! - *two-to-one* (3 ranks, `array-two-to-one`): ranks 1 and 2 send halves of an array
//!   into one buffer of rank 0 (*one segment*) or into two buffers (*two segments*);
//!   rank 0's time per array, from its go-ahead to the last half handled. On shared
//!   memory the senders copy, so this is the time for both halves to arrive.
//!
//! Each series from 2 B to 64 KiB is fitted to `T = c + x/B` (Table 5: the time for 4
//! words, `c`, `B`).

use crate::fixture::{bench_error, require_ranks, BenchAm};
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::prelude::*;
use amrq::rma::Rma;

/// Alignments of the paper: byte, word, double word (the offset from a 64-byte line).
pub const ALIGNMENTS: [(&str, usize); 3] = [("byte", 1), ("word", 4), ("double-word", 8)];

/// Where arrays land in a segment (a second buffer starts `SECOND` further on).
const LANDING: usize = 1 << 16;
const SECOND: usize = 2 << 20;

/// Segment bytes the array benchmarks need.
pub const SEGMENT_BYTES: usize = 8 << 20;

/// Array sizes: powers of two from 2 B to 64 KiB (with `quick`: 2 B, 16 B and the
/// powers of four), and with `beyond` also 256 KiB and 1 MiB. 16 B (4 words) is
/// always there: Table 5 reports it.
///
/// ```
/// let s = amrq_bench::array::sizes(true, false);
/// assert_eq!(s, [2, 4, 16, 64, 256, 1024, 4096, 16384, 65536]);
/// ```
pub fn sizes(quick: bool, beyond: bool) -> Vec<usize> {
    let mut v: Vec<usize> = (1..=16)
        .map(|i| 1usize << i)
        .filter(|&x| !quick || x == 2 || x.trailing_zeros() % 2 == 0)
        .collect();
    if beyond {
        v.extend([256 << 10, 1 << 20]);
    }
    v
}

/// Transfers per timed batch at size `x`: about 1 MiB moved (1/8 with `quick`),
/// between 4 and 2000.
pub(crate) fn transfers(p: &Params, x: usize) -> u64 {
    let bytes = if p.quick { 128 << 10 } else { 1 << 20 };
    (bytes / x).clamp(4, 2000) as u64
}

/// The least-squares fit of a series (x bytes, y ns) to `T = c + x/B`, as the paper
/// fits Table 5: start-up `c` in ns and `B` in MB/s (NaN if the times do not grow
/// with the size).
///
/// ```
/// use amrq_bench::report::Point;
/// let pts: Vec<Point> = [16.0, 1024.0, 65536.0]
///     .iter()
///     .map(|&x| Point::of(x, &mut [100.0 + x / 2.0]))
///     .collect();
/// let (c, mb_s) = amrq_bench::array::fit_row(&pts);
/// assert!((c - 100.0).abs() < 1e-6 && (mb_s - 2000.0).abs() < 1e-6);
/// ```
pub fn fit_row(points: &[Point]) -> (f64, f64) {
    let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.median)).collect();
    let (c, ns_per_byte) = crate::analysis::least_squares(&xy);
    let mb_s = if ns_per_byte > 0.0 {
        1e3 / ns_per_byte
    } else {
        f64::NAN
    };
    (c, mb_s)
}

/// Bytes to take an array of `x` from at any alignment: the allocation is 16-byte
/// aligned, so `&source(x)[a..a + x]` starts `a` bytes past an aligned address.
fn source(x: usize) -> Vec<u8> {
    (0..x + 64).map(|i| i as u8).collect()
}

/// Runs `one_batch(combo, x, n)` for every combination and size, interleaved: each
/// round measures one batch of every (combination, size), so that a drift of the
/// machine during the run (a VM moving its CPUs) touches every series alike. The
/// first round is a warm-up. `n` is `count(p, x)`. Returns each combination's points
/// (ns per transfer) on the rank whose `one_batch` returns the ns of `n` transfers
/// (the others return `None`).
pub(crate) fn sweep(
    p: &Params,
    sizes: &[usize],
    combos: usize,
    count: fn(&Params, usize) -> u64,
    mut one_batch: impl FnMut(usize, usize, u64) -> amrq::Result<Option<f64>>,
) -> amrq::Result<Vec<Vec<Point>>> {
    let mut samples = vec![vec![Vec::new(); sizes.len()]; combos];
    for round in 0..=p.batches {
        for (si, &x) in sizes.iter().enumerate() {
            let n = count(p, x);
            for (c, per_size) in samples.iter_mut().enumerate() {
                if let Some(ns) = one_batch(c, x, n)? {
                    if round > 0 {
                        per_size[si].push(ns / n as f64);
                    }
                }
            }
        }
    }
    Ok(samples
        .into_iter()
        .map(|per_size| {
            sizes
                .iter()
                .zip(per_size)
                .filter(|(_, v)| !v.is_empty())
                .map(|(&x, mut v)| Point::of(x as f64, &mut v))
                .collect()
        })
        .collect())
}

/// A row of Table 5 from a series of (bytes, ns): the time for 4 words (16 B), and
/// the fit's start-up (ns) and bandwidth (MB/s). The fit spans the paper's 2 B …
/// 64 KiB; larger arrays leave the caches (another regime) and are plotted, not fitted.
pub fn table5_row(points: &[Point]) -> (f64, f64, f64) {
    let fitted: Vec<Point> = points.iter().filter(|p| p.x <= 65536.0).cloned().collect();
    let (c, mb_s) = fit_row(&fitted);
    let four_words = points
        .iter()
        .find(|p| p.x == 16.0)
        .map_or(f64::NAN, |p| p.median);
    (four_words, c, mb_s)
}

/// Adds `series` and its Table-5 figures (`<key>_4w_ns`, `_startup_ns`, `_mb_s`).
fn add_row(o: &mut Outcome, key: &str, name: String, points: Vec<Point>) {
    let (four_words, c, mb_s) = table5_row(&points);
    o.figures
        .push(Figure::single(format!("{key}_4w_ns"), four_words));
    o.figures
        .push(Figure::single(format!("{key}_startup_ns"), c));
    o.figures.push(Figure::single(format!("{key}_mb_s"), mb_s));
    o.series.push(Series {
        name,
        x: "bytes".into(),
        y: "ns per array".into(),
        points,
    });
}

/// What is timed in *array*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Blocking,
    NonBlocking,
    Swap,
    Put,
    Memcpy,
}

impl Kind {
    /// (figure key, series label).
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Kind::Blocking => ("blocking", "one-to-one (blocking)"),
            Kind::NonBlocking => ("nonblocking", "one-to-one (non-blocking)"),
            Kind::Swap => ("swap", "swap"),
            Kind::Put => ("put", "put"),
            Kind::Memcpy => ("memcpy", "memcpy (reference)"),
        }
    }
}

/// One batch of `n` transfers of `kind`: ns on rank 0, `None` on rank 1. `expect`
/// is rank 1's running count of arrays handled.
fn array_batch(
    b: &BenchAm,
    rma: &Rma<crate::fixture::State>,
    p: &Params,
    (kind, align): (Kind, usize),
    x: usize,
    n: u64,
    expect: &mut u64,
) -> amrq::Result<Option<f64>> {
    let at = LANDING + align;
    let src = source(x);
    let data = &src[align..align + x];
    if kind == Kind::Memcpy {
        // One core, no peer: rank 0 alone, both buffers its own.
        if b.rank() != 0 {
            return Ok(None);
        }
        let mut dst = vec![0u8; x + 64];
        return Ok(Some(
            crate::reference::memcpy_ns(data, &mut dst[align..align + x], n) * n as f64,
        ));
    }
    if kind == Kind::Swap {
        *b.am.state().source.borrow_mut() = src.clone();
    }
    b.am.barrier()?;
    if b.rank() != 0 {
        if kind != Kind::Put {
            *expect += n;
            b.wait_count(*expect)?;
        }
        return Ok(None);
    }
    let mut ns = 0.0;
    match kind {
        Kind::Blocking | Kind::NonBlocking => {
            for _ in 0..n {
                let acks = b.am.state().acks.get();
                let t = p.clock.start();
                b.am.request_long(1, b.land, &[1], data, at)?;
                if kind == Kind::NonBlocking {
                    ns += p.clock.since(t);
                }
                b.wait_acks(acks + 1)?;
                if kind == Kind::Blocking {
                    ns += p.clock.since(t);
                }
            }
        }
        Kind::Swap => {
            let t = p.clock.start();
            for _ in 0..n {
                let (acks, fetched) = (b.am.state().acks.get(), b.am.state().fetched.get());
                b.am.request(1, b.fetch, &[x as u64, at as u64, align as u64])?;
                b.am.request_long(1, b.land, &[1], data, at)?;
                b.am.wait_until(|s| s.acks.get() > acks && s.fetched.get() > fetched)?;
            }
            ns = p.clock.since(t);
        }
        Kind::Put => {
            let t = p.clock.start();
            for _ in 0..n {
                rma.put(1, at, data)
                    .map_err(|e| bench_error(e.to_string()))?;
            }
            ns = p.clock.since(t);
        }
        Kind::Memcpy => unreachable!("handled above"),
    }
    Ok(Some(ns))
}

/// *array* (2 ranks): one-to-one blocking and non-blocking, swap and put for each
/// alignment, and the memcpy reference, all interleaved; `put_vs_memcpy` is the ratio
/// of bandwidths over the sizes ≥ 64 KiB, double-word aligned.
pub fn array(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "array", 2, false)?;
    let b = BenchAm::new(setup)?;
    let rma = b.am.rma();
    let sizes = sizes(p.quick, true);
    let mut combos: Vec<(Kind, usize)> = Vec::new();
    for (_, align) in ALIGNMENTS {
        for kind in [Kind::Blocking, Kind::NonBlocking, Kind::Swap, Kind::Put] {
            combos.push((kind, align));
        }
    }
    combos.push((Kind::Memcpy, 8));
    let mut expect = 0u64;
    let points = sweep(p, &sizes, combos.len(), transfers, |ci, x, n| {
        array_batch(&b, rma, p, combos[ci], x, n, &mut expect)
    })?;
    b.am.barrier()?;
    if b.rank() != 0 {
        return Ok(None);
    }
    let mut o = Outcome::new("array", 2, p.clock.overhead_ns());
    let bandwidth = |pts: &[Point]| -> f64 {
        let v: Vec<f64> = pts
            .iter()
            .filter(|p| p.x >= 65536.0)
            .map(|p| p.x / p.median)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (mut put_dw, mut memcpy) = (f64::NAN, f64::NAN);
    for (&(kind, align), pts) in combos.iter().zip(points) {
        let (key, label) = kind.names();
        let name = ALIGNMENTS.iter().find(|a| a.1 == align).map_or("", |a| a.0);
        match (kind, align) {
            (Kind::Put, 8) => put_dw = bandwidth(&pts),
            (Kind::Memcpy, _) => memcpy = bandwidth(&pts),
            _ => {}
        }
        if kind == Kind::Memcpy {
            add_row(&mut o, key, label.into(), pts);
        } else {
            add_row(
                &mut o,
                &format!("{key}_{name}"),
                format!("{label}, {name}"),
                pts,
            );
        }
    }
    o.figures
        .push(Figure::single("put_vs_memcpy", put_dw / memcpy));
    o.notes.push(
        "put_vs_memcpy: put bandwidth over memcpy bandwidth, mean over sizes ≥ 64 KiB, double-word aligned"
            .into(),
    );
    o.notes.push(
        "every (benchmark, alignment, size) gets one batch per round, interleaved, so that a drift of the machine touches all alike"
            .into(),
    );
    Ok(Some(o))
}

/// *array-two-to-one* (3 ranks): one segment and two segments, interleaved, double-word
/// aligned (the alignments of the 2-rank set show the alignment effect).
pub fn two_to_one(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "array-two-to-one", 3, false)?;
    let b = BenchAm::new(setup)?;
    let sizes = sizes(p.quick, true);
    let me = b.rank();
    const ALIGN: usize = 8;
    let layouts = [
        ("one_segment", "two-to-one, one segment", None),
        ("two_segments", "two-to-one, two segments", Some(SECOND)),
    ];
    let (mut expect, mut go) = (0u64, 0u64);
    let points = sweep(p, &sizes, layouts.len(), transfers, |li, x, n| {
        let half = x / 2;
        let at = match (me, layouts[li].2) {
            (1, _) => LANDING + ALIGN,
            (_, None) => LANDING + ALIGN + half,
            (_, Some(g)) => LANDING + ALIGN + g,
        };
        b.am.barrier()?;
        go += 1;
        if me != 0 {
            // Rank 0's clock runs before anything is sent, whatever the scheduler
            // does with three ranks on fewer cores.
            b.wait_count(go)?;
            let src = source(x);
            let part = if me == 1 { half } else { x - half };
            for _ in 0..n {
                b.am.request_long(0, b.land, &[0], &src[ALIGN..ALIGN + part], at)?;
            }
            return Ok(None);
        }
        expect += 2 * n;
        let t = p.clock.start();
        b.am.request(1, b.bump, &[])?;
        b.am.request(2, b.bump, &[])?;
        b.wait_count(expect)?;
        Ok(Some(p.clock.since(t)))
    })?;
    b.am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    let mut o = Outcome::new("array-two-to-one", 3, p.clock.overhead_ns());
    for ((key, label, _), pts) in layouts.iter().zip(points) {
        add_row(
            &mut o,
            &format!("{key}_double-word"),
            format!("{label}, double-word"),
            pts,
        );
    }
    o.notes.push(
        "the senders copy (shared memory): the time from rank 0's go-ahead until both halves have arrived and been handled"
            .into(),
    );
    Ok(Some(o))
}
