//! The jobs of the suite, and `amrq-bench all`: every job as its own launch (each
//! needs its own rank count and configuration), then the peers, then the report.

use crate::clock::Clock;
use crate::peers::{self, Peers};
use crate::report::Outcome;
use crate::results::{Machine, Results};
use crate::{
    array, calls, interrupts, loaded, matmul, mechanisms, polling, signature, splitc, stream,
    threads, unloaded, Params,
};
use amrq::prelude::*;
use amrq::rq::QueueId;
use amrq::Setup;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A benchmark that runs as a job of ranks; each is a subcommand of `amrq-bench`,
/// whose help is the variant's line here (module docs say more).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Subcommand)]
pub enum Job {
    /// Short request and reply, one at a time, beside the raw round trip (2 ranks).
    RoundTrip,
    /// The round trip from rank 0 to each other rank (default 4 ranks).
    RoundTripRanks,
    /// 1024 pipelined requests, then one acknowledging reply: time per message (2 ranks).
    OneToOne,
    /// 1024 requests to two ranks alternately: the send overhead (3 ranks).
    OneToTwo,
    /// 2048 arrived requests from two ranks, handled: the receive overhead (3 ranks).
    TwoToOne,
    /// Every rank sends 1024 requests and arrays to its right neighbour (default: one per core).
    Ring,
    /// Step i: rank j exchanges with rank j XOR i (default: one rank per core).
    Traverse,
    /// Array transfer: blocking, non-blocking, swap, put vs memcpy; 3 alignments (2 ranks).
    Array,
    /// Array transfer two-to-one, one and two segments (3 ranks).
    ArrayTwoToOne,
    /// Unsuccessful polls per variant; successful poll by intersection (2 ranks).
    Polling,
    /// Hold/release toggle; receive overhead vs arrival interval (2 ranks).
    Interrupts,
    /// StarT-Voyager's Express, Basic, Tag-On and DMA: overhead, latency, bandwidth (2 ranks).
    Mechanisms,
    /// LogP signature: bursts of k with Δ between sends; o_s, o_r, g, L (2 ranks).
    Signature,
    /// One-way time and streaming bandwidth per size, and the barrier (2 ranks).
    Stream,
    /// Begel et al.'s Split-C micro-benchmarks, direct and message path (2 ranks).
    Splitc,
    /// The AM paper's matrix multiply against its model, direct and message path (2 ranks).
    Matmul,
    /// Calls with pending answers against hand-written request/reply: round trip, window (2 ranks).
    Calls,
    /// T threads of one rank sending to a peer against T single-threaded ranks (default: one sender per core, plus the receiver).
    SendingThreads,
}

/// Every job, in the order `all` runs them.
pub const JOBS: [Job; 18] = [
    Job::RoundTrip,
    Job::Calls,
    Job::SendingThreads,
    Job::OneToOne,
    Job::OneToTwo,
    Job::TwoToOne,
    Job::RoundTripRanks,
    Job::Ring,
    Job::Traverse,
    Job::Array,
    Job::ArrayTwoToOne,
    Job::Polling,
    Job::Interrupts,
    Job::Mechanisms,
    Job::Signature,
    Job::Stream,
    Job::Splitc,
    Job::Matmul,
];

/// Queues a job's configuration added.
#[derive(Debug, Clone, Copy, Default)]
pub struct Queues {
    irq: Option<(QueueId, QueueId)>,
    mechanisms: Option<QueueId>,
}

