//! Completion events of one-sided operations that finish without a waiter (RQ §2.4, the
//! paper's `am_store_async`): a frame posted into a named queue, the target's or this
//! rank's own, once the operation is complete.
//!
//! An operation's events are posted once it and every operation started before it
//! with events are complete, so that they come in the order the operations were
//! started: by the call itself where the operation completed in it (and nothing
//! earlier is pending), by the reply that completes it through frames. An event whose
//! queue is full, and the events of an operation the conduit leaves in flight, wait
//! for the program's next poll that runs nothing, or its next wait (`Am::attend`).
//! Nothing is dropped: an event that cannot be posted at all (its queue refuses this
//! rank) is an error of that poll or wait, and so is an operation that failed.

use super::{Am, AmError};
use crate::conduit::{Conduit, OpToken, Rank};
use crate::rq::QueueId;
use std::collections::VecDeque;

/// A frame with `args` for queue `queue` of rank `dest`, once an operation completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) dest: Rank,
    pub(crate) queue: QueueId,
    pub(crate) args: Vec<u64>,
}

/// The events not yet posted.
#[derive(Debug, Default)]
pub(super) struct Events {
    /// Events of operations that are complete, oldest first, from the first whose
    /// queue was full.
    waiting: VecDeque<Event>,
    /// Events of operations started after one the conduit left in flight, oldest
    /// first: each with its operation, if it is still in the conduit.
    behind: VecDeque<(Option<OpToken>, Vec<Event>)>,
}

impl Events {
    fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.behind.is_empty()
    }
}

impl<S, C: Conduit> Am<S, C> {
    /// The events of an operation that is complete: posted now, or kept for a later
    /// poll if an earlier operation's are pending or their queue is full.
    pub(crate) fn post_events(&self, events: Vec<Event>) {
        let mut pending = self.events.borrow_mut();
        if pending.behind.is_empty() {
            pending.waiting.extend(events);
            drop(pending);
            self.post_waiting();
        } else {
            pending.behind.push_back((None, events));
        }
    }

    /// Posts `events` once the conduit's operation `op` (and every earlier one with
    /// events) is complete: looked at by the program's polls that run nothing, and its
    /// waits.
    pub(crate) fn post_on_completion(&self, op: OpToken, events: Vec<Event>) {
        self.events
            .borrow_mut()
            .behind
            .push_back((Some(op), events));
        self.attention.set(true);
    }

    /// Tries the waiting events in order, up to the first whose queue is full; an
    /// error (a queue that refuses this rank) is kept for the program's next poll or
    /// wait, and its event dropped with it.
    fn post_waiting(&self) {
        loop {
            let Some(ev) = self.events.borrow_mut().waiting.pop_front() else {
                break;
            };
            match self.rq().enqueue(ev.dest, ev.queue, &ev.args, &[]) {
                Ok(true) => {}
                Ok(false) => {
                    self.events.borrow_mut().waiting.push_front(ev);
                    break;
                }
                Err(e) => self.keep_error(AmError::Rq(e)),
            }
        }
        self.update_attention();
    }

    /// Posts the events of the operations completed since the last look, in the
    /// order the operations started, up to the first still in the conduit; then those
    /// waiting for room. Cold: called only while some are there.
    #[cold]
    #[inline(never)]
    pub(super) fn post_pending(&self) {
        loop {
            let mut pending = self.events.borrow_mut();
            let Some((op, _)) = pending.behind.front_mut() else {
                break;
            };
            if let Some(t) = *op {
                match self.rq().conduit().op_test(t) {
                    Ok(None) => break,
                    Ok(Some(_)) => *op = None, // the token is spent
                    Err(e) => {
                        pending.behind.pop_front(); // failed: no events
                        drop(pending);
                        self.keep_error(AmError::from(e));
                        continue;
                    }
                }
            }
            let (_, events) = pending.behind.pop_front().expect("looked at above");
            pending.waiting.extend(events);
        }
        self.post_waiting();
    }

    /// What the program's polls that run nothing, and its waits, look at when
    /// `attention` is set: the pending events posted, then the oldest kept failure
    /// returned.
    #[cold]
    #[inline(never)]
    pub(super) fn attend(&self) -> Result<(), AmError> {
        self.post_pending();
        let kept = self.kept_failures.borrow_mut().pop_front();
        self.update_attention();
        kept.map_or(Ok(()), Err)
    }

    /// [`Am::attend`] for a poll that ran nothing: the failure it returns, if any.
    /// (Returning the poll's own `Ok(0)` rather than a new one keeps the poll's
    /// instructions as they were: callgrind, `amrq-bench budget`.)
    #[cold]
    #[inline(never)]
    pub(super) fn attended_failure(&self) -> Option<AmError> {
        self.attend().err()
    }

    /// `attention` set again from what is there.
    pub(super) fn update_attention(&self) {
        let pending = !self.events.borrow().is_empty();
        self.attention
            .set(pending || !self.kept_failures.borrow().is_empty());
    }
}
