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
