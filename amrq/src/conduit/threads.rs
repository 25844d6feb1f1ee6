//! The `threads` conduit: ranks are threads of one process, all rings in one heap
//! allocation. Same ring code as the `shm` conduit, so tests of the upper layers with
//! many ranks run in one process.

use super::mem::{HeapRegion, MemConduit, RegionLayout, RegionOwner};
use super::ConduitError;
use crate::bootstrap::{Boot, ThreadsBoot};
use std::sync::Arc;

/// One endpoint per rank (index = rank) for `ranks` thread ranks, with one ring size in
/// slots (a power of two) per channel. Move each endpoint to its own thread.
///
/// ```
/// use amrq::conduit::{threads, Conduit};
/// let eps = threads::endpoints(4, &[256, 256]).unwrap();
/// assert_eq!(eps.len(), 4);
/// assert_eq!(eps[3].rank(), 3);
/// ```
pub fn endpoints(ranks: usize, channel_slots: &[u64]) -> Result<Vec<MemConduit>, ConduitError> {
    let layout = RegionLayout::new(ranks, channel_slots)?;
    let region = Arc::new(HeapRegion::new(layout.total_bytes())?);
    // SAFETY: the region is fresh, zeroed, page-aligned and of the layout's size.
    unsafe { layout.init(region.base()) };
    let boot = Boot::Threads(Arc::new(ThreadsBoot::new(ranks)));
    Ok((0..ranks)
        .map(|rank| {
            // SAFETY: the region is initialised, kept alive by the owner handle, and each
            // rank gets exactly one endpoint.
            unsafe {
                MemConduit::new(
                    rank,
                    &layout,
                    region.base(),
                    RegionOwner::Heap(region.clone()),
                    boot.clone(),
                    ranks,
                )
            }
        })
        .collect())
}
