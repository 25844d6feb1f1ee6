//! The conduit layer's error type.

use super::{Channel, Rank};

/// Why a conduit operation did not happen.
///
/// ```
/// use amrq::conduit::{threads, Conduit, ConduitError, Message};
/// let eps = threads::endpoints(2, &[16]).unwrap();
/// let m = Message { tag: 0, flags: 0, args: &[], payload: &[] };
/// let e = eps[0].try_send(5, 0, &m).unwrap_err();
/// assert_eq!(e, ConduitError::NoSuchRank { rank: 5, size: 2 });
/// assert_eq!(e.to_string(), "rank 5 does not exist: the job has 2 ranks (0..2)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConduitError {
    /// No room at the destination now; nothing was sent. Poll and retry.
    #[error("no room in the destination's ring now (retry after polling)")]
    Busy,
    /// The rank is not in the job.
    #[error("rank {rank} does not exist: the job has {size} ranks (0..{size})")]
    NoSuchRank {
        /// The rank asked for.
        rank: Rank,
        /// Ranks in the job.
        size: usize,
    },
    /// The channel (queue) does not exist.
    #[error("channel {channel} does not exist: this job has {channels} channels")]
    NoSuchChannel {
        /// The channel asked for.
        channel: Channel,
        /// Channels configured.
        channels: usize,
    },
    /// This rank may not send into that queue (its logical destination table says no).
    #[error(
        "rank {rank} may not enqueue into channel {channel}: the queue's senders do not include it"
    )]
    NotPermitted {
        /// This rank.
        rank: Rank,
        /// The channel.
        channel: Channel,
    },
    /// The channel is delivered by interrupts: its progress thread drains it, not the
    /// rank's own polls.
    #[error("channel {channel} is an Interrupt queue: its handlers run on the progress thread, it is not polled")]
    DeliveredByInterrupts {
        /// The channel.
        channel: Channel,
    },
    /// More args than a frame carries.
    #[error("{nargs} args given, a frame carries at most {max}")]
    TooManyArgs {
        /// Args given.
        nargs: usize,
        /// The limit.
        max: usize,
    },
    /// The payload does not fit one frame of this channel.
    #[error("payload of {len} bytes exceeds the {max}-byte limit of channel {channel} (raise its ring size)")]
    PayloadTooLarge {
        /// Bytes given.
        len: usize,
        /// The channel's limit.
        max: usize,
        /// The channel.
        channel: Channel,
    },
    /// A Tag-On payload larger than a Tag-On block.
    #[error("Tag-On payload of {len} bytes exceeds the {max}-byte Tag-On block (raise Config::tag_on_bytes, or send it as Medium or Long)")]
    TagOnTooLarge {
        /// Bytes given.
        len: usize,
        /// Bytes of a block.
        max: usize,
    },
    /// A Long message's range does not fit the destination's registered segment.
    #[error("bytes {offset}..{offset}+{len} are outside rank {rank}'s {segment_bytes}-byte registered segment (AMRQ_SEGMENT_SIZE sets its size)")]
    OutOfSegment {
        /// The destination.
        rank: Rank,
        /// Start of the range.
        offset: usize,
        /// Its length.
        len: usize,
        /// The segment's size.
        segment_bytes: usize,
    },
    /// A frame of this channel is already out (dropped or released frames end that).
    #[error("a frame of channel {channel} is still borrowed: release or drop it first")]
    FrameOutstanding {
        /// The channel.
        channel: Channel,
    },
    /// The destination closed its ring from this rank on that channel: it found a frame
    /// there that the protocol cannot produce (see its [`Faults`](super::Faults)), and
    /// reads that ring no more, so the room would never come.
    #[error("rank {rank} closed its queue {channel} from this rank after a corrupt frame: nothing more can be sent there (its faults log says what it found)")]
    ChannelClosed {
        /// The destination.
        rank: Rank,
        /// The channel.
        channel: Channel,
    },
    /// A rank of the job failed; waiting for it would never end.
    #[error("rank {rank} failed: {cause}")]
    PeerDead {
        /// The rank.
        rank: Rank,
        /// What happened to it.
        cause: String,
    },
    /// Waiting on a rank that has left the job (for room in its queues, or for its
    /// part of a barrier): it sends and drains nothing any more, so the wait would
    /// never end.
    #[error("rank {rank} has left the job: it sends and drains nothing any more, so waiting on it would never end")]
    PeerLeft {
        /// The rank.
        rank: Rank,
    },
    /// Waiting for a frame while every other rank has left the job and nothing is
    /// queued: nothing can arrive any more.
    #[error("every other rank has left the job and nothing is queued: the wait would never end")]
    AllPeersLeft,
    /// Meeting the other ranks failed: the launcher's environment, the rendezvous, a
    /// setup-time collective (a rank missing or too slow).
    #[error(transparent)]
    Bootstrap(crate::bootstrap::BootError),
    /// A frame sent into the interrupt channel itself, which carries only frames of
    /// other channels flagged [`Message::INTERRUPT`](super::Message::INTERRUPT).
    #[error("channel {channel} is the conduit's interrupt channel: send into the queue the frame is for, flagged interrupt (Rq::enqueue_interrupt)")]
    InterruptChannel {
        /// The channel.
        channel: Channel,
    },
    /// A frame flagged interrupt, but the job has no channel to carry it.
    #[error("frames flagged interrupt travel on the receiver's interrupt queue, and this job has none: set Config::interrupt_slots")]
    NoInterruptChannel,
    /// The job could not be set up.
    #[error("conduit setup failed: {0}")]
    Setup(String),
    /// UCX, which carries frames between hosts, cannot be loaded on this machine: the
    /// text says what to install.
    #[error("{0}")]
    NoUcx(String),
    /// An ability this conduit lacks (see its [`CapFlags`](super::CapFlags)): the layer
    /// above takes another path (one-sided operations as AM frames).
    #[error("this conduit does not offer {what} (its CapFlags say so); use the frame path")]
    Unsupported {
        /// What was asked.
        what: &'static str,
    },
    /// A remote atomic on a word that is not 8-byte aligned.
    #[error("remote atomics need an 8-byte aligned offset, not {offset}")]
    Misaligned {
        /// The offset given.
        offset: usize,
    },
}

impl From<crate::bootstrap::BootError> for ConduitError {
    fn from(e: crate::bootstrap::BootError) -> Self {
        match e {
            crate::bootstrap::BootError::PeerDead { rank, cause } => {
                ConduitError::PeerDead { rank, cause }
            }
            other => ConduitError::Bootstrap(other),
        }
    }
}
