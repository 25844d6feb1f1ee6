//! Leaving a job cleanly: a rank that has returned from its main goes on serving its
//! peers until the whole job is quiescent — every rank has returned, every message
//! sent has been handled — and only then leaves.
//!
//! Rings are FIFO per sender and queue, and handlers never send requests, so counting
//! the rank's own messages is not needed; markers settle it (its other threads'
//! requests travel in a shared ring: a `FLUSH` says how many were sent, the receiver
//! counts what it took; across hosts they leave through the rank's outbox as its own,
//! which it empties first):
//!
//! | step | sends (runtime request `EXIT`) | done when |
//! |---|---|---|
//! | flush | `FLUSH` to every rank it may have sent to (`Conduit::contacted`), answered by `EXIT_DONE` (a reply, after the replies it sent here, with how many of this rank's threads' requests it took: too few, and it is asked again) | every `EXIT_DONE` handled: all this rank's requests were handled and their replies are here |
//! | returned | `RETURNED` to the ranks whose barrier waits on this one (after its barrier messages) | at once |
//! | count | `UP` to its parent in the tree of `exit_tree.rs`: how many ranks of its part have returned and flushed; the root sends the totals `DOWN` | the totals say every rank has flushed: no request is left anywhere |
//! | close | the conduit lets its connections settle (`Conduit::quiescent`), then `UP` again, counting closed ranks | the totals say every rank has closed: nobody needs this rank, and no connection is still being set up |
//!
//! The end costs a rank a message per peer it sent to, ⌈log2 P⌉ `RETURNED`s and O(1)
//! in the tree, not one per rank of the job. A
//! rank that left the job early is not waited for (the tree skips it).
//!
//! A rank still running can tell when its wait cannot end: once every other rank has
//! flushed, a wait that finds nothing sends a `CHECK` round (a flush that does not
//! count as the exit's); when its answers are in and the condition still does not
//! hold, nothing can ever arrive ([`AmError::NothingCanArrive`]). A barrier that needs
//! a rank that has returned cannot complete ([`AmError::PeerReturned`]).

use super::exit_tree::{part, report_to};
use super::handlers::FIRST_USER_TAG;
use super::payload::Payload;
use super::{Am, AmError, Msg, ReplyHandler};
use crate::conduit::{Conduit, ConduitError, Rank};
use crate::util::heap_tree::{children_of, parent_of};
use crate::util::Backoff;
use std::cell::{Cell, RefCell};

pub(super) const TAG_EXIT: u16 = 13;
pub(super) const TAG_EXIT_DONE: u16 = 14;
const _: () = assert!(TAG_EXIT_DONE < FIRST_USER_TAG);

/// What an `EXIT` request says.
const RETURNED: u64 = 0;
const FLUSH: u64 = 1;
const CHECK: u64 = 2;
const UP: u64 = 3;
const DOWN: u64 = 4;

/// Ranks of a part of the tree, or of the job: how many have returned and finished
/// their flush, and how many have also closed (seen every rank flushed and let their
/// connections settle). Each part only grows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Count {
    flushed: u32,
    closed: u32,
}

impl Count {
    /// The same number of ranks in each part.
    fn all(n: u32) -> Self {
        Self {
            flushed: n,
            closed: n,
        }
    }

    fn add(self, o: Self) -> Self {
        Self {
            flushed: self.flushed.saturating_add(o.flushed),
            closed: self.closed.saturating_add(o.closed),
        }
    }

    /// The larger of the two, part by part.
    fn max(self, o: Self) -> Self {
        Self {
            flushed: self.flushed.max(o.flushed),
            closed: self.closed.max(o.closed),
        }
    }

    fn words(self) -> [u64; 2] {
        [self.flushed, self.closed].map(u64::from)
    }
}

/// This rank's place in the tree of the job's end, as it last worked it out.
#[derive(Debug)]
struct Place {
    /// Where it reports (`None`: it is the root).
    parent: Option<Rank>,
    /// The ranks it hears reports from.
    kids: Vec<Rank>,
    /// The ranks that left that it counts (as returned and flushed).
    skipped: u32,
    /// What it last reported, and to whom.
    sent_up: Option<(Rank, Count)>,
    /// The totals it last passed down to `kids`.
    sent_down: Count,
}

