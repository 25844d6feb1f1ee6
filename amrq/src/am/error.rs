//! The Active Messages layer's error type.

use super::RequestFailure;
use crate::conduit::{ConduitError, FaultKind, Rank};
use crate::rq::RqError;

/// Why an AM operation failed.
///
/// ```
/// use amrq::prelude::*;
/// use amrq::conduit::ConduitError;
/// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
///     let mut t = HandlerTable::new();
///     let h = t.request("h", |_s: &(), _ctx, _m| Ok(()));
///     let am = setup.start(t, ())?;
///     // A rank that does not exist: a typed error that says which, nothing sent.
///     let e: AmError = am.request(5, h, &[]).unwrap_err();
///     assert!(matches!(e.conduit(), Some(ConduitError::NoSuchRank { .. })), "{e}");
///     assert_eq!(am.barrier_try(), Err(AmError::NoBarrier)); // no barrier entered
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmError {
    /// The ranks registered different handler tables.
    #[error("rank {rank} registered a different handler table ({their_len} handlers, fingerprint {their_fingerprint:#x}) than rank {me} ({my_len} handlers, fingerprint {my_fingerprint:#x}): register the same handlers in the same order on every rank")]
    HandlerTableMismatch {
        /// This rank.
        me: Rank,
        /// The first rank whose table differs.
        rank: Rank,
        /// Handlers here.
        my_len: usize,
        /// Handlers there.
        their_len: usize,
        /// Fingerprint here.
        my_fingerprint: u64,
        /// Fingerprint there.
        their_fingerprint: u64,
    },
    /// The target of a one-sided operation through frames refused it (an address
    /// outside its segment, or misaligned for an atomic).
    #[error(
        "the target refused a one-sided operation (address outside its segment, or misaligned)"
    )]
    RemoteRefused,
    /// A request its target could not run: no such request handler there, an arg the
    /// handler asked for and the message lacks, or the handler's own error. Returned
    /// once, by the sender's first poll or wait that runs the target's notice or
    /// follows a runtime wait that ran it ([`Am::poll`](super::Am::poll)), or by the
    /// [`Am::call`](super::Am::call) it answers.
    #[error("{0}")]
    RequestFailed(Box<RequestFailure>),
    /// A handler's own error, in words (`Err("…".into())` in a handler): its request
    /// fails with this text as the reason.
    #[error("{0}")]
    Failed(String),
    /// `barrier_notify` while this rank's previous barrier has not completed.
    #[error("this rank entered a barrier that has not completed: call barrier_wait (or barrier_try until true) first")]
    BarrierInProgress,
    /// `barrier_wait` or `barrier_try` without `barrier_notify`.
    #[error("this rank has not entered a barrier: call barrier_notify first")]
    NoBarrier,
    /// A runtime message was malformed (a bad peer). Returned by a handler, it is
    /// recorded as that peer's fault ([`Am::faults`](super::Am::faults)), not returned
    /// by the poll that ran the handler.
    #[error("rank {source_rank} sent a malformed runtime message: {what}")]
    BadRuntimeMessage {
        /// The sender.
        source_rank: Rank,
        /// What was wrong.
        what: &'static str,
    },
    /// A handler asked for an arg the message does not carry ([`Msg::arg`](super::Msg::arg)).
    /// Returned by a handler, it is recorded as the sender's fault
    /// ([`Am::faults`](super::Am::faults)), not returned by the poll that ran it.
    #[error("rank {source_rank} sent {nargs} args, and the handler asked for arg {index}")]
    MissingArg {
        /// The sender.
        source_rank: Rank,
        /// The arg asked for.
        index: usize,
        /// Args the message carries.
        nargs: usize,
    },
    /// A typed handler's arg (or a call's answer) that is outside its type's range: a
    /// `bool` that is not 0 or 1, a `u32` above `u32::MAX`, … Returned by a handler, it
    /// is recorded as the sender's fault.
    #[error("rank {source_rank} sent word {index} outside the range of its arg's type")]
    BadArg {
        /// The sender.
        source_rank: Rank,
        /// The word.
        index: usize,
    },
    /// A payload read as plain-data values ([`Msg::payload_as`](super::Msg::payload_as))
    /// whose length is not a whole number of them. Returned by a handler, it is recorded
    /// as the sender's fault.
    #[error("rank {source_rank} sent a payload of {len} bytes, not a whole number of {size}-byte values")]
    BadPayload {
        /// The sender.
        source_rank: Rank,
        /// The payload's bytes.
        len: usize,
        /// The size of the values asked for.
        size: usize,
    },
    /// A barrier needs a rank that has returned from its main, which enters no barrier
    /// any more.
    #[error("rank {rank} has returned from its main, so this barrier can never complete: every rank must reach the same barriers before it returns")]
    PeerReturned {
        /// The rank.
        rank: Rank,
    },
    /// Every other rank has returned from its main and nothing is in flight to this
    /// rank: the wait's condition can never become true.
    #[error("every other rank has returned from its main and rank {rank} has nothing in flight: this wait can never end (the message it waits for was never sent)")]
    NothingCanArrive {
        /// This rank.
        rank: Rank,
    },
    /// [`Am::sender`](super::Am::sender) in a job with no ring for other threads'
    /// requests.
    #[error("this job has no ring for requests from other threads: start it with Config::sender_slots (AMRQ_SENDER_SLOTS) set to a power of two such as 256")]
    NoSenderRing,
    /// A `Sender` on the rank's own thread waited for that thread (room in the rank's
    /// own ring, or an answer), which alone serves the rank.
    #[error("a Sender waited on the rank's own thread, which alone serves the rank: on that thread use the rank's own calls (request, call, rma(), rq()), or poll until Answer::is_ready")]
    WaitOnRankThread,
    /// The rank's thread stopped serving (it unwound) while another thread of the rank
    /// waited for it.
    #[error("the rank's own thread stopped serving while this thread waited for it")]
    RankNotServing,
    /// A rank's threads have as many calls in flight as it has slots for.
    #[error("this rank's threads have {max} calls in flight: wait for answers before making more")]
    TooManyCalls {
        /// The most a rank's threads may have in flight.
        max: usize,
    },
    /// A wait with a deadline ran out.
    #[error("condition still false after waiting {waited:?}")]
    Timeout {
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// From the queues below: bad rank, too many args, oversized payload, dead peer, …
    #[error(transparent)]
    Rq(#[from] RqError),
}

impl From<&str> for AmError {
    fn from(text: &str) -> Self {
        AmError::Failed(text.to_string())
    }
}

impl From<String> for AmError {
    fn from(text: String) -> Self {
        AmError::Failed(text)
    }
}

impl From<ConduitError> for AmError {
    fn from(e: ConduitError) -> Self {
        AmError::Rq(RqError::Conduit(e))
    }
}

/// An error on its way out of a drain of the AM queues: boxed, so that what the scan
/// moves per frame fits in a register (an `AmError` is 48 bytes, and its `Result`s went
/// through memory on every frame and every poll). Made only on the cold paths.
pub(crate) struct Stop(Box<Stopped>);

/// What a [`Stop`] holds.
pub(crate) struct Stopped {
    pub(crate) error: AmError,
    /// The request a user's request handler returned the error for: its sender and
    /// handler id.
    pub(crate) request: Option<(Rank, u16)>,
}

impl Stop {
    /// A user's request handler's error, for request `tag` of `source`.
    #[cold]
    #[inline(never)]
    pub(crate) fn of_request(error: AmError, source: Rank, tag: u16) -> Self {
        Stop(Box::new(Stopped {
            error,
            request: Some((source, tag)),
        }))
    }

    /// What it holds.
    pub(crate) fn into_inner(self) -> Stopped {
        *self.0
    }
}

impl From<AmError> for Stop {
    #[cold]
    fn from(error: AmError) -> Self {
        Stop(Box::new(Stopped {
            error,
            request: None,
        }))
    }
}

impl From<ConduitError> for Stop {
    #[cold]
    fn from(e: ConduitError) -> Self {
        AmError::from(e).into()
    }
}

impl From<Stop> for AmError {
    #[cold]
    fn from(s: Stop) -> Self {
        s.0.error
    }
}

impl AmError {
    /// The conduit error inside, if this is one (bad rank, oversized payload, …).
    ///
    /// ```
    /// use amrq::{am::AmError, conduit::ConduitError};
    /// let e: AmError = ConduitError::Busy.into();
    /// assert_eq!(e.conduit(), Some(&ConduitError::Busy));
    /// ```
    pub fn conduit(&self) -> Option<&ConduitError> {
        match self {
            AmError::Rq(RqError::Conduit(c)) => Some(c),
            _ => None,
        }
    }

    /// The peer whose fault this is, and what it did, if it is a peer's fault (a
    /// message it should not have sent) rather than this rank's error: a handler that
    /// returns it has its message dropped and the fault recorded, and the poll goes on.
    ///
    /// ```
    /// use amrq::{am::AmError, conduit::FaultKind};
    /// let e = AmError::MissingArg { source_rank: 2, index: 1, nargs: 0 };
    /// assert_eq!(e.peer_fault(), Some((2, FaultKind::MissingArg { index: 1, nargs: 0 })));
    /// assert_eq!(AmError::NoBarrier.peer_fault(), None);
    /// ```
    pub fn peer_fault(&self) -> Option<(Rank, FaultKind)> {
        match *self {
            AmError::BadRuntimeMessage { source_rank, what } => {
                Some((source_rank, FaultKind::BadRuntimeMessage { what }))
            }
            AmError::MissingArg {
                source_rank,
                index,
                nargs,
            } => Some((source_rank, FaultKind::MissingArg { index, nargs })),
            AmError::BadArg { source_rank, index } => {
                Some((source_rank, FaultKind::BadArg { index }))
            }
            AmError::BadPayload {
                source_rank,
                len,
                size,
            } => Some((source_rank, FaultKind::BadPayload { len, size })),
            _ => None,
        }
    }
}
