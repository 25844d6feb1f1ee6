//! Liu & Culler §6.1, the cost of polling.
//!
//! - *Unsuccessful poll*: rank 0 calls each poll variant on empty queues (rank 1
//!   waits in a conduit barrier, which sends no frames): `Am::poll` (requests and
//!   replies), `Rq::read_queue` on the request queue and on the reply queue alone,
//!   `Am::wait_until` whose condition already holds (it returns without polling), a
//!   poll then that wait (`poll_wait`), and `Rq::one_poll` over 1, 8 and 64 queues (the
//!   receiver idle, its doorbell armed).
//! - *Successful poll* (§6.1.2): rank 1 sends 1024 requests with a delay Δ between
//!   sends; rank 0 polls until it has handled all, counting its polls. The time per
//!   message grows with Δ while the time per poll falls; where the two curves cross,
//!   each poll receives one message: that time is the cost of a successful poll.

use crate::clock::{work, work_per_ns};
use crate::fixture::{bench_error, require_ranks, BenchAm};
use crate::report::{Figure, Outcome, Point, Series};
use crate::unloaded::BURST;
use crate::Params;
use amrq::conduit::Conduit;
use amrq::prelude::*;
use amrq::rq::QueueId;

/// One-poll queues the polling benchmark needs in the job's configuration.
pub const ONE_POLL_QUEUES: usize = 64;

/// Adds the [`ONE_POLL_QUEUES`] probe queues to `cfg`.
pub fn configure(cfg: &mut Config) {
    for i in 0..ONE_POLL_QUEUES {
        cfg.add(amrq::config::QueueSpec::new(format!("probe{i}"), 4).one_poll());
    }
}

/// Δ between sends, ns.
const DELAYS: [f64; 9] = [0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0];

/// The x where two piecewise-linear curves on the same xs cross, and their value
/// there; `None` if they do not cross.
///
/// ```
/// use amrq_bench::polling::crossing;
/// let xs = [0.0, 10.0, 20.0];
/// let (x, y) = crossing(&xs, &[5.0, 15.0, 25.0], &[20.0, 10.0, 5.0]).unwrap();
/// assert!((x - 7.5).abs() < 1e-9 && (y - 12.5).abs() < 1e-9);
/// ```
pub fn crossing(xs: &[f64], a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    (1..xs.len()).find_map(|i| {
        let (d0, d1) = (a[i - 1] - b[i - 1], a[i] - b[i]);
        if d0 == 0.0 {
            return Some((xs[i - 1], a[i - 1]));
        }
        if d0.signum() == d1.signum() && d1 != 0.0 {
            return None;
        }
        let f = d0 / (d0 - d1);
        Some((
            xs[i - 1] + f * (xs[i] - xs[i - 1]),
            a[i - 1] + f * (a[i] - a[i - 1]),
        ))
    })
}

/// `<name>_ns`: the median ns of one of the `polls(n)` that `polls` makes in a row, each
/// of which must find nothing (then it returns `true`).
///
/// The loop is the variant's own (each call site writes `(0..n).all(..)`), so that each
/// poll is compiled into a loop as a program's is: a loop here calling a closure per
/// poll measured the call as well wherever the closure was too large to inline (the
/// AM poll, whose drain is inline: three times `rq-loop --empty-poll`'s figure), and
/// not where it was small (One-poll).
fn unsuccessful(
    name: &str,
    p: &Params,
    iters: u64,
    polls: impl Fn(u64) -> bool,
) -> amrq::Result<Figure> {
    // The One-poll doorbell arms after 8 Ki ring looks (`membarrier`) or 32 polls.
    polls(20_000);
    let mut v = Vec::new();
    for _ in 0..p.batches {
        let t = p.clock.start();
        if !polls(iters) {
            return Err(
                bench_error(format!("{name}: an unsuccessful poll found something")).into(),
            );
        }
        v.push(p.clock.since(t) / iters as f64);
    }
    Ok(Figure::of(format!("{name}_ns"), &mut v))
}

