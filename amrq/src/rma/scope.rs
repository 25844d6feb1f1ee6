//! Puts from borrowed buffers: [`Rma::put_scope`] lets a network send each put's bytes
//! from the caller's buffer, because the scope does not end before every put has.

use super::{frames, rma_error, Pending, Rma, RmaError};
use crate::conduit::{Conduit, OpToken, Rank};
use std::cell::RefCell;
use std::marker::PhantomData;

/// The puts of one [`Rma::put_scope`]: each reads its data from the caller's buffer,
/// borrowed for `'env` (beyond the scope), until it is in place. A buffer made inside
/// the scope's closure cannot be lent, since a put may read it after the closure
/// returns:
///
/// ```compile_fail,E0597
/// use amrq::prelude::*;
/// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     let rma = am.rma();
///     let at = rma.alloc_local(8, 8)?;
///     rma.put_scope(|s| {
///         let local = vec![1u8; 8];
///         s.put(0, at, &local) // `local` does not live long enough
///     })?;
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct PutScope<'r, 'env, S, C: Conduit> {
    rma: &'r Rma<S, C>,
    /// The puts still in flight.
    ops: RefCell<Vec<Pending>>,
    /// `'env` invariant (as `std::thread::scope`'s): the closure cannot shorten it to
    /// a borrow of its own locals.
    env: PhantomData<&'env mut &'env ()>,
}

impl<S, C: Conduit> Rma<S, C> {
    /// Runs `f`, whose puts ([`PutScope::put`]) are sent from the caller's own
    /// buffers, and returns once every one of them is in place at its target (as
    /// [`Rma::sync_nbi`] completes `put_nbi`s). [`Rma::put_nbi`] copies data the
    /// network cannot take at once, so that its buffer is free when it returns; these
    /// borrow it until the scope ends instead, and UCX's `ucp_put_nbx` reads it there
    /// (amrq keeps no copy of its own). On one host a put is one copy into the
    /// target's mapped segment, complete when it returns.
    ///
    /// Returns `f`'s value once every put has ended; else `f`'s error, or the first
    /// error of a put. The scope waits for its puts also when `f` or a handler run
    /// meanwhile panics.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(4 << 10, 8)?;
    ///     let blocks = vec![[am.rank() as u8 + 1; 1024]; 4];
    ///     let peer = 1 - am.rank();
    ///     rma.put_scope(|s| {
    ///         for (i, b) in blocks.iter().enumerate() {
    ///             s.put(peer, at + 1024 * i, b)?; // `blocks` stays borrowed: no copy
    ///         }
    ///         Ok(())
    ///     })?; // every block in place at the peer
    ///     am.barrier()?;
    ///     let mut got = [0u8; 4 << 10];
    ///     rma.get(am.rank(), at, &mut got)?;
    ///     assert!(got.iter().all(|&b| b == peer as u8 + 1));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put_scope<'env, T>(
        &self,
        f: impl FnOnce(&PutScope<'_, 'env, S, C>) -> Result<T, RmaError>,
    ) -> Result<T, RmaError> {
        let scope = PutScope {
            rma: self,
            ops: RefCell::new(Vec::new()),
            env: PhantomData,
        };
        let value = f(&scope);
        let ended = scope.end();
        let value = value?;
        ended.map(|()| value)
    }
}

impl<'env, S, C: Conduit> PutScope<'_, 'env, S, C> {
    /// Starts a put of `data` to byte `offset` of `rank`'s segment, sent from `data`
    /// itself; it is in place when the scope ends. Checked as [`Rma::put`]
    /// ([`RmaError::OutOfSegment`], nothing written).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_local(8, 8)?;
    ///     let word = 7u64.to_ne_bytes();
    ///     let past = rma.put_scope(|s| {
    ///         s.put(0, at, &word)?;
    ///         Ok(s.put(0, 1 << 40, &word).is_err())
    ///     })?;
    ///     assert!(past); // refused, and the first put still done
    ///     assert_eq!(rma.load(0, at)?, 7);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put(&self, rank: Rank, offset: usize, data: &'env [u8]) -> Result<(), RmaError> {
        let rma = self.rma;
        if !rma.direct.get() {
            // Frames carry a copy of the data: nothing stays borrowed.
            rma.target(rank, offset, data.len())?;
            let op = frames::put(&rma.am, rank, offset, data, None)?;
            self.ops.borrow_mut().push(Pending::Frames(op));
            return Ok(());
        }
        // SAFETY: `data` is borrowed for `'env`, which outlives the scope, and the
        // scope does not end (returning or unwinding) before the conduit has answered
        // for every put it started (`end`).
        let started = unsafe {
            rma.conduit()
                .put_nb_borrowed(rank, offset, data.as_ptr(), data.len())
        }
        .map_err(rma_error)?;
        self.ops.borrow_mut().extend(Pending::of(started));
        Ok(())
    }

    /// Waits for every put in flight, newest first: the first error, once all have
    /// ended. A put leaves the list only once it is answered, so that if a handler run
    /// meanwhile panics, `Drop` still waits for it and for the rest.
    fn end(&self) -> Result<(), RmaError> {
        let mut first = None;
        loop {
            let Some(&op) = self.ops.borrow().last() else {
                return first.map_or(Ok(()), Err);
            };
            let ended = match op {
                Pending::Conduit(t) => self.settle(t),
                through_frames => through_frames.wait(&self.rma.am, &mut []).map(drop),
            };
            self.ops.borrow_mut().pop();
            if let Err(e) = ended {
                first.get_or_insert(e);
            }
        }
    }

    /// Waits until the conduit has answered for put `t` (only then has it stopped
    /// reading the borrowed bytes): an error that ends a wait (a handler's, a peer's
    /// failure) does not end this one, which goes on sleeping a little between looks
    /// until the conduit answers (a failed peer's puts are answered with its failure).
    fn settle(&self, t: OpToken) -> Result<(), RmaError> {
        let am = &self.rma.am;
        let mut first = None;
        loop {
            let mut answer = None;
            let waited = am.wait_runtime(|_| {
                answer = Pending::settled(t, am);
                answer.is_some()
            });
            if let Some(a) = answer {
                return a.map(drop).and(first.map_or(Ok(()), Err));
            }
            if let Err(e) = waited {
                first.get_or_insert(e.into());
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
    }
}

impl<S, C: Conduit> Drop for PutScope<'_, '_, S, C> {
    /// Only when `f` panicked are puts left: they are waited for before the unwinding
    /// frees their buffers.
    fn drop(&mut self) {
        let _ = self.end();
    }
}
