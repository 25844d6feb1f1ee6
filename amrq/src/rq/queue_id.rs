//! The name of a queue at a rank: the AM queues, then the user queues.

/// A queue name, local to each rank.
///
/// ```
/// use amrq::rq::QueueId;
/// assert_eq!(QueueId::AM_REQUEST.index(), 0);
/// assert_eq!(QueueId::new(QueueId::FIRST_USER).index(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(usize);

impl QueueId {
    /// The AM request queue.
    pub const AM_REQUEST: QueueId = QueueId(0);
    /// The AM reply queue.
    pub const AM_REPLY: QueueId = QueueId(1);
    /// Index of the first user queue.
    pub const FIRST_USER: usize = 2;

    /// The queue with index `i`.
    ///
    /// ```
    /// use amrq::rq::QueueId;
    /// assert_eq!(QueueId::new(3).index(), 3);
    /// ```
    pub const fn new(i: usize) -> Self {
        Self(i)
    }

    /// Its index.
    ///
    /// ```
    /// use amrq::{rq::QueueId, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// assert_eq!(q.index(), QueueId::FIRST_USER); // the first queue after the AM queues
    /// ```
    pub const fn index(self) -> usize {
        self.0
    }
}
