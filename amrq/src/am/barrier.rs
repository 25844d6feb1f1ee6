//! The runtime's barrier: dissemination (⌈log2 N⌉ rounds; in round r each rank tells
//! rank `me + 2^r` and hears from rank `me − 2^r`), for any N, blocking or split-phase.
//!
//! It orders ranks, not messages: a message another rank sent before entering may still
//! be in flight when it completes (as in GASNet). Count arrivals to know.
//!
//! [`Barrier`] is the state of one rank; it talks through the [`Am`] it is given (its
//! arrival messages are runtime requests of tag [`TAG_BARRIER`]), and [`Am`]'s
//! `barrier*` methods are its public face.

use super::handlers::FIRST_USER_TAG;
use super::payload::Payload;
use super::{Am, AmError};
use crate::conduit::{Conduit, Rank};
use std::cell::Cell;

/// Tag of the barrier's arrival message.
pub(super) const TAG_BARRIER: u16 = 0;
const _: () = assert!(TAG_BARRIER < FIRST_USER_TAG);

/// One rank's barrier: the epoch it is in, what it has heard per round, and where it is.
#[derive(Debug)]
pub(super) struct Barrier {
    epoch: Cell<u64>,
    /// Per round, arrivals heard so far (over all epochs).
    arrivals: Box<[Cell<u64>]>,
    state: Cell<BarrierState>,
    /// An error ended the last call into the barrier before it completed.
    interrupted: Cell<bool>,
}

impl Barrier {
    /// The barrier of a job of `size` ranks.
    pub(super) fn new(size: usize) -> Self {
        let rounds = usize::BITS - (size.max(1) - 1).leading_zeros();
        Self {
            epoch: Cell::new(0),
            arrivals: (0..rounds).map(|_| Cell::new(0)).collect(),
            state: Cell::new(BarrierState::Idle),
            interrupted: Cell::new(false),
        }
    }

    /// True if this rank is in a barrier that an error interrupted (a handler's error,
    /// a peer's departure): `Am::barrier` then finishes it instead of entering another.
    pub(super) fn interrupted(&self) -> bool {
        self.interrupted.get() && self.state.get() != BarrierState::Idle
    }

    /// `result` of a call into the barrier, noting whether an error left it unfinished.
    fn noted<T>(&self, result: Result<T, AmError>) -> Result<T, AmError> {
        self.interrupted.set(result.is_err());
        result
    }

    /// An arrival message of round `round` from `source` (the barrier's handler).
    pub(super) fn arrived(&self, round: u64, source: Rank) -> Result<(), AmError> {
        let Some(a) = usize::try_from(round)
            .ok()
            .and_then(|r| self.arrivals.get(r))
        else {
            return Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "barrier round out of range",
            });
        };
        a.set(a.get() + 1);
        Ok(())
    }

    /// Enters the next barrier (see [`Am::barrier_notify`]).
    pub(super) fn notify<S, C: Conduit>(&self, am: &Am<S, C>) -> Result<(), AmError> {
        if self.state.get() != BarrierState::Idle {
            return Err(AmError::BarrierInProgress);
        }
        self.epoch.set(self.epoch.get() + 1);
        self.state.set(BarrierState::Entered { sent: 0 });
        self.noted(self.advance(am))
    }

    /// One poll and one step (see [`Am::barrier_try`]).
    pub(super) fn try_complete<S, C: Conduit>(&self, am: &Am<S, C>) -> Result<bool, AmError> {
        match self.state.get() {
            BarrierState::Idle => return Err(AmError::NoBarrier),
            BarrierState::Entered { .. } => {
                self.noted(am.poll_runtime().and_then(|_| self.advance(am)))?;
            }
            BarrierState::Complete => {}
        }
        let done = self.state.get() == BarrierState::Complete;
        if done {
            self.state.set(BarrierState::Idle);
        }
        Ok(done)
    }

    /// Waits for completion (see [`Am::barrier_wait`]).
    pub(super) fn wait<S, C: Conduit>(&self, am: &Am<S, C>) -> Result<(), AmError> {
        let waited = self.wait_rounds(am);
        self.noted(waited)
    }

    fn wait_rounds<S, C: Conduit>(&self, am: &Am<S, C>) -> Result<(), AmError> {
        loop {
            match self.state.get() {
                BarrierState::Idle => return Err(AmError::NoBarrier),
                BarrierState::Complete => break,
                // Nothing sent yet (the first send failed): send it now.
                BarrierState::Entered { sent: 0 } => self.advance(am)?,
                BarrierState::Entered { sent } => {
                    // The arrivals change only in the barrier handler: wait for the one
                    // the next round needs, then send that round outside the handler.
                    let (epoch, arrivals) = (self.epoch.get(), &self.arrivals);
                    let (me, n) = (am.rank(), am.size());
                    let partner = (me + n - (1 << (sent - 1)) % n) % n;
                    let heard = |_: &S| arrivals[sent - 1].get() >= epoch;
                    am.wait_on(partner, |s| heard(s) || am.returned(partner))?;
                    if !heard(am.state()) {
                        // Its arrivals came before its `RETURNED`: none is coming.
                        return Err(AmError::PeerReturned { rank: partner });
                    }
                    self.advance(am)?;
                }
            }
        }
        self.state.set(BarrierState::Idle);
        Ok(())
    }

    /// Sends every round whose previous round has been heard from, and marks the
    /// barrier complete once the last round has been heard from.
    fn advance<S, C: Conduit>(&self, am: &Am<S, C>) -> Result<(), AmError> {
        let BarrierState::Entered { mut sent } = self.state.get() else {
            return Ok(());
        };
        let (me, n, epoch) = (am.rank(), am.size(), self.epoch.get());
        let heard = |round: usize| self.arrivals[round].get() >= epoch;
        let rounds = self.arrivals.len();
        // Each rank hears from one partner per round and epoch, in order (one ring), so
        // a count reaching `epoch` means this epoch's message of that round is in.
        while sent < rounds && (sent == 0 || heard(sent - 1)) {
            let dest = (me + (1 << sent)) % n;
            am.send_request(dest, TAG_BARRIER, &[sent as u64], Payload::Inline(&[]))?;
            sent += 1;
            self.state.set(BarrierState::Entered { sent });
        }
        if rounds == 0 || (sent == rounds && heard(rounds - 1)) {
            self.state.set(BarrierState::Complete);
        }
        Ok(())
    }
}

/// Where this rank is in the split-phase barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BarrierState {
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
