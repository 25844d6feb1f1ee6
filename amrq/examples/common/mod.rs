//! Shared by the examples: the flags every example takes (parsed with clap, flattened
//! into each example's own), the summary line, and starting the ranks.

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
    /// Run the ranks as threads of one process instead of processes (as
    /// `AMRQ_THREADS=1` does).
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
pub fn two_ranks(name: &str, size: usize) -> amrq::Result<()> {
    match size {
        2 => Ok(()),
        n => Err(format!(
            "{name} runs on 2 ranks, not {n}: start it with amrun -n 2, or on its own"
        )
        .into()),
    }
}

/// Says what went wrong and exits with status 2.
pub fn fail(why: &dyn std::fmt::Display) -> ! {
    eprintln!("error: {why}");
    std::process::exit(2)
}

/// Prints the summary line: `NAME: k=v …`, or one JSON object with `--json`.
pub fn summary(name: &str, json: bool, kv: &[(&str, f64)]) {
    println!("{}", amrq::summary::line(name, json, kv));
}

/// The ranks an example asks for when started alone: exactly these (a `--ranks` flag,
/// or the 2 a two-rank example needs), or these unless `AMRQ_RANKS` says otherwise. A
/// launcher's count wins either way.
pub enum Ranks {
    Exactly(usize),
    Default(usize),
}

impl Ranks {
    /// `--ranks` if given, else `default` unless `AMRQ_RANKS` says otherwise.
    pub fn flag_or(flag: Option<usize>, default: usize) -> Self {
        flag.map_or(Ranks::Default(default), Ranks::Exactly)
    }
}

/// Runs `rank_main` as every rank of a job with `cfg`, as threads with `--threads`.
/// Never returns.
pub fn run<F>(o: &Common, mut cfg: amrq::Config, ranks: Ranks, rank_main: F) -> !
where
    F: Fn(amrq::Setup) -> amrq::Result<()> + Sync,
{
    match ranks {
        Ranks::Exactly(n) => cfg.ranks.set(n.max(1)),
        Ranks::Default(n) => cfg.ranks.set_default(n.max(1)),
    }
    if o.threads {
        cfg.threads.set(true);
    }
    cfg.run(rank_main)
}

/// How the ranks run, for the examples' first lines.
pub fn placement(threads: bool) -> &'static str {
    if threads {
        "threads"
    } else {
        "processes"
    }
}

/// A Split-C program's rank: its context.
pub type Context = amrq::splitc::SplitC<()>;

/// [`run`] for a Split-C program: `program` runs on every rank with its context.
pub fn run_splitc<F>(o: &Common, cfg: amrq::Config, ranks: Ranks, program: F) -> !
where
    F: Fn(&Context) -> amrq::Result<()> + Sync,
{
    run(o, cfg, ranks, |setup| {
        let job = setup.start(amrq::am::HandlerTable::new(), ())?;
        program(job.splitc())?;
        job.barrier()
    })
}
