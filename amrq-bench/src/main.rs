//! `amrq-bench`: the benchmark suite's command line.
//!
//! Each benchmark subcommand runs on `--ranks` ranks of this host (self-launched
//! processes, or the job of `amrun`, `mpirun` or `srun`); the rank that reports prints
//! its tables and the summary line last, or one JSON object with `--json`; with
//! `--out DIR` the JSON is also appended to `DIR/<benchmark>.json`. `peers` runs the
//! peers and prints their table; `all` runs everything and writes the report.

use amrq_bench::clock::Clock;
use amrq_bench::programs::fail;
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
    /// Run the ranks as threads of one process (as `AMRQ_THREADS=1` does).
    #[arg(long, global = true)]
    threads: bool,
    /// Write results here (`all`: the report; the others: append JSON to DIR/NAME.json).
    #[arg(long, global = true)]
    out: Option<PathBuf>,
    /// A directory with GASNet-EX's testam, testlarge, testbarrier (smp conduit;
    /// amrq-bench/peers/build-gasnet.sh builds them from a GASNet-EX source tree).
    #[arg(long, global = true)]
    gasnet: Option<PathBuf>,
    /// Rounds of the peers' comparison, amrq before each peer in every round
    /// (default 5, or 2 with --quick).
    #[arg(long, global = true)]
    peer_rounds: Option<usize>,
}

