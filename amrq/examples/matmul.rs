//! The AM paper's matrix multiply (§2.3, Figure 4) on the Split-C layer: C = A·B with
//! the columns of all three matrices dealt out in blocks to the ranks. Each rank GETs
//! one column of A after another — its own first, then the next rank's — and does a
//! rank-1 update (DAXPY) of its own columns of C with the matching elements of its own
//! columns of B, getting the next column while it computes with the current one.
//!
//! ```text
//! cargo run --release --example matmul [-- --quick] [--ranks N] [--m M] [--r R] [--threads] [--json]
//! AMRQ_RMA_FRAMES=1 target/release/examples/matmul   # the message path
//! ```
//! N = 128 rows; `--m` columns of B and C per rank (default 8); `--r` columns of A in
//! all (default 4096, 512 with --quick). Every rank checks its columns of C against a
//! sequential multiply of the same data, and times the same kernel on local data alone
//! (the sequential rate). Prints, last, `matmul: ranks=… m=… mflops_per_rank=…
//! seq_mflops=… efficiency=… blocking_efficiency=…` (efficiency: per-rank rate over the
//! sequential rate, with split-phase gets; blocking: with a blocking read per column).

mod common;

use amrq::coll;
use amrq::splitc::{Layout, SpreadArray};
use common::Context;

/// Rows of A and C.
const N: usize = 128;

/// The AM paper's matrix multiply.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    common: common::Common,
    /// Ranks, where no launcher says (default `AMRQ_RANKS`, else 2).
    #[arg(long)]
    ranks: Option<usize>,
    /// Columns of B and C per rank.
    #[arg(long, default_value_t = 8)]
    m: usize,
    /// Columns of A (and rows of B), in all: a multiple of the ranks.
    #[arg(long)]
    r: Option<usize>,
}

fn main() {
    let o = <Args as clap::Parser>::parse();
    let cfg = amrq::Config::new();
    let r = o.r.unwrap_or(if o.common.quick { 512 } else { 4096 });
    if o.m == 0 {
        common::fail(&"--m: give at least 1 column");
    }
    let shape = Shape { m: o.m, r };
    common::run_splitc(&o.common, cfg, common::Ranks::flag_or(o.ranks, 2), |sc| {
        program(sc, shape, o.common.json)
    })
}

/// Columns of B and C per rank, and columns of A in all.
#[derive(Clone, Copy)]
struct Shape {
    m: usize,
    r: usize,
}

/// Element (i, j) of A and of B: made up, the same on every rank.
fn a_at(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 3) % 11) as f64 - 5.0
}

fn b_at(j: usize, k: usize) -> f64 {
    ((j * 5 + k * 13) % 7) as f64 * 0.5
}

/// DAXPYs between two polls on the message path (2,048 multiply-adds): often enough
/// that a peer's get waits little, seldom enough that the polls cost little.
const POLL_EVERY: usize = 16;

