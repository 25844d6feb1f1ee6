//! Leaving a job cleanly: a rank that has returned from its main goes on serving its
//! peers until the whole job is quiescent — every rank has returned, every message
//! sent has been handled — and only then leaves.
//!
//! Rings are FIFO per sender and queue, and handlers never send requests, so counting
//! the rank's own messages is not needed; markers settle it (its other threads'
//! requests travel in a shared ring: `RETURNED` says how many were sent, and the
//! receiver counts what it took; across hosts they leave through the rank's outbox as
//! its own, which it empties before its `RETURNED`):
//!
//! | step | sends (runtime request `EXIT`) | done when |
//! |---|---|---|
//! | returned | `RETURNED` to every other rank: after every request it sent them | every other rank's `RETURNED` handled here, and as many of its threads' requests taken as it says: all their requests to this rank were |
//! | flush | `FLUSH` to every other rank, answered by `EXIT_DONE` (a reply, after the replies it sent here, with how many of this rank's threads' requests it took: too few, and it is asked again) | every `EXIT_DONE` handled (all this rank's requests and their replies were), and every other rank's `FLUSH` served (nobody needs this rank any more) |
//!
//! Three messages per pair of ranks, each way; a rank that left the job early is not
//! waited for.
//!
//! A rank still running can tell when its wait cannot end: once every other rank has
//! returned, a wait that finds nothing sends a `CHECK` round (a flush that does not
//! count as the exit's); when its answers are in and the condition still does not
//! hold, nothing can ever arrive ([`AmError::NothingCanArrive`]). A barrier that needs
//! a rank that has returned cannot complete ([`AmError::PeerReturned`]).

use super::handlers::FIRST_USER_TAG;
use super::payload::Payload;
use super::{Am, AmError, Msg, ReplyHandler};
use crate::conduit::{Conduit, ConduitError, Rank};
use crate::util::Backoff;
use std::cell::Cell;

pub(super) const TAG_EXIT: u16 = 13;
pub(super) const TAG_EXIT_DONE: u16 = 14;
const _: () = assert!(TAG_EXIT_DONE < FIRST_USER_TAG);

/// What an `EXIT` request says.
const RETURNED: u64 = 0;
const FLUSH: u64 = 1;
const CHECK: u64 = 2;

/// One rank's view of the job's end: per rank, what has been heard from it.
#[derive(Debug)]
pub(super) struct Exit {
    /// Its `RETURNED` was handled here.
    returned: Box<[Cell<bool>]>,
    /// Its exit `FLUSH` was served here.
    flushed: Box<[Cell<bool>]>,
    /// It answered this rank's current `FLUSH` or `CHECK` round.
    answered: Box<[Cell<bool>]>,
    /// The round of this rank's last `FLUSH` or `CHECK`.
    round: Cell<u32>,
    /// This rank has returned (its `RETURNED` went out).
    done: Cell<bool>,
    /// Requests its threads sent this rank, as its `RETURNED` said.
    from_threads: Box<[Cell<u64>]>,
    /// It answered this rank's current round before it had taken every request this
    /// rank's threads sent it: asked again.
    short: Box<[Cell<bool>]>,
    /// What this rank's current round is (`FLUSH` or `CHECK`).
    kind: Cell<u64>,
}

