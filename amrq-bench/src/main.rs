//! `amrq-bench`: the benchmark suite's command line.
//!
//! Each benchmark subcommand runs on `--ranks` ranks of this host (self-launched
//! processes, or the job of `amrun`, `mpirun` or `srun`); the rank that reports prints
//! its tables and the summary line last, or one JSON object with `--json`; with
//! `--out DIR` the JSON is also appended to `DIR/<benchmark>.json`. `peers` runs the
//! peers and prints their table; `all` runs everything and writes the report.

use amrq_bench::clock::Clock;
use amrq_bench::report::Outcome;
use amrq_bench::suite::{self, Job};
use amrq_bench::Params;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "amrq-bench",
    about = "amrq's benchmarks: Liu & Culler's framework, the LogP signature, peers side by side"
)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
    /// Ranks to run on (default: what the benchmark needs; see each one's help).
    #[arg(long, global = true)]
    ranks: Option<usize>,
    /// A short run (CI, smoke tests; `all --quick` takes under 2 minutes on 2 cores).
    #[arg(long, global = true)]
    quick: bool,
    /// Print JSON instead of the tables and summary line.
    #[arg(long, global = true)]
    json: bool,
    /// Write results here (`all`: the report; the others: append JSON to DIR/NAME.json).
    #[arg(long, global = true)]
    out: Option<PathBuf>,
    /// A directory with GASNet-EX's testam, testsmall, testlarge, testbarrier (smp conduit).
    #[arg(long, global = true)]
    gasnet: Option<PathBuf>,
}

#[derive(Subcommand, Debug, Clone, Copy)]
enum Bench {
    #[command(flatten)]
    Job(Job),
    /// Open MPI, UCX and GASNet-EX beside amrq: one table.
    Peers,
    /// Everything, with a progress bar; the report goes to --out (default results/).
    All,
}

fn fail(why: &str) -> ! {
    eprintln!("amrq-bench: {why}");
    std::process::exit(2)
}

fn main() {
    let cli = Cli::parse();
    // A launcher's variables, even incomplete ones, mean a job around us.
    if !matches!(cli.bench, Bench::Job(_)) && !matches!(amrq::bootstrap::env::detect(), Ok(None)) {
        // Its children would inherit the job's environment and join it.
        fail("`all` and `peers` start their own jobs: run them directly, not under amrun, mpirun or srun");
    }
    match cli.bench {
        Bench::Job(job) => run_job(&cli, job),
        Bench::Peers => peers(&cli),
        Bench::All => all(&cli),
    }
}

fn run_job(cli: &Cli, job: Job) -> ! {
    let (default, fixed) = job.ranks();
    let ranks = cli.ranks.unwrap_or(default);
    if (fixed && ranks != default) || ranks < 2 {
        let want = if fixed {
            default.to_string()
        } else {
            "2 or more".into()
        };
        fail(&format!(
            "{} runs on {want} ranks (--ranks {default}), not {ranks}",
            job.name()
        ));
    }
    let mut cfg = amrq::Config::from_env().unwrap_or_else(|e| fail(&e.to_string()));
    let queues = job.configure(&mut cfg);
    amrq::launch::launch(ranks, &cfg, |c| -> Result<(), String> {
        let p = Params {
            batches: suite::batches(cli.quick),
            quick: cli.quick,
            clock: Clock::calibrate(),
        };
        if let Some(o) = job.run(c, &p, queues).map_err(|e| e.to_string())? {
            emit(cli, &o)?;
        }
        Ok(())
    })
}

/// Prints an outcome and appends it to `--out`.
fn emit(cli: &Cli, o: &Outcome) -> Result<(), String> {
    println!("{}", if cli.json { o.json() } else { o.text() });
    if let Some(dir) = &cli.out {
        use std::io::Write;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(format!("{}.json", o.name));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        writeln!(f, "{}", o.json()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `peers`: amrq's figures (round-trip, one-to-one, stream, array as child jobs), the peers,
/// and the table.
fn peers(cli: &Cli) {
    let outcomes = suite::run_jobs(
        &[Job::RoundTrip, Job::OneToOne, Job::Stream, Job::Array],
        cli.quick,
    )
    .unwrap_or_else(|e| fail(&e));
    let work = std::env::temp_dir().join(format!("amrq-bench-peers-{}", std::process::id()));
    let mut all = vec![suite::amrq_peer(&outcomes)];
    all.extend(suite::run_peers(&work, cli.quick, cli.gasnet.as_deref()));
    let _ = std::fs::remove_dir_all(&work);
    let table = amrq_bench::peers::table(&all[0], &all[1..], Clock::calibrate().overhead_ns());
    if let Err(e) = emit(cli, &table) {
        fail(&e)
    }
}

fn all(cli: &Cli) {
    if cli.ranks.is_some() {
        eprintln!("amrq-bench: `all` runs each benchmark on its own rank count; --ranks is ignored (run a benchmark alone to choose it)");
    }
    let out = cli.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    match suite::all(cli.quick, &out, cli.gasnet.as_deref()) {
        Ok(r) => {
            println!("{}", r.table.text());
            println!("report: {}", out.join("summary.md").display());
        }
        Err(e) => fail(&e),
    }
}
