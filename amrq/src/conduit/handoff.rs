//! The hand-off of a call's outcome between two threads of a rank: [`CallSlot`], which
//! the thread that made a call waits on and the thread that runs the rank's handlers
//! fills. Below the AM layer so that its loom models (`tests/loom_calls.rs`) run the
//! very code; the AM layer's thread calls (`am/thread_calls.rs`) use it.

use super::ring::MAX_ARGS;
use crate::sync::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Words an answer carries (a frame's args less the call's word).
pub const ANSWER_WORDS: usize = MAX_ARGS - 1;

// A slot's states.
const FREE: u32 = 0;
const WAITING: u32 = 1;
/// Waiting, and the caller sleeps on the word: the answer wakes it.
const SLEEPING: u32 = 2;
const ANSWERED: u32 = 3;
const FAILED: u32 = 4;
/// Its caller gave up first: the outcome frees it.
const ABANDONED: u32 = 5;

/// One call's slot: the hand-off of its outcome from the rank's thread, which lands
/// it, to the calling thread, which takes it or gives up on it. Opened by the caller
/// (free → waiting); landed by the rank's thread (waiting → answered or failed, or
/// abandoned → free); taken (→ free) or abandoned (waiting → abandoned, or, if the
/// outcome came first, → free) by the caller. Only the caller opens a free slot, and
/// only a landing frees an abandoned one, so a slot is reused only after its outcome
/// has landed (`tests/loom_calls.rs` runs this very code). `F` is what a failure carries.
///
/// ```
/// use amrq::conduit::handoff::CallSlot;
/// let slot = CallSlot::<String>::default();
/// slot.open(3);
/// assert!(!slot.answer(2, &[7])); // not the call's target: no such call
/// assert!(slot.answer(3, &[7]));
/// assert_eq!(slot.take().map(|(w, n)| w[..n].to_vec()), Ok(vec![7]));
/// assert!(slot.is_free());
/// ```
pub struct CallSlot<F> {
    state: AtomicU32,
    target: AtomicUsize,
    len: AtomicUsize,
    words: [AtomicU64; ANSWER_WORDS],
    failure: Mutex<Option<F>>,
}

impl<F> Default for CallSlot<F> {
    fn default() -> Self {
        Self {
            state: AtomicU32::new(FREE),
            target: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            failure: Mutex::new(None),
        }
    }
}

impl<F> CallSlot<F> {
    /// The caller opens the slot, free until now, for a call to `target`.
    pub fn open(&self, target: usize) {
        self.target.store(target, Ordering::Relaxed);
        // ORDERING: Release pairs with the Acquire load of `land`: the target is read
        // after it.
        self.state.store(WAITING, Ordering::Release);
    }

    /// True if the slot may be opened.
    pub fn is_free(&self) -> bool {
        // ORDERING: Acquire pairs with the Release stores that free it.
        self.state.load(Ordering::Acquire) == FREE
    }

    /// The caller frees a slot it opened for a call that could not be sent.
    pub fn unsend(&self) {
        // ORDERING: Release, as every free.
        self.state.store(FREE, Ordering::Release);
    }

    /// The rank's thread lands `source`'s answer (`words`); false if the slot holds no
    /// call to `source`.
    pub fn answer(&self, source: usize, words: &[u64]) -> bool {
        self.land(source, |s| {
            let len = words.len().min(s.words.len());
            for (w, &a) in s.words.iter().zip(&words[..len]) {
                w.store(a, Ordering::Relaxed);
            }
            s.len.store(len, Ordering::Relaxed);
            ANSWERED
        })
    }

    /// The rank's thread lands `source`'s failure notice for the call.
    pub fn fail(&self, source: usize, failure: F) -> bool {
        let mut failure = Some(failure);
        self.land(source, |s| {
            // A retry of the exchange finds the failure stored by the first try.
            if let (Ok(mut f), Some(x)) = (s.failure.lock(), failure.take()) {
                *f = Some(x);
            }
            FAILED
        })
    }

