//! UCX: `ucx_perftest` over shared memory (`UCX_TLS=sm,self`), a server on rank 1's
//! core and a client on rank 0's: AM latency (`ucp_am_lat`, one-way: doubled for the
//! round trip), AM bandwidth and message rate (`ucp_am_bw`), put bandwidth
//! (`ucp_put_bw`). It has no barrier test.

use super::{installed, rank_cores, run_output, Failure, Measured, Output, Raw, MIB};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `ucx_perftest` client may run.
const CLIENT_LIMIT: Duration = Duration::from_secs(120);

/// Starts `ucx_perftest`'s `server`, then runs a `client()` against it, again while
/// the server is still starting (a client that fails at once, the server running); a
/// client that ran and failed or timed out is not retried. The client's output.
pub(crate) fn server_then_client(mut server: Command, client: impl Fn() -> Command) -> Output {
    let server = crate::child::tied(&mut server)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut server = match server {
        Ok(s) => s,
        Err(e) => return Output::failure(format!("cannot start the ucx_perftest server: {e}")),
    };
    let mut out = Output::failure("the ucx_perftest server did not start".into());
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        out = run_output(&mut client(), CLIENT_LIMIT);
        let at_once = start.elapsed() < Duration::from_secs(5);
        if out.failed.is_none() || !at_once || !matches!(server.try_wait(), Ok(None)) {
            break;
        }
    }
    crate::child::kill_group(&server);
    let _ = server.wait();
    out
}

/// The metric of each test of a round (one `ucx_perftest` run each).
pub const PARTS: [&[&str]; 5] = [
    &["rtt_ns"],
    &["msgs_per_s"],
    &["bw_64k_mb_s"],
    &["bw_1m_mb_s"],
    &["put_64k_mb_s"],
];

/// The `Final:` line of `ucx_perftest`, its overall figures.
///
/// ```
/// let out = "Final:  100000  0.206  0.210  0.215  37.08  37.08  4860031  4860031\n";
/// let f = amrq_bench::peers::ucx_final(out).unwrap();
/// assert_eq!((f.typical_us, f.mean_us, f.mib_s, f.msgs_s), (0.206, 0.215, 37.08, 4860031.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UcxFinal {
    /// One-way latency, µs: the median of the iterations ("typical").
    pub typical_us: f64,
    /// One-way latency, µs: the mean over the whole run ("overall").
    pub mean_us: f64,
    /// Bandwidth, MiB/s.
    pub mib_s: f64,
    /// Message rate, messages/s.
    pub msgs_s: f64,
}

/// The overall figures of `ucx_perftest`'s output `out`, if it has a `Final:` line.
pub fn ucx_final(out: &str) -> Option<UcxFinal> {
    let line = out.lines().find(|l| l.trim_start().starts_with("Final:"))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() >= 8).then(|| UcxFinal {
        typical_us: v[1],
        mean_us: v[3],
        mib_s: v[5],
        msgs_s: v[7],
    })
}

/// `ucx_perftest` with its server and client pinned as amrq's ranks 1 and 0.
#[derive(Debug, Clone)]
pub struct Ucx {
    cores: [usize; 2],
}

/// The tests of a round: (test, bytes, iterations in a full run), as [`PARTS`].
const TESTS: [(&str, usize, u64); 5] = [
    ("ucp_am_lat", 8, 200_000),
    ("ucp_am_bw", 8, 2_000_000),
    ("ucp_am_bw", 64 << 10, 20_000),
    ("ucp_am_bw", 1 << 20, 2_000),
    ("ucp_put_bw", 64 << 10, 20_000),
];

impl Ucx {
    /// Why not, if `ucx_perftest` is not there.
    pub fn prepare() -> Result<Self, String> {
        if !installed("ucx_perftest") || !installed("taskset") {
            return Err("ucx_perftest not found (Debian: apt-get install ucx-utils)".into());
        }
        Ok(Self {
            cores: rank_cores(),
        })
    }

    /// How a round runs, for the report.
    pub fn how(&self, quick: bool) -> String {
        let d = if quick { 10 } else { 1 };
        let tests: Vec<String> = TESTS
            .iter()
            .map(|&(t, s, n)| format!("`-t {t} -s {s} -n {}`", n / d))
            .collect();
        format!(
            "UCX_TLS=sm,self ucx_perftest, server on core {}, client on core {}: {}; the round trip is twice the median one-way latency",
            self.cores[1],
            self.cores[0],
            tests.join(", ")
        )
    }

    /// One test: a server on rank 1's core, then the client on rank 0's.
    fn test(&self, test: &str, size: usize, iters: u64) -> Output {
        let port = match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
            Ok(a) => a.port().to_string(),
            Err(e) => return Output::failure(format!("no free port: {e}")),
        };
        let pin = |core: usize, args: &[&str]| {
            let mut c = Command::new("taskset");
            c.args(["-c", &core.to_string(), "ucx_perftest"])
                .args(args)
                .env("UCX_TLS", "sm,self");
            c
        };
        let (s, n) = (size.to_string(), iters.to_string());
        let client = ["127.0.0.1", "-p", &port, "-t", test, "-s", &s, "-n", &n];
        server_then_client(pin(self.cores[1], &["-p", &port]), || {
            pin(self.cores[0], &client)
        })
    }

    /// Test `part` of a round ([`PARTS`]), its raw output saved: its figure, or the
    /// failure with what it printed.
    pub fn run(&self, part: usize, quick: bool, raw: &Raw) -> Result<Measured, Failure> {
        let d = if quick { 10 } else { 1 };
        let (test, size, n) = TESTS[part];
        let out = self.test(test, size, n / d);
        let command = format!("ucx_perftest -t {test} -s {size} -n {}", n / d);
        let files = raw.keep(&format!("{test}-{size}"), &command, &out)?;
        let Some(f) = ucx_final(&out.stdout) else {
            return Err(Failure {
                why: format!("{test} -s {size}: no `Final:` line"),
                unread: out.lines(),
                files,
            });
        };
        let value = match PARTS[part][0] {
            "rtt_ns" => 2.0 * f.typical_us * 1e3,
            "msgs_per_s" => f.msgs_s,
            _ => f.mib_s * MIB / 1e6,
        };
        Ok(Measured {
            values: vec![(PARTS[part][0].to_string(), value)],
            files,
            notes: Vec::new(),
        })
    }
}
