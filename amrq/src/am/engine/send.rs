//! Sending: requests and replies, Short, Medium and Long, and the wait for room in a
//! full queue.

use super::{Am, REPLY_BUDGET};
use crate::am::payload::{Payload, ShortArgs};
use crate::am::{AmError, ReplyHandler, RequestHandler};
use crate::conduit::{Conduit, ConduitError, Rank};
use crate::rq::QueueId;
use crate::util::Backoff;

impl<S, C: Conduit> Am<S, C> {
    /// Sends a Short request (0–8 args) to `dest`, waiting for room if needed (running
    /// handlers meanwhile).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let add = t.request("add", |sum: &Cell<u64>, _ctx, m| {
    ///         sum.set(sum.get() + m.args().iter().sum::<u64>());
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     if am.rank() == 0 {
    ///         am.request(1, add, &[1, 2, 3])?;
    ///     } else {
    ///         am.wait_until(|sum| sum.get() == 6)?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn request(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
    ) -> Result<(), AmError> {
        self.send_short(dest, QueueId::AM_REQUEST, handler.0, args)
    }

    /// Sends a Short request or reply (queue `q`): through the conduit's quick path
    /// ([`Conduit::try_send_quick`]) if it takes it; otherwise the full send, which says
    /// what is wrong with it, then, if there is no room, [`Am::send_when_room`], polling
    /// what that queue's sender may run while it waits. Those are out of line, so that
    /// the inlined send has no call in its common path (callgrind: 10 instructions
    /// fewer per reply a handler sends, which no longer saves four registers), with the
    /// args by value: a slice would keep the caller's args in memory, and a sender whose
    /// slot stores wait for their cache lines runs only as many sends ahead as the store
    /// buffer holds stores (16 more stack stores per send slowed the stream's sender
    /// from 28 to 71 ns).
    #[inline(always)]
    pub(crate) fn send_short(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
    ) -> Result<(), AmError> {
        if self.rq.conduit().try_send_quick(dest, q.index(), tag, args) {
            return Ok(());
        }
        match ShortArgs::of(args) {
            Some(args) => self.send_short_slowly(dest, q, tag, args),
            None => self.send_short_slice(dest, q, tag, args),
        }
    }

    /// [`Am::send_short`] of at most `MAX_ARGS` args, passed by value.
    #[cold]
    #[inline(never)]
    fn send_short_slowly(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: ShortArgs,
    ) -> Result<(), AmError> {
        self.send_short_slice(dest, q, tag, args.as_slice())
    }

    /// [`Am::send_short`] of any number of args (the conduit refuses more than a frame
    /// holds, and says so).
    #[cold]
    #[inline(never)]
    fn send_short_slice(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
    ) -> Result<(), AmError> {
        let empty = Payload::Inline(&[]);
        if self.enqueue(dest, q, tag, args, empty)? {
            return Ok(());
        }
        let poll: fn(&Self) -> Result<usize, AmError> = match q == QueueId::AM_REPLY {
            true => Self::poll_replies,
            false => Self::poll,
        };
        self.send_when_room(dest, q, tag, args, empty, poll)
    }

    /// What a rank waiting for room for a reply runs: only reply handlers, which never
    /// send, so this wait cannot grow into a cycle of ranks each waiting for the next
    /// (the request/reply rule).
    fn poll_replies(&self) -> Result<usize, AmError> {
        Ok(self.drain(QueueId::AM_REPLY, REPLY_BUDGET)?)
    }

