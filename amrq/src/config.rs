//! The settings of a job, in one typed value.

use crate::rq::QueueId;

/// The settings of a job: ring sizes of the AM queues and of the user's named queues,
/// and the size of each rank's registered segment.
///
/// ```
/// use amrq::Config;
/// let mut cfg = Config::default();
/// let q = cfg.add_queue(64);
/// assert_eq!(cfg.channel_slots(), vec![256, 256, 64]);
/// assert_eq!(q.index(), 2);
/// assert_eq!(cfg.segment_bytes, 64 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Slots (64 B each) of each AM request ring and each AM reply ring, per sender.
    /// A power of two ≥ 256 keeps Medium payloads of 4 KiB possible.
    /// Environment: `AMRQ_RING_SLOTS`.
    pub am_ring_slots: u64,
    /// Slots per sender of each user queue, in creation order.
    pub queue_slots: Vec<u64>,
    /// Bytes of each rank's registered segment (Long messages, RMA), mapped by every
    /// rank of the host. Environment: `AMRQ_SEGMENT_SIZE` (bytes, or with K/M/G).
    pub segment_bytes: usize,
}

/// Where a setting's value came from (for `amrun --print-config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// An environment variable.
    Env,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            am_ring_slots: 256,
            queue_slots: Vec::new(),
            segment_bytes: 64 << 20,
        }
    }
}

/// Reads a size such as `4096`, `64K`, `64M` or `1G`.
///
/// ```
/// assert_eq!(amrq::config::parse_size("64M"), Some(64 << 20));
/// assert_eq!(amrq::config::parse_size("12"), Some(12));
/// assert_eq!(amrq::config::parse_size("x"), None);
/// ```
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 10),
        'm' | 'M' => (&s[..s.len() - 1], 20),
        'g' | 'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

impl Config {
    /// The defaults, overridden by `AMRQ_RING_SLOTS` and `AMRQ_SEGMENT_SIZE` when set.
    /// Unreadable values are an error that names the variable.
    pub fn from_env() -> Result<Self, String> {
        let mut c = Self::default();
        if let Ok(v) = std::env::var("AMRQ_RING_SLOTS") {
            c.am_ring_slots = v
                .parse()
                .map_err(|_| format!("AMRQ_RING_SLOTS={v}: expected a power of two such as 256"))?;
        }
        if let Ok(v) = std::env::var("AMRQ_SEGMENT_SIZE") {
            c.segment_bytes = parse_size(&v).ok_or_else(|| {
                format!("AMRQ_SEGMENT_SIZE={v}: expected bytes such as 67108864 or 64M")
            })?;
        }
        Ok(c)
    }

    /// Where each setting of [`Config::from_env`] comes from.
    pub fn sources() -> [(&'static str, Source); 2] {
        let src = |k: &str| {
            if std::env::var_os(k).is_some() {
                Source::Env
            } else {
                Source::Default
            }
        };
        [
            ("AMRQ_RING_SLOTS", src("AMRQ_RING_SLOTS")),
            ("AMRQ_SEGMENT_SIZE", src("AMRQ_SEGMENT_SIZE")),
        ]
    }

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
