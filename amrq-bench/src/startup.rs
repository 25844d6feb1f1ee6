//! Start-up against its floor, and memory per rank, at growing numbers of ranks over
//! two hosts: per number of ranks, alternating in rounds, the wall time of `amrun`
//! starting that many processes that do nothing (`/bin/true`: the floor, what
//! starting processes costs on these hosts) and of `amrun` starting a job whose ranks
//! join, make one barrier and return (`amrq-bench startup --rank`); the medians, their
//! ratio, and each rank's resident and virtual memory after its barrier (from
//! `/proc/self/status`).
//!
//! ```text
//! amrq-bench startup --hosts h0,h1 --exec 'ip netns exec {host}' --rendezvous 169.254.7.1 \
//!     --ranks 2,4,8,16,32,64,128,256
//! ```
//! Timed: from `amrun`'s start to its exit, by the benchmark's clock, for both. The
//! ranks are split evenly between the hosts (an odd one more on the first).

use crate::plots::Chart;
use crate::reference::median;
use crate::report::Point;
use crate::summary::value;
use amrq::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The ranks' part: join, one barrier, print `startup: rank=… rss_kib=… vm_kib=…
/// cpu_s=…,…,…,…` (the process's core time when its main began, once joined, once
/// started, after the barrier). Ends the process.
pub fn rank_part() -> ! {
    let at_main = cpu_s();
    Config::new().run(|setup| {
        let joined = cpu_s();
        let am = setup.start(HandlerTable::new(), ())?;
        let started = cpu_s();
        am.barrier()?;
        let barrier = cpu_s();
        let (rss, vm) = memory_kib();
        println!(
            "startup: rank={} rss_kib={rss} vm_kib={vm} cpu_s={at_main:e},{joined:e},{started:e},{barrier:e}",
            am.rank()
        );
        Ok(())
    })
}

/// This process's core time so far (user and system), seconds.
pub fn cpu_s() -> f64 {
    // SAFETY: `getrusage` writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage of this process.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// This process's resident and virtual memory, KiB (0 where `/proc` does not say).
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmSize:"))
}

/// Where the job runs: the two hosts, the command that reaches a host, rank 0's
/// address, and the `amrun` that starts both programs.
#[derive(Debug, Clone)]
pub struct Link {
    /// The two hosts.
    pub hosts: [String; 2],
    /// The template that runs a command on a host (`{host}` in it).
    pub exec: String,
    /// The first host's address the second reaches.
    pub rendezvous: String,
    /// The launcher.
    pub amrun: PathBuf,
}

/// One number of ranks: the wall times of each round, each rank's memory in the last
/// round (KiB: resident, virtual), and its core time in each round.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Ranks in all.
    pub ranks: usize,
    /// Seconds, `amrun` of `/bin/true`, per round.
    pub floor_s: Vec<f64>,
    /// Seconds, `amrun` of the joining program, per round.
    pub job_s: Vec<f64>,
    /// Per rank: (resident, virtual) KiB.
    pub memory_kib: Vec<(u64, u64)>,
    /// Per round, per rank: its core time (s) when its main began, once joined, once
    /// started (`Setup::start`), after its barrier.
    pub cpu_s: Vec<Vec<[f64; 4]>>,
}

impl Link {
    /// `amrun` of `program args` over `ranks` ranks split between the hosts: its wall
    /// time and stdout.
    pub(crate) fn time(
        &self,
        ranks: usize,
        program: &Path,
        args: &[&str],
    ) -> Result<(f64, String), String> {
        let first = ranks.div_ceil(2);
        let list = match ranks - first {
            0 => format!("{}:{first}", self.hosts[0]),
            n => format!("{}:{first},{}:{n}", self.hosts[0], self.hosts[1]),
        };
        self.time_on(&list, program, args)
    }

    /// `amrun --hosts list program args`: its wall time and stdout.
    ///
    /// ```no_run
    /// use amrq_bench::startup::Link;
    /// let link = Link {
    ///     hosts: ["h0".into(), "h1".into()],
    ///     exec: "ssh {host}".into(),
    ///     rendezvous: "h0".into(),
    ///     amrun: "target/release/amrun".into(),
    /// };
    /// let (secs, _out) = link.time_on("h0:2", "/bin/true".as_ref(), &[]).unwrap();
    /// assert!(secs > 0.0);
    /// ```
    pub fn time_on(
        &self,
        list: &str,
        program: &Path,
        args: &[&str],
    ) -> Result<(f64, String), String> {
        let mut c = Command::new(&self.amrun);
        c.args(["--hosts", list, "--exec", &self.exec])
            .args(["--rendezvous", &self.rendezvous, "--timeout", "600"])
            .arg(program)
            .args(args)
            .stdin(Stdio::null());
        let t = Instant::now();
        let out = c
            .output()
            .map_err(|e| format!("{}: {e}", self.amrun.display()))?;
        let secs = t.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(format!(
                "{list} of {}: {}\n{}",
                program.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok((secs, String::from_utf8_lossy(&out.stdout).into_owned()))
    }
}

/// `rounds` rounds at each number of `ranks`, the floor then the job in each.
pub fn measure(link: &Link, ranks: &[usize], rounds: usize) -> Result<Vec<Sample>, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find amrq-bench: {e}"))?;
    let floor = PathBuf::from("/bin/true");
    let mut samples = Vec::new();
    for &n in ranks {
        let mut s = Sample {
            ranks: n,
            ..Sample::default()
        };
        for r in 0..rounds {
            eprintln!("{n} ranks, round {}/{rounds}", r + 1);
            s.floor_s.push(link.time(n, &floor, &[])?.0);
            let (secs, out) = link.time(n, &me, &["startup", "--rank"])?;
            s.job_s.push(secs);
            s.memory_kib = memory_lines(&out);
            s.cpu_s.push(cpu_lines(&out));
            if s.cpu_s.last().map(Vec::len) != Some(n) {
                return Err(format!(
                    "{n} ranks: not every rank said its core times:\n{out}"
                ));
            }
            if s.memory_kib.len() != n {
                return Err(format!(
                    "{n} ranks: {} said their memory:\n{out}",
                    s.memory_kib.len()
                ));
            }
        }
        samples.push(s);
    }
    Ok(samples)
}

/// Each rank's `(rss_kib, vm_kib)` from the job's `startup:` lines.
fn memory_lines(out: &str) -> Vec<(u64, u64)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("startup: "))
        .filter_map(|l| Some((value(l, "rss_kib")?, value(l, "vm_kib")?)))
        .collect()
}

