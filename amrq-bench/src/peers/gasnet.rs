//! GASNet-EX: its own `testam`, `testlarge` and `testbarrier` (smp-conduit builds in
//! the directory `--gasnet DIR` names; `amrq-bench/peers/build-gasnet.sh` makes them
//! from a GASNet-EX source tree), two processes through `GASNET_PSHM_NODES=2`.
//!
//! GASNet's fork launcher does not pin its ranks, so the bench preloads
//! `peers/pin_ranks.c` (built here with `cc`), which pins rank k to the k-th core
//! the bench may use, as amrq's launcher does; each pinned rank says so on stderr,
//! and a rank that did not is a note. The figures (the format is `report()` in
//! GASNet's tests; real output is in `tests/fixtures/gasnet-2025.8.0-smp/`):
//!
//! | metric | test, line |
//! |---|---|
//! | round trip | testam `AMShort ping-pong roundtrip ReqRep` (µs per round trip) |
//! | messages/s | testam `AMShort flood one-way Req` (µs per message: its inverse) |
//! | bandwidth 64 KiB, 1 MiB | testam `AMLong flood one-way Req` at 65536 and 1048576 (MB = 2^20) |
//! | put 64 KiB | testlarge `PutBlocking throughput` at 65536 (KB/sec, KB = 2^10) |
//! | barrier | testbarrier `Avg Anon. Barrier latency` (the other five in the detail) |
//!
//! testsmall is not run: its blocking puts and gets of 1 B … 2 KiB are loads and
//! stores into the mapped segment (6–30 ns), and amrq's table has no such row.

use super::{build_c, rank_cores, run_output, Failure, Measured, Raw, MIB};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// One result line of a GASNet test.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// GASNet's description, spaces collapsed: `AMShort ping-pong roundtrip ReqRep`,
    /// `PutBlocking throughput`, `Anon. Barrier latency`.
    pub what: String,
    /// Payload bytes, when the line has a size.
    pub size: Option<u64>,
    /// Microseconds per operation, when printed.
    pub us: Option<f64>,
    /// Bandwidth in bytes/s, converted from GASNet's units (MB = 2^20, KB = 2^10).
    pub bytes_per_s: Option<f64>,
}

/// `tokens` of a testam line after its section letter: `[size] desc…`.
fn size_and_what(head: &str) -> (Option<u64>, String) {
    let mut words: Vec<&str> = head.split_whitespace().collect();
    let size = words.first().and_then(|w| w.parse().ok());
    if size.is_some() {
        words.remove(0);
    }
    (size, words.join(" "))
}

/// testam: `X: [size] desc: S sec U us [M MB/s]`.
fn testam_line(line: &str) -> Option<Reading> {
    let (section, rest) = line.split_once(':')?;
    if section.len() != 1 || !section.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let (head, tail) = rest.rsplit_once(':')?;
    let w: Vec<&str> = tail.split_whitespace().collect();
    if w.get(1) != Some(&"sec") || w.get(3) != Some(&"us") {
        return None;
    }
    w[0].parse::<f64>().ok()?;
    let us = w[2].parse().ok()?;
    let bytes_per_s = match (w.get(4), w.get(5)) {
        (Some(m), Some(&"MB/s")) => Some(m.parse::<f64>().ok()? * MIB),
        (None, None) => None,
        _ => return None,
    };
    let (size, what) = size_and_what(head);
    Some(Reading {
        what,
        size,
        us: Some(us),
        bytes_per_s,
    })
}

/// testlarge/testsmall: `X:   0 -  N byte :  I iters, throughput T KB/sec (desc)`.
fn testlarge_line(line: &str) -> Option<Reading> {
    let (_, rest) = line.split_once(" - ")?;
    let (size, rest) = rest.split_once(" byte :")?;
    let (_, rest) = rest.split_once("throughput ")?;
    let (value, rest) = rest.trim_start().split_once(' ')?;
    let (unit, what) = rest.split_once(" (")?;
    let scale = match unit.trim() {
        "KB/sec" => 1024.0,
        "MB/sec" => MIB,
        _ => return None,
    };
    Some(Reading {
        what: what
            .strip_suffix(')')?
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        size: Some(size.trim().parse().ok()?),
        us: None,
        bytes_per_s: Some(value.parse::<f64>().ok()? * scale),
    })
}

