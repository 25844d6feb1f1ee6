//! Every benchmark runs in its quick configuration and produces well-formed output:
//! the summary line, JSON that reads back, and `all`'s report files; missing peers
//! are reported as missing; a wrong rank count is refused with a message.

use amrq_bench::report::Outcome;
use amrq_bench::results::Results;
use amrq_bench::suite::{Job, JOBS};
use std::path::Path;
use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_amrq-bench"))
        .args(args)
        .env("AMRQ_SEGMENT_SIZE", "1M")
        .output()
        .expect("amrq-bench runs")
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
        Job::OneToOne => &["ns_per_msg", "msgs_per_s"],
        Job::OneToTwo => &["send_ns"],
        Job::TwoToOne => &["receive_ns"],
        Job::Ring => &["ns_per_msg", "startup_ns", "bandwidth_mb_s"],
        Job::Traverse => &["ns_per_msg", "bandwidth_mb_s"],
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
        Job::Interrupts => &["hold_ns", "deferred_handler_ns"],
        Job::Signature => &["o_s_ns", "o_r_ns", "g_ns", "l_ns", "rtt_ns"],
        Job::Stream => &["one_way_8b_ns", "bw_64k_mb_s", "bw_1m_mb_s", "barrier_ns"],
    }
}

fn check_outcome(job: Job, o: &Outcome) {
    assert_eq!(o.name, job.name());
    assert!(
        !o.notes.iter().any(|n| n.starts_with("failed")),
        "{}: {:?}",
        o.name,
        o.notes
    );
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
    assert_eq!(keys, ["round_trip_ns", "raw_rtt_ns", "ratio"]);
    assert!(p.iter().all(|&(_, v)| v > 0.0), "{p:?}");

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
    let out = bench(&["all", "--quick", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let r: Results =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(r.outcomes.len(), JOBS.len());
    for (job, o) in JOBS.iter().zip(&r.outcomes) {
        check_outcome(*job, o);
    }
    // amrq first, then every peer: measured, or missing with the reason.
    let names: Vec<&str> = r.peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["amrq", "Open MPI", "UCX", "GASNet-EX"]);
    assert_eq!(r.peers[0].values.len(), amrq_bench::peers::METRICS.len());
    for p in &r.peers[1..] {
        match &p.missing {
            Some(why) => assert!(!why.is_empty()),
            None => assert!(!p.values.is_empty(), "{} ran without figures", p.name),
        }
    }
    assert!(r.peers[3].missing.as_deref().unwrap().contains("--gasnet"));
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert!(csv.starts_with("benchmark,series,key_or_x,median,min,max\n"));
    assert!(
        csv.lines().skip(1).all(|l| l.split(',').count() >= 6),
        "{csv}"
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    for section in [
        "## Headline",
        "## Array transfer",
        "## LogP signature",
        "## Polling",
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
    ] {
        assert!(
            starts_with(&dir.join(format!("plots/{chart}.svg")), b"<svg"),
            "{chart}.svg"
        );
        assert!(
            starts_with(&dir.join(format!("plots/{chart}.png")), b"\x89PNG"),
            "{chart}.png"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_peers_are_reported_as_missing() {
    let empty = std::env::temp_dir().join(format!("amrq-bench-nopath-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_amrq-bench"))
        .args(["peers", "--quick"])
        .env("PATH", &empty)
        .env("AMRQ_SEGMENT_SIZE", "16M")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for peer in ["Open MPI: missing", "UCX: missing", "GASNet-EX: missing"] {
        assert!(text.contains(peer), "{text}");
    }
    let p = pairs(&out.stdout, "peers");
    assert!(p.iter().any(|(k, _)| k == "amrq_rtt_ns"), "{p:?}");
    assert!(
        !p.iter().any(|(k, _)| k.contains("speedup")),
        "a missing peer has no ratio"
    );
    let _ = std::fs::remove_dir_all(&empty);
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
    let out = Command::new(env!("CARGO_BIN_EXE_amrq-bench"))
        .args(["all", "--quick"])
        .env("AMRQ_RANK", "0")
        .env("AMRQ_SIZE", "2")
        .env("AMRQ_JOB_ID", "amrun-1-0")
        .env("AMRQ_JOB_KEY", "0123456789abcdef0123456789abcdef")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run them directly"), "{err}");
}
