//! The settings of a job: each one a [`Setting`] that the program may set, else the
//! `AMRQ_*` environment variable named after it sets, else its default. Every way to
//! start a job reads the environment ([`Config::resolve`]); `amrun --print-config`
//! shows what a program will use, and where each value came from.

use crate::conduit::doorbell::DoorbellFence;
pub use crate::conduit::Delivery;
use crate::conduit::{Coalescing, ConduitSpec, PairRings};
use crate::rq::QueueId;
pub use crate::rq::QueueSpec;
use crate::Error;
use std::time::Duration;

/// The variable `amrun --print-config PROGRAM` runs the program with: it prints the
/// settings it would use for a job of that many ranks, and exits
/// ([`Config::described`]).
pub const ENV_PRINT_CONFIG: &str = "AMRQ_PRINT_CONFIG";

/// Where a setting's value came from.
///
/// ```
/// use amrq::config::{Config, Source};
/// let mut cfg = Config::new();
/// assert_eq!(cfg.segment_bytes.source(), Source::Default);
/// cfg.segment_bytes.set(1 << 20);
/// assert_eq!(cfg.segment_bytes.source(), Source::Program);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// Its `AMRQ_*` environment variable.
    Env,
    /// The program set it ([`Setting::set`]): the environment does not change it.
    Program,
}

/// One setting: its value and where the value came from.
///
/// ```
/// let mut cfg = amrq::Config::new();
/// cfg.ring_slots.set(1024);
/// assert_eq!(cfg.ring_slots.get(), 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting<T> {
    value: T,
    source: Source,
}

impl<T: Copy> Setting<T> {
    const fn default(value: T) -> Self {
        Self {
            value,
            source: Source::Default,
        }
    }

    /// The value.
    ///
    /// ```
    /// assert_eq!(amrq::Config::new().ring_slots.get(), 256);
    /// ```
    pub fn get(&self) -> T {
        self.value
    }

    /// Sets the value from the program: the environment no longer changes it.
    ///
    /// ```
    /// let mut cfg = amrq::Config::new();
    /// cfg.attach_timeout.set(std::time::Duration::from_secs(5));
    /// assert_eq!(cfg.attach_timeout.get().as_secs(), 5);
    /// ```
    pub fn set(&mut self, value: T) {
        self.value = value;
        self.source = Source::Program;
    }

    /// Sets the program's default: the value unless the environment (or a launcher's
    /// rank count) says otherwise, with no word about the difference.
    ///
    /// ```
    /// use amrq::config::Source;
    /// let mut cfg = amrq::Config::new();
    /// cfg.ranks.set_default(2); // this program runs on two ranks unless told otherwise
    /// assert_eq!((cfg.ranks.get(), cfg.ranks.source()), (2, Source::Default));
    /// ```
    pub fn set_default(&mut self, value: T) {
        if self.source == Source::Default {
            self.value = value;
        }
    }

    /// Where the value came from.
    ///
    /// ```
    /// use amrq::config::Source;
    /// assert_eq!(amrq::Config::new().rma_frames.source(), Source::Default);
    /// ```
    pub fn source(&self) -> Source {
        self.source
    }

    /// The value a launcher decided (its rank count), whatever the program or the
    /// environment asked for; where the request came from stays readable.
    pub(crate) fn launched(&mut self, value: T) {
        self.value = value;
    }

    /// Takes `value` from the environment unless the program set this one.
    fn take_env(&mut self, value: T) {
        if self.source != Source::Program {
            self.value = value;
            self.source = Source::Env;
        }
    }
}

