//! Cholesky factorisation on the Split-C layer (Begel et al. §6): a dense symmetric
//! positive-definite n × n matrix factored as L·Lᵀ, right-looking, in column blocks of
//! [`BLOCK`] columns dealt cyclically to the ranks. The owner of block column k
//! factors its diagonal block, solves the panel below it and stores the panel into
//! every other rank's panel buffer with bulk stores (`all_store_sync` says they have
//! it); every rank then updates its own column blocks right of k with it, the owner of
//! block k + 1 that block first, so that it factors and stores the next panel while
//! the others update rather than while they wait (look-ahead; the panels take two
//! buffers in turn). Each step still begins with `all_store_sync`, so a step lasts as
//! long as its busiest rank. At the
//! end each rank stores its columns of L into rank 0's copy, which is checked against
//! the factor one core computes by the same blocked steps (to a relative 1e-9: the
//! same operations in the same order). Run on both of Split-C's paths: `direct` (the
//! mapped segments) and `frames` (every access an Active Message).
//!
//! The paper (the NOW and the Millennium, 1536 × 1536): the scaling is reasonable past
//! two processors, and shared-memory Split-C scales linearly on two.

use crate::profile::{messages, waits};
use crate::AppError;
use amrq::am::HandlerTable;
use amrq::splitc::{Layout, SplitC, SpreadArray};
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use std::time::Instant;

/// Columns of a block.
pub const BLOCK: usize = 32;

/// The size of a run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Rows (and columns) of the matrix: a multiple of [`BLOCK`].
    pub n: usize,
    /// Timed batches (one more runs first, as a warm-up).
    pub batches: usize,
}

/// The matrix, column-major: a·aᵀ-like and diagonally dominant, so positive definite.
fn matrix(n: usize) -> Vec<f64> {
    let mut x = 0xc401_u64;
    let mut a = vec![0.0; n * n];
    for j in 0..n {
        for i in j..n {
            let v = (crate::next(&mut x) % 1000) as f64 / 1000.0 - 0.5;
            a[j * n + i] = v;
            a[i * n + j] = v;
        }
        a[j * n + j] += n as f64;
    }
    a
}

/// Factors the diagonal block of block column `k` of column-major `a` (n × n) and
/// solves the panel below it: columns k·B … (k+1)·B of L, in place.
fn panel(a: &mut [f64], n: usize, k: usize) {
    let c0 = k * BLOCK;
    for j in c0..c0 + BLOCK {
        let mut d = a[j * n + j];
        for p in c0..j {
            d -= a[p * n + j] * a[p * n + j];
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut v = a[j * n + i];
            for p in c0..j {
                v -= a[p * n + i] * a[p * n + j];
            }
            a[j * n + i] = v / d;
        }
    }
}

/// Updates column `j` (right of block k) of column-major `a` with the panel of block k,
/// `l` (its columns, rows 0 … n, column-major with stride n): a[i][j] −= Σ l[i][p]·l[j][p].
fn update(a: &mut [f64], n: usize, l: &[f64], j: usize) {
    let col = &mut a[j * n..(j + 1) * n];
    for p in 0..BLOCK {
        let lp = &l[p * n..(p + 1) * n];
        let ljp = lp[j];
        for i in j..n {
            col[i] -= lp[i] * ljp;
        }
    }
}

/// The lower triangle of `a` factored by one core, by the same blocked steps.
fn sequential(a: &[f64], n: usize) -> Vec<f64> {
    let mut a = a.to_vec();
    for k in 0..n / BLOCK {
        panel(&mut a, n, k);
        let l = a[k * BLOCK * n..(k + 1) * BLOCK * n].to_vec();
        for j in (k + 1) * BLOCK..n {
            update(&mut a, n, &l, j);
        }
    }
    a
}

/// Whether `got` is `want` to a relative 1e-9 (false for a NaN).
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs().max(1.0)
}

/// The rank that owns block column `k`.
fn owner(k: usize, p: usize) -> usize {
    k % p
}

