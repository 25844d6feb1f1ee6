//! The runtime's barrier: dissemination (⌈log2 N⌉ rounds; in round r each rank tells
//! rank `me + 2^r` and hears from rank `me − 2^r`), for any N, blocking or split-phase.
//!
//! It orders ranks, not messages: a message another rank sent before entering may still
//! be in flight when it completes (as in GASNet). Count arrivals to know.

use super::engine::{Payload, TAG_BARRIER};
use super::{Am, AmError};
use crate::conduit::Conduit;

impl<S, C: Conduit> Am<S, C> {
    /// Waits until every rank has entered the barrier, running handlers meanwhile
    /// ([`Am::barrier_notify`] then [`Am::barrier_wait`]).
    pub fn barrier(&self) -> Result<(), AmError> {
        self.barrier_notify()?;
        self.barrier_wait()
    }

    /// Enters the barrier without waiting (split phase): the program computes, then
    /// calls [`Am::barrier_wait`] or polls [`Am::barrier_try`] until it says done.
    /// Entering again before that is [`AmError::BarrierInProgress`].
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::threads::run(3, &Config::default(), |c| -> Result<(), AmError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     am.barrier_notify()?;
    ///     let mut overlapped = 0u64;
    ///     while !am.barrier_try()? {
    ///         overlapped += 1; // work that does not need the others
    ///     }
    ///     am.barrier_notify()?; // the next one
    ///     am.barrier_wait()
    /// }).unwrap();
    /// ```
    pub fn barrier_notify(&self) -> Result<(), AmError> {
        if self.barrier_state.get() != BarrierState::Idle {
            return Err(AmError::BarrierInProgress);
        }
        self.barrier_epoch.set(self.barrier_epoch.get() + 1);
        self.barrier_state.set(BarrierState::Entered { sent: 0 });
        self.barrier_advance()
    }

    /// Makes progress on the barrier this rank entered (polling once); `Ok(true)` once
    /// every rank has entered it, which ends it. [`AmError::NoBarrier`] if this rank has
    /// not entered one.
    pub fn barrier_try(&self) -> Result<bool, AmError> {
        match self.barrier_state.get() {
            BarrierState::Idle => return Err(AmError::NoBarrier),
            BarrierState::Entered { .. } => {
                self.poll()?;
                self.barrier_advance()?;
            }
            BarrierState::Complete => {}
        }
        let done = self.barrier_state.get() == BarrierState::Complete;
        if done {
            self.barrier_state.set(BarrierState::Idle);
        }
        Ok(done)
    }

    /// Waits for the barrier this rank entered to complete, running handlers meanwhile
    /// (spinning a bounded time, then sleeping until a message arrives).
    pub fn barrier_wait(&self) -> Result<(), AmError> {
        loop {
            match self.barrier_state.get() {
                BarrierState::Idle => return Err(AmError::NoBarrier),
                BarrierState::Complete => break,
                // Nothing sent yet (the first send failed): send it now.
                BarrierState::Entered { sent: 0 } => self.barrier_advance()?,
                BarrierState::Entered { sent } => {
                    // The arrivals change only in the barrier handler: wait for the one
                    // the next round needs, then send that round outside the handler.
                    let (epoch, arrivals) = (self.barrier_epoch.get(), &self.barrier_arrivals);
                    self.wait_until(|_| arrivals[sent - 1].get() >= epoch)?;
                    self.barrier_advance()?;
                }
            }
        }
        self.barrier_state.set(BarrierState::Idle);
        Ok(())
    }

    /// Sends every round whose previous round has been heard from, and marks the
    /// barrier complete once the last round has been heard from.
    fn barrier_advance(&self) -> Result<(), AmError> {
        let BarrierState::Entered { mut sent } = self.barrier_state.get() else {
            return Ok(());
        };
        let (me, n, epoch) = (self.rank(), self.size(), self.barrier_epoch.get());
        let heard = |round: usize| self.barrier_arrivals[round].get() >= epoch;
        let rounds = self.barrier_arrivals.len();
        // Each rank hears from one partner per round and epoch, in order (one ring), so
        // a count reaching `epoch` means this epoch's message of that round is in.
        while sent < rounds && (sent == 0 || heard(sent - 1)) {
            let dest = (me + (1 << sent)) % n;
            self.send_request(dest, TAG_BARRIER, &[sent as u64], Payload::Inline(&[]))?;
            sent += 1;
            self.barrier_state.set(BarrierState::Entered { sent });
        }
        if rounds == 0 || (sent == rounds && heard(rounds - 1)) {
            self.barrier_state.set(BarrierState::Complete);
        }
        Ok(())
    }
}

/// Where this rank is in the split-phase barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BarrierState {
    /// Not in a barrier.
    Idle,
    /// Entered; the first `sent` rounds sent.
    Entered {
        /// Rounds sent.
        sent: usize,
    },
    /// Every rank has entered; the program has not yet been told (wait or try).
    Complete,
}