/// The settings of a job: where its ranks run, the sizes of its queues and memory, how
/// long start-up may take, and the queues of the program's own.
///
/// ```
/// use amrq::Config;
/// let mut cfg = Config::new();
/// cfg.segment_bytes.set(16 << 20);
/// let q = cfg.add_queue(64);
/// assert_eq!(cfg.conduit_spec().channels[q.index()].slots, 64);
/// assert_eq!(cfg.queue_named("q2"), Some(q));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Ranks a program started on its own starts (a launcher's count wins over it, and
    /// is what a started job's [`Setup::config`](crate::Setup::config) holds).
    /// Environment: `AMRQ_RANKS`; default: the cores this process may run on.
    pub ranks: Setting<usize>,
    /// Started on its own, run the ranks as threads of this process rather than as
    /// processes. Environment: `AMRQ_THREADS` (`1` or `0`); default: processes.
    pub threads: Setting<bool>,
    /// Slots (64 B each) of each AM request ring and each AM reply ring, per sender: a
    /// power of two; 256 or more keeps Medium payloads of 4 KiB possible. Environment:
    /// `AMRQ_RING_SLOTS`; default 256.
    pub ring_slots: Setting<u64>,
    /// Bytes of each rank's registered segment (Long messages, one-sided operations,
    /// the collectives' mailboxes). Environment: `AMRQ_SEGMENT_SIZE` (bytes, or with
    /// K, M or G); default 64 MiB.
    pub segment_bytes: Setting<usize>,
    /// How long a rank waits for the others to join at start-up. Environment:
    /// `AMRQ_ATTACH_TIMEOUT` (seconds); default 60.
    pub attach_timeout: Setting<Duration>,
    /// How the doorbell handshake between a sender and a receiver that may sleep
    /// fences: asymmetric (`membarrier` when a receiver arms, nothing per send) or
    /// symmetric (a locked instruction per send). Environment: `AMRQ_DOORBELL_FENCE`;
    /// default asymmetric.
    pub doorbell_fence: Setting<DoorbellFence>,
    /// One-sided operations (and so Split-C's remote accesses) go as AM frames even
    /// to ranks whose memory is mapped: the path a network takes, on one host.
    /// Environment: `AMRQ_RMA_FRAMES` (`1` or `0`); default: direct where mapped.
    pub rma_frames: Setting<bool>,
    /// Whether a job started with [`Setup::start_engine`](crate::Setup::start_engine)
    /// runs its handlers on a progress engine, a thread of the rank that serves them
    /// while the program computes; off, the program's own polls and waits serve them,
    /// as in a job started with [`Setup::start`](crate::Setup::start). Environment:
    /// `AMRQ_ENGINE` (`1` or `0`); default on.
    pub engine: Setting<bool>,
    /// Tag-On blocks per (sender, receiver) pair. Environment: `AMRQ_TAG_ON_BUFFERS`;
    /// default 8.
    pub tag_on_buffers: Setting<usize>,
    /// Bytes of each Tag-On block (the largest Tag-On message). Environment:
    /// `AMRQ_TAG_ON_SIZE`; default 4096.
    pub tag_on_bytes: Setting<usize>,
    /// Slots per sender of each rank's interrupt queue, which carries frames flagged
    /// interrupt by their senders ([`Rq::enqueue_interrupt`](crate::rq::Rq::enqueue_interrupt))
    /// to the receiver's progress thread; 0: no such queue. Environment:
    /// `AMRQ_INTERRUPT_SLOTS`; default 0.
    pub interrupt_slots: Setting<u64>,
    /// Slots (64 B each) of the one ring per rank that the rank's other threads send AM
    /// requests into ([`Am::sender`](crate::am::Am::sender)), shared by all of them and
    /// by every rank's; 0: only the thread that started the rank sends, and its polls
    /// look at one ring fewer. A power of two (256 or more carries 4 KiB Medium
    /// payloads). Environment: `AMRQ_SENDER_SLOTS`; default 0.
    pub sender_slots: Setting<u64>,
    /// Bytes of the batch in which small frames to a rank on another host travel
    /// together (frames of up to a quarter of it join one); 0 sends each frame alone. A
    /// batch leaves when full; when the rank next polls and finds nothing waiting,
    /// waits, flushes or finishes; or once it has waited [`Config::coalesce_wait`].
    /// Environment: `AMRQ_COALESCE_BYTES` (bytes, or with K); default 8 KiB.
    pub coalesce_bytes: Setting<usize>,
    /// The longest a batch waits for more frames, from the first send or one-sided
    /// operation that finds it waiting (each of them checks).
    /// Environment: `AMRQ_COALESCE_WAIT` (microseconds); default 30.
    pub coalesce_wait: Setting<Duration>,
    /// A rank's first messages to a rank of another host go as UDP datagrams, on the
    /// network device UCX uses: no connection for a pair that exchanges a few; a pair
    /// connects over UCX past its first 64, for a message of more than 1 200 bytes, a
    /// put or a get, or when its datagrams go unacknowledged (sent again for 3 s
    /// first). Off (for a network that drops UDP), every pair connects at its first
    /// message.
    /// Environment: `AMRQ_DATAGRAMS` (`1` or `0`); default on.
    pub datagrams: Setting<bool>,
    /// How many senders get a ring of their own (and a Tag-On pool) at each receiver
    /// on one host; the others share one ring per receiver and queue until they have
    /// sent enough to move to one of their own ([`PairRings`]). Environment:
    /// `AMRQ_PAIR_RINGS` (`auto`, `every` or a number); default auto: every pair while
    /// the host's rings and pools fit 32 MiB, beyond that as many as fit (at least 4).
    pub pair_rings: Setting<PairRings>,
    /// The program's own queues, in creation order (queue ids from 2 on).
    pub queues: Vec<QueueSpec>,
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
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

