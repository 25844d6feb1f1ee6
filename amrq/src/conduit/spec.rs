//! What a job asks of a conduit: its channels ([`ChannelSpec`]) and the sizes of the
//! memory behind them ([`ConduitSpec`]). The layer above builds these (RQ makes one
//! channel per queue); a conduit builds its endpoints from them and describes what it
//! made in its [`Caps`](super::Caps).

use super::{Channel, ConduitError, Rank, Senders};
use std::time::Duration;

/// How the frames of a channel reach the program.
///
/// ```
/// use amrq::conduit::{ChannelSpec, Delivery};
/// assert_eq!(ChannelSpec::new(16).delivery, Delivery::Poll); // the default
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// The program polls it (the default: atomic by default, as RQ argues).
    #[default]
    Poll,
    /// A progress thread drains it as frames arrive (selective interrupts).
    Interrupt,
}

/// One channel of a job: a queue at every receiver, as the conduit sees it.
///
/// ```
/// use amrq::conduit::{ChannelSpec, Delivery, Senders};
/// let ch = ChannelSpec::new(64).senders(Senders::Only(vec![0])).delivery(Delivery::Interrupt);
/// assert_eq!((ch.slots, ch.delivery), (64, Delivery::Interrupt));
/// assert!(ch.rings_doorbell()); // an Interrupt channel always rings
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    /// Capacity in 64-byte slots, per sender (of a shared channel: in all); a power of
    /// two from 2 to 2^24.
    pub slots: u64,
    /// Which ranks may send into it (StarT-Voyager's logical destination table).
    pub senders: Senders,
    /// One ring per receiver that every sender reserves slots in, rather than one ring
    /// per sender.
    pub shared: bool,
    /// Its senders ring the receiver's doorbell when it is armed, so that an empty
    /// One-poll over it costs one word and a blocking wait can sleep on it.
    pub notify: bool,
    /// Polled by the program, or drained by a progress thread.
    pub delivery: Delivery,
    /// The largest payload one frame must carry, if the layer above needs a floor
    /// (setup fails when the conduit cannot carry it); `None`: whatever the channel's
    /// size gives ([`ChannelCaps::max_payload`](super::ChannelCaps::max_payload)).
    pub max_payload: Option<usize>,
    /// Its frames are received as frames of that channel (a drain of the other takes
    /// them; a drain of this one takes none): a shared channel through which a rank's
    /// other threads send what its own thread sends on a per-sender channel.
    pub received_with: Option<Channel>,
}