/// testbarrier: `Total time: S sec  Avg NAME Barrier latency: U us`.
fn testbarrier_line(line: &str) -> Option<Reading> {
    let rest = line.trim_start().strip_prefix("Total time:")?;
    let (_, rest) = rest.split_once(" Avg ")?;
    let (what, value) = rest.split_once(':')?;
    let value = value.trim().strip_suffix("us")?.trim();
    Some(Reading {
        what: what.split_whitespace().collect::<Vec<_>>().join(" "),
        size: None,
        us: Some(value.parse().ok()?),
        bytes_per_s: None,
    })
}

/// Whether a line looks like a figure (so that one the parser missed is shown).
fn looks_like_a_figure(line: &str) -> bool {
    ["sec", " us", "MB/s", "KB/", "latency", "throughput"]
        .iter()
        .any(|w| line.contains(w))
}

/// The readings of a GASNet test's output, and the lines that look like figures but
/// could not be read.
///
/// ```
/// let out = "A:         AMShort     ping-pong roundtrip ReqRep:  0.000 sec    0.325 us\n\
///            I:   65536 AMLong      flood     one-way   Req   :  0.002 sec    1.545 us  40453.074 MB/s\n\
///            A:   0 -      65536 byte :    1000 iters, throughput 44692737.430 KB/sec (PutBlocking throughput)\n\
///            Total time:    0.001 sec  Avg Anon. Barrier latency:    0.138 us\n";
/// let (r, unread) = amrq_bench::peers::gasnet::readings(out);
/// assert!(unread.is_empty());
/// assert_eq!(r[0].what, "AMShort ping-pong roundtrip ReqRep");
/// assert_eq!((r[1].size, r[1].us), (Some(65536), Some(1.545)));
/// assert_eq!(r[2].bytes_per_s, Some(44692737.430 * 1024.0));
/// assert_eq!((r[3].what.as_str(), r[3].us), ("Anon. Barrier latency", Some(0.138)));
/// ```
pub fn readings(out: &str) -> (Vec<Reading>, Vec<String>) {
    let mut found = Vec::new();
    let mut unread = Vec::new();
    for line in out.lines() {
        match testlarge_line(line)
            .or_else(|| testbarrier_line(line))
            .or_else(|| testam_line(line))
        {
            Some(r) => found.push(r),
            None if looks_like_a_figure(line) && !line.starts_with("Timer granularity") => {
                unread.push(line.to_string())
            }
            None => {}
        }
    }
    (found, unread)
}

/// The metrics of the table from readings (see the module doc), in table units
/// (ns, messages/s, MB/s of 10^6 bytes).
pub fn metrics(r: &[Reading]) -> Vec<(String, f64)> {
    let find = |what: &str, size: Option<u64>| {
        r.iter()
            .find(|x| x.what == what && (size.is_none() || x.size == size))
    };
    let am_long = |size| {
        find("AMLong flood one-way Req", Some(size))
            .and_then(|x| x.bytes_per_s)
            .map(|b| b / 1e6)
    };
    [
        (
            "rtt_ns",
            find("AMShort ping-pong roundtrip ReqRep", None)
                .and_then(|x| x.us)
                .map(|us| us * 1e3),
        ),
        (
            "msgs_per_s",
            find("AMShort flood one-way Req", None)
                .and_then(|x| x.us)
                .filter(|&us| us > 0.0)
                .map(|us| 1e6 / us),
        ),
        ("bw_64k_mb_s", am_long(65536)),
        ("bw_1m_mb_s", am_long(1 << 20)),
        (
            "put_64k_mb_s",
            find("PutBlocking throughput", Some(65536))
                .and_then(|x| x.bytes_per_s)
                .map(|b| b / 1e6),
        ),
        (
            "barrier_ns",
            find("Anon. Barrier latency", None)
                .and_then(|x| x.us)
                .map(|us| us * 1e3),
        ),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?)))
    .collect()
}

/// The metrics of each run of a round (`RUNS`, in order): GASNet-EX has a test for all.
pub const PARTS: [&[&str]; 4] = [
    &["rtt_ns", "msgs_per_s"],
    &["bw_64k_mb_s", "bw_1m_mb_s"],
    &["put_64k_mb_s"],
    &["barrier_ns"],
];