#[derive(Subcommand, Debug, Clone)]
enum Bench {
    #[command(flatten)]
    Job(Job),
    #[command(flatten)]
    Program(amrq_bench::programs::Program),
    /// Open MPI, UCX and GASNet-EX beside amrq, alternating in rounds: the table on
    /// stdout, each peer's raw output in --out/peers (default results/peers).
    Peers,
    /// Everything, with a progress bar; the report goes to --out (default results/).
    All,
    /// Writes --out's report again (summary, CSV, plots) from its results.json, without
    /// measuring: after the report's code changed.
    Report,
    /// Between two hosts: amrq (cluster conduit) and ucx_perftest over the same link,
    /// alternating in rounds; the report goes to --out/hosts.md if given.
    Hosts(HostsArgs),
    /// Start-up against its floor (amrun of /bin/true) and memory per rank, at growing
    /// numbers of ranks over two hosts, and the first round trip to a new peer; the
    /// report goes to --out/startup.md if given.
    Startup(StartupArgs),
    /// The model of 1 000 and 10 000 ranks, fed and checked with what `startup`
    /// measured (its startup.json): the report goes to --out/model.md.
    Model(ModelArgs),
    /// Instructions per message of the fast paths (callgrind on `rq-loop`), by task as
    /// in the AM paper's Table 2; the Markdown goes to --out/budget.md if given.
    Budget(BudgetArgs),
    /// The C pingpong (amrq-c) and `round-trip` in turn, each under `amrun -n 2`: is the
    /// C layer thin (its median ratio to raw within the Rust spread, per placement)?
    CPingpong(CPingpongArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct CPingpongArgs {
    /// Pairs of runs (C, then Rust).
    #[arg(long, default_value_t = 20)]
    pairs: usize,
    /// The build holding amrun, amrq-bench and c-examples/pingpong (default: this
    /// binary's directory).
    #[arg(long)]
    build: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
struct StartupArgs {
    /// The two hosts, `A,B` (rank 0 on A).
    #[arg(long, default_value = "")]
    hosts: String,
    /// The command that runs a command on a host, `{host}` in it.
    #[arg(long, default_value = "ssh {host}")]
    exec: String,
    /// The first host's address that the second reaches (default: its name).
    #[arg(long)]
    rendezvous: Option<String>,
    /// The numbers of ranks, in all.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64,128,256")]
    ranks: Vec<usize>,
    /// Rounds per number of ranks, each the floor then the job.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// (internal) A rank of the job: join, one barrier, say its memory.
    #[arg(long, hide = true)]
    rank: bool,
    /// (internal) A rank of the first-contact job: time the first round trips.
    #[arg(long, hide = true)]
    contact: bool,
    /// (internal) A rank of the connection's core time job.
    #[arg(long, hide = true)]
    contact_cpu: bool,
    /// (internal) With --contact: datagrams off, a connection at the first message.
    #[arg(long, hide = true)]
    no_datagrams: bool,
    /// (internal) A rank of the collectives' job: time barriers and all-to-alls.
    #[arg(long, hide = true)]
    collectives: bool,
}

#[derive(clap::Args, Debug, Clone)]
struct ModelArgs {
    /// The directory of `amrq-bench --out DIR startup`, with its startup.json; the
    /// report goes to --out/model.md (default: this directory).
    #[arg(long, default_value = "docs/results/startup")]
    from: PathBuf,
}

#[derive(clap::Args, Debug, Clone)]
struct BudgetArgs {
    /// Iterations of the shorter of the two runs per mode.
    #[arg(long, default_value_t = 100_000)]
    iters: u64,
    /// Fail if a mode's whole iteration (the fast path and the benchmark's own loop:
    /// `budget_whole`) exceeds the figure committed in this file (`key whole` per line)
    /// by more than --tolerance.
    #[arg(long)]
    check: Option<PathBuf>,
    /// Allowed growth over a committed figure, in percent.
    #[arg(long, default_value_t = 2.0)]
    tolerance: f64,
    /// Also list, per mode, the instructions charged to each function.
    #[arg(long)]
    by_function: bool,
}

#[derive(clap::Args, Debug, Clone)]
struct HostsArgs {
    /// The two hosts, `A,B` (rank 0 and the ucx_perftest server on A).
    #[arg(long)]
    hosts: String,
    /// The command that runs a command on a host, `{host}` in it.
    #[arg(long, default_value = "ssh {host}")]
    exec: String,
    /// The first host's address that the second reaches (default: its name).
    #[arg(long)]
    rendezvous: Option<String>,
    /// Rounds, each test amrq then UCX.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Pin the first host's side (rank 0, the ucx_perftest server) to core 0 and the
    /// second's to core 1.
    #[arg(long)]
    pin: bool,
    /// (internal) Start amrq's job of one round.
    #[arg(long, hide = true)]
    job: bool,
}

fn main() {
    let cli = Cli::parse();
    // A launcher's variables, even incomplete ones, mean a job around us.
    let placed = !matches!(amrq::bootstrap::env::detect(), Ok(None));
    if let (Bench::Hosts(_), true) = (&cli.bench, placed) {
        let Err(e) = amrq_bench::hosts::rank_part(cli.quick);
        fail(e);
    }
    if let (Bench::Startup(a), true) = (&cli.bench, placed) {
        if a.rank {
            amrq_bench::startup::rank_part();
        }
        if a.contact || a.contact_cpu {
            amrq_bench::contact::rank_part(a.contact_cpu, !a.no_datagrams);
        }
        if a.collectives {
            amrq_bench::collectives::rank_part();
        }
    }
    let alone = matches!(cli.bench, Bench::Job(_) | Bench::Program(_));
    if cli.threads && !alone {
        fail("--threads is for a benchmark or program run alone (amrq-bench round-trip --threads)");
    }
    if !alone && placed {
        // Its children would inherit the job's environment and join it.
        fail("`all` and `peers` start their own jobs: run them directly, not under amrun, mpirun or srun");
    }
    match cli.bench.clone() {
        Bench::Job(job) => run_job(&cli, job),
        Bench::Program(p) => p.run(&amrq_bench::programs::Flags {
            quick: cli.quick,
            json: cli.json,
            threads: cli.threads,
            ranks: cli.ranks,
            out: cli.out.clone(),
        }),
        Bench::Peers => peers(&cli),
        Bench::All => all(&cli),
        Bench::Report => report(&cli),
        Bench::Hosts(h) => hosts(&cli, &h),
        Bench::Startup(a) => startup(&cli, &a),
        Bench::Model(a) => model(&cli, &a.from),
        Bench::Budget(b) => budget(&cli, &b),
        Bench::CPingpong(a) => c_pingpong(&cli, &a),
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
        fail(format!(
            "{} runs on {want} ranks (--ranks {default}), not {ranks}",
            job.name()
        ));
    }
    let mut cfg = amrq::Config::from_env().unwrap_or_else(|e| fail(e));
    cfg.ranks.set(ranks);
    if cli.threads {
        cfg.threads.set(true);
    }
    let queues = job.configure(&mut cfg);
    cfg.run(|setup| {
        let p = Params {
            batches: suite::batches(cli.quick),
            quick: cli.quick,
            clock: Clock::calibrate(),
        };
        if let Some(o) = job.run(setup, &p, queues)? {
            emit(cli, &o).map_err(amrq::Error::other)?;
        }
        Ok(())
    })
}

/// Prints an outcome and appends it to `--out`.
fn emit(cli: &Cli, o: &Outcome) -> Result<(), String> {
    println!("{}", if cli.json { o.json() } else { o.text() });
    match &cli.out {
        Some(dir) => amrq_bench::summary::append(dir, &o.name, &o.json()),
        None => Ok(()),
    }
}

/// `peers`: rounds of amrq and each peer; the table on stdout, then the notes and the
/// summary line.
fn peers(cli: &Cli) {
    let out = cli.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    let rounds = cli.peer_rounds.unwrap_or(suite::peer_rounds(cli.quick));
    let progress = amrq_bench::progress::Progress::new(None);
    let p = suite::run_peers(
        cli.quick,
        rounds,
        cli.gasnet.as_deref(),
        Some(out.join("peers")),
        |what| progress.note(format!("peers: {what}")),
    )
    .unwrap_or_else(|e| fail(e));
    progress.finish();
    let table = amrq_bench::peers::table(&p, Clock::calibrate().overhead_ns());
    let rounds_json = out.join("peers").join("rounds.json");
    let json = serde_json::to_string_pretty(&p).unwrap_or_default();
    if let Err(e) =
        std::fs::create_dir_all(out.join("peers")).and_then(|()| std::fs::write(&rounds_json, json))
    {
        fail(format!("{}: {e}", rounds_json.display()));
    }
    if !cli.json {
        println!("{}", amrq_bench::peers::text(&p));
    }
    if let Err(e) = emit(cli, &table) {
        fail(e)
    }
}

fn all(cli: &Cli) {
    if cli.ranks.is_some() {
        eprintln!("amrq-bench: `all` runs each benchmark on its own rank count; --ranks is ignored (run a benchmark alone to choose it)");
    }
    let out = cli.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    let rounds = cli.peer_rounds.unwrap_or(suite::peer_rounds(cli.quick));
    match suite::all(cli.quick, rounds, &out, cli.gasnet.as_deref()) {
        Ok(r) if cli.json => println!("{}", r.table.json()),
        Ok(r) => {
            // The peers' blocks, the one line scripts read (`peers: k=v …`), then what a
            // person reads last: the headline and where the report is.
            println!("{}", amrq_bench::peers::text(&r.peers));
            println!("{}\n", r.table.line());
            print!("{}", amrq_bench::files::headline(&r));
            println!("report: {}", out.join("summary.md").display());
        }
        Err(e) => fail(e),
    }
}

/// `report`: the report of --out rewritten from its results.json.
fn report(cli: &Cli) {
    let out = cli.out.clone().unwrap_or_else(|| PathBuf::from("results"));
    let json = out.join("results.json");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        fail(format!(
            "{}: {e} (run `amrq-bench all --out DIR` first)",
            json.display()
        ))
    });
    let r: amrq_bench::results::Results = serde_json::from_str(&text).unwrap_or_else(|e| {
        fail(format!(
            "{}: {e} (written by another version: run `all` again)",
            json.display()
        ))
    });
    amrq_bench::files::write_report(&r, &out).unwrap_or_else(|e| fail(e));
    print!("{}", amrq_bench::files::headline(&r));
    println!("report: {}", out.join("summary.md").display());
}

/// `hosts`: rounds of amrq and UCX between two hosts (or, with `--job`, amrq's job of
/// one round: one rank on each host).
fn hosts(cli: &Cli, h: &HostsArgs) {
    use amrq_bench::hosts::{report, round, Link};
    let names: Vec<String> = h.hosts.split(',').map(|n| n.trim().to_string()).collect();
    let [a, b] = names.as_slice() else {
        fail(format!("--hosts {}: give two hosts, A,B", h.hosts))
    };
    let address = h.rendezvous.clone().unwrap_or_else(|| a.clone());
    if h.job {
        let list = format!("{a}:1,{b}:1");
        let hosts =
            amrq::launch::Hosts::new(&list, &h.exec, Some(&address)).unwrap_or_else(|e| fail(e));
        let mut l = amrq::launch::Launcher::new(2);
        l.hosts = Some(hosts);
        l.verbose = false;
        l.timeout = Some(std::time::Duration::from_secs(240));
        let exe = std::env::current_exe().unwrap_or_else(|e| fail(e));
        let mut args = vec!["hosts".into(), "--hosts".into(), h.hosts.clone().into()];
        if cli.quick {
            args.push("--quick".into());
        }
        match l.run(exe.as_os_str(), &args) {
            Ok(out) => std::process::exit(out.code),
            Err(e) => fail(e),
        }
    }
    let link = Link {
        hosts: [a.clone(), b.clone()],
        exec: h.exec.clone(),
        address,
        pin: h.pin,
    };
    let mut rounds = Vec::new();
    for r in 0..h.rounds.max(1) {
        eprintln!(
            "round {}/{}: each test amrq, then ucx_perftest",
            r + 1,
            h.rounds.max(1)
        );
        rounds.push(round(&link, cli.quick).unwrap_or_else(|e| fail(e)));
    }
    let text = report(&link, &rounds);
    println!("{text}");
    if let Some(dir) = &cli.out {
        let path = dir.join("hosts.md");
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, &text)) {
            fail(format!("{}: {e}", path.display()));
        }
    }
}

