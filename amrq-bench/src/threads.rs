//! *sending-threads*: the message rate of T threads of one rank sending Short requests
//! to a peer through their `Sender`s, against T single-threaded ranks doing the same,
//! for T = 1, 2, 4, … up to the ranks less one (default: one rank per core, plus the
//! receiver), alternating the two in every batch. The same program on a larger machine
//! plots the rate against T.
//!
//! Rank 0 receives; its handler counts. In `threads` mode rank 1 runs T workers
//! (`Am::run_workers`), each sending [`PER_SENDER`] one-word requests to rank 0; in
//! `ranks` mode ranks 1..=T each send as many from their own thread (`Am::request`).
//! Timed at rank 0: from the end of a barrier to the handling of the last request
//! (`*_msgs_per_s`). Each sender also times its own sends (`*_ns_per_send`, the
//! median over the senders of a run): what a send costs its thread while the others
//! send too; `second_thread_cost_ratio` is the threads' per-send time with T = 2 over
//! T = 1, and `threads_over_ranks_T` the two modes' rates, each per batch.

use crate::fixture::{bench_error, require_ranks};
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::prelude::*;
use std::cell::{Cell, RefCell};
use std::time::Instant;

/// Requests each sender sends per run (a tenth with `--quick`).
pub const PER_SENDER: u64 = 200_000;
/// Slots of each rank's ring for its threads (as the AM rings).
pub const SENDER_SLOTS: u64 = 256;

/// What rank 0 holds.
struct State {
    /// Requests handled.
    count: Cell<u64>,
    /// Each sender's ns per send, as they report it.
    reports: RefCell<Vec<f64>>,
}

/// The sender counts of a run: powers of two below `max`, then `max`.
///
/// ```
/// assert_eq!(amrq_bench::threads::counts(6), [1, 2, 4, 6]);
/// assert_eq!(amrq_bench::threads::counts(2), [1, 2]);
/// ```
pub fn counts(max: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..).map(|i| 1 << i).take_while(|&t| t < max).collect();
    v.push(max);
    v
}

/// Sets the ring the threads send into.
pub fn configure(cfg: &mut Config) {
    cfg.sender_slots.set(SENDER_SLOTS);
}

/// *sending-threads*: the figures above, on rank 0.
pub fn sending_threads(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "sending-threads", 3, true)?;
    let mut t = HandlerTable::new();
    let hit = t.request("hit", |s: &State, _ctx, _m| {
        s.count.set(s.count.get() + 1);
        Ok(())
    });
    let report = t.request("report", |s: &State, _ctx, m| {
        s.reports.borrow_mut().push(f64::from_bits(m.arg(0)?));
        Ok(())
    });
    let state = State {
        count: Cell::new(0),
        reports: RefCell::new(Vec::new()),
    };
    let job = setup.start(t, state)?;
    let (me, size) = (job.rank(), job.size());
    let per = p.pick(PER_SENDER / 10, PER_SENDER);
    let ts = counts(size - 1);
    // Per T: (threads rate, ranks rate, threads ns/send, ranks ns/send, rate ratio).
    let mut runs: Vec<[Vec<f64>; 5]> = ts.iter().map(|_| Default::default()).collect();
    let mut second = Vec::new();
    let expected = Cell::new(0u64);
    for batch in 0..=p.batches {
        let mut per_send_1 = None;
        for (i, &t) in ts.iter().enumerate() {
            let one = |threads: bool| -> amrq::Result<(f64, f64)> {
                // Rank 0 may handle the first requests in the barrier: it counts on.
                expected.set(expected.get() + t as u64 * per);
                job.barrier()?;
                let start = Instant::now();
                if me == 0 {
                    let want = expected.get();
                    job.wait_until(|s| s.count.get() == want && s.reports.borrow().len() == t)?;
                    let rate = (t as u64 * per) as f64 / start.elapsed().as_secs_f64();
                    let mut r = job.state().reports.take();
                    return Ok((rate, crate::reference::median(&mut r)));
                }
                match threads {
                    true if me == 1 => {
                        job.run_workers(t, |_, mut sender| -> Result<(), AmError> {
                            let start = Instant::now();
                            for _ in 0..per {
                                sender.request(0, hit, &[1])?;
                            }
                            let ns = start.elapsed().as_nanos() as f64 / per as f64;
                            sender.request(0, report, &[ns.to_bits()])
                        })?;
                    }
                    false if me <= t => {
                        let start = Instant::now();
                        for _ in 0..per {
                            job.request(0, hit, &[1])?;
                        }
                        let ns = start.elapsed().as_nanos() as f64 / per as f64;
                        job.request(0, report, &[ns.to_bits()])?;
                    }
                    _ => {}
                }
                Ok((0.0, 0.0))
            };
            // Alternating which goes first.
            let ((tr, tn), (rr, rn)) = match batch % 2 == 0 {
                true => {
                    let th = one(true)?;
                    (th, one(false)?)
                }
                false => {
                    let ra = one(false)?;
                    (one(true)?, ra)
                }
            };
            if me == 0 && batch > 0 {
                for (v, x) in runs[i].iter_mut().zip([tr, rr, tn, rn, tr / rr]) {
                    v.push(x);
                }
                match t {
                    1 => per_send_1 = Some(tn),
                    2 => second.extend(per_send_1.map(|one| tn / one)),
                    _ => {}
                }
            }
        }
    }
    job.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    if runs.iter().any(|r| r[0].is_empty()) {
        return Err(bench_error("sending-threads: no batch measured").into());
    }
    let mut o = Outcome::new("sending-threads", size, p.clock.overhead_ns());
    let mut curves = [(); 2].map(|()| Vec::new());
    for (&t, r) in ts.iter().zip(runs.iter_mut()) {
        let [tr, rr, tn, rn, ratio] = r;
        let keys = [
            format!("threads_{t}_msgs_per_s"),
            format!("ranks_{t}_msgs_per_s"),
            format!("threads_{t}_ns_per_send"),
            format!("ranks_{t}_ns_per_send"),
            format!("threads_over_ranks_{t}"),
        ];
        let [k0, k1, k2, k3, k4] = keys;
        curves[0].push(Point::of(t as f64, tr));
        curves[1].push(Point::of(t as f64, rr));
        o.figures.extend([
            Figure::of(k0, tr),
            Figure::of(k1, rr),
            Figure::of(k2, tn),
            Figure::of(k3, rn),
            Figure::of(k4, ratio),
        ]);
    }
    if !second.is_empty() {
        o.figures
            .push(Figure::of("second_thread_cost_ratio", &mut second));
    }
    for (name, points) in [
        ("threads of one rank", &curves[0]),
        ("single-threaded ranks", &curves[1]),
    ] {
        o.series.push(Series {
            name: name.into(),
            x: "senders".into(),
            y: "requests handled per second at rank 0".into(),
            points: points.clone(),
        });
    }
    o.notes.push(format!(
        "{per} one-word Short requests per sender per run; threads: T workers of rank 1 through their Senders; ranks: ranks 1..=T from their own threads; rate timed at rank 0 from a barrier to the last handled; ns_per_send timed by each sender over its own sends (median of a run's senders)"
    ));
    let cores = amrq::util::affinity::host_cores();
    if size + 1 > cores {
        o.notes.push(format!(
            "{cores} cores: the receiver, the senders and (threads mode) rank 1's own thread share them, so senders and receiver take turns"
        ));
    }
    Ok(Some(o))
}
