//! The progress engine (`Setup::start_engine`): requests and calls served while their
//! target computes and never polls, every one exactly once with checksums, as threads,
//! as processes under `amrun` and between two namespace hosts (`common/rig.rs`); the
//! same program with the engine off (`AMRQ_ENGINE=0`), served by its own waits;
//! sections atomic against handlers; a reply handler's error and a handler's panic
//! reaching the program; a rank killed while its peer's engine runs ending the job.

#![cfg(not(amrq_loom))]

#[path = "common/marker.rs"]
mod marker;
#[path = "common/rig.rs"]
mod rig;
#[path = "common/ucx.rs"]
mod ucx_common;

use amrq::conduit::{Conduit, PairRings};
use amrq::prelude::*;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Process tests spin: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What a rank's handlers add up, seen by the program without a section.
#[derive(Default)]
struct Tally {
    count: AtomicU64,
    sum: AtomicU64,
    calls: AtomicU64,
    /// Each source's next sequence number, and requests that came out of order.
    next: Vec<AtomicU64>,
    disorder: AtomicU64,
}

impl Tally {
    fn new(size: usize) -> Self {
        Self {
            next: (0..size).map(|_| AtomicU64::new(0)).collect(),
            ..Self::default()
        }
    }
}

fn mix(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) ^ 0x5bd1_e995
}

/// The value rank `src`'s `seq`th request to `dest` carries.
fn value(src: usize, dest: usize, seq: u64) -> u64 {
    mix(((src as u64) << 48) ^ ((dest as u64) << 32) ^ seq)
}

