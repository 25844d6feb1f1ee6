//! Single-thread cost of the fast paths, one rank, no other core involved, so that
//! `valgrind --tool=callgrind` counts are repeatable:
//!
//! - default: enqueue a Short frame (one u64 arg) into the rank's own queue and take it
//!   back out in place (read_queue + release);
//! - `--am`: a whole Short AM round trip to itself: request, poll (the request handler
//!   replies), poll (the reply handler runs). The software cost of a round trip, both
//!   sides, without the cache-line transfers;
//! - `--am-call`: the same round trip as a call (`Am::call` and `Pending::wait`);
//! - `--am-oneway`: a one-word Short AM request to itself and one `Am::poll` that runs
//!   its handler (which counts it): the per-message cost of AM paper Table 2, send and
//!   receive + dispatch; with `--burst K`, K requests, then polls until all K ran (the
//!   per-message cost of a stream, where the receive loop takes frames in a row); with
//!   `--sender`, each request goes through a `Sender`, the path of the rank's other
//!   threads (its shared ring's compare-and-swap and the doorbell's fence), still on
//!   the rank's own thread so that the count is one thread's;
//! - `--ring-floor`: the one-word AM of `--am-oneway` written and read with the ring
//!   primitives alone (no channel, permission, fault, re-entrancy or One-poll): the
//!   floor the runtime's figure is read against (see `floor.rs`);
//! - `--empty-poll`: `Am::poll` when nothing has arrived: idle long (the queues armed,
//!   as One-poll arms its own), and within 1000 polls of a message (every ring looked at);
//! - `--empty-wait`: a round of `Am::wait_until` in which nothing arrives (the reply
//!   rings looked at, then the request rings, then the backoff's count);
//! - `--one-poll`: an empty One-poll over 1, 8 and 64 queues, with 1 and 8 ranks (the
//!   receiver idle, its doorbell armed), next to a plain scan of the same queues;
//! - `--hold`: entering and leaving an uncontended `hold_interrupts` section while a
//!   progress thread serves an Interrupt queue; then sections during which a frame
//!   arrives on that queue, so that its handler is deferred: the time from the end of
//!   the section to the end of the deferred handler (the progress thread is woken by
//!   the release, on the other core if it is free);
//! - `--section engine|rq|raw`: an uncontended section alone: a job's
//!   `EngineJob::hold`, RQ's `Interrupts::hold`, or a raw asymmetric section (a
//!   volatile store and a compiler fence each way), the floor.
//!
//! ```text
//! amrq-bench rq-loop [--quick] [--am | --am-call | --am-oneway [--burst K] [--sender] | --ring-floor | --empty-poll | --empty-wait | --one-poll | --hold | --section KIND] [--iters N] [--json]
//! ```
//! Last line: `rq_loop: ns_per_frame=…`, `am_loop: ns_per_round_trip=…`,
//! `call_loop: ns_per_call=…`,
//! `am_oneway: ns_per_message=…`, `ring_floor: ns_per_message=…` or
//! `empty_wait: ns_per_round=…` (medians).

mod floor;
mod sections;

use super::Flags;
use crate::reference::median;
use amrq::conduit::{threads, ReceivedFrame};
use amrq::prelude::*;
use amrq::rq::QueueId;
use std::cell::Cell;
use std::time::Instant;

/// Single-thread cost of the fast paths, one rank (for callgrind).
#[derive(Debug, Clone, clap::Args)]
#[command(group = clap::ArgGroup::new("mode").multiple(false))]
pub struct Args {
    /// A whole Short AM round trip to itself.
    #[arg(long, group = "mode")]
    pub am: bool,
    /// A call to itself and its wait (the `--am` round trip as a call).
    #[arg(long, group = "mode")]
    pub am_call: bool,
    /// One-word Short AMs to itself, each sent and handled (per message).
    #[arg(long, group = "mode")]
    pub am_oneway: bool,
    /// With `--am-oneway`: each request sent through a `Sender` (the path of the rank's
    /// other threads), on the rank's own thread.
    #[arg(long, requires = "am_oneway")]
    pub sender: bool,
    /// With `--am-oneway`, `--am` or `--am-call`: requests sent before waiting for them all.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=128))]
    pub burst: u64,
    /// The one-word AM of `--am-oneway` with the ring primitives alone (a floor).
    #[arg(long, group = "mode")]
    pub ring_floor: bool,
    /// An empty `Am::poll`.
    #[arg(long, group = "mode")]
    pub empty_poll: bool,
    /// A round of `Am::wait_until` in which nothing arrives.
    #[arg(long, group = "mode")]
    pub empty_wait: bool,
    /// An empty One-poll over 1–64 queues and 1–8 ranks.
    #[arg(long, group = "mode")]
    pub one_poll: bool,
    /// Entering and leaving a hold section; deferred handlers.
    #[arg(long, group = "mode")]
    pub hold: bool,
    /// An uncontended section alone: the engine's, RQ's, or the raw floor.
    #[arg(long, group = "mode", value_enum)]
    pub section: Option<sections::Section>,
    /// Iterations per batch.
    #[arg(long)]
    pub iters: Option<u64>,
    /// Batches; each figure is the median over them.
    #[arg(long, default_value_t = 11)]
    pub batches: u64,
}

