//! 3-D FFT (Begel et al. §6, Figure 6-5) of an n×n×n complex array (128³, Begel's
//! size) held in slabs: rank r has the z-planes `block(n, p, r)`.
//!
//! 1. **Planes.** Each rank takes the 2-D FFT of its planes: every row along x, then
//!    every column along y (a local transpose, rows, and back), with `rustfft`.
//! 2. **Transpose.** For each of its planes and each other rank s, one `bulk_store`
//!    of the plane's rows y ∈ `block(n, p, s)` (contiguous in the plane) into s's
//!    slab, at the plane's z (its own rows it copies); then `all_store_sync`. This is the all-to-all Begel et al. blame
//!    for the NOW's failure to scale past 8 processors.
//! 3. **Pencils.** Each rank takes the FFT along z of every (y, x) pencil of its slab.
//!
//! ```text
//!   rank r before              rank s's slab after 2             rank s after 3
//!   z ∈ zs(r), [z][y][x]  ──►  every z, y ∈ ys(s), [z][y][x] ──►  y ∈ ys(s), [y][x][z]
//! ```
//!
//! Rank s ends with F(z, y, x) for y ∈ ys(s), laid out `[y][x][z]`. Every timed run is
//! checked on every rank against the sequential 3-D FFT (the same plane and pencil
//! steps on the whole array, with no transpose), which a unit test checks against a
//! naive DFT.

use crate::profile::{messages, waits};
use crate::AppError;
use amrq::am::HandlerTable;
use amrq::splitc::{Layout, SplitC, SpreadArray};
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use num_complex::Complex64;
use rustfft::{Fft, FftPlanner};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// The size of the problem and of the measurement.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Points per side of the cube.
    pub n: usize,
    /// Timed batches (one more first, as a warm-up).
    pub batches: usize,
}

/// Rank `r`'s share of `n` planes (or rows) over `p` ranks.
fn block(n: usize, p: usize, r: usize) -> Range<usize> {
    n * r / p..n * (r + 1) / p
}