impl Job {
    /// The subcommand's name.
    pub fn name(self) -> &'static str {
        match self {
            Job::RoundTrip => "round-trip",
            Job::RoundTripRanks => "round-trip-ranks",
            Job::OneToOne => "one-to-one",
            Job::OneToTwo => "one-to-two",
            Job::TwoToOne => "two-to-one",
            Job::Ring => "ring",
            Job::Traverse => "traverse",
            Job::Array => "array",
            Job::ArrayTwoToOne => "array-two-to-one",
            Job::Polling => "polling",
            Job::Interrupts => "interrupts",
            Job::Mechanisms => "mechanisms",
            Job::Signature => "signature",
            Job::Stream => "stream",
            Job::Splitc => "splitc",
            Job::Matmul => "matmul",
            Job::Calls => "calls",
            Job::SendingThreads => "sending-threads",
        }
    }

    /// The job named `name`.
    ///
    /// ```
    /// use amrq_bench::suite::Job;
    /// assert_eq!(Job::from_name("ring"), Some(Job::Ring));
    /// ```
    pub fn from_name(name: &str) -> Option<Job> {
        JOBS.into_iter().find(|j| j.name() == name)
    }

    /// (default ranks, whether the count is fixed). The default of the jobs that take
    /// any count is the number of cores (at least 2), or 4 for the round trip per
    /// destination so that there is more than one destination.
    pub fn ranks(self) -> (usize, bool) {
        let cores = amrq::util::affinity::allowed_cores().len().max(2);
        match self {
            Job::OneToTwo | Job::TwoToOne | Job::ArrayTwoToOne => (3, true),
            Job::RoundTripRanks => (cores.max(4), false),
            Job::Ring | Job::Traverse => (cores, false),
            Job::SendingThreads => (cores + 1, false),
            _ => (2, true),
        }
    }

    /// Adjusts `cfg` for this job; the queues it added.
    pub fn configure(self, cfg: &mut Config) -> Queues {
        match self {
            Job::OneToTwo | Job::TwoToOne => {
                cfg.ring_slots
                    .set(cfg.ring_slots.get().max(unloaded::DEEP_RING_SLOTS));
            }
            Job::Array | Job::ArrayTwoToOne | Job::Ring | Job::Traverse | Job::Stream => {
                cfg.segment_bytes
                    .set(cfg.segment_bytes.get().max(array::SEGMENT_BYTES));
            }
            Job::Matmul => cfg
                .segment_bytes
                .set(cfg.segment_bytes.get().max(matmul::SEGMENT_BYTES)),
            Job::Polling => polling::configure(cfg),
            Job::SendingThreads => threads::configure(cfg),
            Job::Signature => cfg.ring_slots.set(signature::RING_SLOTS),
            Job::Interrupts => {
                return Queues {
                    irq: Some(interrupts::configure(cfg)),
                    ..Queues::default()
                }
            }
            Job::Mechanisms => {
                return Queues {
                    mechanisms: Some(mechanisms::configure(cfg)),
                    ..Queues::default()
                }
            }
            _ => {}
        }
        Queues::default()
    }

    /// Runs the job on this rank: the outcome on the rank that reports.
    pub fn run(self, c: Setup, p: &Params, q: Queues) -> amrq::Result<Option<Outcome>> {
        match self {
            Job::RoundTrip => unloaded::round_trip(c, p),
            Job::RoundTripRanks => unloaded::round_trip_ranks(c, p),
            Job::OneToOne => unloaded::one_to_one(c, p),
            Job::OneToTwo => unloaded::one_to_two(c, p),
            Job::TwoToOne => unloaded::two_to_one(c, p),
            Job::Ring => loaded::ring(c, p),
            Job::Traverse => loaded::traverse(c, p),
            Job::Array => array::array(c, p),
            Job::ArrayTwoToOne => array::two_to_one(c, p),
            Job::Polling => polling::polling(c, p),
            Job::Interrupts => {
                let (irq, poll) = q.irq.ok_or_else(|| {
                    crate::fixture::bench_error("interrupts: queues not configured")
                })?;
                interrupts::interrupts(c, p, irq, poll)
            }
            Job::Mechanisms => {
                let q = q.mechanisms.ok_or_else(|| {
                    crate::fixture::bench_error("mechanisms: queue not configured")
                })?;
                mechanisms::mechanisms(c, p, q)
            }
            Job::Signature => signature::signature(c, p),
            Job::Stream => stream::stream(c, p),
            Job::Splitc => splitc::splitc(c, p),
            Job::Matmul => matmul::matmul(c, p),
            Job::Calls => calls::calls(c, p),
            Job::SendingThreads => threads::sending_threads(c, p),
        }
    }
}

/// Timed batches per figure.
pub fn batches(quick: bool) -> usize {
    if quick {
        5
    } else {
        31 // this VM's figures move by 2x and more between batches: more samples
    }
}

/// Runs `exe JOB --json --ranks N [--quick]` and reads its outcome.
fn run_job(exe: &Path, job: Job, quick: bool) -> Outcome {
    let (ranks, _) = job.ranks();
    let mut cmd = Command::new(exe);
    cmd.args([job.name(), "--json", "--ranks", &ranks.to_string()]);
    if quick {
        cmd.arg("--quick");
    }
    child_outcome(&mut cmd, job.name(), ranks, job_limit(quick))
}

/// Runs `cmd` (a job that prints its outcome as a JSON line) within `limit`: the
/// outcome it printed, or one of `name` on `ranks` ranks whose note says it failed and
/// why, with its stderr (`amrq-apps all` runs its applications with it too).
pub fn child_outcome(
    cmd: &mut Command,
    name: &str,
    ranks: usize,
    limit: std::time::Duration,
) -> Outcome {
    let failed = |why: String| {
        let mut o = Outcome::new(name, ranks, 0.0);
        o.notes.push(format!("failed: {why}"));
        o
    };
    let out = crate::child::run_output(cmd, limit);
    match out.failed {
        None => out
            .stdout
            .lines()
            .find_map(|l| serde_json::from_str::<Outcome>(l).ok())
            .unwrap_or_else(|| failed("no result printed".into())),
        Some(why) => failed(format!("{why}; its stderr: {}", out.stderr.trim())),
    }
}

/// How long a child job may run before it is ended and reported as failed: far
/// beyond what any job takes (seconds quick, a minute or two in full), so only a hang
/// reaches it.
///
/// ```
/// use amrq_bench::suite::job_limit;
/// assert!(job_limit(true) < job_limit(false));
/// ```
pub fn job_limit(quick: bool) -> std::time::Duration {
    std::time::Duration::from_secs(if quick { 300 } else { 1200 })
}

