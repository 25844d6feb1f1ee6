//! Calls in flight: the caller's table of them, which their answers fill, and the
//! pending answer a program waits for or awaits.
//!
//! Each call has a slot until its answer is taken or, once its [`Pending`] is dropped,
//! until the answer arrives; slots are reused, so calls in the steady state allocate
//! nothing. A slot's generation is in the call's word, so that an answer for a slot
//! given up on is never taken for a later call's.

use super::args::Args;
use super::{Am, AmError, RequestFailure};
use crate::conduit::ring::MAX_ARGS;
use crate::conduit::{Conduit, ConduitError, Rank};
use std::marker::PhantomData;
use std::task::{Context, Poll};

/// A call in flight, named by its slot and the slot's generation (odd: never 0, so
/// that a call's word is never 0, which a failure notice reads as "not a call", and a
/// `Pending` whose answer is taken can mark itself with 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallId {
    slot: u32,
    generation: u32,
}

impl CallId {
    /// The word that names it in frames: generation above, slot below.
    pub(crate) fn word(self) -> u64 {
        u64::from(self.generation) << 32 | u64::from(self.slot)
    }
}

/// Where a call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    #[default]
    Free,
    /// Sent; its answer is awaited.
    Waiting,
    /// Its `Pending` was dropped before the answer came: the slot is freed when it
    /// does.
    Abandoned,
    /// Answered: the slot's words hold the answer.
    Answered,
    /// The target could not run it: the slot's failure says why.
    Failed,
    /// Sent; its outcome goes to the slot's landing (a job with a progress engine),
    /// and the slot is freed when it comes.
    Detached,
}

/// No slot: the end of the free list.
const NONE: u32 = u32::MAX;

/// One call's slot. Kept small and flat (a phase byte, the answer's words in place),
/// so that a call writes a few words where it opens, lands and is taken.
#[derive(Debug)]
pub(super) struct Slot {
    generation: u32,
    phase: Phase,
    /// Words of the answer.
    len: u8,
    /// The next free slot, while this one is free.
    next_free: u32,
    /// The rank the call went to (the only one whose answer it takes).
    pub(super) target: Rank,
    /// Polls of `Pending`s of this slot as futures that found no answer (only ever
    /// read modulo [`LOOKS_PER_CHECK`]: not reset per call).
    looks: u32,
    words: [u64; MAX_ARGS - 1],
    failure: Option<Box<RequestFailure>>,
    /// Where a detached call's outcome goes.
    landing: Option<std::sync::Arc<super::landing::Landing>>,
}

/// A rank's [`Calls`], borrowed only by [`CallTable::with`]: a `RefCell`'s flag cost
/// three borrows per call, and nothing here needs it.
#[derive(Debug, Default)]
pub(super) struct CallTable(std::cell::UnsafeCell<Calls>);

impl CallTable {
    /// `f` of the table. `f` is one of the runtime's closures (this module's,
    /// `call.rs`'s, `failure.rs`'s), which call only `Calls`'s methods.
    #[inline(always)]
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Calls) -> T) -> T {
        // SAFETY: the table is a field of an `Am`, which is not `Sync`: one thread at a
        // time reaches it (the rank's; with a progress engine, the token's holder). `f`
        // calls only `Calls`'s methods, which run no handler, wake no task and do not
        // reach the table again, so this is the only reference while it lives.
        f(unsafe { &mut *self.0.get() })
    }

    /// Lands the outcomes of detached calls the table took (waking their waiters),
    /// outside the table's borrow.
    #[cold]
    #[inline(never)]
    pub(super) fn land_taken(&self) {
        for (landing, outcome) in self.with(|c| std::mem::take(&mut c.to_land)) {
            landing.land(outcome);
        }
    }
}

/// An answer as it landed: its length, its words, and the rank that sent it.
type Landed = (usize, [u64; MAX_ARGS - 1], Rank);

/// The caller's table of calls in flight, with an intrusive free list.
#[derive(Debug)]
pub(super) struct Calls {
    slots: Vec<Slot>,
    /// The first free slot, or [`NONE`].
    free: u32,
    /// Outcomes of detached calls taken from their slots, to land once the table is no
    /// longer borrowed (landing wakes a task: the program's code).
    to_land: Vec<(
        std::sync::Arc<super::landing::Landing>,
        super::landing::Outcome,
    )>,
}

impl Default for Calls {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: NONE,
            to_land: Vec::new(),
        }
    }
}

