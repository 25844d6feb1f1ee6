//! The `threads` conduit: ranks are threads of one process, all rings in one heap
//! allocation. Same ring code as the `shm` conduit, so tests of the upper layers with
//! many ranks run in one process.

use super::mem::{HeapRegion, MemConduit, Parts, RegionLayout, RegionOwner};
use super::{ChannelSpec, ConduitError, ConduitSpec};
use crate::bootstrap::{Boot, ThreadsBoot};
use std::sync::Arc;

/// One endpoint per rank (index = rank) for `ranks` thread ranks, with one polled
/// channel per ring size in `channel_slots` (a power of two) and the other sizes of
/// [`ConduitSpec::new`] (a 64 KiB registered segment per rank). Move each endpoint to
/// its own thread.
///
/// ```
/// use amrq::conduit::{threads, Conduit};
/// let eps = threads::endpoints(4, &[256, 256]).unwrap();
/// assert_eq!(eps.len(), 4);
/// assert_eq!(eps[3].rank(), 3);
/// ```
pub fn endpoints(ranks: usize, channel_slots: &[u64]) -> Result<Vec<MemConduit>, ConduitError> {
    let channels = channel_slots.iter().map(|&s| ChannelSpec::new(s)).collect();
    endpoints_for(ranks, &ConduitSpec::new(channels))
}

/// The endpoints of a job of `ranks` ranks with `spec`'s channels and registered
/// segments (heap memory, zeroed lazily by the kernel).
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec};
/// let spec = ConduitSpec {
///     segment_bytes: 1 << 20,
///     ..ConduitSpec::new(vec![ChannelSpec::new(64).shared(true)])
/// };
/// let eps = threads::endpoints_for(3, &spec).unwrap();
/// assert_eq!(eps[2].caps().segment_bytes, 1 << 20);
/// assert!(eps[2].caps().channels[0].shared);
/// ```
pub fn endpoints_for(ranks: usize, spec: &ConduitSpec) -> Result<Vec<MemConduit>, ConduitError> {
    let layout = RegionLayout::new(ranks, spec)?;
    let region = Arc::new(HeapRegion::new(layout.total_bytes())?);
    // SAFETY: the region is fresh, zeroed, page-aligned and of the layout's size.
    unsafe { layout.init(region.base()) };
    let segments: Arc<[HeapRegion]> = (0..ranks)
        .map(|_| HeapRegion::new(spec.segment_bytes))
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
                    spec,
                    layout: &layout,
                    rings: region.base(),
                    segments: segments.iter().map(HeapRegion::base).collect(),
                    segment_bytes: spec.segment_bytes,
                    owner: RegionOwner::Heap(region.clone(), segments.clone()),
                    boot: boot.clone(),
                })
            }
        })
        .collect())
}
