//! Ranks as processes on several hosts, made of network namespaces on this machine
//! (`common/rig.rs`), started through `ip netns exec` by amrq's launcher or by the
//! `amrun` binary, joined at rank 0's TCP rendezvous and connected by UCX over tcp on
//! the rig's veth devices. (The conformance suite runs on 2 such hosts too:
//! `cargo test --test conformance ucx_hosts`.) Each test says it was skipped where UCX
//! or network namespaces are missing.
//!
//! Each test is also its own rank's program: started by the job (the launcher's
//! environment says so), it runs its rank's part and exits.

#![cfg(not(amrq_loom))]

#[path = "common/marker.rs"]
mod marker;
#[path = "common/put_async.rs"]
mod put_async;
#[path = "common/ranks.rs"]
mod ranks;
#[path = "common/rig.rs"]
mod rig;
#[path = "common/ucx.rs"]
mod ucx_common;

use amrq::conduit::ucx::UcxConduit;
use amrq::conduit::{ChannelSpec, Conduit, ConduitError, ConduitSpec, Message, ReceivedFrame};
use amrq::launch::Outcome;
use marker::{all_ran, child_args, run_rank, token};
use rig::Rig;
use std::process::Command;
use std::time::{Duration, Instant};

const CH: amrq::conduit::Channel = 0;

/// One channel, and coalescing as the environment sets it (`AMRQ_COALESCE_BYTES`).
fn spec() -> ConduitSpec {
    let config = amrq::Config::from_env().expect("readable AMRQ_* settings");
    ConduitSpec {
        coalescing: config.conduit_spec().coalescing,
        ..ConduitSpec::new(vec![ChannelSpec::new(64)])
    }
}

/// In a rank of a job: checks that UCX uses the rig's tcp, runs `body` and exits.
/// Started by hand: returns.
fn as_rank(body: fn(UcxConduit) -> Result<(), String>) {
    run_rank(
        crate::ranks::joined_ucx(&spec(), Duration::from_secs(60)),
        |c| {
            rig::assert_tcp_on_rig(&c);
            body(c)
        },
    );
}

/// A rig of `hosts` hosts, or `None` where the test cannot run (it said why).
fn rig_for(test: &str, hosts: usize) -> Option<Rig> {
    ucx_common::loopback_or_skip(test)?;
    Rig::or_skip(hosts, test)
}

/// Runs this test binary's `test` as `per_host` ranks on each host of `rig`, with
/// amrq's launcher and `env` set for the ranks; returns how the job ended.
fn run_job(rig: &Rig, test: &str, per_host: usize, token: &str, env: &[(&str, &str)]) -> Outcome {
    let mut l = rig.launcher(per_host, token, Duration::from_secs(180));
    l.env
        .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let exe = std::env::current_exe().expect("test binary");
    l.run(exe.as_os_str(), &child_args(test))
        .expect("job starts")
}

// ---------------------------------------------------------------- all-to-all flood

/// Frames each rank sends to every other rank.
const FLOOD: u64 = 20_000;

/// Frames a rank sends to each destination between two polls, at most.
const BURST: u64 = 16;

/// Every rank sends [`FLOOD`] frames to every other, in bursts of up to [`BURST`] to
/// each in turn, numbering them per destination, while draining its own channel: each frame must arrive exactly once
/// and in order per source, and every one must arrive; coalesced into batches, unless
/// the environment turned coalescing off.
fn flood(c: UcxConduit) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    let mut sent = vec![0u64; n];
    let mut next = vec![0u64; n];
    sent[me] = FLOOD;
    let want = FLOOD * (n as u64 - 1);
    let (mut got, mut busy) = (0u64, 0u64);
    let since = Instant::now();
    while got < want || sent.iter().any(|&s| s < FLOOD) {
        // A burst to each destination between polls (a poll sends the batches).
        for (d, count) in sent.iter_mut().enumerate() {
            for _ in 0..BURST.min(FLOOD - *count) {
                let m = Message {
                    tag: 7,
                    args: &[me as u64, *count],
                    ..Message::default()
                };
                match c.try_send(d, CH, &m) {
                    Ok(()) => *count += 1,
                    Err(ConduitError::Busy) => {
                        busy += 1;
                        break;
                    }
                    Err(e) => return Err(format!("send to {d}: {e}")),
                }
            }
        }
        got += c
            .drain(CH, 64, |f| {
                let src = f.source();
                if f.args() != [src as u64, next[src]] {
                    return Err(ConduitError::Setup(format!(
                        "from rank {src}: {:?}, expected [{src}, {}]",
                        f.args(),
                        next[src]
                    )));
                }
                next[src] += 1;
                Ok(())
            })
            .map_err(|e| e.to_string())? as u64;
        if since.elapsed() > Duration::from_secs(120) {
            return Err(format!("after 120 s: sent {sent:?}, received {next:?}"));
        }
    }
    c.barrier().map_err(|e| e.to_string())?;
    let expected: Vec<u64> = (0..n).map(|r| if r == me { 0 } else { FLOOD }).collect();
    if next != expected {
        return Err(format!("received {next:?}, expected {expected:?}"));
    }
    let co = c.coalesced();
    let batched = co.frames == want && co.batches * 4 <= co.frames;
    if batched != spec().coalescing.is_on() || co.waiting != 0 {
        return Err(format!("coalescing {:?} did {co:?}", spec().coalescing));
    }
    eprintln!(
        "rank {me}: {want} frames from {} peers, each exactly once in order, in {:?} ({busy} sends found the ring full; {co:?})",
        n - 1,
        since.elapsed()
    );
    Ok(())
}