/// The input at (z, y, x) of an n-cube: a seeded pseudo-random value in ±½ ± ½i.
fn input(n: usize, (z, y, x): (usize, usize, usize)) -> Complex64 {
    let mut s = (((z * n + y) * n + x) as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut unit = || (crate::next(&mut s) >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
    Complex64::new(unit(), unit())
}

/// The input's z-planes `zs`, laid out [z][y][x].
fn input_planes(n: usize, zs: Range<usize>) -> Vec<Complex64> {
    zs.flat_map(|z| (0..n * n).map(move |k| input(n, (z, k / n, k % n))))
        .collect()
}

/// The 1-D FFT of length n, planned once, and its buffers.
struct Plan {
    n: usize,
    fft: Arc<dyn Fft<f64>>,
    scratch: Vec<Complex64>,
    /// One n×n matrix.
    square: Vec<Complex64>,
}

impl Plan {
    fn new(n: usize) -> Self {
        let fft = FftPlanner::new().plan_fft_forward(n);
        let scratch = vec![Complex64::default(); fft.get_inplace_scratch_len()];
        let square = vec![Complex64::default(); n * n];
        Self {
            n,
            fft,
            scratch,
            square,
        }
    }

    /// Step 1: the 2-D FFT of each n×n plane of `planes`, in place.
    fn planes(&mut self, planes: &mut [Complex64]) {
        let n = self.n;
        self.fft.process_with_scratch(planes, &mut self.scratch); // every row, along x
        for plane in planes.chunks_exact_mut(n * n) {
            transpose::transpose(&*plane, &mut self.square, n, n);
            self.fft
                .process_with_scratch(&mut self.square, &mut self.scratch); // along y
            transpose::transpose(&self.square, plane, n, n);
        }
    }

    /// Step 3: the FFT along z of every pencil of `slab` ([z][y][x], `rows` rows of y
    /// per plane), into `out` ([y][x][z]).
    fn pencils(&mut self, slab: &[Complex64], rows: usize, out: &mut [Complex64]) {
        let n = self.n;
        for (y, dst) in out.chunks_exact_mut(n * n).enumerate().take(rows) {
            for (z, row) in self.square.chunks_exact_mut(n).enumerate() {
                let at = (z * rows + y) * n;
                row.copy_from_slice(&slab[at..at + n]); // [z][x] of this y
            }
            transpose::transpose(&self.square, dst, n, n); // [x][z]
            self.fft.process_with_scratch(dst, &mut self.scratch);
        }
    }
}

/// The sequential 3-D FFT of the n-cube in `a` ([z][y][x], overwritten), into `out`
/// ([y][x][z]).
fn sequential(plan: &mut Plan, a: &mut [Complex64], out: &mut [Complex64]) {
    plan.planes(a);
    plan.pencils(a, plan.n, out);
}

/// The sequential 3-D FFT of the input.
fn transformed(plan: &mut Plan) -> Vec<Complex64> {
    let n = plan.n;
    let mut out = vec![Complex64::default(); n * n * n];
    sequential(plan, &mut input_planes(n, 0..n), &mut out);
    out
}

/// One rank's buffers and the spread array its slab is received into.
struct Slabs {
    /// This rank's input planes, kept to start each run from.
    input: Vec<Complex64>,
    planes: Vec<Complex64>,
    slab: Vec<Complex64>,
    out: Vec<Complex64>,
    /// Every rank's slab, `part` f64s each (the largest slab's).
    recv: SpreadArray<f64>,
    part: usize,
}

/// How long one parallel FFT took: in all (the longest rank's), and in step 2 on this
/// rank.
struct Times {
    total_ns: f64,
    transpose_ns: f64,
}

/// One parallel 3-D FFT: leaves this rank's part of the result in `b.out`.
fn parallel(sc: &SplitC<()>, plan: &mut Plan, b: &mut Slabs) -> Result<Times, AppError> {
    let (me, p, n) = (sc.my_proc(), sc.procs(), plan.n);
    let zs = block(n, p, me);
    b.planes.copy_from_slice(&b.input);
    sc.barrier()?;
    let t0 = Instant::now();
    plan.planes(&mut b.planes);
    let t1 = Instant::now();
    let ys = block(n, p, me);
    let row = ys.len() * n; // complex values a plane gives this rank
    for (z, plane) in zs.clone().zip(b.planes.chunks_exact(n * n)) {
        // Each rank starting from the next, so that they do not all store to one.
        for s in (1..p).map(|k| (me + k) % p) {
            let ys = block(n, p, s);
            let rows: &[f64] = bytemuck::cast_slice(&plane[ys.start * n..ys.end * n]);
            let to = b.recv.at(s * b.part + z * rows.len());
            messages(size_of_val(rows), || sc.bulk_store(to, rows))?;
        }
        // This rank's own rows need no message.
        b.slab[z * row..(z + 1) * row].copy_from_slice(&plane[ys.start * n..ys.end * n]);
    }
    waits(|| sc.all_store_sync())?;
    // The planes before and after this rank's own, from its part of the spread array.
    let (before, after) = b.slab.split_at_mut(zs.start * row);
    let after = &mut after[zs.len() * row..];
    for (z, got) in [(0, before), (zs.end, after)]
        .into_iter()
        .filter(|g| !g.1.is_empty())
    {
        sc.bulk_read(
            b.recv.at(me * b.part + 2 * z * row),
            bytemuck::cast_slice_mut(got),
        )?;
    }
    let t2 = Instant::now();
    plan.pencils(&b.slab, ys.len(), &mut b.out);
    waits(|| sc.barrier())?; // the FFT is done when every rank's part is
    Ok(Times {
        total_ns: crate::profile::longest(t0, |mine| sc.all_reduce(mine, amrq::coll::max))?,
        transpose_ns: (t2 - t1).as_secs_f64() * 1e9,
    })
}

/// Values of `got` that differ from `want` by more than rounding.
fn wrong(got: &[Complex64], want: &[Complex64]) -> usize {
    got.iter()
        .zip(want)
        .filter(|(g, w)| (*g - *w).norm() > 1e-9 * w.norm().max(1.0))
        .count()
}

/// One rank of the 3-D FFT job: the outcome on rank 0.
pub fn rank_main(setup: Setup, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p, n) = (setup.rank(), setup.size(), shape.n.max(2));
    if p > n {
        return Err(format!("{p} ranks for a {n}-cube: at most one rank per plane").into());
    }
    let mut plan = Plan::new(n);
    let want = transformed(&mut plan);
    let (zs, ys) = (block(n, p, me), block(n, p, me));
    let want = &want[ys.start * n * n..ys.end * n * n];
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let (am, sc) = (job.am(), job.splitc());
    let mut o = Outcome::new("fft", p, 0.0);
    let largest = (0..p).map(|r| block(n, p, r).len()).max().unwrap_or(1);
    let mut seq_ms = Vec::new();
    // Rank 0's copy of the whole input, and the sequential FFT's buffers.
    let (cube, mut a, mut a_out) = match me {
        0 => (
            input_planes(n, 0..n),
            vec![Complex64::default(); n * n * n],
            want.to_vec(),
        ),
        _ => Default::default(),
    };
    for frames in [false, true] {
        sc.rma().use_frames(frames);
        let path = if frames { "frames" } else { "direct" };
        let part = 2 * n * n * largest;
        let input = input_planes(n, zs.clone());
        let mut b = Slabs {
            planes: input.clone(),
            input,
            slab: vec![Complex64::default(); n * n * ys.len()],
            out: vec![Complex64::default(); n * n * ys.len()],
            recv: sc.all_spread_malloc(p * part, Layout::BlockCyclic(part))?,
            part,
        };
        let (mut ms, mut speedup, mut fraction, mut mb_s) = (vec![], vec![], vec![], vec![]);
        // Bytes this rank stores into the others' slabs per run.
        let crossing = 16.0 * (n * n * zs.len()) as f64 * (n - ys.len()) as f64 / n as f64;
        for batch in 0..=shape.batches {
            let seq_ns = crate::on_rank_0_alone(am, || {
                a.copy_from_slice(&cube);
                let t = Instant::now();
                sequential(&mut plan, &mut a, &mut a_out);
                t.elapsed().as_secs_f64() * 1e9
            })?;
            let t = parallel(sc, &mut plan, &mut b)?;
            let bad = wrong(&b.out, want);
            let bad = sc.all_reduce(bad as u64, amrq::coll::sum)?;
            if bad > 0 {
                return Err(format!(
                    "fft on the {path} path: {bad} values differ from the sequential 3-D FFT"
                )
                .into());
            }
            if batch > 0 {
                ms.push(t.total_ns / 1e6);
                speedup.push(seq_ns / t.total_ns);
                fraction.push(t.transpose_ns / t.total_ns);
                mb_s.push(crossing / t.transpose_ns * 1e3);
                if !frames {
                    seq_ms.push(seq_ns / 1e6);
                }
            }
        }
        o.figures.push(Figure::of(format!("{path}_ms"), &mut ms));
        o.figures
            .push(Figure::of(format!("{path}_speedup"), &mut speedup));
        o.figures.push(Figure::of(
            format!("{path}_transpose_fraction"),
            &mut fraction,
        ));
        if p > 1 {
            o.figures
                .push(Figure::of(format!("{path}_transpose_mb_s"), &mut mb_s));
        }
        if !frames {
            // One more run, profiled: where the direct path's time goes.
            let seq = amrq_bench::reference::median(&mut seq_ms.clone()) * 1e6;
            let run = || Ok(parallel(sc, &mut plan, &mut b)?.total_ns);
            crate::profile::measure(am, seq, run)?.push(&mut o);
        }
        sc.all_spread_free(b.recv)?;
    }
    o.figures.push(Figure::of("sequential_ms", &mut seq_ms));
    o.figures.push(Figure::single("size", n as f64));
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    o.notes.push(format!(
        "{n}³ complex points, planes in blocks over the ranks; ms per FFT (the longest rank's); the sequential FFT timed on rank 0 before each parallel one; every timed run checked against it"
    ));
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequential FFT (planes, then pencils, laid out [y][x][z]) is the 3-D DFT.
    #[test]
    fn the_sequential_fft_is_the_naive_dft() {
        let n = 6; // not a power of two, and small enough for the O(n⁶) sum
        let got = transformed(&mut Plan::new(n));
        let w = |k: usize| {
            Complex64::from_polar(1.0, -2.0 * std::f64::consts::PI * k as f64 / n as f64)
        };
        for (kz, ky, kx) in [(0, 0, 0), (1, 2, 3), (5, 4, 1), (3, 0, 5)] {
            let mut sum = Complex64::default();
            for z in 0..n {
                for y in 0..n {
                    for x in 0..n {
                        let phase = (kz * z + ky * y + kx * x) % n;
                        sum += input(n, (z, y, x)) * w(phase);
                    }
                }
            }
            let at = (ky * n + kx) * n + kz;
            assert!(
                (got[at] - sum).norm() < 1e-9,
                "({kz},{ky},{kx}): {} against {sum}",
                got[at]
            );
        }
    }

    #[test]
    fn blocks_cover_the_planes_once() {
        for (n, p) in [(128, 3), (7, 7), (5, 2)] {
            let all: Vec<usize> = (0..p).flat_map(|r| block(n, p, r)).collect();
            assert_eq!(all, (0..n).collect::<Vec<_>>());
        }
    }
}
