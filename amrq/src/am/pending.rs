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

/// A call in flight, named by its slot and the slot's generation (never 0, so that a
/// call's word is never 0, which a failure notice reads as "not a call").
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
#[derive(Debug, Default)]
enum State {
    #[default]
    Free,
    /// Sent; its answer is awaited.
    Waiting,
    /// Its `Pending` was dropped before the answer came: the slot is freed when it
    /// does.
    Abandoned,
    /// Answered with these words.
    Answered {
        len: usize,
        words: [u64; MAX_ARGS - 1],
    },
    /// The target could not run it.
    Failed(Box<RequestFailure>),
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    /// The rank the call went to (the only one whose answer it takes).
    target: Rank,
    state: State,
}

/// The caller's table of calls in flight.
#[derive(Debug, Default)]
pub(super) struct Calls {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Calls {
    /// A slot for a call to `target`.
    #[inline(always)]
    pub(super) fn open(&mut self, target: Rank) -> CallId {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => self.grow(),
        };
        let s = &mut self.slots[slot as usize];
        s.generation = s.generation.wrapping_add(1).max(1);
        (s.target, s.state) = (target, State::Waiting);
        CallId {
            slot,
            generation: s.generation,
        }
    }

    #[cold]
    fn grow(&mut self) -> u32 {
        self.slots.push(Slot::default());
        u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 calls in flight")
    }

    /// Frees `id`'s slot.
    #[inline(always)]
    pub(super) fn close(&mut self, id: CallId) {
        self.slots[id.slot as usize].state = State::Free;
        self.free.push(id.slot);
    }

    /// The slot of the call `word` names, if `source` may answer it.
    fn awaiting(&mut self, word: u64, source: Rank) -> Option<&mut Slot> {
        let (slot, generation) = (word as u32, (word >> 32) as u32);
        self.slots.get_mut(slot as usize).filter(|s| {
            s.generation == generation
                && s.target == source
                && matches!(s.state, State::Waiting | State::Abandoned)
        })
    }

    /// Lands `state` in the call `word` names: freed at once if it was abandoned.
    fn land(&mut self, word: u64, source: Rank, state: State) -> Result<(), AmError> {
        let Some(s) = self.awaiting(word, source) else {
            return Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "an answer for no call in flight to it",
            });
        };
        match s.state {
            State::Abandoned => {
                s.state = State::Free;
                self.free.push(word as u32);
            }
            _ => s.state = state,
        }
        Ok(())
    }

    /// A `CALL_DONE` reply of `source` (the call's word, then the answer's).
    #[inline(always)]
    pub(super) fn answer(&mut self, source: Rank, args: &[u64]) -> Result<(), AmError> {
        let Some((&word, answer)) = args.split_first() else {
            return Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "an answer that names no call",
            });
        };
        let mut words = [0u64; MAX_ARGS - 1];
        let len = answer.len().min(words.len());
        words[..len].copy_from_slice(&answer[..len]);
        self.land(word, source, State::Answered { len, words })
    }

    /// A failure notice of `source` for the call `word` names.
    pub(super) fn fail(
        &mut self,
        word: u64,
        source: Rank,
        failure: Box<RequestFailure>,
    ) -> Result<(), AmError> {
        self.land(word, source, State::Failed(failure))
    }

    /// True once `id` is answered or failed.
    #[inline(always)]
    fn done(&self, id: CallId) -> bool {
        matches!(
            self.slots[id.slot as usize].state,
            State::Answered { .. } | State::Failed(_)
        )
    }

    /// Takes `id`'s outcome (done) as an `R` and frees its slot.
    #[inline(always)]
    fn take<R: Args>(&mut self, id: CallId) -> Result<R, AmError> {
        let s = &mut self.slots[id.slot as usize];
        let target = s.target;
        let outcome = match std::mem::take(&mut s.state) {
            State::Answered { len, words } => {
                R::from_words(&words[..len]).map_err(|e| e.of(target, len))
            }
            State::Failed(f) => Err(AmError::RequestFailed(f)),
            _ => unreachable!("a call is taken once it is done"),
        };
        self.free.push(id.slot);
        outcome
    }

    /// `id`'s `Pending` is dropped: freed if its outcome is in, else freed when it
    /// comes.
    fn abandon(&mut self, id: CallId) {
        match self.done(id) {
            true => self.close(id),
            false => self.slots[id.slot as usize].state = State::Abandoned,
        }
    }

    /// Calls in flight or answered and not taken.
    pub(super) fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
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
/// polls, or wait where nothing else is to be done.
///
/// **Dropping** a `Pending` before its answer does not cancel the call: the handler
/// still runs at the target, and its answer (or failure) is discarded when it arrives,
/// freeing the call's slot. Nothing is reported.
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
#[must_use = "a call's answer is lost unless it is waited for or awaited"]
pub struct Pending<'a, R, S, C: Conduit = crate::conduit::mem::MemConduit> {
    am: &'a Am<S, C>,
    id: CallId,
    target: Rank,
    /// Taken: nothing left to drop.
    taken: bool,
    /// Polls that found no answer: every so often one checks the target is there.
    looks: u32,
    answer: PhantomData<fn() -> R>,
}

