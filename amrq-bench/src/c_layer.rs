//! Is the C interface a thin layer? The C `pingpong` (`amrq-c/c/pingpong.c`) and its
//! Rust twin (`amrq-bench round-trip`) run in turn, each as a 2-rank job under `amrun`,
//! and each gives its round trip's ratio to the raw cache-line round trip it measured
//! in the same run. The C layer is thin when the C program's median ratio lies within
//! the spread (smallest to largest) of the Rust program's, at the same placement.
//!
//! The machine moves its vCPUs (see [`placement`]): each run's
//! own raw round trip says where it ran, a pair whose two runs disagree
//! ([`straddled`](crate::peers::placement::straddled)) is left out, and the others are
//! grouped by placement ([`classes`](crate::peers::placement::classes)).

use crate::child;
use crate::peers::{pairs, placement};
use crate::report::Figure;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The three programs: the launcher and the two pingpongs.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `amrun`.
    pub amrun: PathBuf,
    /// The C `pingpong` (`make -C amrq-c/c` builds it).
    pub c: PathBuf,
    /// `amrq-bench`, whose `round-trip` is the Rust twin.
    pub rust: PathBuf,
}

impl Programs {
    /// The programs of the build that `dir` (a profile's directory, such as
    /// `target/release`) holds: `amrun`, `c-examples/pingpong` (where `.ci/run` and the
    /// README's `make` put it) and `amrq-bench`; an error names what is missing and how
    /// to build it.
    ///
    /// ```
    /// let e = amrq_bench::c_layer::Programs::in_build(std::path::Path::new("/nowhere")).unwrap_err();
    /// assert!(e.contains("/nowhere/amrun"));
    /// ```
    pub fn in_build(dir: &Path) -> Result<Self, String> {
        let p = Self {
            amrun: dir.join("amrun"),
            c: dir.join("c-examples").join("pingpong"),
            rust: dir.join("amrq-bench"),
        };
        let missing: Vec<String> = [&p.amrun, &p.c, &p.rust]
            .iter()
            .filter(|f| !f.is_file())
            .map(|f| f.display().to_string())
            .collect();
        if missing.is_empty() {
            return Ok(p);
        }
        Err(format!(
            "missing {}: build them with `cargo build --release --workspace --lib --bins` and \
             `make -C amrq-c/c LIBDIR=$PWD/target/release OUT=$PWD/target/release/c-examples`",
            missing.join(", ")
        ))
    }
}

/// What one run gave: the C program's `pingpong: rtt_ns=… raw_rtt_ns=… ratio=…`, or
/// `round-trip`'s figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// The AM round trip, ns (median of its batches).
    pub rtt_ns: f64,
    /// The raw cache-line round trip of the same run, ns.
    pub raw_rtt_ns: f64,
    /// `rtt_ns / raw_rtt_ns`.
    pub ratio: f64,
}

impl Run {
    /// The run a program's output reports, if it has the summary line.
    ///
    /// ```
    /// use amrq_bench::c_layer::Run;
    /// let r = Run::parse("pingpong: rtt_ns=99 raw_rtt_ns=120 ratio=0.825 batch_ratio=0.8\n").unwrap();
    /// assert_eq!((r.rtt_ns, r.raw_rtt_ns, r.ratio), (99.0, 120.0, 0.825));
    /// assert!(Run::parse("pingpong: rtt_ns=99\n").is_none());
    /// ```
    pub fn parse(out: &str) -> Option<Self> {
        let kv = pairs(out, "pingpong");
        let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|&(_, v)| v);
        Some(Self {
            rtt_ns: get("rtt_ns")?,
            raw_rtt_ns: get("raw_rtt_ns")?,
            ratio: get("ratio")?,
        })
    }

    /// The run `amrq-bench round-trip --json` reports: the medians of its round trip
    /// and of its raw round trip over rotating lines (the C program's design), and their
    /// ratio.
    ///
    /// ```
    /// use amrq_bench::c_layer::Run;
    /// use amrq_bench::report::{Figure, Outcome};
    /// let mut o = Outcome::new("round-trip", 2, 20.0);
    /// o.figures = vec![Figure::single("round_trip_ns", 99.0), Figure::single("raw_rotating_ns", 110.0)];
    /// let r = Run::from_outcome(&format!("ranks: 2\n{}\n", o.json())).unwrap();
    /// assert_eq!((r.rtt_ns, r.raw_rtt_ns, r.ratio), (99.0, 110.0, 0.9));
    /// assert!(Run::from_outcome("round-trip: round_trip_ns=99\n").is_none());
    /// let trailing = format!("{}\nnote: a line after it\n", o.json());
    /// assert!(Run::from_outcome(&trailing).is_some());
    /// ```
    pub fn from_outcome(out: &str) -> Option<Self> {
        let o: crate::report::Outcome = out
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())?;
        let get = |k: &str| o.figures.iter().find(|f| f.key == k).map(|f| f.median);
        // The C program's raw design: the rotating lines, not the run's floor.
        let (rtt_ns, raw_rtt_ns) = (get("round_trip_ns")?, get("raw_rotating_ns")?);
        Some(Self {
            rtt_ns,
            raw_rtt_ns,
            ratio: rtt_ns / raw_rtt_ns,
        })
    }
}

