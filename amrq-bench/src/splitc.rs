//! Begel et al.'s Split-C micro-benchmarks on amrq's Split-C layer (`amrq::splitc`), on
//! the direct path (copies into mapped segments) and on the message path (AM frames,
//! `Rma::over_frames`), 2 ranks:
//!
//! - *Figure 6-3*: read, write, get, put and store of one 4-byte int, ns per operation
//!   over `reps` of them (10,000; 1,000 with `quick`), one-way (rank 0 issues, rank 1
//!   serves) and two-way (both issue to each other at once; rank 0's time). `read` and
//!   `write` block each; `get` and `put` are all issued, then one `sync`; `store`s are
//!   all issued (the target counts them after). Each batch ends in a barrier, timed; a
//!   rank that only serves polls without sleeping meanwhile.
//! - *Figure 6-4*: the bulk forms from 4 B to 4 KiB, one-way, and two-way for read,
//!   get and store as the paper shows them.
//!
//! Figures `{direct,frames}_{op}_{one,two}_way_ns`, and `store_over_put` (message path,
//! one-way: the paper's store ≈ half a put), each the median over the batches. Also
//! the goals on the direct path: `read_rtt_ratio` (a read of an int its owner
//! has just written, as a ping-pong of reads, against the raw cache-line round trip of
//! the same run) and `stores_10k_per_s` (10,000 stores, then `all_store_sync`).

use crate::fixture::{bench_error, require_ranks, serving_barrier};
use crate::reference::{Floor, RawPingPong, RAW_PINGPONG_BYTES};
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::prelude::*;
use amrq::splitc::{GlobalPtr, Layout, SplitC, SplitCError};

/// u32 elements of each rank's part: room for the largest bulk transfer (4 KiB).
const PART: usize = 1024;

/// Where a rank's gets land in its own part of the operands' array: past the elements
/// the other rank reads and writes. Landing on them made a two-way get a ping-pong of
/// one line between the cores (each rank writing what the other was reading): 20 ns a
/// get instead of 3.
const LANDING: usize = PART;

/// The operations of Figures 6-3 and 6-4.
const OPS: [&str; 5] = ["read", "write", "get", "put", "store"];

/// The bulk operations Figure 6-4 shows two-way as well.
const TWO_WAY_BULK: [&str; 3] = ["read", "get", "store"];

/// Runs `n` operations `op` of `len` u32 each on the other rank's part (`theirs`; a get
/// lands at `mine`), and for gets and puts their `sync`. The operation is chosen once,
/// outside the timed loop, so that its name is not compared per operation.
fn run_op(
    sc: &SplitC<()>,
    op: &str,
    (mine, theirs): (GlobalPtr<u32>, GlobalPtr<u32>),
    len: usize,
    n: u64,
) -> Result<(), SplitCError> {
    let mut buf = vec![7u32; len];
    match op {
        "read" => (0..n).try_for_each(|_| sc.bulk_read(theirs, &mut buf))?,
        "write" => (0..n).try_for_each(|_| sc.bulk_write(theirs, &buf))?,
        "get" => (0..n).try_for_each(|_| sc.bulk_get(mine, theirs, len))?,
        "put" => (0..n).try_for_each(|_| sc.bulk_put(theirs, &buf))?,
        _ => (0..n).try_for_each(|_| sc.bulk_store(theirs, &buf))?,
    }
    if matches!(op, "get" | "put") {
        sc.sync()?;
    }
    Ok(())
}

/// One batch of `op`: rank 0 issues (rank 1 too when `two_way`) and ends in a barrier;
/// a rank that only serves polls without sleeping until that barrier completes. Stores
/// are complete at the barrier (they precede it in the target's queue, or were copied
/// before it on the direct path); their target then accounts them with `store_sync`.
/// ns per operation on rank 0, the barrier included.
fn batch(
    sc: &SplitC<()>,
    p: &Params,
    op: &str,
    parts: (GlobalPtr<u32>, GlobalPtr<u32>),
    len: usize,
    (n, two_way): (u64, bool),
) -> Result<Option<f64>, SplitCError> {
    sc.barrier()?;
    let me = sc.my_proc();
    let t = p.clock.start();
    if me == 0 || two_way {
        run_op(sc, op, parts, len, n)?;
        sc.barrier()?;
    } else {
        serving_barrier(sc.am())?;
    }
    let ns = p.clock.since(t) / n as f64;
    if op == "store" && (me == 1 || two_way) {
        sc.store_sync(n * 4 * len as u64)?;
    }
    Ok((me == 0).then_some(ns))
}

