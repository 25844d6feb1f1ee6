//! The peers, measured in the same run as amrq and alternating with it: Open MPI
//! running this crate's `peers/mpi_bench.c` ([`open_mpi`]), UCX's `ucx_perftest` over
//! shared memory ([`ucx`]), and GASNet-EX's own tests when `--gasnet DIR` names a
//! build of them ([`gasnet`]).
//!
//! A run is made of rounds: amrq, Open MPI, amrq, UCX, amrq, GASNet-EX, and again
//! ([`rounds`]); within a peer's turn, amrq measures the same metrics just before each
//! of the peer's tests. Each peer's figure in a round is compared with amrq's figure
//! measured just before it, so a placement change of the VM (which moves a cache-line
//! round trip by 2× and more, at times within seconds) most often touches both sides
//! of a ratio alike, and the median over the rounds discards the rest; the table reports
//! per metric the median of the per-round ratios with their spread, beside each side's
//! median ([`mod@table`]). A ratio is amrq's speed-up (peer time / amrq time, or amrq rate
//! / peer rate): above 1 means amrq is faster.
//!
//! A peer that is not installed is *missing*, with the reason; a peer that ran but gave
//! no figure for a metric it has a test for has *failed*, with the lines that could not
//! be read. A metric a peer has no test for is said so, never estimated. Every peer's
//! raw output goes to a file under the report directory.

pub mod gasnet;
pub mod open_mpi;
pub mod placement;
pub mod rounds;
pub mod table;
pub mod ucx;

pub use rounds::{measure, Comparison, Peers, Round, Setup, Status};
pub use table::{markdown, table, tag, text};
pub use ucx::{ucx_final, UcxFinal};

pub(crate) use crate::child::{run, run_output, Output};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A metric of the table: key, label, and whether lower is better (a time).
pub const METRICS: [(&str, &str, bool); 6] = [
    ("rtt_ns", "round trip, 8 B (ns)", true),
    ("msgs_per_s", "messages/s one-to-one, 8 B", false),
    ("bw_64k_mb_s", "bandwidth, 64 KiB messages (MB/s)", false),
    ("bw_1m_mb_s", "bandwidth, 1 MiB messages (MB/s)", false),
    ("put_64k_mb_s", "put bandwidth, 64 KiB (MB/s)", false),
    ("barrier_ns", "barrier, 2 ranks (ns)", true),
];

/// Bytes in the MB of GASNet-EX's testam and of `ucx_perftest` (2^20).
pub(crate) const MIB: f64 = 1_048_576.0;

/// The cores of amrq's ranks 0 and 1 (its launcher pins rank k to the k-th core this
/// process may use), where a peer's two sides are pinned too.
fn rank_cores() -> [usize; 2] {
    let cores = amrq::util::affinity::allowed_cores();
    let core = |i: usize| cores.get(i % cores.len().max(1)).copied().unwrap_or(0);
    [core(0), core(1)]
}

/// Whether `program` is on the PATH.
fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// `key=value` pairs of a line `prefix: k=v …`.
///
/// ```
/// let v = amrq_bench::peers::pairs("x\nmpi: a=1.5 b=2\n", "mpi");
/// assert_eq!(v, [("a".to_string(), 1.5), ("b".to_string(), 2.0)]);
/// ```
pub fn pairs(out: &str, prefix: &str) -> Vec<(String, f64)> {
    let head = format!("{prefix}: ");
    out.lines()
        .filter_map(|l| l.strip_prefix(&head))
        .flat_map(|rest| rest.split_whitespace())
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Where a round's raw output goes: `DIR/<peer>-round<R>-<run>.txt`, linked from the
/// report as `peers/…` (nothing is written without a directory).
#[derive(Debug, Clone)]
pub struct Raw {
    dir: Option<PathBuf>,
    prefix: String,
}

impl Raw {
    /// The raw files of `peer`'s round `round` (from 1) in `dir`.
    pub fn new(dir: Option<PathBuf>, peer: &str, round: usize) -> Self {
        Self {
            dir,
            prefix: format!("{}-round{round}", table::tag(peer)),
        }
    }

    /// Writes `out` (after the command that made it); the file's path relative to the
    /// report directory, if written.
    pub fn save(&self, run: &str, command: &str, out: &Output) -> Option<String> {
        let dir = self.dir.as_ref()?;
        let name = format!("{}-{run}.txt", self.prefix);
        let text = format!(
            "$ {command}\n{}== stdout\n{}\n== stderr\n{}\n",
            out.failed
                .as_ref()
                .map_or(String::new(), |w| format!("failed: {w}\n")),
            out.stdout,
            out.stderr
        );
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join(&name), text))
            .ok()?;
        Some(format!(
            "{}/{name}",
            dir.file_name()
                .map_or("peers".into(), |d| d.to_string_lossy())
        ))
    }

    /// Saves `out` as [`Raw::save`] does: the files written, or the failure (with
    /// its lines and files) if the process failed.
    pub fn keep(&self, run: &str, command: &str, out: &Output) -> Result<Vec<String>, Failure> {
        let files: Vec<String> = self.save(run, command, out).into_iter().collect();
        match Failure::of(out, &files) {
            Some(f) => Err(f),
            None => Ok(files),
        }
    }
}

