//! Running a job whose ranks are threads of this process.

use crate::conduit::mem::MemConduit;
use crate::conduit::{threads, ConduitError};
use crate::util::affinity::{allowed_cores, pin_to_core};
use crate::Config;

/// Why a threads job could not run to the end.
///
/// ```
/// use amrq::{threads::RunError, Config};
/// let out = amrq::threads::run(2, &Config::default(), |c| {
///     use amrq::conduit::Conduit;
///     if c.rank() == 1 {
///         panic!("rank 1 gives up");
///     }
/// });
/// assert!(matches!(out, Err(RunError::RankPanicked { rank: 1, .. })));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The conduit could not be set up.
    #[error(transparent)]
    Setup(#[from] ConduitError),
    /// A rank's closure panicked.
    #[error("rank {rank} panicked: {message}")]
    RankPanicked {
        /// The rank.
        rank: usize,
        /// The panic message.
        message: String,
    },
}

/// Runs `f` once per rank, each on its own thread with its own endpoint, and returns
/// the results in rank order. Ranks are pinned one per core when they fit (rank i on
/// core i); otherwise they float and every wait spins a bounded time, then sleeps.
///
/// If a rank panics, the others see [`ConduitError::PeerDead`] from their next wait
/// instead of waiting forever, and `run` reports the first panic.
///
/// ```
/// let ranks = amrq::threads::run(3, &amrq::Config::default(), |c| {
///     use amrq::conduit::Conduit;
///     c.rank()
/// }).unwrap();
/// assert_eq!(ranks, vec![0, 1, 2]);
/// ```
pub fn run<R, F>(ranks: usize, config: &Config, f: F) -> Result<Vec<R>, RunError>
where
    F: Fn(MemConduit) -> R + Sync,
    R: Send,
{
    let eps = threads::endpoints_for(ranks, &config.conduit_spec())?;
    let pin = ranks <= allowed_cores().len();
    let f = &f;
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = eps
            .into_iter()
            .enumerate()
            .map(|(rank, ep)| {
                std::thread::Builder::new()
                    .name(format!("rank-{rank}"))
                    .spawn_scoped(s, move || {
                        if pin {
                            // Pinning is a performance hint; a refusal is not fatal.
                            let _ = pin_to_core(rank);
                        }
                        let boot = ep.boot().clone();
                        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ep)));
                        match &out {
                            Err(p) => boot.mark_failed(rank, panic_message(p.as_ref())),
                            Ok(_) => boot.mark_left(rank),
                        }
                        out
                    })
            })
            .collect();
        handles.into_iter().map(|h| h.map(|h| h.join())).collect()
    });
    let mut results = Vec::with_capacity(ranks);
    for (rank, o) in outcomes.into_iter().enumerate() {
        match o {
            Ok(Ok(Ok(r))) => results.push(r),
            Ok(Ok(Err(p))) | Ok(Err(p)) => {
                return Err(RunError::RankPanicked {
                    rank,
                    message: panic_message(p.as_ref()),
                })
            }
            Err(e) => {
                return Err(RunError::Setup(ConduitError::Setup(format!(
                    "cannot start the thread of rank {rank}: {e}"
                ))))
            }
        }
    }
    Ok(results)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}
