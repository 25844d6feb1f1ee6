//! Between two hosts: amrq's round trip, one-to-one message rate and 64 KiB bandwidth
//! (Long AMs and puts) over the cluster conduit, and UCX's own `ucx_perftest`
//! (`ucp_am_lat`, `ucp_am_bw`, `ucp_put_bw`) over the same link with the same UCX
//! settings, alternating per test in rounds (each test amrq, then UCX), so that both
//! sides of a ratio see the same state of a shared machine. Medians over rounds, and
//! the ratios.
//!
//! ```text
//! amrq-bench hosts --hosts h0,h1 --exec 'ip netns exec {host}' --rendezvous 169.254.7.1
//! ```
//! runs, per round and test, `amrq-bench hosts --job …` (which starts one rank on each
//! host with amrq's launcher: each rank joins, rank 0 measures the one test named in
//! `AMRQ_BENCH_HOSTS_TEST` and prints `hosts: key=value`), then a `ucx_perftest`
//! server on the first host and its client on the second, through the same `--exec`
//! template. `ucx_perftest` prints a one-way latency: doubled here.
//! Unpinned by default (a rank on a namespace host is a process like any other); with
//! `--pin`, rank 0 and the server on core 0, rank 1 and the client on core 1.

use crate::peers::ucx::server_then_client;
use crate::peers::{pairs, run, ucx_final, UcxFinal};
use crate::reference::median;
use amrq::bootstrap::env::ENV_RENDEZVOUS;
use amrq::prelude::*;
use amrq::rma::RmaError;
use std::cell::Cell;
use std::process::Command;
use std::time::{Duration, Instant};

/// The figures a round measures, in the order of the report: (key, what, unit). The
/// round trip is timed one at a time, as `ucp_am_lat` times it: its median beside
/// `ucp_am_lat`'s (its "typical"), its mean beside `ucp_am_lat`'s mean ("overall").
pub const FIGURES: [(&str, &str, &str); 6] = [
    ("rtt_ns", "Short round trip, median", "ns"),
    ("rtt_mean_ns", "Short round trip, mean", "ns"),
    (
        "msgs_per_s",
        "one-to-one message rate (Short, 2 args; UCX: 8 B)",
        "msgs/s",
    ),
    ("bw_64k_mib_s", "64 KiB bandwidth, AM (Long)", "MiB/s"),
    (
        "put_scope_64k_mib_s",
        "64 KiB bandwidth, put from the caller's buffer (`put_scope`)",
        "MiB/s",
    ),
    (
        "put_nbi_64k_mib_s",
        "64 KiB bandwidth, `put_nbi` (copies what the network cannot take at once)",
        "MiB/s",
    ),
];

/// Set (by `--pin`) for the ranks of amrq's job: rank r runs on core r.
const PIN: &str = "AMRQ_BENCH_PIN";

/// The tests of a round, in order: each gives the figures of [`FIGURES`] whose keys
/// start with its own (the round trip gives its median and its mean).
pub const TESTS: [&str; 4] = ["rtt", "msgs_per_s", "bw_64k_mib_s", "put"];

/// The one test (of [`TESTS`]) amrq's job measures.
const TEST: &str = "AMRQ_BENCH_HOSTS_TEST";

/// Bytes of a bulk message.
const BULK: usize = 64 << 10;

struct State {
    pong: ReplyHandler,
    /// Pongs received (rank 0); requests handled (rank 1).
    count: Cell<u64>,
}

/// A rank's part: joins the job across hosts; rank 0 measures against rank 1 the test
/// named in `AMRQ_BENCH_HOSTS_TEST` (every test if unset) and prints one line
/// `hosts: key=value…`, the median of `batches` timed batches each (after one
/// warm-up). Ends the process, unless it cannot start (the reason).
pub fn rank_part(quick: bool) -> Result<std::convert::Infallible, String> {
    if std::env::var_os(ENV_RENDEZVOUS).is_none() {
        return Err("not started by a launcher across hosts (no AMRQ_RENDEZVOUS): run `amrq-bench hosts --hosts A,B`".into());
    }
    if std::env::var_os(PIN).is_some() {
        let rank: usize = std::env::var("AMRQ_RANK")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        amrq::util::affinity::pin_to_core(rank).map_err(|e| e.to_string())?;
    }
    let test = std::env::var(TEST).ok();
    Config::new().run(|setup| measure(setup, quick, test.as_deref()))
}

