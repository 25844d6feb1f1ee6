//! Ranks as processes: Foundation I's exactly-once, queue-full and flood tests again,
//! through self-launch and through `amrun`; failing ranks; isolation of jobs.
//!
//! Each test re-executes this test binary as its ranks, filtered to the same test: in a
//! rank, [`rank_of`] finds the job in the environment and runs the rank's part, then
//! exits. Process tests spin, so they run one at a time (a lock).

#![cfg(not(amrq_loom))]

#[path = "common/ranks.rs"]
mod ranks;

use amrq::conduit::mem::MemConduit;
use amrq::conduit::Conduit;
use amrq::launch::{Bind, Launcher, Outcome};
use amrq::prelude::*;
use std::cell::{Cell, RefCell};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[path = "common/marker.rs"]
mod marker;
use marker::{all_ran, child_args, run_rank, token};

/// In a rank of this test's job: runs `body` and exits the process. Otherwise returns.
fn rank_of(cfg: &Config, body: impl FnOnce(MemConduit) -> Result<(), String>) {
    run_rank(crate::ranks::joined(cfg), body);
}

/// Starts `ranks` ranks of this test binary running `test`, by self-launch.
fn self_launch(test: &str, ranks: usize) -> Outcome {
    let mut l = Launcher::new(ranks);
    l.bind = Bind::None;
    l.timeout = Some(Duration::from_secs(120));
    let exe = std::env::current_exe().expect("test binary");
    l.run(exe.as_os_str(), &child_args(test))
        .expect("job starts")
}

/// Starts `ranks` ranks of this test binary running `test`, through `amrun`; when the
/// job succeeds, checks that every rank ran the test's body.
fn amrun(test: &str, ranks: usize, extra: &[&str]) -> (std::process::ExitStatus, Duration) {
    let t = Instant::now();
    let token = token();
    let status = Command::new(env!("CARGO_BIN_EXE_amrun"))
        .env("AMRQ_TEST_TOKEN", &token)
        .args([
            "-n",
            &ranks.to_string(),
            "--bind",
            "none",
            "--timeout",
            "120",
        ])
        .args(extra)
        .arg(std::env::current_exe().expect("test binary"))
        .args(child_args(test))
        .status()
        .expect("amrun runs");
    if status.success() {
        all_ran(&token, ranks);
    }
    (status, t.elapsed())
}

fn shm_objects() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("amrq-"))
                .collect()
        })
        .unwrap_or_default()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

// ---------------------------------------------------------------- exactly once, in order

struct Seen {
    next: RefCell<Vec<u64>>,
    count: Cell<u64>,
    bad: Cell<u64>,
}

fn exactly_once_rank(c: MemConduit, per_rank: u64) -> Result<(), String> {
    let mut table = HandlerTable::new();
    let h = table.request("m", |s: &Seen, _ctx, m| {
        let mut next = s.next.borrow_mut();
        let src = m.source();
        let sum: u64 = m.payload().iter().map(|&b| u64::from(b)).sum();
        if m.arg(0)? != next[src]
            || m.arg(1)? != (src as u64) << 32 | m.arg(0)?
            || sum != m.arg(2)?
        {
            s.bad.set(s.bad.get() + 1);
        }
        next[src] += 1;
        s.count.set(s.count.get() + 1);
        Ok(())
    });
    let n = c.size();
    let am = Am::new(
        c,
        table,
        Seen {
            next: RefCell::new(vec![0; n]),
            count: Cell::new(0),
            bad: Cell::new(0),
        },
    )
    .map_err(|e| e.to_string())?;
    let me = am.rank() as u64;
    let mut seq = vec![0u64; n];
    for i in 0..per_rank {
        let d = (i as usize + am.rank()) % n;
        let payload: Vec<u8> = (0..(i % 100) as u8).collect();
        let sum: u64 = payload.iter().map(|&b| u64::from(b)).sum();
        am.request_medium(d, h, &[seq[d], me << 32 | seq[d], sum], &payload)
            .map_err(|e| e.to_string())?;
        seq[d] += 1;
    }
    am.wait_until_for(Duration::from_secs(60), |s| s.count.get() == per_rank)
        .map_err(|e| e.to_string())?;
    am.barrier().map_err(|e| e.to_string())?;
    if am.state().bad.get() != 0 {
        return Err(format!(
            "{} messages out of order or corrupted",
            am.state().bad.get()
        ));
    }
    Ok(())
}

