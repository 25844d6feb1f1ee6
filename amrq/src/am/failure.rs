//! Requests their target could not run: the target records the fault and sends its
//! sender a notice, which becomes [`AmError::RequestFailed`] at the sender.
//!
//! | at the target | notice (a runtime reply: args, payload) | at the sender |
//! |---|---|---|
//! | a request names no request handler, a handler finds an arg missing or returns an error | `FAILED` (call op or 0, handler id, reason, two words; the error's text) | the first [`Am::poll`] or wait of the program that runs it, or that follows a runtime wait that ran it, returns it; an [`Am::call`] returns its own |
//!
//! The runtime's own waits (a send waiting for room, a barrier, a one-sided operation)
//! keep a notice for the program's next poll or wait rather than abandon their own
//! operation halfway.

use super::handlers::FIRST_USER_TAG;
use super::payload::Payload;
use super::{Am, AmError, Msg, ReplyHandler};
use crate::conduit::{Conduit, ConduitError, FaultKind, Rank};

pub(super) const TAG_FAILED: u16 = 12;
const _: () = assert!(TAG_FAILED < FIRST_USER_TAG);

/// A request its target could not run, as its sender learns it: which rank, which
/// handler, and why. The target went on serving, and recorded the same reason in its
/// [`Am::faults`].
///
/// ```
/// use amrq::prelude::*;
/// use amrq::conduit::FaultKind;
/// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
///     let mut t = HandlerTable::new();
///     let add = t.request("add", |n: &std::cell::Cell<u64>, _ctx, m| {
///         n.set(n.get() + m.arg(0)?);
///         Ok(())
///     });
///     let am = setup.start(t, std::cell::Cell::new(0))?;
///     if am.rank() == 0 {
///         am.request(1, add, &[])?; // no arg: rank 1's handler cannot run it
///         let Err(AmError::RequestFailed(f)) = am.wait_until(|_| false) else {
///             unreachable!("only the failure can end this wait")
///         };
///         assert_eq!((f.target, f.name.as_str()), (1, "add"));
///         assert_eq!(f.reason, FaultKind::MissingArg { index: 0, nargs: 0 });
///         assert_eq!(
///             f.to_string(),
///             "rank 1 could not run request handler `add`: arg 0 asked for, but the message carries 0"
///         );
///     }
///     Ok(am.barrier()?)
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFailure {
    /// The rank the request was sent to.
    pub target: Rank,
    /// The handler id the request named.
    pub handler: u16,
    /// That handler's name in this rank's table (the same on every rank); empty if the
    /// table has no such id.
    pub name: String,
    /// Why the target could not run it.
    pub reason: FaultKind,
}

impl std::fmt::Display for RequestFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name.is_empty() {
            true => write!(
                f,
                "rank {} could not run request handler id {}",
                self.target, self.handler
            )?,
            false => write!(
                f,
                "rank {} could not run request handler `{}`",
                self.target, self.name
            )?,
        }
        write!(f, ": {}", self.reason)
    }
}

/// Bytes of a handler's error text a notice carries.
const TEXT_BYTES: usize = 1024;

/// A reason as a notice carries it: a code, two words and a text.
fn encode(reason: &FaultKind) -> (u64, [u64; 2], &str) {
    match reason {
        FaultKind::UnknownHandler { .. } => (1, [0; 2], ""),
        FaultKind::WrongHandlerKind { .. } => (2, [0; 2], ""),
        FaultKind::MissingArg { index, nargs } => (3, [*index as u64, *nargs as u64], ""),
        FaultKind::HandlerFailed { error } => (4, [0; 2], error),
        FaultKind::BadArg { index } => (6, [*index as u64, 0], ""),
        FaultKind::BadPayload { len, size } => (7, [*len as u64, *size as u64], ""),
        other => (5, [0; 2], short_text(other)),
    }
}

