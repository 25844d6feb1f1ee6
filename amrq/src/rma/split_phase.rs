//! Split-phase put and get: each with a handle to wait on (`*_nb`), or implicit
//! (`*_nbi`), completed together by `sync_nbi`.

use super::{frames, rma_error, Handle, Pending, Rma, RmaError};
use crate::conduit::{Conduit, Rank};
use std::cell::RefCell;

impl<S, C: Conduit> Rma<S, C> {
    /// Non-blocking [`Rma::put`]: the data has been taken (`data` may be reused) when
    /// it returns; it is in place once the handle is complete.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma(); // through frames the handle has something to wait for
    ///     let at = rma.alloc_symmetric(1024, 8)?;
    ///     if am.rank() == 0 {
    ///         let mut data = vec![5u8; 1024];
    ///         let h = rma.put_nb(1, at, &data)?;
    ///         data.fill(0); // the data was taken: the buffer is ours again
    ///         h.wait()?; // and now it is in place
    ///     }
    ///     am.barrier()?;
    ///     let mut back = [0u8; 1024];
    ///     rma.get(1, at, &mut back)?;
    ///     assert!(back.iter().all(|&b| b == 5));
    ///     am.barrier()?; // rank 1 serves rank 0's get until then
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put_nb(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<Handle<'_, S, C>, RmaError> {
        let op = self.put_start(rank, offset, data, None)?;
        Ok(Handle {
            am: &self.am,
            op,
            out: None,
            settled: RefCell::new(None),
        })
    }

    /// Non-blocking [`Rma::get`]: `buf` holds the data once the handle is complete
    /// (through frames the reply is copied in then; a get a conduit leaves in flight is
    /// completed before this returns).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     rma.store(am.rank(), at, am.rank() as u64 + 100)?;
    ///     am.barrier()?;
    ///     let mut buf = [0u8; 8];
    ///     let h = rma.get_nb(1 - am.rank(), at, &mut buf)?;
    ///     while !h.test() {
    ///         am.poll()?; // serve the peer's get meanwhile (and do other work)
    ///     }
    ///     h.wait()?;
    ///     assert_eq!(u64::from_ne_bytes(buf), 101 - am.rank() as u64);
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_nb<'h>(
        &'h self,
        rank: Rank,
        offset: usize,
        buf: &'h mut [u8],
    ) -> Result<Handle<'h, S, C>, RmaError> {
        let op = match self.get_start(rank, offset, buf)? {
            // The conduit writes `buf` until its get completes: complete it now, as a
            // handle could be forgotten while the write is pending.
            Some(p @ Pending::Conduit(_)) => self.collect(p, &mut []).map(|_| None)?,
            op => op,
        };
        Ok(Handle {
            am: &self.am,
            out: op.is_some().then_some(buf),
            op,
            settled: RefCell::new(None),
        })
    }

    /// Implicit-handle [`Rma::put`]: the data has been taken when it returns, and is in
    /// place after the next [`Rma::sync_nbi`].
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(64, 8)?;
    ///     for i in 0..8 {
    ///         rma.put_nbi(1 - am.rank(), at + 8 * i, &(i as u64).to_ne_bytes())?;
    ///     }
    ///     rma.sync_nbi()?; // all eight in place at the peer
    ///     am.barrier()?;
    ///     let mut v = [0u64; 8];
    ///     rma.get_slice(am.rank(), at, &mut v)?;
    ///     assert_eq!(v, [0, 1, 2, 3, 4, 5, 6, 7]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put_nbi(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), RmaError> {
        match self.put_start(rank, offset, data, None)? {
            Some(op) => self.nbi_ops.borrow_mut().push(op),
            None => self.nbi_done.set(self.nbi_done.get() + 1),
        }
        Ok(())
    }

    /// Implicit-handle [`Rma::get`]: `buf` holds the data after the next
    /// [`Rma::sync_nbi`] (through frames: already when it returns, see the module doc).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     rma.store(am.rank(), at, 7 * (am.rank() as u64 + 1))?;
    ///     am.barrier()?;
    ///     let mut buf = [0u8; 8];
    ///     rma.get_nbi(1 - am.rank(), at, &mut buf)?;
    ///     rma.sync_nbi()?; // `buf` holds the word now
    ///     assert_eq!(u64::from_ne_bytes(buf), 7 * (2 - am.rank() as u64));
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_nbi(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), RmaError> {
        self.get(rank, offset, buf)?;
        self.nbi_done.set(self.nbi_done.get() + 1);
        Ok(())
    }

    /// Implicit-handle get into this rank's own segment: `len` bytes at `offset` of
    /// `rank`'s segment are at byte `at` of this rank's after the next
    /// [`Rma::sync_nbi`] (Split-C's split-phase `get`); until then they may hold the
    /// old bytes, the new or some of each. Unlike [`Rma::get_nbi`], it stays in flight
    /// through frames too: its destination outlives any call, so each reply writes
    /// its bytes there as it is taken in.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(16, 8)?;
    ///     rma.put_slice(am.rank(), at, &[am.rank() as u64 + 1])?;
    ///     am.barrier()?;
    ///     rma.get_local_nbi(1 - am.rank(), at, 8, at + 8)?; // the peer's word, to my 2nd
    ///     rma.sync_nbi()?;
    ///     let mut got = [0u64; 2];
    ///     rma.get_slice(am.rank(), at, &mut got)?;
    ///     assert_eq!(got[1], 2 - am.rank() as u64);
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_local_nbi(
        &self,
        rank: Rank,
        offset: usize,
        len: usize,
        at: usize,
    ) -> Result<(), RmaError> {
        self.target(rank, offset, len)?;
        let me = self.am.rank();
        self.target(me, at, len)?;
        if !self.direct.get() {
            frames::medium_room(&self.am)?;
            // The replies land at `at` as they come: nothing to copy at `sync_nbi`.
            let op = frames::get(&self.am, rank, (offset, len), Some(at))?;
            self.nbi_ops.borrow_mut().push(Pending::Frames(op));
            return Ok(());
        }
        // SAFETY: `at + len` lies in this rank's segment (checked above), which lives as
        // long as the conduit: a get left in flight writes there until `sync_nbi`
        // completes it, and no reference to those bytes is handed out meanwhile.
        let started = unsafe {
            let to = self.am.segment().0.as_ptr().add(at);
            self.conduit().get_nb(rank, offset, to, len)
        };
        match Pending::of(started.map_err(rma_error)?) {
            Some(op) => self.nbi_ops.borrow_mut().push(op),
            None => self.nbi_done.set(self.nbi_done.get() + 1),
        }
        Ok(())
    }

    /// Waits until every implicit-handle operation of this rank is complete; returns
    /// how many completed since the last call.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     rma.put_nbi(1 - am.rank(), at, &[1; 8])?;
    ///     rma.put_nbi(1 - am.rank(), at, &[2; 8])?;
    ///     assert!(rma.sync_nbi()? <= 2); // how many were still in flight
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn sync_nbi(&self) -> Result<u64, RmaError> {
        let mut ops = std::mem::take(&mut *self.nbi_ops.borrow_mut());
        let mut done = self.nbi_done.replace(0);
        let mut first_error = None;
        for op in ops.drain(..) {
            match self.collect(op, &mut []) {
                Ok(_) => done += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        // Keep the list's room for the next round (nothing was added meanwhile).
        let mut list = self.nbi_ops.borrow_mut();
        if list.is_empty() {
            *list = ops;
        }
        first_error.map_or(Ok(done), Err)
    }
}
