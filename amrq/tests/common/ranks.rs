//! Jobs whose ranks the layer tests drive through a conduit endpoint of their own (a
//! program's job starts through `Config::run` / `Config::join` / `Config::threads`; these
//! tests build the layers on the endpoint themselves): ranks as threads over the
//! `threads` conduit, and a process joining its launcher's job over `shm`.

#![allow(dead_code)]

use amrq::conduit::mem::MemConduit;
use amrq::conduit::{threads, Conduit};
use amrq::Config;

/// Runs `f` on `ranks` endpoints, one thread each, and returns the results in rank
/// order; a rank that panics makes the others' waits end (`PeerDead`), and the job
/// reports the panic.
pub fn run<R: Send>(
    ranks: usize,
    cfg: &Config,
    f: impl Fn(MemConduit) -> R + Sync,
) -> Result<Vec<R>, String> {
    let eps = threads::endpoints_for(ranks, &cfg.conduit_spec()).map_err(|e| e.to_string())?;
    let f = &f;
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = eps
            .into_iter()
            .map(|ep| {
                s.spawn(move || {
                    let (boot, rank) = (ep.boot().clone(), ep.rank());
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ep)));
                    match &out {
                        Ok(_) => boot.mark_left(rank),
                        Err(p) => boot.mark_failed(rank, panic_message(p.as_ref())),
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut results = Vec::with_capacity(ranks);
    for (rank, o) in outcomes.into_iter().enumerate() {
        match o {
            Ok(Ok(r)) => results.push(r),
            Ok(Err(p)) | Err(p) => {
                return Err(format!(
                    "rank {rank} panicked: {}",
                    panic_message(p.as_ref())
                ))
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

/// If a launcher placed this process in a job, its endpoint over the host's shared
/// memory; `Ok(None)` otherwise.
pub fn joined(cfg: &Config) -> Result<Option<MemConduit>, amrq::Error> {
    let Some(place) = amrq::bootstrap::env::detect()? else {
        return Ok(None);
    };
    let spec = cfg.conduit_spec();
    Ok(Some(amrq::conduit::shm::attach(
        &place,
        &spec,
        cfg.attach_timeout.get(),
    )?))
}

/// [`joined`] with the conduit's channels and sizes given directly (a test below the
/// RQ layer), waiting at most `timeout` for the other ranks.
pub fn joined_spec(
    spec: &amrq::conduit::ConduitSpec,
    timeout: std::time::Duration,
) -> Result<Option<MemConduit>, amrq::Error> {
    let Some(place) = amrq::bootstrap::env::detect()? else {
        return Ok(None);
    };
    Ok(Some(amrq::conduit::shm::attach(&place, spec, timeout)?))
}

/// If a launcher placed this process in a job across hosts, its UCX endpoint.
pub fn joined_ucx(
    spec: &amrq::conduit::ConduitSpec,
    timeout: std::time::Duration,
) -> Result<Option<amrq::conduit::ucx::UcxConduit>, amrq::Error> {
    let Some(place) = amrq::bootstrap::env::detect_across_hosts()? else {
        return Ok(None);
    };
    Ok(Some(amrq::conduit::ucx::join(&place, spec, &[], timeout)?))
}

/// If a launcher placed this process in a job across hosts, its cluster endpoint
/// (shared memory inside the host, UCX across).
pub fn joined_cluster(
    spec: &amrq::conduit::ConduitSpec,
    timeout: std::time::Duration,
) -> Result<Option<amrq::conduit::cluster::ClusterConduit>, amrq::Error> {
    let Some(place) = amrq::bootstrap::env::detect_across_hosts()? else {
        return Ok(None);
    };
    Ok(Some(amrq::conduit::cluster::join(
        &place,
        spec,
        &[],
        timeout,
    )?))
}
