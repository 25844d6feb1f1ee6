//! The papers' applications on amrq, each a program a user can learn from, checked
//! against a sequential reference, measured the way its paper measured it:
//!
//! | module | application | paper |
//! |---|---|---|
//! | [`transpose`] | all-to-all exchange of blocks as barrier-separated permutations, five variants | Remote Queues §4, Figure 12 |
//! | [`cg`] | conjugate gradient on a 64×64 Laplacian, halo rows by bulk stores, on both paths | Begel et al. §6, Figure 6-5 |
//! | [`fft`] | 3-D FFT of a 128³ cube in slabs, the transpose an all-to-all of bulk stores, on both paths | Begel et al. §6, Figure 6-5 |
//! | [`em3d`] | EM3D on the Split-C layer: fine-grained reads, split-phase gets, ghosts filled by bulk stores, on both paths | Begel et al. §6, Figure 6-5 |
//! | [`cholesky`] | dense Cholesky factorisation, right-looking in column blocks dealt cyclically, each panel bulk-stored to every rank, on both paths | Begel et al. §6, Figure 6-5 |
//! | [`raytrace`] | a ray tracer of generated spheres, rows self-scheduled by a fetch-and-add, pixels stored into rank 0's image, on both paths | Begel et al. §6, Figure 6-5 (pico-Ray) |
//! | [`queens`] | N-Queens, message-driven: every spawn and every result an Active Message to the frame's owner | the AM paper §3.3 (TAM) |
//! | [`trisolve`] | sparse triangular solve, message-driven, received three ways ([`matrix`]: the factors) | Remote Queues §3.2.5, Figure 9 |
//! | [`radix`] | radix sort of 32-bit keys, the redistribution received by handlers, an inlined loop, or the paper's dequeue | Remote Queues §3.2.3 (Strata's on the CM-5) |
//!
//! The binary `amrq-apps` runs each as a subcommand (`--ranks N`, `--threads`,
//! `--quick`, `--check`, `--json`; the summary line last) and `amrq-apps all` runs them
//! all and writes a report ([`report`]).

pub mod cg;
pub mod cholesky;
pub mod em3d;
pub mod fft;
pub mod matrix;
pub mod profile;
pub mod queens;
pub mod radix;
pub mod raytrace;
pub mod report;
pub mod transpose;
pub mod trisolve;

use amrq::Setup;
use amrq_bench::report::Outcome;

/// A small seeded generator (xorshift64*): every rank that draws from the same seed
/// builds the same problem.
pub(crate) fn next(x: &mut u64) -> u64 {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// What an application's rank can fail with.
pub type AppError = amrq::Error;

/// Flags every application takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Ranks started on its own (processes, or threads with --threads; default 2); a
    /// launcher's count wins. More than the cores share them.
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Run the ranks as threads of one process instead of processes.
    #[arg(long)]
    pub threads: bool,
    /// A short run (seconds), as CI runs it.
    #[arg(long)]
    pub quick: bool,
    /// Check every batch's result against the sequential reference, not only the
    /// first's.
    #[arg(long)]
    pub check: bool,
    /// Print the outcome as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Whether `ranks` outnumber this host's cores (then they share them, and the outcome
/// says so in a note).
///
/// ```
/// assert!(!amrq_apps::oversubscribed(1));
/// ```
pub fn oversubscribed(ranks: usize) -> bool {
    ranks > amrq::util::affinity::host_cores().max(1)
}

/// Runs `rank_main` on the job's ranks wherever it was started (on its own: `--ranks`
/// processes of this host, or threads with `--threads`; under `amrun`, `mpirun` or
/// `srun`, on one host or several: the launcher's ranks), prints the outcome rank 0
/// returns — its text, or its JSON with `--json` — and exits: 0 if every rank
/// succeeded, else 1 naming the failure.
pub fn run_job<F>(o: &Common, mut cfg: amrq::Config, rank_main: F) -> !
where
    F: Fn(Setup) -> Result<Option<Outcome>, AppError> + Sync,
{
    match o.ranks {
        Some(n) => cfg.ranks.set(n),
        None => cfg.ranks.set_default(2),
    }
    if o.threads {
        cfg.threads.set(true);
    }
    let json = o.json;
    cfg.run(|setup| {
        if let Some(out) = rank_main(setup)? {
            match json {
                true => println!("{}", out.json()),
                false => println!("{}", out.text()),
            }
        }
        Ok(())
    })
}

/// Runs `run` on rank 0 while the other ranks wait in a barrier, and returns what it
/// returns there (0 elsewhere): the sequential reference timed in the same run as the
/// parallel code, between its batches, with the cores to itself as far as waiting
/// ranks sleep.
pub fn on_rank_0_alone<S, C: amrq::conduit::Conduit>(
    am: &amrq::am::Am<S, C>,
    run: impl FnOnce() -> f64,
) -> Result<f64, amrq::am::AmError> {
    am.barrier()?;
    let got = if am.rank() == 0 { run() } else { 0.0 };
    am.barrier()?;
    Ok(got)
}

/// The largest of every rank's `v` (every rank gets it).
pub(crate) fn all_max<S, C: amrq::conduit::Conduit>(
    am: &amrq::am::Am<S, C>,
    v: f64,
) -> Result<f64, AppError> {
    let all = am
        .rq()
        .conduit()
        .allgather(v.to_bits())
        .map_err(amrq::am::AmError::from)?;
    Ok(all.into_iter().map(f64::from_bits).fold(f64::MIN, f64::max))
}

/// ns that `f` takes, its result kept from the optimiser: a sequential reference's
/// time.
pub(crate) fn ns_of<T>(f: impl FnOnce() -> T) -> f64 {
    let t = std::time::Instant::now();
    std::hint::black_box(f());
    t.elapsed().as_secs_f64() * 1e9
}

/// Says what went wrong and exits with status 1.
pub fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    std::process::exit(1)
}
