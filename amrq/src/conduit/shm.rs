//! The `shm` conduit: ranks are processes of one host. One job-private shared memory
//! object (see [`crate::bootstrap::shm`] for how the ranks meet in it and when its name
//! is unlinked) holds every rank's receive rings and every rank's registered segment,
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
use super::ConduitError;
use crate::bootstrap::shm::{block_bytes, JobSpec};
use crate::bootstrap::{Boot, JobKey, ShmJob};
use crate::Config;
use std::sync::Arc;
use std::time::Duration;

const PAGE: usize = 4096;

/// Bytes of the conduit's part of the object, and where the segments start in it.
fn sizes(ranks: usize, cfg: &Config) -> Result<(RegionLayout, usize, usize, usize), ConduitError> {
    let layout = RegionLayout::with_shared(
        ranks,
        &cfg.channel_slots(),
        &cfg.channel_shared(),
        cfg.tag_on_buffers,
        cfg.tag_on_bytes,
    )?;
    let rings = layout.total_bytes().div_ceil(PAGE) * PAGE;
    let seg = cfg.segment_bytes.div_ceil(PAGE) * PAGE;
    let user = seg
        .checked_mul(ranks)
        .and_then(|s| s.checked_add(rings))
        .ok_or_else(|| ConduitError::Setup("job size overflows".into()))?;
    Ok((layout, rings, seg, user))
}

/// The shared memory a job of `ranks` ranks maps with `cfg`, in bytes, and its parts:
/// `(total, bootstrap block, rings, segments)`.
///
/// ```
/// let (total, block, rings, segs) = amrq::conduit::shm::job_bytes(2, &amrq::Config::default()).unwrap();
/// assert_eq!(total, block + rings + segs);
/// assert_eq!(segs, 2 * (64 << 20));
/// ```
pub fn job_bytes(ranks: usize, cfg: &Config) -> Result<(usize, usize, usize, usize), ConduitError> {
    let (_, rings, seg, user) = sizes(ranks, cfg)?;
    let block = block_bytes(ranks);
    Ok((block + user, block, rings, seg * ranks))
}

/// Joins the job `(rank, size, key)` on this host: creates (rank 0) or attaches to its
/// shared memory and returns this rank's endpoint. Collective: every rank of the job
/// calls it with the same `cfg`; `timeout` bounds the wait for the others.
pub fn attach(
    rank: usize,
    size: usize,
    key: JobKey,
    cfg: &Config,
    timeout: Duration,
) -> Result<MemConduit, ConduitError> {
    cfg.check().map_err(ConduitError::Setup)?;
    let (layout, rings, seg, user) = sizes(size, cfg)?;
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    let senders = format!(
        "{:?}{:?}{:?}{:?}",
        cfg.channel_senders(),
        cfg.channel_notify(),
        cfg.channel_interrupt(),
        cfg.channel_shared()
    );
    for w in cfg
        .channel_slots()
        .into_iter()
        .chain([
            seg as u64,
            cfg.tag_on_buffers as u64,
            cfg.tag_on_bytes as u64,
        ])
        .chain(senders.bytes().map(u64::from))
    {
        digest = (digest ^ w).wrapping_mul(0x0100_0000_01b3);
    }
    let spec = JobSpec {
        rank,
        size,
        key,
        user_bytes: user,
        digest,
        timeout,
        remedy: format!(
            "lower each rank's registered segment with AMRQ_SEGMENT_SIZE (now {} MiB per rank, {size} ranks) or the ring size with AMRQ_RING_SLOTS (now {}), or make /dev/shm larger",
            seg >> 20,
            cfg.am_ring_slots
        ),
    };
    let job = ShmJob::start(&spec, |base| {
        // SAFETY: `base` is the start of `user` fresh zeroed bytes that only rank 0 sees yet;
        // the object is page aligned, so the ring region is 128-byte aligned.
        unsafe { layout.init(base) }
    })?;
    let job = Arc::new(job);
    let base = job.user_base();
    // SAFETY (for the `add`s): segments lie inside the conduit's part (`sizes`).
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
            layout: &layout,
            rings: base,
            senders: cfg.channel_senders(),
            notify: cfg.channel_notify(),
            interrupt: cfg.channel_interrupt(),
            interrupt_channel: cfg.interrupt_channel(),
            segments,
            segment_bytes: seg,
            owner: RegionOwner::Shm(job.clone()),
            boot: Boot::Shm(job),
        })
    })
}
