//! The `threads` conduit: ranks are threads of one process, all rings in one heap
//! allocation. Same ring code as the `shm` conduit, so tests of the upper layers with
//! many ranks run in one process.

use super::mem::{HeapRegion, MemConduit, Parts, RegionLayout, RegionOwner};
use super::{ConduitError, Senders};
use crate::bootstrap::{Boot, ThreadsBoot};
use std::sync::Arc;

/// One endpoint per rank (index = rank) for `ranks` thread ranks, with one ring size in
/// slots (a power of two) per channel and a small registered segment (64 KiB) per rank.
/// Move each endpoint to its own thread.
///
/// ```
/// use amrq::conduit::{threads, Conduit};
/// let eps = threads::endpoints(4, &[256, 256]).unwrap();
/// assert_eq!(eps.len(), 4);
/// assert_eq!(eps[3].rank(), 3);
/// ```
pub fn endpoints(ranks: usize, channel_slots: &[u64]) -> Result<Vec<MemConduit>, ConduitError> {
    let senders = vec![Senders::All; channel_slots.len()];
    let plain = vec![false; channel_slots.len()];
    let d = crate::Config::default();
    endpoints_with(
        ranks,
        (channel_slots, &plain),
        &senders,
        (&plain, &plain),
        (d.tag_on_buffers, d.tag_on_bytes),
        64 << 10,
    )
}

/// The endpoints of a job with `config`'s queues and registered segments (heap memory,
/// zeroed lazily by the allocator).
pub fn endpoints_for(
    ranks: usize,
    config: &crate::Config,
) -> Result<Vec<MemConduit>, ConduitError> {
    config.check().map_err(ConduitError::Setup)?;
    endpoints_with(
        ranks,
        (&config.channel_slots(), &config.channel_shared()),
        &config.channel_senders(),
        (&config.channel_notify(), &config.channel_interrupt()),
        (config.tag_on_buffers, config.tag_on_bytes),
        config.segment_bytes,
    )
}

/// `(channel_slots, shared)`: each channel's ring size and whether its senders share
/// one ring per receiver.
fn endpoints_with(
    ranks: usize,
    (channel_slots, shared): (&[u64], &[bool]),
    senders: &[Senders],
    (notify, interrupt): (&[bool], &[bool]),
    (tag_on_buffers, tag_on_bytes): (usize, usize),
    segment_bytes: usize,
) -> Result<Vec<MemConduit>, ConduitError> {
    let layout =
        RegionLayout::with_shared(ranks, channel_slots, shared, tag_on_buffers, tag_on_bytes)?;
    let region = Arc::new(HeapRegion::new(layout.total_bytes())?);
    // SAFETY: the region is fresh, zeroed, page-aligned and of the layout's size.
    unsafe { layout.init(region.base()) };
    let segments: Arc<[HeapRegion]> = (0..ranks)
        .map(|_| HeapRegion::new(segment_bytes))
        .collect::<Result<Vec<_>, _>>()?
        .into();
    let boot = Boot::Threads(Arc::new(ThreadsBoot::new(ranks)));
    Ok((0..ranks)
        .map(|rank| {
            // SAFETY: the region is initialised, segments are `segment_bytes` long, both
            // are kept alive by the owner handle, and each rank gets exactly one endpoint.
            unsafe {
                MemConduit::new(Parts {
                    rank,
                    ranks,
                    layout: &layout,
                    rings: region.base(),
                    senders: senders.to_vec(),
                    notify: notify.to_vec(),
                    interrupt: interrupt.to_vec(),
                    segments: segments.iter().map(HeapRegion::base).collect(),
                    segment_bytes,
                    owner: RegionOwner::Heap(region.clone(), segments.clone()),
                    boot: boot.clone(),
                })
            }
        })
        .collect())
}