impl ChannelSpec {
    /// A polled, per-sender channel of `slots` slots that every rank may send into.
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, Senders};
    /// let ch = ChannelSpec::new(128);
    /// assert_eq!((ch.slots, ch.senders, ch.shared, ch.notify), (128, Senders::All, false, false));
    /// ```
    pub fn new(slots: u64) -> Self {
        Self {
            slots,
            senders: Senders::All,
            shared: false,
            notify: false,
            delivery: Delivery::Poll,
            max_payload: None,
            received_with: None,
        }
    }

    /// Only these senders.
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, Senders};
    /// let ch = ChannelSpec::new(16).senders(Senders::Only(vec![0]));
    /// assert!(!ch.senders.allows(1));
    /// ```
    pub fn senders(mut self, senders: Senders) -> Self {
        self.senders = senders;
        self
    }

    /// One ring per receiver shared by all senders (`true`) or one per sender.
    ///
    /// A per-sender ring confines a faulty sender's damage to its own frames. A shared
    /// ring trusts its senders with each other's frames: each can write anywhere in it,
    /// and a frame whose header claims more slots than its sender reserved hides the
    /// frames reserved after it (the receiver checks what a header can say, not which
    /// sender wrote which slot).
    ///
    /// ```
    /// use amrq::conduit::ChannelSpec;
    /// assert!(ChannelSpec::new(1024).shared(true).shared);
    /// ```
    pub fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    /// Its senders ring the receiver's doorbell when armed.
    ///
    /// ```
    /// use amrq::conduit::ChannelSpec;
    /// assert!(ChannelSpec::new(16).notify(true).rings_doorbell());
    /// ```
    pub fn notify(mut self, notify: bool) -> Self {
        self.notify = notify;
        self
    }

    /// Polled or drained by a progress thread.
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, Delivery};
    /// assert_eq!(ChannelSpec::new(16).delivery(Delivery::Interrupt).delivery, Delivery::Interrupt);
    /// ```
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Its frames are received with channel `ch`'s: a receiver's drain of `ch` takes
    /// them (as frames of `ch`, from the sender each names), and a drain of this one
    /// takes none. For a shared channel into which a rank's worker threads send what its
    /// own thread sends on `ch`, so that the receiver polls one channel for both.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitError, ConduitSpec, Message, ReceivedFrame};
    /// let spec = ConduitSpec::new(vec![
    ///     ChannelSpec::new(16),
    ///     ChannelSpec::new(16).shared(true).received_with(0),
    /// ]);
    /// let eps = threads::endpoints_for(2, &spec).unwrap();
    /// eps[0].try_send(1, 1, &Message { tag: 3, args: &[9], ..Message::default() }).unwrap();
    /// let mut got = Vec::new();
    /// eps[1].drain(0, 8, |f| -> Result<(), ConduitError> { got.push((f.source(), f.tag(), f.args()[0])); Ok(()) }).unwrap();
    /// assert_eq!(got, [(0, 3, 9)]);
    /// ```
    pub fn received_with(mut self, ch: Channel) -> Self {
        self.received_with = Some(ch);
        self
    }

    /// Setup fails unless one frame can carry `bytes` of payload.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(256).max_payload(4096)]);
    /// let eps = threads::endpoints_for(1, &spec).unwrap();
    /// assert!(eps[0].caps().channels[0].max_payload >= 4096);
    /// let too_big = ConduitSpec::new(vec![ChannelSpec::new(2).max_payload(1 << 20)]);
    /// assert!(threads::endpoints_for(1, &too_big).is_err()); // setup says it cannot
    /// ```
    pub fn max_payload(mut self, bytes: usize) -> Self {
        self.max_payload = Some(bytes);
        self
    }

    /// Its senders ring the doorbell: asked for, or needed to wake the progress thread.
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, Delivery};
    /// assert!(!ChannelSpec::new(16).rings_doorbell());
    /// assert!(ChannelSpec::new(16).delivery(Delivery::Interrupt).rings_doorbell());
    /// ```
    pub fn rings_doorbell(&self) -> bool {
        self.notify || self.delivery == Delivery::Interrupt
    }
}

/// How a network conduit coalesces small frames to one destination into one message
/// (a batch leaves when full; when the sender next polls and finds nothing waiting,
/// waits, flushes or leaves; or when it has waited `wait` since a send first found it
/// waiting, checked at each send). Shared memory does not coalesce.
///
/// ```
/// use amrq::conduit::Coalescing;
/// let on = Coalescing::default();
/// assert!(on.bytes > 0);
/// let off = Coalescing { bytes: 0, ..on };
/// assert!(!off.is_on());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coalescing {
    /// Bytes of a batch (frames of up to a quarter of it join one); 0: every frame
    /// travels alone.
    pub bytes: usize,
    /// How long a batch may wait once a send has found it waiting, checked at each send.
    pub wait: Duration,
}

impl Default for Coalescing {
    /// 8 KiB batches, 30 µs (`docs/results/hosts.md` shows the measurements behind them).
    fn default() -> Self {
        Self {
            bytes: 8 << 10,
            wait: Duration::from_micros(30),
        }
    }
}

impl Coalescing {
    /// True if small frames are coalesced.
    ///
    /// ```
    /// assert!(amrq::conduit::Coalescing::default().is_on());
    /// ```
    pub fn is_on(&self) -> bool {
        self.bytes > 0
    }
}

/// Everything a conduit endpoint is built from: the channels, the channel that carries
/// frames flagged interrupt, and the sizes of the memory each rank registers.
///
/// ```
/// use amrq::conduit::{ChannelSpec, ConduitSpec};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(256), ChannelSpec::new(256)]);
/// assert!(spec.check().is_ok());
/// assert_eq!(spec.segment_bytes, 64 << 10);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConduitSpec {
    /// The channels, by index.
    pub channels: Vec<ChannelSpec>,
    /// The Interrupt channel that carries frames flagged
    /// [`Message::INTERRUPT`](super::Message::INTERRUPT) for the others, if any.
    pub interrupt_channel: Option<Channel>,
    /// Tag-On blocks per (sender, receiver) pair (0: no Tag-On).
    pub tag_on_buffers: usize,
    /// Bytes of each Tag-On block.
    pub tag_on_bytes: usize,
    /// Bytes of each rank's registered segment.
    pub segment_bytes: usize,
    /// How doorbell handshakes fence.
    pub doorbell_fence: super::doorbell::DoorbellFence,
    /// What the user changes to lower the memory a job needs, named by setup errors
    /// that run out of it (the layer that reads the settings knows their names).
    pub remedy: String,
    /// The program's settings this spec was made from, by name and value, which every
    /// rank of a job must share: a rank that disagrees is refused with the first that
    /// differs named ([`ConduitSpec::agreement`]). Empty for a spec made by hand.
    pub settings: Vec<(String, String)>,
    /// How the network coalesces small frames (each rank its own: receivers take both).
    pub coalescing: Coalescing,
    /// How many senders get a ring of their own at each receiver on one host.
    pub pair_rings: PairRings,
    /// A network conduit sends a pair's first messages as datagrams (the UCX conduit:
    /// the first 64 of a pair across hosts, before it connects; the `AMRQ_DATAGRAMS`
    /// setting).
    pub datagrams: bool,
}

