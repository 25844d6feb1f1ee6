//! Completion events of one-sided operations that finish without a waiter (RQ §2.4, the
//! paper's `am_store_async`): a frame posted into a named queue, the target's or this
//! rank's own, once the operation is complete.
//!
//! An operation's events are posted once it and every operation started before it
//! with events are complete, so that they come in the order the operations were
//! started: by the call itself where the operation completed in it (and nothing
//! earlier is pending), by the reply that completes it through frames (and those of
//! later operations already complete with it). An event whose queue is full, and the
//! events of an operation the conduit leaves in flight, wait for the program's next
//! poll that runs nothing, or its next wait (`Am::attend`).
//! Nothing is dropped: an event that cannot be posted at all (its queue refuses this
//! rank) is an error of that poll or wait, and so is an operation that failed.

use super::{Am, AmError, OpId};
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

/// What an operation whose events wait in line is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaiting {
    /// Nothing: it is complete.
    Nothing,
    /// The conduit's completion of the operation.
    Conduit(OpToken),
    /// The target's reply to the operation sent as frames.
    Reply(OpId),
}

/// The events not yet posted.
#[derive(Debug, Default)]
pub(super) struct Events {
    /// Events of operations that are complete, oldest first, from the first whose
    /// queue was full.
    waiting: VecDeque<Event>,
    /// Events of operations in the order they were started, from the first not yet
    /// complete: each with what it still waits for.
    behind: VecDeque<(Awaiting, Vec<Event>)>,
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
            pending.behind.push_back((Awaiting::Nothing, events));
        }
    }

    /// Posts `events` once the conduit's operation `op` (and every earlier one with
    /// events) is complete: looked at by the program's polls that run nothing, and its
    /// waits.
    pub(crate) fn post_on_completion(&self, op: OpToken, events: Vec<Event>) {
        self.wait_in_line(Awaiting::Conduit(op), events);
    }

    /// Posts `events` once operation `op`, sent as frames, has its reply (and every
    /// earlier one with events is complete): [`Am::replied`] says so.
    pub(super) fn post_on_reply(&self, op: OpId, events: Vec<Event>) {
        self.wait_in_line(Awaiting::Reply(op), events);
    }

    fn wait_in_line(&self, awaiting: Awaiting, events: Vec<Event>) {
        self.events
            .borrow_mut()
            .behind
            .push_back((awaiting, events));
        self.attention.set(true);
    }

    /// Operation `op`, sent as frames, has its reply: its events are posted in their
    /// turn, or, if the target refused it, dropped and the refusal kept for the
    /// program's next poll or wait.
    pub(super) fn replied(&self, op: OpId, refused: bool) {
        if refused {
            self.keep_error(AmError::RemoteRefused);
        }
        self.no_longer_awaited(op, !refused);
    }

    /// Operation `op`, sent as frames, will have no reply: it was never sent (the
    /// sender has the error), and its events go.
    pub(super) fn never_replied(&self, op: OpId) {
        self.no_longer_awaited(op, false);
    }

    /// Operation `op` waits for nothing more; its events are kept (`post`) or dropped,
    /// and whatever is complete at the front of the line posted.
    fn no_longer_awaited(&self, op: OpId, post: bool) {
        let mut pending = self.events.borrow_mut();
        if let Some(entry) = pending
            .behind
            .iter_mut()
            .find(|(a, _)| *a == Awaiting::Reply(op))
        {
            entry.0 = Awaiting::Nothing;
            if !post {
                entry.1.clear();
            }
        }
        drop(pending);
        self.post_pending();
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
            let Some((awaiting, _)) = pending.behind.front_mut() else {
                break;
            };
            match *awaiting {
                Awaiting::Nothing => {}
                Awaiting::Reply(_) => break,
                Awaiting::Conduit(t) => match self.rq().conduit().op_test(t) {
                    Ok(None) => break,
                    Ok(Some(_)) => *awaiting = Awaiting::Nothing, // the token is spent
                    Err(e) => {
                        pending.behind.pop_front(); // failed: no events
                        drop(pending);
                        self.keep_error(AmError::from(e));
                        continue;
                    }
                },
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

    /// The events never posted, said on standard error once the program is done with
    /// this rank: none is lost silently.
    pub(super) fn say_unposted_events(&self) {
        let pending = self.events.borrow();
        let n = pending.waiting.len() + pending.behind.iter().map(|(_, e)| e.len()).sum::<usize>();
        if n > 0 {
            crate::util::say(&format!(
                "amrq: rank {}: {n} completion events were never posted (their queue stayed full, or their put was not complete when the rank ended): drain the queues named in Completion, and poll until the events of puts made with put_async have come",
                self.rank()
            ));
        }
    }

    /// `attention` set again from what is there.
    pub(super) fn update_attention(&self) {
        let pending = !self.events.borrow().is_empty();
        self.attention
            .set(pending || !self.kept_failures.borrow().is_empty());
    }
}
