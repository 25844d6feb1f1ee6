//! The progress engine (`Setup::start_engine`), three measurements on ranks 0 and 1 (any
//! further ranks compute meanwhile, their engines running, to oversubscribe the cores):
//!
//! - *sections*: rank 0 enters and leaves an uncontended section ([`EngineJob::hold`]
//!   and its drop, the engine running and idle) against a raw asymmetric section — a
//!   plain store and a compiler fence to enter, the same to leave, with nothing on the
//!   other side — in alternating batches of the same run.
//! - *attentiveness*: rank 0 calls rank 1 (a one-word call; rank 0 polls for the
//!   answer without a pause, in a section) while rank 1 computes and never polls, so
//!   that its engine answers; and, alternating, while rank 1 polls without a pause in
//!   a section, so that its own polls answer (the reference). Calls
//!   are spaced by 0–200 µs so that they find the engine spinning, asleep or just
//!   woken. Each call's round trip is timed; medians, 99th percentiles and maxima.
//! - *overhead against interval* (Liu & Culler's Figure 7, at the level where AM
//!   handlers run): rank 1 runs a fixed computation while rank 0 sends it one-word
//!   requests every Δ µs until it is done. Engine mode: rank 1 computes without
//!   polling, the engine runs the handlers. Polling mode: rank 1 computes inside a
//!   section and polls after every ~1 µs step. Overhead per message = (time with
//!   messages − time without) / messages handled, beside the model
//!   min(Δ, one engine wake-up).
//!
//! ```text
//! amrq-bench engine [--quick] [--ranks N] [--threads] [--json]
//! ```
//! Last line (rank 0): `engine: hold_ns=… raw_section_ns=… hold_ratio=… rtt_poll_ns=…
//! rtt_engine_ns=… rtt_engine_p99_ns=… rtt_engine_max_ns=… attentiveness_ratio=…
//! engine_overhead_2us_ns=… poll_overhead_2us_ns=… engine_plateau_ns=…`.

use super::{Flags, Ranks};
use crate::clock::{work, work_per_ns};
use crate::reference::median;
use amrq::prelude::*;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arrival intervals of the overhead measurement, µs.
const INTERVALS: [u64; 7] = [2, 5, 10, 20, 50, 100, 200];

/// The progress engine: sections, attentiveness, overhead against interval.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

/// What every rank's handlers touch, shared with its program (seen without a section).
#[derive(Default)]
struct Shared {
    /// Requests handled by this rank.
    hits: AtomicU64,
    /// Set by a `stop` request: leave the current phase.
    stop: AtomicBool,
    /// Bumped by a `next` request: rank 1 finished a run of the overhead measurement.
    runs_done: AtomicU64,
    /// `arrive` requests from the partner (rank 0's is 1, rank 1's is 0): their
    /// meeting points, which leave ranks 2.. out (a barrier would wait for them).
    arrivals: AtomicU64,
    /// The overhead table, sent by rank 1 to rank 0 (one [`Line`] per interval).
    lines: std::sync::Mutex<Vec<Line>>,
}

/// One interval's figures of the overhead measurement, medians over the runs: the
/// interval (µs), the computation's time with no messages, with messages in engine and
/// in polling mode (ns), and the overhead per message in each mode (ns).
#[derive(Debug, Clone, Copy, Default)]
struct Line {
    interval: u64,
    base_ns: f64,
    engine_ns: f64,
    poll_ns: f64,
    engine_per_msg: f64,
    poll_per_msg: f64,
}

impl Line {
    fn to_words(self) -> [u64; 6] {
        [
            self.interval,
            self.base_ns.to_bits(),
            self.engine_ns.to_bits(),
            self.poll_ns.to_bits(),
            self.engine_per_msg.to_bits(),
            self.poll_per_msg.to_bits(),
        ]
    }

    fn of_words(w: [u64; 6]) -> Self {
        Self {
            interval: w[0],
            base_ns: f64::from_bits(w[1]),
            engine_ns: f64::from_bits(w[2]),
            poll_ns: f64::from_bits(w[3]),
            engine_per_msg: f64::from_bits(w[4]),
            poll_per_msg: f64::from_bits(w[5]),
        }
    }
}

/// Runs the command.
pub fn main(_o: &Args, f: &Flags) -> ! {
    let mut cfg = Config::new();
    cfg.ring_slots.set_default(1024);
    cfg.segment_bytes.set_default(1 << 20);
    f.run(cfg, Ranks::Default(2), |setup| rank_main(setup, f))
}

