//! SPMD entry points: one closure run on every rank with a Split-C context, as Split-C's
//! `splitc_main` is — as processes (started on its own, by `amrun`, `mpirun` or `srun`)
//! or as threads of one process.

use crate::am::{Am, HandlerTable};
use crate::conduit::mem::MemConduit;
use crate::config::Config;
use crate::rma::Rma;
use crate::splitc::{SplitC, SplitCError};

/// The context a rank's Split-C program gets from the entry points.
///
/// ```
/// use amrq::spmd::Context;
/// use amrq::splitc::SplitCError;
/// // A Split-C program's rank: what `splitc_main` and `splitc_threads` run.
/// fn rank_main(sc: &Context<'_, '_>) -> Result<usize, SplitCError> {
///     sc.barrier()?;
///     Ok(sc.my_proc())
/// }
/// let out = amrq::spmd::splitc_threads(2, &amrq::Config::default(), rank_main).unwrap();
/// assert_eq!(out, [Ok(0), Ok(1)]);
/// ```
pub type Context<'r, 'a> = SplitC<'r, 'a, (), MemConduit>;

/// Runs `rank_main` on one rank's context, with the handlers `register` adds (its
/// result passed on), over the path `config` asks for, and ends with a barrier (no
/// rank leaves while another may still read its memory).
fn on_rank<H, R, E: From<SplitCError>>(
    conduit: MemConduit,
    config: &Config,
    register: impl FnOnce(&mut HandlerTable<()>) -> H,
    rank_main: impl FnOnce(&Context<'_, '_>, H) -> Result<R, E>,
) -> Result<R, E> {
    let mut table = HandlerTable::new();
    let handlers = register(&mut table);
    let am = Am::new(conduit, table, ()).map_err(SplitCError::from)?;
    let rma = Rma::new_or_over_frames(&am, config.splitc_frames);
    let sc = SplitC::new(&rma)?;
    let out = rank_main(&sc, handlers)?;
    sc.barrier()?;
    Ok(out)
}

/// Runs `rank_main` on every rank of a job of `ranks` processes, each with its Split-C
/// context (`MYPROC`, `PROCS`, the operations), and never returns: as
/// [`launch::launch`](crate::launch::launch), started on its own the program starts
/// its ranks, started by `amrun`, `mpirun` or `srun` it is one of them. A rank exits 0
/// when `rank_main` returns `Ok` (after a last barrier), else the job fails naming it.
/// [`Config::splitc_frames`] sends every remote access as AM frames.
///
/// ```no_run
/// use amrq::splitc::Layout;
/// amrq::spmd::splitc_main(4, &amrq::Config::default(), |sc| -> Result<(), amrq::splitc::SplitCError> {
///     let a = sc.all_spread_malloc::<f64>(1000, Layout::Cyclic)?;
///     for i in a.local_indices(sc.my_proc()) {
///         sc.write(a.at(i), i as f64)?;
///     }
///     let mine: f64 = a.local_indices(sc.my_proc()).map(|i| i as f64).sum();
///     let total = sc.all_reduce(mine, amrq::coll::sum)?;
///     if sc.my_proc() == 0 {
///         println!("sum = {total}");
///     }
///     Ok(())
/// });
/// ```
pub fn splitc_main<E, F>(ranks: usize, config: &Config, rank_main: F) -> !
where
    E: std::fmt::Display + From<SplitCError>,
    F: FnOnce(&Context<'_, '_>) -> Result<(), E>,
{
    splitc_main_with(ranks, config, |_| (), |sc, ()| rank_main(sc))
}