/// Work between sends: a loop the compiler keeps, no poll.
fn compute(rounds: u64) -> u64 {
    let mut x = rounds;
    for i in 0..rounds {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    x
}

/// Computes, never polling, until `done()` or 60 s (an error, not a hang).
fn compute_until(done: impl Fn() -> bool, what: &str) -> amrq::Result<()> {
    let start = Instant::now();
    while !done() {
        compute(1_000);
        if start.elapsed() > Duration::from_secs(60) {
            return Err(format!("not served within 60 s while computing: {what}").into());
        }
    }
    Ok(())
}

/// Every rank sends `per` requests and `per / 8` calls to every other rank, a few at a
/// time inside sections with computing between them; then computes (engine on) or
/// waits in a section (engine off) until its own handlers have run for every rank's
/// requests to it. Checks counts, checksums and every call's answer.
fn served(setup: Setup, per: u64) -> amrq::Result<()> {
    let tally = Arc::new(Tally::new(setup.size()));
    let mut t = SendHandlerTable::new();
    let add = t.request("add", |s: &Arc<Tally>, ctx, m| {
        let next = &s.next[ctx.source()];
        if next.fetch_add(1, Ordering::Relaxed) != m.arg(1)? {
            s.disorder.fetch_add(1, Ordering::Relaxed);
        }
        s.sum.fetch_add(m.arg(0)?, Ordering::Relaxed);
        s.count.fetch_add(1, Ordering::Release);
        Ok(())
    });
    let square = t.call("square", |s: &Arc<Tally>, ctx, x: u64| {
        s.calls.fetch_add(1, Ordering::Release);
        Ok(x.wrapping_mul(x) ^ ctx.source() as u64)
    });
    let mut job = setup.start_engine(t, tally.clone())?;
    let (me, size) = (job.rank(), job.size());
    let calls = per / 8;
    for seq in 0..per {
        {
            let held = job.hold();
            for dest in (0..size).filter(|&d| d != me) {
                held.request(dest, add, &[value(me, dest, seq), seq])?;
                if seq < calls {
                    let x = value(me, dest, seq);
                    let got = held.call(dest, square, x)?.wait()?;
                    if got != x.wrapping_mul(x) ^ me as u64 {
                        return Err(format!("call {seq} to {dest} answered {got}").into());
                    }
                }
            }
        }
        compute(200);
    }
    let want = per * (size as u64 - 1);
    let done = || tally.count.load(Ordering::Acquire) == want;
    if job.engine_runs() {
        compute_until(done, "requests")?;
    } else {
        job.hold().wait_until(|_| done())?;
    }
    let sum: u64 = (0..size)
        .filter(|&s| s != me)
        .flat_map(|s| (0..per).map(move |q| value(s, me, q)))
        .fold(0, u64::wrapping_add);
    let (got_sum, got_calls) = (
        tally.sum.load(Ordering::Relaxed),
        tally.calls.load(Ordering::Acquire),
    );
    let disorder = tally.disorder.load(Ordering::Relaxed);
    if got_sum != sum || got_calls != calls * (size as u64 - 1) || disorder != 0 {
        return Err(format!(
            "rank {me}: sum {got_sum} calls {got_calls} disorder {disorder}, expected {sum}, {} and 0",
            calls * (size as u64 - 1)
        )
        .into());
    }
    job.hold().barrier()?;
    job.finish()
}

fn config(engine: bool) -> Config {
    let mut cfg = Config::new();
    cfg.engine.set(engine);
    cfg.segment_bytes.set(1 << 20);
    cfg
}

#[test]
fn ranks_as_threads_are_served_while_they_compute_exactly_once() {
    for engine in [true, false] {
        config(engine)
            .threads(3, |s| served(s, 3_000))
            .unwrap_or_else(|e| panic!("engine {engine}: {e}"));
    }
}

#[test]
fn ranks_sharing_rings_are_served_exactly_once_in_order() {
    // One own ring per receiver: of the three senders to each rank, the first to send
    // 64 frames moves to it mid-stream, the others stay on the shared ring.
    for own in [0, 1] {
        let mut cfg = config(true);
        cfg.pair_rings.set(PairRings::Own(own));
        cfg.threads(4, |s| served(s, 3_000))
            .unwrap_or_else(|e| panic!("{own} own rings: {e}"));
    }
}

/// Rank 1 sends requests while rank 0 is inside a section: none runs until it ends;
/// then rank 0's engine runs them all while rank 0 computes.
#[test]
fn a_section_is_atomic_against_handlers_and_they_run_after_it() {
    config(true)
        .threads(2, |setup| -> amrq::Result<()> {
            let tally = Arc::new(Tally::default());
            let mut t = SendHandlerTable::new();
            let add = t.request("add", |s: &Arc<Tally>, _ctx, _m| {
                s.count.fetch_add(1, Ordering::Release);
                Ok(())
            });
            let mut job = setup.start_engine(t, tally.clone())?;
            // Both ranks enter a section before rank 1 sends: the barrier inside it.
            let held = job.hold();
            held.barrier()?;
            if held.rank() == 1 {
                for _ in 0..100 {
                    held.request(0, add, &[])?;
                }
                drop(held);
            } else {
                // The barrier's own polls may have run some (the program polled);
                // from here the program does not poll, and nothing runs.
                let before = tally.count.load(Ordering::Acquire);
                std::thread::sleep(Duration::from_millis(100)); // rank 1 sends meanwhile
                assert_eq!(
                    tally.count.load(Ordering::Acquire),
                    before,
                    "a handler ran inside the section"
                );
                drop(held);
                compute_until(
                    || tally.count.load(Ordering::Acquire) == 100,
                    "after the section",
                )?;
            }
            job.hold().barrier()?;
            job.finish()
        })
        .unwrap();
}

/// A reply handler that fails on the engine: the program's next poll returns its error.
#[test]
fn a_reply_handlers_error_on_the_engine_is_returned_by_the_next_poll() {
    config(true)
        .threads(2, |setup| -> amrq::Result<()> {
            struct S {
                ran: Arc<AtomicBool>,
                answer: ReplyHandler,
            }
            let ran = Arc::new(AtomicBool::new(false));
            let mut t = SendHandlerTable::new();
            let answer = t.reply("answer", |s: &S, _m| {
                s.ran.store(true, Ordering::Release);
                Err("the answer was not wanted".into())
            });
            let ask = t.request("ask", |s: &S, ctx, _m| ctx.reply(s.answer, &[]));
            let mut job = setup.start_engine(
                t,
                S {
                    ran: ran.clone(),
                    answer,
                },
            )?;
            if job.rank() == 0 {
                job.hold().request(1, ask, &[])?;
                compute_until(|| ran.load(Ordering::Acquire), "the reply")?;
                let e = job.hold().poll().expect_err("the reply handler's error");
                assert!(e.to_string().contains("the answer was not wanted"), "{e}");
            }
            job.hold().barrier()?;
            job.finish()
        })
        .unwrap();
}

/// A request its target cannot run (its handler fails there, on the engine): the
/// sender's wait returns the failure, naming the target and the handler.
#[test]
fn a_request_that_fails_on_the_engine_reaches_its_sender() {
    config(true)
        .threads(2, |setup| -> amrq::Result<()> {
            let ran = Arc::new(AtomicBool::new(false));
            let mut t = SendHandlerTable::new();
            let picky = t.request("picky", |ran: &Arc<AtomicBool>, _ctx, m| {
                ran.store(true, Ordering::Release);
                match m.arg(0)? {
                    0 => Err("zero refused".into()),
                    _ => Ok(()),
                }
            });
            let mut job = setup.start_engine(t, ran.clone())?;
            if job.rank() == 0 {
                let held = job.hold();
                held.request(1, picky, &[0])?;
                let Err(AmError::RequestFailed(f)) = held.wait_until(|_| false) else {
                    panic!("the failure was not returned");
                };
                let text = f.to_string();
                assert!(
                    text.contains("rank 1")
                        && text.contains("picky")
                        && text.contains("zero refused"),
                    "{text}"
                );
            } else {
                // Rank 1 does not poll until its engine has run the handler.
                compute_until(|| ran.load(Ordering::Acquire), "the handler")?;
            }
            job.hold().barrier()?;
            job.finish()
        })
        .unwrap();
}

/// Counts its wakes.
struct CountingWaker(AtomicU64);

impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// Calls made from a job with an engine, their answers landed by the engine outside
/// sections: a thousand in flight from each rank, every answer right; and a call
/// awaited as a future, whose task is woken by the engine when the answer lands (it
/// stays pending until then, and never wakes itself).
#[test]
fn calls_land_by_the_engine_and_wake_their_task() {
    config(true)
        .threads(2, |setup| -> amrq::Result<()> {
            let mut t = SendHandlerTable::new();
            let square = t.call("square", |_s: &(), ctx, x: u64| {
                Ok(x.wrapping_mul(x) ^ ctx.source() as u64)
            });
            let slow = t.call("slow", |_s: &(), _ctx, x: u64| {
                std::thread::sleep(Duration::from_millis(200));
                Ok(x + 1)
            });
            let mut job = setup.start_engine(t, ())?;
            let (me, peer) = (job.rank(), 1 - job.rank());
            let answers: Vec<_> = (0..1000u64)
                .map(|x| job.call(peer, square, x))
                .collect::<Result<_, _>>()?;
            for (x, a) in answers.into_iter().enumerate() {
                let x = x as u64;
                assert_eq!(a.wait()?, x.wrapping_mul(x) ^ me as u64);
            }
            let mut call = std::pin::pin!(job.call(peer, slow, 41)?);
            let wakes = Arc::new(CountingWaker(AtomicU64::new(0)));
            let waker = std::task::Waker::from(wakes.clone());
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(
                call.as_mut().poll(&mut cx).is_pending(),
                "answered before the handler slept"
            );
            assert_eq!(wakes.0.load(Ordering::Acquire), 0, "the task woke itself");
            compute_until(|| wakes.0.load(Ordering::Acquire) > 0, "the wake-up")?;
            match call.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(answer) => assert_eq!(answer?, 42),
                std::task::Poll::Pending => panic!("woken, yet not answered"),
            }
            job.hold().barrier()?;
            job.finish()
        })
        .unwrap();
}