impl Place {
    /// Rank `me`'s place while no rank has left: worked out when the rank starts, so
    /// that the first count (which a long wait makes) allocates nothing.
    fn new(me: Rank, n: usize) -> Self {
        Self {
            parent: parent_of(me),
            kids: children_of(me, n).collect(),
            skipped: 0,
            sent_up: None,
            sent_down: Count::default(),
        }
    }
}

/// One rank's view of the job's end.
#[derive(Debug)]
pub(super) struct Exit {
    /// Per rank: its `RETURNED` was handled here.
    returned: Box<[Cell<bool>]>,
    /// Per rank: it answered this rank's current `FLUSH` or `CHECK` round.
    answered: Box<[Cell<bool>]>,
    /// Per rank: it answered this rank's current round before it had taken every
    /// request this rank's threads sent it: asked again.
    short: Box<[Cell<bool>]>,
    /// Per rank: the last count it reported here.
    reports: Box<[Cell<Count>]>,
    /// Per rank: known to have left the job.
    left: Box<[Cell<bool>]>,
    /// The ranks this rank's current round went to.
    asked: RefCell<Vec<Rank>>,
    /// The round of this rank's last `FLUSH` or `CHECK`.
    round: Cell<u32>,
    /// What this rank's current round is (`FLUSH` or `CHECK`).
    kind: Cell<u64>,
    /// This rank has returned (its end began).
    done: Cell<bool>,
    /// This rank's exit flush has been answered by all it asked.
    flushed: Cell<bool>,
    /// This rank has seen every rank flushed, and its connections have settled.
    closed: Cell<bool>,
    /// The job's totals as the root last sent them (the root: its own).
    totals: Cell<Count>,
    place: RefCell<Place>,
}