/// Runs [`flood`] as test `test` on four hosts, one rank each, with `env` set.
fn flood_on_four_hosts(test: &str, env: &[(&str, &str)]) {
    as_rank(flood);
    let Some(rig) = rig_for(test, 4) else { return };
    let token = token();
    let out = run_job(&rig, test, 1, &token, env);
    assert_eq!(out.code, 0, "{out:?}");
    all_ran(&token, 4);
}

#[test]
fn all_to_all_flood_on_four_hosts_arrives_exactly_once_in_order() {
    flood_on_four_hosts(
        "all_to_all_flood_on_four_hosts_arrives_exactly_once_in_order",
        &[],
    );
}

#[test]
fn all_to_all_flood_with_each_frame_alone_arrives_exactly_once_in_order() {
    flood_on_four_hosts(
        "all_to_all_flood_with_each_frame_alone_arrives_exactly_once_in_order",
        &[("AMRQ_COALESCE_BYTES", "0")],
    );
}

// ---------------------------------------------------------------- puts no one waits for

/// Two hosts, a rank each: 64 KiB puts that UCX leaves in flight, made with
/// `Rma::put_async`, have their events posted once UCX has completed them: once each,
/// in order, after the data and the count, at the target and at the sender.
#[test]
fn puts_no_one_waits_for_post_their_events_once_ucx_completes_them() {
    let test = "puts_no_one_waits_for_post_their_events_once_ucx_completes_them";
    let mut cfg = amrq::Config::new();
    cfg.segment_bytes.set(8 << 20);
    for slots in put_async::SLOTS {
        cfg.add_queue(slots);
    }
    let joined = crate::ranks::joined_ucx(&cfg.conduit_spec(), Duration::from_secs(60));
    run_rank(joined, |c| {
        rig::assert_tcp_on_rig(&c);
        put_async::put_async_events(c, (100, 64 << 10), false)
    });
    let Some(rig) = rig_for(test, 2) else { return };
    let token = token();
    let out = run_job(&rig, test, 1, &token, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    all_ran(&token, 2);
}

// ---------------------------------------------------------------- amrun

/// Two ranks exchange a word each way: enough to show a job formed.
fn hello(c: UcxConduit) -> Result<(), String> {
    let words = c
        .allgather(100 + c.rank() as u64)
        .map_err(|e| e.to_string())?;
    let want: Vec<u64> = (0..c.size() as u64).map(|r| 100 + r).collect();
    match words == want {
        true => Ok(()),
        false => Err(format!("allgather gave {words:?}, expected {want:?}")),
    }
}

/// `amrun --hosts … --exec 'ip netns exec {host}' PROGRAM` with `per_host` ranks on
/// each host of `rig` and the UCX settings `ucx`, its output captured.
fn amrun(
    rig: &Rig,
    per_host: usize,
    ucx: &[(String, String)],
    test: &str,
    token: &str,
) -> std::process::Output {
    let exe = std::env::current_exe().expect("test binary");
    Command::new(env!("CARGO_BIN_EXE_amrun"))
        .args(["--hosts", &rig.host_list(per_host), "--exec", Rig::EXEC])
        .args(["--rendezvous", &rig::address(0), "--timeout", "120"])
        .arg(exe)
        .args(child_args(test))
        .envs(ucx.iter().cloned())
        .env("AMRQ_TEST_TOKEN", token)
        .output()
        .expect("amrun runs")
}

#[test]
fn amrun_starts_ranks_on_namespace_hosts() {
    as_rank(hello);
    let test = "amrun_starts_ranks_on_namespace_hosts";
    let Some(rig) = rig_for(test, 2) else { return };
    let token = token();
    let out = amrun(&rig, 2, &Rig::ucx_env(), test, &token);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "amrun failed: {err}");
    all_ran(&token, 4);
}

#[test]
fn amrun_refuses_a_rank_count_the_hosts_disagree_with() {
    let out = Command::new(env!("CARGO_BIN_EXE_amrun"))
        .args(["-n", "3", "--hosts", "a:2,b:2", "true"])
        .output()
        .expect("amrun runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("-n 3 disagrees") && err.contains("4 ranks"),
        "{err}"
    );
}

/// Every rank's UCX is told to use only the loopback device, so the worker address it
/// publishes is 127.0.0.1 on its own host: the others cannot reach it, and say so at
/// the first message (the set-up collective's).
#[test]
fn a_peer_that_cannot_be_reached_is_named_with_its_host_address_and_transport() {
    // Not `as_rank`: the endpoints use the loopback, as this test asks, not the rig's
    // device.
    run_rank(
        crate::ranks::joined_ucx(&spec(), Duration::from_secs(60)),
        hello,
    );
    let test = "a_peer_that_cannot_be_reached_is_named_with_its_host_address_and_transport";
    let Some(rig) = rig_for(test, 2) else { return };
    let token = token();
    let lo = [("UCX_TLS", "tcp"), ("UCX_NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into()));
    let out = amrun(&rig, 1, &lo, test, &token);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the job ran although no rank can reach the other: {err}"
    );
    let named = err.lines().any(|l| {
        l.contains("cannot reach rank")
            && l.contains(&rig.hosts[0])
            && l.contains(&rig.hosts[1])
            && (l.contains(&rig::address(0)) || l.contains(&rig::address(1)))
            && l.contains("UCX_TLS=tcp")
    });
    assert!(
        named,
        "no error names the peer, its host, address and transport:\n{err}"
    );
}
