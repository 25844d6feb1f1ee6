//! Conjugate gradient (Begel et al. §6, Figure 6-5) on the 5-point Laplacian of a
//! `grid`×`grid` mesh (64×64: 4,096 unknowns, Begel's size), the grid's rows dealt in
//! blocks over the ranks. Each iteration sends the search direction's boundary rows to
//! the neighbouring ranks by bulk `store` (completed by `all_store_sync`: the
//! store-heavy pattern Begel et al. measure), applies the stencil, and takes two dot
//! products with `all_reduce`. Every timed run is checked on every rank against a
//! sequential CG of the same iterations: the residual and this rank's part of x.

use crate::profile::{messages, waits};
use crate::AppError;
use amrq::am::HandlerTable;
use amrq::coll;
use amrq::splitc::{Layout, SplitC, SpreadArray};
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use std::time::Instant;

/// The size of the problem and of the measurement.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Points per side of the grid.
    pub grid: usize,
    /// CG iterations per timed run.
    pub iters: usize,
    /// Timed batches (one more first, as a warm-up).
    pub batches: usize,
}

/// `y = A·x` on rows `lo..hi` of the grid (`x` holds those rows, `above` the row
/// before, `below` the row after: zero at the grid's edge).
fn stencil(g: usize, x: &[f64], (above, below): (&[f64], &[f64]), y: &mut [f64]) {
    let rows = x.len() / g;
    for r in 0..rows {
        for c in 0..g {
            let at = |rr: usize, cc: usize| x[rr * g + cc];
            let up = if r == 0 { above[c] } else { at(r - 1, c) };
            let down = if r + 1 == rows {
                below[c]
            } else {
                at(r + 1, c)
            };
            let left = if c == 0 { 0.0 } else { at(r, c - 1) };
            let right = if c + 1 == g { 0.0 } else { at(r, c + 1) };
            y[r * g + c] = 4.0 * at(r, c) - up - down - left - right;
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The right-hand side at row `r`, column `c`.
fn rhs(g: usize, r: usize, c: usize) -> f64 {
    1.0 + ((r * g + c) % 7) as f64 * 0.1
}

/// A sequential CG of `iters` iterations: x and the last r·r.
fn sequential(g: usize, iters: usize) -> (Vec<f64>, f64) {
    let zero = vec![0.0; g];
    let b: Vec<f64> = (0..g * g).map(|k| rhs(g, k / g, k % g)).collect();
    let (mut x, mut r, mut p) = (vec![0.0; g * g], b.clone(), b);
    let mut q = vec![0.0; g * g];
    let mut rr = dot(&r, &r);
    for _ in 0..iters {
        stencil(g, &p, (&zero, &zero), &mut q);
        let alpha = rr / dot(&p, &q);
        for k in 0..g * g {
            x[k] += alpha * p[k];
            r[k] -= alpha * q[k];
        }
        let next = dot(&r, &r);
        let beta = next / rr;
        rr = next;
        for k in 0..g * g {
            p[k] = r[k] + beta * p[k];
        }
    }
    (x, rr)
}

/// This rank's rows of the grid.
fn rows_of(g: usize, p: usize, rank: usize) -> std::ops::Range<usize> {
    g * rank / p..g * (rank + 1) / p
}

/// One CG run on this rank: x (its rows) and the last r·r; ns (the longest rank's).
fn parallel(
    sc: &SplitC<()>,
    g: usize,
    iters: usize,
    ghost: &SpreadArray<f64>,
) -> Result<(Vec<f64>, f64, f64), AppError> {
    let (me, p) = (sc.my_proc(), sc.procs());
    let rows = rows_of(g, p, me);
    let n = rows.len() * g;
    let b: Vec<f64> = rows
        .clone()
        .flat_map(|r| (0..g).map(move |c| rhs(g, r, c)))
        .collect();
    let (mut x, mut r, mut pv) = (vec![0.0; n], b.clone(), b);
    let mut q = vec![0.0; n];
    let (mut above, mut below) = (vec![0.0; g], vec![0.0; g]);
    // Ghost rows: slot 0 the row above this rank's block, slot 1 the row below.
    let slot = |rank: usize, k: usize| ghost.at(rank * 2 * g + k * g);
    sc.barrier()?;
    let t = Instant::now();
    let sum = |v: f64| waits(|| sc.all_reduce(v, coll::sum));
    let mut rr = sum(dot(&r, &r))?;
    for _ in 0..iters {
        if n > 0 {
            if me > 0 && !rows_of(g, p, me - 1).is_empty() {
                let first = &pv[..g]; // their below
                messages(size_of_val(first), || sc.bulk_store(slot(me - 1, 1), first))?;
            }
            if me + 1 < p && !rows_of(g, p, me + 1).is_empty() {
                let last = &pv[n - g..]; // their above
                messages(size_of_val(last), || sc.bulk_store(slot(me + 1, 0), last))?;
            }
        }
        waits(|| sc.all_store_sync())?;
        if me > 0 && rows.start > 0 {
            sc.bulk_read(slot(me, 0), &mut above)?;
        }
        if me + 1 < p && rows.end < g {
            sc.bulk_read(slot(me, 1), &mut below)?;
        }
        stencil(g, &pv, (&above, &below), &mut q);
        let alpha = rr / sum(dot(&pv, &q))?;
        for k in 0..n {
            x[k] += alpha * pv[k];
            r[k] -= alpha * q[k];
        }
        let next = sum(dot(&r, &r))?;
        let beta = next / rr;
        rr = next;
        for k in 0..n {
            pv[k] = r[k] + beta * pv[k];
        }
    }
    let ns = crate::profile::longest(t, |mine| sc.all_reduce(mine, coll::max))?;
    Ok((x, rr, ns))
}

/// One rank of the CG job: the outcome on rank 0.
pub fn rank_main(setup: Setup, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p, g) = (setup.rank(), setup.size(), shape.grid.max(2));
    if p > g {
        return Err(format!("{p} ranks for {g} grid rows: at most one rank per row").into());
    }
    let (want_x, want_rr) = sequential(g, shape.iters);
    let bb: f64 = (0..g * g).map(|k| rhs(g, k / g, k % g).powi(2)).sum();
    let mut seq_us = Vec::new();
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let (am, sc) = (job.am(), job.splitc());
    let mut o = Outcome::new("cg", p, 0.0);
    let rows = rows_of(g, p, me);
    for frames in [false, true] {
        sc.rma().use_frames(frames);
        let path = if frames { "frames" } else { "direct" };
        let ghost = sc.all_spread_malloc::<f64>(p * 2 * g, Layout::BlockCyclic(2 * g))?;
        let mut per = Vec::new();
        let mut speedup = Vec::new();
        for batch in 0..=shape.batches {
            let seq_ns =
                crate::on_rank_0_alone(am, || crate::ns_of(|| sequential(g, shape.iters)))?;
            let (x, rr, ns) = parallel(sc, g, shape.iters, &ghost)?;
            let mine = &want_x[rows.start * g..rows.end * g];
            let bad_x = x
                .iter()
                .zip(mine)
                .filter(|(a, b)| (*a - *b).abs() > 1e-9 * b.abs().max(1.0))
                .count();
            // Once CG has converged, r·r is rounding noise, which the order of the
            // sums changes: below 1e-12 of b·b its value is not compared.
            let bad_rr = (rr - want_rr).abs() > 1e-6 * want_rr.abs() + 1e-12 * bb;
            let bad = sc.all_reduce(bad_x as u64 + u64::from(bad_rr), coll::sum)?;
            if bad > 0 {
                return Err(format!(
                    "cg on the {path} path: {bad} values differ from the sequential CG (r·r {rr:e} against {want_rr:e})"
                )
                .into());
            }
            if batch > 0 {
                per.push(ns / shape.iters as f64 / 1e3);
                speedup.push(seq_ns / ns);
                if !frames {
                    seq_us.push(seq_ns / shape.iters as f64 / 1e3);
                }
            }
        }
        o.figures
            .push(Figure::of(format!("{path}_us_per_iter"), &mut per));
        o.figures
            .push(Figure::of(format!("{path}_speedup"), &mut speedup));
        if !frames {
            // One more run, profiled: where the direct path's time goes.
            let seq = amrq_bench::reference::median(&mut seq_us.clone()) * 1e3;
            let run = || Ok(parallel(sc, g, shape.iters, &ghost)?.2);
            crate::profile::measure(am, seq * shape.iters as f64, run)?.push(&mut o);
        }
        sc.all_spread_free(ghost)?;
    }
    o.figures
        .push(Figure::of("sequential_us_per_iter", &mut seq_us));
    o.figures.push(Figure::single("size", g as f64));
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    o.notes.push(format!(
        "{g}×{g} grid ({} unknowns), rows in blocks over the ranks, {} iterations per run; µs per iteration (the longest rank's); the sequential CG timed on rank 0 before each run; every timed run checked against it",
        g * g,
        shape.iters
    ));
    Ok(Some(o))
}
