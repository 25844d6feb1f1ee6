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
//!   of it measured in the same run (DESIGN.md "Conventions");
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
use amrq::conduit::mem::MemConduit;
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
fn transfers(p: &Params, x: usize) -> u64 {
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

/// The series named `name` at each size: `one(x, align)` gives the ns of one transfer
/// on rank 0 (and `None` on other ranks, which do their part inside it).
fn sweep(
    p: &Params,
    sizes: &[usize],
    align: usize,
    mut one_batch: impl FnMut(usize, usize, u64) -> Result<Option<f64>, AmError>,
) -> Result<Vec<Point>, AmError> {
    let mut points = Vec::new();
    for &x in sizes {
        let n = transfers(p, x);
        let mut v = Vec::new();
        for batch in 0..=p.batches {
            if let Some(ns) = one_batch(x, align, n)? {
                if batch > 0 {
                    v.push(ns / n as f64);
                }
            }
        }
        if !v.is_empty() {
            points.push(Point::of(x as f64, &mut v));
        }
    }
    Ok(points)
}

/// Adds `series` and its Table-5 figures (`<key>_4w_ns`, `_startup_ns`, `_mb_s`).
/// The fit spans the paper's 2 B … 64 KiB; larger arrays leave the caches (another
/// regime) and are plotted, not fitted.
fn add_row(o: &mut Outcome, key: &str, name: String, points: Vec<Point>) {
    let fitted: Vec<Point> = points.iter().filter(|p| p.x <= 65536.0).cloned().collect();
    let (c, mb_s) = fit_row(&fitted);
    let four_words = points
        .iter()
        .find(|p| p.x == 16.0)
        .map_or(f64::NAN, |p| p.median);
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

/// *array* (2 ranks): one-to-one blocking and non-blocking, swap and put for each
/// alignment, and the memcpy reference; `put_vs_memcpy` is the ratio of bandwidths
/// at the sizes ≥ 64 KiB.
pub fn array(c: MemConduit, p: &Params) -> Result<Option<Outcome>, AmError> {
    require_ranks(&c, "array", 2, false)?;
    let b = BenchAm::new(c)?;
    let rma = Rma::new(&b.am);
    let sizes = sizes(p.quick, true);
    let me = b.rank();
    let mut o = Outcome::new("array", 2, p.clock.overhead_ns());
    let mut expect = 0u64;
    for (name, align) in ALIGNMENTS {
        let at = LANDING + align;
        // one-to-one, blocking and not.
        for blocking in [true, false] {
            let pts = sweep(p, &sizes, align, |x, align, n| {
                b.am.barrier()?;
                if me != 0 {
                    expect += n;
                    b.wait_count(expect)?;
                    return Ok(None);
                }
                let src = source(x);
                let data = &src[align..align + x];
                let mut ns = 0.0;
                for _ in 0..n {
                    let acks = b.am.state().acks.get();
                    let t = p.clock.start();
                    b.am.request_long(1, b.land, &[1], data, at)?;
                    if blocking {
                        b.wait_acks(acks + 1)?;
                        ns += p.clock.since(t);
                    } else {
                        ns += p.clock.since(t);
                        b.wait_acks(acks + 1)?;
                    }
                }
                Ok(Some(ns))
            })?;
            let (key, label) = if blocking {
                ("blocking", "one-to-one (blocking)")
            } else {
                ("nonblocking", "one-to-one (non-blocking)")
            };
            if me == 0 {
                add_row(
                    &mut o,
                    &format!("{key}_{name}"),
                    format!("{label}, {name}"),
                    pts,
                );
            }
        }
        // swap.
        let pts = sweep(p, &sizes, align, |x, align, n| {
            *b.am.state().source.borrow_mut() = source(x);
            b.am.barrier()?;
            if me != 0 {
                expect += n;
                b.wait_count(expect)?;
                return Ok(None);
            }
            let src = source(x);
            let data = &src[align..align + x];
            let t = p.clock.start();
            for _ in 0..n {
                let (acks, fetched) = (b.am.state().acks.get(), b.am.state().fetched.get());
                b.am.request(1, b.fetch, &[x as u64, at as u64, align as u64])?;
                b.am.request_long(1, b.land, &[1], data, at)?;
                b.am.wait_until(|s| s.acks.get() > acks && s.fetched.get() > fetched)?;
            }
            Ok(Some(p.clock.since(t)))
        })?;
        if me == 0 {
            add_row(
                &mut o,
                &format!("swap_{name}"),
                format!("swap, {name}"),
                pts,
            );
        }
        // put.
        let pts = sweep(p, &sizes, align, |x, align, n| {
            b.am.barrier()?;
            if me != 0 {
                return Ok(None);
            }
            let src = source(x);
            let data = &src[align..align + x];
            let t = p.clock.start();
            for _ in 0..n {
                rma.put(1, at, data)
                    .map_err(|e| bench_error(e.to_string()))?;
            }
            Ok(Some(p.clock.since(t)))
        })?;
        if me == 0 {
            add_row(&mut o, &format!("put_{name}"), format!("put, {name}"), pts);
        }
    }
    b.am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    // The memcpy reference, same sizes, double-word aligned, on this core.
    let mut dst = vec![0u8; sizes.last().copied().unwrap_or(0) + 64];
    let memcpy_pts: Vec<Point> = sizes
        .iter()
        .map(|&x| {
            let src = source(x);
            let n = transfers(p, x);
            let mut v: Vec<f64> = (0..p.batches)
                .map(|_| amrq::reference::memcpy_ns(&src[8..8 + x], &mut dst[8..8 + x], n))
                .collect();
            Point::of(x as f64, &mut v)
        })
        .collect();
    let big = |pts: &[Point]| -> f64 {
        let v: Vec<f64> = pts
            .iter()
            .filter(|p| p.x >= 65536.0)
            .map(|p| p.x / p.median)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let put_dw = o
        .series
        .iter()
        .find(|s| s.name == "put, double-word")
        .map_or(f64::NAN, |s| big(&s.points));
    let ratio = put_dw / big(&memcpy_pts);
    add_row(&mut o, "memcpy", "memcpy (reference)".into(), memcpy_pts);
    o.figures.push(Figure::single("put_vs_memcpy", ratio));
    o.notes.push(
        "put_vs_memcpy: put bandwidth over memcpy bandwidth, mean over sizes ≥ 64 KiB, double-word aligned"
            .into(),
    );
    Ok(Some(o))
}

/// *array-two-to-one* (3 ranks): one segment and two segments, double-word aligned
/// (the alignments of the 2-rank set show the alignment effect).
pub fn two_to_one(c: MemConduit, p: &Params) -> Result<Option<Outcome>, AmError> {
    require_ranks(&c, "array-two-to-one", 3, false)?;
    let b = BenchAm::new(c)?;
    let sizes = sizes(p.quick, true);
    let me = b.rank();
    let mut o = Outcome::new("array-two-to-one", 3, p.clock.overhead_ns());
    let (mut expect, mut go) = (0u64, 0u64);
    for (key, label, gap) in [
        ("one_segment", "two-to-one, one segment", None),
        ("two_segments", "two-to-one, two segments", Some(SECOND)),
    ] {
        let pts = sweep(p, &sizes, 8, |x, align, n| {
            let half = x / 2;
            let at = match (me, gap) {
                (1, _) => LANDING + align,
                (_, None) => LANDING + align + half,
                (_, Some(g)) => LANDING + align + g,
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
                    b.am.request_long(0, b.land, &[0], &src[align..align + part], at)?;
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
        if me == 0 {
            add_row(
                &mut o,
                &format!("{key}_double-word"),
                format!("{label}, double-word"),
                pts,
            );
        }
    }
    b.am.barrier()?;
    Ok((me == 0).then(|| {
        o.notes.push(
            "the senders copy (shared memory): the time for both halves to arrive and be handled"
                .into(),
        );
        o
    }))
}
