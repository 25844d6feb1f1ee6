//! Every benchmark runs in its quick configuration and produces well-formed output:
//! the summary line, JSON that reads back, and `all`'s report files; missing peers
//! are reported as missing; a wrong rank count is refused with a message.

use amrq_bench::peers::Status;
use amrq_bench::report::Outcome;
use amrq_bench::results::Results;
use amrq_bench::suite::{Job, JOBS};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one amrq-bench run may take (`all --quick` takes under a minute here,
/// debug build): past it the run is killed and the test fails, never hangs CI.
const WATCHDOG: Duration = Duration::from_secs(20 * 60);

/// One measuring run at a time: two would share the two cores.
static MACHINE: Mutex<()> = Mutex::new(());

/// Runs amrq-bench with `args` (and a 1 MiB segment).
fn bench(args: &[&str]) -> Output {
    run(
        Command::new(env!("CARGO_BIN_EXE_amrq-bench"))
            .args(args)
            .env("AMRQ_SEGMENT_SIZE", "1M"),
        Stdio::piped(),
    )
}

/// Runs `cmd` under [`MACHINE`] and [`WATCHDOG`]; what it printed. Its stderr goes to
/// `stderr`: piped (and returned), or inherited (a CI log shows where a long run is).
fn run(cmd: &mut Command, stderr: Stdio) -> Output {
    let _alone = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("amrq-bench runs");
    let out = read_all(child.stdout.take());
    let err = read_all(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > WATCHDOG {
            let _ = child.kill();
            panic!("{cmd:?} still ran after {WATCHDOG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Reads a pipe to its end on a thread of its own.
fn read_all<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut s);
        }
        s
    })
}

/// The `key=value` pairs of the summary line `name: …`, checked well-formed.
fn pairs(stdout: &[u8], name: &str) -> Vec<(String, f64)> {
    let out = String::from_utf8_lossy(stdout);
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no summary line for {name} in {out:?}"));
    line[name.len() + 2..]
        .split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            (k.to_string(), v.parse::<f64>().expect("a number"))
        })
        .collect()
}

/// What every job must report, at least.
fn required(job: Job) -> &'static [&'static str] {
    match job {
        Job::RoundTrip => &["round_trip_ns", "raw_rtt_ns", "ratio"],
        Job::RoundTripRanks => &["round_trip_ns"],
        Job::OneToOne => &["ns_per_msg", "msgs_per_s", "pair_ns_per_msg"],
        Job::OneToTwo => &["send_ns"],
        Job::TwoToOne => &["receive_ns", "receive_live_ns", "reply_send_ns"],
        Job::Ring => &["ns_per_msg", "startup_ns", "bandwidth_mb_s"],
        Job::Traverse => &[
            "self_ns_per_msg",
            "pair_ns_per_msg",
            "pair_polled_ns_per_msg",
            "pair_bandwidth_mb_s",
        ],
        Job::Array => &[
            "blocking_byte_4w_ns",
            "put_double-word_mb_s",
            "memcpy_mb_s",
            "put_vs_memcpy",
        ],
        Job::ArrayTwoToOne => &[
            "one_segment_double-word_mb_s",
            "two_segments_double-word_mb_s",
        ],
        Job::Polling => &["am_poll_ns", "request_queue_ns", "one_poll_8_ns"],
        Job::Interrupts => &[
            "hold_ns",
            "hold_alone_ns",
            "release_alone_ns",
            "deferred_handler_ns",
        ],
        Job::Mechanisms => &[
            "express_send_ns",
            "basic_receive_ns",
            "tag_on_one_way_ns",
            "dma_send_ns",
            "am_one_way_ns",
            "put_ns",
        ],
        Job::Signature => &["o_s_ns", "o_r_ns", "g_ns", "l_ns", "rtt_ns"],
        Job::Stream => &["one_way_8b_ns", "bw_64k_mb_s", "bw_1m_mb_s", "barrier_ns"],
        Job::Splitc => &[
            "direct_read_one_way_ns",
            "direct_store_two_way_ns",
            "frames_get_one_way_ns",
            "frames_store_one_way_ns",
            "store_over_put",
            "read_rtt_ratio",
            "stores_10k_per_s",
        ],
        Job::Matmul => &[
            "direct_column_latency_ns",
            "frames_column_gap_ns",
            "frames_column_overhead_ns",
            "direct_efficiency_m512",
            "frames_efficiency_m512",
        ],
        Job::SendingThreads => &[
            "threads_1_msgs_per_s",
            "ranks_1_msgs_per_s",
            "threads_2_msgs_per_s",
            "ranks_2_msgs_per_s",
            "threads_1_ns_per_send",
            "second_thread_cost_ratio",
        ],
        Job::Calls => &[
            "call_rtt_ns",
            "rtt_ratio",
            "call_window_ns_per_msg",
            "window_ratio",
        ],
    }
}

