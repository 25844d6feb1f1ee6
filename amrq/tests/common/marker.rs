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