/// `AMRQ_*` variable `name`'s value, parsed by `read`; `Ok(None)` if unset or empty.
fn env<T>(
    name: &'static str,
    expected: &str,
    read: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, Error> {
    let Some(value) = std::env::var_os(name) else {
        return Ok(None);
    };
    let value = value.to_string_lossy().into_owned();
    if value.trim().is_empty() {
        return Ok(None);
    }
    match read(value.trim()) {
        Some(v) => Ok(Some(v)),
        None => Err(Error::Setting {
            name,
            value,
            expected: expected.to_string(),
        }),
    }
}

fn flag(s: &str) -> Option<bool> {
    match s {
        "1" | "true" | "yes" => Some(true),
        "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// One setting as `amrun --print-config` shows it.
///
/// ```
/// let cfg = amrq::Config::new();
/// let ring = cfg.listing().into_iter().find(|s| s.name == "AMRQ_RING_SLOTS").unwrap();
/// assert_eq!((ring.value.as_str(), ring.agreed), ("256 slots", true));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its environment variable.
    pub name: &'static str,
    /// The value, in words.
    pub value: String,
    /// Where it came from.
    pub source: Source,
    /// Every rank of a job must have the same value (it shapes the memory they share,
    /// or how they signal each other).
    pub agreed: bool,
}

impl Config {
    /// The defaults, with nothing read from the environment yet (every way to start a
    /// job does that: [`Config::resolve`]).
    ///
    /// ```
    /// let cfg = amrq::Config::new();
    /// assert_eq!(cfg.segment_bytes.get(), 64 << 20);
    /// ```
    pub fn new() -> Self {
        let cores = crate::util::affinity::allowed_cores().len().max(1);
        Self {
            ranks: Setting::default(cores),
            threads: Setting::default(false),
            ring_slots: Setting::default(256),
            segment_bytes: Setting::default(64 << 20),
            attach_timeout: Setting::default(Duration::from_secs(60)),
            doorbell_fence: Setting::default(DoorbellFence::default()),
            rma_frames: Setting::default(false),
            engine: Setting::default(true),
            tag_on_buffers: Setting::default(8),
            tag_on_bytes: Setting::default(4096),
            interrupt_slots: Setting::default(0),
            sender_slots: Setting::default(0),
            coalesce_bytes: Setting::default(Coalescing::default().bytes),
            coalesce_wait: Setting::default(Coalescing::default().wait),
            datagrams: Setting::default(true),
            pair_rings: Setting::default(PairRings::Auto),
            queues: Vec::new(),
        }
    }

    /// The defaults, overridden by the `AMRQ_*` variables that are set: what a program
    /// that sets nothing itself runs with.
    ///
    /// ```
    /// let cfg = amrq::Config::from_env().expect("readable AMRQ_* variables");
    /// assert!(cfg.ring_slots.get().is_power_of_two());
    /// ```
    pub fn from_env() -> Result<Self, Error> {
        let mut cfg = Self::new();
        cfg.resolve()?;
        Ok(cfg)
    }

    /// Reads the `AMRQ_*` variables into every setting the program has not set; an
    /// unreadable value is an error that names the variable and what it expects.
    ///
    /// ```
    /// let mut cfg = amrq::Config::new();
    /// cfg.ring_slots.set(64);
    /// cfg.resolve().unwrap();
    /// assert_eq!(cfg.ring_slots.get(), 64); // the program's value, whatever AMRQ_RING_SLOTS says
    /// ```
    pub fn resolve(&mut self) -> Result<(), Error> {
        let count = |s: &str| s.parse::<usize>().ok().filter(|&n| n > 0);
        if let Some(v) = env("AMRQ_RANKS", "expected a number of ranks, 1 or more", count)? {
            self.ranks.take_env(v);
        }
        if let Some(v) = env("AMRQ_THREADS", "expected 1 or 0", flag)? {
            self.threads.take_env(v);
        }
        let slots = |s: &str| {
            s.parse::<u64>()
                .ok()
                .filter(|n| n.is_power_of_two() && *n >= 2)
        };
        if let Some(v) = env(
            "AMRQ_RING_SLOTS",
            "expected a power of two such as 256",
            slots,
        )? {
            self.ring_slots.take_env(v);
        }
        let size = |s: &str| parse_size(s).filter(|&n| n > 0);
        if let Some(v) = env(
            "AMRQ_SEGMENT_SIZE",
            "expected bytes such as 67108864 or 64M",
            size,
        )? {
            self.segment_bytes.take_env(v);
        }
        let secs = |s: &str| {
            s.parse::<f64>()
                .ok()
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .filter(|d| !d.is_zero())
        };
        if let Some(v) = env(
            "AMRQ_ATTACH_TIMEOUT",
            "expected seconds such as 60 or 0.5",
            secs,
        )? {
            self.attach_timeout.take_env(v);
        }
        let fence = |s: &str| s.parse::<DoorbellFence>().ok();
        if let Some(v) = env(
            "AMRQ_DOORBELL_FENCE",
            "expected asymmetric or symmetric",
            fence,
        )? {
            self.doorbell_fence.take_env(v);
        }
        if let Some(v) = env("AMRQ_RMA_FRAMES", "expected 1 or 0", flag)? {
            self.rma_frames.take_env(v);
        }
        if let Some(v) = env("AMRQ_ENGINE", "expected 1 or 0", flag)? {
            self.engine.take_env(v);
        }
        if let Some(v) = env(
            "AMRQ_TAG_ON_BUFFERS",
            "expected a number of blocks, 1 or more",
            count,
        )? {
            self.tag_on_buffers.take_env(v);
        }
        if let Some(v) = env(
            "AMRQ_TAG_ON_SIZE",
            "expected bytes such as 4096 or 4K",
            size,
        )? {
            self.tag_on_bytes.take_env(v);
        }
        let any = |s: &str| {
            s.parse::<u64>()
                .ok()
                .filter(|n| *n == 0 || n.is_power_of_two())
        };
        if let Some(v) = env(
            "AMRQ_INTERRUPT_SLOTS",
            "expected 0 or a power of two such as 16",
            any,
        )? {
            self.interrupt_slots.take_env(v);
        }
        if let Some(v) = env(
            "AMRQ_SENDER_SLOTS",
            "expected 0 or a power of two such as 256",
            any,
        )? {
            self.sender_slots.take_env(v);
        }
        if let Some(v) = env(
            "AMRQ_COALESCE_BYTES",
            "expected bytes such as 8192 or 8K, or 0 to send each frame alone",
            parse_size,
        )? {
            self.coalesce_bytes.take_env(v);
        }
        let micros = |s: &str| {
            s.parse::<f64>()
                .ok()
                .and_then(|us| Duration::try_from_secs_f64(us * 1e-6).ok())
        };
        if let Some(v) = env(
            "AMRQ_COALESCE_WAIT",
            "expected microseconds such as 100",
            micros,
        )? {
            self.coalesce_wait.take_env(v);
        }
        if let Some(v) = env("AMRQ_DATAGRAMS", "expected 1 or 0", flag)? {
            self.datagrams.take_env(v);
        }
        if let Some(v) = env(
            "AMRQ_PAIR_RINGS",
            "expected auto, every, or a number of own rings per receiver such as 8",
            |s| s.parse::<PairRings>().ok(),
        )? {
            self.pair_rings.take_env(v);
        }
        Ok(())
    }

    /// Every setting, its value in words and where it came from, in a fixed order.
    ///
    /// ```
    /// use amrq::config::Source;
    /// let mut cfg = amrq::Config::new();
    /// cfg.segment_bytes.set(1 << 20);
    /// let seg = cfg.listing().into_iter().find(|s| s.name == "AMRQ_SEGMENT_SIZE").unwrap();
    /// assert_eq!((seg.value.as_str(), seg.source), ("1048576 bytes (1 MiB)", Source::Program));
    /// ```
    pub fn listing(&self) -> Vec<Listed> {
        let bytes = |b: usize| match b % (1 << 20) {
            0 => format!("{b} bytes ({} MiB)", b >> 20),
            _ => format!("{b} bytes"),
        };
        let yes = |b: bool, on: &str, off: &str| if b { on } else { off }.to_string();
        let item = |name, value, source, agreed| Listed {
            name,
            value,
            source,
            agreed,
        };
        vec![
            item(
                "AMRQ_RANKS",
                format!("{} ranks", self.ranks.get()),
                self.ranks.source(),
                false,
            ),
            item(
                "AMRQ_THREADS",
                yes(self.threads.get(), "threads of one process", "processes"),
                self.threads.source(),
                false,
            ),
            item(
                "AMRQ_RING_SLOTS",
                format!("{} slots", self.ring_slots.get()),
                self.ring_slots.source(),
                true,
            ),
            item(
                "AMRQ_SEGMENT_SIZE",
                bytes(self.segment_bytes.get()),
                self.segment_bytes.source(),
                true,
            ),
            item(
                "AMRQ_ATTACH_TIMEOUT",
                format!("{:?}", self.attach_timeout.get()),
                self.attach_timeout.source(),
                false,
            ),
            item(
                "AMRQ_DOORBELL_FENCE",
                format!("{:?}", self.doorbell_fence.get()).to_lowercase(),
                self.doorbell_fence.source(),
                true,
            ),
            item(
                "AMRQ_RMA_FRAMES",
                yes(self.rma_frames.get(), "as AM frames", "direct where mapped"),
                self.rma_frames.source(),
                false,
            ),
            item(
                "AMRQ_ENGINE",
                yes(self.engine.get(), "on (start_engine)", "off: polling"),
                self.engine.source(),
                false,
            ),
            item(
                "AMRQ_TAG_ON_BUFFERS",
                format!("{} blocks", self.tag_on_buffers.get()),
                self.tag_on_buffers.source(),
                true,
            ),
            item(
                "AMRQ_TAG_ON_SIZE",
                bytes(self.tag_on_bytes.get()),
                self.tag_on_bytes.source(),
                true,
            ),
            item(
                "AMRQ_INTERRUPT_SLOTS",
                format!("{} slots", self.interrupt_slots.get()),
                self.interrupt_slots.source(),
                true,
            ),
            item(
                "AMRQ_SENDER_SLOTS",
                match self.sender_slots.get() {
                    0 => "off: only the rank's own thread sends".into(),
                    n => format!("{n} slots"),
                },
                self.sender_slots.source(),
                true,
            ),
            item(
                "AMRQ_COALESCE_BYTES",
                match self.coalesce_bytes.get() {
                    0 => "off: each frame alone".into(),
                    b => bytes(b),
                },
                self.coalesce_bytes.source(),
                false,
            ),
            item(
                "AMRQ_COALESCE_WAIT",
                format!("{:?}", self.coalesce_wait.get()),
                self.coalesce_wait.source(),
                false,
            ),
            item(
                "AMRQ_DATAGRAMS",
                yes(
                    self.datagrams.get(),
                    "first messages across hosts as datagrams",
                    "off: a connection at the first message",
                ),
                self.datagrams.source(),
                false,
            ),
            item(
                "AMRQ_PAIR_RINGS",
                match self.pair_rings.get() {
                    PairRings::Auto => {
                        "auto: every pair within 32 MiB per host, else as many as fit".into()
                    }
                    PairRings::Every => "every pair".into(),
                    PairRings::Own(n) => format!("{n} per receiver"),
                },
                self.pair_rings.source(),
                true,
            ),
        ]
    }

    /// Adds a Poll queue anyone may send to, named `q<id>`, whose ring from each sender
    /// has `slots` slots (a power of two).
    ///
    /// ```
    /// let mut cfg = amrq::Config::new();
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
    /// let mut cfg = Config::new();
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
    /// let mut cfg = Config::new();
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
    /// the program's queues, then the interrupt queue if there is one, as
    /// [`rq::channel_specs`](crate::rq::channel_specs) lays them out), the Tag-On pools,
    /// the registered segments, and the settings every rank must share, by name.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, Config};
    /// let mut cfg = Config::new();
    /// cfg.add(QueueSpec::new("work", 64).shared());
    /// cfg.interrupt_slots.set(8);
    /// let spec = cfg.conduit_spec();
    /// let slots: Vec<u64> = spec.channels.iter().map(|c| c.slots).collect();
    /// assert_eq!(slots, vec![256, 256, 64, 8]);
    /// assert!(spec.channels[2].shared);
    /// assert_eq!(spec.interrupt_channel, Some(3));
    /// ```
    pub fn conduit_spec(&self) -> ConduitSpec {
        let (channels, interrupt_channel) = crate::rq::channel_specs(
            self.ring_slots.get(),
            &self.queues,
            self.interrupt_slots.get(),
            self.sender_slots.get(),
        );
        let mut settings: Vec<(String, String)> = self
            .listing()
            .into_iter()
            .filter(|s| s.agreed)
            .map(|s| (s.name.to_string(), s.value))
            .collect();
        for (i, q) in self.queues.iter().enumerate() {
            settings.push((
                format!("queue {} (Config::add)", QueueId::FIRST_USER + i),
                format!("{q:?}"),
            ));
        }
        ConduitSpec {
            channels,
            interrupt_channel,
            tag_on_buffers: self.tag_on_buffers.get(),
            tag_on_bytes: self.tag_on_bytes.get(),
            segment_bytes: self.segment_bytes.get(),
            doorbell_fence: self.doorbell_fence.get(),
            coalescing: Coalescing {
                bytes: self.coalesce_bytes.get(),
                wait: self.coalesce_wait.get(),
            },
            pair_rings: self.pair_rings.get(),
            datagrams: self.datagrams.get(),
            remedy: format!(
                "lower each rank's registered segment with AMRQ_SEGMENT_SIZE or the AM ring size with AMRQ_RING_SLOTS (now {} slots)",
                self.ring_slots.get()
            ),
            settings,
        }
    }
}