/// The handlers.
struct Handlers {
    hit: RequestHandler,
    stop: RequestHandler,
    run_done: RequestHandler,
    line: RequestHandler,
    arrive: RequestHandler,
    echo: Call<u64, u64>,
}

/// Ranks 0 and 1 meet: each tells the other it arrived and waits for the other's word.
struct Pair {
    partner: usize,
    met: u64,
}

impl Pair {
    fn meet(&mut self, job: &mut EngineJob<Arc<Shared>>, h: &Handlers) -> amrq::Result<()> {
        self.met += 1;
        let held = job.hold();
        held.request(self.partner, h.arrive, &[])?;
        let met = self.met;
        Ok(held.wait_until(|s| s.arrivals.load(Ordering::Acquire) >= met)?)
    }
}

fn rank_main(setup: Setup, f: &Flags) -> amrq::Result<()> {
    let threads = setup.config().threads.get();
    let shared = Arc::new(Shared::default());
    let mut t = SendHandlerTable::new();
    let h = Handlers {
        hit: t.request("hit", |s: &Arc<Shared>, _ctx, _m| {
            s.hits.fetch_add(1, Ordering::Release);
            Ok(())
        }),
        stop: t.request("stop", |s: &Arc<Shared>, _ctx, _m| {
            s.stop.store(true, Ordering::Release);
            Ok(())
        }),
        run_done: t.request("run_done", |s: &Arc<Shared>, _ctx, _m| {
            s.runs_done.fetch_add(1, Ordering::Release);
            Ok(())
        }),
        line: t.request("line", |s: &Arc<Shared>, _ctx, m| {
            let mut w = [0u64; 6];
            for (i, w) in w.iter_mut().enumerate() {
                *w = m.arg(i)?;
            }
            s.lines
                .lock()
                .map_err(|_| "a poisoned lock")?
                .push(Line::of_words(w));
            Ok(())
        }),
        arrive: t.request("arrive", |s: &Arc<Shared>, _ctx, _m| {
            s.arrivals.fetch_add(1, Ordering::Release);
            Ok(())
        }),
        echo: t.call("echo", |_s: &Arc<Shared>, _ctx, x: u64| Ok(x ^ 1)),
    };
    let mut job = setup.start_engine(t, shared.clone())?;
    if !job.engine_runs() {
        return Err("engine: AMRQ_ENGINE=0 leaves nothing to measure".into());
    }
    let (me, size) = (job.rank(), job.size());
    job.hold().barrier()?;
    if me >= 2 {
        // Oversubscription: compute until rank 0 says stop, the engine serving.
        let mut x = 1;
        while !shared.stop.load(Ordering::Acquire) {
            work(10_000, &mut x);
        }
        std::hint::black_box(x);
        return job.finish();
    }
    let mut pair = Pair {
        partner: 1 - me,
        met: 0,
    };
    let sections = if me == 0 {
        Some(sections(&mut job, f))
    } else {
        None
    };
    pair.meet(&mut job, &h)?;
    let rtt = attentiveness(&mut job, &shared, &h, &mut pair, f)?;
    pair.meet(&mut job, &h)?;
    if let Some(rows) = overhead(&mut job, &shared, &h, &mut pair, f)? {
        let held = job.hold();
        for line in lines(&rows) {
            held.request(0, h.line, &line.to_words())?;
        }
    }
    if me == 0 {
        let held = job.hold();
        held.wait_until(|s| s.lines.lock().map_or(0, |l| l.len()) == INTERVALS.len())?;
        for r in 2..size {
            held.request(r, h.stop, &[])?;
        }
    }
    pair.meet(&mut job, &h)?;
    if let (Some((hold, raw)), Some(rtt)) = (sections, rtt) {
        let lines = shared.lines.lock().map_err(|_| "a poisoned lock")?.clone();
        report(f, threads, size, (hold, raw), rtt, &lines);
    }
    job.finish()
}