impl Args {
    /// `--iters`, or `quick` with `--quick` and ten times it without.
    fn iters_or(&self, f: &Flags, quick: u64) -> u64 {
        self.iters
            .unwrap_or(if f.quick { quick } else { 10 * quick })
    }
}

/// Runs the command.
pub fn main(o: &Args, f: &Flags) -> ! {
    run(o, f);
    std::process::exit(0)
}

fn run(o: &Args, f: &Flags) {
    if o.am {
        am_loop(o, f)
    } else if o.am_call {
        call_loop(o, f)
    } else if o.am_oneway {
        am_oneway(o, f)
    } else if o.ring_floor {
        ring_floor(o, f)
    } else if o.empty_poll {
        empty_poll(o, f)
    } else if o.empty_wait {
        empty_wait(o, f)
    } else if o.one_poll {
        one_poll(o, f)
    } else if o.hold {
        hold(o, f)
    } else if let Some(kind) = o.section {
        sections::sections(o, f, kind)
    } else {
        rq_loop(o, f)
    }
}

/// Empty polls timed after each message of `rq-loop --empty-poll`'s busy case: fewer
/// than arm the queues.
const AFTER: u64 = 1000;

/// What `rank` returns, run as the one rank of a job on threads; a failure ends the
/// program with its message.
fn one_rank<T: Send>(rank: impl Fn(Setup) -> amrq::Result<T> + Sync) -> T {
    one_rank_of(Config::new(), rank)
}

/// [`one_rank`] with `cfg`.
fn one_rank_of<T: Send>(cfg: Config, rank: impl Fn(Setup) -> amrq::Result<T> + Sync) -> T {
    match cfg.threads(1, rank) {
        Ok(mut v) => v.swap_remove(0),
        Err(e) => super::fail(e),
    }
}

/// `--empty-wait`: `Am::wait_until` on a condition that holds after `AFTER` looks, with
/// nothing arriving: each round looks at the reply rings, then the request rings, in
/// the tight phase of the wait's backoff (what a rank waiting for a reply runs until
/// it comes).
#[inline(never)]
fn empty_wait(o: &Args, f: &Flags) {
    let iters = o.iters_or(f, 2_000_000);
    let (batches, waits) = (o.batches.max(1), (iters / AFTER).max(1));
    let mut v = one_rank(|c| empty_wait_rank(c, waits, batches));
    let ns = median(&mut v);
    println!("one rank, Am::wait_until with nothing arriving, {batches} batches of {waits} waits of {AFTER} rounds");
    f.summary("empty_wait", &[("ns_per_round", ns)]);
}