fn measure(setup: Setup, quick: bool, test: Option<&str>) -> amrq::Result<()> {
    let mut table = HandlerTable::new();
    let pong = table.reply("pong", |s: &State, _| {
        s.count.set(s.count.get() + 1);
        Ok(())
    });
    let ping = table.request("ping", |s: &State, ctx, _| ctx.reply(s.pong, &[0]));
    let sink = table.request("sink", |s: &State, _, _| {
        s.count.set(s.count.get() + 1);
        Ok(())
    });
    let state = State {
        pong,
        count: Cell::new(0),
    };
    let am = setup.start(table, state)?;
    let rma = am.rma();
    let at = rma.alloc_symmetric(BULK, 64)?;
    am.barrier()?;
    if am.rank() != 0 {
        // Rank 1 serves until rank 0 is done.
        return am.barrier();
    }
    let pick = |q: u64, f: u64| if quick { q } else { f };
    let batches = pick(3, 11) as usize;
    let s = am.state();
    // One round trip (the ping after a burst also says the burst was handled: frames
    // of one pair arrive in order).
    let round_trip = || -> Result<(), AmError> {
        let want = s.count.get() + 1;
        am.request(1, ping, &[0])?;
        am.wait_until(|s| s.count.get() >= want)
    };
    let timed = |per: u64, f: &dyn Fn() -> Result<(), RmaError>| -> Result<f64, RmaError> {
        let mut samples = Vec::with_capacity(batches);
        for b in 0..=batches {
            let t = Instant::now();
            f()?;
            if b > 0 {
                samples.push(t.elapsed().as_secs_f64() / per as f64);
            }
        }
        Ok(median(&mut samples))
    };
    let want = |key: &str| test.is_none_or(|t| t == key);
    let mut figures = Vec::new();
    if want("rtt") {
        // Each round trip timed alone (one clock read apiece), after a warm-up.
        let iters = pick(5_000, 60_000);
        (0..iters / 10).try_for_each(|_| round_trip())?;
        let mut each = Vec::with_capacity(iters as usize);
        let mut last = Instant::now();
        for _ in 0..iters {
            round_trip()?;
            let now = Instant::now();
            each.push((now - last).as_secs_f64());
            last = now;
        }
        let mean = each.iter().sum::<f64>() / each.len() as f64;
        figures.push(("rtt_ns", median(&mut each) * 1e9));
        figures.push(("rtt_mean_ns", mean * 1e9));
    }
    if want("msgs_per_s") {
        let burst = pick(20_000, 200_000);
        let per_msg = timed(burst, &|| {
            for i in 0..burst {
                am.request(1, sink, &[i, i])?;
            }
            Ok(round_trip()?)
        })?;
        figures.push(("msgs_per_s", 1.0 / per_msg));
    }
    let bulk = pick(200, 2_000);
    let data = vec![0x5au8; BULK];
    let mib_s = |per: f64| BULK as f64 / per / f64::from(1 << 20);
    if want("bw_64k_mib_s") {
        let per_long = timed(bulk, &|| {
            for i in 0..bulk {
                am.request_long(1, sink, &[i], &data, at)?;
            }
            Ok(round_trip()?)
        })?;
        figures.push(("bw_64k_mib_s", mib_s(per_long)));
    }
    if want("put") {
        let per_put = timed(bulk, &|| {
            rma.put_scope(|s| (0..bulk).try_for_each(|_| s.put(1, at, &data)))
        })?;
        figures.push(("put_scope_64k_mib_s", mib_s(per_put)));
        let per_put = timed(bulk, &|| {
            for _ in 0..bulk {
                rma.put_nbi(1, at, &data)?;
            }
            rma.sync_nbi()?;
            Ok(())
        })?;
        figures.push(("put_nbi_64k_mib_s", mib_s(per_put)));
    }
    let line: Vec<String> = figures.iter().map(|(k, v)| format!("{k}={v:.1}")).collect();
    println!("hosts: {}", line.join(" "));
    am.barrier()
}