/// A GASNet-EX build ready to run.
#[derive(Debug, Clone)]
pub struct Gasnet {
    dir: PathBuf,
    /// The pinning library, if `cc` could build it.
    pin: Option<PathBuf>,
    /// The cores of ranks 0 and 1 (amrq's launcher's).
    cores: [usize; 2],
}

/// The four runs of a round: (test, arguments (`ITERS` replaced), iterations full,
/// quick); each gives the metrics of [`PARTS`] at its index.
const RUNS: [(&str, &str, u64, u64); 4] = [
    ("testam", "ITERS 1048576 A", 200_000, 20_000),
    // Short (0.1–0.3 s): a longer run more often straddles a placement change.
    ("testam", "ITERS 1048576 I", 2_000, 200),
    ("testlarge", "-p -minsz 65536 ITERS 65536 A", 20_000, 2_000),
    ("testbarrier", "ITERS", 200_000, 20_000),
];

impl Gasnet {
    /// Checks `dir` and builds the pinning library into `work`; why not, if it cannot
    /// run.
    pub fn prepare(dir: Option<&Path>, work: &Path) -> Result<(Self, Vec<String>), String> {
        let Some(dir) = dir else {
            return Err("not given (--gasnet DIR: a directory with smp-conduit builds of testam, testlarge, testbarrier; amrq-bench/peers/build-gasnet.sh makes them)".into());
        };
        for test in ["testam", "testlarge", "testbarrier"] {
            if !dir.join(test).is_file() {
                return Err(format!(
                    "{} not found (amrq-bench/peers/build-gasnet.sh builds it)",
                    dir.join(test).display()
                ));
            }
        }
        let mut notes = Vec::new();
        let pin = match build_pin(work) {
            Ok(p) => Some(p),
            Err(e) => {
                notes.push(format!("ranks not pinned: {e}"));
                None
            }
        };
        Ok((
            Self {
                dir: dir.to_path_buf(),
                pin,
                cores: rank_cores(),
            },
            notes,
        ))
    }

    /// How a round runs, for the report.
    pub fn how(&self, quick: bool) -> String {
        let runs: Vec<String> = RUNS
            .iter()
            .map(|&(t, args, full, q)| {
                let n = if quick { q } else { full };
                format!("`{t} {}`", args.replace("ITERS", &n.to_string()))
            })
            .collect();
        let pin = match &self.pin {
            Some(_) => format!(
                "ranks 0 and 1 pinned to cores {} and {} (LD_PRELOAD of amrq-bench/peers/pin_ranks.c, as amrq's launcher pins)",
                self.cores[0], self.cores[1]
            ),
            None => "ranks not pinned (no C compiler for the pinning library)".into(),
        };
        format!(
            "GASNET_PSHM_NODES=2 in {}: {}; {pin}",
            self.dir.display(),
            runs.join(", ")
        )
    }

    /// Run `part` of a round (a run of [`PARTS`]), its raw output saved: its metrics, or the
    /// failure with the lines that could not be read.
    pub fn run(&self, part: usize, quick: bool, raw: &Raw) -> Result<Measured, Failure> {
        let (test, args, full, q) = RUNS[part];
        let n = if quick { q } else { full };
        let args = args.replace("ITERS", &n.to_string());
        let mut cmd = Command::new(self.dir.join(test));
        cmd.args(args.split_whitespace())
            .env("GASNET_PSHM_NODES", "2");
        if let Some(pin) = &self.pin {
            cmd.env("LD_PRELOAD", pin).env(
                "AMRQ_PIN_CORES",
                format!("{},{}", self.cores[0], self.cores[1]),
            );
        }
        let out = run_output(&mut cmd, Duration::from_secs(300));
        let name = format!("{}-{test}", part + 1);
        let mut m = Measured {
            files: raw.keep(&name, &format!("{test} {args}"), &out)?,
            ..Measured::default()
        };
        if self.pin.is_some() {
            for (rank, core) in self.cores.iter().enumerate() {
                let said = format!("amrq-pin: rank {rank} pid ");
                let pinned = out
                    .stderr
                    .lines()
                    .any(|l| l.starts_with(&said) && l.ends_with(&format!(" core {core}")));
                if !pinned {
                    m.notes.push(format!(
                        "{test}: rank {rank} did not report its pinning to core {core}"
                    ));
                }
            }
        }
        m.notes.extend(version(&out.stdout));
        let (r, unread) = readings(&out.stdout);
        m.values = metrics(&r);
        m.values.retain(|(k, _)| PARTS[part].contains(&k.as_str()));
        Failure::lacking(PARTS[part], &m.values, unread, &m.files)?;
        Ok(m)
    }
}

