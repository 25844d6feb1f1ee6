//! Shared by the examples: the flags every example takes (parsed with clap, flattened
//! into each example's own), the summary line, and running the ranks.

#![allow(dead_code)]

/// Flags every example takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// A short run (seconds), as CI runs it.
    #[arg(long)]
    pub quick: bool,
    /// Print the summary line as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Run the ranks as threads of one process instead of processes.
    #[arg(long)]
    pub threads: bool,
}

/// How much an example measures, for those that time batches of operations.
#[derive(Debug, Clone, clap::Args)]
pub struct Batches {
    /// Messages (or operations) per batch.
    #[arg(long)]
    pub iters: Option<u64>,
    /// Batches; each figure is the median over them.
    #[arg(long)]
    pub batches: Option<u64>,
}

impl Batches {
    /// Iterations per batch and batches (at least one): as given, or the defaults
    /// `(quick, full)` of each.
    pub fn or(&self, quick: bool, iters: (u64, u64), batches: (u64, u64)) -> (u64, u64) {
        let pick = |(q, f)| if quick { q } else { f };
        (
            self.iters.unwrap_or(pick(iters)),
            self.batches.unwrap_or(pick(batches)).max(1),
        )
    }
}

/// Exits with an error unless the job has 2 ranks (`name` runs on exactly 2).
pub fn two_ranks(name: &str, size: usize) {
    if size != 2 {
        fail(&format!("{name} runs on 2 ranks, not {size}"));
    }
}

/// Says what went wrong and exits with status 2.
pub fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    std::process::exit(2)
}

/// Prints the summary line: `NAME: k=v …`, or one JSON object with `--json`.
pub fn summary(name: &str, json: bool, kv: &[(&str, f64)]) {
    println!("{}", amrq::summary::line(name, json, kv));
}

/// Runs `rank_main` on `ranks` ranks: processes (self-launched, or joining `amrun`'s
/// job), or threads with `--threads`. Never returns; the exit status is the job's.
pub fn run_ranks<F>(o: &Common, ranks: usize, cfg: &amrq::Config, rank_main: F) -> !
where
    F: Fn(amrq::conduit::mem::MemConduit) -> Result<(), String> + Sync,
{
    if o.threads {
        match amrq::threads::run(ranks, cfg, &rank_main) {
            Ok(results) => match results.into_iter().find_map(Result::err) {
                None => std::process::exit(0),
                Some(e) => fail(&e),
            },
            Err(e) => fail(&e.to_string()),
        }
    }
    amrq::launch::launch(ranks, cfg, rank_main)
}

/// What a Split-C example's program can fail with: the layer's errors, or a wrong
/// result.
pub type SplitCError = Box<dyn std::error::Error + Send + Sync>;

/// [`run_ranks`] for a Split-C program: `program` runs on every rank with its context
/// (`amrq::spmd::splitc_main`, or `splitc_threads` with `--threads`). Never returns.
pub fn run_splitc<F>(o: &Common, ranks: usize, cfg: &amrq::Config, program: F) -> !
where
    F: Fn(&amrq::spmd::Context<'_, '_>) -> Result<(), SplitCError> + Sync,
{
    if o.threads {
        match amrq::spmd::splitc_threads(ranks, cfg, &program) {
            Ok(results) => match results.into_iter().find_map(Result::err) {
                None => std::process::exit(0),
                Some(e) => fail(&e.to_string()),
            },
            Err(e) => fail(&e.to_string()),
        }
    }
    amrq::spmd::splitc_main(ranks, cfg, program)
}
