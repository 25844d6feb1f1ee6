//! Reads and writes through global pointers: blocking, split-phase (get, put, then
//! sync), and the poll that serves other ranks meanwhile.

use super::SplitC;
use crate::conduit::Conduit;
use crate::rma::Word;
use crate::splitc::{GlobalPtr, SplitCError};

impl<S, C: Conduit> SplitC<S, C> {
    /// The value at `p` (a blocking read: returns when the value is here).
    ///
    /// ```
    /// use amrq::splitc::{Layout, SplitCError};
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let a = sc.all_spread_malloc::<u32>(2, Layout::Cyclic)?; // a[0] on rank 0, a[1] on 1
    ///     sc.write(a.at(sc.my_proc()), 100 + sc.my_proc() as u32)?;
    ///     sc.barrier()?;
    ///     Ok(sc.read(a.at(1 - sc.my_proc()))?) // the other rank's element
    /// })
    /// .unwrap();
    /// assert_eq!(out, [101, 100]);
    /// ```
    pub fn read<T: Word>(&self, p: GlobalPtr<T>) -> Result<T, SplitCError> {
        // SAFETY: every bit pattern, zeros too, is a value of a `Word` type.
        let mut v: T = unsafe { std::mem::zeroed() };
        self.bulk_read(p, std::slice::from_mut(&mut v))?;
        Ok(v)
    }

    /// Writes `v` at `p` (a blocking write: returns when it is in place).
    ///
    /// ```
    /// use amrq::splitc::{Layout, SplitCError};
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let a = sc.all_spread_malloc::<f64>(2, Layout::Cyclic)?;
    ///     if sc.my_proc() == 0 {
    ///         sc.write(a.at(1), 2.5)?; // complete at rank 1 when it returns
    ///     }
    ///     sc.barrier()?;
    ///     Ok(sc.read(a.at(1))?)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [2.5, 2.5]);
    /// ```
    pub fn write<T: Word>(&self, p: GlobalPtr<T>, v: T) -> Result<(), SplitCError> {
        self.bulk_write(p, std::slice::from_ref(&v))
    }

    /// Reads `dst.len()` elements from `src` on (Split-C's `bulk_read`).
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = sc.rma().alloc_symmetric(4 * 8, 8)?;
    ///     let mine = GlobalPtr::<u64>::new(sc.my_proc(), at);
    ///     sc.bulk_write(mine, &[sc.my_proc() as u64; 4])?;
    ///     sc.barrier()?;
    ///     let mut theirs = [9u64; 4];
    ///     sc.bulk_read(mine.on(1 - sc.my_proc()), &mut theirs)?;
    ///     assert_eq!(theirs, [1 - sc.my_proc() as u64; 4]);
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn bulk_read<T: Word>(&self, src: GlobalPtr<T>, dst: &mut [T]) -> Result<(), SplitCError> {
        if !self.is_local(src) {
            return Ok(self.rma().get_slice(src.rank(), src.offset(), dst)?);
        }
        let from = self.local(src.offset(), std::mem::size_of_val(dst))?;
        // SAFETY: `local` checked the range lies in this rank's segment, which lives as
        // long as the job; `dst` is ours and cannot overlap it (a segment is never lent
        // out as a slice). Bytes a peer may be writing meanwhile are copied as they are
        // (any bit pattern is a `Word` value), as RMA's own copies do.
        unsafe {
            std::ptr::copy_nonoverlapping(
                from.as_ptr(),
                dst.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(dst),
            )
        };
        Ok(())
    }

