//! A non-blocking operation's handle ([`Handle`]), and what is still in flight of an
//! operation ([`Pending`]): through frames, or in the conduit.

use super::RmaError;
use crate::am::{Am, AmError, OpId};
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, OpToken, Started};
use std::cell::RefCell;

/// A non-blocking operation: [`Handle::wait`] for it (dropping it waits too). On
/// mapped memory it completed before it was returned; through frames it completes
/// when the target's reply arrives.
///
/// ```
/// use amrq::{prelude::*, rma::{Rma, RmaError}};
/// let mut frames = amrq::Config::new();
/// frames.rma_frames.set(true); // every one-sided operation as AM frames
/// frames.threads(2, |setup| -> amrq::Result<()> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     let rma = am.rma();
///     let at = rma.alloc_symmetric(8, 8)?;
///     let handles: Vec<_> = (0..4)
///         .map(|_| rma.put_nb(1 - am.rank(), at, &[3; 8]))
///         .collect::<Result<_, _>>()?;
///     for h in handles {
///         h.wait()?;
///     }
///     am.barrier()?;
///     Ok(())
/// })
/// .unwrap();
/// ```
#[must_use = "wait on the handle"]
pub struct Handle<'h, S, C: Conduit = MemConduit> {
    pub(super) am: &'h Am<S, C>,
    pub(super) op: Option<Pending>,
    /// Where a get through frames puts its bytes when it completes.
    pub(super) out: Option<&'h mut [u8]>,
    /// The answer `test` took from the conduit (which spends the operation's token),
    /// kept for `wait`.
    pub(super) settled: RefCell<Option<Result<u64, RmaError>>>,
}

/// An operation still in flight: through frames, or in the conduit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pending {
    Frames(OpId),
    Conduit(OpToken),
}

impl Pending {
    /// The operation a conduit's answer leaves in flight, if any.
    pub(super) fn of(started: Started) -> Option<Self> {
        match started {
            Started::Done(_) => None,
            Started::InFlight(t) => Some(Pending::Conduit(t)),
        }
    }

    /// The conduit's answer for token `t`, once it has one (progressing the conduit);
    /// the token is spent then. An error ends the operation too.
    pub(super) fn settled<S, C: Conduit>(
        t: OpToken,
        am: &Am<S, C>,
    ) -> Option<Result<u64, RmaError>> {
        match am.rq().conduit().op_test(t) {
            Ok(None) => None,
            Ok(Some(v)) => Some(Ok(v)),
            Err(e) => Some(Err(AmError::from(e).into())),
        }
    }

    /// Waits for it (running handlers meanwhile); a get through frames copies its
    /// bytes into `out`. Returns an atomic's value before (0 for others).
    pub(super) fn wait<S, C: Conduit>(
        self,
        am: &Am<S, C>,
        out: &mut [u8],
    ) -> Result<u64, RmaError> {
        match self {
            Pending::Frames(op) => Ok(am.op_wait(op, out)?),
            Pending::Conduit(t) => {
                let mut answer = None;
                am.wait_runtime(|_| {
                    answer = Self::settled(t, am);
                    answer.is_some()
                })?;
                answer.expect("wait_until returns once the closure saw an answer")
            }
        }
    }
}

impl<S, C: Conduit> std::fmt::Debug for Handle<'_, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

impl<S, C: Conduit> Handle<'_, S, C> {
    /// True once the operation is complete (its replies are in).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_local(8, 8)?;
    ///     let h = rma.put_nb(0, at, &[1; 8])?;
    ///     assert!(h.test()); // mapped memory: complete when returned
    ///     Ok(h.wait()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn test(&self) -> bool {
        match self.op {
            None => true,
            Some(Pending::Frames(op)) => self.am.op_done(op),
            Some(Pending::Conduit(t)) => {
                let mut settled = self.settled.borrow_mut();
                if settled.is_none() {
                    *settled = Pending::settled(t, self.am);
                }
                settled.is_some()
            }
        }
    }

    /// Waits until the operation is complete (a get's bytes are then in its buffer).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     let mut buf = [0u8; 8];
    ///     rma.get_nb(1 - am.rank(), at, &mut buf)?.wait()?; // the peer serves it while we wait
    ///     assert_eq!(buf, [0; 8]);
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn wait(mut self) -> Result<(), RmaError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), RmaError> {
        let Some(op) = self.op.take() else {
            return Ok(());
        };
        if let Some(answer) = self.settled.take() {
            return answer.map(drop);
        }
        op.wait(self.am, self.out.take().unwrap_or_default())?;
        Ok(())
    }
}

impl<S, C: Conduit> Drop for Handle<'_, S, C> {
    fn drop(&mut self) {
        // Collect the operation so that its slot is freed; an error was the program's
        // to see through `wait`.
        let _ = self.finish();
    }
}
