//! Leaving a job cleanly: a rank that has returned from its main goes on serving its
//! peers until the whole job is quiescent — every rank has returned, every message
//! sent has been handled — and only then leaves.
//!
//! Rings are FIFO per sender and queue, and handlers never send requests, so counting
//! messages is not needed; two markers per pair of ranks settle it:
//!
//! | step | sends (runtime request `EXIT`) | done when |
//! |---|---|---|
//! | returned | `RETURNED` to every other rank: after every request it sent them | every other rank's `RETURNED` handled here: all their requests to this rank were |
//! | flush | `FLUSH` to every other rank, answered by `EXIT_DONE` (a reply, after the replies it sent here) | every `EXIT_DONE` handled (all this rank's requests and their replies were), and every other rank's `FLUSH` served (nobody needs this rank any more) |
//!
//! A rank still running can tell when its wait cannot end: once every other rank has
//! returned, a wait that finds nothing sends a `CHECK` round (a flush that does not
//! count as the exit's); when its answers are in and the condition still does not
//! hold, nothing can ever arrive ([`AmError::NothingCanArrive`]). A barrier that needs
//! a rank that has returned cannot complete ([`AmError::PeerReturned`]).

use super::handlers::FIRST_USER_TAG;
use super::payload::Payload;
use super::{Am, AmError, Msg, ReplyHandler};
use crate::conduit::{Conduit, Rank};
use crate::util::Backoff;
use std::cell::Cell;

pub(super) const TAG_EXIT: u16 = 13;
pub(super) const TAG_EXIT_DONE: u16 = 14;
const _: () = assert!(TAG_EXIT_DONE < FIRST_USER_TAG);

/// What an `EXIT` request says.
const RETURNED: u64 = 0;
const FLUSH: u64 = 1;
const CHECK: u64 = 2;

/// One rank's view of the job's end.
#[derive(Debug)]
pub(super) struct Exit {
    /// Per rank: its `RETURNED` was handled here.
    returned: Box<[Cell<bool>]>,
    returned_count: Cell<usize>,
    /// Per rank: its exit `FLUSH` was served here.
    flushed: Box<[Cell<bool>]>,
    flushed_count: Cell<usize>,
    /// The round of this rank's last `FLUSH` or `CHECK`, and how many answered it.
    round: Cell<u32>,
    answered: Cell<usize>,
    /// This rank has returned (its `RETURNED` went out).
    done: Cell<bool>,
}

impl Exit {
    pub(super) fn new(size: usize) -> Self {
        let flags = || (0..size).map(|_| Cell::new(false)).collect();
        Self {
            returned: flags(),
            returned_count: Cell::new(0),
            flushed: flags(),
            flushed_count: Cell::new(0),
            round: Cell::new(0),
            answered: Cell::new(0),
            done: Cell::new(false),
        }
    }

    /// True once `rank`'s `RETURNED` was handled here.
    pub(super) fn has_returned(&self, rank: Rank) -> bool {
        self.returned.get(rank).is_some_and(Cell::get)
    }
}

impl<S, C: Conduit> Am<S, C> {
    /// Takes part in the job's end, serving the peers meanwhile: returns once the job is
    /// quiescent and this rank may leave. Called once, when the program is done with
    /// this rank (by the layer that owns this one, when the program lets go of it).
    pub(crate) fn quiesce(&self) -> Result<(), AmError> {
        let (exit, others) = (&self.exit, self.size() - 1);
        if exit.done.replace(true) || others == 0 {
            return Ok(());
        }
        self.to_others(RETURNED, 0)?;
        self.wait_runtime(|_| exit.returned_count.get() == others)?;
        self.flush_round(FLUSH)?;
        self.wait_runtime(|_| exit.answered.get() == others && exit.flushed_count.get() == others)
    }

    /// Sends `EXIT(kind, round)` to every other rank.
    fn to_others(&self, kind: u64, round: u64) -> Result<(), AmError> {
        let me = self.rank();
        for dest in (0..self.size()).filter(|&r| r != me) {
            let args = [kind, round];
            self.send_request(dest, TAG_EXIT, &args, Payload::Inline(&[]))?;
        }
        Ok(())
    }

    /// Starts a `FLUSH` or `CHECK` round: every other rank answers once it has handled
    /// what this rank sent it before.
    fn flush_round(&self, kind: u64) -> Result<(), AmError> {
        let exit = &self.exit;
        exit.round.set(exit.round.get() + 1);
        exit.answered.set(0);
        self.to_others(kind, u64::from(exit.round.get()))
    }

    /// For the wait `backoff` belongs to, when it found nothing (`snooze_long`): once
    /// every other rank has returned, a `CHECK` round of this wait's own (the program
    /// may have sent requests before it); when all have answered, nothing can arrive
    /// any more. `Ok` while the wait may still end.
    #[cold]
    pub(super) fn check_stuck(&self, backoff: &mut Backoff) -> Result<(), AmError> {
        let (exit, others) = (&self.exit, self.size() - 1);
        if others == 0 || exit.done.get() || exit.returned_count.get() < others {
            return Ok(());
        }
        if backoff.check_round == 0 || backoff.check_round != exit.round.get() {
            self.flush_round(CHECK)?;
            backoff.check_round = exit.round.get();
            return Ok(());
        }
        match exit.answered.get() == others {
            true => Err(AmError::NothingCanArrive { rank: self.rank() }),
            false => Ok(()),
        }
    }

    /// True if `rank` has returned from its main.
    pub(super) fn returned(&self, rank: Rank) -> bool {
        self.exit.has_returned(rank)
    }

    /// Serves an `EXIT` request or lands an `EXIT_DONE`; `false` if `tag` is neither.
    pub(super) fn serve_exit(
        &self,
        is_request: bool,
        tag: u16,
        msg: Msg<'_>,
    ) -> Result<bool, AmError> {
        let exit = &self.exit;
        let source = msg.source();
        let seen = |flags: &[Cell<bool>], count: &Cell<usize>| {
            if flags.get(source).is_some_and(|f| !f.replace(true)) {
                count.set(count.get() + 1);
            }
        };
        match (tag, is_request) {
            (TAG_EXIT, true) => {
                let (kind, round) = (msg.arg(0)?, msg.arg(1)?);
                match kind {
                    RETURNED => seen(&exit.returned, &exit.returned_count),
                    FLUSH | CHECK => {
                        if kind == FLUSH {
                            seen(&exit.flushed, &exit.flushed_count);
                        }
                        let done = ReplyHandler(TAG_EXIT_DONE);
                        self.send_reply(source, done, &[round], Payload::Inline(&[]))?;
                    }
                    _ => {
                        return Err(AmError::BadRuntimeMessage {
                            source_rank: source,
                            what: "an exit message of no kind",
                        })
                    }
                }
                Ok(true)
            }
            (TAG_EXIT_DONE, false) => {
                if msg.arg(0)? == u64::from(exit.round.get()) {
                    exit.answered.set(exit.answered.get() + 1);
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
