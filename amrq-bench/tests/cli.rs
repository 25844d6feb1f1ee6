//! Each benchmark runs in its quick configuration and prints a well-formed summary line
//! and JSON; a wrong rank count is refused with a message.

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

#[test]
fn the_unloaded_benchmarks_print_well_formed_results() {
    // One at a time: each spins on both cores.
    let out = bench(&["round-trip", "--quick"]);
    assert!(out.status.success(), "{out:?}");
    let p = pairs(&out.stdout, "round-trip");
    let keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["round_trip_ns", "raw_rtt_ns", "ratio"]);
    assert!(p.iter().all(|&(_, v)| v > 0.0), "{p:?}");
    assert!(
        p[0].1 >= p[1].1 * 0.5,
        "an AM round trip is not far below the raw one"
    );

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
    assert!(
        json.trim()
            .starts_with(r#"{"name":"one-to-one","ns_per_msg":{"median":"#),
        "{json}"
    );
    let saved = std::fs::read_to_string(dir.join("one-to-one.json")).expect("--out file");
    assert_eq!(saved.trim(), json.trim());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wrong_rank_count_is_refused_with_a_message() {
    let out = bench(&["round-trip", "--ranks", "3"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("runs on 2 ranks (--ranks 2), not 3"), "{err}");
}
