//! One-sided operations of the ring conduit: every rank's registered segment is mapped
//! in every rank, so a put or get is one copy by the calling core (the T3D's and
//! StarT-Voyager's DMA, done by the CPU) and a remote atomic is the processor's own on
//! the target's word. Each completes before it returns ([`Started::Done`]).

use super::MemConduit;
use crate::conduit::{AtomicOp, ConduitError, Rank, Started};
use std::sync::atomic::AtomicU64;

impl MemConduit {
    /// `len` bytes at `offset` of `rank`'s segment, as mapped here, checked inside it.
    #[inline(always)]
    fn mapped_range(&self, rank: Rank, offset: usize, len: usize) -> Result<*mut u8, ConduitError> {
        let Some(base) = self.segments.get(rank) else {
            return Err(ConduitError::NoSuchRank {
                rank,
                size: self.size,
            });
        };
        self.in_segment(rank, offset, len)?;
        // SAFETY: offset + len ≤ the segment's length (checked above).
        Ok(unsafe { base.as_ptr().add(offset) })
    }

    /// Copies `data` into `dest`'s segment at `offset`.
    #[inline(always)]
    pub(super) fn put_now(
        &self,
        dest: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<Started, ConduitError> {
        let to = self.mapped_range(dest, offset, data.len())?;
        // SAFETY: `to` is valid for `data.len()` bytes (checked) and cannot overlap
        // `data`, a borrowed Rust slice. Other ranks writing the same bytes at the same
        // time is the program's protocol, as with any RMA.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        Ok(Started::Done(0))
    }

    /// Copies `len` bytes of `src`'s segment at `offset` to `buf`.
    ///
    /// # Safety
    /// `buf` is valid for writes of `len` bytes.
    #[inline(always)]
    pub(super) unsafe fn get_now(
        &self,
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        let from = self.mapped_range(src, offset, len)?;
        // SAFETY: `from` is valid for `len` bytes (checked), `buf` by the caller's
        // contract; a segment never overlaps the caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(from, buf, len) };
        Ok(Started::Done(0))
    }

    /// Applies `op` to the u64 at `offset` of `dest`'s segment.
    #[inline(always)]
    pub(super) fn atomic_now(
        &self,
        dest: Rank,
        offset: usize,
        op: AtomicOp,
    ) -> Result<Started, ConduitError> {
        let p = self.mapped_range(dest, offset, 8)?;
        if offset % 8 != 0 {
            return Err(ConduitError::Misaligned { offset });
        }
        // SAFETY: 8 bytes inside a page-aligned segment at an 8-aligned offset, mapped
        // for as long as this endpoint lives; every rank accesses remote words used as
        // atomics atomically (the program's protocol).
        let word = unsafe { &*p.cast::<AtomicU64>() };
        Ok(Started::Done(op.apply(word)))
    }
}
