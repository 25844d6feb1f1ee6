//! One program, every placement: a rank's main reaches the job through `Config::run`
//! (or `Config::join`) whoever started it, reads the `AMRQ_*` settings, and is told in
//! words when its ranks or its launcher disagree with it.
//!
//! Jobs of processes re-execute this test binary filtered to [`placement_rank`], whose
//! body runs only in those processes (`AMRQ_TEST_PLACEMENT` set, naming what to do).

#![cfg(not(amrq_loom))]

#[path = "common/marker.rs"]
mod marker;

use amrq::prelude::*;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The processes' part. `AMRQ_TEST_PLACEMENT` says what each rank does:
/// `report` prints `size=… segment=… ring_slots=…` on rank 0 after a barrier; `join`
/// does the same through `Config::join` (as the C interface starts); `fail` returns an
/// error on rank 1; `program-ring-slots` reports with the program's own ring slots.
#[test]
fn placement_rank() {
    let Ok(what) = std::env::var("AMRQ_TEST_PLACEMENT") else {
        return;
    };
    let join = what == "join";
    let mut cfg = Config::new();
    cfg.ranks.set_default(2);
    if what == "program-ring-slots" {
        cfg.ring_slots.set(64);
    }
    let rank_main = move |setup: Setup| -> amrq::Result<()> {
        let (ring_slots, ranks) = (setup.config().ring_slots.get(), setup.config().ranks.get());
        let job = setup.start(HandlerTable::<()>::new(), ())?;
        job.barrier()?;
        if job.rank() == 1 && what == "fail" {
            return Err("the input has no header: give it one".into());
        }
        if job.rank() == 0 {
            println!(
                "size={} segment={} ring_slots={ring_slots} config_ranks={ranks}",
                job.size(),
                job.am().segment().1
            );
        }
        match marker::mark_ran(job.rank()) {
            true => Ok(()),
            false => Err("cannot leave word that this rank ran".into()),
        }
    };
    if join {
        if let Err(e) = cfg.join().and_then(rank_main) {
            eprintln!("{}", e.chain());
            std::process::exit(1);
        }
        std::process::exit(0);
    }
    cfg.run(rank_main)
}

/// This test binary as a program filtered to [`placement_rank`] doing `what`.
fn program(what: &str, token: &str) -> Command {
    let exe = std::env::current_exe().expect("test binary");
    let mut c = Command::new(exe);
    c.args(marker::child_args("placement_rank"))
        .env("AMRQ_TEST_PLACEMENT", what)
        .env("AMRQ_TEST_TOKEN", token)
        .env("AMRQ_ATTACH_TIMEOUT", "20")
        .stdin(Stdio::null());
    c
}

