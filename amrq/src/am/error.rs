//! The Active Messages layer's error type.

use crate::conduit::{ConduitError, Rank};
use crate::rq::RqError;

/// Why an AM operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmError {
    /// A message named a handler id this rank's table does not have (it was dropped).
    #[error("rank {source_rank} sent handler id {id}, which is not in this rank's table of {table_len} handlers")]
    UnknownHandler {
        /// The id.
        id: u16,
        /// The sender.
        source_rank: Rank,
        /// Handlers in the table.
        table_len: usize,
    },
    /// A request named a reply handler or a reply named a request handler (dropped).
    #[error("rank {source_rank} sent handler {id} ({name}) as a {arrived_as}, but it is registered as the other kind")]
    WrongHandlerKind {
        /// The id.
        id: u16,
        /// Its registered name.
        name: &'static str,
        /// The sender.
        source_rank: Rank,
        /// "request" or "reply".
        arrived_as: &'static str,
    },
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
    /// `barrier_notify` while this rank's previous barrier has not completed.
    #[error("this rank entered a barrier that has not completed: call barrier_wait (or barrier_try until true) first")]
    BarrierInProgress,
    /// `barrier_wait` or `barrier_try` without `barrier_notify`.
    #[error("this rank has not entered a barrier: call barrier_notify first")]
    NoBarrier,
    /// A runtime message was malformed (a bad peer).
    #[error("rank {source_rank} sent a malformed runtime message: {what}")]
    BadRuntimeMessage {
        /// The sender.
        source_rank: Rank,
        /// What was wrong.
        what: &'static str,
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

impl From<ConduitError> for AmError {
    fn from(e: ConduitError) -> Self {
        AmError::Rq(RqError::Conduit(e))
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
}