/// `startup`: the floor and the job in rounds per number of ranks; the table on stdout,
/// with its plots in --out.
fn startup(cli: &Cli, a: &StartupArgs) {
    use amrq_bench::contact;
    use amrq_bench::startup::{charts, measure, report, Link};
    let names: Vec<String> = a.hosts.split(',').map(|n| n.trim().to_string()).collect();
    let [h0, h1] = names.as_slice() else {
        fail(format!("--hosts {}: give two hosts, A,B", a.hosts))
    };
    let me = std::env::current_exe().unwrap_or_else(|e| fail(e));
    let amrun = me.with_file_name("amrun");
    if !amrun.exists() {
        fail(format!(
            "no amrun beside {}: build it (cargo build --release -p amrq --features amrun)",
            me.display()
        ));
    }
    let link = Link {
        hosts: [h0.clone(), h1.clone()],
        exec: a.exec.clone(),
        rendezvous: a.rendezvous.clone().unwrap_or_else(|| h0.clone()),
        amrun,
    };
    let rounds = a.rounds.max(1);
    let samples = measure(&link, &a.ranks, rounds).unwrap_or_else(|e| fail(e));
    let contacts = contact::measure(&link, rounds).unwrap_or_else(|e| fail(e));
    let collectives =
        amrq_bench::collectives::measure(&link, &a.ranks, rounds).unwrap_or_else(|e| fail(e));
    let signature = |list: String| {
        eprintln!("LogP signature over {list}");
        let (_, out) = link
            .time_on(&list, &me, &["--json", "--quick", "signature"])
            .unwrap_or_else(|e| fail(e));
        amrq_bench::model::measured::logp_of(&out).unwrap_or_else(|e| fail(e))
    };
    let shm = signature(format!("{h0}:2"));
    let net = signature(format!("{h0}:1,{h1}:1"));
    let text = report(&link, &samples) + "\n" + &contact::report(&contacts);
    println!("{text}");
    let measured = amrq_bench::model::measured::Measured {
        placement: format!("{h0} and {h1} through `{}`", link.exec),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        startup: samples.clone(),
        contacts,
        collectives,
        logp: Some((shm, net)),
    };
    if let Some(dir) = &cli.out {
        let path = dir.join("startup.md");
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, &text)) {
            fail(format!("{}: {e}", path.display()));
        }
        for c in charts(&samples) {
            c.write(&dir.join("plots")).unwrap_or_else(|e| fail(e));
        }
        let json = serde_json::to_string_pretty(&measured).unwrap_or_default();
        let path = dir.join("startup.json");
        std::fs::write(&path, json).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
        if let Err(e) = measured.costs() {
            // The measurements are kept: `amrq-bench model --from DIR` once they suffice.
            fail(format!(
                "the model was not run: {e}; the measurements are in {}",
                path.display()
            ));
        }
        model(cli, dir);
    }
}