fn empty_poll(o: &Args, f: &Flags) {
    let iters = o.iters_or(f, 2_000_000);
    let batches = o.batches.max(1);
    let (armed, busy) = one_rank(|setup| {
        let mut table = HandlerTable::new();
        let count = table.request("count", |s: &Cell<u64>, _ctx, _m| {
            s.set(s.get() + 1);
            Ok(())
        });
        let job = setup.start(table, Cell::new(0))?;
        let am = job.am();
        let empty = || match am.poll() {
            Ok(0) => Ok(()),
            Ok(_) => super::fail("a poll found something in empty queues"),
            Err(e) => Err(e),
        };
        // Idle long, the queues are armed: one word per poll.
        let mut armed = Vec::new();
        for _ in 0..batches {
            let t = Instant::now();
            for _ in 0..iters {
                empty()?;
            }
            armed.push(t.elapsed().as_nanos() as f64 / iters as f64);
        }
        // Right after a message (fewer empty polls in a row than arm the queues):
        // every ring is looked at.
        let mut busy = Vec::new();
        for _ in 0..batches {
            let mut ns = 0;
            for _ in 0..(iters / AFTER).max(1) {
                am.request(0, count, &[])?;
                if am.poll()? != 1 {
                    super::fail("the request did not run");
                }
                let t = Instant::now();
                for _ in 0..AFTER {
                    empty()?;
                }
                ns += t.elapsed().as_nanos();
            }
            busy.push(ns as f64 / ((iters / AFTER).max(1) * AFTER) as f64);
        }
        Ok((median(&mut armed), median(&mut busy)))
    });
    println!("one rank, Am::poll on empty request and reply queues, {batches} batches of {iters}");
    println!("  idle long (queues armed):          {armed:.2} ns");
    println!("  within {AFTER} polls of a message:     {busy:.2} ns");
    f.summary(
        "empty_poll",
        &[("ns_per_poll", armed), ("busy_ns_per_poll", busy)],
    );
}

