//! The settings of a job, in one typed value.

use crate::conduit::{Rank, Senders};
use crate::rq::QueueId;

/// How the frames of a queue reach the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// The program dequeues or polls (the default: atomic by default, as RQ argues).
    #[default]
    Poll,
    /// A progress thread runs their handlers as they arrive (selective interrupts).
    Interrupt,
}

/// A named queue that every rank has: its capacity, delivery and senders.
///
/// ```
/// use amrq::config::{Delivery, QueueSpec};
/// let q = QueueSpec::new("results", 64).senders_only(vec![0]).delivery(Delivery::Poll);
/// assert_eq!(q.slots, 64);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Its name.
    pub name: String,
    /// Ring slots (64 B) per sender (of a shared queue: in all): the queue's capacity,
    /// and its memory bound.
    pub slots: u64,
    /// How its frames are delivered.
    pub delivery: Delivery,
    /// Which ranks may enqueue into it.
    pub senders: Senders,
    /// Its senders ring the receiver's doorbell when it is idle, so that One-poll over
    /// it costs O(1) when empty (each enqueue pays a fence for it).
    pub one_poll: bool,
    /// One ring that every sender reserves slots in, instead of one ring per sender
    /// (see [`QueueSpec::shared`]).
    pub shared: bool,
}

impl QueueSpec {
    /// A Poll queue anyone may send to, `slots` slots per sender (a power of two).
    pub fn new(name: impl Into<String>, slots: u64) -> Self {
        Self {
            name: name.into(),
            slots,
            delivery: Delivery::Poll,
            senders: Senders::All,
            one_poll: false,
            shared: false,
        }
    }

    /// Makes it one ring of `slots` slots that all senders share, each reserving its
    /// slots by a compare-and-swap on the ring's tail (the T3D's shared-queue slot
    /// reservation), instead of one ring per sender. Its memory is `slots × 64 B` per
    /// receiver whatever the number of ranks, but senders compete for room, and each
    /// enqueue pays one locked instruction; a frame carries at most 7 args (the eighth
    /// word names the sender).
    ///
    /// ```
    /// use amrq::config::QueueSpec;
    /// let q = QueueSpec::new("work", 1024).shared();
    /// assert!(q.shared);
    /// ```
    pub fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    /// Makes it part of O(1) One-poll sets (see [`crate::rq::Rq::one_poll`]).
    pub fn one_poll(mut self) -> Self {
        self.one_poll = true;
        self
    }

    /// Only `ranks` may enqueue into it.
    pub fn senders_only(mut self, ranks: Vec<Rank>) -> Self {
        self.senders = Senders::Only(ranks);
        self
    }

    /// Sets the delivery mode.
    pub fn delivery(mut self, d: Delivery) -> Self {
        self.delivery = d;
        self
    }
}