/// A C run and the Rust run right after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// The C `pingpong`'s run.
    pub c: Run,
    /// The Rust twin's run.
    pub rust: Run,
}

/// Runs `program args` as a 2-rank job under `amrun` (its `--quick` configuration with
/// `quick`) and reads what it reports with `read`.
fn run_one(
    p: &Programs,
    program: &Path,
    args: &[&str],
    quick: bool,
    read: fn(&str) -> Option<Run>,
) -> Result<Run, String> {
    let mut cmd = Command::new(&p.amrun);
    cmd.args(["-n", "2"]).arg(program).args(args);
    if quick {
        cmd.arg("--quick");
    }
    let out = child::run(&mut cmd, Duration::from_secs(120))
        .map_err(|e| format!("{}: {e}", program.display()))?;
    read(&out).ok_or_else(|| format!("{}: no round trip in {out:?}", program.display()))
}

/// One pair: the C program, then the Rust one.
pub fn run_pair(p: &Programs, quick: bool) -> Result<Pair, String> {
    Ok(Pair {
        c: run_one(p, &p.c, &[], quick, Run::parse)?,
        rust: run_one(
            p,
            &p.rust,
            &["round-trip", "--json"],
            quick,
            Run::from_outcome,
        )?,
    })
}

/// The pairs measured at one placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// The smallest and largest raw round trip of the C runs, ns.
    pub raw_rtt_ns: (f64, f64),
    /// The C program's ratios.
    pub c: Figure,
    /// The Rust program's ratios.
    pub rust: Figure,
    /// How many pairs.
    pub pairs: usize,
}

impl Band {
    /// Whether the C median lies within the Rust spread: the thin-layer test.
    ///
    /// ```
    /// use amrq_bench::c_layer::Band;
    /// use amrq_bench::report::Figure;
    /// let band = |c: &mut [f64], r: &mut [f64]| Band {
    ///     raw_rtt_ns: (120.0, 130.0),
    ///     c: Figure::of("ratio", c),
    ///     rust: Figure::of("ratio", r),
    ///     pairs: 3,
    /// };
    /// assert!(band(&mut [0.84, 0.90, 0.80], &mut [0.70, 0.86, 0.78]).within());
    /// assert!(!band(&mut [0.87, 0.90, 0.88], &mut [0.70, 0.86, 0.78]).within());
    /// ```
    pub fn within(&self) -> bool {
        self.verdict() == Verdict::Within
    }

    /// Where the C median lies against the Rust spread.
    ///
    /// ```
    /// use amrq_bench::c_layer::{Band, Verdict};
    /// use amrq_bench::report::Figure;
    /// let band = |c: &mut [f64]| Band {
    ///     raw_rtt_ns: (560.0, 570.0),
    ///     c: Figure::of("ratio", c),
    ///     rust: Figure::of("ratio", &mut [0.75, 0.80, 0.78]),
    ///     pairs: 3,
    /// };
    /// assert_eq!(band(&mut [0.66, 0.70, 0.64]).verdict(), Verdict::Faster);
    /// assert_eq!(band(&mut [0.79]).verdict(), Verdict::Within);
    /// assert_eq!(band(&mut [0.81]).verdict(), Verdict::Slower);
    /// ```
    pub fn verdict(&self) -> Verdict {
        if self.c.median < self.rust.min {
            Verdict::Faster
        } else if self.c.median > self.rust.max {
            Verdict::Slower
        } else {
            Verdict::Within
        }
    }
}