/// Where the two hosts are and how to reach them.
#[derive(Debug, Clone)]
pub struct Link {
    /// The two hosts (rank 0's first).
    pub hosts: [String; 2],
    /// The command template that runs a command on a host (`{host}` in it).
    pub exec: String,
    /// The first host's address the second reaches (rank 0's rendezvous, the
    /// `ucx_perftest` server's).
    pub address: String,
    /// Pin the first host's side to core 0, the second's to core 1.
    pub pin: bool,
}

impl Link {
    /// `program args…` on the `side`th host through the template, with `env` set
    /// there (and on core `side` if pinned).
    fn on(&self, side: usize, env: &[(String, String)], program: &str, args: &[&str]) -> Command {
        let words: Vec<String> = self
            .exec
            .split_whitespace()
            .map(|w| w.replace("{host}", &self.hosts[side]))
            .collect();
        let mut c = Command::new(&words[0]);
        c.args(&words[1..]);
        if self.pin {
            c.args(["taskset", "-c", &side.to_string()]);
        }
        c.arg("env");
        c.args(env.iter().map(|(k, v)| format!("{k}={v}")));
        c.arg(program).args(args);
        c
    }
}

/// The `UCX_*` settings of this environment, given to both amrq and `ucx_perftest`.
pub fn ucx_settings() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("UCX_"))
        .collect()
}

/// One `ucx_perftest` test across the link: its overall figures.
fn perftest(link: &Link, test: &str, size: usize, iters: u64) -> Result<UcxFinal, String> {
    let port = (40000 + std::process::id() % 5000).to_string();
    let env = ucx_settings();
    let (s, n) = (size.to_string(), iters.to_string());
    let args = [
        link.address.as_str(),
        "-p",
        &port,
        "-t",
        test,
        "-s",
        &s,
        "-n",
        &n,
    ];
    let out = server_then_client(link.on(0, &env, "ucx_perftest", &["-p", &port]), || {
        link.on(1, &env, "ucx_perftest", &args)
    });
    if let Some(why) = out.failed {
        return Err(format!(
            "{test} between {} and {}: {why}",
            link.hosts[0], link.hosts[1]
        ));
    }
    ucx_final(&out.stdout).ok_or_else(|| format!("{test}: no Final line"))
}

/// UCX's figures for test `test` (of [`TESTS`]) in one round.
pub fn ucx_test(link: &Link, test: &str, quick: bool) -> Result<Figures, String> {
    let d = if quick { 10 } else { 1 };
    let one = |key: &str, v: f64| vec![(key.to_string(), v)];
    Ok(match test {
        "rtt" => {
            // `ucx_perftest` prints one-way latencies: doubled.
            let f = perftest(link, "ucp_am_lat", 8, 50_000 / d)?;
            vec![
                ("rtt_ns".into(), 2e3 * f.typical_us),
                ("rtt_mean_ns".into(), 2e3 * f.mean_us),
            ]
        }
        "msgs_per_s" => one(test, perftest(link, "ucp_am_bw", 8, 1_000_000 / d)?.msgs_s),
        "bw_64k_mib_s" => one(test, perftest(link, "ucp_am_bw", BULK, 20_000 / d)?.mib_s),
        "put" => {
            // Both of amrq's puts against the one `ucp_put_bw`.
            let mib_s = perftest(link, "ucp_put_bw", BULK, 20_000 / d)?.mib_s;
            vec![
                ("put_scope_64k_mib_s".into(), mib_s),
                ("put_nbi_64k_mib_s".into(), mib_s),
            ]
        }
        _ => return Err(format!("no test {test}")),
    })
}