/// Runs `jobs` as child jobs of this program (quietly); their outcomes.
pub fn run_jobs(jobs: &[Job], quick: bool) -> Result<Vec<Outcome>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find amrq-bench: {e}"))?;
    Ok(jobs.iter().map(|&j| run_job(&exe, j, quick)).collect())
}

/// amrq's put bandwidth at 64 KiB, double-word aligned (from *array*).
fn put_64k(outcomes: &[Outcome]) -> Option<f64> {
    let o = outcomes.iter().find(|o| o.name == "array")?;
    let s = o.series.iter().find(|s| s.name == "put, double-word")?;
    let p = s.points.iter().find(|p| p.x == 65536.0)?;
    Some(p.x * 1e3 / p.median)
}

/// amrq's figures for the peers table, from the outcomes of a run.
pub fn amrq_figures(outcomes: &[Outcome]) -> Vec<(String, f64)> {
    let find = |job: &str, key: &str| {
        outcomes
            .iter()
            .find(|o| o.name == job)
            .and_then(|o| o.get(key))
            .map(|f| f.median)
    };
    [
        ("rtt_ns", find("round-trip", "round_trip_ns")),
        ("msgs_per_s", find("one-to-one", "msgs_per_s")),
        ("bw_64k_mb_s", find("stream", "bw_64k_mb_s")),
        ("bw_1m_mb_s", find("stream", "bw_1m_mb_s")),
        ("put_64k_mb_s", put_64k(outcomes)),
        ("barrier_ns", find("stream", "barrier_ns")),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v.filter(|v| v.is_finite())?)))
    .collect()
}

/// The jobs that give amrq's figures of `metrics` (keys of [`peers::METRICS`]).
///
/// ```
/// use amrq_bench::suite::{peer_jobs, Job};
/// assert_eq!(peer_jobs(&["bw_64k_mb_s", "barrier_ns"]), [Job::Stream]);
/// assert_eq!(peer_jobs(&["rtt_ns", "msgs_per_s"]), [Job::RoundTrip, Job::OneToOne]);
/// ```
pub fn peer_jobs(metrics: &[&str]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for m in metrics {
        let job = match *m {
            "rtt_ns" => Job::RoundTrip,
            "msgs_per_s" => Job::OneToOne,
            "put_64k_mb_s" => Job::Array,
            _ => Job::Stream,
        };
        if !jobs.contains(&job) {
            jobs.push(job);
        }
    }
    jobs
}

/// Rounds of the peers' comparison by default: 5, or 2 with `quick`.
pub fn peer_rounds(quick: bool) -> usize {
    if quick {
        2
    } else {
        5
    }
}

/// The peers in `rounds` rounds, amrq (the [`peer_jobs`] as child jobs) before each
/// part of each peer's round;
/// raw output in `raw` (`<report>/peers`), progress on stderr through `progress`.
pub fn run_peers(
    quick: bool,
    rounds: usize,
    gasnet: Option<&Path>,
    raw: Option<PathBuf>,
    progress: impl FnMut(&str),
) -> Result<Peers, String> {
    let work = std::env::temp_dir().join(format!("amrq-bench-peers-{}", std::process::id()));
    let setup = peers::Setup {
        quick,
        rounds,
        gasnet: gasnet.map(Path::to_path_buf),
        work: work.clone(),
        raw,
    };
    let amrq = |metrics: &[&str]| {
        let mut v = amrq_figures(&run_jobs(&peer_jobs(metrics), quick)?);
        v.retain(|(k, _)| metrics.contains(&k.as_str()));
        Ok(v)
    };
    let p = peers::measure(&setup, amrq, progress);
    let _ = std::fs::remove_dir_all(&work);
    p
}

/// `amrq-bench all`: every job, the peers, then the report in `out`.
pub fn all(
    quick: bool,
    rounds: usize,
    out: &Path,
    gasnet: Option<&Path>,
) -> Result<Results, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find amrq-bench: {e}"))?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let progress = crate::progress::Progress::new(Some(JOBS.len() + 2));
    let mut outcomes = Vec::new();
    for job in JOBS {
        progress.start(job.name());
        outcomes.push(run_job(&exe, job, quick));
    }
    let raw = out.join("peers");
    let _ = std::fs::remove_dir_all(&raw); // an earlier run's files are not this run's
    progress.start("peers");
    let peers = run_peers(quick, rounds, gasnet, Some(raw), |what| {
        progress.note(format!("peers: {what}"))
    })?;
    let timer = Clock::calibrate().overhead_ns();
    let table = peers::table(&peers, timer);
    progress.start("report");
    let results = Results {
        machine: Machine::here(),
        quick,
        outcomes,
        peers,
        table,
    };
    crate::files::write_report(&results, out)?;
    progress.finish();
    Ok(results)
}