/// Median ns of an empty `one_poll` over `queues` queues of rank 0 of a `ranks`-rank job
/// (the other ranks' endpoints idle), armed when the queues are `one_poll` queues.
fn empty_one_poll(o: &Args, f: &Flags, ranks: usize, queues: usize, armed: bool) -> f64 {
    use amrq::config::QueueSpec;
    let iters = o.iters_or(f, 1_000_000);
    let mut cfg = {
        let mut c = Config::new();
        c.ring_slots.set(4);
        c
    };
    let ids: Vec<QueueId> = (0..queues)
        .map(|i| {
            let spec = QueueSpec::new(format!("q{i}"), 4);
            cfg.add(if armed { spec.one_poll() } else { spec })
        })
        .collect();
    let mut eps =
        threads::endpoints_for(ranks, &cfg.conduit_spec()).unwrap_or_else(|e| super::fail(e));
    let rq = amrq::rq::Rq::new(eps.swap_remove(0));
    let set = rq.poll_set(&ids).unwrap_or_else(|e| super::fail(e));
    let poll = || matches!(rq.one_poll(&set), Ok(None));
    for _ in 0..20_000 {
        poll(); // go idle: the doorbell arms after 8 Ki ring looks (`membarrier`) or 32 polls
    }
    if armed && rq.conduit().one_poll_armed() == 0 {
        super::fail("the doorbell did not arm");
    }
    let mut v = Vec::new();
    for _ in 0..o.batches.max(1) {
        let t = Instant::now();
        for _ in 0..iters {
            if !poll() {
                super::fail("a One-poll of empty queues found something");
            }
        }
        v.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    median(&mut v)
}

fn one_poll(o: &Args, f: &Flags) {
    let cases = [(1, 1), (1, 8), (1, 64), (8, 64)];
    let armed: Vec<f64> = cases
        .iter()
        .map(|&(r, q)| empty_one_poll(o, f, r, q, true))
        .collect();
    let scan = empty_one_poll(o, f, 8, 64, false);
    println!("empty One-poll, receiver idle (doorbell armed):");
    for (&(r, q), ns) in cases.iter().zip(&armed) {
        println!("  {q:>2} queues, {r} ranks: {ns:.2} ns");
    }
    println!("the same 64 queues × 8 ranks scanned ring by ring (no doorbell): {scan:.1} ns");
    f.summary(
        "one_poll",
        &[
            ("q1_ns", armed[0]),
            ("q8_ns", armed[1]),
            ("q64_ns", armed[2]),
            ("q64_ranks8_ns", armed[3]),
            ("scan_q64_ranks8_ns", scan),
        ],
    );
}

/// An uncontended critical section against a running (idle) progress thread.
fn hold(o: &Args, f: &Flags) {
    use amrq::config::{Delivery, QueueSpec};
    let iters = o.iters_or(f, 10_000_000);
    let mut cfg = Config::default();
    cfg.add(QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt));
    let mut eps = threads::endpoints_for(1, &cfg.conduit_spec()).unwrap_or_else(|e| super::fail(e));
    let mut rq = amrq::rq::Rq::new(eps.remove(0));
    let handled = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let h = handled.clone();
    let intr = rq
        .start_interrupts(move |_, _, _, _| {
            h.fetch_add(1, std::sync::atomic::Ordering::Release);
        })
        .unwrap_or_else(|| super::fail("no Interrupt queue"));
    let mut v = Vec::new();
    for _ in 0..o.batches.max(1) {
        let t = Instant::now();
        for _ in 0..iters {
            let section = intr.hold();
            std::hint::black_box(&section);
            drop(section);
        }
        v.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    let ns = median(&mut v);
    let scheme = if intr.asymmetric() {
        "stores + membarrier on the progress side"
    } else {
        "fences on both sides (no membarrier here)"
    };
    println!("hold_interrupts enter + exit, uncontended ({scheme}): {ns:.2} ns");
    let deferred_ns = deferred(f, &rq, &intr, &handled);
    println!(
        "a handler deferred by a section: {deferred_ns:.0} ns from the release to its end (median)"
    );
    f.summary(
        "hold",
        &[
            ("ns_per_section", ns),
            ("deferred_handler_ns", deferred_ns),
            ("asymmetric", f64::from(u8::from(intr.asymmetric()))),
        ],
    );
}

/// Median time from the end of a section to the end of the handler it deferred: a frame
/// is enqueued inside the section, which then lasts long enough (50 µs) for the
/// progress thread to find it and defer it.
fn deferred(
    f: &Flags,
    rq: &amrq::rq::Rq,
    intr: &amrq::rq::Interrupts,
    handled: &std::sync::atomic::AtomicU64,
) -> f64 {
    use std::sync::atomic::Ordering;
    let alarms = QueueId::new(QueueId::FIRST_USER);
    let rounds = if f.quick { 200 } else { 2000 };
    let mut v = Vec::with_capacity(rounds);
    for i in 0..rounds as u64 {
        let before = handled.load(Ordering::Acquire);
        let section = intr.hold();
        while !rq.enqueue(0, alarms, &[i], &[]).expect("own queue") {}
        let t = Instant::now();
        while t.elapsed().as_micros() < 50 {
            std::hint::spin_loop();
        }
        assert_eq!(
            handled.load(Ordering::Acquire),
            before,
            "ran inside a section"
        );
        drop(section);
        let released = Instant::now();
        // ORDERING: Acquire pairs with the handler's Release increment.
        while handled.load(Ordering::Acquire) == before {
            std::hint::spin_loop();
        }
        v.push(released.elapsed().as_nanos() as f64);
    }
    median(&mut v)
}

struct State {
    pong: ReplyHandler,
    got: Cell<u64>,
}
/// The job of the request → reply loops: `ping` replies its arg to `pong`, which
/// stores it in `got`.
fn ping_pong_job(setup: Setup) -> amrq::Result<(Job<State>, RequestHandler)> {
    let mut table = HandlerTable::new();
    let pong = table.reply("pong", |s: &State, m| {
        s.got.set(m.arg(0)?);
        Ok(())
    });
    let ping = table.request("ping", |s: &State, ctx, m| ctx.reply(s.pong, &[m.arg(0)?]));
    let state = State {
        pong,
        got: Cell::new(0),
    };
    Ok((setup.start(table, state)?, ping))
}

/// The job of the call loops: `echo` answers its arg.
fn echo_job(setup: Setup) -> amrq::Result<(Job<()>, Call<u64, u64>)> {
    let mut table = HandlerTable::new();
    let echo = table.call("echo", |_s: &(), _ctx, x: u64| Ok(x));
    Ok((setup.start(table, ())?, echo))
}

/// One rank's request → reply loop, out of line so that what surrounds it in the
/// binary (argument parsing, the job runner) cannot change how it is compiled.
#[inline(never)]
fn am_rank(setup: Setup, iters: u64, batches: u64) -> amrq::Result<Vec<f64>> {
    let (job, ping) = ping_pong_job(setup)?;
    let am = job.am();
    let mut per_batch = Vec::new();
    let mut i = 0;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters {
            i += 1;
            am.request(0, ping, &[i])?;
            am.wait_until(|s| s.got.get() >= i)?;
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    Ok(per_batch)
}

/// One rank's call loop: a call to itself that answers its arg, and its wait; returns
/// ns per call of each batch.
#[inline(never)]
fn call_rank(setup: Setup, iters: u64, batches: u64) -> amrq::Result<Vec<f64>> {
    let (job, echo) = echo_job(setup)?;
    let am = job.am();
    let mut per_batch = Vec::new();
    let mut i = 0;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters {
            i += 1;
            if am.call(0, echo, i)?.wait()? != i {
                super::fail("a call answered another's arg");
            }
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    Ok(per_batch)
}

/// One rank's windowed calls: `burst` calls to itself in flight, then each waited for
/// in turn; returns ns per call of each batch.
#[inline(never)]
fn call_burst_rank(setup: Setup, iters: u64, batches: u64, burst: u64) -> amrq::Result<Vec<f64>> {
    let (job, echo) = echo_job(setup)?;
    let am = job.am();
    let mut pending = std::collections::VecDeque::with_capacity(burst as usize);
    let mut per_batch = Vec::new();
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters / burst {
            for i in 0..burst {
                pending.push_back((i, am.call(0, echo, i)?));
            }
            while let Some((i, p)) = pending.pop_front() {
                if p.wait()? != i {
                    super::fail("a call answered another's arg");
                }
            }
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / (iters / burst * burst) as f64);
    }
    Ok(per_batch)
}

/// One rank's hand-written burst: `burst` requests to itself whose handlers reply,
/// then waits until the last reply ran; returns ns per request of each batch.
#[inline(never)]
fn am_burst_rank(setup: Setup, iters: u64, batches: u64, burst: u64) -> amrq::Result<Vec<f64>> {
    let (job, ping) = ping_pong_job(setup)?;
    let am = job.am();
    let mut per_batch = Vec::new();
    let mut i = 0;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters / burst {
            for _ in 0..burst {
                i += 1;
                am.request(0, ping, &[i])?;
            }
            am.wait_until(|s| s.got.get() >= i)?;
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / (iters / burst * burst) as f64);
    }
    Ok(per_batch)
}

#[inline(never)]
fn call_loop(o: &Args, f: &Flags) {
    let iters = o.iters_or(f, 200_000);
    let (batches, burst) = (o.batches.max(1), o.burst);
    let mut v = match burst {
        1 => one_rank(|c| call_rank(c, iters, batches)),
        _ => one_rank(|c| call_burst_rank(c, iters, batches, burst)),
    };
    println!("one rank, calls to itself and their waits, bursts of {burst}, {batches} batches of {iters}");
    f.summary("call_loop", &[("ns_per_call", median(&mut v))]);
}

/// One rank's empty waits: `waits` waits of `AFTER` rounds per batch; returns ns per
/// round of each batch.
#[inline(never)]
fn empty_wait_rank(setup: Setup, waits: u64, batches: u64) -> amrq::Result<Vec<f64>> {
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let am = job.am();
    let mut per_round = Vec::new();
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..waits {
            let mut looks = 0;
            am.wait_until(|_| {
                looks += 1;
                looks > AFTER
            })?;
        }
        per_round.push(t.elapsed().as_nanos() as f64 / (waits * AFTER) as f64);
    }
    Ok(per_round)
}