impl Exit {
    /// Rank `me`'s view in a job of `size` ranks.
    pub(super) fn new(me: Rank, size: usize) -> Self {
        let flags = || (0..size).map(|_| Cell::new(false)).collect();
        Self {
            returned: flags(),
            answered: flags(),
            short: flags(),
            reports: (0..size).map(|_| Cell::new(Count::default())).collect(),
            left: flags(),
            asked: RefCell::new(Vec::new()),
            round: Cell::new(0),
            kind: Cell::new(FLUSH),
            done: Cell::new(false),
            flushed: Cell::new(false),
            closed: Cell::new(false),
            totals: Cell::new(Count::default()),
            place: RefCell::new(Place::new(me, size)),
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
        let (me, n) = (self.rank(), self.size());
        if n == 1 && self.threads.sent_to(me) == 0 {
            return Ok(());
        }
        self.forward_threads()?;
        // The flush first: the peers the program sent to, not those told below.
        self.flush_round(FLUSH)?;
        // The ranks whose barrier waits on this one, in its round k: me + 2^k.
        for dest in (0..usize::BITS)
            .map_while(|k| 1usize.checked_shl(k).filter(|&d| d < n))
            .map(|d| (me + d) % n)
        {
            self.exit_to(dest, RETURNED, 0)?;
        }
        self.count_until(|totals| totals.flushed as usize >= n)?;
        // Every rank flushed: nothing is left to send but the count. The conduit lets
        // the connections of the last answers settle, and the ranks leave once all
        // have (a connection still being set up when its peer goes trips UCX).
        self.rq().conduit().quiescent();
        exit.closed.set(true);
        self.count_until(|totals| totals.closed as usize >= n)
    }

    /// Serves, asks again and counts until `done` holds of the job's totals.
    fn count_until(&self, done: impl Fn(Count) -> bool) -> Result<(), AmError> {
        let exit = &self.exit;
        let failed = Cell::new(None);
        self.wait_runtime(|_| {
            let counted = self.ask_again().and_then(|()| {
                if self.all_answered() {
                    exit.flushed.set(true);
                }
                self.count()
            });
            match counted {
                Ok(()) => done(exit.totals.get()),
                Err(e) => {
                    failed.set(Some(e));
                    true
                }
            }
        })?;
        failed.take().map_or(Ok(()), Err)
    }

    /// Sends on every frame this rank's threads left in its outbox (a job across
    /// hosts), serving the rank meanwhile: its flush must follow them.
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

    /// True once `rank` is known to have left the job (cached: it stays left).
    fn has_left(&self, rank: Rank) -> bool {
        let known = &self.exit.left[rank];
        if !known.get() && self.rq().conduit().peer_left(rank) {
            known.set(true);
        }
        known.get()
    }

    /// Asks again, in the current round, each rank that answered it before taking every
    /// request this rank's threads sent it (the threads' requests travel in another
    /// ring than the round's, so it may serve the round first).
    fn ask_again(&self) -> Result<(), AmError> {
        let exit = &self.exit;
        let round = u64::from(exit.round.get());
        let again: Vec<Rank> = exit
            .asked
            .borrow()
            .iter()
            .copied()
            .filter(|&r| exit.short[r].replace(false))
            .collect();
        for dest in again {
            self.exit_to(dest, exit.kind.get(), round)?;
        }
        Ok(())
    }

    /// True once every rank of the current round has answered it or left the job.
    fn all_answered(&self) -> bool {
        let exit = &self.exit;
        let me = self.rank();
        let asked = exit.asked.borrow();
        asked
            .iter()
            .all(|&r| exit.answered[r].get() || (r != me && self.has_left(r)))
    }

    /// Sends `EXIT(kind, round, requests this rank's threads sent it)` to `dest`,
    /// unless it has left the job.
    fn exit_to(&self, dest: Rank, kind: u64, round: u64) -> Result<(), AmError> {
        self.exit_message(dest, &[kind, round, self.threads.sent_to(dest)])
    }

    /// Sends `EXIT` with `args` to `dest`, unless it has left the job.
    fn exit_message(&self, dest: Rank, args: &[u64]) -> Result<(), AmError> {
        match self.send_request(dest, TAG_EXIT, args, Payload::Inline(&[])) {
            Err(e) if e.conduit() == Some(&ConduitError::PeerLeft { rank: dest }) => {
                self.exit.left[dest].set(true);
                Ok(())
            }
            sent => sent,
        }
    }

    /// Starts a `FLUSH` or `CHECK` round: every rank this rank may have sent to (and
    /// itself, if its threads sent it requests) answers once it has handled what this
    /// rank sent it before.
    fn flush_round(&self, kind: u64) -> Result<(), AmError> {
        let exit = &self.exit;
        let next = exit.round.get() % (Backoff::NO_CHECK - 1) + 1; // never 0 nor NO_CHECK
        exit.round.set(next);
        exit.kind.set(kind);
        exit.answered.iter().for_each(|a| a.set(false));
        exit.short.iter().for_each(|a| a.set(false));
        let (me, conduit, threads) = (self.rank(), self.rq().conduit(), &self.threads);
        let asked: Vec<Rank> = (0..self.size())
            .filter(|&r| {
                let sent = threads.sent_to(r) > 0;
                sent || (r != me && conduit.contacted(r) && !self.has_left(r))
            })
            .collect();
        for &dest in &asked {
            self.exit_to(dest, kind, u64::from(next))?;
        }
        *exit.asked.borrow_mut() = asked;
        Ok(())
    }

    /// One step of the count: works out this rank's place in the tree again if a
    /// parent or child left, reports its part's count up when it changed (the root
    /// keeps it as the totals), and passes the totals down once they say that every
    /// rank but one has flushed (what ends the job, or a wait that cannot end).
    fn count(&self) -> Result<(), AmError> {
        let exit = &self.exit;
        let (me, n) = (self.rank(), self.size());
        // Once the totals count every rank, ranks leave: only the totals go on down
        // (a parent that left then is not one to replace, nor to report to).
        let ended = || exit.totals.get().closed as usize >= n;
        let gone = {
            let place = exit.place.borrow();
            let mut near = place.parent.into_iter().chain(place.kids.iter().copied());
            !ended() && near.any(|r| self.has_left(r))
        };
        if gone {
            // What a neighbour sent before it left is handled first: the totals that
            // ended the job, if that is why it left (a goodbye is seen on arrival,
            // the messages before it only once polled).
            while self.poll_runtime()? > 0 {}
        }
        let ended = ended();
        if !ended && gone {
            let mut left = |r: Rank| self.has_left(r);
            let parent = report_to(me, n, &mut left);
            let (kids, skipped) = part(me, n, parent.is_none(), &mut left);
            let mut place = exit.place.borrow_mut();
            (place.parent, place.kids, place.skipped) = (parent, kids, skipped);
            place.sent_down = Count::default(); // new kids may not have had them
        }
        let (up, down) = {
            let place = exit.place.borrow();
            let own = Count {
                flushed: u32::from(exit.flushed.get()),
                closed: u32::from(exit.closed.get()),
            };
            let mine = place
                .kids
                .iter()
                .fold(own.add(Count::all(place.skipped)), |sum, &k| {
                    sum.add(exit.reports[k].get())
                });
            if place.parent.is_none() {
                exit.totals.set(exit.totals.get().max(mine));
            }
            let totals = exit.totals.get();
            let down = (totals.flushed as usize + 1 >= n && totals != place.sent_down)
                .then(|| (place.kids.clone(), totals));
            let up = place
                .parent
                .filter(|&p| !ended && place.sent_up != Some((p, mine)))
                .map(|p| (p, mine));
            (up, down)
        };
        if let Some((p, mine)) = up {
            let [a, b] = mine.words();
            self.exit_message(p, &[UP, a, b])?;
            exit.place.borrow_mut().sent_up = Some((p, mine));
        }
        if let Some((kids, totals)) = down {
            let [a, b] = totals.words();
            for k in kids {
                self.exit_message(k, &[DOWN, a, b])?;
            }
            exit.place.borrow_mut().sent_down = totals;
        }
        Ok(())
    }

    /// For the wait `backoff` belongs to, when it found nothing (`snooze_long`): once
    /// every other rank has flushed, a `CHECK` round of this wait's own (the program
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
        {
            return Ok(());
        }
        // This rank's part of the tree reports through it, running or not.
        self.count()?;
        if (exit.totals.get().flushed as usize) + 1 < self.size() {
            return Ok(());
        }
        if backoff.check_round == 0 || backoff.check_round != exit.round.get() {
            self.flush_round(CHECK)?;
            backoff.check_round = exit.round.get();
            return Ok(());
        }
        self.ask_again()?;
        match self.all_answered() {
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
                let count = || -> Result<Count, AmError> {
                    let word = |i| {
                        msg.arg(i).and_then(|v| {
                            u32::try_from(v)
                                .ok()
                                .filter(|&c| c as usize <= self.size())
                                .ok_or(AmError::BadRuntimeMessage {
                                    source_rank: source,
                                    what: "an exit count past the job's ranks",
                                })
                        })
                    };
                    Ok(Count {
                        flushed: word(1)?,
                        closed: word(2)?,
                    })
                };
                match msg.arg(0)? {
                    RETURNED => {
                        mark(&exit.returned);
                    }
                    FLUSH | CHECK => {
                        // With how many of its threads' requests this rank has taken:
                        // the answer counts once that is all it sent.
                        let done = ReplyHandler(TAG_EXIT_DONE);
                        let taken = self.rq().conduit().joined_taken(source);
                        let round = msg.arg(1)?;
                        self.send_reply(source, done, &[round, taken], Payload::Inline(&[]))?;
                    }
                    UP => {
                        if let Some(r) = exit.reports.get(source) {
                            r.set(r.get().max(count()?));
                        }
                    }
                    DOWN => exit.totals.set(exit.totals.get().max(count()?)),
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
