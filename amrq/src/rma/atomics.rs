//! Remote atomics on u64 words of a rank's segment: through the conduit where it
//! offers them, as frames elsewhere.

use super::{frames, rma_error, Pending, Rma, RmaError};
use crate::conduit::{AtomicOp, Conduit, Rank, Started};

impl<S, C: Conduit> Rma<S, C> {
    /// Applies `op` to the u64 at `offset` (8-byte aligned) of `rank`'s segment and
    /// returns the value before; for [`AtomicOp::CompareSwap`], it was stored if that
    /// value equals `current`. Atomic against every other rank's atomics on the word.
    ///
    /// ```
    /// use amrq::{conduit::AtomicOp, prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let flags = rma.alloc_symmetric(8, 8)?;
    ///     am.barrier()?;
    ///     let before = rma.atomic(0, flags, AtomicOp::FetchOr(1 << am.rank()))?;
    ///     assert_eq!(before & (1 << am.rank()), 0);
    ///     am.barrier()?;
    ///     assert_eq!(rma.atomic(0, flags, AtomicOp::Load)?, 0b11);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn atomic(&self, rank: Rank, offset: usize, op: AtomicOp) -> Result<u64, RmaError> {
        if !self.direct_atomics.get() {
            self.word(rank, offset)?;
            let id = frames::atomic(&self.am, rank, offset, op)?;
            return self.collect(Pending::Frames(id), &mut []);
        }
        match self
            .conduit()
            .atomic_nb(rank, offset, op)
            .map_err(rma_error)?
        {
            Started::Done(old) => Ok(old),
            Started::InFlight(t) => self.collect(Pending::Conduit(t), &mut []),
        }
    }

    /// Reads the u64 at `offset` (8-byte aligned) of `rank`'s segment atomically, with
    /// Acquire ordering: what was written before a Release [`Rma::store`] (or any other
    /// remote atomic) of the value read is visible after.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let flag = rma.alloc_symmetric(8, 8)?;
    ///     if am.rank() == 0 {
    ///         rma.store(1, flag, 1)?; // Release: what 0 wrote before is visible with it
    ///     } else {
    ///         while rma.load(1, flag)? == 0 {} // Acquire
    ///     }
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn load(&self, rank: Rank, offset: usize) -> Result<u64, RmaError> {
        self.atomic(rank, offset, AtomicOp::Load)
    }

    /// Writes the u64 at `offset` (8-byte aligned) of `rank`'s segment atomically, with
    /// Release ordering (see [`Rma::load`]).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let w = rma.alloc_symmetric(8, 8)?;
    ///     rma.store(0, w, 99)?;
    ///     assert_eq!(rma.load(0, w)?, 99);
    ///     assert!(rma.store(0, w + 1, 1).is_err()); // not 8-aligned
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn store(&self, rank: Rank, offset: usize, v: u64) -> Result<(), RmaError> {
        self.atomic(rank, offset, AtomicOp::Store(v)).map(drop)
    }

    /// Remote fetch-and-add on a u64; returns the old value.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let tickets = amrq::Config::new().threads(3, |setup| -> amrq::Result<u64> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let counter = rma.alloc_symmetric(8, 8)?;
    ///     am.barrier()?;
    ///     let ticket = rma.fetch_add(0, counter, 1)?;
    ///     am.barrier()?;
    ///     Ok(ticket)
    /// })
    /// .unwrap();
    /// let mut t: Vec<u64> = tickets;
    /// t.sort();
    /// assert_eq!(t, [0, 1, 2]); // each rank a ticket of its own
    /// ```
    pub fn fetch_add(&self, rank: Rank, offset: usize, v: u64) -> Result<u64, RmaError> {
        self.atomic(rank, offset, AtomicOp::FetchAdd(v))
    }

    /// Remote fetch-and-add on an i64; returns the old value.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let w = rma.alloc_symmetric(8, 8)?;
    ///     rma.fetch_add_i64(0, w, -5)?;
    ///     assert_eq!(rma.fetch_add_i64(0, w, 2)?, -5);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn fetch_add_i64(&self, rank: Rank, offset: usize, v: i64) -> Result<i64, RmaError> {
        Ok(self.atomic(rank, offset, AtomicOp::FetchAdd(v as u64))? as i64)
    }

    /// Remote compare-and-swap on a u64; returns the old value (stored `new` if it was
    /// `current`).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let winners = amrq::Config::new().threads(3, |setup| -> amrq::Result<bool> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let lock = rma.alloc_symmetric(8, 8)?;
    ///     am.barrier()?;
    ///     let won = rma.compare_swap(0, lock, 0, am.rank() as u64 + 1)? == 0;
    ///     am.barrier()?;
    ///     Ok(won)
    /// })
    /// .unwrap();
    /// assert_eq!(winners.iter().filter(|&&w| w).count(), 1);
    /// ```
    pub fn compare_swap(
        &self,
        rank: Rank,
        offset: usize,
        current: u64,
        new: u64,
    ) -> Result<u64, RmaError> {
        self.atomic(rank, offset, AtomicOp::CompareSwap { current, new })
    }
}
