//! Liu & Culler §6.2, interrupts.
//!
//! - *toggle*: entering and leaving a `hold` section (amrq's interrupt disable and
//!   enable, Remote Queues' atomicity) while the progress thread serves an Interrupt
//!   queue, the pair and each apart (Table 10); and the time from the end of a section
//!   to the end of the handler it deferred.
//! - *overhead vs interval* (Figure 7): rank 1 runs a fixed computation while rank 0
//!   sends it Short frames every Δ µs until it is done. In Interrupt mode a progress
//!   thread runs the handler; in Poll mode the computation polls every ~1 µs.
//!   Overhead per message = (time with messages − time without) / messages received.
//!   With two cores the progress thread shares rank 1's core: the report says so.

use crate::clock::{work, work_per_ns};
use crate::fixture::{bench_error, require_ranks};
use crate::reference::median;
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::conduit::{Conduit, ReceivedFrame};
use amrq::config::{Delivery, QueueSpec};
use amrq::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arrival intervals, µs.
const INTERVALS: [u64; 7] = [2, 5, 10, 20, 50, 100, 200];

/// The queues this benchmark needs: an Interrupt queue and a Poll queue.
pub fn configure(cfg: &mut Config) -> (QueueId, QueueId) {
    let irq = cfg.add(QueueSpec::new("irq", 1024).delivery(Delivery::Interrupt));
    (irq, cfg.add_queue(1024))
}