/// A call whose target fails before answering: its wait ends with the failure instead
/// of waiting for an answer no engine will land.
#[test]
fn a_call_to_a_rank_that_failed_ends_with_the_failure() {
    static ENDED: AtomicBool = AtomicBool::new(false);
    let out = config(true).threads(2, |setup| -> amrq::Result<()> {
        let mut t = SendHandlerTable::new();
        let never = t.call("never", |_s: &(), _ctx, x: u64| Ok(x));
        let mut job = setup.start_engine(t, ())?;
        job.hold().barrier()?;
        if job.rank() == 1 {
            panic!("rank 1 fails before answering");
        }
        // Rank 1's engine serves until its unwinding ends and the rank is marked
        // failed: call only once it is.
        let start = Instant::now();
        while job.hold().rq().conduit().check_peers().is_ok() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "rank 1 never marked failed"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // The send may find rank 1 gone already; else the wait does.
        let e = match job.call(1, never, 7) {
            Ok(call) => call.wait().expect_err("an answer from a failed rank"),
            Err(e) => e,
        };
        assert!(e.to_string().contains("rank 1"), "{e}");
        ENDED.store(true, Ordering::Release);
        Ok(())
    });
    assert!(out.is_err(), "rank 1's panic is the job's failure");
    assert!(ENDED.load(Ordering::Acquire), "rank 0's call did not end");
}

