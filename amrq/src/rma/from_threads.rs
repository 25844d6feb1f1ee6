//! One-sided operations from a rank's other threads: on one host a [`Sender`] puts,
//! gets and applies atomics through every rank's segment as mapped there, with the same
//! checks and errors as [`Rma`](super::Rma)'s direct path, and without the rank's thread:
//! a copy or a processor atomic by the calling core. In a job across hosts each goes
//! through the rank's outbox and its thread starts it on the cluster
//! (`conduit/mem/thread_op.rs`); a put larger than a frame goes in pieces, its range
//! checked whole first. Each completes before it returns.

use super::{bytes_of, bytes_of_mut, rma_error, RmaError, Word};
use crate::am::Sender;
use crate::conduit::mem::ThreadOpKind;
use crate::conduit::{AtomicOp, Rank};

impl Sender<'_> {
    /// Copies `data` to `offset` of `rank`'s segment (an offset from the rank's
    /// [`Rma::alloc_symmetric`](super::Rma::alloc_symmetric), say); in place when it
    /// returns.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let at = job.rma().alloc_symmetric(8 * 4, 8)?;
    ///     let peer = 1 - job.rank();
    ///     job.run_workers(4, |i, mut sender| -> amrq::Result<()> {
    ///         Ok(sender.put(peer, at + 8 * i, &[i as u8 + 1; 8])?)
    ///     })?;
    ///     job.barrier()?; // every rank's threads have put
    ///     let mut mine = [0u8; 32];
    ///     job.rma().get(job.rank(), at, &mut mine)?;
    ///     assert_eq!((mine[0], mine[8], mine[31]), (1, 2, 4));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put(&mut self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), RmaError> {
        if let Some(s) = self.segments() {
            return s.put(rank, offset, data).map_err(rma_error);
        }
        // The whole range first: a refused put writes nothing, as on one host.
        self.in_segment(rank, offset, data.len())
            .map_err(rma_error)?;
        let piece = self.max_medium().max(1);
        for (i, part) in data.chunks(piece).enumerate() {
            let at = offset.saturating_add(i * piece);
            self.through_rank(rank, at, ThreadOpKind::Put(part))?
                .outcome()
                .map_err(rma_error)?;
        }
        Ok(())
    }

    /// Copies `buf.len()` bytes at `offset` of `rank`'s segment into `buf`.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let at = job.rma().alloc_symmetric(8, 8)?;
    ///     job.rma().put(job.rank(), at, &[job.rank() as u8 + 7; 8])?;
    ///     job.barrier()?;
    ///     let peer = 1 - job.rank();
    ///     let got = job.run_workers(2, |_, mut sender| -> amrq::Result<u8> {
    ///         let mut theirs = [0u8; 8];
    ///         sender.get(peer, at, &mut theirs)?;
    ///         Ok(theirs[0])
    ///     })?;
    ///     assert_eq!(got, [peer as u8 + 7; 2]);
    ///     job.barrier()
    /// })
    /// .unwrap();
    /// ```
    pub fn get(&mut self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), RmaError> {
        if let Some(s) = self.segments() {
            return s.get(rank, offset, buf).map_err(rma_error);
        }
        self.in_segment(rank, offset, buf.len())
            .map_err(rma_error)?;
        let op = self.through_rank(rank, offset, ThreadOpKind::Get(buf.len()))?;
        op.outcome().map_err(rma_error)?;
        if let Some(bytes) = op.bytes() {
            buf.copy_from_slice(bytes); // done: as many as asked
        }
        Ok(())
    }

    /// [`Sender::put`] of a slice of numbers.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let at = job.rma().alloc_symmetric(2 * 8, 8)?;
    ///     job.run_workers(1, |_, mut sender| -> amrq::Result<()> { Ok(sender.put_slice(0, at, &[1.5f64, -2.0])?) })?;
    ///     let mut v = [0f64; 2];
    ///     job.rma().get_slice(0, at, &mut v)?;
    ///     assert_eq!(v, [1.5, -2.0]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put_slice<T: Word>(
        &mut self,
        rank: Rank,
        offset: usize,
        data: &[T],
    ) -> Result<(), RmaError> {
        self.put(rank, offset, bytes_of(data))
    }

    /// [`Sender::get`] into a slice of numbers.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let at = job.rma().alloc_symmetric(3 * 4, 8)?;
    ///     job.rma().put_slice(0, at, &[3u32, 2, 1])?;
    ///     let sums = job.run_workers(2, |_, mut sender| -> amrq::Result<u32> {
    ///         let mut v = [0u32; 3];
    ///         sender.get_slice(0, at, &mut v)?;
    ///         Ok(v.iter().sum::<u32>())
    ///     })?;
    ///     assert_eq!(sums, [6, 6]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_slice<T: Word>(
        &mut self,
        rank: Rank,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), RmaError> {
        self.get(rank, offset, bytes_of_mut(out))
    }

    /// Applies `op` to the u64 at `offset` (8-byte aligned) of `rank`'s segment and
    /// returns the value before: atomic against every rank's and every thread's
    /// atomics on the word, as [`Rma::atomic`](super::Rma::atomic).
    ///
    /// ```
    /// use amrq::{conduit::AtomicOp, prelude::*};
    /// let mut cfg = Config::new();
    /// cfg.sender_slots.set(64);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let count = job.rma().alloc_symmetric(8, 8)?;
    ///     job.barrier()?;
    ///     job.run_workers(3, |_, mut sender| -> amrq::Result<()> {
    ///         for _ in 0..1000 {
    ///             sender.atomic(0, count, AtomicOp::FetchAdd(1))?;
    ///         }
    ///         Ok(())
    ///     })?;
    ///     job.barrier()?;
    ///     assert_eq!(job.rma().load(0, count)?, 6000); // 2 ranks × 3 threads × 1000
    ///     job.barrier()
    /// })
    /// .unwrap();
    /// ```
    pub fn atomic(&mut self, rank: Rank, offset: usize, op: AtomicOp) -> Result<u64, RmaError> {
        if let Some(s) = self.segments() {
            return s.atomic(rank, offset, op).map_err(rma_error);
        }
        let started = self.through_rank(rank, offset, ThreadOpKind::Atomic(op))?;
        started.outcome().map_err(rma_error)
    }
}
