//! The AM paper's matrix multiply (§2.3: Figure 4's program, Figure 5's measurements,
//! Figure 6's model) on amrq's Split-C layer, 2 ranks, on the direct path and on the
//! message path: C(N × M) = A(N × R) · B(R × M) with N = 128, the columns of all three
//! in blocks over the ranks, and m = M/P columns of B and C per rank. Each rank gets
//! the columns of A one after another, its own first, and does m DAXPYs with each.
//!
//! The paper sweeps m from 1 to 32 with R = 262144/M on 128 ranks, so that every m does
//! the same work. Here R·m is constant too, 8,192 (4,096 with `quick`), so that A (8 MiB
//! at m = 1) mostly stays in the caches: at small m the kernel streams A, and with a
//! footprint beyond the caches the ratios measured memory rather than the multiply.
//! m goes up to 512 to find where the message path turns computation-bound.
//!
//! Per m, each batch runs three variants, their order rotating from batch to batch:
//! - split-phase: get the next column while doing the DAXPYs of this one, polling
//!   between DAXPYs and after them so that the peer's get is answered (on the direct path
//!   a get is a copy the processor makes at issue: there is nothing to overlap, and
//!   the best split-phase can do is to copy once, as a blocking read does);
//! - blocking: a read per column, then its DAXPYs;
//! - the same kernel alone, on a local copy of A (every rank at once, as they compute
//!   in the multiply: one at a time, the other's spinning slowed it where the two
//!   vCPUs are SMT siblings).
//!
//! A variant's time is the slowest rank's. Its efficiency is the kernel alone's time
//! over its own, a ratio taken within the batch. The warm-up batch checks both C's
//! against the kernel alone's, element by element.
//!
//! The model ([`crate::analysis::matmul_model`]) takes the column get's latency, gap
//! and overhead, measured on the same path in the same run
//! (`{path}_column_{latency,gap,overhead}_ns`), and the kernel alone's time per column
//! at each m.
//!
//! Outputs, per path:
//! - series against m: efficiency (split-phase and blocking, measured and predicted)
//!   and network use (measured and predicted);
//! - figures: `{path}_crossover_m`, the least m whose median efficiency is at least
//!   0.9 (absent when there is none), `{path}_model_crossover_m` the same from the
//!   model, and `{path}_efficiency_m{m}` at the largest m.

use crate::analysis::{matmul_model, ColumnGet};
use crate::fixture::{bench_error, require_ranks, serving_barrier};
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::coll;
use amrq::prelude::*;
use amrq::splitc::{Layout, SplitC, SplitCError, SpreadArray};

/// Rows of A and C.
const N: usize = 128;

/// The segment the job asks for: A's part at m = 1 (R·m = 8,192 columns of 1 KiB over
/// 2 ranks: 4 MiB), with room for the buffers and the probe.
pub const SEGMENT_BYTES: usize = 16 << 20;

/// Columns of B and C per rank.
const MS: [usize; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// The efficiency from which a multiply counts as computation-bound (the goal).
const COMPUTE_BOUND: f64 = 0.9;

/// DAXPYs between two polls on the message path: 2,048 multiply-adds, some 100 times
/// an unsuccessful poll (`amrq-bench polling`). Polling after every DAXPY cost a third
/// of the flop rate at m = 32.
const POLL_EVERY: usize = 16;

/// Column gets per probe of the column costs.
const PROBES: usize = 64;

type Sc = SplitC<()>;

/// Element (i, j) of A and of B: made up, the same on every rank.
fn a_at(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 3) % 11) as f64 - 5.0
}

fn b_at(j: usize, k: usize) -> f64 {
    ((j * 5 + k * 13) % 7) as f64 * 0.5
}

/// A column's bytes, where a get writes them.
fn as_bytes(column: &mut [f64]) -> &mut [u8] {
    // SAFETY: the bytes are the column's own (the same length and lifetime), u8 has
    // no alignment to keep, and every bit pattern is an f64.
    unsafe { std::slice::from_raw_parts_mut(column.as_mut_ptr().cast(), 8 * column.len()) }
}

