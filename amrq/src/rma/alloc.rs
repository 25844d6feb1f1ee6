//! Allocation in this rank's registered segment: local, or symmetric (the same offset
//! on every rank).

use super::{Rma, RmaError};
use crate::conduit::Conduit;

impl<S, C: Conduit> Rma<S, C> {
    /// `len` bytes at alignment `align` (a power of two) in this rank's segment, for
    /// its own use (others may still put and get there once told the offset).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     // Not collective: each rank as it likes; tell peers the offset if they need it.
    ///     let mine = rma.alloc_local(100 * (am.rank() + 1), 64)?;
    ///     assert_eq!(mine % 64, 0);
    ///     rma.free(mine)?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn alloc_local(&self, len: usize, align: usize) -> Result<usize, RmaError> {
        if !align.is_power_of_two() {
            return Err(RmaError::BadAlignment { align });
        }
        let mut a = self.am.segment_allocator().borrow_mut();
        a.alloc_local(len, align).ok_or(RmaError::OutOfMemory {
            len,
            free: a.free_bytes(),
        })
    }

    /// Collective: `len` bytes at alignment `align` at the same offset in every rank's
    /// segment (a spread array's home). Every rank calls it, with the same arguments, in
    /// the same order as its other symmetric allocations; [`RmaError::NotSymmetric`] on
    /// every rank if any had no room.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let offsets = amrq::Config::new().threads(3, |setup| -> amrq::Result<usize> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     Ok(rma.alloc_symmetric(4096, 128)?) // every rank, same calls, same order
    /// })
    /// .unwrap();
    /// assert!(offsets.windows(2).all(|w| w[0] == w[1])); // the same offset everywhere
    /// ```
    pub fn alloc_symmetric(&self, len: usize, align: usize) -> Result<usize, RmaError> {
        self.symmetric(len, align).map(|(at, _)| at)
    }

    /// Collective: [`Rma::alloc_symmetric`], zeroed on this rank. Only the bytes an
    /// earlier allocation may have written are written: the rest of a segment is as
    /// the conduit made it, zero, so a large allocation costs no page until it is used.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(64, 8)?;
    ///     rma.put(am.rank(), at, &[7; 64])?;
    ///     rma.free(at)?;
    ///     let again = rma.alloc_symmetric_zeroed(1 << 20, 8)?; // over the 7s, and beyond
    ///     let mut seen = vec![1u8; 128];
    ///     rma.get(am.rank(), again, &mut seen)?;
    ///     assert!(seen.iter().all(|&b| b == 0));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn alloc_symmetric_zeroed(&self, len: usize, align: usize) -> Result<usize, RmaError> {
        let (at, used) = self.symmetric(len, align)?;
        if !used.is_empty() {
            self.put(self.am.rank(), used.start, &vec![0; used.len()])?;
        }
        Ok(at)
    }

    /// A symmetric allocation, and the part of it an earlier one may have written.
    fn symmetric(
        &self,
        len: usize,
        align: usize,
    ) -> Result<(usize, std::ops::Range<usize>), RmaError> {
        if !align.is_power_of_two() {
            return Err(RmaError::BadAlignment { align });
        }
        // The offsets are compared by the bootstrap's all-gather, which serves no AM
        // traffic: first let every rank finish what it waits for (an operation through
        // frames needs its target to serve it).
        self.am.barrier()?;
        let mine = self
            .am
            .segment_allocator()
            .borrow_mut()
            .alloc_symmetric_fresh(len, align);
        let all = self
            .am
            .rq()
            .conduit()
            .allgather(mine.as_ref().map_or(u64::MAX, |(o, _)| *o as u64))?;
        if let Some(rank) = (0..all.len()).find(|&r| all[r] == u64::MAX || all[r] != all[0]) {
            if let Some((off, _)) = mine {
                let _ = self.am.segment_allocator().borrow_mut().free(off);
            }
            return Err(RmaError::NotSymmetric { len, rank });
        }
        Ok(mine.unwrap_or((all[0] as usize, 0..0)))
    }

    /// Frees an allocation of this rank ([`Rma::alloc_local`], or its share of a
    /// symmetric one: free those on every rank, in the same order).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_local(64, 8)?;
    ///     rma.free(at)?;
    ///     assert!(rma.free(at).is_err()); // not allocated any more
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn free(&self, offset: usize) -> Result<(), RmaError> {
        self.am
            .segment_allocator()
            .borrow_mut()
            .free(offset)
            .map(|_| ())
            .map_err(|offset| RmaError::NotAllocated { offset })
    }
}