/// What an answer found in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answered {
    /// No call in flight to its sender names it.
    No,
    /// Its call's slot holds it (or it was dropped).
    Here,
    /// Its call is detached: land what the table holds for landing
    /// ([`CallTable::land_taken`]).
    Elsewhere,
}

impl Calls {
    /// A slot for a call to `target`.
    #[inline(always)]
    pub(super) fn open(&mut self, target: Rank) -> CallId {
        let slot = match self.free {
            NONE => self.grow(),
            free => free,
        };
        let s = self.slot(slot);
        let next = s.next_free;
        // Odd, as it started, and below 2^31: a word with its top bit set is a call of
        // another thread's (`thread_calls.rs`).
        s.generation = s.generation.wrapping_add(2) & 0x7fff_ffff;
        (s.target, s.phase) = (target, Phase::Waiting);
        let generation = s.generation;
        self.free = next;
        CallId { slot, generation }
    }

    #[cold]
    fn grow(&mut self) -> u32 {
        let slot = u32::try_from(self.slots.len())
            .ok()
            .filter(|&s| s != NONE)
            .expect("fewer than 2^32 - 1 calls in flight");
        self.slots.push(Slot {
            generation: 1,
            phase: Phase::Free,
            len: 0,
            next_free: NONE,
            target: 0,
            looks: 0,
            words: [0; MAX_ARGS - 1],
            failure: None,
            landing: None,
        });
        slot
    }

    /// A slot for a call to `target` whose outcome goes to `landing`.
    pub(super) fn open_detached(
        &mut self,
        target: Rank,
        landing: std::sync::Arc<super::landing::Landing>,
    ) -> CallId {
        let id = self.open(target);
        let s = self.slot(id.slot);
        (s.phase, s.landing) = (Phase::Detached, Some(landing));
        id
    }

    /// The slot of `id` (made by `open`: slots are never removed).
    #[inline(always)]
    pub(super) fn slot(&mut self, slot: u32) -> &mut Slot {
        debug_assert!((slot as usize) < self.slots.len());
        // SAFETY: `slot` is a slot `open` or `awaiting` found in the table, which only
        // grows.
        unsafe { self.slots.get_unchecked_mut(slot as usize) }
    }

    /// Frees slot `slot`.
    #[inline(always)]
    fn free(&mut self, slot: u32) {
        let free = self.free;
        let s = self.slot(slot);
        debug_assert!(s.phase != Phase::Free, "a call's slot freed twice");
        (s.phase, s.next_free) = (Phase::Free, free);
        self.free = slot;
    }

    /// Frees `id`'s slot.
    #[inline(always)]
    pub(super) fn close(&mut self, id: CallId) {
        self.free(id.slot);
    }

    /// The slot of the call `word` names, if `source` may answer it.
    #[inline(always)]
    fn awaiting(&mut self, word: u64, source: Rank) -> Option<&mut Slot> {
        let (slot, generation) = (word as u32, (word >> 32) as u32);
        self.slots.get_mut(slot as usize).filter(|s| {
            s.generation == generation
                && s.target == source
                && matches!(s.phase, Phase::Waiting | Phase::Abandoned | Phase::Detached)
        })
    }

    /// A `CALL_DONE` reply of `source` (the call's word, then the answer's); false if
    /// it answers no call in flight to `source`.
    #[inline(always)]
    pub(super) fn answer(&mut self, source: Rank, args: &[u64]) -> Answered {
        let Some((&word, answer)) = args.split_first() else {
            return Answered::No;
        };
        let Some(s) = self.awaiting(word, source) else {
            return Answered::No;
        };
        if s.phase != Phase::Waiting {
            return self.answer_elsewhere(word as u32, answer);
        }
        let len = answer.len().min(s.words.len());
        match answer {
            [one] => s.words[0] = *one, // the usual answer: no copy of a varying length
            _ => s.words[..len].copy_from_slice(&answer[..len]),
        }
        (s.len, s.phase) = (len as u8, Phase::Answered);
        Answered::Here
    }

    /// The answer of an abandoned call (dropped) or a detached one (kept to land);
    /// either way the slot is freed.
    #[cold]
    #[inline(never)]
    fn answer_elsewhere(&mut self, slot: u32, answer: &[u64]) -> Answered {
        if self.slot(slot).phase == Phase::Abandoned {
            self.free(slot);
            return Answered::Here;
        }
        let mut words = [0; MAX_ARGS - 1];
        let len = answer.len().min(words.len());
        words[..len].copy_from_slice(&answer[..len]);
        self.land_detached(slot, Ok((len, words)));
        Answered::Elsewhere
    }

