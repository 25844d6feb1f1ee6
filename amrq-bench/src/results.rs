//! What `amrq-bench all` produced: every job's outcome, the peers, and the machine they
//! ran on. The report (`files`) is written from it; `results.json` is it.

use crate::peers::Peers;
use crate::report::Outcome;
use std::process::Command;

/// What `all` produced.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Results {
    /// When and where.
    pub machine: Machine,
    /// Whether the run was `--quick`.
    pub quick: bool,
    /// Each job's outcome (a failed job has an outcome with only a note).
    pub outcomes: Vec<Outcome>,
    /// amrq and its peers, in rounds.
    pub peers: Peers,
    /// The peers table.
    pub table: Outcome,
}

impl Results {
    /// The outcome of the job `name`, if it ran.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.name == name)
    }

    /// The median of figure `key` of the job `name`, if both exist.
    pub fn figure(&self, name: &str, key: &str) -> Option<f64> {
        self.outcome(name)?.get(key).map(|f| f.median)
    }

    /// The points of the series of job `name` whose name is `series`.
    pub fn series(&self, name: &str, series: &str) -> Option<&[crate::report::Point]> {
        let o = self.outcome(name)?;
        let s = o.series.iter().find(|s| s.name == series)?;
        Some(&s.points)
    }
}

/// The machine a run was made on.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// UTC date and time (`date -u`).
    pub date: String,
    /// CPU model.
    pub cpu: String,
    /// Cores this process may run on.
    pub cores: usize,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// amrq's version and commit, when known.
    pub amrq: String,
}

impl Machine {
    /// The report's line about the run: date, CPU, cores, memory, kernel, amrq, and
    /// `run` (what kind of run).
    ///
    /// ```
    /// let m = amrq_bench::results::Machine::here();
    /// assert!(m.line("quick").ends_with("quick run"));
    /// ```
    pub fn line(&self, run: &str) -> String {
        format!(
            "{} · {} · {} cores · {} GiB · Linux {} · amrq {} · {run} run",
            self.date, self.cpu, self.cores, self.memory_gib, self.kernel, self.amrq
        )
    }

    /// Reads this machine's description.
    pub fn here() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        let cmd = |c: &str, args: &[&str]| {
            Command::new(c)
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default()
        };
        let kib: f64 = field(&read("/proc/meminfo"), "MemTotal")
            .trim_end_matches(" kB")
            .parse()
            .unwrap_or(0.0);
        let commit = cmd("git", &["rev-parse", "--short", "HEAD"]);
        Self {
            date: cmd("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            cpu: field(&read("/proc/cpuinfo"), "model name"),
            cores: amrq::util::affinity::allowed_cores().len(),
            memory_gib: (kib / (1 << 20) as f64 * 10.0).round() / 10.0,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            amrq: format!("{} {commit}", env!("CARGO_PKG_VERSION"))
                .trim()
                .to_string(),
        }
    }
}
