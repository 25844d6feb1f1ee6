//! Word that each rank of a job of test processes ran its part: a child whose test
//! filter matched nothing would exit 0 too. The job gets a fresh token in
//! `AMRQ_TEST_TOKEN`; each rank leaves a file named by it and its rank.

use std::ffi::OsString;
use std::path::PathBuf;

/// Where a rank of the job with `token` leaves its word.
pub fn marker(token: &str, rank: usize) -> PathBuf {
    std::env::temp_dir().join(format!("amrq-test-ran-{token}-{rank}"))
}

/// A fresh token for a job; its ranks find it in `AMRQ_TEST_TOKEN`.
pub fn token() -> String {
    amrq::bootstrap::JobKey::random()
        .expect("random")
        .to_string()
}

/// In a rank: leaves word that `rank` ran its part; false if it could not.
pub fn mark_ran(rank: usize) -> bool {
    let token = std::env::var("AMRQ_TEST_TOKEN").unwrap_or_default();
    std::fs::write(marker(&token, rank), b"ran").is_ok()
}

/// In a rank of a test job (`joined` found one): runs `body` and exits the process,
/// with 0 if it succeeded and left its word, 1 otherwise (saying why). Started on its
/// own (`Ok(None)`): returns, so that the caller starts the job.
#[allow(dead_code)] // tests/startup.rs tests `launch` itself, which does this
pub fn run_rank<C: amrq::conduit::Conduit, E: std::fmt::Display, F: std::fmt::Display>(
    joined: Result<Option<C>, E>,
    body: impl FnOnce(C) -> Result<(), F>,
) {
    let c = match joined {
        Ok(Some(c)) => c,
        Ok(None) => return,
        Err(e) => {
            eprintln!("cannot join: {e}");
            std::process::exit(1);
        }
    };
    let rank = c.rank();
    let code = match body(c) {
        Ok(()) if mark_ran(rank) => 0,
        Ok(()) => 1,
        Err(e) => {
            eprintln!("rank {rank} failed: {e}");
            1
        }
    };
    std::process::exit(code);
}

/// Checks that all `ranks` ranks of the job with `token` ran their part, and tidies up.
pub fn all_ran(token: &str, ranks: usize) {
    let missing: Vec<usize> = (0..ranks)
        .filter(|&r| std::fs::remove_file(marker(token, r)).is_err())
        .collect();
    assert!(
        missing.is_empty(),
        "ranks {missing:?} did not run their part of the test"
    );
}

/// The arguments that make this test binary run only `test`, as one of its ranks.
pub fn child_args(test: &str) -> Vec<OsString> {
    ["--exact", test, "--nocapture", "--test-threads=1"]
        .iter()
        .map(OsString::from)
        .collect()
}

/// Test `test` of this test binary as `ranks` processes under `amrun` (`amrun_exe`, the
/// test's `CARGO_BIN_EXE_amrun`), with the job's `token` and the variables `env`: its
/// exit status, stdout and stderr.
#[allow(dead_code)] // not every test binary runs its ranks under amrun
pub fn under_amrun(
    amrun_exe: &str,
    test: &str,
    ranks: usize,
    env: &[(&str, String)],
    token: &str,
) -> (i32, String, String) {
    let exe = std::env::current_exe().expect("test binary");
    let n = ranks.to_string();
    let out = std::process::Command::new(amrun_exe)
        .args(["-n", &n, "--bind", "none", "--timeout", "120"])
        .arg(exe)
        .args(child_args(test))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("AMRQ_TEST_TOKEN", token)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("amrun starts");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}
