//! Returning from a rank's main is always safe: the rank serves its peers until every
//! rank has returned and every message sent has been handled, then leaves. As threads
//! and as processes under `amrun` (2 ranks, and 8 on 2 cores); a wait or a barrier that
//! can never end because the others have returned ends with an error saying so.
//!
//! Jobs of processes re-execute this test binary filtered to [`exit_rank`], whose body
//! runs only there (`AMRQ_TEST_EXIT` names what to do).

#![cfg(not(amrq_loom))]

#[path = "common/marker.rs"]
mod marker;
#[path = "common/rig.rs"]
mod rig;
#[path = "common/ucx.rs"]
mod ucx_common;

use amrq::prelude::*;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Requests every rank sends its right neighbour before returning at once.
const FLOOD: u64 = 20_000;

/// What the handlers count; on drop (after the job's end) it says so on stdout, or
/// into `tally` for ranks as threads.
struct Counts {
    rank: Cell<usize>,
    asked: Cell<u64>,
    answered: Cell<u64>,
    answer: Cell<Option<ReplyHandler>>,
    tally: Option<Arc<[AtomicU64; 2]>>,
}

impl Drop for Counts {
    fn drop(&mut self) {
        let (asked, answered) = (self.asked.get(), self.answered.get());
        match &self.tally {
            Some(t) => {
                t[0].fetch_add(asked, Ordering::Relaxed);
                t[1].fetch_add(answered, Ordering::Relaxed);
            }
            None => println!("rank={} asked={asked} answered={answered}", self.rank.get()),
        }
    }
}

/// Every rank floods its right neighbour with requests, each answered, and returns
/// without waiting for anything: the job's end must still see every one handled.
fn flood_and_return(setup: Setup, tally: Option<Arc<[AtomicU64; 2]>>) -> amrq::Result<()> {
    let mut t = HandlerTable::new();
    let answer = t.reply("answer", |c: &Counts, _m| {
        c.answered.set(c.answered.get() + 1);
        Ok(())
    });
    let ask = t.request("ask", |c: &Counts, ctx, _m| {
        c.asked.set(c.asked.get() + 1);
        ctx.reply(c.answer.get().expect("set before any request"), &[])
    });
    let counts = Counts {
        rank: Cell::new(0),
        asked: Cell::new(0),
        answered: Cell::new(0),
        answer: Cell::new(Some(answer)),
        tally,
    };
    let job = setup.start(t, counts)?;
    job.state().rank.set(job.rank());
    let right = (job.rank() + 1) % job.size();
    for _ in 0..FLOOD {
        job.request(right, ask, &[])?;
    }
    Ok(()) // no barrier, no wait: the job's end does it
}

/// Rank 0 returns at once; rank 1 waits for a message nobody sends.
fn wait_for_nothing(setup: Setup) -> amrq::Result<()> {
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    if job.rank() != 0 {
        job.wait_until(|_| false)?;
    }
    Ok(())
}

/// Rank 1 returns at once; the others enter a barrier.
fn barrier_without_one(setup: Setup) -> amrq::Result<()> {
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    if job.rank() != 1 {
        job.barrier()?;
    }
    Ok(())
}

/// Rank 2 leaves early (`Job::leave`); the others return and must not wait for it.
fn one_leaves_early(setup: Setup) -> amrq::Result<()> {
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    job.barrier()?;
    if job.rank() == 2 {
        job.leave();
    }
    Ok(())
}

/// The processes' part.
#[test]
fn exit_rank() {
    let Ok(what) = std::env::var("AMRQ_TEST_EXIT") else {
        return;
    };
    Config::new().run(move |setup| {
        let rank = setup.rank();
        match what.as_str() {
            "flood" => flood_and_return(setup, None)?,
            "nothing" => wait_for_nothing(setup)?,
            "leave" => one_leaves_early(setup)?,
            _ => barrier_without_one(setup)?,
        }
        match marker::mark_ran(rank) {
            true => Ok(()),
            false => Err("cannot leave word that this rank ran".into()),
        }
    })
}

