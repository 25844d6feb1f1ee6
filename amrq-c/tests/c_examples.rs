//! The C examples (`amrq-c/c/`), built by their Makefile against the static library
//! of this build and run as processes under `amrun`: each must succeed and print its
//! summary line; a C program that misuses the interface gets a status and a message,
//! not a crash.

use std::path::{Path, PathBuf};
use std::process::Command;

/// This build's output directory (`target/<profile>`), where cargo put
/// `libamrq_c.a` and `amrun`.
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent() // deps
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// Builds `libamrq_c.a` in this build's profile: a test build makes the crate's rlib
/// only. Every library of the workspace, so that the features are the test build's and
/// nothing but the static library is made again.
fn build_library(dir: &Path) {
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(p) => p,
    };
    let target = dir.parent().expect("target/<profile>");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "-p",
            "amrq-c",
            "--lib",
            "--profile",
            profile,
            "--target-dir",
        ])
        .arg(target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build --workspace --lib failed");
}

/// Builds the C examples into a fresh directory; its path.
fn built() -> PathBuf {
    let out = std::env::temp_dir().join(format!("amrq-c-examples-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("a directory for the examples");
    make(&out, &[]);
    out
}

/// Builds, with the C examples' Makefile against this build's static library, into
/// `out`: the examples, or the programs `names` whose sources are in `out`.
fn make(out: &Path, names: &[String]) {
    let dir = build_dir();
    build_library(&dir);
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/c"))
        .arg(format!("LIBDIR={}", dir.display()))
        .arg(format!("OUT={}", out.display()));
    if !names.is_empty() {
        cmd.arg(format!("SRC={}", out.display()))
            .arg(format!("EXAMPLES={}", names.join(" ")));
    }
    let status = cmd
        .status()
        .expect("make runs (install make and a C compiler)");
    assert!(status.success(), "the C programs {names:?} did not build");
}

/// Runs `amrun -n ranks program args…`; its stdout, after asserting success.
fn amrun(ranks: usize, program: &Path, args: &[&str]) -> String {
    let amrun = build_dir().join("amrun");
    assert!(
        amrun.exists(),
        "{} missing: build the workspace (amrq's amrun feature)",
        amrun.display()
    );
    let out = Command::new(&amrun)
        .arg("-n")
        .arg(ranks.to_string())
        .arg(program)
        .args(args)
        .output()
        .expect("amrun runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} under amrun -n {ranks}: {:?}\n{stdout}\n{}",
        program.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The value of `key=` in the line starting with `name:`.
fn figure(stdout: &str, name: &str, key: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no `{name}:` line in\n{stdout}"));
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

#[test]
fn the_c_examples_build_and_run_under_amrun() {
    let dir = built();
    let out = amrun(2, &dir.join("pingpong"), &["--quick"]);
    assert!(figure(&out, "pingpong", "rtt_ns") > 0.0);
    assert!(figure(&out, "pingpong", "raw_rtt_ns") > 0.0);
    for ranks in [2, 3] {
        let out = amrun(ranks, &dir.join("ring"), &["--quick"]);
        assert_eq!(figure(&out, "ring", "ranks"), ranks as f64);
        let out = amrun(ranks, &dir.join("getput"), &[]);
        assert_eq!(figure(&out, "getput", "checked"), (3 * 4096 * ranks) as f64);
        let out = amrun(ranks, &dir.join("queues"), &[]);
        assert_eq!(figure(&out, "queues", "checked"), (2003 * ranks) as f64);
        let out = amrun(ranks, &dir.join("collectives"), &[]);
        assert_eq!(figure(&out, "collectives", "ranks"), ranks as f64);
    }
    // The header's inline sends and the library's, side by side: every message checked
    // (a request and its reply per message, 9000 per rank), every bad call refused (9
    // per rank, and one second reply per request).
    for ranks in [1, 2, 3] {
        let out = amrun(ranks, &dir.join("sends"), &[]);
        assert_eq!(figure(&out, "sends", "checked"), (2 * 9000 * ranks) as f64);
        assert_eq!(
            figure(&out, "sends", "refused"),
            ((9 + 9000) * ranks) as f64
        );
    }
    // Calls: 4000 answers checked with 64 pending, 10 forgotten calls that still ran,
    // and a handler's failure as the call's status.
    for ranks in [1, 2, 3] {
        let out = amrun(ranks, &dir.join("calls"), &[]);
        assert_eq!(figure(&out, "calls", "checked"), 4000.0);
        assert_eq!(figure(&out, "calls", "forgotten_ran"), 10.0);
        assert_eq!(figure(&out, "calls", "refused"), 1.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The C programs the README and the guide show in full (each block of ```c), built
/// by the examples' Makefile against the static library of this build, and run under
/// `amrun -n 2`.
#[test]
fn the_c_programs_of_the_readme_and_the_guide_build_and_run() {
    let out = std::env::temp_dir().join(format!("amrq-c-docs-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("a directory for the programs");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names = Vec::new();
    for doc in ["README.md", "docs/guide/06-c.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect("the document");
        for (i, block) in text.split("```c\n").skip(1).enumerate() {
            let code = block.split("```").next().expect("a closed block");
            assert!(
                code.contains("int main"),
                "{doc}: a C block that is not a whole program"
            );
            let name = format!("{}-{i}", doc.replace(['/', '.'], "-"));
            std::fs::write(out.join(format!("{name}.c")), code).expect("the source");
            names.push(name);
        }
    }
    assert!(names.len() >= 3, "only {} C programs found", names.len());
    make(&out, &names);
    for name in &names {
        amrun(2, &out.join(name), &[]);
    }
    let _ = std::fs::remove_dir_all(&out);
}