    /// Frees detached call `slot`'s slot and keeps `outcome` to land in its landing.
    fn land_detached(&mut self, slot: u32, outcome: super::landing::Outcome) {
        if let Some(landing) = self.slot(slot).landing.take() {
            self.to_land.push((landing, outcome));
        }
        self.free(slot);
    }

    /// Closes detached call `id`, whose request could not be sent (nothing to land).
    pub(super) fn close_detached(&mut self, id: CallId) {
        self.slot(id.slot).landing = None;
        self.close(id);
    }

    /// Takes every detached call whose target `why` says cannot answer (its error), or
    /// all of them with `why`'s error for any target: their slots are freed and their
    /// outcomes kept to land.
    pub(super) fn give_up_detached(&mut self, why: &mut dyn FnMut(Rank) -> Option<AmError>) {
        for slot in 0..self.slots.len() as u32 {
            let s = self.slot(slot);
            if s.phase != Phase::Detached {
                continue;
            }
            if let Some(e) = why(s.target) {
                self.land_detached(slot, Err(e));
            }
        }
    }

    /// A failure notice of `source` for the call `word` names.
    pub(super) fn fail(
        &mut self,
        word: u64,
        source: Rank,
        failure: Box<RequestFailure>,
    ) -> Result<(), AmError> {
        let Some(s) = self.awaiting(word, source) else {
            return Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "a failure notice for no call in flight to it",
            });
        };
        match s.phase {
            Phase::Abandoned => self.free(word as u32),
            Phase::Detached => {
                self.land_detached(word as u32, Err(AmError::RequestFailed(failure)))
            }
            _ => (s.failure, s.phase) = (Some(failure), Phase::Failed),
        }
        Ok(())
    }

    /// The slot of `id`, a call whose `Pending` has not been taken (the callers
    /// check: a slot is reused only once its `Pending` is taken or dropped).
    #[inline(always)]
    fn of(&mut self, id: CallId) -> &mut Slot {
        let s = self.slot(id.slot);
        debug_assert_eq!(
            s.generation, id.generation,
            "a Pending used after it completed"
        );
        s
    }

    /// True once `id` is answered or failed.
    #[inline(always)]
    fn done(&mut self, id: CallId) -> bool {
        matches!(self.of(id).phase, Phase::Answered | Phase::Failed)
    }

    /// `id`'s answer as words, if it is answered (then its slot is free). The words
    /// are decoded outside the table: decoding is the program's code ([`Args`]).
    #[inline(always)]
    fn take_words(&mut self, id: CallId) -> Option<Landed> {
        let s = self.of(id);
        if s.phase != Phase::Answered {
            return None;
        }
        let words = (usize::from(s.len), s.words, s.target);
        self.free(id.slot);
        Some(words)
    }

    /// `id`'s outcome, if it is done (then its slot is free).
    fn take(&mut self, id: CallId) -> Option<Result<Landed, Box<RequestFailure>>> {
        let s = self.of(id);
        let outcome = match s.phase {
            Phase::Answered => Ok((usize::from(s.len), s.words, s.target)),
            Phase::Failed => Err(s.failure.take().expect("a failed call holds its failure")),
            _ => return None,
        };
        self.free(id.slot);
        Some(outcome)
    }

    /// `id`'s `Pending` is dropped: freed if its outcome is in or `gone` (its target
    /// left: no answer can come), else freed when the answer comes.
    fn abandon(&mut self, id: CallId, gone: bool) {
        match gone || self.done(id) {
            true => {
                self.of(id).failure = None;
                self.close(id)
            }
            false => self.of(id).phase = Phase::Abandoned,
        }
    }

    /// Calls in flight or answered and not taken.
    pub(super) fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.phase != Phase::Free).count()
    }
}

