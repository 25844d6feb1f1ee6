//! Receive overhead per message against the arrival interval, Interrupt mode next to
//! Poll mode: the shape of Liu & Culler's Figure 7.
//!
//! Rank 1 runs a fixed compute workload (a few ms) while rank 0 sends it Short messages
//! (one u64) every Δ µs until rank 1 is done. In Interrupt mode a progress thread runs
//! the handler for each; in Poll mode the workload polls its queue every ~1 µs of work
//! and handles what it finds inline. Overhead per message = (time of the workload with
//! messages − time without) / messages received. With two cores, rank 0 takes one and
//! rank 1 the other, so rank 1's progress thread shares rank 1's core: the output says so.
//!
//! ```text
//! cargo run --release --example interrupts [-- --quick] [--threads] [--json]
//! ```
//! Last line: `interrupts: interrupt_overhead_ns=… poll_overhead_ns=…` at the shortest
//! interval with messages (the plateau), after the table.

mod common;

use amrq::conduit::mem::MemConduit;
use amrq::conduit::{Conduit, ReceivedFrame};
use amrq::config::{Delivery, QueueSpec};
use amrq::prelude::*;
use amrq::reference::median;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: interrupts [--quick] [--threads] [--json]";
/// Arrival intervals, µs.
const INTERVALS: [u64; 7] = [2, 5, 10, 20, 50, 100, 200];

fn main() {
    let o = common::opts(USAGE);
    let mut cfg = Config::from_env().unwrap_or_else(|e| common::fail(USAGE, &e));
    let irq = cfg.add(QueueSpec::new("irq", 1024).delivery(Delivery::Interrupt));
    let poll = cfg.add_queue(1024);
    common::run_ranks(&o, 2, &cfg, USAGE, |c| {
        rank_main(c, &o, irq, poll).map_err(|e| e.to_string())
    });
}

/// `n` steps of a dependent computation the compiler cannot drop.
#[inline(never)]
fn work(n: u64, x: &mut u64) {
    for _ in 0..n {
        *x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
}

fn rank_main(c: MemConduit, o: &common::Opts, irq: QueueId, poll: QueueId) -> Result<(), RqError> {
    if c.size() != 2 {
        common::fail(
            USAGE,
            &format!("interrupts runs on 2 ranks, not {}", c.size()),
        );
    }
    let (seg, _) = c.mapped_segment(1).expect("rank 1 exists");
    // SAFETY: rank 1's segment is mapped by both ranks, page aligned and zeroed at
    // creation; this program uses its first word as "rank 1 has finished its workload".
    let done = unsafe { &*seg.as_ptr().cast::<AtomicU64>() };
    let mut rq = Rq::new(c);
    let reps = if o.quick { 3 } else { 9 };
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let intr = if rq.rank() == 1 {
        Some(rq.start_interrupts(move |_, _, _, _| {
            r.fetch_add(1, Ordering::Relaxed);
        }))
    } else {
        None
    };
    // Calibrate the workload on rank 1: ~3 ms (1 ms with --quick), steps of ~1 µs.
    let mut x = 1u64;
    let t = Instant::now();
    work(1_000_000, &mut x);
    let per_step_ns = t.elapsed().as_nanos() as f64 / 1e6;
    let step = ((1000.0 / per_step_ns) as u64).max(1); // ≈ 1 µs
    let steps = if o.quick { 1000 } else { 3000 };
    let mut rows = Vec::new();
    let mut epoch = 0u64;
    for &interval in INTERVALS.iter().chain([0u64].iter()) {
        // interval 0: no messages (the baseline), measured last and first alike.
        let mut per_mode = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..reps {
            for (m, queue) in [(0usize, irq), (1, poll), (2, poll)] {
                let sending = interval != 0 && m < 2;
                epoch += 1;
                rq.conduit().barrier()?;
                if rq.rank() == 0 {
                    if sending {
                        let mut next = Instant::now();
                        while done.load(Ordering::Acquire) < epoch {
                            if Instant::now() >= next && rq.enqueue(1, queue, &[epoch], &[])? {
                                next += Duration::from_micros(interval);
                            }
                        }
                    }
                } else {
                    let before = received.load(Ordering::Relaxed);
                    let mut polled = 0u64;
                    let t = Instant::now();
                    for _ in 0..steps {
                        work(step, &mut x);
                        if m == 1 {
                            polled += rq.poll_queue(poll, 64, |f| -> Result<(), RqError> {
                                std::hint::black_box(f.args());
                                Ok(())
                            })? as u64;
                        }
                    }
                    let ns = t.elapsed().as_nanos() as f64;
                    // ORDERING: Release pairs with rank 0's Acquire load: stop sending.
                    done.store(epoch, Ordering::Release);
                    let msgs = if m == 0 {
                        received.load(Ordering::Relaxed) - before
                    } else {
                        polled
                    };
                    per_mode[m].push((ns, msgs));
                    // Drain what came after the workload (not counted).
                    while rq.poll_queue(poll, 1024, |_| -> Result<(), RqError> { Ok(()) })? > 0 {}
                }
                rq.conduit().barrier()?;
            }
        }
        rows.push((interval, per_mode));
    }
    drop(intr);
    if rq.rank() == 1 {
        // Baseline: the workload without messages, every interval pooled.
        let mut base: Vec<f64> = rows
            .iter()
            .flat_map(|(_, p)| p[2].iter().map(|&(ns, _)| ns))
            .collect();
        let base = median(&mut base);
        // `None` when no message arrived during any workload of the row (on 2 cores the
        // progress thread may not get a core within a workload at all).
        let overhead = |v: &[(f64, u64)]| {
            let mut per: Vec<f64> = v
                .iter()
                .filter(|&&(_, n)| n > 0)
                .map(|&(ns, n)| (ns - base) / n as f64)
                .collect();
            (!per.is_empty()).then(|| median(&mut per))
        };
        let how = if o.threads { "threads" } else { "processes" };
        let cores = amrq::util::affinity::host_cores();
        println!(
            "ranks: 2 {how}; rank 1 computes {:.1} ms while rank 0 sends one Short message every Δ µs",
            base / 1e6
        );
        if cores <= 2 {
            println!(
                "note: {cores} cores: rank 1's progress thread shares a core with a rank, so each interrupt also pays a context switch"
            );
        }
        println!(
            "  Δ µs   interrupt ns/msg   poll ns/msg   (messages per workload: interrupt / poll)"
        );
        let show = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
        let mut plateau = None;
        for (interval, p) in rows.iter().filter(|(i, _)| *i != 0) {
            let (i_ns, p_ns) = (overhead(&p[0]), overhead(&p[1]));
            if let (None, Some(a), Some(b)) = (plateau, i_ns, p_ns) {
                plateau = Some((a, b));
            }
            let n =
                |v: &[(f64, u64)]| v.iter().map(|&(_, n)| n).sum::<u64>() / v.len().max(1) as u64;
            println!(
                "  {interval:>4}   {:>16}   {:>11}   ({} / {})",
                show(i_ns),
                show(p_ns),
                n(&p[0]),
                n(&p[1])
            );
        }
        let Some((i_ns, p_ns)) = plateau else {
            common::fail(
                USAGE,
                "no interval had messages arrive during the workload in both modes",
            );
        };
        if i_ns < 0.0 || p_ns < 0.0 {
            println!("(a negative overhead is below the run-to-run noise of the workload: reported as 0)");
        }
        common::summary(
            "interrupts",
            o.json,
            &[
                ("interrupt_overhead_ns", i_ns.max(0.0)),
                ("poll_overhead_ns", p_ns.max(0.0)),
            ],
        );
    }
    Ok(())
}