/// Polls of a `Pending` between checks that its target is still in the job.
const LOOKS_PER_CHECK: u32 = 1024;

impl<'a, R: Args, S, C: Conduit> Pending<'a, R, S, C> {
    pub(super) fn new(am: &'a Am<S, C>, id: CallId, target: Rank) -> Self {
        Self {
            am,
            id,
            target,
            taken: false,
            looks: 0,
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
        self.target
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
        self.am.calls.borrow().done(self.id)
    }

    /// Waits for the answer, running handlers meanwhile (spinning a bounded time, then
    /// sleeping until a message arrives). [`AmError::RequestFailed`] if the target
    /// could not run the call (no such handler there, args that do not decode, the
    /// handler's error); [`ConduitError::PeerLeft`] if the target left the job without
    /// answering, `PeerDead` if it failed. Another request's failure that arrives
    /// meanwhile is kept for the program's next poll or wait.
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
    pub fn wait(mut self) -> Result<R, AmError> {
        let calls = &self.am.calls;
        if let Err(e) = self
            .am
            .wait_on(self.target, |_| calls.borrow().done(self.id))
        {
            if e.conduit() == Some(&ConduitError::PeerLeft { rank: self.target }) {
                self.taken = true; // no answer can come any more
                calls.borrow_mut().close(self.id);
            }
            return Err(e);
        }
        self.take()
    }

    fn take(&mut self) -> Result<R, AmError> {
        self.taken = true;
        self.am.calls.borrow_mut().take(self.id)
    }

    /// Once per [`LOOKS_PER_CHECK`] empty polls: an error if the target has failed,
    /// or left with no answer in.
    #[cold]
    fn check_target(&mut self) -> Result<(), AmError> {
        let conduit = self.am.rq().conduit();
        conduit.check_peers()?;
        if conduit.peer_left(self.target) {
            self.am.poll_runtime()?; // what it sent before leaving
            if !self.is_ready() {
                self.taken = true;
                self.am.calls.borrow_mut().close(self.id);
                return Err(ConduitError::PeerLeft { rank: self.target }.into());
            }
        }
        Ok(())
    }
}

impl<R: Args, S, C: Conduit> std::future::Future for Pending<'_, R, S, C> {
    type Output = Result<R, AmError>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.taken, "a Pending polled after it completed");
        if !this.is_ready() {
            if let Err(e) = this.am.poll_runtime() {
                return Poll::Ready(Err(e));
            }
        }
        if this.is_ready() {
            return Poll::Ready(this.take());
        }
        this.looks = this.looks.wrapping_add(1);
        if this.looks % LOOKS_PER_CHECK == 0 {
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
        if !self.taken {
            self.am.calls.borrow_mut().abandon(self.id);
        }
    }
}

impl<R, S, C: Conduit> std::fmt::Debug for Pending<'_, R, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("target", &self.target)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
