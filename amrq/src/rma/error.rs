//! The RMA layer's error type.

use crate::am::AmError;
use crate::conduit::Rank;

/// Why a one-sided operation or an allocation failed.
///
/// ```
/// use amrq::{prelude::*, rma::{Rma, RmaError}};
/// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     let rma = am.rma();
///     let e = rma.alloc_symmetric(usize::MAX / 2, 8).unwrap_err();
///     println!("{e}"); // says how much was asked and how much is free
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RmaError {
    /// The range is not inside the target's registered segment.
    #[error("bytes {offset}..{offset}+{len} are outside rank {rank}'s registered segment of {segment_bytes} bytes")]
    OutOfSegment {
        /// The target.
        rank: Rank,
        /// First byte.
        offset: usize,
        /// Bytes.
        len: usize,
        /// Size of its segment.
        segment_bytes: usize,
    },
    /// No such rank.
    #[error("rank {rank} does not exist (the job has {size})")]
    NoSuchRank {
        /// The rank asked for.
        rank: Rank,
        /// Ranks in the job.
        size: usize,
    },
    /// An atomic operation on an address that is not 8-byte aligned.
    #[error("remote atomics need an 8-byte aligned offset, not {offset}")]
    Misaligned {
        /// The offset given.
        offset: usize,
    },
    /// The segment has no free range of that size.
    #[error("no room for {len} bytes in the registered segment ({free} bytes free, fragmented or not): raise AMRQ_SEGMENT_SIZE or free allocations")]
    OutOfMemory {
        /// Bytes asked for.
        len: usize,
        /// Bytes free.
        free: usize,
    },
    /// A collective allocation did not land at the same offset on every rank.
    #[error("symmetric allocation of {len} bytes failed on rank {rank} (every rank must make the same symmetric allocations in the same order, and have room)")]
    NotSymmetric {
        /// Bytes asked for.
        len: usize,
        /// A rank where it failed or differed.
        rank: Rank,
    },
    /// `free` of an offset that is not an allocation.
    #[error("nothing is allocated at offset {offset}")]
    NotAllocated {
        /// The offset given.
        offset: usize,
    },
    /// An alignment that is not a power of two.
    #[error("alignment {align} is not a power of two (1, 2, 4, 8, …)")]
    BadAlignment {
        /// The alignment given.
        align: usize,
    },
    /// A strided region that describes no set of blocks.
    #[error("a strided region needs counts = [block bytes, repeats per dimension…] and one stride per dimension ({counts} counts, {strides} strides given): {why}")]
    BadStrided {
        /// Counts given.
        counts: usize,
        /// Strides given.
        strides: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// Operations through frames need larger Medium payloads than the AM rings carry.
    #[error("one-sided operations through frames need Medium payloads of at least {needed} bytes, but this job's AM rings carry {max_medium}: raise AMRQ_RING_SLOTS (256 or more)")]
    FramesTooSmall {
        /// The largest Medium payload.
        max_medium: usize,
        /// Bytes needed.
        needed: usize,
    },
    /// A collective's buffers do not have the lengths it needs.
    #[error("a buffer of {got} elements where {expected} are needed")]
    LengthMismatch {
        /// Elements needed.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// From the layers below (a dead peer, a full queue for a notification, …).
    #[error(transparent)]
    Am(#[from] AmError),
}

impl From<crate::rq::RqError> for RmaError {
    fn from(e: crate::rq::RqError) -> Self {
        RmaError::Am(AmError::from(e))
    }
}

impl From<crate::conduit::ConduitError> for RmaError {
    fn from(e: crate::conduit::ConduitError) -> Self {
        RmaError::Am(AmError::from(e))
    }
}
