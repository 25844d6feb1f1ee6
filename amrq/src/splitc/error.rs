//! What can go wrong in a Split-C operation.

use crate::am::AmError;
use crate::conduit::Rank;
use crate::rma::RmaError;

/// The errors of [`SplitC`](super::SplitC)'s operations: the layer's own misuse, or the
/// RMA or AM layer's error below.
///
/// ```
/// use amrq::splitc::{GlobalPtr, SplitCError};
/// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
///     let sc = job.splitc();
///     // An address past the segment: a typed error, nothing read.
///     let e = sc.read(GlobalPtr::<u64>::new(0, usize::MAX - 16)).unwrap_err();
///     println!("{e}");
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitCError {
    /// A split-phase get's destination must be in this rank's own segment (where a
    /// reply can write after the call has returned).
    #[error(
        "a split-phase get lands in this rank's own segment (rank {me}), not in rank {rank}'s"
    )]
    NotLocal {
        /// The rank the destination named.
        rank: Rank,
        /// This rank.
        me: Rank,
    },
    /// An error of the RMA layer (a pointer outside a segment, no room, …).
    #[error(transparent)]
    Rma(#[from] RmaError),
}

impl From<AmError> for SplitCError {
    fn from(e: AmError) -> Self {
        SplitCError::Rma(e.into())
    }
}

impl From<crate::conduit::ConduitError> for SplitCError {
    fn from(e: crate::conduit::ConduitError) -> Self {
        SplitCError::Rma(AmError::from(e).into())
    }
}