/// Medians over the batches of `op` (one warm-up batch first); rank 0 only.
fn measure(
    sc: &SplitC<()>,
    p: &Params,
    op: &str,
    parts: (GlobalPtr<u32>, GlobalPtr<u32>),
    len: usize,
    run: (u64, bool),
) -> Result<Vec<f64>, SplitCError> {
    let mut v = Vec::new();
    for b in 0..=p.batches {
        if let Some(ns) = batch(sc, p, op, parts, len, run)? {
            if b > 0 {
                v.push(ns);
            }
        }
    }
    Ok(v)
}

/// Both figures on one path: the Figure 6-3 figures and the Figure 6-4 series.
fn path(sc: &SplitC<()>, p: &Params, frames: bool, o: &mut Outcome) -> Result<(), SplitCError> {
    let per_rank = LANDING + PART;
    let a = sc.all_spread_malloc::<u32>(2 * per_rank, Layout::BlockCyclic(per_rank))?;
    let me = sc.my_proc();
    let parts = (a.at(me * per_rank + LANDING), a.at((1 - me) * per_rank));
    let name = if frames { "frames" } else { "direct" };
    let reps = p.pick(1_000, 10_000);
    for op in OPS {
        for two_way in [false, true] {
            let mut v = measure(sc, p, op, parts, 1, (reps, two_way))?;
            if me == 0 {
                let way = if two_way { "two" } else { "one" };
                o.figures
                    .push(Figure::of(format!("{name}_{op}_{way}_way_ns"), &mut v));
            }
        }
    }
    let bulk_reps = p.pick(200, 2_000);
    // Every operation one-way; the paper's two-way ones (read, get, store) both ways.
    let runs = OPS
        .iter()
        .map(|op| (*op, false))
        .chain(TWO_WAY_BULK.iter().map(|op| (*op, true)));
    for (op, two_way) in runs {
        let mut points = Vec::new();
        for len in [1, 4, 16, 64, 256, PART] {
            let mut v = measure(sc, p, op, parts, len, (bulk_reps, two_way))?;
            if me == 0 {
                points.push(Point::of((4 * len) as f64, &mut v));
            }
        }
        let way = if two_way { ", two-way" } else { "" };
        o.series.push(Series {
            name: format!("bulk {op}{way}, {name} path"),
            x: "bytes".into(),
            y: "ns per operation".into(),
            points,
        });
    }
    sc.all_spread_free(a)
}

