//! What a handler sees: the message, and for a request, the one reply it may send.

use super::payload::Payload;
use super::{Am, AmError, ReplyHandler};
use crate::conduit::{Conduit, Rank};
use crate::rq::QueueId;

/// An arriving message, borrowed in place from the queue.
///
/// ```
/// # use amrq::am::Msg;
/// fn sum(m: &Msg<'_>) -> u64 { m.args().iter().sum::<u64>() + m.payload().len() as u64 }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Msg<'a> {
    pub(crate) source: Rank,
    pub(crate) args: &'a [u64],
    pub(crate) payload: &'a [u8],
}

impl<'a> Msg<'a> {
    /// The sender.
    #[inline(always)]
    pub fn source(&self) -> Rank {
        self.source
    }

    /// The args (0–8).
    #[inline(always)]
    pub fn args(&self) -> &'a [u64] {
        self.args
    }

    /// Arg `i`; [`AmError::MissingArg`] if the message carries fewer. A handler that
    /// returns that error (`m.arg(i)?`) has the message dropped and recorded as its
    /// sender's fault ([`Am::faults`](super::Am::faults)); the poll goes on.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let out = amrq::threads::run(1, &Config::default(), |c| -> Result<u64, AmError> {
    ///     let mut t = HandlerTable::new();
    ///     let add = t.request("add", |sum: &Cell<u64>, _ctx, m| {
    ///         sum.set(sum.get() + m.arg(0)? * m.arg(1)?);
    ///         Ok(())
    ///     });
    ///     let am = Am::new(c, t, Cell::new(0))?;
    ///     am.request(0, add, &[3, 4])?;
    ///     am.request(0, add, &[5])?; // one arg short: the sender's fault
    ///     am.wait_until(|_| am.faults().total() == 1)?;
    ///     Ok(am.state().get())
    /// })
    /// .unwrap();
    /// assert_eq!(out, [Ok(12)]);
    /// ```
    #[inline(always)]
    pub fn arg(&self, i: usize) -> Result<u64, AmError> {
        match self.args.get(i) {
            Some(&a) => Ok(a),
            None => Err(self.missing(i)),
        }
    }

    #[cold]
    fn missing(&self, index: usize) -> AmError {
        AmError::MissingArg {
            source_rank: self.source,
            index,
            nargs: self.args.len(),
        }
    }

    /// The payload, in place: in the queue for Medium (empty for Short), in this rank's
    /// registered segment for Long.
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

/// A request handler's right to reply: once (the methods consume it), to the requester
/// only. It cannot leave the handler (it borrows the runtime for the handler's duration),
/// and only the runtime makes one, so there is no reply outside a request handler.
///
/// ```
/// use amrq::prelude::*;
/// struct S { done: ReplyHandler }
/// let mut t: HandlerTable<S> = HandlerTable::new();
/// let done = t.reply("done", |_s, _m| Ok(()));
/// t.request("work", |s, ctx, m| ctx.reply(s.done, &[m.arg(0)?]));
/// ```
///
/// Replying twice does not compile:
///
/// ```compile_fail
/// use amrq::prelude::*;
/// struct S { done: ReplyHandler }
/// let mut t: HandlerTable<S> = HandlerTable::new();
/// t.request("twice", |s, ctx, _m| {
///     ctx.reply(s.done, &[])?;
///     ctx.reply(s.done, &[]) // error: use of moved value `ctx`
/// });
/// ```
///
/// Nor does keeping the right to reply past the handler:
///
/// ```compile_fail
/// use amrq::prelude::*;
/// use std::cell::RefCell;
/// struct S<'a> { kept: RefCell<Option<ReqCtx<'a, S<'a>, amrq::conduit::mem::MemConduit>>> }
/// let mut t: HandlerTable<S> = HandlerTable::new();
/// t.request("keep", |s, ctx, _m| { *s.kept.borrow_mut() = Some(ctx); Ok(()) });
/// ```
pub struct ReqCtx<'a, S, C: Conduit> {
    pub(crate) am: &'a Am<S, C>,
    pub(crate) source: Rank,
}

impl<S, C: Conduit> std::fmt::Debug for ReqCtx<'_, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReqCtx")
            .field("source", &self.source)
            .finish()
    }
}

impl<S, C: Conduit> ReqCtx<'_, S, C> {
    /// The requester.
    pub fn source(&self) -> Rank {
        self.source
    }

    /// This rank's registered segment (first byte, length), for a handler that works
    /// on it (the Split-C layer's atomic procedures, for instance).
    pub fn segment(&self) -> (std::ptr::NonNull<u8>, usize) {
        self.am.segment()
    }

    /// Sends a Short reply. Waits for room if needed, running only reply handlers.
    #[inline(always)]
    pub fn reply(self, handler: ReplyHandler, args: &[u64]) -> Result<(), AmError> {
        let empty = Payload::Inline(&[]);
        if self
            .am
            .enqueue(self.source, QueueId::AM_REPLY, handler.0, args, empty)?
        {
            return Ok(());
        }
        let args = super::ShortArgs::of(args);
        self.am
            .short_when_room(self.source, QueueId::AM_REPLY, handler.0, args)
    }

    /// Sends a Medium reply (payload up to [`Am::max_medium`] bytes).
    pub fn reply_medium(
        self,
        handler: ReplyHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        self.am
            .send_reply(self.source, handler, args, Payload::Inline(payload))
    }

    /// Sends a Long reply: `payload` lands at byte `offset` of the requester's
    /// registered segment before its reply handler runs.
    pub fn reply_long(
        self,
        handler: ReplyHandler,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<(), AmError> {
        self.am
            .send_reply(self.source, handler, args, Payload::Long(payload, offset))
    }
}
