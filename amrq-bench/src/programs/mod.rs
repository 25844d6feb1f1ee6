//! The measurement programs that are not part of `all`'s report: each a command of
//! `amrq-bench` that prints what it measured and ends with a summary line `NAME:
//! key=value …` (one JSON object with `--json`). All but `rq-loop` (one rank, on
//! threads) run as processes of this host, as threads (`--threads`) or under `amrun`,
//! `mpirun` or `srun`; `barrier` and `rma` compare with a raw reference in shared
//! memory, so they refuse ranks on two hosts.
//!
//! | command | measures |
//! |---|---|
//! | [`barrier`] | the dissemination barrier, blocking and split-phase, against the raw round trip |
//! | [`dispatch`] | RQ §3.2.3: a queue read in place by an inlined loop against handler dispatch |
//! | [`engine`] | the progress engine: sections, attentiveness, Liu & Culler's Fig. 7 at the AM level |
//! | [`exchange`] | RQ §4: the bandwidth-matched all-to-all against the unmatched one |
//! | [`kinds`] | StarT-Voyager's Express, Basic and Tag-On, enqueue to dequeue |
//! | [`rma`] | put and get latency and bandwidth against memcpy; a get through AM frames |
//! | [`rq_loop`] | the fast paths on one rank, for callgrind (`amrq-bench budget`) |

pub mod barrier;
pub mod dispatch;
pub mod engine;
pub mod exchange;
pub mod kinds;
pub mod rma;
pub mod rq_loop;

/// The commands, each with its own flags.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Program {
    /// The runtime's barrier, blocking and split-phase, against the raw cache-line round
    /// trip (default 2 ranks).
    Barrier(barrier::Args),
    /// A user queue read in place by an inlined loop against AM handler dispatch (2 ranks).
    Dispatch(dispatch::Args),
    /// The progress engine: a section's cost, a computing rank's attentiveness, and the
    /// overhead per message against the arrival interval (default 2 ranks).
    Engine(engine::Args),
    /// The bandwidth-matched all-to-all exchange against the unmatched one (default 4 ranks).
    Exchange(exchange::Args),
    /// Express, Basic and Tag-On messages, enqueue to dequeue, and a shared queue (2 ranks).
    Kinds(kinds::Args),
    /// Put and get against memcpy per size, and a get through AM frames (2 ranks).
    Rma,
    /// The fast paths on one rank, messages to itself (what `budget` counts).
    RqLoop(rq_loop::Args),
}

impl Program {
    /// Runs the command; never returns.
    pub fn run(&self, f: &Flags) -> ! {
        match self {
            Program::Barrier(a) => barrier::main(a, f),
            Program::Dispatch(a) => dispatch::main(a, f),
            Program::Engine(a) => engine::main(a, f),
            Program::Exchange(a) => exchange::main(a, f),
            Program::Kinds(a) => kinds::main(a, f),
            Program::Rma => rma::main(f),
            Program::RqLoop(a) => rq_loop::main(a, f),
        }
    }
}

/// The flags of `amrq-bench` every program reads.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// A short run, as CI runs it.
    pub quick: bool,
    /// The summary line as one JSON object.
    pub json: bool,
    /// The ranks as threads of one process (as `AMRQ_THREADS=1` does).
    pub threads: bool,
    /// `--ranks`, for the programs whose rank count is not fixed.
    pub ranks: Option<usize>,
    /// Where the summary's JSON is appended too (`DIR/NAME.json`).
    pub out: Option<std::path::PathBuf>,
}

impl Flags {
    /// Prints the summary line (and appends its JSON to `--out`'s `NAME.json`).
    ///
    /// ```
    /// let f = amrq_bench::programs::Flags::default();
    /// f.summary("kinds", &[("express_ns", 9.5)]); // prints `kinds: express_ns=9.5`
    /// ```
    pub fn summary(&self, name: &str, kv: &[(&str, f64)]) {
        println!("{}", crate::summary::line(name, self.json, kv));
        if let Some(dir) = &self.out {
            let json = crate::summary::line(name, true, kv);
            crate::summary::append(dir, name, &json).unwrap_or_else(|e| fail(e));
        }
    }

    /// Runs `rank_main` as every rank of a job with `cfg` (as threads with `--threads`):
    /// `ranks` when started alone, or `--ranks` (a program of a fixed count then refuses
    /// another), a launcher's count over both. Never returns.
    pub fn run<F>(&self, mut cfg: amrq::Config, ranks: Ranks, rank_main: F) -> !
    where
        F: Fn(amrq::Setup) -> amrq::Result<()> + Sync,
    {
        match (ranks, self.ranks) {
            (Ranks::Exactly(n), None) | (_, Some(n)) => cfg.ranks.set(n.max(1)),
            (Ranks::Default(n), None) => cfg.ranks.set_default(n.max(1)),
        }
        if self.threads {
            cfg.threads.set(true);
        }
        cfg.run(rank_main)
    }
}

/// How the ranks run (`Config::threads`), for the programs' first lines.
///
/// ```
/// assert_eq!(amrq_bench::programs::placement(true), "threads");
/// ```
pub fn placement(threads: bool) -> &'static str {
    if threads {
        "threads"
    } else {
        "processes"
    }
}

/// The ranks a program asks for when started alone.
#[derive(Debug, Clone, Copy)]
pub enum Ranks {
    /// Exactly these (the program runs on no other count).
    Exactly(usize),
    /// These, unless `--ranks` or `AMRQ_RANKS` says otherwise.
    Default(usize),
}

/// How much a program measures, for those that time batches of operations.
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
    ///
    /// ```
    /// let b = amrq_bench::programs::Batches { iters: None, batches: Some(0) };
    /// assert_eq!(b.or(true, (10, 100), (3, 9)), (10, 1));
    /// ```
    pub fn or(&self, quick: bool, iters: (u64, u64), batches: (u64, u64)) -> (u64, u64) {
        let pick = |(q, f)| if quick { q } else { f };
        (
            self.iters.unwrap_or(pick(iters)),
            self.batches.unwrap_or(pick(batches)).max(1),
        )
    }
}

/// Says what went wrong and exits with status 2.
///
/// ```no_run
/// amrq_bench::programs::fail("--hosts: give two hosts");
/// ```
pub fn fail(why: impl std::fmt::Display) -> ! {
    eprintln!("amrq-bench: {why}");
    std::process::exit(2)
}