    /// Sends a Medium request: args plus a payload of up to [`Am::max_medium`] bytes.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::RefCell;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let text = t.request("text", |got: &RefCell<String>, _ctx, m| {
    ///         got.borrow_mut().push_str(&String::from_utf8_lossy(&m.payload()));
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, RefCell::new(String::new()))?;
    ///     if am.rank() == 0 {
    ///         am.request_medium(1, text, &[], b"hello")?;
    ///     } else {
    ///         am.wait_until(|got| got.borrow().as_str() == "hello")?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn request_medium(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        self.send_request(dest, handler.0, args, Payload::Inline(payload))
    }

    /// Sends a Long request: `payload` is deposited at byte `offset` of `dest`'s
    /// registered segment before the handler runs there, and handed to it in place.
    /// [`ConduitError::OutOfSegment`](crate::conduit::ConduitError::OutOfSegment) if the
    /// range does not fit; who may write which bytes of a segment is the program's
    /// protocol (as with put).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // The payload is already in place in this rank's segment when the handler runs.
    ///     let landed = t.request("landed", |sum: &Cell<u64>, _ctx, m| {
    ///         sum.set(m.payload().iter().map(|&b| u64::from(b)).sum());
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     if am.rank() == 0 {
    ///         am.request_long(1, landed, &[], &[1u8; 1000], 4096)?;
    ///     } else {
    ///         am.wait_until(|sum| sum.get() == 1000)?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn request_long(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<(), AmError> {
        self.send_request(dest, handler.0, args, Payload::Long(payload, offset))
    }

    /// One attempt to enqueue into queue `q` of `dest`; `Ok(false)` if full.
    #[inline(always)]
    pub(crate) fn enqueue(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: Payload<'_>,
    ) -> Result<bool, AmError> {
        Ok(match payload {
            Payload::Inline(p) => self.rq.enqueue_runtime(dest, q, tag, args, p)?,
            Payload::Long(p, offset) => self
                .rq
                .enqueue_runtime_long(dest, q, tag, args, p, offset)?,
        })
    }

    /// Sends a request if there is room now: `Ok(false)` (nothing sent) otherwise.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let count = t.request("count", |n: &Cell<u64>, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     let mut sent = 0;
    ///     while am.try_request(0, count, &[], &[])? {
    ///         sent += 1; // until the ring to itself is full: nothing is polled meanwhile
    ///     }
    ///     am.wait_until(|n| n.get() == sent)?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn try_request(
        &self,
        dest: Rank,
        handler: RequestHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<bool, AmError> {
        self.enqueue(
            dest,
            QueueId::AM_REQUEST,
            handler.0,
            args,
            Payload::Inline(payload),
        )
    }

    #[inline]
    pub(crate) fn send_request(
        &self,
        dest: Rank,
        tag: u16,
        args: &[u64],
        payload: Payload<'_>,
    ) -> Result<(), AmError> {
        if self.enqueue(dest, QueueId::AM_REQUEST, tag, args, payload)? {
            return Ok(());
        }
        // Room appears when `dest` drains its queue; meanwhile we drain ours, so two
        // ranks flooding each other both make progress.
        self.send_when_room(dest, QueueId::AM_REQUEST, tag, args, payload, Self::poll)
    }

    #[inline(always)]
    pub(crate) fn send_reply(
        &self,
        dest: Rank,
        h: ReplyHandler,
        args: &[u64],
        payload: Payload<'_>,
    ) -> Result<(), AmError> {
        if self.enqueue(dest, QueueId::AM_REPLY, h.0, args, payload)? {
            return Ok(());
        }
        self.send_when_room(
            dest,
            QueueId::AM_REPLY,
            h.0,
            args,
            payload,
            Self::poll_replies,
        )
    }

    /// Retries a send into queue `q` of `dest` until there is room, running `poll`
    /// (which returns how many handlers ran) between attempts.
    #[cold]
    #[inline(never)]
    fn send_when_room(
        &self,
        dest: Rank,
        q: QueueId,
        tag: u16,
        args: &[u64],
        payload: Payload<'_>,
        poll: impl Fn(&Self) -> Result<usize, AmError>,
    ) -> Result<(), AmError> {
        let mut backoff = Backoff::new();
        loop {
            // A failure notice is kept for the program's next poll or wait: this send
            // goes on.
            let ran = poll(self).or_else(|e| self.keep_failure(e).map(|()| 1))?;
            if ran == 0 {
                // A failure anywhere in the job is reported before "it left": a rank
                // that left because another failed is not the one to blame.
                if backoff.is_yielding() {
                    self.rq.conduit().check_peers()?;
                }
                if backoff.is_yielding() && self.rq.conduit().peer_left(dest) {
                    // Its last drain is visible now: one more try, then no room will come.
                    return match self.enqueue(dest, q, tag, args, payload)? {
                        true => Ok(()),
                        false => Err(ConduitError::PeerLeft { rank: dest }.into()),
                    };
                }
                // Room comes from the receiver draining, which sends us nothing: yield.
                self.snooze(&mut backoff, false)?;
            } else {
                backoff.reset();
            }
            if self.enqueue(dest, q, tag, args, payload)? {
                return Ok(());
            }
        }
    }
}