    /// Lands an outcome: `fill` writes it and names the state it leaves; an abandoned
    /// slot is freed instead.
    fn land(&self, source: usize, mut fill: impl FnMut(&Self) -> u32) -> bool {
        // ORDERING: Acquire pairs with the Release store of `open` (the target is
        // read after it) and of `abandon`.
        let mut now = self.state.load(Ordering::Acquire);
        loop {
            match now {
                WAITING | SLEEPING if self.target.load(Ordering::Relaxed) == source => {
                    let outcome = fill(self);
                    // ORDERING: Release pairs with the caller's Acquire load of the
                    // state: the words (or the failure) are visible with it. Acquire
                    // on failure: the abandon it met is read next.
                    match self.state.compare_exchange(
                        now,
                        outcome,
                        Ordering::Release,
                        Ordering::Acquire,
                    ) {
                        Ok(SLEEPING) => wake(&self.state),
                        Ok(_) => {}
                        Err(seen) => {
                            now = seen;
                            continue;
                        }
                    }
                    return true;
                }
                ABANDONED if self.target.load(Ordering::Relaxed) == source => {
                    // ORDERING: Release pairs with the caller's Acquire look for a free
                    // slot: nothing of this call is touched after.
                    self.state.store(FREE, Ordering::Release);
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// True once the outcome has landed.
    pub fn is_done(&self) -> bool {
        // ORDERING: Acquire pairs with the Release of `land`.
        matches!(self.state.load(Ordering::Acquire), ANSWERED | FAILED)
    }

    /// The caller, waiting and done spinning: marks itself asleep and sleeps until the
    /// outcome lands or `nap` passes.
    pub fn sleep(&self, nap: Duration) {
        // ORDERING: Relaxed: the sleep only pairs with the wake, and the state is
        // loaded again (Acquire) after it.
        let now = self.state.load(Ordering::Relaxed);
        let asleep = now == SLEEPING
            || (now == WAITING
                && self
                    .state
                    .compare_exchange(WAITING, SLEEPING, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok());
        if asleep {
            sleep_on(&self.state, SLEEPING, nap);
        }
    }

    /// The caller takes the landed outcome (after [`CallSlot::is_done`]) and frees the
    /// slot: the answer's words and their count, or the failure.
    #[allow(clippy::type_complexity)]
    pub fn take(&self) -> Result<([u64; ANSWER_WORDS], usize), Option<F>> {
        // ORDERING: Acquire pairs with the Release of `land`.
        let outcome = match self.state.load(Ordering::Acquire) {
            FAILED => Err(self.failure.lock().ok().and_then(|mut f| f.take())),
            _ => {
                let len = self.len.load(Ordering::Relaxed);
                let mut words = [0u64; ANSWER_WORDS];
                for (w, s) in words.iter_mut().zip(&self.words[..len]) {
                    *w = s.load(Ordering::Relaxed);
                }
                Ok((words, len))
            }
        };
        // ORDERING: Release pairs with the caller's Acquire look for a free slot.
        self.state.store(FREE, Ordering::Release);
        outcome
    }

    /// The caller gives up on the call: the outcome is thrown away when it lands (or
    /// now, if it has).
    pub fn abandon(&self) {
        for from in [WAITING, SLEEPING] {
            // ORDERING: AcqRel pairs with `land`'s exchange, which either meets the
            // abandon (and frees the slot) or came first (and this frees it below).
            if self
                .state
                .compare_exchange(from, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
        // ORDERING: Release pairs with the caller's Acquire look for a free slot.
        self.state.store(FREE, Ordering::Release);
    }

    /// The call's target.
    pub fn target(&self) -> usize {
        self.target.load(Ordering::Relaxed)
    }
}

/// Wakes the caller asleep on `word`.
#[cfg(not(amrq_loom))]
fn wake(word: &AtomicU32) {
    crate::util::futex::wake_all(word);
}

#[cfg(amrq_loom)]
fn wake(_word: &AtomicU32) {}

/// Sleeps on `word` while it holds `value`, at most `nap`.
#[cfg(not(amrq_loom))]
fn sleep_on(word: &AtomicU32, value: u32, nap: Duration) {
    crate::util::futex::wait(word, value, nap);
}

#[cfg(amrq_loom)]
fn sleep_on(_word: &AtomicU32, _value: u32, _nap: Duration) {
    loom::thread::yield_now();
}
