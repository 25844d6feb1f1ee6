//! One error type for a program: every layer's error converts into [`Error`] with `?`,
//! and stays matchable there by the layer that decided it.
//!
//! A layer's error that only wraps a lower layer's (an [`AmError`] carrying a conduit's
//! refusal, say) converts into the lower layer's variant: a dead peer is
//! `Error::Conduit(ConduitError::PeerDead { .. })` whichever call met it. Each text says
//! what to change once; where an error has a cause of its own (an operating system
//! error), [`std::error::Error::source`] returns it, and [`Error::chain`] prints the
//! error with its causes.

use crate::am::AmError;
use crate::bootstrap::BootError;
use crate::conduit::{ConduitError, Rank};
use crate::launch::LaunchError;
use crate::rma::RmaError;
use crate::rq::RqError;
use crate::splitc::SplitCError;

/// What a program's calls return: [`Error`] on failure.
///
/// ```
/// fn checked(n: usize) -> amrq::Result<usize> {
///     Ok(n)
/// }
/// assert_eq!(checked(3).unwrap(), 3);
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why an amrq call failed, by the layer that decided it.
///
/// ```
/// use amrq::{conduit::ConduitError, rq::RqError, Error};
/// // A conduit's refusal, on its way up through the queues, is the conduit's error.
/// let e: Error = RqError::Conduit(ConduitError::NoSuchRank { rank: 5, size: 2 }).into();
/// assert!(matches!(e, Error::Conduit(ConduitError::NoSuchRank { rank: 5, .. })));
/// assert_eq!(e.to_string(), "rank 5 does not exist: the job has 2 ranks (0..2)");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting that cannot be read (an `AMRQ_*` variable), or that cannot hold.
    #[error("{name}={value}: {expected}")]
    Setting {
        /// The setting: its environment variable.
        name: &'static str,
        /// The value given.
        value: String,
        /// What it should look like.
        expected: String,
    },
    /// Starting the job's ranks, or joining the job a launcher started.
    #[error(transparent)]
    Launch(LaunchError),
    /// Meeting the other ranks: the launcher's environment, the rendezvous, a rank
    /// that failed during set-up.
    #[error(transparent)]
    Boot(BootError),
    /// Moving frames and data: ranks, channels, limits, room, peers.
    #[error(transparent)]
    Conduit(ConduitError),
    /// Remote Queues.
    #[error(transparent)]
    Rq(RqError),
    /// Active Messages.
    #[error(transparent)]
    Am(AmError),
    /// One-sided operations and allocation in the segments.
    #[error(transparent)]
    Rma(RmaError),
    /// Split-C.
    #[error(transparent)]
    SplitC(SplitCError),
    /// A rank of a job of threads panicked.
    #[error("rank {rank} panicked: {message}")]
    RankPanicked {
        /// The rank.
        rank: Rank,
        /// The panic's message.
        message: String,
    },
    /// The program's own error ([`Error::other`]).
    #[error(transparent)]
    Program(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// The program's own error, for a rank's main to return beside amrq's.
    ///
    /// ```
    /// let e = amrq::Error::other("the input file has no header");
    /// assert_eq!(e.to_string(), "the input file has no header");
    /// let parsed: amrq::Result<u32> = "x".parse::<u32>().map_err(amrq::Error::other);
    /// assert!(parsed.is_err());
    /// ```
    pub fn other(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Program(e.into())
    }

    /// The conduit error inside, if this is one (a dead peer, a full ring, a rank out
    /// of range, …).
    ///
    /// ```
    /// use amrq::{conduit::ConduitError, Error};
    /// let e: Error = ConduitError::Busy.into();
    /// assert_eq!(e.conduit(), Some(&ConduitError::Busy));
    /// ```
    pub fn conduit(&self) -> Option<&ConduitError> {
        match self {
            Error::Conduit(c) => Some(c),
            _ => None,
        }
    }

    /// The error and its causes, joined by `: `.
    ///
    /// ```
    /// use amrq::launch::LaunchError;
    /// let e = amrq::Error::from(LaunchError::Spawn {
    ///     rank: 1,
    ///     program: "./p".into(),
    ///     source: std::io::Error::from(std::io::ErrorKind::NotFound),
    /// });
    /// assert_eq!(e.chain(), "cannot start rank 1 (./p): entity not found");
    /// ```
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    }
}

impl From<ConduitError> for Error {
    fn from(e: ConduitError) -> Self {
        match e {
            ConduitError::Bootstrap(b) => Error::Boot(b),
            e => Error::Conduit(e),
        }
    }
}

impl From<BootError> for Error {
    fn from(e: BootError) -> Self {
        ConduitError::from(e).into()
    }
}

impl From<RqError> for Error {
    fn from(e: RqError) -> Self {
        match e {
            RqError::Conduit(c) => c.into(),
            e => Error::Rq(e),
        }
    }
}

impl From<AmError> for Error {
    fn from(e: AmError) -> Self {
        match e {
            AmError::Rq(r) => r.into(),
            e => Error::Am(e),
        }
    }
}

impl From<RmaError> for Error {
    fn from(e: RmaError) -> Self {
        match e {
            RmaError::Am(a) => a.into(),
            e => Error::Rma(e),
        }
    }
}

impl From<SplitCError> for Error {
    fn from(e: SplitCError) -> Self {
        match e {
            SplitCError::Rma(r) => r.into(),
            e => Error::SplitC(e),
        }
    }
}

impl From<LaunchError> for Error {
    fn from(e: LaunchError) -> Self {
        match e {
            LaunchError::Boot(b) => b.into(),
            LaunchError::Conduit(c) => c.into(),
            e => Error::Launch(e),
        }
    }
}

/// The program's own message, as [`Error::other`]: `Err("…".into())` in a rank's main.
///
/// ```
/// fn parse(words: &[&str]) -> amrq::Result<usize> {
///     if words.is_empty() {
///         return Err("give at least one word".into());
///     }
///     Ok(words.len())
/// }
/// assert_eq!(parse(&[]).unwrap_err().to_string(), "give at least one word");
/// ```
impl From<&str> for Error {
    fn from(why: &str) -> Self {
        Error::other(why)
    }
}

/// The program's own message, as [`Error::other`].
///
/// ```
/// let n = 3;
/// let e: amrq::Error = format!("{n} is odd: give an even count").into();
/// assert_eq!(e.to_string(), "3 is odd: give an even count");
/// ```
impl From<String> for Error {
    fn from(why: String) -> Self {
        Error::other(why)
    }
}
