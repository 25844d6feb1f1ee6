//! The settings of a job, in one typed value: the top of the layers, which turns them
//! into what each layer below is built from ([`Config::conduit_spec`]).

use crate::conduit::ConduitSpec;
pub use crate::conduit::Delivery;
use crate::rq::QueueId;
pub use crate::rq::QueueSpec;

/// The settings of a job: ring sizes of the AM queues and of the user's named queues,
/// and the size of each rank's registered segment.
///
/// ```
/// use amrq::Config;
/// let mut cfg = Config::default();
/// let q = cfg.add_queue(64);
/// assert_eq!(cfg.conduit_spec().channels[2].slots, 64);
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
    /// How long a rank waits for the others to join at start-up (and for rank 0's
    /// answer) before it gives up with an error. Environment: `AMRQ_ATTACH_TIMEOUT`
    /// (seconds).
    pub attach_timeout: std::time::Duration,
    /// How the doorbell handshake between a sender and a receiver that may sleep
    /// fences: asymmetric (the default: `membarrier` when a receiver arms, nothing per
    /// send) or symmetric (a locked instruction per send). Environment:
    /// `AMRQ_DOORBELL_FENCE`.
    pub doorbell_fence: crate::conduit::doorbell::DoorbellFence,
    /// The Split-C entry points ([`splitc_main`](crate::spmd::splitc_main),
    /// [`splitc_threads`](crate::spmd::splitc_threads)) send every remote access as AM
    /// frames, even to mapped peers: the message path a network takes, on one host.
    /// Environment: `AMRQ_SPLITC_FRAMES` (`1` or `0`).
    pub splitc_frames: bool,
}

/// Where a setting's value came from (for `amrun --print-config`).
///
/// ```
/// use amrq::config::{Config, Source};
/// let (_, ring) = Config::sources()[0]; // AMRQ_RING_SLOTS
/// println!("ring slots from {}", if ring == Source::Env { "the environment" } else { "the default" });
/// ```
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
            attach_timeout: std::time::Duration::from_secs(60),
            doorbell_fence: Default::default(),
            splitc_frames: false,
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
    /// The defaults, overridden by `AMRQ_RING_SLOTS`, `AMRQ_SEGMENT_SIZE`,
    /// `AMRQ_ATTACH_TIMEOUT`, `AMRQ_DOORBELL_FENCE` and `AMRQ_SPLITC_FRAMES` when set.
    /// Unreadable values are an error that names the variable.
    ///
    /// ```
    /// let cfg = amrq::Config::from_env().expect("readable AMRQ_* variables");
    /// assert!(cfg.am_ring_slots.is_power_of_two());
    /// ```
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
        if let Ok(v) = std::env::var("AMRQ_ATTACH_TIMEOUT") {
            c.attach_timeout = v
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    format!("AMRQ_ATTACH_TIMEOUT={v}: expected seconds such as 60 or 0.5")
                })?;
        }
        if let Ok(v) = std::env::var("AMRQ_DOORBELL_FENCE") {
            c.doorbell_fence = v.parse().map_err(|e| format!("AMRQ_DOORBELL_FENCE={e}"))?;
        }
        if let Ok(v) = std::env::var("AMRQ_SPLITC_FRAMES") {
            c.splitc_frames = match v.trim() {
                "1" | "true" => true,
                "0" | "false" => false,
                _ => return Err(format!("AMRQ_SPLITC_FRAMES={v}: expected 1 or 0")),
            };
        }
        Ok(c)
    }

    /// Where each setting of [`Config::from_env`] comes from.
    ///
    /// ```
    /// use amrq::config::{Config, Source};
    /// for (var, from) in Config::sources() {
    ///     assert!(var.starts_with("AMRQ_"));
    ///     assert_eq!(from == Source::Env, std::env::var_os(var).is_some());
    /// }
    /// ```
    pub fn sources() -> [(&'static str, Source); 5] {
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
            ("AMRQ_ATTACH_TIMEOUT", src("AMRQ_ATTACH_TIMEOUT")),
            ("AMRQ_DOORBELL_FENCE", src("AMRQ_DOORBELL_FENCE")),
            ("AMRQ_SPLITC_FRAMES", src("AMRQ_SPLITC_FRAMES")),
        ]
    }

    /// Adds a Poll queue anyone may send to, named `q<id>`, whose ring from each sender
    /// has `slots` slots (a power of two).
    ///
    /// ```
    /// let mut cfg = amrq::Config::default();
    /// let q = cfg.add_queue(64);
    /// assert_eq!(cfg.queue_named(&format!("q{}", q.index())), Some(q));
    /// ```
    pub fn add_queue(&mut self, slots: u64) -> QueueId {
        let name = format!("q{}", QueueId::FIRST_USER + self.queues.len());
        self.add(QueueSpec::new(name, slots))
    }

    /// Adds the queue `spec` on every rank; returns its id.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, Config};
    /// let mut cfg = Config::default();
    /// let a = cfg.add(QueueSpec::new("results", 64).senders_only(vec![0]));
    /// let b = cfg.add(QueueSpec::new("work", 256).shared());
    /// assert_eq!(b.index(), a.index() + 1);
    /// ```
    pub fn add(&mut self, spec: QueueSpec) -> QueueId {
        self.queues.push(spec);
        QueueId::new(QueueId::FIRST_USER + self.queues.len() - 1)
    }

    /// The id of the queue named `name`.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add(QueueSpec::new("results", 64));
    /// assert_eq!(cfg.queue_named("results"), Some(q));
    /// assert_eq!(cfg.queue_named("nothing"), None);
    /// ```
    pub fn queue_named(&self, name: &str) -> Option<QueueId> {
        self.queues
            .iter()
            .position(|q| q.name == name)
            .map(|i| QueueId::new(QueueId::FIRST_USER + i))
    }

    /// What the conduit is built from: one channel per queue (AM requests, AM replies,
    /// the user's queues, then the interrupt queue if there is one, as
    /// [`rq::channel_specs`](crate::rq::channel_specs) lays them out), the Tag-On pools
    /// and the registered segments.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, Config};
    /// let mut cfg = Config::default();
    /// cfg.add(QueueSpec::new("work", 64).shared());
    /// cfg.interrupt_slots = 8;
    /// let spec = cfg.conduit_spec();
    /// let slots: Vec<u64> = spec.channels.iter().map(|c| c.slots).collect();
    /// assert_eq!(slots, vec![256, 256, 64, 8]);
    /// assert!(spec.channels[2].shared);
    /// assert_eq!(spec.interrupt_channel, Some(3));
    /// ```
    pub fn conduit_spec(&self) -> ConduitSpec {
        let (channels, interrupt_channel) =
            crate::rq::channel_specs(self.am_ring_slots, &self.queues, self.interrupt_slots);
        ConduitSpec {
            channels,
            interrupt_channel,
            tag_on_buffers: self.tag_on_buffers,
            tag_on_bytes: self.tag_on_bytes,
            segment_bytes: self.segment_bytes,
            doorbell_fence: self.doorbell_fence,
            remedy: format!(
                "lower each rank's registered segment with AMRQ_SEGMENT_SIZE or the AM ring size with AMRQ_RING_SLOTS (now {} slots)",
                self.am_ring_slots
            ),
        }
    }
}
