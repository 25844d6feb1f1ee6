//! The `shm` conduit: ranks are processes of one host. One job-private shared memory
//! object without a name (see [`crate::bootstrap::shm`] for how the ranks meet and
//! receive it) holds every rank's receive rings and every rank's registered segment,
//! mapped by every rank. The rings are those of [`super::mem`]: the same code as the
//! `threads` conduit, at a different address in each process (offsets only inside).
//!
//! ```text
//!   0 ┌ bootstrap block (header, pids, gather slots) ┐ block_bytes(ranks)
//!   B ├ ring region (RegionLayout)                    ┤ rounded up to 4 KiB
//!   S ├ segment of rank 0                             ┤ segment_bytes each
//!     ├ segment of rank 1 …                           ┤
//!     └───────────────────────────────────────────────┘
//! ```

use super::mem::{MemConduit, Parts, RegionLayout, RegionOwner};
use super::{ConduitError, ConduitSpec};
use crate::bootstrap::env::Place;
use crate::bootstrap::shm::{block_bytes, JobSpec};
use crate::bootstrap::{Boot, ShmJob};
use std::sync::Arc;
use std::time::Duration;

const PAGE: usize = 4096;

/// Bytes of the conduit's part of the object, and where the segments start in it.
fn sizes(
    ranks: usize,
    spec: &ConduitSpec,
) -> Result<(RegionLayout, usize, usize, usize), ConduitError> {
    let layout = RegionLayout::new(ranks, spec)?;
    let rings = layout.total_bytes().div_ceil(PAGE) * PAGE;
    let seg = spec.segment_bytes.div_ceil(PAGE) * PAGE;
    let user = seg
        .checked_mul(ranks)
        .and_then(|s| s.checked_add(rings))
        .ok_or_else(|| ConduitError::Setup("job size overflows".into()))?;
    Ok((layout, rings, seg, user))
}

/// The shared memory a job of `ranks` ranks maps with `spec`, in bytes, and its parts:
/// `(total, bootstrap block, rings, segments)`.
///
/// ```
/// use amrq::conduit::{shm, ChannelSpec, ConduitSpec};
/// let spec = ConduitSpec { segment_bytes: 1 << 20, ..ConduitSpec::new(vec![ChannelSpec::new(256)]) };
/// let (total, block, rings, segs) = shm::job_bytes(2, &spec).unwrap();
/// assert_eq!(total, block + rings + segs);
/// assert_eq!(segs, 2 << 20);
/// ```
pub fn job_bytes(
    ranks: usize,
    spec: &ConduitSpec,
) -> Result<(usize, usize, usize, usize), ConduitError> {
    let (_, rings, seg, user) = sizes(ranks, spec)?;
    let block = block_bytes(ranks);
    Ok((block + user, block, rings, seg * ranks))
}

/// A digest of what every rank of a job must agree on ([`ConduitSpec::agreement`],
/// and the segment size as rounded here), FNV-1a: ranks that bring different specs
/// must not share one object.
pub(crate) fn digest(spec: &ConduitSpec, seg: usize) -> u64 {
    let text = format!("{}{seg}", spec.agreement());
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |d, b| {
        (d ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Joins the job `place` on this host: creates (rank 0) or receives its shared memory
/// and returns this rank's endpoint. Collective: every rank of the job calls it with
/// the same `spec`; `timeout` (the attach timeout) bounds the wait for the others.
///
/// ```
/// # use amrq::bootstrap::{env::Place, JobKey};
/// # let place = Place {
/// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()),
/// #     key: JobKey::random().unwrap(), launcher: "doc", host: "localhost".into(), rendezvous: None,
/// # };
/// use amrq::conduit::{shm, ChannelSpec, Conduit, ConduitSpec};
/// use std::time::Duration;
/// // A job of one rank on this host: rank 0 creates the shared memory (others would join).
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16)]);
/// let c = shm::attach(&place, &spec, Duration::from_secs(10)).unwrap();
/// assert_eq!((c.rank(), c.size()), (0, 1));
/// ```
pub fn attach(
    place: &Place,
    spec: &ConduitSpec,
    timeout: Duration,
) -> Result<MemConduit, ConduitError> {
    let (rank, size) = (place.rank, place.size);
    let (layout, rings, seg, user) = sizes(size, spec)?;
    let job_spec = JobSpec {
        rank,
        size,
        id: place.id.clone(),
        key: place.key,
        user_bytes: user,
        digest: digest(spec, seg),
        agreement: spec.agreement(),
        timeout,
        remedy: format!(
            "{} ({} MiB of segment per rank, {size} ranks)",
            spec.remedy,
            seg >> 20
        ),
    };
    let job = ShmJob::start(&job_spec, |base| {
        // SAFETY: `base` is the start of `user` fresh zeroed bytes that only rank 0 sees yet;
        // the object is page aligned, so the ring region is 128-byte aligned.
        unsafe { layout.init(base) }
    })?;
    let job = Arc::new(job);
    let base = job.user_base();
    let segment = |r: usize| {
        // SAFETY: segments lie inside the conduit's part of the mapping (`sizes`).
        unsafe { base.add(rings + r * seg) }
    };
    let segments = (0..size).map(segment).collect();
    // SAFETY: the ring region was initialised by rank 0 before `ready`; the mapping is
    // kept alive by the owner handle; this process has one endpoint for `rank`.
    Ok(unsafe {
        MemConduit::new(Parts {
            rank,
            ranks: size,
            spec,
            layout: &layout,
            rings: base,
            segments,
            segment_bytes: seg,
            owner: RegionOwner::Shm(job.clone()),
            boot: Boot::Shm(job),
        })
    })
}