/// Where the C program's median ratio lies against the Rust program's spread at one
/// placement. Only `Slower` says the C layer costs something the Rust API does not: a C
/// median below every Rust run is the two binaries' code layout, not a thinner layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Below the Rust program's fastest run.
    Faster,
    /// Between the Rust program's fastest and slowest runs: the thin-layer test holds.
    Within,
    /// Above the Rust program's slowest run.
    Slower,
}

impl Verdict {
    /// As the report's table says it.
    ///
    /// ```
    /// assert_eq!(amrq_bench::c_layer::Verdict::Within.as_str(), "yes");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "no: faster than every Rust run",
            Verdict::Within => "yes",
            Verdict::Slower => "no: slower than every Rust run",
        }
    }
}

/// The pairs grouped by placement (the C run's raw round trip), fastest first, and how
/// many pairs were left out because their two runs saw different placements.
///
/// ```
/// use amrq_bench::c_layer::{bands, Pair, Run};
/// let run = |raw: f64, ratio: f64| Run { rtt_ns: raw * ratio, raw_rtt_ns: raw, ratio };
/// let pair = |raw: f64, c: f64, rust_raw: f64, r: f64| Pair { c: run(raw, c), rust: run(rust_raw, r) };
/// let (b, left_out) = bands(&[
///     pair(120.0, 0.85, 125.0, 0.80),
///     pair(580.0, 0.72, 575.0, 0.78),
///     pair(122.0, 0.83, 118.0, 0.86),
///     pair(121.0, 0.90, 560.0, 0.70), // the placement changed in between
/// ]);
/// assert_eq!(left_out, 1);
/// assert_eq!((b.len(), b[0].pairs, b[1].pairs), (2, 2, 1));
/// assert_eq!((b[0].c.median, b[0].rust.min, b[0].rust.max), (0.84, 0.80, 0.86));
/// assert!(b[0].within() && !b[1].within());
/// ```
pub fn bands(all: &[Pair]) -> (Vec<Band>, usize) {
    let kept: Vec<&Pair> = all
        .iter()
        .filter(|p| !placement::straddled(p.c.raw_rtt_ns, p.rust.raw_rtt_ns))
        .collect();
    let at: Vec<f64> = kept.iter().map(|p| p.c.raw_rtt_ns).collect();
    let out = placement::classes(&at)
        .into_iter()
        .map(|(lo, hi)| {
            let here: Vec<&&Pair> = kept
                .iter()
                .filter(|p| (lo..=hi).contains(&p.c.raw_rtt_ns))
                .collect();
            let mut c: Vec<f64> = here.iter().map(|p| p.c.ratio).collect();
            let mut rust: Vec<f64> = here.iter().map(|p| p.rust.ratio).collect();
            Band {
                raw_rtt_ns: (lo, hi),
                pairs: here.len(),
                c: Figure::of("c_ratio", &mut c),
                rust: Figure::of("rust_ratio", &mut rust),
            }
        })
        .collect();
    (out, all.len() - kept.len())
}

/// The bands as a Markdown table.
///
/// ```
/// use amrq_bench::c_layer::{bands, text, Pair, Run};
/// let run = |ratio: f64| Run { rtt_ns: 100.0 * ratio, raw_rtt_ns: 100.0, ratio };
/// let (b, n) = bands(&[Pair { c: run(0.9), rust: run(0.8) }]);
/// assert!(text(&b, n).contains("| 100 | 1 | 0.900 (0.900–0.900) | 0.800 (0.800–0.800) | no: slower than every Rust run |"));
/// ```
pub fn text(bands: &[Band], left_out: usize) -> String {
    let mut t = String::from(
        "The C pingpong beside the Rust one, alternating (ratio to the raw round trip of the same run: median (min–max))\n\n\
         | raw round trip, ns | pairs | C | Rust | C median within Rust's spread |\n|---|---:|---|---|---|\n",
    );
    for b in bands {
        let (lo, hi) = b.raw_rtt_ns;
        let at = if hi - lo < 0.5 {
            format!("{lo:.0}")
        } else {
            format!("{lo:.0}–{hi:.0}")
        };
        let fig = |f: &Figure| format!("{:.3} ({:.3}–{:.3})", f.median, f.min, f.max);
        t += &format!(
            "| {at} | {} | {} | {} | {} |\n",
            b.pairs,
            fig(&b.c),
            fig(&b.rust),
            b.verdict().as_str()
        );
    }
    if left_out > 0 {
        t += &format!("\n{left_out} pair(s) left out: the placement changed between the C and the Rust run.\n");
    }
    t
}
