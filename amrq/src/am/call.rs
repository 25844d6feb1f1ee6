//! Calls: a request handler run at the target whose answer comes back to the caller
//! (Split-C's atomic functions; an RPC on Active Messages). The request is a runtime
//! frame naming the user's handler, served like any request, so the handler runs
//! atomically with respect to the target's other handlers; the runtime replies once it
//! has returned, with the value it gave [`ReqCtx::reply_value`] (or 0).
//!
//! | request (args) | at the target | reply (args) |
//! |---|---|---|
//! | `CALL` (op, handler, args…) | runs the handler on the args | `CALL_DONE` (op, status, value) |

use super::handlers::FIRST_USER_TAG;
use super::ops::{Landed, OK};
use super::payload::Payload;
use super::{Am, AmError, Msg, ReplyHandler, ReqCtx, RequestHandler};
use crate::conduit::{Conduit, ConduitError, Rank};

pub(super) const TAG_CALL: u16 = 10;
pub(super) const TAG_CALL_DONE: u16 = 11;
const _: () = assert!(TAG_CALL_DONE < FIRST_USER_TAG);

/// Args a call carries for the user: two words go to the runtime.
///
/// ```
/// assert_eq!(amrq::am::CALL_ARGS, 6);
/// ```
pub const CALL_ARGS: usize = crate::conduit::ring::MAX_ARGS - 2;

impl<S, C: Conduit> Am<S, C> {
    /// Runs request handler `handler` at `dest` on `args` (at most [`CALL_ARGS`]) and
    /// returns the value it answered with ([`ReqCtx::reply_value`]; 0 if it answered
    /// nothing), running handlers while it waits. The handler runs atomically with
    /// respect to `dest`'s other handlers. [`AmError::RequestFailed`] if `dest` could
    /// not run it (no such request handler there, an arg missing, the handler's own
    /// error), saying which and why; `dest` goes on serving.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<u64> {
    ///     let mut t = HandlerTable::new();
    ///     // Adds to this rank's counter; answers the value before.
    ///     let add = t.request("add", |n: &Cell<u64>, ctx, m| {
    ///         let old = n.replace(n.get() + m.arg(0)?);
    ///         ctx.reply_value(old)
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     let before = am.call(0, add, &[5])?; // both ranks add 5 at rank 0
    ///     am.barrier()?;
    ///     assert_eq!(am.rank() != 0 || am.state().get() == 10, true);
    ///     Ok(before)
    /// })
    /// .unwrap();
    /// let mut befores: Vec<u64> = out;
    /// befores.sort();
    /// assert_eq!(befores, [0, 5]);
    /// ```
    pub fn call(&self, dest: Rank, handler: RequestHandler, args: &[u64]) -> Result<u64, AmError> {
        if args.len() > CALL_ARGS {
            return Err(ConduitError::TooManyArgs {
                nargs: args.len(),
                max: CALL_ARGS,
            }
            .into());
        }
        let op = self.op_open(dest, 1, 0);
        let mut words = [0u64; crate::conduit::ring::MAX_ARGS];
        words[0] = op.word();
        words[1] = u64::from(handler.0);
        words[2..2 + args.len()].copy_from_slice(args);
        let sent = self.send_request(
            dest,
            TAG_CALL,
            &words[..2 + args.len()],
            Payload::Inline(&[]),
        );
        let op = self.op_sent(op, sent)?;
        self.op_wait(op, &mut [])
    }

    /// Serves a call or lands its answer; `false` if `tag` is not one of theirs.
    pub(super) fn serve_call(
        &self,
        is_request: bool,
        tag: u16,
        msg: Msg<'_>,
    ) -> Result<bool, AmError> {
        match (tag, is_request) {
            (TAG_CALL, true) => self.run_call(msg).map(|()| true),
            (TAG_CALL_DONE, false) => self
                .land_reply(&msg, Landed::Value(msg.arg(2)?))
                .map(|()| true),
            _ => Ok(false),
        }
    }

    /// Runs the handler a call names and answers it: its value, or why it could not
    /// run (no such request handler, an arg missing, its own error), which is also
    /// recorded as the caller's fault, as for any request.
    fn run_call(&self, msg: Msg<'_>) -> Result<(), AmError> {
        let (op, id) = (msg.arg(0)?, msg.arg(1)?);
        let source = msg.source();
        let Some(tag) = u16::try_from(id).ok().filter(|&t| t >= FIRST_USER_TAG) else {
            return Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "a call names a runtime handler id",
            });
        };
        let reason = match self.table.request_fn(tag) {
            None => self.not_a_request(tag),
            Some(h) => {
                self.call_value.set(Some(None)); // serving a call, no value yet
                let p = msg.payload_in_place();
                // SAFETY: the call's payload, valid while its frame is (this call): a
                // call carries none, and `msg` said where any would lie (a shared one
                // never right after the args, which end where the call's end).
                let ran = unsafe { h(self, tag, source, &msg.args()[2..], p.as_ptr(), p.len()) };
                let value = self.call_value.take().flatten();
                match ran {
                    Ok(()) => {
                        let args = [op, OK, value.unwrap_or(0)];
                        let done = ReplyHandler(TAG_CALL_DONE);
                        return self.send_reply(source, done, &args, Payload::Inline(&[]));
                    }
                    Err(e) => self.request_fault(e.into())?,
                }
            }
        };
        self.fail_request(source, tag, op, reason)
    }
}

impl<S, C: Conduit> ReqCtx<'_, S, C> {
    /// Answers the call this handler serves with `value` ([`Am::call`] returns it);
    /// the runtime sends it once the handler returns. [`AmError::NotACall`] for a
    /// request sent with [`Am::request`], which has no caller waiting for a value.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let square = t.request("square", |_s: &(), ctx, m| ctx.reply_value(m.arg(0)? * m.arg(0)?));
    ///     let am = setup.start(t, ())?;
    ///     if am.rank() == 0 {
    ///         assert_eq!(am.call(1, square, &[12])?, 144);
    ///         // Sent as a plain request, the handler's reply_value has no caller: the
    ///         // request fails, with AmError::NotACall's text as the reason.
    ///         am.request(0, square, &[2])?;
    ///         let Err(AmError::RequestFailed(f)) = am.wait_until(|_| false) else {
    ///             unreachable!()
    ///         };
    ///         assert!(f.to_string().contains("use ReqCtx::reply"), "{f}");
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn reply_value(self, value: u64) -> Result<(), AmError> {
        match self.am.call_value.get() {
            Some(_) => {
                self.am.call_value.set(Some(Some(value)));
                Ok(())
            }
            None => Err(AmError::NotACall),
        }
    }
}