fn check_outcome(job: Job, o: &Outcome) {
    assert_eq!(o.name, job.name());
    assert!(!o.failed(), "{}: {:?}", o.name, o.notes);
    for key in required(job) {
        let f = o
            .get(key)
            .unwrap_or_else(|| panic!("{}: no {key} in {:?}", o.name, o.figures));
        assert!(
            f.median.is_finite() && f.min <= f.median && f.median <= f.max,
            "{f:?}"
        );
    }
    for s in &o.series {
        assert!(!s.points.is_empty(), "{}: empty series {}", o.name, s.name);
        assert!(
            s.points.windows(2).all(|w| w[0].x < w[1].x),
            "{}: x not increasing",
            s.name
        );
    }
}

#[test]
fn the_round_trip_prints_its_summary_line_and_json_to_out() {
    let out = bench(&["round-trip", "--quick"]);
    assert!(out.status.success(), "{out:?}");
    let p = pairs(&out.stdout, "round-trip");
    let keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "round_trip_ns",
            "raw_rtt_ns",
            "ratio",
            "raw_rotating_ns",
            "raw_rotating_pause_ns",
            "raw_rotating_spaced_ns",
            "raw_hot_ns",
            "raw_hot_pause_ns",
            "raw_ring_ns",
            "failure_ns",
            "failure_round_trips"
        ]
    );
    assert!(p.iter().all(|&(_, v)| v > 0.0), "{p:?}");
    // The floor is the fastest design's median, and the note names it.
    let fastest = p[3..9]
        .iter()
        .map(|&(_, v)| v)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(p[1].1, fastest, "{p:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("note: raw floor: "), "{text}");

    let dir = std::env::temp_dir().join(format!("amrq-bench-test-{}", std::process::id()));
    let out = bench(&[
        "one-to-one",
        "--quick",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let json = String::from_utf8_lossy(&out.stdout);
    let o: Outcome = serde_json::from_str(json.trim()).expect("one JSON object");
    check_outcome(Job::OneToOne, &o);
    let saved = std::fs::read_to_string(dir.join("one-to-one.json")).expect("--out file");
    assert_eq!(saved.trim(), json.trim());
    let _ = std::fs::remove_dir_all(&dir);
}

fn starts_with(path: &Path, magic: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(magic))
}

/// `all --quick` runs every job (each a tiny configuration of its benchmark) and the
/// peers, and writes a complete report.
#[test]
fn all_runs_every_benchmark_and_writes_the_report() {
    let dir = std::env::temp_dir().join(format!("amrq-bench-all-{}", std::process::id()));
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_amrq-bench"))
            .args(["all", "--quick", "--out", dir.to_str().unwrap()])
            .env("AMRQ_SEGMENT_SIZE", "1M"),
        Stdio::inherit(),
    );
    assert!(out.status.success(), "{out:?}");
    let r: Results =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(r.outcomes.len(), JOBS.len());
    for (job, o) in JOBS.iter().zip(&r.outcomes) {
        check_outcome(*job, o);
    }
    // Every peer: measured in every round (amrq before it), or missing with the
    // reason; a peer that ran and failed fails the test.
    let names: Vec<&str> = r
        .peers
        .comparisons
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["Open MPI", "UCX", "GASNet-EX"]);
    for c in &r.peers.comparisons {
        match &c.status {
            Status::Missing(why) => assert!(!why.is_empty()),
            Status::Failed { .. } => panic!("{} failed: {:?}", c.name, c.status),
            Status::Ran => {
                assert_eq!(c.rounds.len(), r.peers.rounds, "{}", c.name);
                for round in &c.rounds {
                    for key in &c.expects {
                        assert!(round.peer.iter().any(|(k, _)| k == key), "{} {key}", c.name);
                        assert!(round.amrq.iter().any(|(k, _)| k == key), "amrq {key}");
                    }
                    for f in &round.files {
                        assert!(dir.join(f).is_file(), "raw output {f}");
                    }
                }
            }
        }
    }
    let gasnet = &r.peers.comparisons[2];
    assert!(matches!(&gasnet.status, Status::Missing(why) if why.contains("--gasnet")));
    // stdout: the peers table, then the summary line.
    let text = String::from_utf8_lossy(&out.stdout);
    let table = text
        .find("amrq and its peers:")
        .expect("the peers table on stdout");
    let line = text.find("peers: amrq_rtt_ns").expect("the summary line");
    let headline = text.find("amrq on this host").expect("the headline");
    assert!(table < line && line < headline, "{text}");
    // The headline's rows, each peer once, and the report's path last.
    assert!(text[headline..].contains("Short AM round trip"), "{text}");
    assert_eq!(text.matches("GASNet-EX: missing").count(), 1, "{text}");
    assert!(
        text[headline..]
            .lines()
            .any(|l| l.starts_with("  speed-up over GASNet-EX") && l.contains("missing")),
        "{text}"
    );
    let last = text.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("report: "), "{text}");
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert!(csv.starts_with("benchmark,series,key_or_x,median,min,max\n"));
    assert!(
        csv.lines().skip(1).all(|l| l.split(',').count() >= 6),
        "{csv}"
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    // `report` writes the same summary again from results.json, without measuring.
    std::fs::remove_file(dir.join("summary.md")).unwrap();
    let again = bench(&["report", "--out", dir.to_str().unwrap()]);
    assert!(again.status.success(), "{again:?}");
    assert_eq!(std::fs::read_to_string(dir.join("summary.md")).unwrap(), md);
    // Every shape the papers claim is judged from this run's own figures, and each
    // one that does not hold says why.
    let shapes = amrq_bench::shapes::shapes(&r);
    for s in &shapes {
        // Undecided only where a crossover lies beyond the largest m measured.
        assert!(
            s.holds.is_some() || s.measured.contains("none up to"),
            "not measured: {s:?}"
        );
        assert_eq!(s.holds == Some(false), !s.why.is_empty(), "{s:?}");
    }
    assert!(text[headline..].contains("the papers' shapes: "), "{text}");
    for section in [
        "## Headline",
        "## The papers' shapes in this run",
        "## Array transfer",
        "## LogP signature",
        "## Polling",
        "## Split-C micro-benchmarks",
    ] {
        assert!(md.contains(section), "no {section}");
    }
    for chart in [
        "logp_signature",
        "array_time",
        "array_bandwidth",
        "poll_intersection",
        "interrupt_overhead",
        "traverse_steps",
        "one_way_time",
        "streaming_bandwidth",
        "splitc_bulk_direct",
        "splitc_bulk_frames",
        "long_payload_reads",
    ] {
        assert!(
            starts_with(&dir.join(format!("plots/{chart}.svg")), b"<svg"),
            "{chart}.svg"
        );
        assert!(
            !dir.join(format!("plots/{chart}.png")).exists(),
            "{chart}.png: SVG only"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stand-in for a GASNet-EX build: `testam`, `testlarge` and `testbarrier` scripts
/// that print `fixture`'s files (the real output of GASNet-EX 2025.8.0, or another
/// directory's).
fn fake_gasnet(dir: &Path, fixture: &str) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    std::fs::create_dir_all(dir).unwrap();
    for test in ["testam", "testlarge", "testbarrier"] {
        let script = format!(
            "#!/bin/sh\nexec /bin/cat '{}'\n",
            fixtures.join(format!("{test}.out")).display()
        );
        let path = dir.join(test);
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// `peers --quick` with nothing on the PATH and a GASNet-EX stand-in: the table, the
/// notes and the summary line (in that order) on stdout; raw output under --out.
fn peers_without_path(gasnet: &Path, out: &Path) -> (String, Vec<(String, f64)>) {
    let empty = out.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let o = run(
        Command::new(env!("CARGO_BIN_EXE_amrq-bench"))
            .args(["peers", "--quick", "--peer-rounds", "2", "--gasnet"])
            .arg(gasnet)
            .arg("--out")
            .arg(out)
            .env("PATH", &empty)
            .env("AMRQ_SEGMENT_SIZE", "16M"),
        Stdio::piped(),
    );
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let table = text.find("amrq and its peers:").expect("the table");
    assert!(
        table < text.find("\npeers: ").expect("the summary line"),
        "{text}"
    );
    (text, pairs(&o.stdout, "peers"))
}

#[test]
fn missing_peers_are_reported_as_missing_and_gasnet_output_fills_its_row() {
    let dir = std::env::temp_dir().join(format!("amrq-bench-nopath-{}", std::process::id()));
    fake_gasnet(&dir.join("gasnet"), "gasnet-2025.8.0-smp");
    let (text, p) = peers_without_path(&dir.join("gasnet"), &dir);
    for peer in ["Open MPI: missing", "UCX: missing"] {
        assert!(text.contains(peer), "{text}");
    }
    assert!(p.iter().any(|(k, _)| k == "amrq_rtt_ns"), "{p:?}");
    assert!(
        !p.iter()
            .any(|(k, _)| k.starts_with("ucx") || k.starts_with("open_mpi")),
        "a missing peer has no figure"
    );
    // GASNet-EX's real output gives every metric, in both rounds (no `cc` on this
    // PATH: its ranks are not pinned, and the notes say so).
    let value = |k: &str| p.iter().find(|(x, _)| x == k).map(|&(_, v)| v);
    assert_eq!(value("gasnet_ex_rtt_ns"), Some(325.0));
    assert_eq!(value("gasnet_ex_barrier_ns"), Some(138.0));
    for (key, _, _) in amrq_bench::peers::METRICS {
        assert!(
            value(&format!("gasnet_ex_{key}_speedup")).is_some(),
            "{key}: {p:?}"
        );
    }
    assert!(text.contains("GASNet-EX: ranks not pinned"), "{text}");
    for round in 1..=2 {
        let raw = dir.join(format!("peers/gasnet_ex-round{round}-1-testam.txt"));
        let raw = std::fs::read_to_string(&raw).expect("raw output saved");
        assert!(raw.contains("AMShort     ping-pong roundtrip ReqRep"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A peer that ran but printed nothing the parser reads has failed: said so, with
/// the lines it could not read, and no figure of it in the table.
#[test]
fn a_peer_that_ran_without_figures_is_a_failure_with_its_lines() {
    let dir = std::env::temp_dir().join(format!("amrq-bench-silent-{}", std::process::id()));
    fake_gasnet(&dir.join("gasnet"), "guessed-format");
    let (text, p) = peers_without_path(&dir.join("gasnet"), &dir);
    assert!(
        text.contains("GASNet-EX: FAILED in round 1: no figure for rtt_ns"),
        "{text}"
    );
    assert!(
        text.contains("A: ping-pong round-trip Request   :  0.012 seconds"),
        "{text}"
    );
    assert!(!p.iter().any(|(k, _)| k.starts_with("gasnet")), "{p:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wrong_rank_count_is_refused_with_a_message() {
    let out = bench(&["round-trip", "--ranks", "3"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("runs on 2 ranks (--ranks 2), not 3"), "{err}");
    let out = bench(&["two-to-one", "--ranks", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("runs on 3 ranks"));
}

#[test]
fn all_refuses_to_run_inside_a_job_whose_environment_its_children_would_join() {
    let out = run(
        Command::new(env!("CARGO_BIN_EXE_amrq-bench"))
            .args(["all", "--quick"])
            .env("AMRQ_RANK", "0")
            .env("AMRQ_SIZE", "2")
            .env("AMRQ_JOB_ID", "amrun-1-0")
            .env("AMRQ_JOB_KEY", "0123456789abcdef0123456789abcdef"),
        Stdio::piped(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run them directly"), "{err}");
}