#[test]
fn exactly_once_in_order_self_launched() {
    rank_of(&Config::default(), |c| exactly_once_rank(c, 60_000));
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("exactly_once_in_order_self_launched", 3);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        shm_objects().is_empty(),
        "left in /dev/shm: {:?}",
        shm_objects()
    );
}

#[test]
fn exactly_once_in_order_through_amrun() {
    rank_of(&Config::default(), |c| exactly_once_rank(c, 60_000));
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (status, _) = amrun("exactly_once_in_order_through_amrun", 2, &["--label"]);
    assert!(status.success(), "{status:?}");
    assert!(shm_objects().is_empty());
}

// ---------------------------------------------------------------- queue full

fn queue_cfg() -> (Config, QueueId) {
    let mut cfg = Config::default();
    let q = cfg.add_queue(8);
    (cfg, q)
}

#[test]
fn full_queue_loses_nothing_as_processes() {
    let (cfg, q) = queue_cfg();
    rank_of(&cfg, |c| {
        let am = Am::new(c, HandlerTable::<()>::new(), ()).map_err(|e| e.to_string())?;
        let rq = am.rq();
        let e = |e: RqError| e.to_string();
        if am.rank() == 0 {
            let accepted = (0..50u64)
                .filter(|&i| rq.enqueue(1, q, &[i], &[]).unwrap_or(false))
                .count();
            if accepted != 8 {
                return Err(format!("an 8-slot queue accepted {accepted}"));
            }
        }
        am.barrier().map_err(|e| e.to_string())?;
        if am.rank() == 1 {
            let mut args = [0u64; 1];
            for i in 0..8 {
                match rq.dequeue(q, &mut args, &mut []).map_err(e)? {
                    Some(_) if args[0] == i => {}
                    other => return Err(format!("frame {i}: {other:?} args {args:?}")),
                }
            }
            if rq.dequeue(q, &mut args, &mut []).map_err(e)?.is_some() {
                return Err("a refused frame arrived".into());
            }
        }
        am.barrier().map_err(|e| e.to_string())
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("full_queue_loses_nothing_as_processes", 2);
    assert_eq!(out.code, 0, "{out:?}");
}

// ---------------------------------------------------------------- flood

struct Flood {
    back: ReplyHandler,
    replies: Cell<u64>,
}

/// The AM runtime of a flood: `ask` requests whose handlers reply `back`.
fn flood_am(c: MemConduit) -> Result<(Am<Flood>, RequestHandler), String> {
    let mut table = HandlerTable::new();
    let back = table.reply("back", |s: &Flood, _m| {
        s.replies.set(s.replies.get() + 1);
        Ok(())
    });
    let ask = table.request("ask", |s: &Flood, ctx, m| ctx.reply(s.back, &[m.arg(0)?]));
    let state = Flood {
        back,
        replies: Cell::new(0),
    };
    Ok((Am::new(c, table, state).map_err(|e| e.to_string())?, ask))
}

fn flood_rank(c: MemConduit, per_peer: u64) -> Result<(), String> {
    let (am, ask) = flood_am(c)?;
    let n = am.size();
    for i in 0..per_peer {
        for k in 0..n {
            am.request((am.rank() + k) % n, ask, &[i])
                .map_err(|e| e.to_string())?;
        }
    }
    let want = per_peer * n as u64;
    am.wait_until_for(Duration::from_secs(60), |s| s.replies.get() == want)
        .map_err(|e| e.to_string())?;
    am.barrier().map_err(|e| e.to_string())
}

#[test]
fn flood_of_requests_with_replies_4_processes() {
    let cfg = {
        let mut c = Config::new();
        c.ring_slots.set(16);
        c
    };
    rank_of(&cfg, |c| flood_rank(c, 10_000));
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("flood_of_requests_with_replies_4_processes", 4);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(shm_objects().is_empty());
}

// ---------------------------------------------------------------- failures

/// Rank 1 fails in the way `how` says in the middle of a flood; the others flood on.
fn failing_rank(c: MemConduit, how: &str) -> Result<(), String> {
    let pid_file = std::env::temp_dir().join(format!(
        "amrq-test-pids-{}",
        std::env::var("AMRQ_JOB_ID").unwrap_or_default()
    ));
    let rank = c.rank();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&pid_file)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, format!("{}\n", std::process::id()).as_bytes())
        })
        .map_err(|e| e.to_string())?;
    let (am, ask) = flood_am(c)?;
    for i in 0.. {
        if rank == 1 && i == 20_000 {
            // When it failed, for the test to time the end of the job from.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            std::fs::write(
                pid_file.with_extension("failed"),
                now.as_millis().to_string(),
            )
            .map_err(|e| e.to_string())?;
            match how {
                "panic" => panic!("rank 1 panics on purpose"),
                "exit3" => std::process::exit(3),
                // SAFETY: raising a signal against ourselves.
                _ => unsafe {
                    libc::raise(libc::SIGKILL);
                },
            }
        }
        am.request((rank + 1) % am.size(), ask, &[i])
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn check_failure(test: &str, how: &str, want: i32) {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = shm_objects();
    let mut l = Launcher::new(3);
    l.bind = Bind::None;
    l.verbose = false;
    l.quiet = true;
    let pid_file = std::env::temp_dir().join(format!("amrq-test-pids-{}", l.id));
    let exe = std::env::current_exe().expect("test binary");
    let out = l
        .run(exe.as_os_str(), &child_args(test))
        .expect("job starts");
    let ended = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    assert_eq!(out.code, want, "{how}: {out:?}");
    assert_eq!(
        out.failure.as_ref().and_then(|f| f.rank),
        Some(1),
        "{out:?}"
    );
    let failed_at: u128 = std::fs::read_to_string(pid_file.with_extension("failed"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("the failing rank recorded when it failed");
    let _ = std::fs::remove_file(pid_file.with_extension("failed"));
    let took = ended.as_millis().saturating_sub(failed_at);
    assert!(
        took <= 2000,
        "{how}: the job ended {took} ms after rank 1 failed"
    );
    let pids = std::fs::read_to_string(&pid_file).unwrap_or_default();
    let _ = std::fs::remove_file(&pid_file);
    let pids: Vec<i32> = pids.lines().filter_map(|l| l.parse().ok()).collect();
    assert_eq!(pids.len(), 3, "every rank started: {pids:?}");
    for p in pids {
        assert!(!alive(p), "{how}: rank process {p} is still alive");
    }
    assert_eq!(shm_objects(), before, "{how}: /dev/shm not clean");
}

#[test]
fn a_panicking_rank_ends_the_job() {
    rank_of(&Config::default(), |c| failing_rank(c, "panic"));
    check_failure("a_panicking_rank_ends_the_job", "panic", 101);
}

#[test]
fn a_rank_exiting_3_ends_the_job_with_status_3() {
    rank_of(&Config::default(), |c| failing_rank(c, "exit3"));
    check_failure("a_rank_exiting_3_ends_the_job_with_status_3", "exit3", 3);
}

#[test]
fn a_rank_killed_by_sigkill_ends_the_job_with_137() {
    rank_of(&Config::default(), |c| failing_rank(c, "kill"));
    check_failure(
        "a_rank_killed_by_sigkill_ends_the_job_with_137",
        "kill",
        137,
    );
}

#[test]
fn amrun_reports_a_failed_rank_quickly_and_exits_with_its_status() {
    rank_of(&Config::default(), |c| failing_rank(c, "exit3"));
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (status, took) = amrun(
        "amrun_reports_a_failed_rank_quickly_and_exits_with_its_status",
        3,
        &[],
    );
    assert_eq!(status.code(), Some(3));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(shm_objects().is_empty());
}

#[test]
fn killing_amrun_ends_every_rank() {
    // Ranks that would run for a minute.
    rank_of(&Config::default(), |c| {
        let am = Am::new(c, HandlerTable::<()>::new(), ()).map_err(|e| e.to_string())?;
        am.barrier().map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_secs(60));
        Ok(())
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_amrun"))
        .args(["-n", "2", "--bind", "none"])
        .arg(std::env::current_exe().expect("test binary"))
        .args(child_args("killing_amrun_ends_every_rank"))
        .spawn()
        .expect("amrun runs");
    // Wait until both ranks run (they are amrun's children).
    let amrun_pid = child.id() as i32;
    let ranks = || -> Vec<i32> {
        std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                    .filter(|p| {
                        std::fs::read_to_string(format!("/proc/{p}/stat"))
                            .ok()
                            .and_then(|s| s.rsplit(')').next().map(str::to_owned))
                            .and_then(|s| {
                                s.split_whitespace()
                                    .nth(1)
                                    .and_then(|x| x.parse::<i32>().ok())
                            })
                            == Some(amrun_pid)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let t = Instant::now();
    let mut pids = ranks();
    while pids.len() < 2 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
        pids = ranks();
    }
    assert_eq!(pids.len(), 2, "both ranks started");
    std::thread::sleep(Duration::from_millis(300)); // past setup: the segment is unlinked
    child.kill().expect("SIGKILL amrun");
    let _ = child.wait();
    let t = Instant::now();
    while pids.iter().any(|&p| alive(p)) && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Reap nothing: they were amrun's children, now init's; gone means gone.
    for p in &pids {
        let zombie_or_gone = !alive(*p)
            || std::fs::read_to_string(format!("/proc/{p}/stat"))
                .map(|s| s.contains(") Z"))
                .unwrap_or(true);
        assert!(zombie_or_gone, "rank process {p} survived amrun");
    }
    assert!(
        shm_objects().is_empty(),
        "left in /dev/shm: {:?}",
        shm_objects()
    );
}

// ---------------------------------------------------------------- Long

#[path = "common/long.rs"]
mod common_long;

#[path = "common/left.rs"]
mod common_left;

#[test]
fn a_rank_that_left_is_reported_not_waited_for_as_processes() {
    rank_of(&Config::default(), common_left::left_rank);
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch(
        "a_rank_that_left_is_reported_not_waited_for_as_processes",
        2,
    );
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn long_requests_and_replies_as_processes() {
    let cfg = {
        let mut c = Config::new();
        c.segment_bytes.set(4 << 20);
        c
    };
    rank_of(&cfg, common_long::long_round_trips);
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("long_requests_and_replies_as_processes", 2);
    assert_eq!(out.code, 0, "{out:?}");
}

// ---------------------------------------------------------------- mpirun

#[test]
fn ranks_started_by_mpirun_join_one_job() {
    rank_of(&Config::default(), |c| exactly_once_rank(c, 20_000));
    let Ok(mpirun) = which("mpirun") else {
        println!("skipped: mpirun is not installed (Debian: apt-get install openmpi-bin)");
        return;
    };
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let token = token();
    let status = Command::new(mpirun)
        .env("AMRQ_TEST_TOKEN", &token)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["-n", "2", "--bind-to", "none"])
        .arg(std::env::current_exe().expect("test binary"))
        .args(child_args("ranks_started_by_mpirun_join_one_job"))
        .status()
        .expect("mpirun runs");
    assert!(status.success(), "{status:?}");
    all_ran(&token, 2);
    assert!(shm_objects().is_empty());
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
        .ok_or(())
}

#[test]
fn flood_through_amrun() {
    let cfg = {
        let mut c = Config::new();
        c.ring_slots.set(16);
        c
    };
    rank_of(&cfg, |c| flood_rank(c, 5_000));
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (status, _) = amrun("flood_through_amrun", 3, &[]);
    assert!(status.success(), "{status:?}");
    assert!(shm_objects().is_empty());
}

// ---------------------------------------------------------------- One-poll

#[path = "common/one_poll.rs"]
mod one_poll;

#[test]
fn one_poll_armed_path_as_processes() {
    let (cfg, _) = one_poll::config();
    rank_of(&cfg, |c| one_poll::armed_bursts(c, 1000));
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("one_poll_armed_path_as_processes", 2);
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn am_poll_arm_point_as_processes() {
    rank_of(&Config::default(), |c| {
        one_poll::am_poll_around_the_arm_point(c, 10_000, Duration::from_micros(200))
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("am_poll_arm_point_as_processes", 2);
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn one_poll_arm_point_as_processes() {
    let (cfg, _) = one_poll::config();
    rank_of(&cfg, |c| {
        one_poll::arrivals_around_the_arm_point(c, 10_000, Duration::from_micros(200))
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("one_poll_arm_point_as_processes", 2);
    assert_eq!(out.code, 0, "{out:?}");
}

// ---------------------------------------------------------------- Tag-On

#[path = "common/tag_on.rs"]
mod tag_on;

#[test]
fn tag_on_blocks_are_reused_as_processes() {
    let (cfg, _) = tag_on::config();
    rank_of(&cfg, |c| tag_on::tag_on_reuse(c, 3_000));
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("tag_on_blocks_are_reused_as_processes", 2);
    assert_eq!(out.code, 0, "{out:?}");
}

#[path = "common/shared.rs"]
mod shared;

#[test]
fn a_shared_queue_delivers_exactly_once_as_processes() {
    let (cfg, _) = shared::config();
    rank_of(&cfg, |c| {
        let (got, sum) = shared::flood(c, 5_000).map_err(|e| e.to_string())?;
        if (got, sum) == (3 * 5_000, shared::want_sum(3, 5_000)) {
            Ok(())
        } else {
            Err(format!("got {got} frames, checksum {sum}"))
        }
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("a_shared_queue_delivers_exactly_once_as_processes", 3);
    assert_eq!(out.code, 0, "{out:?}");
}

#[path = "common/rma.rs"]
mod common_rma;

#[test]
fn rma_agrees_with_a_model_as_processes() {
    rank_of(&Config::default(), |c| {
        common_rma::against_a_model(c, 3_000, false)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("rma_agrees_with_a_model_as_processes", 3);
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn remote_atomics_sum_exactly_as_processes() {
    rank_of(&Config::default(), |c| {
        common_rma::atomics_from_every_rank(c, 20_001, false).map_err(|e| e.to_string())
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("remote_atomics_sum_exactly_as_processes", 3);
    assert_eq!(out.code, 0, "{out:?}");
}

#[path = "common/coll.rs"]
mod common_coll;

#[test]
fn collectives_match_the_model_as_processes() {
    rank_of(&Config::default(), |c| {
        common_coll::all_collectives(c, &[1, 37, 5000]).map_err(|e| e.to_string())
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("collectives_match_the_model_as_processes", 3);
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn indexed_transfers_through_frames_as_processes() {
    rank_of(&Config::default(), |c| {
        common_rma::indexed_against_a_model(c, 60, true)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = self_launch("indexed_transfers_through_frames_as_processes", 3);
    assert_eq!(out.code, 0, "{out:?}");
}
