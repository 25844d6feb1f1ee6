//! EM3D (Begel et al. §6, Figure 6-5; Culler et al.'s Split-C benchmark): a bipartite
//! graph of E and H nodes, `nodes` of each kind per rank. Each node depends on
//! `DEGREE` nodes of the other kind, on another rank with probability `remote` (30 %
//! by default, as Begel et al.), with a weight per edge. An iteration updates every E
//! value from its H neighbours (`e -= Σ w·h`), then every H value from its E
//! neighbours. Both kinds are spread arrays over the Split-C layer, one block per rank.
//!
//! Three versions, each on the direct and the message path:
//!
//! | version | how a rank gets its remote neighbours' values |
//! |---|---|
//! | `read` | a blocking `read` per edge (a plain copy for a local one) |
//! | `get` | a split-phase `get` of each distinct remote neighbour into a ghost slot, one `sync`, then the update from the ghosts |
//! | `store` | the owner pushes the values others need with one `bulk_store` per rank into their ghost slots; `all_store_sync`; then the update |
//!
//! Each batch times `iters` iterations per version and path, the versions in an order
//! that rotates from batch to batch. Every rank checks its values after each timed run
//! against a sequential EM3D of the whole graph.

use crate::profile::{messages, waits};
use crate::{next, AppError};
use amrq::am::HandlerTable;
use amrq::splitc::{Layout, SplitC, SpreadArray};
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use std::time::Instant;

/// Edges per node.
pub const DEGREE: usize = 5;

/// The three versions.
pub const VERSIONS: [Version; 3] = [Version::Read, Version::Get, Version::Store];

/// How remote values are fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// A blocking read per edge.
    Read,
    /// Split-phase gets into ghosts.
    Get,
    /// Ghosts filled by the owners' bulk stores.
    Store,
}

impl Version {
    /// Its name in figures and tables.
    ///
    /// ```
    /// assert_eq!(amrq_apps::em3d::Version::Store.name(), "store");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Version::Read => "read",
            Version::Get => "get",
            Version::Store => "store",
        }
    }
}

/// The size of the problem and of the measurement.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Nodes of each kind per rank.
    pub nodes: usize,
    /// Fraction of edges to another rank's nodes.
    pub remote: f64,
    /// Iterations per timed run.
    pub iters: usize,
    /// Timed batches (one more first, as a warm-up).
    pub batches: usize,
}

/// One kind's edges: for each node (global index), its neighbours of the other kind
/// (global index) and weights. The same graph on every rank (seeded).
struct Edges(Vec<[(usize, f64); DEGREE]>);

impl Edges {
    fn new(p: usize, n: usize, remote: f64, seed: u64) -> Self {
        let mut x = seed | 1;
        let edges = (0..p * n)
            .map(|i| {
                let me = i / n;
                std::array::from_fn(|_| {
                    let far = p > 1 && (next(&mut x) % 10_000) as f64 / 10_000.0 < remote;
                    let r = match far {
                        true => (me + 1 + (next(&mut x) as usize % (p - 1))) % p,
                        false => me,
                    };
                    let j = r * n + next(&mut x) as usize % n;
                    (j, 0.01 + (next(&mut x) % 100) as f64 / 10_000.0)
                })
            })
            .collect();
        Edges(edges)
    }
}

/// A sequential EM3D of the whole graph: the values after `iters` iterations.
fn sequential(e_edges: &Edges, h_edges: &Edges, iters: usize) -> (Vec<f64>, Vec<f64>) {
    let total = e_edges.0.len();
    let (mut e, mut h) = (initial(total, 1.0), initial(total, 2.0));
    for _ in 0..iters {
        update(&mut e, &e_edges.0, |j| h[j]);
        update(&mut h, &h_edges.0, |j| e[j]);
    }
    (e, h)
}

/// Initial values of `len` nodes of a kind.
fn initial(len: usize, base: f64) -> Vec<f64> {
    (0..len).map(|i| base + (i % 13) as f64 * 0.1).collect()
}

/// `vals[i] -= Σ w·other(j)` for every node i of `vals` (its edges `edges[i]`).
fn update(vals: &mut [f64], edges: &[[(usize, f64); DEGREE]], other: impl Fn(usize) -> f64) {
    for (v, es) in vals.iter_mut().zip(edges) {
        *v -= es.iter().map(|&(j, w)| w * other(j)).sum::<f64>();
    }
}

/// One rank's side of one kind's update: where its remote neighbours' values come
/// from.
struct Side {
    /// This rank's nodes' edges.
    edges: Vec<[(usize, f64); DEGREE]>,
    /// The distinct remote neighbours (global), in ghost-slot order.
    ghosts: Vec<usize>,
    /// For each rank q: the nodes of this rank q needs, in q's ghost order for this
    /// rank, and where in q's ghost array they start.
    wanted_by: Vec<(Vec<usize>, usize)>,
}