/// amrq's figures for test `test` (of [`TESTS`]) in one round: runs `amrq-bench hosts
/// --job …` and reads rank 0's line.
pub fn amrq_test(link: &Link, test: &str, quick: bool) -> Result<Figures, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find amrq-bench: {e}"))?;
    let mut c = Command::new(exe);
    c.args(["hosts", "--job", "--hosts", &link.hosts.join(",")])
        .args(["--exec", &link.exec, "--rendezvous", &link.address])
        .env(TEST, test);
    if quick {
        c.arg("--quick");
    }
    if link.pin {
        c.env(PIN, "1");
    }
    let out = run(&mut c, Duration::from_secs(300))?;
    let figures = pairs(&out, "hosts");
    match figures.first() {
        Some((k, _)) if k.starts_with(test) => Ok(figures),
        _ => Err(format!("rank 0 printed no {test}: {out}")),
    }
}

/// One round: each test measured by amrq, then by UCX.
pub fn round(link: &Link, quick: bool) -> Result<(Figures, Figures), String> {
    let (mut am, mut ucx) = (Vec::new(), Vec::new());
    for test in TESTS {
        am.extend(amrq_test(link, test, quick)?);
        ucx.extend(ucx_test(link, test, quick)?);
    }
    Ok((am, ucx))
}

/// One side's figures of one round, under the keys of [`FIGURES`].
pub type Figures = Vec<(String, f64)>;

/// The report of `rounds` rounds: per figure the medians, the ratio amrq/UCX (for the
/// round trip, UCX/amrq: above 1 is amrq ahead), each round's values, and the goals.
pub fn report(link: &Link, rounds: &[(Figures, Figures)]) -> String {
    let get = |v: &[(String, f64)], k: &str| v.iter().find(|(n, _)| n == k).map(|p| p.1);
    let settings: Vec<String> = ucx_settings()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut s = format!(
        "# amrq and UCX between two hosts\n\nHosts {} and {} ({} rounds, each test amrq, \
         then `ucx_perftest`; {}; {}).\n\n\
         | figure | amrq | UCX (`ucx_perftest`) | amrq vs UCX | goal |\n|---|---|---|---|---|\n",
        link.hosts[0],
        link.hosts[1],
        rounds.len(),
        if settings.is_empty() {
            "UCX's own choice of transport".into()
        } else {
            settings.join(" ")
        },
        if link.pin {
            "each side pinned: rank 0 and the server on core 0, rank 1 and the client on core 1"
        } else {
            "neither side pinned"
        }
    );
    let goals = [
        "≥ 0.91 (RTT ≤ 1.1× UCX's)",
        "(the same)",
        "≥ 10",
        "≥ 1.0",
        "≥ 1.0",
        "—",
    ];
    for ((key, what, unit), goal) in FIGURES.iter().zip(goals) {
        let mut a: Vec<f64> = rounds.iter().filter_map(|r| get(&r.0, key)).collect();
        let mut u: Vec<f64> = rounds.iter().filter_map(|r| get(&r.1, key)).collect();
        let (am, um) = (median(&mut a), median(&mut u));
        let ratio = if key.starts_with("rtt") {
            um / am
        } else {
            am / um
        };
        s.push_str(&format!(
            "| {what} ({unit}) | {am:.1} | {um:.1} | {ratio:.2}× | {goal} |\n"
        ));
    }
    s.push_str("\nEach round (amrq / UCX):\n\n| round |");
    for (_, what, _) in FIGURES {
        s.push_str(&format!(" {what} |"));
    }
    s.push_str(&format!("\n|---|{}\n", "---|".repeat(FIGURES.len())));
    for (i, (a, u)) in rounds.iter().enumerate() {
        s.push_str(&format!("| {} |", i + 1));
        for (key, _, _) in FIGURES {
            let f = |v: Option<f64>| v.map_or("—".into(), |x| format!("{x:.1}"));
            s.push_str(&format!(" {} / {} |", f(get(a, key)), f(get(u, key))));
        }
        s.push('\n');
    }
    s
}
