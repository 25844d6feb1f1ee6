//! One-sided operations of the ring conduit: every rank's registered segment is mapped
//! in every rank, so a put or get is one copy by the calling core (the T3D's and
//! StarT-Voyager's DMA, done by the CPU) and a remote atomic is the processor's own on
//! the target's word. Each completes before it returns ([`Started::Done`]).

use super::MemConduit;
use crate::conduit::{AtomicOp, Conduit, ConduitError, Rank, Started};
use std::sync::atomic::AtomicU64;

impl MemConduit {
    /// `len` bytes at `offset` of `rank`'s segment, as mapped here, checked inside it;
    /// `Ok(None)` if it is not mapped here (a front's calls go to its cluster).
    #[inline(always)]
    fn mapped_range(
        &self,
        rank: Rank,
        offset: usize,
        len: usize,
    ) -> Result<Option<*mut u8>, ConduitError> {
        let Some(base) = self.segments.get(rank) else {
            return self.unmapped(rank);
        };
        self.in_segment(rank, offset, len)?;
        // SAFETY: offset + len ≤ the segment's length (checked above).
        Ok(Some(unsafe { base.as_ptr().add(offset) }))
    }

    /// [`Self::mapped_range`] of a rank whose segment is not mapped here: a front's
    /// operation goes to its cluster (`Ok(None)`); otherwise there is no such rank.
    #[cold]
    fn unmapped(&self, rank: Rank) -> Result<Option<*mut u8>, ConduitError> {
        match self.across {
            Some(_) => Ok(None),
            None => Err(ConduitError::NoSuchRank {
                rank,
                size: self.size,
            }),
        }
    }

    /// The cluster of a front: an unmapped segment's operations go there.
    #[cold]
    fn cluster(&self) -> &crate::conduit::cluster::ClusterConduit {
        match &self.across {
            Some(a) => &a.cluster,
            None => unreachable!("`unmapped` answers Ok(None) only for a front"),
        }
    }

    /// [`ConduitError::OutOfSegment`] unless `len` bytes at `offset` fit a segment (every
    /// rank's segment has the job's size).
    #[inline(always)]
    pub(crate) fn in_segment(
        &self,
        rank: Rank,
        offset: usize,
        len: usize,
    ) -> Result<(), ConduitError> {
        if offset
            .checked_add(len)
            .is_none_or(|end| end > self.segment_bytes)
        {
            return Err(ConduitError::OutOfSegment {
                rank,
                offset,
                len,
                segment_bytes: self.segment_bytes,
            });
        }
        Ok(())
    }

    /// Copies `data` into `dest`'s segment at `offset`.
    #[inline(always)]
    pub(super) fn put_now(
        &self,
        dest: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<Started, ConduitError> {
        let Some(to) = self.mapped_range(dest, offset, data.len())? else {
            return self.cluster().put_nb(dest, offset, data);
        };
        // SAFETY: `to` is valid for `data.len()` bytes (checked) and cannot overlap
        // `data`, a borrowed Rust slice. Other ranks writing the same bytes at the same
        // time is the program's protocol, as with any RMA.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        Ok(Started::Done(0))
    }

    /// [`MemConduit::put_now`] of bytes the caller keeps until the operation is over:
    /// a mapped segment takes a copy now, a front's network may send from `data`.
    ///
    /// # Safety
    /// As [`Conduit::put_nb_borrowed`](crate::conduit::Conduit::put_nb_borrowed).
    pub(super) unsafe fn put_borrowed(
        &self,
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        let Some(to) = self.mapped_range(dest, offset, len)? else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.cluster().put_nb_borrowed(dest, offset, data, len) };
        };
        // SAFETY: `to` is valid for `len` bytes (checked) and `data` for `len` bytes
        // (the caller's contract); a segment never overlaps a caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(data, to, len) };
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
        let Some(from) = self.mapped_range(src, offset, len)? else {
            // SAFETY: the caller's contract on `buf`, passed on.
            return unsafe { self.cluster().get_nb(src, offset, buf, len) };
        };
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
        let Some(p) = self.mapped_range(dest, offset, 8)? else {
            return self.cluster().atomic_nb(dest, offset, op);
        };
        if !offset.is_multiple_of(8) {
            return Err(ConduitError::Misaligned { offset });
        }
        // SAFETY: 8 bytes inside a page-aligned segment at an 8-aligned offset, mapped
        // for as long as this endpoint lives; every rank accesses remote words used as
        // atomics atomically (the program's protocol).
        let word = unsafe { &*p.cast::<AtomicU64>() };
        Ok(Started::Done(op.apply(word)))
    }
}
