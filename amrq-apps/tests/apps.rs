//! Every application checked on 1–4 ranks, as processes and as threads (each run checks
//! every batch's result against the sequential reference and fails on a wrong value),
//! a Matrix Market file solved and a bad one refused, and `all --quick` writing its
//! report.

use amrq_bench::report::Outcome;
use std::process::Command;
use std::time::Duration;

/// Runs `amrq-apps args…`; its outcome (rank 0's JSON line), after asserting success.
fn run(args: &[&str]) -> Option<Outcome> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_amrq-apps"));
    cmd.args(args);
    let out = amrq_bench::child::run_output(&mut cmd, Duration::from_secs(300));
    assert!(
        out.failed.is_none(),
        "amrq-apps {args:?}: {:?}\n{}",
        out.failed,
        out.stderr
    );
    out.stdout
        .lines()
        .find_map(|l| serde_json::from_str::<Outcome>(l).ok())
}

/// Runs `app --quick --check extra…` on 1–4 ranks, as processes and as threads, and checks
/// that each outcome is its and has a positive, finite `{name}_{unit}` (`{name}` if
/// `unit` is empty) for each of `names` (with more than one rank when `crossing`: nothing crosses on one).
fn on_1_to_4_ranks(app: &str, extra: &[&str], names: &[&str], unit: &str, crossing: bool) {
    for ranks in 1..=4 {
        for threads in [false, true] {
            let n = ranks.to_string();
            let mut args = vec![app, "--quick", "--check", "--json", "--ranks", &n];
            args.extend(extra);
            if threads {
                args.push("--threads");
            }
            let o = run(&args).unwrap_or_else(|| panic!("{args:?}: no outcome"));
            assert_eq!((o.name.as_str(), o.ranks), (app, ranks));
            if ranks > 1 || !crossing {
                for name in names {
                    let key = match unit {
                        "" => name.to_string(),
                        _ => format!("{name}_{unit}"),
                    };
                    let f = o.get(&key).expect("a figure");
                    assert!(f.median > 0.0 && f.median.is_finite(), "{args:?}: {f:?}");
                }
            }
        }
    }
}

#[test]
fn the_transpose_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    let names: Vec<&str> = amrq_apps::transpose::VARIANTS
        .iter()
        .map(|v| v.name())
        .collect();
    on_1_to_4_ranks("transpose", &[], &names, "mb_s", true);
}

#[test]
fn the_triangular_solve_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    let names: Vec<&str> = amrq_apps::trisolve::MODES
        .iter()
        .map(|m| m.name())
        .collect();
    on_1_to_4_ranks("trisolve", &[], &names, "us", false);
}

#[test]
fn em3d_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    let names = ["direct_read", "direct_store", "frames_get", "frames_store"];
    // Fewer nodes: oversubscribed, a blocking read waits for its owner's turn on a core.
    on_1_to_4_ranks("em3d", &["--nodes", "100"], &names, "us_per_iter", false);
}

#[test]
fn the_3d_fft_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    // A smaller cube whose side 3 ranks do not divide: uneven slabs.
    let names = ["direct", "frames"];
    on_1_to_4_ranks("fft", &["--size", "50"], &names, "ms", false);
}

#[test]
fn message_driven_queens_count_right_on_1_to_4_ranks_as_processes_and_threads() {
    let names = ["msgs_per_s", "compute_fraction"];
    on_1_to_4_ranks(
        "queens",
        &["--board", "10", "--depth", "3"],
        &names,
        "",
        false,
    );
}

#[test]
fn the_radix_sort_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    let names: Vec<&str> = amrq_apps::radix::MODES.iter().map(|m| m.name()).collect();
    // Fewer keys: 4 ranks on 2 cores take turns on them.
    on_1_to_4_ranks("radix", &["--keys", "20000"], &names, "ms", false);
}

#[test]
fn the_ray_tracer_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    let names = ["direct", "frames"];
    let small = ["--width", "48", "--height", "30"];
    on_1_to_4_ranks("raytrace", &small, &names, "ms", false);
}

#[test]
fn cholesky_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    let names = ["direct", "frames"];
    on_1_to_4_ranks("cholesky", &["--size", "96"], &names, "ms", false);
}

#[test]
fn cg_is_right_on_1_to_4_ranks_as_processes_and_threads() {
    on_1_to_4_ranks("cg", &[], &["direct", "frames"], "us_per_iter", false);
}

