//! The settings of a job, in one typed value.

use crate::rq::QueueId;

/// Ring sizes of the AM queues and the user's named queues.
///
/// ```
/// use amrq::Config;
/// let mut cfg = Config::default();
/// let q = cfg.add_queue(64);
/// assert_eq!(cfg.channel_slots(), vec![256, 256, 64]);
/// assert_eq!(q.index(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Slots (64 B each) of each AM request ring and each AM reply ring, per sender.
    /// A power of two ≥ 256 keeps Medium payloads of 4 KiB possible.
    pub am_ring_slots: u64,
    /// Slots per sender of each user queue, in creation order.
    pub queue_slots: Vec<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            am_ring_slots: 256,
            queue_slots: Vec::new(),
        }
    }
}

impl Config {
    /// Adds a user queue whose ring from each sender has `slots` slots (a power of two).
    pub fn add_queue(&mut self, slots: u64) -> QueueId {
        self.queue_slots.push(slots);
        QueueId::new(QueueId::FIRST_USER + self.queue_slots.len() - 1)
    }

    /// The ring size of every conduit channel: AM requests, AM replies, then user queues.
    pub fn channel_slots(&self) -> Vec<u64> {
        let mut v = vec![self.am_ring_slots, self.am_ring_slots];
        v.extend_from_slice(&self.queue_slots);
        v
    }
}