/// A static text for a reason no user handler produces (a runtime request's).
fn short_text(reason: &FaultKind) -> &'static str {
    match reason {
        FaultKind::BadRuntimeMessage { what } => what,
        _ => "a frame its target could not take",
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character.
fn clipped(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl<S, C: Conduit> Am<S, C> {
    /// At the target: records that `source`'s request for handler `handler` (a call's
    /// operation `op`, or 0) could not run, as `source`'s fault, and tells `source`
    /// why — unless it has gone (a failed or departed sender is told nothing, and that
    /// is no error of this poll).
    #[cold]
    pub(super) fn fail_request(
        &self,
        source: Rank,
        handler: u16,
        op: u64,
        reason: FaultKind,
    ) -> Result<(), AmError> {
        let told = self.notify_failure(source, handler, op, &reason);
        self.record_fault(crate::rq::QueueId::AM_REQUEST, source, reason);
        match told {
            Err(e) if !e.fails_request() => Ok(()), // the sender has gone: nobody to tell
            told => told,
        }
    }

    /// Tells `source` that its request for handler `handler` (a call's operation `op`,
    /// or 0) was not run, and why.
    #[cold]
    fn notify_failure(
        &self,
        source: Rank,
        handler: u16,
        op: u64,
        reason: &FaultKind,
    ) -> Result<(), AmError> {
        let (code, [a, b], text) = encode(reason);
        let text = clipped(text, TEXT_BYTES.min(self.max_medium()));
        let args = [op, u64::from(handler), code, a, b];
        self.send_reply(
            source,
            ReplyHandler(TAG_FAILED),
            &args,
            Payload::Inline(text.as_bytes()),
        )
    }

    /// At the sender: the failure a notice brings. A call's lands in its operation
    /// (its [`Am::call`] returns it); any other is returned, to end the poll or wait
    /// that ran it.
    #[cold]
    pub(super) fn take_notice(&self, msg: Msg<'_>) -> Result<(), AmError> {
        let (op, id) = (msg.arg(0)?, msg.arg(1)?);
        let (code, a, b) = (msg.arg(2)?, msg.arg(3)?, msg.arg(4)?);
        let handler = u16::try_from(id).map_err(|_| AmError::BadRuntimeMessage {
            source_rank: msg.source(),
            what: "a failure notice names no handler id",
        })?;
        let name = match self.table.kind(handler) {
            Some(_) => self.table.name(handler).to_string(),
            None => String::new(),
        };
        let text = || String::from_utf8_lossy(&msg.payload()).into_owned();
        let reason = match code {
            1 => FaultKind::UnknownHandler { id: handler },
            2 => self.not_a_request(handler),
            3 => FaultKind::MissingArg {
                index: a as usize,
                nargs: b as usize,
            },
            4 | 5 => FaultKind::HandlerFailed { error: text() },
            6 => FaultKind::BadArg { index: a as usize },
            7 => FaultKind::BadPayload {
                len: a as usize,
                size: b as usize,
            },
            _ => {
                return Err(AmError::BadRuntimeMessage {
                    source_rank: msg.source(),
                    what: "a failure notice with a reason no rank sends",
                })
            }
        };
        let failure = Box::new(RequestFailure {
            target: msg.source(),
            handler,
            name,
            reason,
        });
        match op {
            0 => Err(AmError::RequestFailed(failure)),
            call if call & super::thread_calls::THREAD_CALL != 0 => {
                match self.thread_calls.fail(call, msg.source(), failure) {
                    true => Ok(()),
                    false => Err(AmError::BadRuntimeMessage {
                        source_rank: msg.source(),
                        what: "a failure notice for no call in flight to it",
                    }),
                }
            }
            call => {
                let failed = self.calls.with(|c| c.fail(call, msg.source(), failure));
                self.calls.land_taken();
                failed
            }
        }
    }

    /// Why a request for `tag`, which names no request handler, cannot run.
    pub(super) fn not_a_request(&self, tag: u16) -> FaultKind {
        match self.table.kind(tag) {
            Some(_) => FaultKind::WrongHandlerKind {
                id: tag,
                name: self.table.name(tag).to_string(),
                arrived_as: "request",
            },
            None => FaultKind::UnknownHandler { id: tag },
        }
    }

    /// A request handler's error as its request's failure; `Err` if it ends this
    /// rank's part in the job instead ([`AmError::fails_request`]).
    pub(super) fn request_fault(&self, e: AmError) -> Result<FaultKind, AmError> {
        match e.peer_fault() {
            Some((_, kind)) => Ok(kind),
            None if e.fails_request() => Ok(FaultKind::HandlerFailed {
                error: e.to_string(),
            }),
            None => Err(e),
        }
    }

    /// For the runtime's own waits: a request failure is kept for the program's next
    /// poll or wait; any other error is returned.
    #[cold]
    pub(crate) fn keep_failure(&self, e: AmError) -> Result<(), AmError> {
        match e {
            AmError::RequestFailed(_) => {
                self.keep_error(e);
                Ok(())
            }
            e => Err(e),
        }
    }

    /// Keeps `e` for the program's next poll or wait: a request failure a runtime wait
    /// ran, or any error the progress engine met (the program is told, not the
    /// engine).
    #[cold]
    pub(crate) fn keep_error(&self, e: AmError) {
        self.kept_failures.borrow_mut().push_back(e);
        self.attention.set(true);
    }

    /// [`Am::poll`] for the runtime's own waits: a failure notice it runs is kept.
    #[inline(never)]
    pub(crate) fn poll_runtime(&self) -> Result<usize, AmError> {
        self.poll_outlined()
            .or_else(|e| self.keep_failure(e).map(|()| 1))
    }

    /// The failures no poll or wait returned, said on standard error once the program
    /// is done with this rank: none is lost silently.
    pub(super) fn say_unreturned_failures(&self) {
        for e in self.kept_failures.borrow_mut().drain(..) {
            let what = match e {
                AmError::RequestFailed(_) => "a request failed",
                _ => "the progress engine met an error",
            };
            crate::util::say(&format!(
                "amrq: rank {}: {what} and no poll or wait returned it: {e}",
                self.rank()
            ));
        }
    }
}

impl AmError {
    /// True if a request handler's error is its request's failure, to be sent back to
    /// the sender; false for what ends this rank's part in the job (a peer failed or
    /// left, a ring closed), which the poll returns.
    ///
    /// ```
    /// use amrq::{am::AmError, conduit::ConduitError};
    /// assert!(AmError::from("refused").fails_request());
    /// assert!(!AmError::from(ConduitError::PeerLeft { rank: 1 }).fails_request());
    /// ```
    pub fn fails_request(&self) -> bool {
        !matches!(
            self.conduit(),
            Some(
                ConduitError::PeerDead { .. }
                    | ConduitError::PeerLeft { .. }
                    | ConduitError::AllPeersLeft
                    | ConduitError::ChannelClosed { .. }
            )
        )
    }
}
