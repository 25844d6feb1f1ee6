//! One-sided operations of the ring conduit: every rank's registered segment is mapped
//! in every rank, so a put or get is one copy by the calling core (the T3D's and
//! StarT-Voyager's DMA, done by the CPU) and a remote atomic is the processor's own on
//! the target's word. Each completes before it returns ([`Started::Done`]).

use super::MemConduit;
use crate::conduit::{AtomicOp, Conduit, ConduitError, Rank, Started};
use std::marker::PhantomData;
use std::ptr::NonNull;
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
        let Some(&base) = self.segments.get(rank) else {
            return self.unmapped(rank);
        };
        in_segment(self.segment_bytes, rank, offset, len)?;
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
        in_segment(self.segment_bytes, rank, offset, len)
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
        // SAFETY: 8 bytes inside a segment mapped for as long as this endpoint lives.
        unsafe { atomic_at(p, offset, op) }.map(Started::Done)
    }

    /// The job's segments as mapped here, for another thread of this rank to put, get
    /// and apply atomics with. [`ConduitError::Unsupported`] on an endpoint that reaches
    /// some ranks over a network (a job across hosts), whose operations its own thread
    /// makes.
    ///
    /// ```
    /// use amrq::conduit::{threads, AtomicOp};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// let seg = eps[0].segments_view().unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| seg.put(1, 8, b"by a thread").unwrap());
    /// });
    /// let mut back = [0u8; 11];
    /// eps[1].segments_view().unwrap().get(1, 8, &mut back).unwrap();
    /// assert_eq!(&back, b"by a thread");
    /// assert_eq!(seg.atomic(1, 0, AtomicOp::FetchAdd(2)).unwrap(), 0);
    /// ```
    pub fn segments_view(&self) -> Result<Segments<'_>, ConduitError> {
        if self.across.is_some() {
            return Err(ConduitError::Unsupported {
                what: "the segments of a job across hosts for a thread other than the rank's",
            });
        }
        Ok(Segments {
            bases: self.segments.clone(),
            bytes: self.segment_bytes,
            endpoint: PhantomData,
        })
    }
}

/// [`ConduitError::OutOfSegment`] unless `len` bytes at `offset` fit a segment of
/// `bytes` (every rank's segment has the job's size).
#[inline(always)]
pub(super) fn in_segment(
    bytes: usize,
    rank: Rank,
    offset: usize,
    len: usize,
) -> Result<(), ConduitError> {
    if offset.checked_add(len).is_none_or(|end| end > bytes) {
        return Err(ConduitError::OutOfSegment {
            rank,
            offset,
            len,
            segment_bytes: bytes,
        });
    }
    Ok(())
}

/// Applies `op` to the word at `p`, `offset` into a segment: [`ConduitError::Misaligned`]
/// unless `offset` is a multiple of 8.
///
/// # Safety
/// `p` points to 8 bytes inside a page-aligned segment that stays mapped meanwhile.
#[inline(always)]
unsafe fn atomic_at(p: *mut u8, offset: usize, op: AtomicOp) -> Result<u64, ConduitError> {
    if !offset.is_multiple_of(8) {
        return Err(ConduitError::Misaligned { offset });
    }
    // SAFETY: 8 bytes at an 8-aligned offset of a page-aligned segment, mapped (the
    // caller's contract); every rank accesses remote words used as atomics atomically
    // (the program's protocol).
    let word = unsafe { &*p.cast::<AtomicU64>() };
    Ok(op.apply(word))
}

/// Every rank's segment as mapped in this process, for any thread of this rank: put,
/// get and atomics are copies and processor atomics, as the endpoint's own
/// ([`MemConduit::segments_view`]). `Send` and `Sync`: it holds only addresses that the
/// endpoint it borrows keeps mapped, and every operation is one a rank of another
/// process may make at the same time.
#[derive(Clone)]
pub struct Segments<'a> {
    bases: Box<[NonNull<u8>]>,
    bytes: usize,
    endpoint: PhantomData<&'a MemConduit>,
}

// SAFETY: the segments stay mapped for `'a` (the endpoint borrowed owns them); the
// view writes them only by copies and atomics, which ranks in other processes make
// concurrently too (the program's protocol orders plain bytes, as with any RMA).
unsafe impl Send for Segments<'_> {}
// SAFETY: as for `Send`: `&self` methods only, and no state of the view's own changes.
unsafe impl Sync for Segments<'_> {}

impl Segments<'_> {
    /// `len` bytes at `offset` of `rank`'s segment, checked inside it.
    #[inline(always)]
    fn range(&self, rank: Rank, offset: usize, len: usize) -> Result<*mut u8, ConduitError> {
        let Some(&base) = self.bases.get(rank) else {
            return Err(ConduitError::NoSuchRank {
                rank,
                size: self.bases.len(),
            });
        };
        in_segment(self.bytes, rank, offset, len)?;
        // SAFETY: offset + len ≤ the segment's length (checked above).
        Ok(unsafe { base.as_ptr().add(offset) })
    }

    /// Copies `data` to `offset` of `rank`'s segment.
    ///
    /// ```
    /// use amrq::conduit::threads;
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// let seg = eps[0].segments_view().unwrap();
    /// seg.put(0, 0, &[7; 4]).unwrap();
    /// assert!(seg.put(0, usize::MAX - 2, &[7; 4]).is_err()); // past the segment's end
    /// ```
    pub fn put(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), ConduitError> {
        let to = self.range(rank, offset, data.len())?;
        // SAFETY: `to` is valid for `data.len()` bytes (checked) and cannot overlap
        // `data`, a borrowed Rust slice; other writers of the same bytes are the
        // program's protocol, as with any RMA.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        Ok(())
    }

    /// Copies `buf.len()` bytes at `offset` of `rank`'s segment into `buf`.
    ///
    /// ```
    /// use amrq::conduit::threads;
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// let seg = eps[1].segments_view().unwrap();
    /// seg.put(0, 4, b"abc").unwrap();
    /// let mut got = [0u8; 3];
    /// seg.get(0, 4, &mut got).unwrap();
    /// assert_eq!(&got, b"abc");
    /// ```
    pub fn get(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), ConduitError> {
        let from = self.range(rank, offset, buf.len())?;
        // SAFETY: `from` is valid for `buf.len()` bytes (checked); a segment never
        // overlaps a caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(from, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// Applies `op` to the u64 at `offset` (8-byte aligned) of `rank`'s segment and
    /// returns the value before, atomically against every rank's and thread's atomics.
    ///
    /// ```
    /// use amrq::conduit::{threads, AtomicOp};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// let seg = eps[0].segments_view().unwrap();
    /// assert_eq!(seg.atomic(0, 8, AtomicOp::FetchAdd(5)).unwrap(), 0);
    /// assert_eq!(seg.atomic(0, 8, AtomicOp::Load).unwrap(), 5);
    /// assert!(seg.atomic(0, 4, AtomicOp::Load).is_err()); // not 8-byte aligned
    /// ```
    pub fn atomic(&self, rank: Rank, offset: usize, op: AtomicOp) -> Result<u64, ConduitError> {
        let p = self.range(rank, offset, 8)?;
        // SAFETY: 8 bytes inside a segment the borrowed endpoint keeps mapped.
        unsafe { atomic_at(p, offset, op) }
    }
}