/// C's local columns += x · B(j, local columns) for one column x of A (a DAXPY each),
/// polling `sc` (if given) every `POLL_EVERY` DAXPYs.
fn update(
    c: &mut [f64],
    x: &[f64],
    b: &[f64],
    (j, r): (usize, usize),
    sc: Option<&Context>,
) -> amrq::Result<()> {
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

/// Every rank's program.
fn program(sc: &Context, Shape { m, r }: Shape, json: bool) -> amrq::Result<()> {
    let (me, p) = (sc.my_proc(), sc.procs());
    if r % p != 0 {
        return Err(format!("--r {r} must be a multiple of the ranks, {p}").into());
    }
    let per = r / p; // columns of A per rank
                     // A, column-major, its columns in blocks: rank q holds columns q·per … (q+1)·per − 1.
    let a: SpreadArray<f64> = sc.all_spread_malloc(N * r, Layout::BlockCyclic(N * per))?;
    for jl in 0..per {
        let j = me * per + jl;
        let col: Vec<f64> = (0..N).map(|i| a_at(i, j)).collect();
        sc.bulk_write(a.at(j * N), &col)?;
    }
    // Two column buffers in this rank's segment, where split-phase gets land.
    let bufs: SpreadArray<f64> = sc.all_spread_malloc(2 * N * p, Layout::BlockCyclic(2 * N))?;
    let buf = |t: usize| bufs.at(me * 2 * N + (t % 2) * N);
    // This rank's columns of B (R × m, column-major) and of C (N × m).
    let b: Vec<f64> = (0..m)
        .flat_map(|k| (0..r).map(move |j| b_at(j, me * m + k)))
        .collect();

    // Columns of A in the paper's order: this rank's own first, then the next rank's.
    let column = |t: usize| a.at(((me * per + t) % r) * N);
    let order = |t: usize| (me * per + t) % r;
    let mut x = vec![0.0; N];
    // On the message path the owner answers a get only when it polls, so the DAXPYs
    // poll now and then; on the direct path it takes no part in a get.
    let poll = (!sc.is_direct()).then_some(sc);

    // Split-phase: get column t + 1 while computing with column t.
    let mut c = vec![0.0; N * m];
    sc.barrier()?;
    let t0 = sc.seconds();
    sc.bulk_get(buf(0), column(0), N)?;
    sc.sync()?;
    for t in 0..r {
        sc.bulk_read(buf(t), &mut x)?; // a plain copy: the buffer is this rank's
        if t + 1 < r {
            sc.bulk_get(buf(t + 1), column(t + 1), N)?;
        }
        update(&mut c, &x, &b, (order(t), r), poll)?;
        sc.sync()?;
    }
    let split_s = sc.seconds() - t0;

    // Blocking: read each column, then compute.
    let mut c2 = vec![0.0; N * m];
    sc.barrier()?;
    let t0 = sc.seconds();
    for t in 0..r {
        sc.bulk_read(column(t), &mut x)?;
        update(&mut c2, &x, &b, (order(t), r), poll)?;
    }
    let blocking_s = sc.seconds() - t0;
    sc.barrier()?;

    // The same kernel on local data alone: the sequential rate, and the check.
    let cols: Vec<Vec<f64>> = (0..r)
        .map(|j| (0..N).map(|i| a_at(i, j)).collect())
        .collect();
    let mut want = vec![0.0; N * m];
    let t0 = sc.seconds();
    for t in 0..r {
        update(&mut want, &cols[order(t)], &b, (order(t), r), None)?;
    }
    let seq_s = sc.seconds() - t0;
    let bad = c
        .iter()
        .zip(&c2)
        .zip(&want)
        .filter(|((x, y), w)| x != w || y != w)
        .count() as u64;

    let flops = 2.0 * (N * m * r) as f64;
    let rate = sc.all_reduce(flops / split_s, coll::min)?; // the slowest rank's
    let blocking = sc.all_reduce(flops / blocking_s, coll::min)?;
    let seq = sc.all_reduce(flops / seq_s, coll::max)?;
    let bad = sc.all_reduce(bad, coll::sum)?;
    if me == 0 {
        let path = if sc.is_direct() {
            "direct"
        } else {
            "AM frames"
        };
        println!("{p} ranks; C({N}×{}) = A({N}×{r}) · B({r}×{}); m = {m} columns per rank; remote accesses: {path}", m * p, m * p);
        println!(
            "per rank: {:.0} MFLOP/s with split-phase gets, {:.0} with blocking reads; the same kernel alone: {:.0}",
            rate / 1e6,
            blocking / 1e6,
            seq / 1e6
        );
        common::summary(
            "matmul",
            json,
            &[
                ("ranks", p as f64),
                ("m", m as f64),
                ("mflops_per_rank", rate / 1e6),
                ("seq_mflops", seq / 1e6),
                ("efficiency", rate / seq),
                ("blocking_efficiency", blocking / seq),
            ],
        );
    }
    match bad {
        0 => Ok(()),
        _ => Err(format!("{bad} elements of C differ from the sequential multiply").into()),
    }
}