/// [`splitc_main`] with handlers of the program's own, for atomic procedures
/// ([`SplitC::atomic`]): every rank calls `register` on its handler table, in the same
/// order so that the ids agree, and `rank_main` gets what it returned (the ids).
///
/// ```no_run
/// use amrq::splitc::{update_local, GlobalPtr, SplitCError};
/// amrq::spmd::splitc_main_with(
///     4,
///     &amrq::Config::default(),
///     |t| {
///         // element += arg 1; answers the element before
///         t.request("add", |_, ctx, m| {
///             let old = update_local(&ctx, m.arg(0)?, |v: u64| v + m.arg(1).unwrap_or(0))?;
///             ctx.reply_value(old)
///         })
///     },
///     |sc, add| -> Result<(), SplitCError> {
///         let at = GlobalPtr::<u64>::new(0, sc.rma().alloc_symmetric(8, 8)?);
///         let before = sc.atomic(add, at, &[1])?; // rank 0 adds atomically
///         sc.barrier()?;
///         if sc.my_proc() == 0 {
///             println!("I came after {before} others; now {}", sc.read(at)?);
///         }
///         Ok(())
///     },
/// );
/// ```
pub fn splitc_main_with<H, E, F>(
    ranks: usize,
    config: &Config,
    register: impl FnOnce(&mut HandlerTable<()>) -> H,
    rank_main: F,
) -> !
where
    E: std::fmt::Display + From<SplitCError>,
    F: FnOnce(&Context<'_, '_>, H) -> Result<(), E>,
{
    crate::launch::launch(ranks, config, |conduit| {
        on_rank(conduit, config, register, rank_main)
    })
}

/// [`splitc_main`] with the ranks as threads of this process (pinned one per core when
/// they fit); returns each rank's result, in rank order.
///
/// ```
/// use amrq::splitc::{Layout, SplitCError};
/// let sums = amrq::spmd::splitc_threads(3, &amrq::Config::default(), |sc| -> Result<u64, SplitCError> {
///     let a = sc.all_spread_malloc::<u64>(30, Layout::BlockCyclic(4))?;
///     for i in a.local_indices(sc.my_proc()) {
///         sc.store(a.at((i + 1) % a.len()), i as u64)?; // into whichever rank holds i + 1
///     }
///     sc.all_store_sync()?;
///     let mine: u64 = a.local_indices(sc.my_proc()).map(|i| sc.read(a.at(i))).sum::<Result<_, _>>()?;
///     sc.all_reduce(mine, amrq::coll::sum)
/// })
/// .unwrap();
/// assert!(sums.into_iter().all(|s| s == Ok(435)));
/// ```
pub fn splitc_threads<R, E, F>(
    ranks: usize,
    config: &Config,
    rank_main: F,
) -> Result<Vec<Result<R, E>>, crate::threads::RunError>
where
    R: Send,
    E: Send + From<SplitCError>,
    F: Fn(&Context<'_, '_>) -> Result<R, E> + Sync,
{
    splitc_threads_with(ranks, config, |_| (), |sc, ()| rank_main(sc))
}

/// [`splitc_threads`] with handlers of the program's own, as [`splitc_main_with`].
///
/// ```
/// use amrq::splitc::{update_local, GlobalPtr, SplitCError};
/// let out = amrq::spmd::splitc_threads_with(
///     3,
///     &amrq::Config::default(),
///     |t| {
///         t.request("inc", |_, ctx, m| {
///             let old = update_local(&ctx, m.arg(0)?, |v: u64| v + 1)?;
///             ctx.reply_value(old)
///         })
///     },
///     |sc, inc| -> Result<u64, SplitCError> {
///         let at = GlobalPtr::<u64>::new(1, sc.rma().alloc_symmetric(8, 8)?);
///         for _ in 0..100 {
///             sc.atomic(inc, at, &[])?; // on rank 1, atomically
///         }
///         sc.barrier()?;
///         sc.read(at)
///     },
/// )
/// .unwrap();
/// assert!(out.into_iter().all(|n| n == Ok(300)));
/// ```
pub fn splitc_threads_with<H, R, E, F>(
    ranks: usize,
    config: &Config,
    register: impl Fn(&mut HandlerTable<()>) -> H + Sync,
    rank_main: F,
) -> Result<Vec<Result<R, E>>, crate::threads::RunError>
where
    R: Send,
    E: Send + From<SplitCError>,
    F: Fn(&Context<'_, '_>, H) -> Result<R, E> + Sync,
{
    crate::threads::run(ranks, config, |conduit| {
        on_rank(conduit, config, &register, &rank_main)
    })
}
