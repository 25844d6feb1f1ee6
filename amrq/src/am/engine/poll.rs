//! Polling: running the handlers of arrived messages, the waits built on it, and what
//! happens to a message a correct peer never sends.

use super::{Am, REPLY_BUDGET, REQUEST_BUDGET};
use crate::am::barrier::TAG_BARRIER;
use crate::am::error::Stop;
use crate::am::failure::TAG_FAILED;
use crate::am::handlers::RawRequest;
use crate::am::{AmError, Msg};
use crate::conduit::{Conduit, ConduitError, Fault, FaultKind, Rank, ReceivedFrame};
use crate::rq::QueueId;
use crate::util::{Backoff, SLEEP_BACKSTOP};

impl<S, C: Conduit> Am<S, C> {
    /// Waits a little after an empty poll: spins a bounded time, then (with `sleep`)
    /// sleeps until an AM frame arrives or [`SLEEP_BACKSTOP`](crate::util::SLEEP_BACKSTOP) passes, or yields. Once
    /// past spinning it checks that every peer is alive, and (waiting for an arrival)
    /// that some peer is still there to send.
    #[inline(always)]
    pub(super) fn snooze(&self, backoff: &mut Backoff, sleep: bool) -> Result<(), AmError> {
        if !backoff.is_yielding() {
            backoff.snooze();
            return Ok(());
        }
        self.snooze_long(backoff, sleep)
    }

    /// [`Am::snooze`] once the spin budget is spent: out of line, so that the spinning
    /// rounds of every wait stay a few inline instructions whatever the caller.
    #[cold]
    #[inline(never)]
    fn snooze_long(&self, backoff: &mut Backoff, sleep: bool) -> Result<(), AmError> {
        let conduit = self.rq.conduit();
        conduit.check_peers()?;
        if sleep && conduit.all_peers_left() {
            // What they sent before leaving is visible now: one last look.
            return match self.poll_outlined()? {
                0 => Err(ConduitError::AllPeersLeft.into()),
                _ => Ok(()),
            };
        }
        if self.attention.get() {
            self.post_pending(); // before a long wait, what can be posted is
        }
        if sleep {
            self.check_stuck(backoff)?;
            conduit.wait_for_arrival(&self.am_queues, SLEEP_BACKSTOP)?;
        } else {
            backoff.snooze();
        }
        Ok(())
    }