/// The answer of a call ([`Am::call`]), pending: [`Pending::wait`] blocks for it, and
/// `.await` awaits it.
///
/// **Awaiting.** A `Pending` that is polled and finds no answer runs one poll of the
/// rank (its handlers run, other calls' answers land) and wakes its own task before it
/// returns, so that it never parks forever under any executor: the executor polls it
/// again at once. The cost is that a task awaiting an answer keeps its thread busy, as
/// [`Pending::wait`] does while it spins; give the executor other tasks to run between
/// polls, or wait where nothing else is to be done. A `Pending` borrows its rank,
/// which one thread owns, so it is not `Send`: a single-threaded executor awaits it (a
/// `block_on`, tokio's current-thread runtime or `LocalSet`, smol's `LocalExecutor`).
///
/// **Dropping** a `Pending` before its answer does not cancel the call: the handler
/// still runs at the target, and its answer (or failure) is discarded when it arrives,
/// freeing the call's slot (at once if the target has left the job). Nothing is
/// reported.
///
/// ```
/// use amrq::prelude::*;
/// use std::cell::Cell;
/// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
///     let mut t = HandlerTable::new();
///     let bump = t.call("bump", |n: &Cell<u32>, _ctx, (): ()| Ok(n.replace(n.get() + 1)));
///     let am = setup.start(t, Cell::new(0))?;
///     if am.rank() == 0 {
///         drop(am.call(1, bump, ())?); // runs at rank 1; its answer is dropped
///         let second = am.call(1, bump, ())?;
///         assert_eq!(second.wait()?, 1); // the first one ran
///     }
///     Ok(am.barrier()?)
/// })
/// .unwrap();
/// ```
///
/// Not `Send`:
///
/// ```compile_fail
/// fn needs_send<T: Send>(_: T) {}
/// fn hand_over(p: amrq::am::Pending<'_, u64, ()>) {
///     needs_send(p); // error: the rank's state cannot be shared between threads
/// }
/// ```
#[must_use = "a call's answer is lost unless it is waited for or awaited"]
pub struct Pending<'a, R, S, C: Conduit = crate::conduit::mem::MemConduit> {
    am: &'a Am<S, C>,
    /// Its call; generation 0 once the outcome is taken (nothing left to drop).
    id: CallId,
    answer: PhantomData<fn() -> R>,
}

/// Polls of a `Pending` between checks that its target is still in the job.
const LOOKS_PER_CHECK: u32 = 1024;

impl<'a, R: Args, S, C: Conduit> Pending<'a, R, S, C> {
    pub(super) fn new(am: &'a Am<S, C>, id: CallId) -> Self {
        Self {
            am,
            id,
            answer: PhantomData,
        }
    }

    /// The rank the call went to.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let one = t.call("one", |_s: &(), _ctx, (): ()| Ok(1u8));
    ///     let am = setup.start(t, ())?;
    ///     let p = am.call(0, one, ())?;
    ///     assert_eq!(p.target(), 0);
    ///     Ok(assert_eq!(p.wait()?, 1))
    /// })
    /// .unwrap();
    /// ```
    pub fn target(&self) -> Rank {
        self.live();
        self.am.calls.with(|c| c.of(self.id).target)
    }

    /// Panics for a `Pending` whose outcome was taken (a future polled to completion,
    /// then used again): its slot may be another call's by now.
    #[inline(always)]
    fn live(&self) {
        assert!(self.id.generation != 0, "a Pending used after it completed");
    }

    /// True once the answer (or the failure) is in: [`Pending::wait`] then returns at
    /// once. Does not poll.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let rank = t.call("rank", |_s: &(), ctx, (): ()| Ok(1 - ctx.source()));
    ///     let am = setup.start(t, ())?;
    ///     let p = am.call(1 - am.rank(), rank, ())?;
    ///     while !p.is_ready() {
    ///         am.poll()?; // work between looks
    ///     }
    ///     assert_eq!(p.wait()?, 1 - am.rank());
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn is_ready(&self) -> bool {
        self.live();
        self.am.calls.with(|c| c.done(self.id))
    }

    /// Waits for the answer, running handlers meanwhile (spinning a bounded time, then
    /// sleeping until a message arrives). [`AmError::RequestFailed`] if the target
    /// could not run the call (no such handler there, args that do not decode, the
    /// handler's error); [`ConduitError::PeerLeft`] if the target left the job without
    /// answering, `PeerDead` if it failed. Another request's failure that arrives
    /// meanwhile is kept for the program's next poll or wait; any other error of a
    /// handler this wait runs (a reply handler's own) ends it, as it ends any wait, and
    /// the call is then given up as a dropped one is.
    ///
    /// # Panics
    /// For a `Pending` whose outcome was already taken (a future polled to completion).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let neg = t.call("neg", |_s: &(), _ctx, x: f64| Ok(-x));
    ///     let am = setup.start(t, ())?;
    ///     assert_eq!(am.call(1 - am.rank(), neg, 2.5)?.wait()?, -2.5);
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn wait(mut self) -> Result<R, AmError> {
        self.live();
        match self.take_answer() {
            Some(r) => r,
            None => self.wait_slow(),
        }
    }

