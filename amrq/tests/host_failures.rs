//! Failures across hosts, on namespace hosts of this machine (`common/rig.rs`), with the
//! cluster conduit (shared memory inside a host, UCX over the rig's tcp between hosts):
//! a rank killed on another host ends the job within 5 s, naming it and its host; a
//! process with a wrong key is refused at the rendezvous and the job goes on; an
//! unreachable rendezvous is an error within the attach timeout. After each, nothing
//! runs on any host, and the rig's namespaces are gone. Each test says it was skipped
//! where UCX or network namespaces are missing.
//!
//! Each test is also its own rank's program: started by the job (the launcher's
//! environment says so), it runs its rank's part and exits.

#![cfg(not(amrq_loom))]

#[path = "common/marker.rs"]
mod marker;
#[path = "common/ranks.rs"]
mod ranks;
#[path = "common/rig.rs"]
mod rig;
#[path = "common/ucx.rs"]
mod ucx_common;

use amrq::conduit::cluster::ClusterConduit;
use amrq::conduit::{
    ChannelSpec, Coalescing, Conduit, ConduitError, ConduitSpec, Message, ReceivedFrame,
};
use amrq::prelude::Config;
use marker::{all_ran, child_args, run_rank, token};
use rig::Rig;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One channel; a batch of frames waits for the sender's next poll however long it
/// takes (no deadline sends it first).
fn spec() -> ConduitSpec {
    ConduitSpec {
        coalescing: Coalescing {
            wait: Duration::from_secs(3600),
            ..Coalescing::default()
        },
        ..ConduitSpec::new(vec![ChannelSpec::new(64)])
    }
}

/// In a rank of a job: joins with the attach timeout of the environment, runs `body`
/// and exits. Started by hand: returns.
fn as_rank(body: fn(ClusterConduit) -> Result<(), String>) {
    let timeout = Config::from_env().expect("config").attach_timeout.get();
    run_rank(crate::ranks::joined_cluster(&spec(), timeout), |c| {
        rig::assert_tcp_on_rig(c.remote());
        body(c)
    });
}

/// A rig of `hosts` hosts, or `None` where the test cannot run (it said why).
fn rig_for(test: &str, hosts: usize) -> Option<Rig> {
    ucx_common::loopback_or_skip(test)?;
    Rig::or_skip(hosts, test)
}

