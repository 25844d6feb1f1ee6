//! `amrq-bench`: the benchmark suite's command line (issue 11, in progress: the
//! unloaded round-trip and one-to-one benchmarks so far). Each subcommand runs on
//! `--ranks` ranks of this host (self-launched processes, or the job of `amrun`,
//! `mpirun` or `srun`) and rank 0 prints the summary line, or JSON with `--json`; with
//! `--out DIR` the JSON line is also appended to `DIR/<benchmark>.json`.

use amrq_bench::report::{line, Figure};
use amrq_bench::unloaded::{self, Params};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "amrq-bench",
    about = "amrq's benchmarks (Liu & Culler's framework)"
)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
    /// Ranks to run on (the unloaded benchmarks need 2).
    #[arg(long, default_value_t = 2, global = true)]
    ranks: usize,
    /// A short run (for CI and smoke tests).
    #[arg(long, global = true)]
    quick: bool,
    /// Print JSON instead of the summary line.
    #[arg(long, global = true)]
    json: bool,
    /// Also append each result, as JSON, to a file in this directory.
    #[arg(long, global = true)]
    out: Option<PathBuf>,
}

#[derive(Subcommand, Debug, Clone, Copy)]
enum Bench {
    /// A Short request and its reply, one at a time, beside the raw round trip.
    RoundTrip,
    /// 1024 pipelined Short requests, then one acknowledging reply: time per message.
    OneToOne,
}

impl Bench {
    fn name(self) -> &'static str {
        match self {
            Bench::RoundTrip => "round-trip",
            Bench::OneToOne => "one-to-one",
        }
    }
}

fn main() {
    let cli = Cli::parse();
    if cli.ranks != 2 {
        eprintln!(
            "amrq-bench: {} runs on 2 ranks (--ranks 2), not {}",
            cli.bench.name(),
            cli.ranks
        );
        std::process::exit(2)
    }
    let cfg = amrq::Config::from_env().unwrap_or_else(|e| {
        eprintln!("amrq-bench: {e}");
        std::process::exit(2)
    });
    amrq::launch::launch(cli.ranks, &cfg, |c| -> Result<(), String> {
        let (batches, iters) = match (cli.bench, cli.quick) {
            (Bench::RoundTrip, true) => (7, 5_000),
            (Bench::RoundTrip, false) => (21, 50_000),
            (Bench::OneToOne, true) => (7, 20),
            (Bench::OneToOne, false) => (21, 200),
        };
        let p = Params { batches, iters };
        let figures = match cli.bench {
            Bench::RoundTrip => unloaded::round_trip(c, p),
            Bench::OneToOne => unloaded::one_to_one(c, p),
        }
        .map_err(|e| e.to_string())?;
        if let Some(f) = figures {
            report(&cli, &f)?;
        }
        Ok(())
    })
}

/// Prints rank 0's result and appends it to `--out`.
fn report(cli: &Cli, figures: &[Figure]) -> Result<(), String> {
    let name = cli.bench.name();
    println!("{}", line(name, figures, cli.json));
    if let Some(dir) = &cli.out {
        use std::io::Write;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(format!("{name}.json"));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        writeln!(f, "{}", line(name, figures, true)).map_err(|e| e.to_string())?;
    }
    Ok(())
}