/// The settings of a job: ring sizes of the AM queues and of the user's named queues,
/// and the size of each rank's registered segment.
///
/// ```
/// use amrq::Config;
/// let mut cfg = Config::default();
/// let q = cfg.add_queue(64);
/// assert_eq!(cfg.channel_slots(), vec![256, 256, 64]);
/// assert_eq!(q.index(), 2);
/// assert_eq!(cfg.queue_named("q2"), Some(q));
/// assert_eq!(cfg.segment_bytes, 64 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Slots (64 B each) of each AM request ring and each AM reply ring, per sender.
    /// A power of two ≥ 256 keeps Medium payloads of 4 KiB possible.
    /// Environment: `AMRQ_RING_SLOTS`.
    pub am_ring_slots: u64,
    /// The user's named queues, in creation order (queue ids from 2 on).
    pub queues: Vec<QueueSpec>,
    /// Bytes of each rank's registered segment (Long messages, RMA), mapped by every
    /// rank of the host. Environment: `AMRQ_SEGMENT_SIZE` (bytes, or with K/M/G).
    pub segment_bytes: usize,
    /// Tag-On blocks per (sender, receiver) pair.
    pub tag_on_buffers: usize,
    /// Bytes of each Tag-On block (the largest Tag-On message).
    pub tag_on_bytes: usize,
    /// Slots per sender of each rank's interrupt queue, which carries frames flagged
    /// interrupt by their senders ([`Rq::enqueue_interrupt`](crate::rq::Rq::enqueue_interrupt))
    /// to the receiver's progress thread; 0 (the default): no such queue.
    pub interrupt_slots: u64,
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
            queues: Vec::new(),
            segment_bytes: 64 << 20,
            tag_on_buffers: 8,
            tag_on_bytes: 4096,
            interrupt_slots: 0,
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

    /// Adds a Poll queue anyone may send to, named `q<id>`, whose ring from each sender
    /// has `slots` slots (a power of two).
    pub fn add_queue(&mut self, slots: u64) -> QueueId {
        let name = format!("q{}", QueueId::FIRST_USER + self.queues.len());
        self.add(QueueSpec::new(name, slots))
    }

    /// Adds the queue `spec` on every rank; returns its id.
    pub fn add(&mut self, spec: QueueSpec) -> QueueId {
        self.queues.push(spec);
        QueueId::new(QueueId::FIRST_USER + self.queues.len() - 1)
    }

    /// The id of the queue named `name`.
    pub fn queue_named(&self, name: &str) -> Option<QueueId> {
        self.queues
            .iter()
            .position(|q| q.name == name)
            .map(|i| QueueId::new(QueueId::FIRST_USER + i))
    }

    /// The ring size of every conduit channel: AM requests, AM replies, user queues,
    /// then the interrupt queue if there is one.
    pub fn channel_slots(&self) -> Vec<u64> {
        let mut v = vec![self.am_ring_slots, self.am_ring_slots];
        v.extend(self.queues.iter().map(|q| q.slots));
        self.and_interrupt_queue(v, self.interrupt_slots)
    }

    /// The conduit channel of the interrupt queue (after the user queues), if any.
    pub fn interrupt_channel(&self) -> Option<usize> {
        (self.interrupt_slots > 0).then_some(QueueId::FIRST_USER + self.queues.len())
    }

    /// `v` (one entry per AM and user queue) with `value` for the interrupt queue, if
    /// the job has one.
    fn and_interrupt_queue<T>(&self, mut v: Vec<T>, value: T) -> Vec<T> {
        if self.interrupt_channel().is_some() {
            v.push(value);
        }
        v
    }

    /// Which conduit channels ring the receiver's doorbell: the AM queues (so that a
    /// blocking wait can sleep), One-poll queues and Interrupt queues.
    pub fn channel_notify(&self) -> Vec<bool> {
        let mut v = vec![true, true];
        v.extend(
            self.queues
                .iter()
                .map(|q| q.one_poll || q.delivery == Delivery::Interrupt),
        );
        self.and_interrupt_queue(v, true)
    }

    /// Checks what the conduits cannot represent. Doorbell bits are `queue % 64`: One-poll
    /// queues that share a bit only cost a spurious scan, but an Interrupt queue must
    /// have its bit to itself (the progress thread disarms its bits when it wakes).
    pub fn check(&self) -> Result<(), String> {
        let (notify, interrupt) = (self.channel_notify(), self.channel_interrupt());
        for (ch, _) in interrupt.iter().enumerate().filter(|(_, &i)| i) {
            if let Some(other) =
                (0..notify.len()).find(|&o| o != ch && notify[o] && o % 64 == ch % 64)
            {
                return Err(format!(
                    "Interrupt queue {ch} shares doorbell bit {} with queue {other}: doorbell bits are queue % 64; create the Interrupt queues among the first 64",
                    ch % 64
                ));
            }
        }
        Ok(())
    }

    /// Which conduit channels are delivered by interrupts (a progress thread).
    pub fn channel_interrupt(&self) -> Vec<bool> {
        let mut v = vec![false, false];
        v.extend(
            self.queues
                .iter()
                .map(|q| q.delivery == Delivery::Interrupt),
        );
        self.and_interrupt_queue(v, true)
    }

    /// Which conduit channels are one ring per receiver shared by all senders.
    pub fn channel_shared(&self) -> Vec<bool> {
        let mut v = vec![false, false];
        v.extend(self.queues.iter().map(|q| q.shared));
        self.and_interrupt_queue(v, false)
    }

    /// Who may send into every conduit channel (anyone into the AM queues).
    pub fn channel_senders(&self) -> Vec<Senders> {
        let mut v = vec![Senders::All, Senders::All];
        v.extend(self.queues.iter().map(|q| q.senders.clone()));
        // Each flagged frame is checked against the senders of the queue it names.
        self.and_interrupt_queue(v, Senders::All)
    }
}