/// One parallel factorisation of `a0` (every rank has it) into this rank's copy `a`,
/// through the panel buffers `panels` (two of B·n per rank, used in turn): ns (the
/// longest rank's).
fn factor(
    sc: &SplitC<()>,
    (a0, n): (&[f64], usize),
    a: &mut Vec<f64>,
    panels: &SpreadArray<f64>,
) -> Result<f64, AppError> {
    let (me, p, blocks) = (sc.my_proc(), sc.procs(), n / BLOCK);
    a.clear();
    a.extend_from_slice(a0);
    let width = BLOCK * n;
    let mut l = vec![0.0; width];
    let slot = |r: usize, k: usize| panels.at((2 * r + k % 2) * width);
    // Block column k's panel, factored by its owner and stored to every other rank.
    let publish = |a: &mut [f64], k: usize| -> Result<(), AppError> {
        panel(a, n, k);
        let l = &a[k * width..(k + 1) * width];
        for r in (0..p).filter(|&r| r != me) {
            messages(size_of_val(l), || sc.bulk_store(slot(r, k), l))?;
        }
        Ok(())
    };
    sc.barrier()?;
    let t = Instant::now();
    if owner(0, p) == me {
        publish(a, 0)?;
    }
    for k in 0..blocks {
        // Every rank has panel k; and every rank has read panel k - 1, whose slot
        // panel k + 1 takes.
        waits(|| sc.all_store_sync())?;
        match owner(k, p) == me {
            true => l.copy_from_slice(&a[k * width..(k + 1) * width]),
            false => sc.bulk_read(slot(me, k), &mut l)?,
        }
        let next = k + 1;
        let ahead = next < blocks && owner(next, p) == me;
        if ahead {
            // Look-ahead: the next panel first, so that no rank waits for it.
            for j in next * BLOCK..(next + 1) * BLOCK {
                update(a, n, &l, j);
            }
            publish(a, next)?;
        }
        for kb in (next + usize::from(ahead)..blocks).filter(|&kb| owner(kb, p) == me) {
            for j in kb * BLOCK..(kb + 1) * BLOCK {
                update(a, n, &l, j);
            }
        }
    }
    // The factor is done when every rank's columns are.
    waits(|| sc.barrier())?;
    Ok(crate::profile::longest(t, |mine| {
        sc.all_reduce(mine, amrq::coll::max)
    })?)
}

/// One rank of the Cholesky factorisation: the outcome on rank 0.
pub fn rank_main(setup: Setup, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p, n) = (setup.rank(), setup.size(), shape.n);
    if n == 0 || n % BLOCK != 0 {
        return Err(format!("--size {n}: a positive multiple of {BLOCK}").into());
    }
    let a0 = matrix(n);
    let want = if me == 0 {
        sequential(&a0, n)
    } else {
        Vec::new()
    };
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let (am, sc) = (job.am(), job.splitc());
    let width = BLOCK * n;
    let panels = sc.all_spread_malloc::<f64>(2 * p * width, Layout::BlockCyclic(2 * width))?;
    // L gathered on rank 0 (one block as large as the matrix), for the check.
    let result = sc.all_spread_malloc::<f64>(n * n, Layout::BlockCyclic(n * n))?;
    let mut a = Vec::with_capacity(n * n);
    let mut o = Outcome::new("cholesky", p, 0.0);
    for frames in [false, true] {
        sc.rma().use_frames(frames);
        let path = if frames { "frames" } else { "direct" };
        let (mut ms, mut speedup, mut seq) = (Vec::new(), Vec::new(), Vec::new());
        for batch in 0..=shape.batches {
            let seq_ns = crate::on_rank_0_alone(am, || crate::ns_of(|| sequential(&a0, n)))?;
            if me == 0 {
                // A column block not stored stays NaN, which no check passes.
                sc.bulk_write(result.at(0), &vec![f64::NAN; n * n])?;
            }
            let ns = factor(sc, (&a0, n), &mut a, &panels)?;
            for k in (0..n / BLOCK).filter(|&k| owner(k, p) == me) {
                sc.bulk_store(result.at(k * width), &a[k * width..(k + 1) * width])?;
            }
            sc.all_store_sync()?;
            let wrong = if me == 0 {
                let mut l = vec![0.0; n * n];
                sc.bulk_read(result.at(0), &mut l)?;
                (0..n)
                    .flat_map(|j| (j..n).map(move |i| j * n + i))
                    .filter(|&x| !close(l[x], want[x]))
                    .count() as u64
            } else {
                0
            };
            if sc.broadcast(0, wrong)? > 0 {
                return Err(format!(
                    "cholesky ({path}): {wrong} entries of L differ from one core's"
                )
                .into());
            }
            if batch > 0 {
                ms.push(ns / 1e6);
                speedup.push(seq_ns / ns);
                seq.push(seq_ns);
            }
        }
        o.figures.push(Figure::of(format!("{path}_ms"), &mut ms));
        o.figures
            .push(Figure::of(format!("{path}_speedup"), &mut speedup));
        if !frames {
            // One more run, profiled: where the direct path's time goes.
            let seq = amrq_bench::reference::median(&mut seq);
            let run = || factor(sc, (&a0, n), &mut a, &panels);
            crate::profile::measure(am, seq, run)?.push(&mut o);
        }
    }
    o.figures.push(Figure::single("size", n as f64));
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    o.notes.push(format!(
        "{n} × {n}, column blocks of {BLOCK} dealt cyclically, each panel bulk-stored to every rank; ms per factorisation (the longest rank's); speed-up over one core's blocked factorisation timed in the same batch; L checked against it"
    ));
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequential_factor_times_its_transpose_is_the_matrix() {
        let n = 2 * BLOCK;
        let a = matrix(n);
        let l = sequential(&a, n);
        let at = |i: usize, j: usize| if i >= j { l[j * n + i] } else { 0.0 };
        for i in 0..n {
            for j in 0..=i {
                let v: f64 = (0..=j).map(|k| at(i, k) * at(j, k)).sum();
                assert!((v - a[j * n + i]).abs() < 1e-9 * a[j * n + i].abs().max(1.0));
            }
        }
    }
}
