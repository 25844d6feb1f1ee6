//! A call's outcome that lands outside the caller's table, for a job with a progress
//! engine: the engine lands it while the program computes (no section held), and wakes
//! whoever waits for it (a thread asleep on its futex word, a task's `Waker`), so an
//! awaiting task is woken by the engine instead of waking itself.

use super::AmError;
use crate::conduit::ring::MAX_ARGS;
use crate::conduit::Rank;
use crate::util::lock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::task::Waker;

/// The answer's words as they landed (their count, then the words).
pub(crate) type Words = (usize, [u64; MAX_ARGS - 1]);
/// What a call comes to: its answer, its target's failure notice, or why no answer can
/// come (its target failed or left, the engine stopped).
pub(crate) type Outcome = Result<Words, AmError>;

/// Where a call's outcome lands, shared by the rank (which lands it) and the caller.
#[derive(Debug)]
pub(crate) struct Landing {
    /// 0 while the call is awaited, 1 once its outcome is in (a futex word).
    done: AtomicU32,
    outcome: Mutex<Option<Outcome>>,
    /// The task awaiting it, woken when it lands.
    waker: Mutex<Option<Waker>>,
    target: Rank,
}

impl Landing {
    /// A landing for a call to `target`.
    pub(crate) fn new(target: Rank) -> Self {
        Self {
            done: AtomicU32::new(0),
            outcome: Mutex::new(None),
            waker: Mutex::new(None),
            target,
        }
    }

    /// The rank the call went to.
    pub(crate) fn target(&self) -> Rank {
        self.target
    }

    /// The rank lands the outcome (the first one only): stored, then the sleeper and
    /// the task are woken, the task outside the lock.
    pub(super) fn land(&self, outcome: Outcome) {
        {
            let mut o = lock(&self.outcome);
            if self.is_done() {
                return;
            }
            *o = Some(outcome);
            // ORDERING: Release pairs with the Acquire load in `is_done`: the outcome,
            // stored before, is there for whoever sees the word set.
            self.done.store(1, Ordering::Release);
        }
        crate::util::futex::wake_all(&self.done);
        let waker = lock(&self.waker).take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// True once the outcome has landed.
    pub(crate) fn is_done(&self) -> bool {
        // ORDERING: Acquire pairs with the Release store in `land`.
        self.done.load(Ordering::Acquire) == 1
    }

    /// The outcome, once it has landed (taken: a second call answers `None`).
    pub(crate) fn take(&self) -> Option<Outcome> {
        match self.is_done() {
            true => lock(&self.outcome).take(),
            false => None,
        }
    }

    /// Remembers `waker` to wake when the outcome lands. True if it landed already
    /// (then nothing is remembered: the caller takes it now).
    pub(crate) fn wake_on_landing(&self, waker: &Waker) -> bool {
        let mut w = lock(&self.waker);
        // Under the lock, after `land` takes the waker or before it looks: either
        // this sees the word set, or `land` finds the waker stored here.
        if self.is_done() {
            return true;
        }
        match &*w {
            Some(old) if old.will_wake(waker) => {}
            _ => *w = Some(waker.clone()),
        }
        false
    }

    /// Sleeps until the outcome lands or `nap` passes.
    pub(crate) fn sleep(&self, nap: std::time::Duration) {
        crate::util::futex::wait(&self.done, 0, nap);
    }
}