/// One rank's one-way loop: `burst` requests to itself, then polls until their
/// handlers ran; returns ns per message of each batch.
#[inline(never)]
fn oneway_rank(setup: Setup, iters: u64, batches: u64, burst: u64) -> amrq::Result<Vec<f64>> {
    let mut table = HandlerTable::new();
    let count = table.request("count", |s: &Cell<u64>, _ctx, m| {
        s.set(s.get() + m.arg(0)?);
        Ok(())
    });
    let job = setup.start(table, Cell::new(0))?;
    let am = job.am();
    let mut per_batch = Vec::new();
    let mut sent = 0u64;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters / burst {
            for _ in 0..burst {
                am.request(0, count, &[1])?;
            }
            sent += burst;
            while am.state().get() < sent {
                am.poll()?;
            }
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / (iters / burst * burst) as f64);
    }
    if am.state().get() != sent {
        super::fail("a request was handled twice");
    }
    Ok(per_batch)
}

/// [`oneway_rank`] with each request sent through a `Sender`, on the rank's own thread:
/// the loop and its set-up written out again, as sharing either (one loop over either
/// send, or the set-up in a function) moved the guarded loop's count by 3–4
/// instructions per message (callgrind).
#[inline(never)]
fn oneway_sender_rank(
    setup: Setup,
    iters: u64,
    batches: u64,
    burst: u64,
) -> amrq::Result<Vec<f64>> {
    let mut table = HandlerTable::new();
    let count = table.request("count", |s: &Cell<u64>, _ctx, m| {
        s.set(s.get() + m.arg(0)?);
        Ok(())
    });
    let job = setup.start(table, Cell::new(0))?;
    let mut sender = job.sender()?;
    let mut per_batch = Vec::new();
    let mut sent = 0u64;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters / burst {
            for _ in 0..burst {
                sender.request(0, count, &[1])?;
            }
            sent += burst;
            while job.state().get() < sent {
                job.poll()?;
            }
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / (iters / burst * burst) as f64);
    }
    if job.state().get() != sent {
        super::fail("a request was handled twice");
    }
    Ok(per_batch)
}