/// Writes `source` to `work/<name>.c` and builds it with `compiler flags… -o
/// work/<out> work/<name>.c libs…`; the built file, or why not.
pub(crate) fn build_c(
    work: &std::path::Path,
    name: &str,
    source: &str,
    compiler: &str,
    flags: &[&str],
    out: &str,
    libs: &[&str],
) -> Result<PathBuf, String> {
    let src = work.join(format!("{name}.c"));
    let bin = work.join(out);
    std::fs::create_dir_all(work)
        .and_then(|()| std::fs::write(&src, source))
        .map_err(|e| format!("{}: {e}", work.display()))?;
    let mut cc = Command::new(compiler);
    cc.args(flags).arg("-o").arg(&bin).arg(&src).args(libs);
    run(&mut cc, Duration::from_secs(120)).map_err(|e| format!("{compiler} failed: {e}"))?;
    Ok(bin)
}

/// What one round of a peer measured.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Metric key and value, in the table's units.
    pub values: Vec<(String, f64)>,
    /// Its raw output files.
    pub files: Vec<String>,
    /// What the reader should know (a rank that was not pinned).
    pub notes: Vec<String>,
}

/// Why a peer that ran gave no figure.
#[derive(Debug, Clone)]
pub struct Failure {
    /// What went wrong.
    pub why: String,
    /// The lines it printed that could not be read.
    pub unread: Vec<String>,
    /// Its raw output files.
    pub files: Vec<String>,
}

impl Failure {
    /// A run that failed as a process: why, and what it printed.
    fn of(out: &Output, files: &[String]) -> Option<Self> {
        Some(Self {
            why: out.failed.clone()?,
            unread: out.lines(),
            files: files.to_vec(),
        })
    }

    /// The figures of `expects` that `values` lacks, as a failure.
    fn lacking(
        expects: &[&str],
        values: &[(String, f64)],
        unread: Vec<String>,
        files: &[String],
    ) -> Result<(), Self> {
        let lacking: Vec<&str> = expects
            .iter()
            .copied()
            .filter(|k| !values.iter().any(|(x, _)| x == k))
            .collect();
        if lacking.is_empty() {
            return Ok(());
        }
        Err(Self {
            why: format!("no figure for {}", lacking.join(", ")),
            unread,
            files: files.to_vec(),
        })
    }
}

/// amrq's speed-up over a peer for metric `key`: above 1, amrq is faster.
///
/// ```
/// assert_eq!(amrq_bench::peers::speedup("rtt_ns", 100.0, 250.0), 2.5);
/// assert_eq!(amrq_bench::peers::speedup("msgs_per_s", 4e6, 2e6), 2.0);
/// ```
pub fn speedup(key: &str, amrq: f64, peer: f64) -> f64 {
    let time = METRICS.iter().find(|m| m.0 == key).is_some_and(|m| m.2);
    if time {
        peer / amrq
    } else {
        amrq / peer
    }
}