/// Each rank's core times from the job's `startup:` lines, in rank order.
fn cpu_lines(out: &str) -> Vec<[f64; 4]> {
    let mut v: Vec<(usize, [f64; 4])> = out
        .lines()
        .filter_map(|l| l.strip_prefix("startup: "))
        .filter_map(|l| {
            let rank = value(l, "rank")?;
            let t: Vec<f64> = value::<String>(l, "cpu_s")?
                .split(',')
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            Some((rank, t.try_into().ok()?))
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v.into_iter().map(|x| x.1).collect()
}

/// The Markdown report: a row per number of ranks.
pub fn report(link: &Link, samples: &[Sample]) -> String {
    let mut t = String::from("# Start-up against its floor, and memory per rank\n\n");
    t += &format!(
        "Two hosts, {} and {}, reached through `{}`; rank 0's rendezvous {}. Timed: \
         `amrun`'s wall time, of `/bin/true` as every rank (the floor) and of ranks \
         that join, make one barrier and return, alternating, {} rounds; medians \
         (min–max). Memory: each rank's after its barrier (`VmRSS`, `VmSize`), median \
         and largest over the ranks.\n\n",
        link.hosts[0],
        link.hosts[1],
        link.exec,
        link.rendezvous,
        samples.first().map_or(0, |s| s.job_s.len())
    );
    t += "| ranks | floor (s) | join + barrier (s) | ratio | resident MiB/rank (median, max) | virtual MiB/rank (median, max) |\n|---:|---:|---:|---:|---:|---:|\n";
    for s in samples {
        let (floor, job) = (spread(&s.floor_s), spread(&s.job_s));
        let mib = |f: fn(&(u64, u64)) -> u64| {
            let mut v: Vec<f64> = s.memory_kib.iter().map(|m| f(m) as f64 / 1024.0).collect();
            let max = v.iter().copied().fold(0.0, f64::max);
            format!("{:.1}, {max:.1}", median(&mut v))
        };
        t += &format!(
            "| {} | {} | {} | {:.2} | {} | {} |\n",
            s.ranks,
            floor.1,
            job.1,
            job.0 / floor.0,
            mib(|m| m.0),
            mib(|m| m.1)
        );
    }
    t
}

/// The median of `v` and the text "median (min–max)".
fn spread(v: &[f64]) -> (f64, String) {
    let mut v = v.to_vec();
    let (lo, hi) = (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(0.0, f64::max),
    );
    let m = median(&mut v);
    (m, format!("{m:.3} ({lo:.3}–{hi:.3})"))
}

/// The plots: start-up and its floor against the ranks, and memory per rank.
pub fn charts(samples: &[Sample]) -> Vec<Chart<'static>> {
    let times = |f: fn(&Sample) -> &Vec<f64>| {
        samples
            .iter()
            .map(|s| Point::of(s.ranks as f64, &mut f(s).clone()))
            .collect::<Vec<_>>()
    };
    let memory = |f: fn(&(u64, u64)) -> u64| {
        samples
            .iter()
            .map(|s| {
                let mut v: Vec<f64> = s.memory_kib.iter().map(|m| f(m) as f64 / 1024.0).collect();
                Point::of(s.ranks as f64, &mut v)
            })
            .collect::<Vec<_>>()
    };
    let chart = |file, title, y_label, curves| Chart {
        file,
        title,
        x_label: "ranks (over two hosts)",
        y_label,
        log_x: true,
        log_y: true,
        curves,
        categories: &[],
        parity: false,
    };
    vec![
        chart(
            "startup",
            "amrun's wall time: ranks that join and make a barrier, and its floor",
            "seconds",
            vec![
                ("join + one barrier".into(), times(|s| &s.job_s)),
                (
                    "floor: /bin/true as every rank".into(),
                    times(|s| &s.floor_s),
                ),
            ],
        ),
        chart(
            "memory",
            "memory per rank after its barrier (median over ranks, bars: min–max)",
            "MiB",
            vec![
                ("resident (VmRSS)".into(), memory(|m| m.0)),
                ("virtual (VmSize)".into(), memory(|m| m.1)),
            ],
        ),
    ]
}
