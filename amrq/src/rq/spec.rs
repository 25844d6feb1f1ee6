//! A queue's description ([`QueueSpec`]) and how a job's queues become conduit
//! channels ([`channel_specs`]): queue `i` is channel `i`.

use crate::conduit::{Channel, ChannelSpec, Delivery, Rank, Senders};

/// A named queue that every rank has: its capacity, delivery and senders.
///
/// ```
/// use amrq::{conduit::Delivery, rq::QueueSpec};
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
    ///
    /// ```
    /// use amrq::{conduit::Delivery, rq::QueueSpec};
    /// let q = QueueSpec::new("work", 64);
    /// assert_eq!((q.name.as_str(), q.slots, q.delivery), ("work", 64, Delivery::Poll));
    /// ```
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
    /// use amrq::rq::QueueSpec;
    /// let q = QueueSpec::new("work", 1024).shared();
    /// assert!(q.shared);
    /// ```
    pub fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    /// Makes it part of O(1) One-poll sets (see [`Rq::one_poll`](super::Rq::one_poll)).
    ///
    /// ```
    /// use amrq::rq::QueueSpec;
    /// assert!(QueueSpec::new("urgent", 16).one_poll().one_poll);
    /// ```
    pub fn one_poll(mut self) -> Self {
        self.one_poll = true;
        self
    }

    /// Only `ranks` may enqueue into it.
    ///
    /// ```
    /// use amrq::{conduit::Senders, rq::QueueSpec};
    /// let q = QueueSpec::new("from the root", 16).senders_only(vec![0]);
    /// assert_eq!(q.senders, Senders::Only(vec![0]));
    /// ```
    pub fn senders_only(mut self, ranks: Vec<Rank>) -> Self {
        self.senders = Senders::Only(ranks);
        self
    }

    /// Sets the delivery mode.
    ///
    /// ```
    /// use amrq::{conduit::Delivery, rq::QueueSpec};
    /// let q = QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt);
    /// assert_eq!(q.delivery, Delivery::Interrupt);
    /// ```
    pub fn delivery(mut self, d: Delivery) -> Self {
        self.delivery = d;
        self
    }

    /// The conduit channel that carries this queue.
    ///
    /// ```
    /// use amrq::{conduit::Delivery, rq::QueueSpec};
    /// let ch = QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt).channel();
    /// assert_eq!((ch.slots, ch.delivery), (16, Delivery::Interrupt));
    /// assert!(ch.rings_doorbell());
    /// ```
    pub fn channel(&self) -> ChannelSpec {
        ChannelSpec::new(self.slots)
            .senders(self.senders.clone())
            .shared(self.shared)
            .notify(self.one_poll)
            .delivery(self.delivery)
    }
}

/// The conduit channels of a job's queues, in [`QueueId`](super::QueueId) order: the AM
/// request and reply queues (`am_slots` slots per sender, open to all, ringing the
/// doorbell so that a blocking wait can sleep on them), the user's `queues`, then, if
/// `interrupt_slots > 0`, the interrupt queue that carries frames flagged interrupt to
/// the receiver's progress thread, and, if `sender_slots > 0`, one shared ring per
/// receiver that carries the AM requests of the senders' other threads, received with
/// the AM requests; and the interrupt channel's index.
///
/// ```
/// use amrq::rq::{channel_specs, QueueSpec};
/// let (chans, intr) = channel_specs(256, &[QueueSpec::new("q2", 64)], 8, 64);
/// assert_eq!(chans.len(), 5);
/// assert!(chans[0].notify && chans[1].notify && !chans[2].notify);
/// assert_eq!(intr, Some(3));
/// assert_eq!((chans[4].shared, chans[4].received_with), (true, Some(0)));
/// ```
pub fn channel_specs(
    am_slots: u64,
    queues: &[QueueSpec],
    interrupt_slots: u64,
    sender_slots: u64,
) -> (Vec<ChannelSpec>, Option<Channel>) {
    let am = ChannelSpec::new(am_slots).notify(true);
    let mut channels = vec![am.clone(), am];
    channels.extend(queues.iter().map(QueueSpec::channel));
    let interrupt = (interrupt_slots > 0).then(|| {
        // Each flagged frame is checked against the senders of the queue it names.
        channels.push(ChannelSpec::new(interrupt_slots).delivery(Delivery::Interrupt));
        channels.len() - 1
    });
    if sender_slots > 0 {
        let requests = super::QueueId::AM_REQUEST.index();
        let threads = ChannelSpec::new(sender_slots).shared(true).notify(true);
        channels.push(threads.received_with(requests));
    }
    (channels, interrupt)
}
