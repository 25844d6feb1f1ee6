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
    let n = channel_slots.len();
    let d = crate::Config::default();
    endpoints_with(
        ranks,
        &Shape {
            slots: channel_slots.to_vec(),
            shared: vec![false; n],
            senders: vec![Senders::All; n],
            notify: vec![false; n],
            interrupt: vec![false; n],
            interrupt_channel: None,
            tag_on: (d.tag_on_buffers, d.tag_on_bytes),
            segment_bytes: 64 << 10,
        },
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
        &Shape {
            slots: config.channel_slots(),
            shared: config.channel_shared(),
            senders: config.channel_senders(),
            notify: config.channel_notify(),
            interrupt: config.channel_interrupt(),
            interrupt_channel: config.interrupt_channel(),
            tag_on: (config.tag_on_buffers, config.tag_on_bytes),
            segment_bytes: config.segment_bytes,
        },
    )
}

/// What every channel is, and the sizes of the pools and segments.
struct Shape {
    slots: Vec<u64>,
    shared: Vec<bool>,
    senders: Vec<Senders>,
    notify: Vec<bool>,
    interrupt: Vec<bool>,
    interrupt_channel: Option<usize>,
    /// Tag-On blocks per pair, and bytes per block.
    tag_on: (usize, usize),
    segment_bytes: usize,
}

fn endpoints_with(ranks: usize, shape: &Shape) -> Result<Vec<MemConduit>, ConduitError> {
    let (buffers, bytes) = shape.tag_on;
    let layout = RegionLayout::with_shared(ranks, &shape.slots, &shape.shared, buffers, bytes)?;
    let region = Arc::new(HeapRegion::new(layout.total_bytes())?);
    // SAFETY: the region is fresh, zeroed, page-aligned and of the layout's size.
    unsafe { layout.init(region.base()) };
    let segments: Arc<[HeapRegion]> = (0..ranks)
        .map(|_| HeapRegion::new(shape.segment_bytes))
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
                    senders: shape.senders.clone(),
                    notify: shape.notify.clone(),
                    interrupt: shape.interrupt.clone(),
                    interrupt_channel: shape.interrupt_channel,
                    segments: segments.iter().map(HeapRegion::base).collect(),
                    segment_bytes: shape.segment_bytes,
                    owner: RegionOwner::Heap(region.clone(), segments.clone()),
                    boot: boot.clone(),
                })
            }
        })
        .collect())
}
