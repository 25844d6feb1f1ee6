//! A request its target cannot run comes back to its sender: as threads, as processes
//! of one host (`amrun -n 2`) and as processes on two namespace hosts (`common/rig.rs`,
//! UCX over tcp between them). The same rank program runs in each: rank 0 sends rank 1
//! requests it cannot run — an arg missing, a handler that returns an error, a call of
//! either, a handler id nobody registered (written with the conduit) — and checks that
//! each failure names rank 1, the handler and the reason, and reaches it by its next
//! poll or wait (or the call itself); rank 1 keeps serving (a good round trip follows
//! each failure) and records each as rank 0's fault.
//!
//! A Long payload outside the segment never leaves its sender: every rank's segment has
//! the job's size, so the send itself is refused naming the rank and the limit.
//!
//! Jobs of processes re-execute this test binary filtered to [`failures_rank`], whose
//! body runs only there (`AMRQ_TEST_FAILURES` set).

#![cfg(not(amrq_loom))]

#[path = "common/marker.rs"]
mod marker;
#[path = "common/rig.rs"]
mod rig;
#[path = "common/ucx.rs"]
mod ucx_common;

use amrq::conduit::{Conduit, ConduitError, FaultKind, Message};
use amrq::launch::{Hosts, Launcher};
use amrq::prelude::*;
use amrq::rq::QueueId;
use std::cell::Cell;
use std::process::{Command, Stdio};
use std::time::Duration;

struct State {
    sum: Cell<u64>,
    acks: Cell<u64>,
    ack: ReplyHandler,
}

/// Fails the rank with `what` unless `ok`.
fn check(ok: bool, what: impl FnOnce() -> String) -> amrq::Result<()> {
    match ok {
        true => Ok(()),
        false => Err(what().into()),
    }
}

/// That `got` is the failure of handler `name` at rank 1, for `reason`.
fn is_failure(got: Result<(), AmError>, name: &str, reason: &FaultKind) -> amrq::Result<()> {
    match got {
        Err(AmError::RequestFailed(f)) => check(
            f.target == 1 && f.name == name && &f.reason == reason,
            || format!("the failure of `{name}` ({reason}) was told as: {f:?}"),
        ),
        other => {
            Err(format!("the failure of `{name}` ({reason}) never came back: {other:?}").into())
        }
    }
}

/// A round trip that must work: rank 1 still serves.
fn round_trip(am: &Am<State>, ping: RequestHandler) -> amrq::Result<()> {
    let acks = am.state().acks.get();
    am.request(1, ping, &[])?;
    Ok(am.wait_until(|s| s.acks.get() > acks)?)
}

/// The ledger's refusal, as rank 1's handler returns it.
const CLOSED: &str = "the ledger is closed: open it before adding";