/// A handler that panics on the engine: the rank's `finish` panics with it, and the
/// job names the rank.
#[test]
fn a_handlers_panic_on_the_engine_reaches_the_rank() {
    let out = config(true).threads(1, |setup| -> amrq::Result<()> {
        let ran = Arc::new(AtomicBool::new(false));
        let mut t = SendHandlerTable::new();
        let boom = t.request("boom", |ran: &Arc<AtomicBool>, _ctx, _m| {
            ran.store(true, Ordering::Release);
            panic!("a handler's bug")
        });
        let mut job = setup.start_engine(t, ran.clone())?;
        job.hold().request(0, boom, &[])?;
        compute_until(|| ran.load(Ordering::Acquire), "the handler")?;
        job.finish() // joins the engine, whose panic it resumes
    });
    let e = out.expect_err("the panic");
    assert!(e.to_string().contains("a handler's bug"), "{e}");
}

// ------------------------------------------------------------------ processes

/// The processes' part.
#[test]
fn engine_rank() {
    let Ok(what) = std::env::var("AMRQ_TEST_ENGINE_JOB") else {
        return;
    };
    Config::from_env().expect("config").run(move |setup| {
        let rank = setup.rank();
        match what.as_str() {
            "served" => served(setup, 2_000)?,
            _ => killed(setup)?,
        }
        match marker::mark_ran(rank) {
            true => Ok(()),
            false => Err("cannot leave word that this rank ran".into()),
        }
    })
}

/// Rank 1 kills itself (SIGKILL) after a barrier; rank 0 computes with its engine
/// running, calls rank 1 (the call's wait ends with the failure), then waits in a
/// section for a request that never comes.
fn killed(setup: Setup) -> amrq::Result<()> {
    let mut t = SendHandlerTable::new();
    let never = t.request("never", |n: &AtomicU64, _ctx, _m| {
        n.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    let echo = t.call("echo", |_n: &AtomicU64, _ctx, x: u64| Ok(x));
    let mut job = setup.start_engine(t, AtomicU64::new(0))?;
    job.hold().barrier()?;
    if job.rank() == 1 {
        // SAFETY: a plain system call on this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    compute(50_000_000);
    // A call to the dead rank ends with its failure, as the wait below does.
    if let Ok(call) = job.call(1, echo, 7) {
        let e = call.wait().expect_err("an answer from a killed rank");
        eprintln!("the call to the killed rank: {e}");
    }
    let _ = never;
    job.hold().wait_until(|n| n.load(Ordering::Relaxed) > 0)?;
    Err("a request from a killed rank arrived".into())
}

/// `what` as `ranks` processes under `amrun`, with `env`: exit status, stdout, stderr.
fn under_amrun(ranks: usize, what: &str, engine: bool, token: &str) -> (i32, String, String) {
    let env = [
        ("AMRQ_TEST_ENGINE_JOB", what.to_string()),
        ("AMRQ_ENGINE", (engine as u8).to_string()),
        ("AMRQ_SEGMENT_SIZE", "1M".to_string()),
    ];
    let amrun = env!("CARGO_BIN_EXE_amrun");
    marker::under_amrun(amrun, "engine_rank", ranks, &env, token)
}

#[test]
fn ranks_as_processes_are_served_while_they_compute_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for engine in [true, false] {
        let token = marker::token();
        let (code, out, err) = under_amrun(3, "served", engine, &token);
        assert_eq!(code, 0, "engine {engine}: stdout {out}\nstderr {err}");
        marker::all_ran(&token, 3);
    }
}

#[test]
fn a_killed_rank_ends_the_job_while_its_peers_engine_runs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let (code, out, err) = under_amrun(2, "killed", true, &marker::token());
    assert_ne!(code, 0, "stdout {out}\nstderr {err}");
    assert!(err.contains("rank 1"), "the killed rank is named: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "ended in {:?}",
        started.elapsed()
    );
}

#[test]
fn ranks_on_two_hosts_are_served_while_they_compute_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let test = "ranks_on_two_hosts_are_served_while_they_compute_exactly_once";
    if ucx_common::loopback_or_skip(test).is_none() {
        return;
    }
    let Some(rig) = rig::Rig::or_skip(2, test) else {
        return;
    };
    let token = marker::token();
    let mut l = rig.launcher(2, &token, Duration::from_secs(180));
    l.env.push(("AMRQ_TEST_ENGINE_JOB".into(), "served".into()));
    l.env.push(("AMRQ_SEGMENT_SIZE".into(), "1M".into()));
    let exe = std::env::current_exe().expect("test binary");
    let out = l
        .run(exe.as_os_str(), &marker::child_args("engine_rank"))
        .expect("job starts");
    assert_eq!(out.code, 0, "{:?}", out.failure);
    marker::all_ran(&token, 4);
}