/// The goals on the direct path: a read of an int its owner has just written
/// (a ping-pong of reads: each rank writes its own element, then reads the other's
/// until it sees the same value; round trip i uses line pair i mod 256 of each side,
/// as the raw reference does), beside the raw cache-line round trip in alternating
/// batches (`read_rtt_ns`, `raw_rtt_ns`, `read_rtt_ratio`); and 10,000 stores to the
/// other rank then `all_store_sync` (`stores_10k_per_s`).
fn goals(sc: &SplitC<()>, p: &Params, o: &mut Outcome) -> Result<(), SplitCError> {
    let rma = sc.rma();
    let me = sc.my_proc();
    // One element per 128-byte line pair, rotating over as many as the raw reference
    // uses, so that both touch the same number of lines.
    const STRIDE: usize = 16;
    let lines = crate::reference::LINE_PAIRS;
    let pp =
        sc.all_spread_malloc::<u64>(2 * lines * STRIDE, Layout::BlockCyclic(lines * STRIDE))?;
    let raw_at = rma.alloc_symmetric(RAW_PINGPONG_BYTES, 128)?;
    if me == 0 {
        rma.put(0, raw_at, &vec![0; RAW_PINGPONG_BYTES])?;
    }
    let zeros = vec![0u64; lines * STRIDE];
    sc.bulk_write(pp.at(me * lines * STRIDE), &zeros)?;
    sc.barrier()?;
    let (seg, _) =
        sc.am().rq().conduit().mapped_segment(0).ok_or_else(|| {
            SplitCError::from(bench_error("splitc: rank 0's segment is not mapped"))
        })?;
    // SAFETY: `raw_at` is a 128-aligned symmetric allocation of RAW_PINGPONG_BYTES in
    // rank 0's segment, mapped by both ranks, zeroed above before the barrier, and used
    // for nothing else.
    let raw = unsafe { RawPingPong::in_memory(seg.add(raw_at)) };
    let element = |rank: usize, i: u64| pp.at((rank * lines + i as usize % lines) * STRIDE);
    let iters = p.pick(2_000, 20_000);
    let (mut read_ns, mut floor) = (Vec::new(), Floor::default());
    for batch in 0..=p.batches as u64 {
        let base = batch * iters;
        sc.barrier()?;
        let r = match me {
            0 => Some(raw.initiate_all(base, iters)),
            _ => {
                raw.respond_all(base, iters);
                None
            }
        };
        sc.barrier()?;
        let t = p.clock.start();
        for i in base + 1..=base + iters {
            let (mine, theirs) = (element(me, i), element(1 - me, i));
            if me == 0 {
                sc.write(mine, i)?;
            }
            while sc.read(theirs)? != i {}
            if me == 1 {
                sc.write(mine, i)?;
            }
        }
        let a = p.clock.since(t) / iters as f64;
        if me == 0 && batch > 0 {
            read_ns.push(a);
            if let Some(r) = r {
                floor.push(r);
            }
        }
    }
    let n = 10_000u64;
    let mut rate = Vec::new();
    let part = sc.all_spread_malloc::<u32>(2 * PART, Layout::BlockCyclic(PART))?;
    for batch in 0..=p.batches {
        sc.barrier()?;
        let t = p.clock.start();
        if me == 0 {
            for k in 0..n {
                sc.store(part.at(PART + k as usize % PART), k as u32)?;
            }
        }
        sc.all_store_sync()?;
        if me == 0 && batch > 0 {
            rate.push(n as f64 * 1e9 / p.clock.since(t));
        }
    }
    if me == 0 {
        // Against the run's floor, batch by batch.
        let mut raw_ns = floor.samples(floor.winner()).to_vec();
        let mut ratio: Vec<f64> = read_ns.iter().zip(&raw_ns).map(|(a, r)| a / r).collect();
        o.figures.push(Figure::of("read_rtt_ns", &mut read_ns));
        o.figures.push(Figure::of("raw_rtt_ns", &mut raw_ns));
        o.figures.push(Figure::of("read_rtt_ratio", &mut ratio));
        o.figures.push(Figure::of("stores_10k_per_s", &mut rate));
    }
    sc.all_spread_free(part)?;
    sc.all_spread_free(pp)
}

/// *splitc*: Figures 6-3 and 6-4 of Begel et al. on both paths, and the goals
/// on the direct path (2 ranks).
pub fn splitc(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "splitc", 2, false)?;
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let sc = job.splitc();
    let mut o = Outcome::new("splitc", 2, p.clock.overhead_ns());
    goals(sc, p, &mut o)?;
    for frames in [false, true] {
        sc.rma().use_frames(frames);
        path(sc, p, frames, &mut o)?;
    }
    job.barrier()?;
    if job.rank() != 0 {
        return Ok(None);
    }
    let fig = |k: &str| o.figures.iter().find(|f| f.key == k).map(|f| f.median);
    if let (Some(s), Some(p)) = (fig("frames_store_one_way_ns"), fig("frames_put_one_way_ns")) {
        o.figures.push(Figure::single("store_over_put", s / p));
    }
    o.notes.push(
        "per operation over a batch that ends in a barrier; get and put: all issued, then one sync; store: all issued (counted by the target after); two-way: both ranks at once, rank 0's time".into(),
    );
    Ok(Some(o))
}