/// Rank 0's failing requests, and rank 1's record of them; `Ok` in both if every check
/// held.
fn failures(setup: Setup) -> amrq::Result<()> {
    let mut t = HandlerTable::new();
    let add = t.request("add", |s: &State, _ctx, m| {
        s.sum.set(s.sum.get() + m.arg(0)?);
        Ok(())
    });
    let closed = t.request("closed", |_s: &State, _ctx, _m| Err(CLOSED.into()));
    let closing = t.call("closing", |_s: &State, _ctx, (): ()| {
        Err::<u64, _>(CLOSED.into())
    });
    let ack = t.reply("ack", |s: &State, _m| {
        s.acks.set(s.acks.get() + 1);
        Ok(())
    });
    let ping = t.request("ping", |s: &State, ctx, _m| ctx.reply(s.ack, &[]));
    let state = State {
        sum: Cell::new(0),
        acks: Cell::new(0),
        ack,
    };
    let job = setup.start(t, state)?;
    let am = job.am();
    check(am.size() == 2, || {
        format!("this test needs 2 ranks, not {}", am.size())
    })?;
    let missing = FaultKind::MissingArg { index: 0, nargs: 0 };
    let refused = FaultKind::HandlerFailed {
        error: CLOSED.to_string(),
    };
    if am.rank() == 0 {
        // Returned by the wait that runs the notice.
        am.request(1, add, &[])?;
        is_failure(am.wait_until(|_| false), "add", &missing)?;
        round_trip(am, ping)?;
        // Returned by the poll that runs it.
        am.request(1, closed, &[])?;
        let polled = loop {
            match am.poll() {
                Ok(_) => continue,
                Err(e) => break Err(e),
            }
        };
        is_failure(polled, "closed", &refused)?;
        round_trip(am, ping)?;
        // Run by a runtime wait (the barrier, which goes on): kept for the next wait.
        am.request(1, add, &[])?;
    }
    job.barrier()?;
    job.barrier()?;
    if am.rank() == 0 {
        is_failure(am.wait_until(|_| false), "add", &missing)?;
        // A call's failure is the call's.
        is_failure(
            am.call(1, closing, ())?.wait().map(drop),
            "closing",
            &refused,
        )?;
        round_trip(am, ping)?;
        // A handler id nobody registered: only a peer writing frames itself sends one.
        let raw = Message {
            tag: 999,
            ..Message::default()
        };
        let queue = QueueId::AM_REQUEST.index();
        am.rq().conduit().try_send(1, queue, &raw)?;
        let unknown = FaultKind::UnknownHandler { id: 999 };
        is_failure(am.wait_until(|_| false), "", &unknown)?;
        round_trip(am, ping)?;
        // A Long payload outside rank 1's segment is refused before it leaves.
        let end = am.segment().1;
        match am.request_long(1, add, &[1], &[0u8; 64], end - 8) {
            Err(e) => check(
                matches!(
                    e.conduit(),
                    Some(ConduitError::OutOfSegment { rank: 1, .. })
                ),
                || format!("a Long payload past the segment's end was refused as: {e}"),
            )?,
            Ok(()) => return Err("a Long payload past the segment's end was sent".into()),
        }
        am.request(1, add, &[5])?;
    }
    job.barrier()?;
    job.barrier()?;
    if am.rank() == 1 {
        let faults = am.faults();
        check(faults.of(0) == 5, || {
            format!(
                "rank 1 recorded {} faults of rank 0, not 5: {faults:?}",
                faults.of(0)
            )
        })?;
        check(am.state().sum.get() == 5, || {
            format!("rank 1 added {}, not 5", am.state().sum.get())
        })?;
    }
    let in_process = std::env::var("AMRQ_TEST_FAILURES").is_ok();
    check(!in_process || marker::mark_ran(am.rank()), || {
        "cannot leave word that this rank ran".to_string()
    })
}

/// The processes' part: runs [`failures`] as a rank of the job that started it.
#[test]
fn failures_rank() {
    if std::env::var("AMRQ_TEST_FAILURES").is_err() {
        return;
    }
    Config::new().run(failures)
}

/// This test binary as a program filtered to [`failures_rank`].
fn program(token: &str) -> Command {
    let exe = std::env::current_exe().expect("test binary");
    let mut c = Command::new(exe);
    c.args(marker::child_args("failures_rank"))
        .env("AMRQ_TEST_FAILURES", "1")
        .env("AMRQ_TEST_TOKEN", token)
        .stdin(Stdio::null());
    c
}

#[test]
fn failures_reach_the_sender_as_threads() {
    let out = Config::new().threads(2, failures);
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}

#[test]
fn failures_reach_the_sender_as_processes() {
    let token = marker::token();
    let inner = program(&token);
    let mut c = Command::new(env!("CARGO_BIN_EXE_amrun"));
    c.args(["-n", "2", "--bind", "none", "--timeout", "120"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let out = c.output().expect("amrun starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    marker::all_ran(&token, 2);
}

#[test]
fn failures_reach_the_sender_between_two_hosts() {
    let test = "failures_reach_the_sender_between_two_hosts";
    let Some(rig) = ucx_common::loopback_or_skip(test).and_then(|_| rig::Rig::or_skip(2, test))
    else {
        return;
    };
    let token = marker::token();
    let hosts =
        Hosts::new(&rig.host_list(1), rig::Rig::EXEC, Some(&rig::address(0))).expect("hosts");
    let mut l = Launcher::new(hosts.ranks());
    l.hosts = Some(hosts);
    l.verbose = false;
    l.timeout = Some(Duration::from_secs(180));
    l.env = rig::Rig::ucx_env();
    l.env.push(("AMRQ_TEST_TOKEN".into(), token.clone()));
    l.env.push(("AMRQ_TEST_FAILURES".into(), "1".into()));
    let exe = std::env::current_exe().expect("test binary");
    let outcome = l
        .run(exe.as_os_str(), &marker::child_args("failures_rank"))
        .expect("job starts");
    assert_eq!(outcome.code, 0, "{:?}", outcome.failure);
    marker::all_ran(&token, 2);
}