impl Side {
    fn new(edges: &Edges, p: usize, n: usize, me: usize) -> Self {
        let ghosts_of = |q: usize| {
            let mut g: Vec<usize> = edges.0[q * n..(q + 1) * n]
                .iter()
                .flatten()
                .map(|&(j, _)| j)
                .filter(|&j| j / n != q)
                .collect();
            g.sort_unstable();
            g.dedup();
            g
        };
        let wanted_by = (0..p)
            .map(|q| {
                let g = ghosts_of(q);
                let start = g.iter().position(|&j| j / n == me).unwrap_or(0);
                (g.iter().copied().filter(|&j| j / n == me).collect(), start)
            })
            .collect();
        Side {
            edges: edges.0[me * n..(me + 1) * n].to_vec(),
            ghosts: ghosts_of(me),
            wanted_by,
        }
    }
}

/// One rank's EM3D on one path.
struct Rank<'s> {
    sc: &'s SplitC<()>,
    n: usize,
    me: usize,
    e: SpreadArray<f64>,
    h: SpreadArray<f64>,
    /// Ghost slots, per rank as many as its larger side needs.
    ghost: SpreadArray<f64>,
    ghost_len: usize,
    sides: &'s [Side; 2],
}

impl Rank<'_> {
    /// Sets this rank's values to the initial ones.
    fn reset(&self) -> Result<(), AppError> {
        let (n, me) = (self.n, self.me);
        let e = &initial(self.e.len(), 1.0)[me * n..(me + 1) * n];
        let h = &initial(self.h.len(), 2.0)[me * n..(me + 1) * n];
        self.sc.bulk_write(self.e.at(me * n), e)?;
        self.sc.bulk_write(self.h.at(me * n), h)?;
        Ok(self.sc.barrier()?)
    }

    /// One half-iteration: update `mine` (kind `side`) from `other`'s values.
    fn half(
        &self,
        v: Version,
        side: &Side,
        (mine, other): (&SpreadArray<f64>, &SpreadArray<f64>),
    ) -> Result<(), AppError> {
        let (n, me, sc) = (self.n, self.me, self.sc);
        let ghost_at = |k: usize| self.ghost.at(me * self.ghost_len + k);
        let mut vals = vec![0.0; n];
        sc.bulk_read(mine.at(me * n), &mut vals)?;
        let mut local = vec![0.0; n];
        sc.bulk_read(other.at(me * n), &mut local)?;
        match v {
            Version::Read => {
                for (val, es) in vals.iter_mut().zip(&side.edges) {
                    let mut s = 0.0;
                    for &(j, w) in es {
                        let x = match j / n == me {
                            true => local[j - me * n],
                            false => messages(8, || sc.read(other.at(j)))?,
                        };
                        s += w * x;
                    }
                    *val -= s;
                }
                waits(|| sc.barrier())?;
                sc.bulk_write(mine.at(me * n), &vals)?;
                return Ok(waits(|| sc.barrier())?);
            }
            Version::Get => {
                for (k, &j) in side.ghosts.iter().enumerate() {
                    messages(8, || sc.get(ghost_at(k), other.at(j)))?;
                }
                waits(|| sc.sync())?;
            }
            Version::Store => {
                for (q, (nodes, start)) in side.wanted_by.iter().enumerate() {
                    if q == me || nodes.is_empty() {
                        continue;
                    }
                    let pack: Vec<f64> = nodes.iter().map(|&j| local[j - me * n]).collect();
                    let to = self.ghost.at(q * self.ghost_len + start);
                    messages(size_of_val(&pack[..]), || sc.bulk_store(to, &pack))?;
                }
                waits(|| sc.all_store_sync())?;
            }
        }
        let mut ghosts = vec![0.0; side.ghosts.len()];
        if !ghosts.is_empty() {
            sc.bulk_read(ghost_at(0), &mut ghosts)?;
        }
        update(&mut vals, &side.edges, |j| match j / n == me {
            true => local[j - me * n],
            false => ghosts[side.ghosts.binary_search(&j).unwrap_or(0)],
        });
        // Everyone has read this kind's old values (and the ghosts) before any changes.
        waits(|| sc.barrier())?;
        sc.bulk_write(mine.at(me * n), &vals)?;
        Ok(waits(|| sc.barrier())?)
    }

    /// `iters` iterations by `v`: ns (the longest rank's).
    fn run(&self, v: Version, iters: usize) -> Result<f64, AppError> {
        self.reset()?;
        let t = Instant::now();
        for _ in 0..iters {
            self.half(v, &self.sides[0], (&self.e, &self.h))?;
            self.half(v, &self.sides[1], (&self.h, &self.e))?;
        }
        let max = |mine| self.sc.all_reduce(mine, amrq::coll::max);
        Ok(crate::profile::longest(t, max)?)
    }

    /// Values of this rank's nodes that differ from the sequential ones.
    fn wrong(&self, want: &(Vec<f64>, Vec<f64>)) -> Result<usize, AppError> {
        let (n, me) = (self.n, self.me);
        let mut wrong = 0;
        for (arr, w) in [(&self.e, &want.0), (&self.h, &want.1)] {
            let mut got = vec![0.0; n];
            self.sc.bulk_read(arr.at(me * n), &mut got)?;
            wrong += got
                .iter()
                .zip(&w[me * n..(me + 1) * n])
                .filter(|(g, w)| (*g - *w).abs() > 1e-9 * w.abs().max(1.0))
                .count();
        }
        Ok(wrong)
    }
}