/// The same under `amrun -n N`.
fn under_amrun(n: usize, what: &str, token: &str) -> Command {
    let inner = program(what, token);
    let mut c = Command::new(env!("CARGO_BIN_EXE_amrun"));
    c.args(["-n", &n.to_string(), "--bind", "none", "--timeout", "60"])
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c.stdin(Stdio::null());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `c`: its output, and says what it printed if it failed unexpectedly.
fn output(c: &mut Command) -> Output {
    c.output().expect("the program starts")
}

/// The `key=value` of rank 0's report line.
fn reported(out: &Output, key: &str) -> String {
    let stdout = text(&out.stdout);
    // The test harness's own words may precede it on its line.
    let line = stdout
        .lines()
        .find_map(|l| l.find("size=").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no report in {stdout:?}; stderr {}", text(&out.stderr)));
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        .to_string()
}

#[test]
fn started_alone_it_starts_its_ranks_and_reads_amrq_settings() {
    let token = marker::token();
    let out = output(
        program("report", &token)
            .env("AMRQ_RANKS", "3")
            .env("AMRQ_SEGMENT_SIZE", "1M"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(reported(&out, "size"), "3");
    assert_eq!(reported(&out, "segment"), (1 << 20).to_string());
    marker::all_ran(&token, 3);
}

#[test]
fn as_threads_it_reads_amrq_threads() {
    let token = marker::token();
    let out = output(
        program("report", &token)
            .env("AMRQ_THREADS", "1")
            .env("AMRQ_RANKS", "2"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(reported(&out, "size"), "2");
    marker::all_ran(&token, 2);
}

#[test]
fn the_launchers_count_wins_and_one_line_names_both() {
    let token = marker::token();
    let out = output(under_amrun(2, "report", &token).env("AMRQ_RANKS", "3"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(reported(&out, "size"), "2");
    assert_eq!(
        reported(&out, "config_ranks"),
        "2",
        "the settings say the job's count"
    );
    let stderr = text(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("started 2 ranks"))
        .collect();
    assert_eq!(
        said,
        ["amrq: amrun started 2 ranks and the program asked for AMRQ_RANKS=3: the job has 2"],
        "{stderr}"
    );
    marker::all_ran(&token, 2);
    // The program's own default is not a request: no line.
    let token = marker::token();
    let out = output(&mut under_amrun(3, "report", &token));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(reported(&out, "size"), "3");
    assert!(
        !text(&out.stderr).contains("asked for"),
        "{}",
        text(&out.stderr)
    );
    marker::all_ran(&token, 3);
}

#[test]
fn join_gives_a_rank_of_the_launchers_job() {
    let token = marker::token();
    let out = output(&mut under_amrun(2, "join", &token));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(reported(&out, "size"), "2");
    marker::all_ran(&token, 2);
}

#[test]
fn a_programs_own_setting_wins_over_the_environment() {
    let token = marker::token();
    let out = output(program("program-ring-slots", &token).env("AMRQ_RING_SLOTS", "1024"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(reported(&out, "ring_slots"), "64");
    marker::all_ran(&token, 2);
}

#[test]
fn ranks_with_other_settings_are_refused_naming_the_setting_and_both_values() {
    let token = marker::token();
    let by_hand = |rank: &str, slots: &str| {
        let mut c = program("report", &token);
        c.env("AMRQ_RANK", rank)
            .env("AMRQ_SIZE", "2")
            .env("AMRQ_JOB_ID", format!("placement-{token}"))
            .env("AMRQ_JOB_KEY", &token[..32])
            .env("AMRQ_RING_SLOTS", slots)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c.spawn().expect("a rank starts")
    };
    let zero = by_hand("0", "256");
    std::thread::sleep(Duration::from_millis(200));
    let one = by_hand("1", "128");
    let t = Instant::now();
    let (zero, one) = (
        zero.wait_with_output().expect("rank 0 ends"),
        one.wait_with_output().expect("rank 1 ends"),
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    let why = "AMRQ_RING_SLOTS is 128 slots on rank 1 and 256 slots on rank 0; give every rank the same settings";
    for (rank, out) in [(0, &zero), (1, &one)] {
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "rank {rank} ran: {stderr}");
        assert!(stderr.contains(why), "rank {rank}: {stderr}");
        assert_eq!(stderr.matches(why).count(), 1, "said once: {stderr}");
    }
}

#[test]
fn a_rank_without_its_job_waits_the_attach_timeout_it_was_given() {
    let token = marker::token();
    let t = Instant::now();
    let out = output(
        program("report", &token)
            .env("AMRQ_RANK", "1")
            .env("AMRQ_SIZE", "2")
            .env("AMRQ_JOB_ID", format!("nobody-{token}"))
            .env("AMRQ_JOB_KEY", &token[..32])
            .env("AMRQ_ATTACH_TIMEOUT", "1"),
    );
    let took = t.elapsed();
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(6),
        "gave up after {took:?}: {stderr}"
    );
    assert!(stderr.contains("AMRQ_ATTACH_TIMEOUT"), "{stderr}");
    assert!(!stderr.contains("rank 1: rank 1"), "said once: {stderr}");
}

#[test]
fn print_config_shows_what_the_program_will_use_and_where_it_came_from() {
    let token = marker::token();
    let inner = program("program-ring-slots", &token);
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_amrun"))
            .args(["-n", "4", "--print-config"])
            .arg(inner.get_program())
            .args(inner.get_args())
            .env("AMRQ_TEST_PLACEMENT", "program-ring-slots")
            .env("AMRQ_SEGMENT_SIZE", "1M")
            .env("AMRQ_RING_SLOTS", "1024"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let line = |name: &str| {
        shown
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {shown}"))
            .to_string()
    };
    assert!(line("AMRQ_SEGMENT_SIZE").contains("1048576 bytes (1 MiB) (environment 1M"));
    assert!(line("AMRQ_RING_SLOTS").contains("64 slots (set by the program"));
    assert!(line("AMRQ_RANKS").contains("(default"), "{shown}");
    assert!(line("shared memory").contains("for 4 ranks"), "{shown}");
}

#[test]
fn print_config_across_hosts_sizes_shared_memory_by_the_largest_host() {
    let out = output(
        Command::new(env!("CARGO_BIN_EXE_amrun"))
            .args(["--hosts", "h0:3,h1:5", "--print-config"])
            .env("AMRQ_SEGMENT_SIZE", "1M"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("for 5 ranks on one host"), "{shown}");
}

#[test]
fn a_self_launched_jobs_failure_is_named_by_amrq_once() {
    let token = marker::token();
    let out = output(&mut program("fail", &token));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("the input has no header").count(),
        1,
        "said once, by the rank: {stderr}"
    );
    assert!(
        stderr.contains("amrq: rank 1: the input has no header: give it one"),
        "{stderr}"
    );
    assert!(!stderr.contains("amrun:"), "{stderr}");
    for l in stderr.lines() {
        assert!(!l.contains("amrq: amrq:"), "a doubled prefix: {l}");
    }
}

/// Every layer's error comes out of one function with `?`, and stays matchable.
#[test]
fn every_layers_error_converts_into_one_error_type() {
    use amrq::conduit::ConduitError;
    fn layers(job: &Job, q: amrq::rq::QueueId, hit: RequestHandler) -> amrq::Result<()> {
        let at = job.rma().alloc_symmetric(8, 8)?; // RmaError
        job.rma().put(1 - job.rank(), at, &[1; 8])?;
        job.splitc().barrier()?; // SplitCError
        while !job.rq().enqueue(1 - job.rank(), q, &[7], &[])? {} // RqError
        job.request(9, hit, &[])?; // AmError
        Ok(())
    }
    let mut cfg = Config::new();
    let q = cfg.add_queue(16);
    let out = cfg
        .threads(2, |setup| {
            let mut handlers = HandlerTable::new();
            let hit = handlers.request("hit", |_: &(), _ctx, _m| Ok(()));
            let job = setup.start(handlers, ())?;
            Ok(layers(&job, q, hit))
        })
        .expect("the job runs");
    for e in out.into_iter().map(|r| r.expect_err("rank 9")) {
        assert!(
            matches!(
                e,
                amrq::Error::Conduit(ConduitError::NoSuchRank { rank: 9, .. })
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "rank 9 does not exist: the job has 2 ranks (0..2)"
        );
    }
}
