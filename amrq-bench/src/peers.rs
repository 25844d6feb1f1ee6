//! The peers, measured in the same run where they are installed: Open MPI running
//! this crate's `peers/mpi_bench.c`, UCX's `ucx_perftest` over shared memory
//! (`UCX_TLS=sm,self`), and GASNet-EX's own tests when `--gasnet DIR` names a build
//! of them (GASNet-EX is not packaged; amrq neither ships nor builds it). A peer that
//! is not there is reported as missing with the reason, never estimated.
//!
//! The table compares the metrics every peer can measure; its ratio is amrq's
//! speed-up over the peer (peer time / amrq time, or amrq rate / peer rate): above
//! 1 means amrq is faster.

use crate::report::{Figure, Outcome};
use std::path::Path;
use std::process::{Command, Stdio};
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

/// What one peer gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Peer {
    /// Its name (`Open MPI`, …).
    pub name: String,
    /// `None` if it ran; otherwise why it is missing or failed.
    pub missing: Option<String>,
    /// Metric key and value.
    pub values: Vec<(String, f64)>,
    /// How it was run.
    pub command: String,
    /// What else it printed that the reader may want (parsed lines).
    pub detail: Vec<String>,
}

impl Peer {
    fn missing(name: &str, why: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            missing: Some(why.into()),
            values: Vec::new(),
            command: String::new(),
            detail: Vec::new(),
        }
    }

    /// The value of metric `key`, if measured.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.values.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }
}

/// Runs `cmd` with a deadline; its stdout, or why it failed.
pub(crate) fn run(cmd: &mut Command, limit: Duration) -> Result<String, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{:?} timed out after {limit:?}", cmd.get_program()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        Err(format!("{} ({})", out.status, tail.join(" / ")))
    }
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

/// Open MPI: builds `mpi_bench.c` with `mpicc` into `work` and runs it on 2 ranks
/// bound to cores.
pub fn open_mpi(work: &Path, quick: bool) -> Peer {
    const NAME: &str = "Open MPI";
    if !installed("mpicc") || !installed("mpirun") {
        return Peer::missing(
            NAME,
            "mpicc/mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)",
        );
    }
    let src = work.join("mpi_bench.c");
    let bin = work.join("mpi_bench");
    if let Err(e) = std::fs::create_dir_all(work)
        .and_then(|()| std::fs::write(&src, include_str!("../peers/mpi_bench.c")))
    {
        return Peer::missing(NAME, format!("{}: {e}", work.display()));
    }
    if let Err(e) = run(
        Command::new("mpicc")
            .arg("-O2")
            .arg("-o")
            .arg(&bin)
            .arg(&src),
        Duration::from_secs(120),
    ) {
        return Peer::missing(NAME, format!("mpicc failed: {e}"));
    }
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "-np", "2", "--bind-to", "core"])
        .args(["--mca", "pml", "ob1", "--mca", "btl", "self,vader"])
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .arg(&bin)
        .args(quick.then_some("quick"));
    let command = format!("mpirun --allow-run-as-root -np 2 --bind-to core --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism none mpi_bench{}", if quick { " quick" } else { "" });
    match run(&mut cmd, Duration::from_secs(300)) {
        Ok(out) => {
            let values = pairs(&out, "mpi");
            if values.is_empty() {
                return Peer::missing(NAME, format!("no result line in {out:?}"));
            }
            let version = Command::new("mpirun")
                .arg("--version")
                .output()
                .ok()
                .and_then(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .next()
                        .map(str::to_string)
                })
                .unwrap_or_default();
            Peer {
                name: NAME.into(),
                missing: None,
                values,
                command,
                detail: vec![version],
            }
        }
        Err(e) => Peer::missing(NAME, format!("{command}: {e}")),
    }
}

/// The `Final:` line of `ucx_perftest`: (median one-way latency µs, bandwidth MiB/s,
/// message rate msg/s), overall figures.
///
/// ```
/// let out = "Final:  100000  0.206  0.206  0.206  37.08  37.08  4860031  4860031\n";
/// assert_eq!(amrq_bench::peers::ucx_final(out), Some((0.206, 37.08, 4860031.0)));
/// ```
pub fn ucx_final(out: &str) -> Option<(f64, f64, f64)> {
    let line = out.lines().find(|l| l.trim_start().starts_with("Final:"))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() >= 8).then(|| (v[1], v[5], v[7]))
}