/// How many senders get a ring of their own at each receiver of a host, on each
/// per-sender channel (with a Tag-On pool beside it). The others share one ring per
/// receiver and channel (and one pool), and move to a ring of their own once they have
/// sent [`PairRings::MOVE_AFTER`] frames to that receiver, while one is free: the
/// memory of a host's rings grows as ranks × own rings, not as ranks².
///
/// ```
/// use amrq::conduit::PairRings;
/// assert_eq!(PairRings::default(), PairRings::Auto);
/// assert_eq!("6".parse::<PairRings>(), Ok(PairRings::Own(6)));
/// assert_eq!("every".parse::<PairRings>(), Ok(PairRings::Every));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PairRings {
    /// Every pair while their rings and pools fit [`PairRings::AUTO_BYTES`] per
    /// host; beyond, as many per receiver as fit it, at least [`PairRings::AUTO_LEAST`].
    #[default]
    Auto,
    /// Every sender its own ring at every receiver (memory grows as ranks²).
    Every,
    /// This many per receiver (at least 0: then every frame goes through the shared
    /// ring); as many as there are ranks is [`PairRings::Every`].
    Own(usize),
}

impl PairRings {
    /// The host's bytes of rings and Tag-On pools [`PairRings::Auto`] stays within.
    pub const AUTO_BYTES: usize = 32 << 20;
    /// The fewest own rings per receiver [`PairRings::Auto`] gives.
    pub const AUTO_LEAST: usize = 4;
    /// Frames a sender sends to a receiver through the shared ring before it takes a
    /// ring of its own there (if one is free): a pair that talks moves, a pair that
    /// meets in a barrier now and then does not.
    pub const MOVE_AFTER: u32 = 64;
}

impl std::str::FromStr for PairRings {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "every" => Ok(Self::Every),
            n => n.parse().map(Self::Own).map_err(|_| {
                format!("{s:?}: expected auto, every, or a number of rings per receiver")
            }),
        }
    }
}

impl std::fmt::Display for PairRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Every => f.write_str("every"),
            Self::Own(n) => write!(f, "{n}"),
        }
    }
}