/// Removes `rig` and checks that nothing of the job is left: no process on any of its
/// hosts, none of its namespaces.
fn nothing_left(rig: Rig) {
    let left = rig.processes_left();
    assert!(left.is_empty(), "processes left on the hosts: {left:?}");
    let hosts = rig.hosts.clone();
    drop(rig);
    let out = Command::new("ip").args(["netns", "list"]).output();
    let list = String::from_utf8_lossy(&out.expect("ip netns list").stdout).into_owned();
    for h in hosts {
        assert!(!list.contains(&h), "namespace {h} is left: {list}");
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Where the rank that kills itself writes when it did.
fn kill_time_file(token: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("amrq-test-killed-{token}"))
}

/// Records the time and kills this rank (SIGKILL: no goodbye, no cleanup).
fn die_now() -> Result<(), String> {
    let token = std::env::var("AMRQ_TEST_TOKEN").unwrap_or_default();
    std::fs::write(kill_time_file(&token), now_ns().to_string()).map_err(|e| e.to_string())?;
    // SAFETY: signalling this process.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    Ok(())
}

/// What a survivor does: waits for messages, as a program would, checking its peers,
/// until a peer's failure ends the wait; with `none_may_come`, a frame that arrives is
/// an error.
fn wait_for_a_failure(c: &ClusterConduit, none_may_come: bool) -> Result<(), String> {
    let set = c.poll_set(&[0]).map_err(|e| e.to_string())?;
    let since = Instant::now();
    while since.elapsed() < Duration::from_secs(60) {
        c.check_peers().map_err(|e| e.to_string())?;
        if none_may_come {
            let arrived = c.drain(0, 16, |_| Ok::<(), ConduitError>(()));
            if arrived.map_err(|e| e.to_string())? > 0 {
                return Err("a frame of the dead rank's batch arrived".into());
            }
        }
        c.wait_for_arrival(&set, Duration::from_millis(100))
            .map_err(|e| e.to_string())?;
    }
    Err("no failure seen in 60 s".into())
}

/// Runs `test` as 4 ranks, two on each host of `rig`, one of which kills itself:
/// how the job ended, and how long after the kill.
fn killed_job(rig: &Rig, test: &str) -> (amrq::launch::Outcome, Duration) {
    let token = token();
    let exe = std::env::current_exe().expect("test binary");
    let out = rig
        .launcher(2, &token, Duration::from_secs(120))
        .run(exe.as_os_str(), &child_args(test))
        .expect("job starts");
    let ended = now_ns();
    let killed: u128 = std::fs::read_to_string(kill_time_file(&token))
        .expect("the killed rank said when it died")
        .parse()
        .expect("a time");
    let _ = std::fs::remove_file(kill_time_file(&token));
    (out, Duration::from_nanos((ended - killed) as u64))
}

// ---------------------------------------------------------------- a rank killed

/// After a barrier, the last rank records the time and kills itself (SIGKILL: no
/// goodbye, no cleanup); the others wait for messages that never come, as a program
/// would, checking their peers.
fn last_rank_dies(c: ClusterConduit) -> Result<(), String> {
    c.barrier().map_err(|e| e.to_string())?;
    if c.rank() == c.size() - 1 {
        die_now()?;
    }
    wait_for_a_failure(&c, false)
}

#[test]
fn a_rank_killed_on_another_host_ends_the_job_within_5_s_naming_it_and_its_host() {
    as_rank(last_rank_dies);
    let test = "a_rank_killed_on_another_host_ends_the_job_within_5_s_naming_it_and_its_host";
    let Some(rig) = rig_for(test, 2) else { return };
    let (out, took) = killed_job(&rig, test);
    assert_eq!(out.code, 128 + libc::SIGKILL, "{out:?}");
    let f = out.failure.expect("a failure");
    assert_eq!(f.rank, Some(3), "{f:?}");
    assert!(
        f.cause.contains("signal 9") && f.cause.contains(&rig.hosts[1]),
        "the failure names neither the signal nor the host: {f:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "the job ended {took:?} after the kill"
    );
    eprintln!(
        "the job ended {took:?} after rank 3 was killed: rank 3 {}",
        f.cause
    );
    nothing_left(rig);
}

// ---------------------------------------------------------------- frames left in a batch

/// Frames rank 0 leaves in its batch to rank 3 when it dies.
const LEFT_IN_BATCH: u64 = 5;

/// After a barrier, rank 0 sends [`LEFT_IN_BATCH`] frames to rank 3 on the other host,
/// which wait in its batch (no poll follows), and kills itself; rank 3 waits for
/// them, the others for anything, each checking its peers.
fn first_rank_dies_with_frames_in_its_batch(c: ClusterConduit) -> Result<(), String> {
    c.barrier().map_err(|e| e.to_string())?;
    if c.rank() == 0 {
        for i in 0..LEFT_IN_BATCH {
            let m = Message {
                tag: 1,
                args: &[i],
                ..Message::default()
            };
            c.try_send(3, 0, &m).map_err(|e| e.to_string())?;
        }
        let waiting = c.remote().coalesced().waiting;
        if waiting != LEFT_IN_BATCH {
            return Err(format!("{waiting} frames wait in the batch"));
        }
        die_now()?;
    }
    wait_for_a_failure(&c, true)
}

#[test]
fn a_rank_killed_with_frames_in_its_batch_ends_the_job_naming_it() {
    as_rank(first_rank_dies_with_frames_in_its_batch);
    let test = "a_rank_killed_with_frames_in_its_batch_ends_the_job_naming_it";
    let Some(rig) = rig_for(test, 2) else { return };
    let (out, took) = killed_job(&rig, test);
    assert_eq!(out.code, 128 + libc::SIGKILL, "{out:?}");
    let f = out.failure.expect("a failure");
    assert_eq!(f.rank, Some(0), "{f:?}");
    assert!(f.cause.contains("signal 9"), "{f:?}");
    assert!(
        took < Duration::from_secs(5),
        "the job ended {took:?} after the kill"
    );
    nothing_left(rig);
}

// ---------------------------------------------------------------- an intruder

/// Where the ranks and the intruder of `token` leave what the others read.
fn intruder_file(token: &str, what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("amrq-test-intruder-{token}-{what}"))
}