/// `model`: the model's report from a `startup` run's measurements in `from`, to --out
/// (default: `from`).
fn model(cli: &Cli, from: &std::path::Path) {
    let path = from.join("startup.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        fail(format!(
            "{}: {e} (measure first: amrq-bench --out {} startup --hosts …)",
            path.display(),
            from.display()
        ))
    });
    let m: amrq_bench::model::measured::Measured =
        serde_json::from_str(&text).unwrap_or_else(|e| fail(format!("{}: {e}", path.display())));
    let (md, charts) = amrq_bench::model::report::report(&m).unwrap_or_else(|e| fail(e));
    println!("{md}");
    let dir = cli.out.clone().unwrap_or_else(|| from.to_path_buf());
    let out = dir.join("model.md");
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&out, &md))
        .unwrap_or_else(|e| fail(format!("{}: {e}", out.display())));
    for c in charts {
        c.write(&dir.join("plots")).unwrap_or_else(|e| fail(e));
    }
}

/// `budget`: each mode's breakdown, a summary line of the totals, and the guard.
fn budget(cli: &Cli, b: &BudgetArgs) {
    use amrq_bench::budget::{self, MODES};
    let bench = std::env::current_exe().unwrap_or_else(|e| fail(e));
    let mut text = String::from(
        "Instructions per iteration under callgrind (difference of two runs, N and 2N iterations), charged to the tasks of the AM paper's Table 2 (see `amrq-bench/src/budget.rs`).\n\n",
    );
    let (mut totals, mut wholes) = (
        std::collections::BTreeMap::new(),
        std::collections::BTreeMap::new(),
    );
    for mode in MODES {
        let m = budget::measure(&bench, mode, b.iters).unwrap_or_else(|e| fail(e));
        text += &budget::table(mode, &m);
        if b.by_function {
            let mut v: Vec<_> = m.by_function.iter().collect();
            v.sort_by(|x, y| y.1.total_cmp(x.1));
            for (name, n) in v {
                text += &format!("    {n:7.1}  {name}\n");
            }
        }
        text += "\n";
        totals.insert(mode.key.to_string(), m.total());
        wholes.insert(mode.key.to_string(), m.whole());
    }
    if let Some(dir) = &cli.out {
        let path = dir.join("budget.md");
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, &text)) {
            fail(format!("{}: {e}", path.display()));
        }
    }
    if !cli.json {
        println!("{text}");
    }
    for (name, figures) in [("budget", &totals), ("budget_whole", &wholes)] {
        let kv: Vec<(&str, f64)> = figures.iter().map(|(k, &v)| (k.as_str(), v)).collect();
        println!("{}", amrq_bench::summary::line(name, cli.json, &kv));
    }
    if let Some(file) = &b.check {
        let committed = std::fs::read_to_string(file)
            .map_err(|e| format!("{}: {e}", file.display()))
            .and_then(|t| budget::parse_figures(&t))
            .unwrap_or_else(|e| fail(e));
        match budget::check(&committed, &wholes, b.tolerance / 100.0) {
            Ok(notes) => notes
                .iter()
                .for_each(|n| eprintln!("amrq-bench budget: {n}")),
            Err(e) => fail(e),
        }
    }
}