impl ConduitSpec {
    /// `channels`, no interrupt channel, 8 Tag-On blocks of 4 KiB per pair and a 64 KiB
    /// segment per rank.
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(256), ChannelSpec::new(64)]);
    /// assert_eq!((spec.channels.len(), spec.segment_bytes), (2, 64 << 10));
    /// ```
    pub fn new(channels: Vec<ChannelSpec>) -> Self {
        Self {
            channels,
            interrupt_channel: None,
            tag_on_buffers: 8,
            tag_on_bytes: 4096,
            segment_bytes: 64 << 10,
            doorbell_fence: Default::default(),
            remedy: "lower the segment or ring sizes".into(),
            settings: Vec::new(),
            coalescing: Coalescing::default(),
            pair_rings: PairRings::default(),
            datagrams: true,
        }
    }

    /// What every rank of a job must agree on, one `name=value` per line: the
    /// program's settings ([`ConduitSpec::settings`]) first, then the shape the spec
    /// gives the memory the ranks share. Ranks compare it when they meet.
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// assert!(spec.agreement().contains("segment bytes=65536\n"));
    /// ```
    pub fn agreement(&self) -> String {
        let mut text = String::new();
        for (name, value) in &self.settings {
            text.push_str(&format!("{name}={value}\n"));
        }
        for (ch, c) in self.channels.iter().enumerate() {
            text.push_str(&format!("channel {ch}={c:?}\n"));
        }
        text.push_str(&format!("interrupt channel={:?}\n", self.interrupt_channel));
        text.push_str(&format!(
            "tag-on blocks={} of {} bytes\n",
            self.tag_on_buffers, self.tag_on_bytes
        ));
        text.push_str(&format!("segment bytes={}\n", self.segment_bytes));
        text.push_str(&format!("doorbell fence={:?}\n", self.doorbell_fence));
        text.push_str(&format!("own rings per receiver={}\n", self.pair_rings));
        text
    }

    /// This spec for a job made of `ranks` of this one (its rank `i` being rank
    /// `ranks[i]` here): the lists of permitted senders renumbered, and those not in it
    /// dropped. What the local half of a [`Combined`](super::combined::Combined)
    /// conduit is built from.
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, ConduitSpec, Senders};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(4).senders(Senders::Only(vec![0, 3]))]);
    /// let host = spec.restricted_to(&[2, 3]);
    /// assert_eq!(host.channels[0].senders, Senders::Only(vec![1])); // rank 3 is its 1
    /// ```
    pub fn restricted_to(&self, ranks: &[Rank]) -> ConduitSpec {
        let mut spec = self.clone();
        for c in &mut spec.channels {
            if let Senders::Only(v) = &c.senders {
                let local = v.iter().filter_map(|s| ranks.iter().position(|r| r == s));
                c.senders = Senders::Only(local.collect());
            }
        }
        spec
    }

    /// The doorbell bit of channel `ch`: channels share bit `ch % 64`.
    ///
    /// ```
    /// use amrq::conduit::ConduitSpec;
    /// assert_eq!(ConduitSpec::doorbell_bit(3), 1 << 3);
    /// assert_eq!(ConduitSpec::doorbell_bit(67), 1 << 3); // channels share bit ch % 64
    /// ```
    pub const fn doorbell_bit(ch: Channel) -> u64 {
        1 << (ch % 64)
    }

    /// Checks what no conduit can represent: an interrupt channel that is not an
    /// Interrupt channel open to every sender, or an Interrupt channel that shares its
    /// doorbell bit (`channel % 64`) with another ringing channel (One-poll channels
    /// sharing a bit only cost a spurious scan, but the progress thread disarms its
    /// bits when it wakes).
    ///
    /// ```
    /// use amrq::conduit::{ChannelSpec, ConduitSpec, Delivery};
    /// let mut chans = vec![ChannelSpec::new(4); 65];
    /// chans[0] = ChannelSpec::new(4).notify(true);
    /// chans[64] = ChannelSpec::new(4).delivery(Delivery::Interrupt); // bit 64 % 64 = 0
    /// assert!(ConduitSpec::new(chans.clone()).check().is_err());
    /// chans[0].notify = false;
    /// assert!(ConduitSpec::new(chans).check().is_ok());
    /// ```
    pub fn check(&self) -> Result<(), ConduitError> {
        let rings: Vec<bool> = self.channels.iter().map(|c| c.rings_doorbell()).collect();
        for (ch, c) in self.channels.iter().enumerate() {
            if c.delivery != Delivery::Interrupt {
                continue;
            }
            if let Some(other) =
                (0..rings.len()).find(|&o| o != ch && rings[o] && o % 64 == ch % 64)
            {
                return Err(ConduitError::Setup(format!(
                    "Interrupt queue {ch} shares doorbell bit {} with queue {other}: doorbell bits are queue % 64; create the Interrupt queues among the first 64",
                    ch % 64
                )));
            }
        }
        for (ch, c) in self.channels.iter().enumerate() {
            let Some(into) = c.received_with else {
                continue;
            };
            let fits = self.channels.get(into).is_some_and(|t| {
                c.shared
                    && t.received_with.is_none()
                    && t.delivery == Delivery::Poll
                    && c.delivery == Delivery::Poll
                    && t.notify == c.notify
                    && t.senders == c.senders
                    && Some(into) != self.interrupt_channel
            });
            if !fits {
                return Err(ConduitError::Setup(format!(
                    "channel {ch} is received with channel {into}: it must be shared, and {into} a polled channel of the same senders and doorbell that is received on its own"
                )));
            }
        }
        if let Some(ch) = self.interrupt_channel {
            match self.channels.get(ch) {
                Some(c) if c.delivery == Delivery::Interrupt && c.senders == Senders::All && !c.shared => {}
                _ => {
                    return Err(ConduitError::Setup(format!(
                        "the interrupt channel {ch} must be an Interrupt channel of per-sender rings open to every rank"
                    )))
                }
            }
        }
        Ok(())
    }
}