/// *polling*: `<variant>_ns` for each unsuccessful poll, the successful-poll series
/// and `successful_poll_ns` at their crossing.
pub fn polling(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "polling", 2, false)?;
    let b = BenchAm::new(setup)?;
    let me = b.rank();
    let barrier = || b.am.rq().conduit().barrier().map_err(RqError::from);
    let iters = p.pick(200_000, 2_000_000);
    let probes: Vec<QueueId> = (0..ONE_POLL_QUEUES)
        .map(|i| QueueId::new(QueueId::FIRST_USER + i))
        .collect();
    let one = b.am.rq().poll_set(&probes[..1])?;
    let eight = b.am.rq().poll_set(&probes[..8])?;
    let all = b.am.rq().poll_set(&probes)?;
    let rq = b.am.rq();
    let mut o = Outcome::new("polling", 2, p.clock.overhead_ns());
    barrier()?;
    if me == 0 {
        let f = &mut o.figures;
        f.push(unsuccessful("am_poll", p, iters, |n| {
            (0..n).all(|_| matches!(b.am.poll(), Ok(0)))
        })?);
        f.push(unsuccessful("request_queue", p, iters, |n| {
            (0..n).all(|_| matches!(rq.read_queue(QueueId::AM_REQUEST), Ok(None)))
        })?);
        f.push(unsuccessful("reply_queue", p, iters, |n| {
            (0..n).all(|_| matches!(rq.read_queue(QueueId::AM_REPLY), Ok(None)))
        })?);
        f.push(unsuccessful("wait_done", p, iters, |n| {
            (0..n).all(|_| b.am.wait_until(|_| true).is_ok())
        })?);
        f.push(unsuccessful("poll_wait", p, iters, |n| {
            (0..n).all(|_| matches!(b.am.poll(), Ok(0)) && b.am.wait_until(|_| true).is_ok())
        })?);
        f.push(unsuccessful("one_poll_1", p, iters, |n| {
            (0..n).all(|_| matches!(rq.one_poll(&one), Ok(None)))
        })?);
        f.push(unsuccessful("one_poll_8", p, iters, |n| {
            (0..n).all(|_| matches!(rq.one_poll(&eight), Ok(None)))
        })?);
        f.push(unsuccessful("one_poll_64", p, iters, |n| {
            (0..n).all(|_| matches!(rq.one_poll(&all), Ok(None)))
        })?);
    }
    barrier()?;
    // Successful polls.
    let per_ns = work_per_ns();
    let (mut per_msg, mut per_poll) = (Vec::new(), Vec::new());
    let mut expect = 0;
    let mut x = 1u64;
    for &delay in &DELAYS {
        let steps = (delay * per_ns) as u64;
        let (mut m, mut q) = (Vec::new(), Vec::new());
        for _ in 0..p.batches {
            barrier()?;
            expect += BURST;
            if me == 1 {
                for _ in 0..BURST {
                    b.am.request(0, b.bump, &[])?;
                    work(steps, &mut x);
                }
            } else {
                let mut polls = 0u64;
                let t = p.clock.start();
                while b.am.state().count.get() < expect {
                    b.am.poll()?;
                    polls += 1;
                }
                let ns = p.clock.since(t);
                m.push(ns / BURST as f64);
                q.push(ns / polls as f64);
            }
        }
        if me == 0 {
            per_msg.push(Point::of(delay, &mut m));
            per_poll.push(Point::of(delay, &mut q));
        }
    }
    b.am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    let ys = |v: &[Point]| v.iter().map(|p| p.median).collect::<Vec<f64>>();
    match crossing(&DELAYS, &ys(&per_msg), &ys(&per_poll)) {
        Some((_, y)) => o.figures.push(Figure::single("successful_poll_ns", y)),
        None => o.notes.push(format!(
            "the per-message and per-poll curves do not cross between Δ = 0 and {} ns: no successful-poll figure",
            DELAYS[DELAYS.len() - 1]
        )),
    }
    for (name, points) in [
        ("successful polls: time per message", per_msg),
        ("successful polls: time per poll", per_poll),
    ] {
        o.series.push(Series {
            name: name.into(),
            x: "Δ between sends, ns".into(),
            y: "ns".into(),
            points,
        });
    }
    o.notes
        .push("the successful poll includes the handler (a counter increment)".into());
    Ok(Some(o))
}