    /// Runs the handlers of arrived messages: up to 32 replies first, then up to 64
    /// requests. Returns how many messages were taken.
    ///
    /// A request this rank cannot run (a handler id it does not have, a reply handler's
    /// id, an arg its handler finds missing, the handler's own error) is dropped,
    /// recorded as its sender's fault ([`Am::faults`]) and told to its sender; it is not
    /// an error of this call, which goes on with the next message. At the sender, the
    /// notice ends the first poll or wait that runs it with [`AmError::RequestFailed`];
    /// one that a runtime wait ran (a send waiting for room, a barrier, a one-sided
    /// operation) is kept, and returned by the next wait or by the next poll that runs
    /// nothing else. A reply handler's error is returned by the poll that ran it, after
    /// its message was removed. A poll that runs nothing also posts the completion
    /// events that were waiting (of puts no one waits for, whose queue was full or
    /// whose put was still in flight).
    ///
    /// A rank that has polled in vain a long while (thousands of polls) arms its AM
    /// queues, as One-poll does: then an empty poll reads one word, and the first
    /// message disarms them.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let hit = t.request("hit", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     assert_eq!(am.poll()?, 0);
    ///     am.request(0, hit, &[])?;
    ///     while am.poll()? == 0 {}
    ///     assert_eq!(am.state().get(), 1);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn poll(&self) -> Result<usize, AmError> {
        // Kept failures and pending completion events are looked at only when nothing
        // ran: a busy poll pays nothing.
        let polled = self.poll_am();
        if matches!(polled, Ok(0)) && self.attention.get() {
            if let Some(e) = self.attended_failure() {
                return Err(e);
            }
        }
        polled
    }

    /// [`Am::poll`] without the look at failures kept by the runtime's waits.
    #[inline(always)]
    fn poll_am(&self) -> Result<usize, AmError> {
        if self.rq.conduit().nothing_arrived(&self.am_queues) {
            return Ok(0); // inline in the caller's loop: a few instructions
        }
        // The drain inline in the caller's loop: 28 instructions fewer per poll that
        // finds a message than a call (callgrind, `amrq-bench rq-loop --am-oneway`), for ~2 KB of
        // code per call site. The runtime's own waits call `poll_runtime` instead.
        self.poll_queues().map_err(AmError::from)
    }

    /// [`Am::poll`] compiled once, for the waits, where the poll is one step among
    /// others. A failure notice it runs is returned, as by `poll`; the runtime's own
    /// waits call [`Am::poll_runtime`], which keeps it.
    #[inline(never)]
    pub(crate) fn poll_outlined(&self) -> Result<usize, AmError> {
        self.poll_am()
    }

    /// [`Am::poll`] past the armed check: drains the queues.
    #[inline(always)]
    fn poll_queues(&self) -> Result<usize, Stop> {
        let (rep, req) = (QueueId::AM_REPLY, QueueId::AM_REQUEST);
        let took = self.rq.conduit().drain_both::<Stop, _, _>(
            (rep.index(), REPLY_BUDGET),
            |frame| self.run_reply(frame),
            (req.index(), REQUEST_BUDGET),
            |frame| self.run_request(frame),
        )?;
        self.rq.conduit().polled(&self.am_queues, took);
        Ok(took)
    }

    /// Polls until `done(state)` holds. Spins a bounded time between empty polls, then
    /// sleeps; ends with [`ConduitError::PeerDead`](crate::conduit::ConduitError::PeerDead)
    /// if a rank of the job has failed, with [`AmError::RequestFailed`] if a request of
    /// this rank's could not run, and with [`AmError::NothingCanArrive`] once every
    /// other rank has returned from its main and nothing is in flight to this one — so
    /// `done` should be a condition only this rank's handlers make true.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// struct S { pong: ReplyHandler, got: Cell<u64> }
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let pong = t.reply("pong", |s: &S, m| { s.got.set(m.arg(0)?); Ok(()) });
    ///     let ping = t.request("ping", |s: &S, ctx, m| ctx.reply(s.pong, &[m.arg(0)? * 2]));
    ///     let am = setup.start(t, S { pong, got: Cell::new(0) })?;
    ///     if am.rank() == 0 {
    ///         am.request(1, ping, &[21])?;
    ///         am.wait_until(|s| s.got.get() == 42)?; // rank 1 serves it in its barrier
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn wait_until(&self, mut done: impl FnMut(&S) -> bool) -> Result<(), AmError> {
        if self.attention.get() {
            self.attend()?;
        }
        let mut backoff = Backoff::new();
        while !done(&self.state) {
            self.wait_round(&mut backoff)?;
        }
        Ok(())
    }

    /// [`Am::poll`] out of line, for the program's polls through the layers above
    /// (`SplitC::poll`).
    #[inline(never)]
    pub(crate) fn poll_program(&self) -> Result<usize, AmError> {
        self.poll()
    }

    /// [`Am::wait_until`] for the runtime's own waits: a failure notice it runs is kept
    /// for the program's next poll or wait.
    pub(crate) fn wait_runtime(&self, mut done: impl FnMut(&S) -> bool) -> Result<(), AmError> {
        let mut backoff = Backoff::no_check();
        while !done(&self.state) {
            if let Err(e) = self.wait_round(&mut backoff) {
                self.keep_failure(e)?;
            }
        }
        Ok(())
    }

    /// [`Am::wait_until`] for the runtime's own waits, on a condition that only a
    /// message of `from` can make true: [`ConduitError::PeerLeft`] once `from` has left
    /// the job and the condition still does not hold after a last look (what it sent
    /// before leaving is visible then). A failure notice it runs is kept for the
    /// program's next poll or wait.
    #[inline]
    pub(crate) fn wait_on(
        &self,
        from: Rank,
        mut done: impl FnMut(&S) -> bool,
    ) -> Result<(), AmError> {
        let mut backoff = Backoff::new();
        while !done(&self.state) {
            if backoff.is_yielding() && self.rq.conduit().peer_left(from) {
                self.poll_runtime()?;
                if done(&self.state) {
                    break;
                }
                self.rq.conduit().check_peers()?; // a failure is reported before "left"
                return Err(ConduitError::PeerLeft { rank: from }.into());
            }
            if let Err(e) = self.wait_round(&mut backoff) {
                self.keep_failure(e)?;
            }
        }
        Ok(())
    }

    /// One round of a wait: at most one reply when one is there (so that the caller
    /// checks its condition right after it, which is the round trip's critical path),
    /// otherwise the requests; requests are polled at least once every
    /// [`REPLY_BUDGET`] replies, so a stream of replies cannot starve them.
    #[inline(always)]
    fn wait_round(&self, backoff: &mut Backoff) -> Result<(), AmError> {
        // The streak read again after the reply ran, not kept in a register across it
        // (callgrind: 7 instructions fewer per self round trip).
        if self.reply_streak.get() < REPLY_BUDGET && self.take_reply()? == 1 {
            self.reply_streak.set(self.reply_streak.get() + 1);
            backoff.reset();
            return Ok(());
        }
        self.reply_streak.set(0);
        if self.drain(QueueId::AM_REQUEST, REQUEST_BUDGET)? == 0 {
            self.snooze(backoff, true)
        } else {
            backoff.reset();
            Ok(())
        }
    }

    /// [`Am::wait_until`] with a deadline: [`AmError::Timeout`] if `done(state)` still
    /// does not hold after `timeout`.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # use std::time::Duration;
    /// let out = amrq::Config::new().threads(1, |setup| {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     Ok(am.wait_until_for(Duration::from_millis(10), |_| false))
    /// }).unwrap();
    /// assert!(matches!(out[0], Err(AmError::Timeout { .. })));
    /// ```
    pub fn wait_until_for(
        &self,
        timeout: std::time::Duration,
        mut done: impl FnMut(&S) -> bool,
    ) -> Result<(), AmError> {
        if self.attention.get() {
            self.attend()?;
        }
        let start = std::time::Instant::now();
        let mut backoff = Backoff::new();
        while !done(&self.state) {
            if self.poll_outlined()? == 0 {
                if start.elapsed() > timeout {
                    return Err(AmError::Timeout {
                        waited: start.elapsed(),
                    });
                }
                self.snooze(&mut backoff, true)?;
            } else {
                backoff.reset();
            }
        }
        Ok(())
    }

    /// Runs the replies that have arrived (up to [`REPLY_BUDGET`]), for a wait that
    /// looks for one of many answers in flight: they land in one drain rather than a
    /// round of the wait each. A failure notice among them is kept, as by the
    /// runtime's waits.
    #[inline(always)]
    pub(crate) fn take_replies(&self) -> Result<(), AmError> {
        match self.drain(QueueId::AM_REPLY, REPLY_BUDGET) {
            Ok(_) => Ok(()),
            Err(e) => self.keep_failure(e.into()),
        }
    }

    /// Runs one reply if one is there (the conduit's look and drain in one pass: 16
    /// instructions fewer per AM round trip than a quiet look and a drain of one);
    /// returns how many ran.
    #[inline(always)]
    fn take_reply(&self) -> Result<usize, Stop> {
        let q = QueueId::AM_REPLY.index();
        self.rq
            .conduit()
            .drain_one(q, |frame| self.run_reply(frame))
    }

    /// Drains up to `budget` frames of queue `q`; returns how many were taken.
    ///
    /// The reply queue, empty in most polls, is first asked whether it is quiet (a few
    /// loads); the request queue is drained at once: its drain finds an empty ring in
    /// a look, and a poll that has a request to run saves the quiet scan before it
    /// (28 instructions fewer per AM round trip, 22 per one-way AM).
    #[inline(always)]
    pub(super) fn drain(&self, q: QueueId, budget: usize) -> Result<usize, Stop> {
        let conduit = self.rq.conduit();
        // One closure per queue, so that which table to look in is known where the
        // closure is compiled, not read back from its captures per frame (13
        // instructions per one-word AM under callgrind).
        match q == QueueId::AM_REQUEST {
            true => conduit.drain(q.index(), budget, |frame| self.run_request(frame)),
            false if conduit.quiet(q.index()) => Ok(0),
            false => conduit.drain(q.index(), budget, |frame| self.run_reply(frame)),
        }
    }

    /// Runs the request handler `frame` names; a failure is contained and told to the
    /// sender.
    #[inline(always)]
    fn run_request(&self, frame: &C::Frame<'_>) -> Result<(), Stop> {
        match self.dispatch_request(frame) {
            Ok(()) => Ok(()),
            Err(e) => self.contain_request(e),
        }
    }

    /// Runs the reply handler `frame` names; a peer's fault is contained.
    #[inline(always)]
    fn run_reply(&self, frame: &C::Frame<'_>) -> Result<(), Stop> {
        match self.dispatch_reply(frame) {
            Ok(()) => Ok(()),
            Err(e) => self.contain(QueueId::AM_REPLY, e),
        }
    }

    /// Runs the request handler `frame` names: its words passed in registers.
    #[inline(always)]
    fn dispatch_request(&self, frame: &C::Frame<'_>) -> Result<(), Stop> {
        let tag = frame.tag();
        match self.table.request_fn(tag) {
            Some(h) => self.call_raw(h, tag, frame),
            None => Ok(self.dispatch_other(true, tag, Self::msg_of(frame))?),
        }
    }

    /// Runs the reply handler `frame` names.
    #[inline(always)]
    fn dispatch_reply(&self, frame: &C::Frame<'_>) -> Result<(), Stop> {
        let tag = frame.tag();
        match self.table.reply_fn(tag) {
            Some(h) => self.call_raw(h, tag, frame),
            None => Ok(self.dispatch_other(false, tag, Self::msg_of(frame))?),
        }
    }

    /// Calls handler `h` (of `tag`) on `frame`: its words as they lie, the payload as
    /// address and length.
    #[inline(always)]
    fn call_raw(&self, h: RawRequest<S, C>, tag: u16, frame: &C::Frame<'_>) -> Result<(), Stop> {
        let (args, p) = (frame.args(), frame.payload());
        // The handler tells held from shared by where the payload lies
        // (`Msg::of_words`): a shared one never starts right after the args.
        debug_assert!(
            !p.is_shared()
                || p.is_empty()
                || !std::ptr::eq(p.as_ptr(), args.as_ptr_range().end.cast()),
            "a shared payload right after its args"
        );
        // SAFETY: the frame's payload, valid while the frame is (this call); a held one
        // is unwritten meanwhile, and a shared one is not right after the args (asserted
        // above), so the handler never lends it.
        unsafe { h(self, tag, frame.source(), args, p.as_ptr(), p.len()) }
    }

    /// What a handler is handed of `frame`.
    #[inline(always)]
    fn msg_of<'f>(frame: &'f C::Frame<'_>) -> Msg<'f> {
        Msg::new(frame.source(), frame.args(), frame.payload())
    }

    /// A handler's error: a peer's fault is recorded against it (the message is
    /// dropped, the poll goes on); any other error is returned.
    #[cold]
    #[inline(never)]
    fn contain(&self, q: QueueId, e: Stop) -> Result<(), Stop> {
        let e = AmError::from(e);
        match e.peer_fault() {
            Some((source, kind)) => {
                self.record_fault(q, source, kind);
                Ok(())
            }
            None => Err(e.into()),
        }
    }

    /// A request handler's error. A user's handler's: unless it ends this rank's part
    /// in the job (a peer failed or left), the request failed — recorded as its
    /// sender's fault and told to the sender — and the poll goes on. A runtime
    /// request's (whose failure its own reply answers): contained as any handler's.
    #[cold]
    #[inline(never)]
    fn contain_request(&self, e: Stop) -> Result<(), Stop> {
        let stopped = e.into_inner();
        let Some((source, tag)) = stopped.request else {
            return self.contain(QueueId::AM_REQUEST, stopped.error.into());
        };
        let kind = self.request_fault(stopped.error)?;
        Ok(self.fail_request(source, tag, 0, kind)?)
    }

    #[cold]
    pub(crate) fn record_fault(&self, q: QueueId, source: Rank, kind: FaultKind) {
        self.rq.conduit().record_fault(Fault {
            source: Some(source),
            channel: q.index(),
            kind,
        });
    }

    /// The faults of peers this rank has seen: messages dropped because a correct peer
    /// never sends them or they could not run (unknown handlers, missing args, handlers'
    /// errors, malformed runtime messages, frames outside this rank's memory, corrupt
    /// rings), per sender. See [`Faults`](crate::conduit::Faults).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<u64> {
    ///     let mut t = HandlerTable::<()>::new();
    ///     let one = t.request("one", |_, _ctx, m| m.arg(0).map(drop));
    ///     let am = setup.start(t, ())?;
    ///     am.request(1 - am.rank(), one, &[])?; // no arg: a bad message
    ///     // The peer's notice ends this wait; the peer recorded the fault before it.
    ///     let failed = am.wait_until(|_| false);
    ///     assert!(matches!(failed, Err(AmError::RequestFailed(_))), "{failed:?}");
    ///     am.wait_until(|_| am.faults().total() == 1)?;
    ///     am.barrier()?;
    ///     Ok(am.faults().of(1 - am.rank()))
    /// })
    /// .unwrap();
    /// assert_eq!(out, [1, 1]);
    /// ```
    pub fn faults(&self) -> crate::conduit::Faults {
        self.rq.faults()
    }

    #[cold]
    fn dispatch_other(&self, is_request: bool, tag: u16, msg: Msg<'_>) -> Result<(), AmError> {
        if self.serve_one_sided(is_request, tag, msg)? || self.serve_exit(is_request, tag, msg)? {
            return Ok(());
        }
        if tag == TAG_BARRIER && is_request {
            return self.barrier.arrived(msg.arg(0)?, msg.source());
        }
        if tag == TAG_FAILED && !is_request {
            return self.take_notice(msg);
        }
        let (q, arrived_as) = match is_request {
            true => (QueueId::AM_REQUEST, "request"),
            false => (QueueId::AM_REPLY, "reply"),
        };
        let kind = match (is_request, self.table.kind(tag)) {
            (true, _) => self.not_a_request(tag),
            (false, Some(_)) => FaultKind::WrongHandlerKind {
                id: tag,
                name: self.table.name(tag).to_string(),
                arrived_as,
            },
            (false, None) => FaultKind::UnknownHandler { id: tag },
        };
        if is_request {
            return self.fail_request(msg.source(), tag, 0, kind);
        }
        self.record_fault(q, msg.source(), kind);
        Ok(())
    }
}