/// The release and conduit a GASNet test says it was built as, from its banner
/// (`=====> testam nprocs=2 config=RELEASE=2025.8.0,SPEC=0.19,CONDUIT=SMP(…),…`).
///
/// ```
/// let out = "=====> testam nprocs=2 config=RELEASE=2025.8.0,SPEC=0.19,CONDUIT=SMP(SMP-2.1/SMP-2.1),THREADMODEL=SEQ,SEGMENT=FAST compiler=GNU/12.2.0\n";
/// assert_eq!(
///     amrq_bench::peers::gasnet::version(out).as_deref(),
///     Some("GASNet-EX RELEASE=2025.8.0 CONDUIT=SMP(SMP-2.1/SMP-2.1) THREADMODEL=SEQ")
/// );
/// ```
pub fn version(out: &str) -> Option<String> {
    let config = out
        .lines()
        .find(|l| l.starts_with("=====>"))?
        .split_whitespace()
        .find_map(|w| w.strip_prefix("config="))?;
    let fields: Vec<&str> = config
        .split(',')
        .filter(|f| {
            ["RELEASE=", "CONDUIT=", "THREADMODEL="]
                .iter()
                .any(|k| f.starts_with(k))
        })
        .collect();
    (!fields.is_empty()).then(|| format!("GASNet-EX {}", fields.join(" ")))
}

