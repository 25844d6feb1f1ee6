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
    let which: Vec<usize> = (0..ranks).collect();
    endpoints_on(spec, &segments(ranks, spec)?, &which)
}

/// The registered segments of `ranks` thread ranks (heap memory, zeroed lazily).
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, ConduitSpec};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16)]);
/// let segs = threads::segments(3, &spec).unwrap();
/// assert_eq!(segs.len(), 3);
/// ```
pub fn segments(ranks: usize, spec: &ConduitSpec) -> Result<Arc<[HeapRegion]>, ConduitError> {
    Ok((0..ranks)
        .map(|_| HeapRegion::new(spec.segment_bytes))
        .collect::<Result<Vec<_>, _>>()?
        .into())
}

/// The endpoints of a job of `which.len()` ranks whose rank `i` registers
/// `segments[which[i]]`: one memory can be the segment of a rank in two jobs, as a
/// rank's shared-memory segment is also registered with its network conduit (the
/// halves of a [`Combined`](super::combined::Combined) conduit).
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16)]);
/// let segs = threads::segments(4, &spec).unwrap();
/// let all = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
/// let pair = threads::endpoints_on(&spec, &segs, &[2, 3]).unwrap();
/// assert_eq!(all[2].segment(), pair[0].segment()); // one memory, two jobs
/// ```
pub fn endpoints_on(
    spec: &ConduitSpec,
    segments: &Arc<[HeapRegion]>,
    which: &[usize],
) -> Result<Vec<MemConduit>, ConduitError> {
    let ranks = which.len();
    if which.iter().any(|&w| w >= segments.len()) {
        return Err(ConduitError::Setup(format!(
            "segments {which:?} asked of {} segments",
            segments.len()
        )));
    }
    let layout = RegionLayout::new(ranks, spec)?;
    let region = Arc::new(HeapRegion::new(layout.total_bytes())?);
    // SAFETY: the region is fresh, zeroed, page-aligned and of the layout's size.
    unsafe { layout.init(region.base()) };
    crate::util::backoff::crowd(ranks);
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
                    segments: which.iter().map(|&w| segments[w].base()).collect(),
                    segment_bytes: spec.segment_bytes,
                    owner: RegionOwner::Heap(region.clone(), segments.clone()),
                    boot: boot.clone(),
                })
            }
        })
        .collect())
}