impl Exit {
    pub(super) fn new(size: usize) -> Self {
        let flags = || (0..size).map(|_| Cell::new(false)).collect();
        Self {
            returned: flags(),
            flushed: flags(),
            answered: flags(),
            round: Cell::new(0),
            done: Cell::new(false),
            from_threads: (0..size).map(|_| Cell::new(0)).collect(),
            short: flags(),
            kind: Cell::new(FLUSH),
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
    /// this rank (by the layer that owns this one, when the program lets go of it). A
    /// peer that has left the job (early, without taking part) is not waited for.
    pub(crate) fn quiesce(&self) -> Result<(), AmError> {
        let exit = &self.exit;
        if exit.done.replace(true) {
            return Ok(());
        }
        // This rank's threads' requests to itself are served before it leaves too, and
        // their replies run: a flush of its own follows them in its reply ring.
        let me = self.rank();
        let to_self = self.threads.sent_to(me);
        exit.from_threads[me].set(to_self);
        if self.size() == 1 && to_self == 0 {
            return Ok(());
        }
        self.forward_threads()?;
        self.to_others(RETURNED, 0)?;
        self.wait_runtime(|_| self.all_returned())?;
        self.flush_round(FLUSH)?;
        if to_self > 0 {
            self.exit_to(me, FLUSH, u64::from(exit.round.get()))?;
        }
        let failed = Cell::new(None);
        self.wait_runtime(|_| match self.ask_again() {
            Ok(()) => {
                self.heard_from_all(&exit.answered)
                    && self.heard_from_all(&exit.flushed)
                    && (to_self == 0 || exit.answered[me].get())
            }
            Err(e) => {
                failed.set(Some(e));
                true
            }
        })?;
        failed.take().map_or(Ok(()), Err)
    }

    /// Sends on every frame this rank's threads left in its outbox (a job across
    /// hosts), serving the rank meanwhile: its `RETURNED` must follow them.
    fn forward_threads(&self) -> Result<(), AmError> {
        let failed = Cell::new(None);
        let conduit = self.rq().conduit();
        self.wait_runtime(|_| {
            conduit.forward_threads().unwrap_or_else(|e| {
                failed.set(Some(e));
                true
            })
        })?;
        failed.take().map_or(Ok(()), |e| Err(e.into()))
    }

    /// Asks again, in the current round, each rank that answered it before taking every
    /// request this rank's threads sent it (the threads' requests travel in another
    /// ring than the round's, so it may serve the round first).
    fn ask_again(&self) -> Result<(), AmError> {
        let exit = &self.exit;
        let round = u64::from(exit.round.get());
        for dest in (0..self.size()).filter(|&r| exit.short[r].replace(false)) {
            self.exit_to(dest, exit.kind.get(), round)?;
        }
        Ok(())
    }

    /// True if every other rank has set its flag in `flags`, or left the job without
    /// taking part in its end (no `RETURNED` from it). A rank that took part leaves
    /// only after it has served this rank's `FLUSH`, so its answers are heard first.
    fn heard_from_all(&self, flags: &[Cell<bool>]) -> bool {
        let (me, conduit, exit) = (self.rank(), self.rq().conduit(), &self.exit);
        (0..self.size())
            .all(|r| r == me || flags[r].get() || (!exit.returned[r].get() && conduit.peer_left(r)))
    }

    /// True if every other rank has returned (or left without taking part) and this
    /// rank has taken every request its other threads sent here: they travel in
    /// another ring than its `RETURNED`, which says how many there were.
    fn all_returned(&self) -> bool {
        let conduit = self.rq().conduit();
        let threads_done = |r: Rank| conduit.joined_taken(r) >= self.exit.from_threads[r].get();
        self.heard_from_all(&self.exit.returned) && (0..self.size()).all(threads_done)
    }

    /// Sends `EXIT(kind, round, requests this rank's threads sent it)` to every other
    /// rank still in the job.
    fn to_others(&self, kind: u64, round: u64) -> Result<(), AmError> {
        let me = self.rank();
        for dest in (0..self.size()).filter(|&r| r != me) {
            self.exit_to(dest, kind, round)?;
        }
        Ok(())
    }

    /// Sends `EXIT(kind, round, requests this rank's threads sent it)` to `dest`,
    /// unless it has left the job.
    fn exit_to(&self, dest: Rank, kind: u64, round: u64) -> Result<(), AmError> {
        let args = [kind, round, self.threads.sent_to(dest)];
        match self.send_request(dest, TAG_EXIT, &args, Payload::Inline(&[])) {
            Err(e) if e.conduit() == Some(&ConduitError::PeerLeft { rank: dest }) => Ok(()),
            sent => sent,
        }
    }

    /// Starts a `FLUSH` or `CHECK` round: every other rank answers once it has handled
    /// what this rank sent it before.
    fn flush_round(&self, kind: u64) -> Result<(), AmError> {
        let exit = &self.exit;
        let next = exit.round.get() % (Backoff::NO_CHECK - 1) + 1; // never 0 nor NO_CHECK
        exit.round.set(next);
        exit.kind.set(kind);
        exit.answered.iter().for_each(|a| a.set(false));
        exit.short.iter().for_each(|a| a.set(false));
        self.to_others(kind, u64::from(exit.round.get()))
    }

    /// For the wait `backoff` belongs to, when it found nothing (`snooze_long`): once
    /// every other rank has returned, a `CHECK` round of this wait's own (the program
    /// may have sent requests before it); when all have answered, nothing can arrive
    /// any more. `Ok` while the wait may still end. Not for waits whose condition
    /// something else than this rank's handlers makes true ([`Backoff::no_check`]).
    #[cold]
    pub(super) fn check_stuck(&self, backoff: &mut Backoff) -> Result<(), AmError> {
        let exit = &self.exit;
        if backoff.check_round == Backoff::NO_CHECK
            || exit.done.get()
            || self.size() == 1
            || self.threads.any_alive()
            || !self.all_returned()
        {
            return Ok(());
        }
        if backoff.check_round == 0 || backoff.check_round != exit.round.get() {
            self.flush_round(CHECK)?;
            backoff.check_round = exit.round.get();
            return Ok(());
        }
        self.ask_again()?;
        match self.heard_from_all(&exit.answered) {
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
        let mark = |flags: &[Cell<bool>]| flags.get(source).map(|f| f.set(true));
        match (tag, is_request) {
            (TAG_EXIT, true) => {
                let (kind, round) = (msg.arg(0)?, msg.arg(1)?);
                match kind {
                    RETURNED => {
                        if let Some(n) = exit.from_threads.get(source) {
                            n.set(msg.arg(2)?);
                        }
                        mark(&exit.returned);
                    }
                    FLUSH | CHECK => {
                        if kind == FLUSH {
                            mark(&exit.flushed);
                        }
                        // With how many of its threads' requests this rank has taken:
                        // the answer counts once that is all it sent.
                        let done = ReplyHandler(TAG_EXIT_DONE);
                        let taken = self.rq().conduit().joined_taken(source);
                        self.send_reply(source, done, &[round, taken], Payload::Inline(&[]))?;
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
                    let flags = match msg.arg(1)? >= self.threads.sent_to(source) {
                        true => &exit.answered,
                        false => &exit.short,
                    };
                    mark(flags);
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