    /// Writes the elements of `src` at `dst` on (Split-C's `bulk_write`).
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = sc.rma().alloc_symmetric(3 * 2, 8)?;
    ///     if sc.my_proc() == 1 {
    ///         sc.bulk_write(GlobalPtr::<u16>::new(0, at), &[1, 2, 3])?;
    ///     }
    ///     sc.barrier()?;
    ///     let mut v = [0u16; 3];
    ///     sc.bulk_read(GlobalPtr::new(0, at), &mut v)?;
    ///     assert_eq!(v, [1, 2, 3]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn bulk_write<T: Word>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<(), SplitCError> {
        if !self.is_local(dst) {
            return Ok(self.rma().put_slice(dst.rank(), dst.offset(), src)?);
        }
        self.copy_in(dst.offset(), crate::rma::bytes_of(src))
    }

    /// Split-phase get (Split-C's `dst := *src`): starts copying the element at `src`
    /// to `dst`, which must be in this rank's segment ([`SplitCError::NotLocal`]
    /// otherwise); the value is there after [`SplitC::sync`].
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::splitc::{Layout, SplitC, SplitCError};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let sc = am.splitc();
    ///     let a = sc.all_spread_malloc::<u32>(4, Layout::Cyclic)?; // 2 per rank
    ///     let me = sc.my_proc();
    ///     sc.write(a.at(me), 10 + me as u32)?;
    ///     sc.barrier()?;
    ///     let (mine, theirs) = (a.at(me + 2), a.at(1 - me));
    ///     sc.get(mine, theirs)?; // in flight while this rank computes
    ///     assert_eq!(sc.sync()?, 1);
    ///     assert_eq!(sc.read(mine)?, 11 - me as u32);
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn get<T: Word>(&self, dst: GlobalPtr<T>, src: GlobalPtr<T>) -> Result<(), SplitCError> {
        self.bulk_get(dst, src, 1)
    }

    /// Split-phase get of `n` elements from `src` on to `dst` on, in this rank's
    /// segment (Split-C's `bulk_get`); in place after [`SplitC::sync`].
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let n = 64;
    ///     let (src, dst) = (sc.rma().alloc_symmetric(n * 8, 8)?, sc.rma().alloc_symmetric(n * 8, 8)?);
    ///     let me = sc.my_proc();
    ///     sc.bulk_write(GlobalPtr::<u64>::new(me, src), &vec![me as u64 + 1; n])?;
    ///     sc.barrier()?;
    ///     // Split phase: start the copy of the other rank's block into mine, then sync.
    ///     sc.bulk_get(GlobalPtr::<u64>::new(me, dst), GlobalPtr::new(1 - me, src), n)?;
    ///     sc.sync()?;
    ///     assert_eq!(sc.read(GlobalPtr::<u64>::new(me, dst + 8 * (n - 1)))?, 2 - me as u64);
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn bulk_get<T: Word>(
        &self,
        dst: GlobalPtr<T>,
        src: GlobalPtr<T>,
        n: usize,
    ) -> Result<(), SplitCError> {
        if !self.is_local(dst) {
            return Err(SplitCError::NotLocal {
                rank: dst.rank(),
                me: self.me,
            });
        }
        let len = GlobalPtr::<T>::bytes(n);
        if self.is_local(src) {
            let from = self.local(src.offset(), len)?;
            let to = self.local(dst.offset(), len)?;
            // SAFETY: both ranges lie in this rank's segment (checked); `copy` allows
            // them to overlap.
            unsafe { std::ptr::copy(from.as_ptr(), to.as_ptr(), len) };
        } else {
            self.rma()
                .get_local_nbi(src.rank(), src.offset(), len, dst.offset())?;
        }
        self.started.set(self.started.get() + 1);
        Ok(())
    }

    /// Split-phase put (Split-C's `*dst := v`): `v` is at `dst` after
    /// [`SplitC::sync`].
    ///
    /// ```
    /// use amrq::splitc::{Layout, SplitCError};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let a = sc.all_spread_malloc::<u64>(3, Layout::Cyclic)?;
    ///     let right = (sc.my_proc() + 1) % sc.procs();
    ///     sc.put(a.at(right), sc.my_proc() as u64)?; // started…
    ///     sc.sync()?; // …complete
    ///     sc.barrier()?;
    ///     Ok(sc.read(a.at(sc.my_proc()))?) // what my left neighbour put
    /// })
    /// .unwrap();
    /// assert_eq!(out, [2, 0, 1]);
    /// ```
    pub fn put<T: Word>(&self, dst: GlobalPtr<T>, v: T) -> Result<(), SplitCError> {
        self.bulk_put(dst, std::slice::from_ref(&v))
    }

    /// Split-phase put of the elements of `src` at `dst` on (Split-C's `bulk_put`);
    /// `src` may be reused when it returns, the data is in place after
    /// [`SplitC::sync`].
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = sc.rma().alloc_symmetric(1024, 8)?;
    ///     let other = GlobalPtr::<u8>::new(1 - sc.my_proc(), at);
    ///     sc.bulk_put(other, &[7u8; 1024])?;
    ///     sc.sync()?;
    ///     sc.barrier()?;
    ///     let mut mine = [0u8; 1024];
    ///     sc.bulk_read(other.on(sc.my_proc()), &mut mine)?;
    ///     assert!(mine.iter().all(|&b| b == 7));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn bulk_put<T: Word>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<(), SplitCError> {
        if self.is_local(dst) {
            self.copy_in(dst.offset(), crate::rma::bytes_of(src))?;
        } else {
            let bytes = crate::rma::bytes_of(src);
            self.rma().put_nbi(dst.rank(), dst.offset(), bytes)?;
        }
        self.started.set(self.started.get() + 1);
        Ok(())
    }

    /// Waits until this rank's gets and puts are complete (Split-C's `sync`); returns
    /// how many there were (0: nothing was pending).
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = sc.rma().alloc_symmetric(8, 8)?;
    ///     let me = GlobalPtr::<u64>::new(sc.my_proc(), at);
    ///     sc.write(me, 5)?;
    ///     sc.barrier()?;
    ///     sc.get(me.on(sc.my_proc()), me.on(1 - sc.my_proc()))?; // a get into my own word
    ///     sc.sync()?; // the value is here now
    ///     assert_eq!(sc.read(me)?, 5);
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn sync(&self) -> Result<usize, SplitCError> {
        let n = self.started.replace(0);
        if n > 0 {
            self.rma().sync_nbi()?;
        }
        Ok(n)
    }

    /// Serves what has arrived (Split-C's `splitc_poll`): peers' gets, puts, stores
    /// and atomic procedures on the message path; returns how many messages ran.
    /// Every communication call polls; a long computation calls this now and then,
    /// so that a peer's get is answered while this rank computes rather than at its
    /// next `sync` (that is what lets the peer overlap). An empty poll is a few
    /// instructions.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::rma::Rma;
    /// use amrq::splitc::{SplitC, SplitCError};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let sc = am.splitc();
    ///     let mut x = 0.0f64;
    ///     for i in 0..1000 {
    ///         x += (i as f64).sqrt(); // a long computation …
    ///         if i % 100 == 0 {
    ///             sc.poll()?; // … that answers its peers now and then
    ///         }
    ///     }
    ///     assert!(x > 0.0);
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn poll(&self) -> Result<usize, SplitCError> {
        Ok(self.rma().am().poll_program()?)
    }
}