/// Median ns of an uncontended section and of a raw asymmetric one, alternating batches.
fn sections(job: &mut EngineJob<Arc<Shared>>, f: &Flags) -> (f64, f64) {
    let iters = if f.quick { 1_000_000 } else { 10_000_000 };
    // A static: a local flag no other thread can see, the compiler may drop.
    static FLAG: AtomicBool = AtomicBool::new(false);
    let flag = &FLAG;
    let (mut held, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..if f.quick { 5 } else { 11 } {
        let t = Instant::now();
        for _ in 0..iters {
            drop(job.hold());
        }
        held.push(t.elapsed().as_nanos() as f64 / iters as f64);
        let t = Instant::now();
        for _ in 0..iters {
            // Volatile: two stores of a loop the compiler would otherwise fold away.
            // SAFETY: the flag's own byte, written by this thread only.
            unsafe { std::ptr::write_volatile(flag.as_ptr(), true) };
            compiler_fence(Ordering::SeqCst);
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(flag.as_ptr(), false) };
            compiler_fence(Ordering::SeqCst);
        }
        raw.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    (median(&mut held), median(&mut raw))
}

/// Round trips of a call to rank 1 computing (its engine answers) and waiting (its
/// polls answer), alternating; rank 0's samples (ns), `None` on rank 1.
fn attentiveness(
    job: &mut EngineJob<Arc<Shared>>,
    shared: &Shared,
    h: &Handlers,
    pair: &mut Pair,
    f: &Flags,
) -> amrq::Result<Option<(Vec<f64>, Vec<f64>)>> {
    let per = if f.quick { 300 } else { 3000 };
    let (mut engine, mut polled) = (Vec::new(), Vec::new());
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for round in 0..if f.quick { 4 } else { 10 } {
        let computing = round % 2 == 0;
        shared.stop.store(false, Ordering::Release);
        pair.meet(job, h)?;
        if job.rank() == 1 {
            if computing {
                let mut x = 1;
                while !shared.stop.load(Ordering::Acquire) {
                    work(1_000, &mut x); // no poll, no section
                }
                std::hint::black_box(x);
            } else {
                // Polling without a pause: the reference a computing rank is read
                // against.
                let held = job.hold();
                while !shared.stop.load(Ordering::Acquire) {
                    held.poll()?;
                }
            }
            continue;
        }
        for i in 0..per {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let gap = Duration::from_nanos(seed % 200_000);
            let t = Instant::now();
            while t.elapsed() < gap {
                std::hint::spin_loop();
            }
            let held = job.hold();
            let t = Instant::now();
            let pending = held.call(1, h.echo, i)?;
            while !pending.is_ready() {
                held.poll()?; // no sleep: the round trip is rank 1's
            }
            let got = pending.wait()?;
            let ns = t.elapsed().as_nanos() as f64;
            if got != i ^ 1 {
                return Err(format!("echo answered {got} to {i}").into());
            }
            if computing { &mut engine } else { &mut polled }.push(ns);
        }
        job.hold().request(1, h.stop, &[])?;
    }
    Ok((job.rank() == 0).then_some((engine, polled)))
}

/// One row of the overhead measurement: the interval (µs, 0 for the baseline) and, per
/// mode (engine, polling), each run's (ns, messages handled).
type Row = (u64, [Vec<(f64, u64)>; 2]);

/// Liu & Culler's Figure 7 at the AM level; rank 1's rows, `None` on rank 0.
fn overhead(
    job: &mut EngineJob<Arc<Shared>>,
    shared: &Shared,
    h: &Handlers,
    pair: &mut Pair,
    f: &Flags,
) -> amrq::Result<Option<Vec<Row>>> {
    let step = (1000.0 * work_per_ns()).max(1.0) as u64; // ≈ 1 µs
    let steps = if f.quick { 2_000 } else { 5_000 };
    let reps = if f.quick { 3 } else { 7 };
    let mut rows = Vec::new();
    let mut x = 1u64;
    for &interval in INTERVALS.iter().chain([0].iter()) {
        let mut modes: [Vec<(f64, u64)>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..reps {
            for (m, runs) in modes.iter_mut().enumerate() {
                let polling = m == 1;
                pair.meet(job, h)?;
                if job.rank() == 0 {
                    let goal = shared.runs_done.load(Ordering::Acquire) + 1;
                    let held = job.hold();
                    let mut next = Instant::now();
                    while shared.runs_done.load(Ordering::Acquire) < goal {
                        if interval != 0 && Instant::now() >= next {
                            held.request(1, h.hit, &[])?;
                            next += Duration::from_micros(interval);
                        }
                        held.poll()?;
                    }
                    continue;
                }
                let before = shared.hits.load(Ordering::Acquire);
                let t = Instant::now();
                if polling {
                    let held = job.hold();
                    for _ in 0..steps {
                        work(step, &mut x);
                        held.poll()?;
                    }
                } else {
                    for _ in 0..steps {
                        work(step, &mut x);
                    }
                }
                let ns = t.elapsed().as_nanos() as f64;
                let got = shared.hits.load(Ordering::Acquire) - before;
                runs.push((ns, got));
                let held = job.hold();
                held.request(0, h.run_done, &[])?;
                // What came after the run ends is drained before the next one.
                held.poll()?;
            }
        }
        rows.push((interval, modes));
    }
    std::hint::black_box(x);
    Ok((job.rank() == 1).then_some(rows))
}

/// Each interval's medians, from rank 1's runs.
fn lines(rows: &[Row]) -> Vec<Line> {
    let mut base: Vec<f64> = rows
        .iter()
        .filter(|(i, _)| *i == 0)
        .flat_map(|(_, m)| m.iter().flatten().map(|&(ns, _)| ns))
        .collect();
    let base_ns = median(&mut base);
    rows.iter()
        .filter(|(i, _)| *i != 0)
        .map(|(interval, [engine, poll])| {
            let time = |v: &[(f64, u64)]| median(&mut v.iter().map(|r| r.0).collect::<Vec<_>>());
            let per_msg = |v: &[(f64, u64)]| {
                let mut per: Vec<f64> = v
                    .iter()
                    .filter(|r| r.1 > 0)
                    .map(|&(ns, n)| (ns - base_ns) / n as f64)
                    .collect();
                median(&mut per)
            };
            Line {
                interval: *interval,
                base_ns,
                engine_ns: time(engine),
                poll_ns: time(poll),
                engine_per_msg: per_msg(engine),
                poll_per_msg: per_msg(poll),
            }
        })
        .collect()
}

/// The `q` quantile of `v` (sorted here).
fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(((v.len() as f64 - 1.0) * q).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

/// Prints the tables and the summary line (rank 0, which has rank 1's rows only if the
/// ranks are threads: otherwise rank 1 prints the overhead table itself).
fn report(
    f: &Flags,
    threads: bool,
    size: usize,
    (hold, raw): (f64, f64),
    (mut engine, mut polled): (Vec<f64>, Vec<f64>),
    lines: &[Line],
) {
    let how = super::placement(threads);
    println!(
        "ranks: {size} {how}; each rank's engine thread shares its rank's core{}",
        if size > 2 {
            " (oversubscribed: ranks 2.. compute meanwhile)"
        } else {
            ""
        }
    );
    println!("section (EngineJob::hold + drop, engine idle): {hold:.2} ns; raw asymmetric section (store + compiler fence, twice): {raw:.2} ns; ratio {:.2}", hold / raw);
    let (em, pm) = (median(&mut engine), median(&mut polled));
    let (e99, emax) = (quantile(&mut engine, 0.99), quantile(&mut engine, 1.0));
    let (p99, pmax) = (quantile(&mut polled, 0.99), quantile(&mut polled, 1.0));
    println!("call round trip to rank 1, {} calls each:", engine.len());
    println!("  rank 1 polling in a section (its polls answer): median {pm:.0} ns, p99 {p99:.0}, max {pmax:.0}");
    println!("  rank 1 computing, never polling (its engine answers): median {em:.0} ns, p99 {e99:.0}, max {emax:.0}");
    // The model: while messages come faster than one wake-up of the engine, it takes
    // those that arrive meanwhile in the same turn, so each costs at most the interval;
    // from there on each pays a whole wake-up: the plateau, the median overhead over
    // the intervals of 50 µs and more.
    let mut plateau: Vec<f64> = lines
        .iter()
        .filter(|l| l.interval >= 50)
        .map(|l| l.engine_per_msg)
        .collect();
    let plateau = median(&mut plateau);
    println!(
        "rank 1 computes {:.2} ms with no messages; rank 0 sends a one-word request every interval:",
        lines.first().map_or(0.0, |l| l.base_ns / 1e6)
    );
    println!(
        "interval µs | engine: ms, ns/msg | model ns/msg | polling: ms, ns/msg | engine vs polling"
    );
    for l in lines {
        println!(
            "{:>11} | {:>6.2}, {:>8.0} | {:>12.0} | {:>7.2}, {:>7.0} | {:+.1} %",
            l.interval,
            l.engine_ns / 1e6,
            l.engine_per_msg,
            (l.interval as f64 * 1e3).min(plateau),
            l.poll_ns / 1e6,
            l.poll_per_msg,
            (l.engine_ns / l.poll_ns - 1.0) * 100.0
        );
    }
    let first = lines.first().copied().unwrap_or_default();
    f.summary(
        "engine",
        &[
            ("hold_ns", hold),
            ("raw_section_ns", raw),
            ("hold_ratio", hold / raw),
            ("rtt_poll_ns", pm),
            ("rtt_poll_p99_ns", p99),
            ("rtt_engine_ns", em),
            ("rtt_engine_p99_ns", e99),
            ("rtt_engine_max_ns", emax),
            ("attentiveness_ratio", em / pm),
            ("engine_overhead_2us_ns", first.engine_per_msg),
            ("poll_overhead_2us_ns", first.poll_per_msg),
            ("engine_plateau_ns", plateau),
        ],
    );
}