/// C's local columns += x · B(j, local columns), a DAXPY per column, polling `sc`
/// (if given) after every `POLL_EVERY` of them.
fn daxpys(
    c: &mut [f64],
    x: &[f64],
    b: &[f64],
    (j, r): (usize, usize),
    sc: Option<&Sc>,
) -> Result<(), SplitCError> {
    for (k, ck) in c.chunks_exact_mut(N).enumerate() {
        let s = b[k * r + j];
        for (ci, xi) in ck.iter_mut().zip(x) {
            *ci += s * xi;
        }
        if let Some(sc) = sc.filter(|_| k % POLL_EVERY == POLL_EVERY - 1) {
            sc.poll()?;
        }
    }
    Ok(())
}

/// One m's multiply on this rank.
struct Problem {
    r: usize,
    /// Columns of A per rank.
    per: usize,
    me: usize,
    /// A, its columns in blocks: rank q holds columns q·R/P … (q+1)·R/P − 1.
    a: SpreadArray<f64>,
    /// Two column buffers per rank, where split-phase gets through frames land.
    bufs: SpreadArray<f64>,
    /// This rank's columns of B (R × m, column-major).
    b: Vec<f64>,
    /// All of A, column-major, for the kernel alone.
    local: Vec<f64>,
}

/// The three ways to run the multiply.
#[derive(Clone, Copy)]
enum Variant {
    Split,
    Blocking,
    Alone,
}

impl Problem {
    /// Collective: allocates and fills A, the buffers and B.
    fn new(sc: &Sc, m: usize, r: usize) -> Result<Self, SplitCError> {
        let (me, p) = (sc.my_proc(), sc.procs());
        let per = r / p;
        let a = sc.all_spread_malloc::<f64>(N * r, Layout::BlockCyclic(N * per))?;
        let local: Vec<f64> = (0..r)
            .flat_map(|j| (0..N).map(move |i| a_at(i, j)))
            .collect();
        sc.bulk_write(a.at(me * per * N), &local[me * per * N..(me + 1) * per * N])?;
        let bufs = sc.all_spread_malloc::<f64>(2 * N * p, Layout::BlockCyclic(2 * N))?;
        let b = (0..m)
            .flat_map(|k| (0..r).map(move |j| b_at(j, me * m + k)))
            .collect();
        sc.barrier()?;
        Ok(Problem {
            r,
            per,
            me,
            a,
            bufs,
            b,
            local,
        })
    }

    /// The t-th column this rank uses: its own first, then the next rank's.
    fn order(&self, t: usize) -> usize {
        (self.me * self.per + t) % self.r
    }

    /// Runs one variant into `c` (zeroed first).
    fn run(&self, sc: &Sc, v: Variant, c: &mut [f64]) -> Result<(), SplitCError> {
        c.fill(0.0);
        let r = self.r;
        let column = |t: usize| self.a.at(self.order(t) * N);
        let buf = |t: usize| self.bufs.at(self.me * 2 * N + (t % 2) * N);
        // On the message path the owner answers a get only when it polls; on the
        // direct path it takes no part in it.
        let poll = (!sc.is_direct()).then_some(sc);
        let mut x = vec![0.0; N];
        match v {
            Variant::Split if sc.is_direct() => {
                // A direct get is a copy the processor makes when it issues it: into a
                // local column, two of them in turn, it is the one copy a blocking
                // read makes; into a buffer in the segment, as through frames below,
                // it would be two.
                let mut next = vec![0.0; N];
                sc.bulk_read(column(0), &mut x)?;
                for t in 0..r {
                    let get = (t + 1 < r)
                        .then(|| {
                            let g = column(t + 1);
                            sc.rma().get_nb(g.rank(), g.offset(), as_bytes(&mut next))
                        })
                        .transpose()?;
                    daxpys(c, &x, &self.b, (self.order(t), r), poll)?;
                    get.map(|h| h.wait()).transpose()?;
                    std::mem::swap(&mut x, &mut next);
                }
            }
            Variant::Split => {
                // The reply lands in the buffer as it is taken in, while the DAXPYs
                // run and poll.
                sc.bulk_get(buf(0), column(0), N)?;
                sc.sync()?;
                for t in 0..r {
                    sc.bulk_read(buf(t), &mut x)?; // a plain copy: the buffer is ours
                    if t + 1 < r {
                        sc.bulk_get(buf(t + 1), column(t + 1), N)?;
                    }
                    daxpys(c, &x, &self.b, (self.order(t), r), poll)?;
                    // Answer the peer's get before waiting for this one: at m < 16 the
                    // DAXPYs have not polled, and the peer's sync waits for the answer.
                    sc.poll()?;
                    sc.sync()?;
                }
            }
            Variant::Blocking => {
                for t in 0..r {
                    sc.bulk_read(column(t), &mut x)?;
                    daxpys(c, &x, &self.b, (self.order(t), r), poll)?;
                }
            }
            Variant::Alone => {
                for t in 0..r {
                    let j = self.order(t);
                    let x = &self.local[j * N..(j + 1) * N];
                    daxpys(c, x, &self.b, (j, r), None)?;
                }
            }
        }
        Ok(())
    }

