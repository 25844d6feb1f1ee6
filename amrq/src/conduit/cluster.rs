//! A job across hosts with shared memory inside each host: per destination, the `shm`
//! conduit for ranks of this host and UCX for the others, in one [`Combined`] conduit
//! (like GASNet-EX's PSHM beside its network conduit).
//!
//! # Joining
//!
//! 1. The job forms at rank 0's rendezvous ([`crate::bootstrap::network`]): every rank
//!    learns every rank's host, as its launcher named it (`AMRQ_HOST` from `amrun
//!    --hosts`, `PMIX_HOSTNAME` under `mpirun`, `SLURMD_NODENAME` under `srun`), never
//!    guessed from the kernel (network namespaces share its host name and boot id).
//! 2. The ranks of one host make their shared memory, as a one-host job does
//!    ([`super::shm::attach`]), as a job of their own: id `JOB@HOST`, the same key,
//!    numbered in job-rank order.
//! 3. Each rank opens its UCX endpoint with its segment in that shared memory as the
//!    registered segment, so a Long message or a put lands in the same bytes whichever
//!    half carried it ([`super::ucx::open_on`]).
//! 4. Cards are exchanged through the rendezvous; a rank connects to a peer at its
//!    first message there.
//!
//! Set-up only: on a message's path the [`Combined`] conduit routes by destination
//! (one `match`, no `dyn`), and a wait sleeps on both halves.

use super::combined::Combined;
use super::mem::MemConduit;
use super::ucx::{self, SegmentMemory, UcxConduit};
use super::{Conduit, ConduitError, ConduitSpec, Rank};
use crate::bootstrap::env::Place;
use crate::bootstrap::Boot;
use std::time::Duration;

/// A rank of a job across hosts: `shm` inside its host, UCX to the others.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// # use amrq::bootstrap::{env::Place, JobKey};
/// # let place = Place {
/// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()),
/// #     key: JobKey::random().unwrap(), launcher: "doc", host: "localhost".into(), rendezvous: Some(format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port())),
/// # };
/// use amrq::conduit::cluster::{self, ClusterConduit};
/// let c: ClusterConduit = cluster::join(&place, &spec, &settings, std::time::Duration::from_secs(10)).unwrap();
/// assert_eq!(c.local_ranks(), [0]); // the ranks sharing memory with this one
/// ```
pub type ClusterConduit = Combined<MemConduit, UcxConduit>;

/// Joins the job `place` across hosts (see the module doc).
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// # use amrq::bootstrap::{env::Place, JobKey};
/// # let place = Place {
/// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()),
/// #     key: JobKey::random().unwrap(), launcher: "doc", host: "localhost".into(), rendezvous: Some(format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port())),
/// # };
/// use amrq::conduit::cluster;
/// let c = cluster::join(&place, &spec, &settings, std::time::Duration::from_secs(10)).unwrap();
/// assert_eq!((c.rank(), c.size()), (0, 1));
/// ```
pub fn join(
    place: &Place,
    spec: &ConduitSpec,
    settings: &[(String, String)],
    timeout: Duration,
) -> Result<ClusterConduit, ConduitError> {
    // Before the rendezvous, so that a machine without UCX fails at once, not once
    // every rank has met.
    ucx::available().map_err(|e| ConduitError::NoUcx(e.to_string()))?;
    let job = ucx::form(place, spec, timeout)?;
    let local_ranks: Vec<Rank> = job
        .entries()
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host == place.host)
        .map(|(r, _)| r)
        .collect();
    let here = Place {
        rank: local_ranks
            .iter()
            .position(|&r| r == place.rank)
            .ok_or_else(|| ConduitError::Setup("this rank is not in its host's list".into()))?,
        size: local_ranks.len(),
        id: format!("{}@{}", place.id, place.host),
        rendezvous: None,
        ..place.clone()
    };
    let local = super::shm::attach(&here, &spec.restricted_to(&local_ranks), timeout)?;
    let (base, bytes) = local.segment();
    let Boot::Shm(shared) = local.boot() else {
        unreachable!("the shm conduit's boot is its shared memory job")
    };
    let memory = SegmentMemory::Shared {
        base,
        bytes,
        job: shared.clone(),
    };
    let net_spec = ConduitSpec {
        segment_bytes: bytes,
        ..spec.clone()
    };
    let opened = ucx::open_on(
        place.rank, place.size, &net_spec, settings, memory, &place.key,
    )?;
    let remote = ucx::wire_up(opened, job)?;
    Combined::new(local, remote, local_ranks)
}