/// `c-pingpong`: the pairs, the table by placement, a summary line per placement.
fn c_pingpong(cli: &Cli, a: &CPingpongArgs) {
    use amrq_bench::c_layer::{bands, run_pair, text, Programs, Verdict};
    let dir = a.build.clone().or_else(|| {
        let exe = std::env::current_exe().ok()?;
        Some(exe.parent()?.to_path_buf())
    });
    let programs = dir
        .ok_or_else(|| "no build directory: pass --build".to_string())
        .and_then(|d| Programs::in_build(&d))
        .unwrap_or_else(|e| fail(e));
    let progress = amrq_bench::progress::Progress::new(Some(a.pairs));
    let mut runs = Vec::new();
    for i in 0..a.pairs {
        progress.start(format!("c-pingpong: pair {}/{}", i + 1, a.pairs));
        runs.push(run_pair(&programs, cli.quick).unwrap_or_else(|e| fail(e)));
    }
    progress.finish();
    let (bands, left_out) = bands(&runs);
    if !cli.json {
        println!("{}", text(&bands, left_out));
    }
    for b in &bands {
        let kv = [
            ("raw_rtt_ns", (b.raw_rtt_ns.0 + b.raw_rtt_ns.1) / 2.0),
            ("pairs", b.pairs as f64),
            ("c_ratio", b.c.median),
            ("rust_ratio", b.rust.median),
            ("rust_min", b.rust.min),
            ("rust_max", b.rust.max),
            ("within", f64::from(u8::from(b.within()))),
            (
                "slower",
                f64::from(u8::from(b.verdict() == Verdict::Slower)),
            ),
        ];
        println!("{}", amrq_bench::summary::line("c_pingpong", cli.json, &kv));
    }
}
