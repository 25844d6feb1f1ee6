//! The Remote Queues layer's error type.

use crate::conduit::ConduitError;

/// Why a queue operation failed. A full queue is not an error: `enqueue` returns `Ok(false)`.
///
/// ```
/// use amrq::{rq::{QueueId, Rq, RqError}, Config};
/// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
///     let rq = job.rq();
///     // The AM queues are the runtime's: a user enqueue into one is refused, and says why.
///     let e = rq.enqueue(0, QueueId::AM_REQUEST, &[], &[]).unwrap_err();
///     assert!(matches!(e, RqError::RuntimeQueue { queue: 0 }));
///     assert!(e.to_string().contains("Config::add_queue"));
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RqError {
    /// `dequeue` was given room for fewer args or bytes than the frame holds; the frame
    /// stays at the head of the queue.
    #[error("the frame at the head of the queue has {nargs} args and {len} payload bytes: give dequeue room for them")]
    BufferTooSmall {
        /// Args in the frame.
        nargs: usize,
        /// Payload bytes in the frame.
        len: usize,
    },
    /// An Express message must fit one slot.
    #[error("{nargs} args and {len} payload bytes do not fit one 64-byte slot (Express takes up to 6 args, or 16 + 8·args + payload ≤ 64 bytes): send it Basic or Tag-On")]
    NotExpress {
        /// Args given.
        nargs: usize,
        /// Payload bytes given.
        len: usize,
    },
    /// The queue is one of the runtime's (the AM request and reply queues): only the AM
    /// layer sends into it, so that no program can forge a runtime message.
    #[error("queue {queue} carries the runtime's Active Messages: send with Am's requests and replies, or into a queue of your own (Config::add_queue)")]
    RuntimeQueue {
        /// The queue.
        queue: usize,
    },
    /// A rank's other threads enqueue only into shared Poll queues, whose senders
    /// reserve slots by compare-and-swap; this one has a ring per sender, or is an
    /// Interrupt queue.
    #[error("queue {queue} is not a shared Poll queue: a rank's other threads enqueue only into queues declared QueueSpec::shared, with Poll delivery (added with Config::add)")]
    NotShared {
        /// The queue.
        queue: usize,
    },
    /// A blocking wait saw nothing arrive within its deadline.
    #[error("nothing arrived within {waited:?}")]
    Timeout {
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// Bad destination, queue, sizes, a corrupt peer, a dead peer (from the conduit).
    #[error(transparent)]
    Conduit(#[from] ConduitError),
}