    /// [`Pending::wait`] past its first look.
    #[inline(always)]
    fn wait_slow(&mut self) -> Result<R, AmError> {
        // With many calls in flight, the answers that have arrived land together.
        self.am.take_replies()?;
        if let Some(r) = self.take_answer() {
            return r;
        }
        let (calls, id, target) = (&self.am.calls, self.id, self.target());
        if let Err(e) = self.am.wait_on(target, |_| calls.with(|c| c.done(id))) {
            if no_answer_can_come(&e, target) {
                self.id.generation = 0;
                calls.with(|c| c.close(id));
            }
            return Err(e);
        }
        self.take().expect("done")
    }

    /// The answer, decoded, if it is in (then the call's slot is free): the fast path.
    #[inline(always)]
    fn take_answer(&mut self) -> Option<Result<R, AmError>> {
        let landed = self.am.calls.with(|c| c.take_words(self.id))?;
        self.id.generation = 0;
        Some(decode(landed))
    }

    /// The outcome, if it is in (then the call's slot is free).
    fn take(&mut self) -> Option<Result<R, AmError>> {
        let outcome = self.am.calls.with(|c| c.take(self.id))?;
        self.id.generation = 0;
        Some(match outcome {
            Ok(landed) => decode(landed),
            Err(failure) => Err(AmError::RequestFailed(failure)),
        })
    }

    /// Once per [`LOOKS_PER_CHECK`] empty polls: an error if the target has failed,
    /// or left with no answer in.
    #[cold]
    fn check_target(&mut self) -> Result<(), AmError> {
        let conduit = self.am.rq().conduit();
        conduit.check_peers()?;
        let target = self.target();
        if conduit.peer_left(target) {
            self.am.poll_runtime()?; // what it sent before leaving
            if !self.is_ready() {
                self.am.calls.with(|c| c.close(self.id));
                self.id.generation = 0;
                return Err(ConduitError::PeerLeft { rank: target }.into());
            }
        }
        Ok(())
    }
}

impl<R: Args, S, C: Conduit> std::future::Future for Pending<'_, R, S, C> {
    type Output = Result<R, AmError>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.live();
        if let Some(r) = this.take_answer() {
            return Poll::Ready(r);
        }
        if let Err(e) = this.am.poll_runtime() {
            return Poll::Ready(Err(e));
        }
        if let Some(outcome) = this.take() {
            return Poll::Ready(outcome);
        }
        let looks = this.am.calls.with(|c| {
            let s = c.slot(this.id.slot);
            s.looks = s.looks.wrapping_add(1);
            s.looks
        });
        if looks.is_multiple_of(LOOKS_PER_CHECK) {
            if let Err(e) = this.check_target() {
                return Poll::Ready(Err(e));
            }
        }
        cx.waker().wake_by_ref(); // self-waking: see the type's docs
        Poll::Pending
    }
}

impl<R, S, C: Conduit> Drop for Pending<'_, R, S, C> {
    fn drop(&mut self) {
        if self.id.generation != 0 {
            let target = self.am.calls.with(|c| c.of(self.id).target);
            let gone = self.am.rq().conduit().peer_left(target);
            self.am.calls.with(|c| c.abandon(self.id, gone));
        }
    }
}

impl<R, S, C: Conduit> std::fmt::Debug for Pending<'_, R, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// An answer as an `R`; words that do not decode are its sender's fault.
#[inline(always)]
fn decode<R: Args>((len, words, target): Landed) -> Result<R, AmError> {
    R::from_words(&words[..len]).map_err(|e| e.of(target, len))
}

/// True if `e`, ending a wait for `target`'s answer, means none can come: the target
/// left or failed, or nothing can arrive at all.
fn no_answer_can_come(e: &AmError, target: Rank) -> bool {
    use ConduitError::{AllPeersLeft, PeerDead, PeerLeft};
    match e.conduit() {
        Some(PeerLeft { rank } | PeerDead { rank, .. }) => *rank == target,
        Some(AllPeersLeft) => true,
        _ => matches!(e, AmError::NothingCanArrive { .. }),
    }
}