/// *interrupts*, reported by rank 1: `hold_ns` (a section entered and left),
/// `hold_alone_ns` (`hold` on an open section), `release_alone_ns` (the difference),
/// `deferred_handler_ns`, the overhead series with Figure 7's model, `interrupt_overhead_ns`
/// / `poll_overhead_ns` at the shortest interval and `interrupt_plateau_ns`.
pub fn interrupts(
    setup: Setup,
    p: &Params,
    irq: QueueId,
    poll: QueueId,
) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "interrupts", 2, false)?;
    let mut job = setup.start(HandlerTable::<()>::new(), ())?;
    let done_at = job.rma().alloc_symmetric(8, 8)?;
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let intr = job
        .start_interrupts(move |_, _, _, _| {
            // ORDERING: Release pairs with the Acquire loads that count arrivals.
            r.fetch_add(1, Ordering::Release);
        })
        .ok_or_else(|| bench_error("no Interrupt queue configured"))?;
    let rq = job.rq();
    let me = rq.rank();
    let (seg, _) = rq.conduit().mapped_segment(1).expect("rank 1 exists");
    // SAFETY: `done_at` is an 8-byte, 8-aligned symmetric allocation in rank 1's
    // segment, which both ranks map; this benchmark uses it alone, as "rank 1 has
    // finished its work", and rank 1 zeroes it before the first barrier.
    let done = unsafe { &*seg.as_ptr().add(done_at).cast::<AtomicU64>() };
    if me == 1 {
        done.store(0, Ordering::Relaxed);
    }
    let mut o = Outcome::new("interrupts", 2, p.clock.overhead_ns());
    rq.conduit().barrier().map_err(RqError::from)?;
    if me == 1 {
        let iters = p.pick(1_000_000, 10_000_000);
        let (mut pair, mut disable, mut enable) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..p.batches {
            let t = p.clock.start();
            for _ in 0..iters {
                // Entering and leaving are atomic stores and loads: nothing to elide,
                // and no `black_box` (its stack stores were half of what was timed).
                drop(intr.hold());
            }
            let both = p.clock.since(t) / iters as f64;
            // Table 10 apart: `hold` alone, its guard forgotten so that the section
            // stays open (every call after the first is the paper's "pipeline", which
            // costs what a toggle does: `hold` stores its flag without reading it); one
            // `drop` closes it. The release alone is the pair less this, per batch.
            let t = p.clock.start();
            for _ in 0..iters {
                std::mem::forget(intr.hold());
            }
            let hold = p.clock.since(t) / iters as f64;
            drop(intr.hold());
            pair.push(both);
            disable.push(hold);
            enable.push(both - hold);
        }
        o.figures.push(Figure::of("hold_ns", &mut pair));
        o.figures.push(Figure::of("hold_alone_ns", &mut disable));
        o.figures.push(Figure::of("release_alone_ns", &mut enable));
        let mut v = Vec::new();
        for i in 0..p.pick(100, 1000) {
            let before = received.load(Ordering::Acquire);
            let section = intr.hold();
            while !rq.enqueue(1, irq, &[i], &[])? {}
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop(); // long enough for the progress thread to defer it
            }
            if received.load(Ordering::Acquire) != before {
                return Err(bench_error("a handler ran inside a hold section").into());
            }
            let released = p.clock.start();
            drop(section); // runs the deferred handler on this thread
                           // ORDERING: Acquire pairs with the handler's Release increment.
            while received.load(Ordering::Acquire) == before {
                std::hint::spin_loop();
            }
            v.push(p.clock.since(released));
        }
        o.figures.push(Figure::of("deferred_handler_ns", &mut v));
    }
    rq.conduit().barrier().map_err(RqError::from)?;
    // Overhead vs interval.
    let mut x = 1u64;
    let step = (1000.0 * work_per_ns()).max(1.0) as u64; // ≈ 1 µs
    let steps = p.pick(1000, 3000);
    let reps = p.pick(3, 9);
    let mut rows = Vec::new();
    let mut epoch = 0u64;
    for &interval in INTERVALS.iter().chain([0u64].iter()) {
        // Interval 0: no messages, the baseline.
        let mut per_mode = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..reps {
            for (m, queue) in [(0usize, irq), (1, poll), (2, poll)] {
                let sending = interval != 0 && m < 2;
                epoch += 1;
                rq.conduit().barrier().map_err(RqError::from)?;
                if me == 0 {
                    if sending {
                        let mut next = Instant::now();
                        // ORDERING: Acquire pairs with rank 1's Release store of `done`.
                        while done.load(Ordering::Acquire) < epoch {
                            if Instant::now() >= next && rq.enqueue(1, queue, &[epoch], &[])? {
                                next += Duration::from_micros(interval);
                            }
                        }
                    }
                } else {
                    let before = received.load(Ordering::Acquire);
                    let mut polled = 0u64;
                    let t = p.clock.start();
                    for _ in 0..steps {
                        work(step, &mut x);
                        if m == 1 {
                            polled += rq.poll_queue(poll, 64, |f| -> Result<(), RqError> {
                                std::hint::black_box(f.args());
                                Ok(())
                            })? as u64;
                        }
                    }
                    let ns = p.clock.since(t);
                    // ORDERING: Release pairs with rank 0's Acquire load: stop sending.
                    done.store(epoch, Ordering::Release);
                    let msgs = if m == 0 {
                        received.load(Ordering::Acquire) - before
                    } else {
                        polled
                    };
                    per_mode[m].push((ns, msgs));
                    while rq.poll_queue(poll, 1024, |_| -> Result<(), RqError> { Ok(()) })? > 0 {}
                }
                rq.conduit().barrier().map_err(RqError::from)?;
            }
        }
        rows.push((interval, per_mode));
    }
    drop(intr);
    // Rank 1 measured everything and reports.
    if me == 0 {
        return Ok(None);
    }
    let mut base: Vec<f64> = rows
        .iter()
        .flat_map(|(_, p)| p[2].iter().map(|&(ns, _)| ns))
        .collect();
    let base = median(&mut base);
    let overhead = |v: &[(f64, u64)]| -> Option<Vec<f64>> {
        let per: Vec<f64> = v
            .iter()
            .filter(|&&(_, n)| n > 0)
            .map(|&(ns, n)| (ns - base) / n as f64)
            .collect();
        (!per.is_empty()).then_some(per)
    };
    let mut series = [Vec::new(), Vec::new()];
    for (interval, modes) in rows.iter().filter(|(i, _)| *i != 0) {
        for (m, s) in series.iter_mut().enumerate() {
            if let Some(mut v) = overhead(&modes[m]) {
                s.push(Point::of(*interval as f64, &mut v));
            }
        }
    }
    for (key, s) in [
        ("interrupt_overhead_ns", &series[0]),
        ("poll_overhead_ns", &series[1]),
    ] {
        if let Some(first) = s.first() {
            o.figures.push(Figure::single(key, first.median));
        }
    }
    // Figure 7's model: while messages come faster than one interrupt's cost, the
    // handler's dispatch loop takes the ones that arrive meanwhile, so each costs the
    // interval; from there on each pays a whole interrupt. That cost is the plateau:
    // the median over the intervals of at least 50 µs.
    let mut plateau: Vec<f64> = series[0]
        .iter()
        .filter(|p| p.x >= 50.0)
        .map(|p| p.median)
        .collect();
    let model: Vec<Point> = if plateau.is_empty() {
        Vec::new()
    } else {
        let one = median(&mut plateau);
        o.figures.push(Figure::single("interrupt_plateau_ns", one));
        series[0]
            .iter()
            .map(|p| {
                let y = (p.x * 1e3).min(one);
                Point {
                    x: p.x,
                    median: y,
                    min: y,
                    max: y,
                }
            })
            .collect()
    };
    let [irq_pts, poll_pts] = series;
    for (name, points) in [
        ("Interrupt mode", irq_pts),
        ("Poll mode", poll_pts),
        ("Interrupt mode, model: min(interval, one interrupt)", model),
    ] {
        o.series.push(Series {
            name: format!("receive overhead per message, {name}"),
            x: "arrival interval, µs".into(),
            y: "ns per message".into(),
            points,
        });
    }
    o.notes.push(format!(
        "rank 1 computes {:.1} ms while rank 0 sends; overhead = (time with messages − without) / messages",
        base / 1e6
    ));
    o.notes.push(
        "Poll-mode overheads smaller than the workload's run-to-run noise (tens of µs over a few ms) come out negative or scattered, more so at long intervals where few messages arrive"
            .into(),
    );
    if o.cores <= 2 {
        o.notes.push(format!(
            "{} cores: rank 1's progress thread shares rank 1's core, so each interrupt also pays a context switch, and a frame deferred by a section waits for the scheduler to run the progress thread",
            o.cores
        ));
    }
    Ok(Some(o))
}