/// Builds `pin_ranks.so` into `work` with `cc`.
fn build_pin(work: &Path) -> Result<PathBuf, String> {
    let source = include_str!("../../peers/pin_ranks.c");
    let flags = ["-O2", "-shared", "-fPIC"];
    build_c(
        work,
        "pin_ranks",
        source,
        "cc",
        &flags,
        "pin_ranks.so",
        &["-lpthread"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const TESTAM: &str = include_str!("../../tests/fixtures/gasnet-2025.8.0-smp/testam.out");
    const TESTLARGE: &str = include_str!("../../tests/fixtures/gasnet-2025.8.0-smp/testlarge.out");
    const TESTBARRIER: &str =
        include_str!("../../tests/fixtures/gasnet-2025.8.0-smp/testbarrier.out");
    const TESTSMALL: &str = include_str!("../../tests/fixtures/gasnet-2025.8.0-smp/testsmall.out");

    fn value(v: &[(String, f64)], key: &str) -> f64 {
        v.iter().find(|(k, _)| k == key).map(|&(_, x)| x).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// The figures of the real output, written out by hand from the fixture files:
    /// testam line 19 `AMShort ping-pong roundtrip ReqRep: … 0.325 us`, line 22
    /// `AMShort flood one-way Req: … 0.081 us`, the `I:` lines at 65536
    /// (40453.074 MB/s) and 1048576 (35309.488 MB/s); testlarge's `PutBlocking` at 65536
    /// (44692737.430 KB/sec); testbarrier's `Anon.` line (0.138 us).
    #[test]
    fn the_real_output_of_gasnet_2025_8_gives_every_figure() {
        let mut all = Vec::new();
        for text in [TESTAM, TESTLARGE, TESTBARRIER] {
            let (r, unread) = readings(text);
            assert!(unread.is_empty(), "{unread:?}");
            all.extend(r);
        }
        let v = metrics(&all);
        assert_eq!(v.len(), PARTS.concat().len(), "{v:?}");
        assert!(close(value(&v, "rtt_ns"), 325.0));
        assert!(close(value(&v, "msgs_per_s"), 1e6 / 0.081));
        let i_1m = TESTAM
            .lines()
            .find(|l| l.starts_with("I: 1048576"))
            .expect("an I: line at 1 MiB");
        assert!(i_1m.ends_with("35309.488 MB/s"), "{i_1m}");
        assert!(close(value(&v, "bw_64k_mb_s"), 40453.074 * 1.048576));
        assert!(close(value(&v, "bw_1m_mb_s"), 35309.488 * 1.048576));
        assert!(close(
            value(&v, "put_64k_mb_s"),
            44692737.430 * 1024.0 / 1e6
        ));
        assert!(close(value(&v, "barrier_ns"), 138.0));
    }

    #[test]
    fn every_result_line_of_the_fixtures_is_read() {
        // testam: sections A … K; the `max:` markers and headers are not figures.
        let (am, _) = readings(TESTAM);
        let lines = TESTAM
            .lines()
            .filter(|l| l.len() > 2 && l.as_bytes()[1] == b':' && l.contains(" sec "))
            .count();
        assert_eq!(am.len(), lines);
        let flood: Vec<&Reading> = am
            .iter()
            .filter(|r| r.what == "AMShort flood roundtrip ReqRep")
            .collect();
        assert_eq!(flood.len(), 1);
        assert_eq!(flood[0].us, Some(0.199));
        // Section B at 65416 bytes: 5.887 us, 21194.347 MB/s.
        let b = am
            .iter()
            .find(|r| r.what == "AMMedium ping-pong roundtrip ReqRep" && r.size == Some(65416))
            .unwrap();
        assert_eq!(b.us, Some(5.887));
        assert!(close(b.bytes_per_s.unwrap(), 21194.347 * MIB));
        // testbarrier: six barriers, named as GASNet names them.
        let (bar, _) = readings(TESTBARRIER);
        let names: Vec<&str> = bar.iter().map(|r| r.what.as_str()).collect();
        assert_eq!(
            names,
            [
                "Named Barrier latency",
                "Anon. Barrier latency",
                "Mixed Barrier latency",
                "Uname Barrier latency",
                "GEX Blocking Barrier latency",
                "GEX NB Barrier latency"
            ]
        );
        assert_eq!(bar[4].us, Some(0.215));
        // testsmall (not run): its throughput lines read as testlarge's do; its
        // latency lines are not figures of this table and would show as unread.
        let (small, unread) = readings(TESTSMALL);
        assert!(!small.is_empty());
        assert!(small.iter().all(|r| r.what.ends_with("throughput")));
        assert!(unread.iter().any(|l| l.contains("PutBlocking latency")));
    }

    /// The pinning library, preloaded into a shell whose subshells are made by
    /// fork(2) as GASNet's ranks are (a plain command may be vfork'd, which runs no
    /// fork handler): the shell (rank 0) and its first child (rank 1) each run on
    /// their core, and say so; a later fork is not a rank and is not pinned again.
    #[test]
    fn the_pinning_library_pins_rank_0_and_the_forked_rank_1() {
        let cores = amrq::util::affinity::allowed_cores();
        if cores.len() < 2 {
            eprintln!("skipped: fewer than 2 cores");
            return;
        }
        let work = std::env::temp_dir().join(format!("amrq-pin-test-{}", std::process::id()));
        let lib = build_pin(&work).expect("cc builds pin_ranks.c");
        let list = format!("{},{}", cores[0], cores[1]);
        let out = Command::new("sh")
            .args(["-c", "(grep Cpus_allowed_list /proc/self/status); (grep Cpus_allowed_list /proc/self/status)"])
            .env("LD_PRELOAD", &lib)
            .env("AMRQ_PIN_CORES", &list)
            .env("GASNET_PSHM_NODES", "2")
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&work);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        // The first subshell is rank 1; the second, a later fork, stays on rank 0's
        // core.
        let allowed: Vec<&str> = stdout
            .lines()
            .map(|l| l.split_whitespace().last().unwrap())
            .collect();
        assert_eq!(
            allowed,
            [cores[1].to_string(), cores[0].to_string()],
            "{stdout}"
        );
        for (rank, core) in [(0, cores[0]), (1, cores[1])] {
            assert!(
                stderr
                    .lines()
                    .any(|l| l.starts_with(&format!("amrq-pin: rank {rank} pid "))
                        && l.ends_with(&format!(" core {core}"))),
                "{stderr}"
            );
        }
        assert_eq!(
            stderr
                .lines()
                .filter(|l| l.starts_with("amrq-pin:"))
                .count(),
            2,
            "{stderr}"
        );
    }

    #[test]
    fn output_without_the_figures_reads_as_nothing_with_the_lines_shown() {
        let guessed = "A: ping-pong round-trip Request: 0.012 seconds 0.543 usec\nnode 0/2 done.\n";
        let (r, unread) = readings(guessed);
        assert!(r.is_empty());
        assert_eq!(
            unread,
            ["A: ping-pong round-trip Request: 0.012 seconds 0.543 usec"]
        );
        assert!(metrics(&r).is_empty());
    }
}