#[inline(never)]
fn am_oneway(o: &Args, f: &Flags) {
    let iters = o.iters_or(f, 200_000);
    let (batches, burst) = (o.batches.max(1), o.burst);
    let mut cfg = Config::new();
    let path = match o.sender {
        true => {
            cfg.sender_slots.set(cfg.ring_slots.get());
            "through a Sender on the rank's own thread"
        }
        false => "from the rank's own thread",
    };
    let mut v = match o.sender {
        true => one_rank_of(cfg, |c| oneway_sender_rank(c, iters, batches, burst)),
        false => one_rank_of(cfg, |c| oneway_rank(c, iters, batches, burst)),
    };
    println!(
        "one rank, one-word Short AM request to itself {path} and its handler, bursts of {burst}, {batches} batches of {iters}"
    );
    f.summary("am_oneway", &[("ns_per_message", median(&mut v))]);
}

#[inline(never)]
fn ring_floor(o: &Args, f: &Flags) {
    let iters = o.iters_or(f, 200_000);
    let batches = o.batches.max(1);
    let mut v = floor::floor_rank(iters, batches);
    println!(
        "ring primitives alone: a one-word Express frame written, one look at a reply and a request ring, a handler from a table, {batches} batches of {iters}"
    );
    f.summary("ring_floor", &[("ns_per_message", median(&mut v))]);
}

#[inline(never)]
fn am_loop(o: &Args, f: &Flags) {
    let iters = o.iters_or(f, 200_000);
    let batches = o.batches.max(1);
    let burst = o.burst;
    let mut v = match burst {
        1 => one_rank(|c| am_rank(c, iters, batches)),
        _ => one_rank(|c| am_burst_rank(c, iters, batches, burst)),
    };
    println!("one rank, Short AM request → reply to itself, bursts of {burst}, {batches} batches of {iters}");
    f.summary("am_loop", &[("ns_per_round_trip", median(&mut v))]);
}

#[inline(never)]
fn rq_loop(o: &Args, f: &Flags) {
    let iters = o.iters_or(f, 200_000);
    let batches = o.batches.max(1);
    let mut eps = threads::endpoints(1, &[256, 256, 256]).unwrap_or_else(|e| super::fail(e));
    let rq = amrq::rq::Rq::new(eps.remove(0));
    let q = QueueId::new(QueueId::FIRST_USER); // the first two are the AM queues
    let mut per_batch = Vec::new();
    let mut sum = 0u64;
    for _ in 0..batches {
        let t = Instant::now();
        for i in 0..iters {
            match rq.enqueue(0, q, &[i], &[]) {
                Ok(true) => {}
                other => super::fail(format!("enqueue: {other:?}")),
            }
            match rq.read_queue(q) {
                Ok(Some(f)) => {
                    sum = sum.wrapping_add(f.args()[0]);
                    f.release();
                }
                other => super::fail(format!("read_queue: {other:?}")),
            }
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    let expect = (iters * (iters - 1) / 2).wrapping_mul(batches);
    if sum != expect {
        super::fail(format!(
            "checksum {sum} != {expect}: frames lost or duplicated"
        ));
    }
    let ns = median(&mut per_batch);
    println!(
        "one rank, enqueue → read_queue → release of a Short frame, {batches} batches of {iters}"
    );
    f.summary("rq_loop", &[("ns_per_frame", ns)]);
}