/// Waits for `path` to exist and returns its bytes (`Err` after 60 s).
fn wait_for_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let since = Instant::now();
    loop {
        if let Ok(b) = std::fs::read(path) {
            if !b.is_empty() {
                return Ok(b);
            }
        }
        if since.elapsed() > Duration::from_secs(60) {
            return Err(format!("{} never came", path.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A two-rank job, one rank per host. Rank 1 publishes its card; rank 0 sends it one
/// frame alone and records its bytes; an intruder outside the job then sends rank 1 a
/// frame in rank 0's name, plays the recorded bytes again and says goodbye in rank 0's
/// name. Rank 1 must take rank 0's frame once, nothing of the intruder's, and record
/// the intruder's messages as faults naming rank 0, which it still sees in the job.
fn rank_beside_an_intruder(c: ClusterConduit) -> Result<(), String> {
    let token = std::env::var("AMRQ_TEST_TOKEN").unwrap_or_default();
    let err = |e: ConduitError| e.to_string();
    if c.rank() == 1 {
        let card = c.remote().card().to_bytes();
        std::fs::write(intruder_file(&token, "card"), card).map_err(|e| e.to_string())?;
    }
    c.barrier().map_err(err)?;
    if c.rank() == 0 {
        let m = Message {
            tag: 1,
            args: &[42],
            ..Message::default()
        };
        let raw = c.remote().send_recorded(1, 0, &m).map_err(err)?;
        let mut bytes = raw.id.to_le_bytes().to_vec();
        bytes.extend_from_slice(&(raw.header.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&raw.header);
        bytes.extend_from_slice(&raw.data);
        std::fs::write(intruder_file(&token, "replay"), bytes).map_err(|e| e.to_string())?;
        return c.barrier().map_err(err);
    }
    let done = intruder_file(&token, "done");
    let mut got = Vec::new();
    let since = Instant::now();
    while !done.exists() || since.elapsed() < Duration::from_millis(300) {
        if since.elapsed() > Duration::from_secs(90) {
            return Err("the intruder never finished".into());
        }
        c.drain(0, 16, |f| {
            got.push((f.source(), f.tag(), f.args().to_vec()));
            Ok::<(), ConduitError>(())
        })
        .map_err(err)?;
    }
    // Once more, a while after the intruder is gone.
    std::thread::sleep(Duration::from_millis(200));
    c.drain(0, 16, |f| {
        got.push((f.source(), f.tag(), f.args().to_vec()));
        Ok::<(), ConduitError>(())
    })
    .map_err(err)?;
    if got != [(0, 1, vec![42])] {
        return Err(format!("rank 1 took {got:?}, expected rank 0's one frame"));
    }
    let faults = c.faults();
    let unproven = faults
        .recent()
        .filter(|f| f.kind == amrq::conduit::FaultKind::Unproven && f.source == Some(0))
        .count();
    if unproven < 3 {
        return Err(format!(
            "{unproven} refused messages naming rank 0, expected the forged frame's batch, \
             the replay and the goodbye: {:?}",
            faults.recent().collect::<Vec<_>>()
        ));
    }
    if c.peer_left(0) {
        return Err("the intruder's goodbye in rank 0's name was taken".into());
    }
    eprintln!("rank 1 refused {unproven} messages in rank 0's name and took rank 0's frame once");
    c.barrier().map_err(err)
}

/// The intruder: a UCX endpoint of a job of its own (another key), numbered rank 0,
/// connected to the victim's published card.
fn intrude(token: &str) {
    let run = || -> Result<(), String> {
        let card = wait_for_file(&intruder_file(token, "card"))?;
        let card = amrq::conduit::ucx::Card::from_bytes(&card).ok_or("a malformed card")?;
        let replay = wait_for_file(&intruder_file(token, "replay"))?;
        let id = u32::from_le_bytes(replay[..4].try_into().map_err(|_| "short")?);
        let n = u64::from_le_bytes(replay[4..12].try_into().map_err(|_| "short")?) as usize;
        let raw = amrq::conduit::ucx::RawMessage {
            id,
            header: replay[12..12 + n].to_vec(),
            data: replay[12 + n..].to_vec(),
        };
        let key = amrq::bootstrap::JobKey::random().map_err(|e| e.to_string())?;
        let me = amrq::conduit::ucx::open(0, 2, &spec(), &[], &key).map_err(|e| e.to_string())?;
        let cards = [me.card.clone(), card];
        let boot = amrq::bootstrap::Boot::Threads(std::sync::Arc::new(
            amrq::bootstrap::ThreadsBoot::new(2),
        ));
        let c = me.connect(&cards, boot).map_err(|e| e.to_string())?;
        // Over a UCX connection, not as datagrams (which `ucx` tests).
        c.endpoint_info(1).ok_or("cannot connect to the victim")?;
        let forged = Message {
            tag: 0xbad,
            args: &[666],
            ..Message::default()
        };
        c.try_send(1, 0, &forged).map_err(|e| e.to_string())?;
        c.send_raw(1, &raw).map_err(|e| e.to_string())?;
        let since = Instant::now();
        while since.elapsed() < Duration::from_millis(200) {
            c.peer_left(0); // progresses: the messages go out
        }
        drop(c); // says goodbye in rank 0's name (the victim never answers)
        Ok(())
    };
    let outcome = run();
    let _ = std::fs::write(intruder_file(token, "done"), format!("{outcome:?}"));
    if let Err(e) = outcome {
        eprintln!("intruder: {e}");
        std::process::exit(1);
    }
    std::process::exit(0);
}

#[test]
fn a_process_outside_the_job_cannot_send_in_a_ranks_name_nor_play_its_messages_again() {
    if let Ok(token) = std::env::var("AMRQ_TEST_INTRUDER") {
        intrude(&token);
    }
    as_rank(rank_beside_an_intruder);
    let test = "a_process_outside_the_job_cannot_send_in_a_ranks_name_nor_play_its_messages_again";
    let Some(rig) = rig_for(test, 2) else { return };
    let token = token();
    let l = rig.launcher(1, &token, Duration::from_secs(120));
    let exe = std::env::current_exe().expect("test binary");
    let job = {
        let exe = exe.clone();
        std::thread::spawn(move || l.run(exe.as_os_str(), &child_args(test)))
    };
    // The intruder runs on the first host, beside rank 0, as a process of its own.
    let intruder = Command::new("ip")
        .args(["netns", "exec", &rig.hosts[0]])
        .arg(&exe)
        .args(child_args(test))
        .env("AMRQ_TEST_INTRUDER", &token)
        .envs(Rig::ucx_env())
        .output()
        .expect("the intruder runs");
    let out = job.join().expect("the launcher").expect("job starts");
    for what in ["card", "replay", "done"] {
        let _ = std::fs::remove_file(intruder_file(&token, what));
    }
    assert!(
        intruder.status.success(),
        "the intruder: {}",
        String::from_utf8_lossy(&intruder.stderr)
    );
    assert_eq!(out.code, 0, "{out:?}");
    nothing_left(rig);
}

// ---------------------------------------------------------------- a wrong key

/// Every rank sends one frame to every other and receives one from each.
fn hello(c: ClusterConduit) -> Result<(), String> {
    let (me, n) = (c.rank(), c.size());
    for d in (0..n).filter(|&d| d != me) {
        let m = Message {
            tag: 1,
            args: &[me as u64],
            ..Message::default()
        };
        loop {
            match c.try_send(d, 0, &m) {
                Ok(()) => break,
                Err(ConduitError::Busy) => std::thread::yield_now(),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    let mut from = vec![false; n];
    let since = Instant::now();
    while from.iter().filter(|&&f| f).count() < n - 1 {
        c.drain(0, 16, |f| {
            from[f.source()] = f.args() == [f.source() as u64];
            Ok::<(), ConduitError>(())
        })
        .map_err(|e| e.to_string())?;
        if since.elapsed() > Duration::from_secs(30) {
            return Err(format!("heard from {from:?} in 30 s"));
        }
    }
    c.barrier().map_err(|e| e.to_string())
}

/// Starts rank `rank` of a 2-rank job by hand on `host` (the environment `amrun`
/// would give it, with `key`), its standard error captured.
fn start_rank(
    test: &str,
    host: &str,
    rank: usize,
    key: &str,
    at: &str,
    extra: &[(&str, &str)],
) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    Command::new("ip")
        .args(["netns", "exec", host])
        .arg(exe)
        .args(child_args(test))
        .envs(Rig::ucx_env())
        .envs([
            ("AMRQ_RANK", rank.to_string().as_str()),
            ("AMRQ_SIZE", "2"),
            ("AMRQ_JOB_ID", "wrong-key-test"),
            ("AMRQ_JOB_KEY", key),
            ("AMRQ_RENDEZVOUS", at),
            ("AMRQ_HOST", host),
        ])
        .envs(extra.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("a rank starts")
}

#[test]
fn a_process_with_a_wrong_key_is_refused_at_the_rendezvous_and_the_job_goes_on() {
    as_rank(hello);
    let test = "a_process_with_a_wrong_key_is_refused_at_the_rendezvous_and_the_job_goes_on";
    let Some(rig) = rig_for(test, 2) else { return };
    let token = token();
    let at = format!("{}:{}", rig::address(0), 47000 + std::process::id() % 1000);
    let key = amrq::bootstrap::JobKey::random().expect("key").to_string();
    let wrong = amrq::bootstrap::JobKey::random().expect("key").to_string();
    let env = [("AMRQ_TEST_TOKEN", token.as_str())];
    let zero = start_rank(test, &rig.hosts[0], 0, &key, &at, &env);
    let intruder = start_rank(test, &rig.hosts[1], 1, &wrong, &at, &env)
        .wait_with_output()
        .expect("the intruder ends");
    let err = String::from_utf8_lossy(&intruder.stderr);
    assert_eq!(intruder.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused rank 1") && err.contains("not job wrong-key-test's key"),
        "the intruder's error does not say why it was refused: {err}"
    );
    eprintln!("the intruder was told: {}", err.trim());
    let one = start_rank(test, &rig.hosts[1], 1, &key, &at, &env);
    for (r, child) in [zero, one].into_iter().enumerate() {
        let out = child.wait_with_output().expect("a rank ends");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "rank {r} failed: {err}");
    }
    all_ran(&token, 2);
    nothing_left(rig);
}

// ---------------------------------------------------------------- no rendezvous

#[test]
fn an_unreachable_rendezvous_is_a_clear_error_within_the_attach_timeout() {
    as_rank(hello);
    let test = "an_unreachable_rendezvous_is_a_clear_error_within_the_attach_timeout";
    let Some(rig) = rig_for(test, 2) else { return };
    // An address on the rig's network where no host is.
    let at = "169.254.77.99:47999";
    let key = amrq::bootstrap::JobKey::random().expect("key").to_string();
    let since = Instant::now();
    let extra = [("AMRQ_ATTACH_TIMEOUT", "3")];
    let out = start_rank(test, &rig.hosts[1], 1, &key, at, &extra)
        .wait_with_output()
        .expect("the rank ends");
    let took = since.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(at) && err.contains("TCP") && err.contains("AMRQ_ATTACH_TIMEOUT"),
        "the error does not name the rendezvous and the setting: {err}"
    );
    eprintln!("after {took:?}: {}", err.trim());
    assert!(
        took < Duration::from_secs(8),
        "the rank gave up after {took:?}, not about 3 s"
    );
    nothing_left(rig);
}

// ---------------------------------------------------------------- mpirun across hosts

/// Open MPI's `mpirun`, run on the first host, starts two ranks there and two on the
/// second through an rsh agent that enters the host's namespace (as `ssh` would reach
/// another machine); the ranks find rank 0 through a rendezvous file, tell their hosts
/// apart by `mpirun`'s daemon on each (the namespaces share the kernel's host name), and
/// share memory inside each host. Not a failure test: it lives here for the cluster
/// conduit's rank part. Skipped where mpirun is not installed.
#[test]
fn mpirun_starts_a_job_across_namespace_hosts_with_a_rendezvous_file() {
    let test = "mpirun_starts_a_job_across_namespace_hosts_with_a_rendezvous_file";
    as_rank(|c| {
        if c.local_ranks().len() != 2 {
            return Err(format!(
                "{:?} share this host's memory, not 2 ranks",
                c.local_ranks()
            ));
        }
        hello(c)
    });
    let Some(mpirun) = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("mpirun"))
            .find(|p| p.is_file())
    }) else {
        eprintln!("{test}: skipped: mpirun is not installed (Debian: apt-get install openmpi-bin)");
        return;
    };
    let Some(rig) = rig_for(test, 2) else { return };
    let token = token();
    let dir = std::env::temp_dir().join(format!("amrq-mpirun-{token}"));
    std::fs::create_dir_all(&dir).expect("a directory");
    let agent = dir.join("agent");
    let script = format!(
        "#!/bin/sh\n# mpirun's rsh agent: ADDRESS COMMAND... runs COMMAND on that namespace host\n\
         host=$1; shift\ncase \"$host\" in\n  {}) ns={} ;;\n  {}) ns={} ;;\n  *) echo \"agent: unknown host $host\" >&2; exit 1 ;;\nesac\nexec ip netns exec \"$ns\" sh -c \"$*\"\n",
        rig::address(0),
        rig.hosts[0],
        rig::address(1),
        rig.hosts[1]
    );
    std::fs::write(&agent, script).expect("the agent");
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("executable");
    let rendezvous = format!("AMRQ_RENDEZVOUS=file:{}", dir.join("rdv").display());
    let hosts = format!("{}:2,{}:2", rig::address(0), rig::address(1));
    let out = Command::new("ip")
        .args(["netns", "exec", &rig.hosts[0]])
        .arg(mpirun)
        .args(["--host", &hosts, "-n", "4", "--bind-to", "none"])
        .args(["--mca", "plm_rsh_agent", &agent.display().to_string()])
        .args(["--mca", "oob_tcp_if_include", rig::DEVICE])
        .args([
            "-x",
            "UCX_TLS=tcp",
            "-x",
            &format!("UCX_NET_DEVICES={}", rig::DEVICE),
        ])
        .args(["-x", &rendezvous, "-x", &format!("AMRQ_TEST_TOKEN={token}")])
        .args(["-x", "AMRQ_ATTACH_TIMEOUT=60"])
        .arg(std::env::current_exe().expect("test binary"))
        .args(child_args(test))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mpirun failed: {err}");
    all_ran(&token, 4);
    assert!(
        !dir.join("rdv").exists(),
        "rank 0 removes the rendezvous file"
    );
    let _ = std::fs::remove_dir_all(&dir);
    nothing_left(rig);
}
