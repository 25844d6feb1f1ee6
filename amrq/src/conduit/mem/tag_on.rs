//! Tag-On data pools (StarT-Voyager): per (sender → receiver) pair (or per receiver
//! for the senders without an own ring there, see [`PairRings`](crate::conduit::PairRings)),
//! `buffers` blocks of `bytes` bytes at the receiver, each with a flag word on its own
//! cache line. A sender claims a free block (flag 0 → 1), fills it and sends a small
//! frame naming it; the receiver reads the block in place and frees it (flag → 0) when done, which
//! may be long after the frame left the queue.
//!
//! ```text
//! pool: flag 0 (64 B) │ flag 1 │ … │ flag N-1 │ block 0 (bytes) │ block 1 │ … │ block N-1
//! ```

use crate::sync::AtomicU64;
use std::ptr::NonNull;

/// Bytes of one flag (a cache line, so that claims and frees of different blocks do not
/// share lines).
pub const FLAG_BYTES: usize = 64;

/// Bytes of a pool of `buffers` blocks of `bytes` (rounded up to cache lines).
pub const fn pool_bytes(buffers: usize, bytes: usize) -> usize {
    buffers * (FLAG_BYTES + bytes.div_ceil(64) * 64)
}

/// A view of one pool, valid in this process.
///
/// ```
/// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
/// # let layout = RegionLayout::new(2, &spec).unwrap();
/// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
/// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
/// # unsafe { layout.init(region.base()) };
/// // SAFETY: the region is of this layout and outlives the pool.
/// let pool = unsafe { layout.tag_on_pool(region.base(), 1, 0) };
/// let mut cursor = 0;
/// let i = pool.claim(&mut cursor).unwrap(); // the sender takes a block…
/// pool.free(i); // …the receiver gives it back when done
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TagOnPool {
    base: NonNull<u8>,
    buffers: usize,
    bytes: usize,
}

impl TagOnPool {
    /// The pool at `base`.
    ///
    /// # Safety
    /// `base` is 64-byte aligned, valid for `pool_bytes(buffers, bytes)` bytes for as
    /// long as the pool is used, zeroed before first use, and used only as this pool.
    ///
    /// ```
    /// use amrq::conduit::mem::{HeapRegion, TagOnPool};
    /// let mem = HeapRegion::new(4 * (64 + 4096)).unwrap(); // a flag line and a block each
    /// // SAFETY: page aligned (so 64-byte aligned), zeroed, large enough, used only as the pool.
    /// let pool = unsafe { TagOnPool::new(mem.base(), 4, 4096) };
    /// assert_eq!((pool.buffers(), pool.bytes()), (4, 4096));
    /// ```
    pub unsafe fn new(base: NonNull<u8>, buffers: usize, bytes: usize) -> Self {
        Self {
            base,
            buffers,
            bytes,
        }
    }

    /// The pool `k` places after this one, where pools of its shape lie end to end (a
    /// receiver's pools with own rings).
    ///
    /// # Safety
    /// That pool lies inside the memory that holds this one.
    pub(super) unsafe fn after(&self, k: usize) -> Self {
        // SAFETY: the caller's guarantee; each pool is `pool_bytes` long.
        let base = unsafe { self.base.add(k * pool_bytes(self.buffers, self.bytes)) };
        Self { base, ..*self }
    }

    /// Blocks in the pool.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // SAFETY: as in TagOnPool's example.
    /// assert_eq!(unsafe { layout.tag_on_pool(region.base(), 0, 1) }.buffers(), spec.tag_on_buffers);
    /// ```
    pub fn buffers(&self) -> usize {
        self.buffers
    }

    /// Bytes per block.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // SAFETY: as in TagOnPool's example.
    /// assert_eq!(unsafe { layout.tag_on_pool(region.base(), 0, 1) }.bytes(), spec.tag_on_bytes);
    /// ```
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The flag of block `i`: 0 free, 1 in use; `None` past the pool's blocks.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// use std::sync::atomic::Ordering;
    /// // SAFETY: as in TagOnPool's example.
    /// let pool = unsafe { layout.tag_on_pool(region.base(), 1, 0) };
    /// let i = pool.claim(&mut 0).unwrap();
    /// assert_eq!(pool.flag(i).unwrap().load(Ordering::Relaxed), 1); // in use
    /// assert!(pool.flag(pool.buffers()).is_none());
    /// ```
    pub fn flag(&self, i: usize) -> Option<&AtomicU64> {
        (i < self.buffers).then(|| {
            // SAFETY: flags come first, one per 64 bytes, inside the pool (see `new`),
            // and `i < buffers`; they are only accessed atomically.
            unsafe { &*self.base.as_ptr().add(i * FLAG_BYTES).cast::<AtomicU64>() }
        })
    }