/// A Matrix Market file is solved as given (its lower triangle), and checked; a file
/// that is not one is refused with what is wrong.
#[test]
fn a_matrix_market_file_is_solved_and_a_bad_one_refused() {
    let dir = std::env::temp_dir().join(format!("amrq-apps-mm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let good = dir.join("grid.mtx");
    // A 40-node chain with a few long links, symmetric: the solve uses the lower half.
    let mut text = String::from("%%MatrixMarket matrix coordinate real symmetric\n40 40 79\n");
    for i in 1..=40 {
        text += &format!("{i} {i} 4\n");
    }
    for i in 2..=40 {
        text += &format!("{i} {} -1\n", i - 1);
    }
    std::fs::write(&good, text).expect("write");
    let path = good.to_str().expect("UTF-8");
    let o = run(&[
        "trisolve",
        "--quick",
        "--check",
        "--json",
        "--ranks",
        "3",
        "--threads",
        "--file",
        path,
    ])
    .expect("an outcome");
    assert!(o.notes.iter().any(|n| n.starts_with(path)), "{:?}", o.notes);
    let bad = dir.join("bad.mtx");
    std::fs::write(&bad, "hello\n").expect("write");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_amrq-apps"));
    cmd.args([
        "trisolve",
        "--quick",
        "--threads",
        "--file",
        bad.to_str().expect("UTF-8"),
    ]);
    let out = amrq_bench::child::run_output(&mut cmd, Duration::from_secs(60));
    assert!(out.failed.is_some());
    assert!(
        out.stderr.contains("not a coordinate Matrix Market file"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_chunk_larger_than_a_message_is_refused_with_the_remedy() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_amrq-apps"));
    cmd.args(["transpose", "--quick", "--threads", "--chunk", "1000000"]);
    let out = amrq_bench::child::run_output(&mut cmd, Duration::from_secs(60));
    assert!(out.failed.is_some());
    assert!(out.stderr.contains("lower --chunk"), "{}", out.stderr);
}

#[test]
fn all_quick_writes_the_report() {
    let dir = std::env::temp_dir().join(format!("amrq-apps-test-{}", std::process::id()));
    let d = dir.to_str().expect("a UTF-8 path");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_amrq-apps"));
    cmd.args(["all", "--quick", "--out", d]);
    let out = amrq_bench::child::run_output(&mut cmd, Duration::from_secs(300));
    assert!(out.failed.is_none(), "{:?}\n{}", out.failed, out.stderr);
    let summary = std::fs::read_to_string(dir.join("summary.md")).expect("summary.md");
    for ranks in [2, 4, 8] {
        let marked = match amrq_apps::oversubscribed(ranks) {
            true => format!("| {ranks} (oversubscribed) |"),
            false => format!("| {ranks} |"),
        };
        assert!(summary.contains(&marked), "no row {marked}:\n{summary}");
    }
    let all: Vec<Outcome> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).expect("json"))
            .expect("outcomes");
    assert_eq!(
        all.len(),
        44,
        "3 transposes; EM3D, CG, FFT, N-Queens, the radix sort, the ray tracer and Cholesky on 1, 2, 4 ranks; 3 more N-Queens; 9 solves; 8 more sizes on 2 ranks"
    );
    // Every application has two sizes or more in the sweep, and a verdict.
    let sweep = summary
        .split("## Speed-up against size")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a size section");
    for app in [
        "transpose, am",
        "triangular solve, handlers",
        "EM3D by stores, direct",
        "CG, direct",
        "3-D FFT, direct",
        "N-Queens, message-driven",
        "radix sort, inlined",
        "ray tracer, direct",
        "Cholesky, direct",
    ] {
        let rows = sweep
            .lines()
            .filter(|l| l.starts_with(&format!("| {app} |")))
            .count();
        assert!(rows >= 2, "{rows} sizes of {app}:\n{sweep}");
        assert!(
            sweep.contains(&format!("- {app}: 2 ranks ")),
            "no verdict for {app}:\n{sweep}"
        );
    }
    // Every application's speed-up curve has its three points.
    let curves = summary
        .split("## Speed-up")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a speed-up section");
    for app in [
        "3-D FFT, direct",
        "CG, frames",
        "EM3D by stores, direct",
        "N-Queens",
        "radix sort, inlined",
        "ray tracer, direct",
        "Cholesky, direct",
    ] {
        let row = curves
            .lines()
            .find(|l| l.starts_with(&format!("| {app}")))
            .unwrap_or_else(|| panic!("no speed-up row for {app}:\n{curves}"));
        assert_eq!(row.matches(" – ").count(), 0, "a point missing: {row}");
    }
    assert!(summary.contains("## Message-driven N-Queens"), "{summary}");
    assert!(
        summary.contains("| spawn (frame to new frame) | 5 |"),
        "{summary}"
    );
    assert!(summary.contains("## Radix sort"), "{summary}");
    assert!(summary.contains("## Ray tracer"), "{summary}");
    assert!(summary.contains("## Cholesky"), "{summary}");
    assert!(
        summary.contains("| bcsprw10 (synthetic) | 2 |"),
        "{summary}"
    );
    for plot in ["transpose", "trisolve", "speedup", "queens", "sizes"] {
        assert!(std::fs::metadata(dir.join(format!("plots/{plot}.svg"))).is_ok());
    }
    assert!(std::fs::read_to_string(dir.join("results.csv"))
        .expect("csv")
        .contains("transpose,,am_mb_s"));
    let _ = std::fs::remove_dir_all(&dir);
}