    fn free(self, sc: &Sc) -> Result<(), SplitCError> {
        sc.all_spread_free(self.bufs)?;
        sc.all_spread_free(self.a)
    }
}

/// Times `f` on the ranks where `active`, then serves (polling, never sleeping) until
/// every rank is done: the slowest active rank's ns.
fn timed(
    sc: &Sc,
    p: &Params,
    active: bool,
    f: impl FnOnce() -> Result<(), SplitCError>,
) -> Result<f64, SplitCError> {
    sc.barrier()?;
    let t = p.clock.start();
    if active {
        f()?;
    }
    let ns = p.clock.since(t);
    serving_barrier(sc.am())?;
    sc.all_reduce(if active { ns } else { 0.0 }, coll::max)
}

/// The column get's costs on this path, medians over the batches, and its unloaded
/// latency (one rank gets, the other only serves). The model takes the latency with
/// both ranks getting at once, as they do in the multiply.
fn probe(sc: &Sc, p: &Params) -> Result<(ColumnGet, f64), SplitCError> {
    let me = sc.my_proc();
    let a = sc.all_spread_malloc::<f64>(2 * PROBES * N, Layout::BlockCyclic(PROBES * N))?;
    let bufs = sc.all_spread_malloc::<f64>(2 * N, Layout::BlockCyclic(N))?;
    let theirs = |k: usize| a.at(((1 - me) * PROBES + k) * N);
    let mine = bufs.at(me * N);
    let [mut unloaded, mut latency, mut gap, mut overhead]: [Vec<f64>; 4] = Default::default();
    let per = PROBES as f64;
    for batch in 0..=p.batches {
        let blocking = || {
            (0..PROBES).try_for_each(|k| {
                sc.bulk_get(mine, theirs(k), N)?;
                sc.sync().map(drop)
            })
        };
        let l = timed(sc, p, me == 0, blocking)?;
        let l2 = timed(sc, p, true, blocking)?;
        let all = || {
            (0..PROBES).try_for_each(|k| sc.bulk_get(mine, theirs(k), N))?;
            sc.sync().map(drop)
        };
        let g = timed(sc, p, me == 0, all)?;
        let o = timed(sc, p, true, all)?;
        if batch > 0 {
            unloaded.push(l / per);
            latency.push(l2 / per);
            gap.push(g / per);
            overhead.push(o / per);
        }
    }
    sc.all_spread_free(bufs)?;
    sc.all_spread_free(a)?;
    let median = |v: &mut Vec<f64>| Figure::of("", v).median;
    let get = ColumnGet {
        latency: median(&mut latency),
        gap: median(&mut gap),
        overhead: median(&mut overhead),
    };
    Ok((get, median(&mut unloaded)))
}