/// One `ucx_perftest` test between a server on core 1 and a client on core 0 (both
/// on 127.0.0.1, shared-memory transports only).
fn ucx_test(test: &str, size: usize, iters: u64) -> Result<(f64, f64, f64), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port()
        .to_string();
    // Server and client one per core (the first two cores this process may use).
    let cores = amrq::util::affinity::allowed_cores();
    let core = |i: usize| {
        cores
            .get(i % cores.len().max(1))
            .copied()
            .unwrap_or(0)
            .to_string()
    };
    let pin = |core: String, args: &[&str]| {
        let mut c = Command::new("taskset");
        c.args(["-c", &core, "ucx_perftest"])
            .args(args)
            .env("UCX_TLS", "sm,self");
        c
    };
    let mut server = pin(core(1), &["-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let (s, n) = (size.to_string(), iters.to_string());
    let client = ["127.0.0.1", "-p", &port, "-t", test, "-s", &s, "-n", &n];
    // The server may take a moment to listen: retry while it runs.
    let mut out = Err(format!("{test}: the server did not start"));
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(300));
        out = run(&mut pin(core(0), &client), Duration::from_secs(120));
        if out.is_ok() || !matches!(server.try_wait(), Ok(None)) {
            break;
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    ucx_final(&out?).ok_or_else(|| format!("{test}: no Final line"))
}

/// UCX: `ucx_perftest` AM latency (`ucp_am_lat`, one-way: doubled for the round trip)
/// and AM bandwidth and message rate (`ucp_am_bw`).
pub fn ucx(quick: bool) -> Peer {
    const NAME: &str = "UCX";
    if !installed("ucx_perftest") || !installed("taskset") {
        return Peer::missing(
            NAME,
            "ucx_perftest not found (Debian: apt-get install ucx-utils)",
        );
    }
    let d = if quick { 10 } else { 1 };
    const MIB: f64 = 1.048_576; // ucx_perftest's MB/s are MiB/s
    let go = || -> Result<Vec<(String, f64)>, String> {
        let (lat, _, _) = ucx_test("ucp_am_lat", 8, 200_000 / d)?;
        let (_, _, rate) = ucx_test("ucp_am_bw", 8, 2_000_000 / d)?;
        let (_, bw64, _) = ucx_test("ucp_am_bw", 64 << 10, 20_000 / d)?;
        let (_, bw1m, _) = ucx_test("ucp_am_bw", 1 << 20, 2_000 / d)?;
        let (_, put64, _) = ucx_test("ucp_put_bw", 64 << 10, 20_000 / d)?;
        Ok(vec![
            ("rtt_ns".into(), 2.0 * lat * 1e3),
            ("msgs_per_s".into(), rate),
            ("bw_64k_mb_s".into(), bw64 * MIB),
            ("bw_1m_mb_s".into(), bw1m * MIB),
            ("put_64k_mb_s".into(), put64 * MIB),
        ])
    };
    match go() {
        Ok(values) => Peer {
            name: NAME.into(),
            missing: None,
            values,
            command: "UCX_TLS=sm,self ucx_perftest -t ucp_am_lat|ucp_am_bw|ucp_put_bw (server on core 1, client on core 0)".into(),
            detail: vec!["median one-way latency × 2 for the round trip; no barrier test".into()],
        },
        Err(e) => Peer::missing(NAME, e),
    }
}

/// One result line of a GASNet test: `X: desc: S sec U us [M MB/s]`.
#[derive(Debug, Clone, PartialEq)]
pub struct GasnetLine {
    /// What was measured.
    pub desc: String,
    /// Microseconds per operation.
    pub us: f64,
    /// MB/s (GASNet's MB: 2^20 bytes), when printed.
    pub mb_s: Option<f64>,
}

/// The result lines of a GASNet test's output.
///
/// ```
/// let l = "A: ping-pong round-trip Request   :  0.012 sec    0.543 us  12.500 MB/s";
/// let v = amrq_bench::peers::gasnet_lines(l);
/// assert_eq!((v[0].desc.as_str(), v[0].us, v[0].mb_s), ("ping-pong round-trip Request", 0.543, Some(12.5)));
/// ```
pub fn gasnet_lines(out: &str) -> Vec<GasnetLine> {
    out.lines()
        .filter_map(|l| {
            let (head, rest) = l.split_once(" sec ")?;
            let (desc, _secs) = head.rsplit_once(':')?;
            let desc = desc.split_once(": ").map_or(desc, |(_, d)| d).trim();
            let mut w = rest.split_whitespace();
            let us: f64 = w.next()?.parse().ok()?;
            let mb_s = match (w.next(), w.next(), w.next()) {
                (Some("us"), Some(m), Some("MB/s")) => m.parse().ok(),
                _ => None,
            };
            Some(GasnetLine {
                desc: desc.to_string(),
                us,
                mb_s,
            })
        })
        .collect()
}

/// GASNet-EX: `testam`, `testsmall`, `testlarge` and `testbarrier` from `dir` (smp
/// conduit builds, 2 processes through `GASNET_PSHM_NODES=2`). The parser follows
/// GASNet's test output format (`report()` in its tests); amrq's CI has no GASNet
/// build to check it against, so every parsed line is kept in the peer's detail.
pub fn gasnet(dir: Option<&Path>) -> Peer {
    const NAME: &str = "GASNet-EX";
    let Some(dir) = dir else {
        return Peer::missing(
            NAME,
            "not given (--gasnet DIR: a directory with smp-conduit builds of testam, testsmall, testlarge, testbarrier)",
        );
    };
    let mut lines: Vec<(&str, GasnetLine)> = Vec::new();
    for test in ["testam", "testsmall", "testlarge", "testbarrier"] {
        let bin = dir.join(test);
        if !bin.is_file() {
            return Peer::missing(NAME, format!("{} not found", bin.display()));
        }
        match run(
            Command::new(&bin).env("GASNET_PSHM_NODES", "2"),
            Duration::from_secs(600),
        ) {
            Ok(out) => lines.extend(gasnet_lines(&out).into_iter().map(|l| (test, l))),
            Err(e) => return Peer::missing(NAME, format!("{test}: {e}")),
        }
    }
    let of = |test: &'static str, has: &'static str| {
        lines
            .iter()
            .filter(move |(t, l)| *t == test && l.desc.to_lowercase().contains(has))
            .map(|(_, l)| l)
    };
    let mut values = Vec::new();
    if let Some(us) = of("testam", "round-trip").map(|l| l.us).reduce(f64::min) {
        values.push(("rtt_ns".to_string(), us * 1e3));
    }
    if let Some(mb) = of("testlarge", "").filter_map(|l| l.mb_s).reduce(f64::max) {
        values.push(("bw_1m_mb_s".to_string(), mb * 1.048_576));
    }
    if let Some(us) = of("testbarrier", "barrier").map(|l| l.us).reduce(f64::min) {
        values.push(("barrier_ns".to_string(), us * 1e3));
    }
    Peer {
        name: NAME.into(),
        missing: None,
        values,
        command: format!(
            "GASNET_PSHM_NODES=2 {}/test{{am,small,large,barrier}}",
            dir.display()
        ),
        detail: lines
            .iter()
            .map(|(t, l)| {
                let mb = l.mb_s.map_or(String::new(), |m| format!(" {m} MB/s"));
                format!("{t}: {}: {} us{mb}", l.desc, l.us)
            })
            .collect(),
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

/// The tag of a peer's figures in the table (`Open MPI` → `open_mpi`).
///
/// ```
/// assert_eq!(amrq_bench::peers::tag("GASNet-EX"), "gasnet_ex");
/// ```
pub fn tag(name: &str) -> String {
    name.to_lowercase().replace([' ', '-'], "_")
}

/// The peers table as an outcome: `amrq_<metric>`, `<peer>_<metric>` and
/// `<peer>_<metric>_speedup` figures; missing peers and metrics in the notes.
pub fn table(amrq: &Peer, peers: &[Peer], timer_ns: f64) -> Outcome {
    let mut o = Outcome::new("peers", 2, timer_ns);
    for (key, _, _) in METRICS {
        if let Some(a) = amrq.get(key) {
            o.figures.push(Figure::single(format!("amrq_{key}"), a));
        }
    }
    for p in peers {
        let tag = tag(&p.name);
        if let Some(why) = &p.missing {
            o.notes.push(format!("{}: missing: {why}", p.name));
            continue;
        }
        for (key, _, _) in METRICS {
            match (amrq.get(key), p.get(key)) {
                (Some(a), Some(v)) => {
                    o.figures.push(Figure::single(format!("{tag}_{key}"), v));
                    o.figures.push(Figure::single(
                        format!("{tag}_{key}_speedup"),
                        speedup(key, a, v),
                    ));
                }
                (_, None) => o.notes.push(format!("{}: no {key} test", p.name)),
                (None, Some(_)) => {}
            }
        }
        o.notes.push(format!("{}: {}", p.name, p.command));
    }
    o
}