/// One rank of the EM3D job: the outcome on rank 0.
pub fn rank_main(setup: Setup, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p, n) = (setup.rank(), setup.size(), shape.nodes.max(1));
    let e_edges = Edges::new(p, n, shape.remote, 0xe3d);
    let h_edges = Edges::new(p, n, shape.remote, 0x3d3);
    // Every rank's sides: this rank's own, and the ghost slots the largest needs.
    let sides: Vec<[Side; 2]> = (0..p)
        .map(|q| [Side::new(&e_edges, p, n, q), Side::new(&h_edges, p, n, q)])
        .collect();
    let ghost_len = sides
        .iter()
        .flatten()
        .map(|s| s.ghosts.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let want = sequential(&e_edges, &h_edges, shape.iters);
    let mut seq_us = Vec::new();
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let (am, sc) = (job.am(), job.splitc());
    let mut o = Outcome::new("em3d", p, 0.0);
    for frames in [false, true] {
        sc.rma().use_frames(frames);
        let path = if frames { "frames" } else { "direct" };
        let block = Layout::BlockCyclic(n);
        let r = Rank {
            sc,
            n,
            me,
            e: sc.all_spread_malloc(p * n, block)?,
            h: sc.all_spread_malloc(p * n, block)?,
            ghost: sc.all_spread_malloc(p * ghost_len, Layout::BlockCyclic(ghost_len))?,
            ghost_len,
            sides: &sides[me],
        };
        let mut per: Vec<Vec<f64>> = vec![Vec::new(); VERSIONS.len()];
        let mut speedup: Vec<Vec<f64>> = vec![Vec::new(); VERSIONS.len()];
        for batch in 0..=shape.batches {
            let seq_ns = crate::on_rank_0_alone(am, || {
                crate::ns_of(|| sequential(&e_edges, &h_edges, shape.iters))
            })?;
            if batch > 0 && !frames {
                seq_us.push(seq_ns / shape.iters as f64 / 1e3);
            }
            for k in 0..VERSIONS.len() {
                let i = (batch + k) % VERSIONS.len();
                let ns = r.run(VERSIONS[i], shape.iters)?;
                let wrong = sc.all_reduce(r.wrong(&want)? as u64, amrq::coll::sum)?;
                if wrong > 0 {
                    return Err(format!(
                        "em3d `{}` on the {path} path: {wrong} values differ from the sequential run",
                        VERSIONS[i].name()
                    )
                    .into());
                }
                if batch > 0 {
                    per[i].push(ns / shape.iters as f64 / 1e3);
                    speedup[i].push(seq_ns / ns);
                }
            }
        }
        for (i, v) in VERSIONS.iter().enumerate() {
            o.figures.push(Figure::of(
                format!("{path}_{}_us_per_iter", v.name()),
                &mut per[i],
            ));
            let key = format!("{path}_{}_speedup", v.name());
            o.figures.push(Figure::of(key, &mut speedup[i]));
        }
        if !frames {
            // One more run, profiled: where the direct path's stores spend their time.
            let seq = amrq_bench::reference::median(&mut seq_us.clone()) * 1e3;
            let run = || r.run(Version::Store, shape.iters);
            crate::profile::measure(am, seq * shape.iters as f64, run)?.push(&mut o);
        }
        sc.all_spread_free(r.ghost)?;
        sc.all_spread_free(r.h)?;
        sc.all_spread_free(r.e)?;
    }
    o.figures
        .push(Figure::of("sequential_us_per_iter", &mut seq_us));
    o.figures.push(Figure::single("size", n as f64));
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    o.notes.push(format!(
        "{n} E and {n} H nodes per rank, {DEGREE} edges each, {:.0} % remote; µs per iteration (the longest rank's); sequential: the whole graph on one core, timed on rank 0 before each batch; speed-up: its time over the version's",
        shape.remote * 100.0
    ));
    Ok(Some(o))
}