/// One path: the probe, then the sweep over m, into `o`.
fn path(sc: &SplitC<()>, p: &Params, frames: bool, o: &mut Outcome) -> Result<(), SplitCError> {
    let name = if frames { "frames" } else { "direct" };
    let (get, unloaded) = probe(sc, p)?;
    let work = p.pick(4_096, 8_192) as usize;
    let mut curves: [Vec<Point>; 6] = Default::default();
    let (mut crossover, mut model_crossover) = (None, None);
    for m in MS {
        let pb = Problem::new(sc, m, work / m)?;
        let mut c = [vec![0.0; N * m], vec![0.0; N * m], vec![0.0; N * m]];
        let (mut split, mut blocking, mut alone, mut used) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let variants = [Variant::Split, Variant::Blocking, Variant::Alone];
        for batch in 0..=p.batches {
            let mut ns = [0.0; 3];
            for k in 0..3 {
                let v = (batch + k) % 3;
                ns[v] = timed(sc, p, true, || pb.run(sc, variants[v], &mut c[v]))?;
            }
            if batch == 0 {
                let bad = (0..2).map(|v| c[v] != c[2]).filter(|&b| b).count();
                let bad = sc.all_reduce(bad as u64, coll::sum)?;
                if bad > 0 {
                    let why = format!("matmul, {name} path, m = {m}: C differs from the kernel alone's on {bad} variant(s) × ranks");
                    return Err(SplitCError::from(bench_error(why)));
                }
                continue;
            }
            split.push(ns[2] / ns[0]);
            blocking.push(ns[2] / ns[1]);
            alone.push(ns[2] / pb.r as f64);
            used.push(get.gap * (pb.r - pb.per) as f64 / ns[0]);
        }
        let x = m as f64;
        let compute = Figure::of("", &mut alone).median;
        let polls = (!sc.is_direct()).then_some(1 + m / POLL_EVERY); // the sync's too
        let remote = (sc.procs() - 1) as f64 / sc.procs() as f64;
        let model = matmul_model(&get, compute, polls, remote);
        let measured = Point::of(x, &mut split);
        if crossover.is_none() && measured.median >= COMPUTE_BOUND {
            crossover = Some(m);
        }
        if model_crossover.is_none() && model.efficiency >= COMPUTE_BOUND {
            model_crossover = Some(m);
        }
        if m == MS[MS.len() - 1] {
            o.figures.push(Figure::of(
                format!("{name}_efficiency_m{m}"),
                &mut split.clone(),
            ));
        }
        let at = |y: f64| Point::of(x, &mut [y]);
        for (curve, point) in curves.iter_mut().zip([
            measured,
            Point::of(x, &mut blocking),
            at(model.efficiency),
            at(model.blocking_efficiency),
            Point::of(x, &mut used),
            at(model.network_use),
        ]) {
            curve.push(point);
        }
        pb.free(sc)?;
    }
    let names = [
        "efficiency, split-phase",
        "efficiency, blocking",
        "model, split-phase",
        "model, blocking",
        "network use",
        "network use, model",
    ];
    for (i, (n, points)) in names.into_iter().zip(curves).enumerate() {
        let y = if i < 4 {
            "flop rate / the kernel alone's"
        } else {
            "fraction of the link's column rate"
        };
        o.series.push(Series {
            name: format!("{n}, {name} path"),
            x: "m (columns of C per rank)".into(),
            y: y.into(),
            points,
        });
    }
    for (key, v) in [
        ("column_unloaded_latency_ns", unloaded),
        ("column_latency_ns", get.latency),
        ("column_gap_ns", get.gap),
        ("column_overhead_ns", get.overhead),
    ] {
        o.figures.push(Figure::single(format!("{name}_{key}"), v));
    }
    for (key, m) in [
        ("crossover_m", crossover),
        ("model_crossover_m", model_crossover),
    ] {
        if let Some(m) = m {
            o.figures
                .push(Figure::single(format!("{name}_{key}"), m as f64));
        }
    }
    Ok(())
}

/// *matmul*: the AM paper's matrix multiply against its model, on both paths (2 ranks).
pub fn matmul(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "matmul", 2, false)?;
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let sc = job.splitc();
    let mut o = Outcome::new("matmul", 2, p.clock.overhead_ns());
    for frames in [false, true] {
        sc.rma().use_frames(frames);
        path(sc, p, frames, &mut o)?;
    }
    job.barrier()?;
    if job.rank() != 0 {
        return Ok(None);
    }
    o.notes.push(format!(
        "N = {N}, R·m = {} (the same work at every m), 2 ranks; efficiency: the kernel alone's time over the variant's, per batch; crossover: the least m with efficiency ≥ {COMPUTE_BOUND}",
        p.pick(4_096, 8_192)
    ));
    Ok(Some(o))
}