    /// The first byte of block `i`; `None` past the pool's blocks.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // SAFETY: as in TagOnPool's example.
    /// let pool = unsafe { layout.tag_on_pool(region.base(), 1, 0) };
    /// let i = pool.claim(&mut 0).unwrap();
    /// let b = pool.block(i).unwrap();
    /// // SAFETY: a claimed block is the sender's to write until a frame names it.
    /// unsafe { b.write(42) };
    /// assert!(pool.block(pool.buffers()).is_none());
    /// ```
    pub fn block(&self, i: usize) -> Option<*mut u8> {
        (i < self.buffers).then(|| {
            let stride = self.bytes.div_ceil(64) * 64;
            // SAFETY: blocks follow the flags inside the pool (see `new`), and
            // `i < buffers`.
            unsafe {
                self.base
                    .as_ptr()
                    .add(self.buffers * FLAG_BYTES + i * stride)
            }
        })
    }

    /// Claims a free block, looking from `*cursor` on (round-robin); `None` if every
    /// block is still in use. Sender side only; senders may share a pool (the shared
    /// pool of a receiver with own rings): a claim is a compare-and-swap.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // SAFETY: as in TagOnPool's example.
    /// let pool = unsafe { layout.tag_on_pool(region.base(), 1, 0) };
    /// let mut cursor = 0;
    /// let claimed: Vec<_> = std::iter::from_fn(|| pool.claim(&mut cursor)).collect();
    /// assert_eq!(claimed.len(), pool.buffers()); // then every block is in use
    /// ```
    pub fn claim(&self, cursor: &mut usize) -> Option<usize> {
        for k in 0..self.buffers {
            let i = (*cursor + k) % self.buffers;
            let Some(flag) = self.flag(i) else {
                continue; // i < buffers always: never taken
            };
            let free = crate::conduit::claims::claim_flag(flag);
            if free {
                *cursor = (i + 1) % self.buffers;
                return Some(i);
            }
        }
        None
    }

    /// Gives back block `i`, claimed but never named by a frame (its frame found the
    /// ring full). Sender side only. An index past the pool names no block: nothing
    /// happens.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // SAFETY: as in TagOnPool's example.
    /// let pool = unsafe { layout.tag_on_pool(region.base(), 1, 0) };
    /// let i = pool.claim(&mut 0).unwrap();
    /// pool.unclaim(i); // its frame found the ring full: the block was never named
    /// assert_eq!(pool.claim(&mut 0), Some(i));
    /// ```
    pub fn unclaim(&self, i: usize) {
        if let Some(f) = self.flag(i) {
            crate::conduit::claims::give_back_flag(f);
        }
    }

    /// Frees block `i` for the sender's next claim. Receiver side only. An index past
    /// the pool names no block: nothing happens.
    ///
    /// ```
    /// # use amrq::conduit::{mem::{HeapRegion, RegionLayout}, ChannelSpec, ConduitSpec};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(64).shared(true)]);
    /// # let layout = RegionLayout::new(2, &spec).unwrap();
    /// # let region = HeapRegion::new(layout.total_bytes()).unwrap();
    /// # // SAFETY: fresh, zeroed, page-aligned memory of the layout's size.
    /// # unsafe { layout.init(region.base()) };
    /// // SAFETY: as in TagOnPool's example.
    /// let pool = unsafe { layout.tag_on_pool(region.base(), 1, 0) };
    /// let i = pool.claim(&mut 0).unwrap();
    /// pool.free(i);
    /// pool.free(usize::MAX); // names no block: nothing happens
    /// ```
    pub fn free(&self, i: usize) {
        if let Some(f) = self.flag(i) {
            crate::conduit::claims::free_flag(f);
        }
    }
}