/// `what` as `ranks` processes under `amrun`: its exit status, stdout and stderr.
fn under_amrun(ranks: usize, what: &str, token: &str) -> (i32, String, String) {
    let env = [("AMRQ_TEST_EXIT", what.to_string())];
    let amrun = env!("CARGO_BIN_EXE_amrun");
    marker::under_amrun(amrun, "exit_rank", ranks, &env, token)
}

#[test]
fn returning_with_messages_in_flight_is_safe_as_threads() {
    for ranks in [2, 8] {
        let tally = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let t = tally.clone();
        let out = Config::new().threads(ranks, |setup| flood_and_return(setup, Some(t.clone())));
        assert!(out.is_ok(), "{}", out.unwrap_err().chain());
        let all = FLOOD * ranks as u64;
        assert_eq!(
            (
                tally[0].load(Ordering::Relaxed),
                tally[1].load(Ordering::Relaxed)
            ),
            (all, all),
            "{ranks} ranks: requests handled, answers handled"
        );
    }
}

#[test]
fn returning_with_messages_in_flight_is_safe_as_processes() {
    for ranks in [2, 8] {
        let token = marker::token();
        let (code, stdout, stderr) = under_amrun(ranks, "flood", &token);
        assert_eq!(code, 0, "{ranks} ranks: {stderr}");
        for r in 0..ranks {
            let line = format!("rank={r} asked={FLOOD} answered={FLOOD}");
            assert!(
                stdout.contains(&line),
                "{ranks} ranks: no {line:?} in {stdout}"
            );
        }
        marker::all_ran(&token, ranks);
    }
}

#[test]
fn a_wait_for_a_message_never_sent_ends_once_the_others_returned() {
    let out = Config::new().threads(2, wait_for_nothing);
    let e = out.expect_err("rank 1 waits for nothing");
    assert!(
        matches!(e, amrq::Error::Am(AmError::NothingCanArrive { .. })),
        "{}",
        e.chain()
    );
    let (code, _, stderr) = under_amrun(2, "nothing", &marker::token());
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("this wait can never end"), "{stderr}");
}

#[test]
fn a_barrier_a_returned_rank_never_enters_ends_naming_it() {
    let out = Config::new().threads(2, barrier_without_one);
    let e = out.expect_err("rank 0's barrier needs rank 1");
    assert!(
        matches!(e, amrq::Error::Am(AmError::PeerReturned { rank: 1 })),
        "{}",
        e.chain()
    );
    let (code, _, stderr) = under_amrun(2, "barrier", &marker::token());
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("rank 1 has returned from its main"),
        "{stderr}"
    );
}

#[test]
fn a_rank_that_leaves_early_is_not_waited_for() {
    let out = Config::new().threads(3, one_leaves_early);
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
    let token = marker::token();
    let (code, _, stderr) = under_amrun(3, "leave", &token);
    assert_eq!(code, 0, "{stderr}");
    marker::all_ran(&token, 3);
}

/// Across two hosts (2 + 2 ranks, UCX between them), the flood's requests still wait in
/// a batch, unconnected, when the ranks return: every one must be handled and answered.
#[test]
fn returning_with_messages_in_flight_is_safe_between_two_hosts() {
    let test = "returning_with_messages_in_flight_is_safe_between_two_hosts";
    let Some(rig) = ucx_common::loopback_or_skip(test).and_then(|_| rig::Rig::or_skip(2, test))
    else {
        return;
    };
    let token = marker::token();
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_amrun"))
        .args(["--hosts", &rig.host_list(2), "--exec", rig::Rig::EXEC])
        .args(["--rendezvous", &rig::address(0), "--timeout", "120"])
        .arg(exe)
        .args(marker::child_args("exit_rank"))
        .envs(rig::Rig::ucx_env())
        .env("AMRQ_TEST_EXIT", "flood")
        .env("AMRQ_TEST_TOKEN", &token)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("amrun starts");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    for r in 0..4 {
        let line = format!("rank={r} asked={FLOOD} answered={FLOOD}");
        assert!(stdout.contains(&line), "no {line:?} in {stdout}\n{stderr}");
    }
    marker::all_ran(&token, 4);
}
