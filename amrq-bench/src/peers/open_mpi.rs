//! Open MPI: this crate's `peers/mpi_bench.c`, built with `mpicc` and run on 2 ranks
//! bound to cores, in the fastest shared-memory set-up measured on this machine kind.

use super::{build_c, installed, pairs, run, run_output, Failure, Measured, Raw};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The tests of `mpi_bench.c`, one run each, and the metrics each gives (MPI has no
/// put row here).
const TESTS: [(&str, &[&str]); 4] = [
    ("rtt", &["rtt_ns"]),
    ("rate", &["msgs_per_s"]),
    ("bw", &["bw_64k_mb_s", "bw_1m_mb_s"]),
    ("barrier", &["barrier_ns"]),
];

/// The metrics of each run of a round.
pub const PARTS: [&[&str]; 4] = [TESTS[0].1, TESTS[1].1, TESTS[2].1, TESTS[3].1];

const ARGS: [&str; 11] = [
    "--allow-run-as-root",
    "-np",
    "2",
    "--bind-to",
    "core",
    "--mca",
    "pml",
    "ob1",
    "--mca",
    "btl",
    "self,vader",
];
const NO_CMA: [&str; 3] = ["--mca", "btl_vader_single_copy_mechanism", "none"];

/// A built `mpi_bench`.
#[derive(Debug, Clone)]
pub struct OpenMpi {
    bin: PathBuf,
    /// `mpirun --version`'s first line.
    pub version: String,
}

impl OpenMpi {
    /// Builds `mpi_bench.c` into `work`; why not, if Open MPI is not there.
    pub fn prepare(work: &Path) -> Result<Self, String> {
        if !installed("mpicc") || !installed("mpirun") {
            return Err(
                "mpicc/mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)"
                    .into(),
            );
        }
        let source = include_str!("../../peers/mpi_bench.c");
        let bin = build_c(
            work,
            "mpi_bench",
            source,
            "mpicc",
            &["-O2"],
            "mpi_bench",
            &[],
        )?;
        let version = run(
            Command::new("mpirun").arg("--version"),
            Duration::from_secs(30),
        )
        .ok()
        .and_then(|o| o.lines().next().map(str::to_string))
        .unwrap_or_default();
        Ok(Self { bin, version })
    }

    /// How a round runs, for the report.
    pub fn how(&self, quick: bool) -> String {
        format!(
            "`mpirun {} {} mpi_bench{} TEST` for TEST in rtt, rate, bw, barrier",
            ARGS.join(" "),
            NO_CMA.join(" "),
            if quick { " quick" } else { "" },
        )
    }

    /// Run `part` of a round (a test of [`PARTS`]): its `mpi:` line's figures, or the
    /// failure with what it printed.
    pub fn run(&self, part: usize, quick: bool, raw: &Raw) -> Result<Measured, Failure> {
        let (test, expects) = TESTS[part];
        let mut cmd = Command::new("mpirun");
        cmd.args(ARGS)
            .args(NO_CMA)
            .arg(&self.bin)
            .args(quick.then_some("quick"))
            .arg(test);
        let out = run_output(&mut cmd, Duration::from_secs(300));
        let command = format!(
            "mpirun {} {} mpi_bench {test}",
            ARGS.join(" "),
            NO_CMA.join(" ")
        );
        let files = raw.keep(&format!("mpi_bench-{test}"), &command, &out)?;
        let values = pairs(&out.stdout, "mpi");
        Failure::lacking(expects, &values, out.lines(), &files)?;
        Ok(Measured {
            values,
            files,
            notes: Vec::new(),
        })
    }
}
