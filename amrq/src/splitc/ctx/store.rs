//! Signalling stores (Split-C's `:-`): one-way writes the target counts, and the
//! store syncs that wait for them.

use super::SplitC;
use crate::conduit::Conduit;
use crate::rma::Word;
use crate::splitc::{GlobalPtr, SplitCError};
use crate::util::Backoff;
use std::sync::atomic::Ordering;

impl<S, C: Conduit> SplitC<S, C> {
    /// Store (Split-C's `*dst :- v`): writes `v` at `dst` with no reply; the owner
    /// learns of it by counting bytes ([`SplitC::store_sync`],
    /// [`SplitC::all_store_sync`]).
    ///
    /// ```
    /// use amrq::splitc::{Layout, SplitCError};
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let a = sc.all_spread_malloc::<u32>(8, Layout::Cyclic)?;
    ///     for i in 0..8 {
    ///         sc.store(a.at(i), i as u32 * 10)?; // no reply: counted at the owner
    ///     }
    ///     sc.all_store_sync()?; // every store of every rank is in place
    ///     Ok(a.local_indices(sc.my_proc()).map(|i| sc.read(a.at(i))).sum::<Result<u32, _>>()?)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [120, 160]); // rank 0 holds 0, 20, 40, 60
    /// ```
    pub fn store<T: Word>(&self, dst: GlobalPtr<T>, v: T) -> Result<(), SplitCError> {
        self.bulk_store(dst, std::slice::from_ref(&v))
    }

    /// Store of the elements of `src` at `dst` on (Split-C's `bulk_store`).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::splitc::{Layout, SplitC, SplitCError};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<Vec<u64>> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let sc = am.splitc();
    ///     let a = sc.all_spread_malloc::<u64>(9, Layout::BlockCyclic(3))?; // 3 per rank
    ///     let (me, right) = (sc.my_proc(), (sc.my_proc() + 1) % 3);
    ///     sc.bulk_store(a.at(3 * right), &[me as u64; 3])?; // into the right neighbour
    ///     sc.store_sync(24)?; // the left neighbour's 3 words are here
    ///     let mut got = vec![0; 3];
    ///     sc.bulk_read(a.at(3 * me), &mut got)?;
    ///     sc.all_store_sync()?;
    ///     Ok(got)
    /// })
    /// .unwrap();
    /// assert_eq!(out[1], [0, 0, 0]);
    /// ```
    pub fn bulk_store<T: Word>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<(), SplitCError> {
        let bytes = crate::rma::bytes_of(src);
        if self.is_local(dst) {
            self.copy_in(dst.offset(), bytes)?;
            // ORDERING: Release, after the bytes: pairs with the Acquire load of the
            // count in `stored_here`.
            self.own_counter(0)
                .fetch_add(bytes.len() as u64, Ordering::Release);
        } else {
            let (rank, at) = (dst.rank(), dst.offset());
            self.rma().put_counted(rank, at, bytes, self.counters)?;
        }
        self.stored_to.borrow_mut()[dst.rank()] += bytes.len() as u64;
        Ok(())
    }

    /// Waits until `bytes` more bytes have been stored into this rank than earlier
    /// `store_sync`s and `all_store_sync`s accounted for (Split-C's `store_sync`),
    /// serving requests meanwhile.
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = sc.rma().alloc_symmetric(16, 8)?;
    ///     if sc.my_proc() == 0 {
    ///         sc.store(GlobalPtr::<u64>::new(1, at), 1)?;
    ///         sc.store(GlobalPtr::<u64>::new(1, at + 8), 2)?;
    ///     } else {
    ///         sc.store_sync(16)?; // waits until 16 bytes have been stored here
    ///         assert_eq!(sc.read(GlobalPtr::<u64>::new(1, at + 8))?, 2);
    ///     }
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn store_sync(&self, bytes: u64) -> Result<(), SplitCError> {
        let target = self.accounted.get() + bytes;
        self.wait_stored(target)?;
        self.accounted.set(target);
        Ok(())
    }

    /// Collective: returns once every store any rank has made is in place (Split-C's
    /// `all_store_sync`): each rank tells each other how much it has stored there, waits
    /// until that much has arrived, then all meet in a barrier.
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(3, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = sc.rma().alloc_symmetric(8 * 3, 8)?;
    ///     for r in 0..3 {
    ///         sc.store(GlobalPtr::<u64>::new(r, at + 8 * sc.my_proc()), 1)?;
    ///     }
    ///     sc.all_store_sync()?; // a barrier that also waits for every store
    ///     let mut got = [0u64; 3];
    ///     sc.bulk_read(GlobalPtr::new(sc.my_proc(), at), &mut got)?;
    ///     assert_eq!(got, [1, 1, 1]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn all_store_sync(&self) -> Result<(), SplitCError> {
        let me = self.me as u64;
        for (rank, &n) in self.stored_to.borrow().iter().enumerate() {
            let word = self.counters + 8 * (1 + me as usize);
            self.rma().put_slice(rank, word, &[n])?;
        }
        self.barrier()?;
        let expected: u64 = (0..self.procs)
            .map(|r| self.own_counter(1 + r).load(Ordering::Acquire))
            .sum();
        self.wait_stored(expected)?;
        self.accounted.set(expected);
        self.barrier()
    }

    /// Bytes stored into this rank so far, by every rank, both paths.
    fn stored_here(&self) -> u64 {
        // ORDERING: Acquire pairs with the Release (or AcqRel) additions of the count
        // after the bytes: direct stores' atomic add, the store handler's, local ones.
        self.own_counter(0).load(Ordering::Acquire)
    }

    /// Polls until `target` bytes have been stored here. Spins a bounded time, then
    /// yields (a direct store rings no doorbell to sleep on), checking the peers.
    fn wait_stored(&self, target: u64) -> Result<(), SplitCError> {
        let am = self.am();
        let mut backoff = Backoff::new();
        while self.stored_here() < target {
            if am.poll_runtime()? > 0 {
                backoff.reset();
                continue;
            }
            if backoff.is_yielding() {
                am.rq().conduit().check_peers()?;
            }
            backoff.snooze();
        }
        Ok(())
    }
}
