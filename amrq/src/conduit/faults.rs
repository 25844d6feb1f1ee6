//! Faults of peers: frames a rank received and could not take, recorded against the
//! peer that sent them.
//!
//! A frame a correct peer never sends (a handler id nobody registered, a Long frame
//! outside this rank's segment, a header the protocol cannot produce, …) is its
//! sender's fault, not the fault of whichever call happened to be polling when it
//! arrived. So it is not returned as an error: the frame is dropped and the fault is
//! recorded here, per peer, for the program to read (`Am::faults`, `Rq::faults`), and
//! the first fault of each peer is printed on standard error so that none goes unseen.
//!
//! A frame whose header is corrupt loses the frame boundaries of its ring: that ring is
//! closed (never read again) and the closing is published in the ring's control block,
//! so that its sender, once the ring is full, gets
//! [`ConduitError::ChannelClosed`](super::ConduitError::ChannelClosed) instead of
//! waiting for room that will never come. Every other ring carries on.

use super::ring::Corrupt;
use super::{Channel, Rank};
use std::sync::{Arc, Mutex};

/// Faults kept in [`Faults::recent`].
///
/// ```
/// use amrq::conduit::{threads, Conduit, Fault, FaultKind, RECENT_FAULTS};
/// let eps = threads::endpoints(2, &[16]).unwrap();
/// for _ in 0..RECENT_FAULTS + 10 {
///     eps[0].record_fault(Fault { source: Some(1), channel: 0, kind: FaultKind::NotPermitted });
/// }
/// let f = eps[0].faults();
/// assert_eq!((f.total(), f.recent().count()), (RECENT_FAULTS as u64 + 10, RECENT_FAULTS));
/// ```
pub const RECENT_FAULTS: usize = 32;

/// What was wrong with a frame a peer sent.
///
/// ```
/// use amrq::conduit::FaultKind;
/// let k = FaultKind::MissingArg { index: 2, nargs: 1 };
/// assert!(!k.closes_ring()); // only that frame is dropped
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultKind {
    /// A header the protocol cannot produce: the frame boundaries of the sender's ring
    /// on this channel are lost, so that ring is closed.
    #[error("{0}; its ring is closed")]
    Corrupt(Corrupt),
    /// From a rank that the channel's senders do not include.
    #[error("sent by a rank this queue's senders do not include")]
    NotPermitted,
    /// A Long frame naming bytes outside this rank's registered segment.
    #[error("a Long frame outside the registered segment")]
    OutOfSegment,
    /// A Tag-On frame naming a block outside the sender's pool.
    #[error("a Tag-On frame outside the sender's pool")]
    OutsidePool,
    /// An Active Message naming a handler id this rank's table does not have.
    #[error("handler id {id}, which is not in this rank's table")]
    UnknownHandler {
        /// The id.
        id: u16,
    },
    /// An AM request naming a reply handler, or a reply naming a request handler.
    #[error(
        "handler {id} ({name}) sent as a {arrived_as}, but it is registered as the other kind"
    )]
    WrongHandlerKind {
        /// The id.
        id: u16,
        /// Its registered name.
        name: String,
        /// "request" or "reply".
        arrived_as: &'static str,
    },
    /// A handler asked for an arg the message does not carry.
    #[error("arg {index} asked for, but the message carries {nargs}")]
    MissingArg {
        /// The arg asked for.
        index: usize,
        /// Args the message carries.
        nargs: usize,
    },
    /// A typed handler's arg outside its type's range.
    #[error("word {index} is outside the range of its arg's type")]
    BadArg {
        /// The word.
        index: usize,
    },
    /// A payload that is not a whole number of the values a handler reads it as.
    #[error("a payload of {len} bytes, not a whole number of {size}-byte values")]
    BadPayload {
        /// The payload's bytes.
        len: usize,
        /// The size of the values.
        size: usize,
    },
    /// A request handler returned an error (its text; the handler's name is the
    /// sender's to look up, as both ranks hold the same table).
    #[error("the handler returned an error: {error}")]
    HandlerFailed {
        /// The error, as the handler's rank displayed it.
        error: String,
    },
    /// A runtime message (barrier, one-sided operation) that makes no sense here.
    #[error("a malformed runtime message: {what}")]
    BadRuntimeMessage {
        /// What was wrong.
        what: &'static str,
    },
    /// A network message whose MAC does not prove the job key of the rank it names as
    /// its sender: forged by a process outside the job, or played again. Dropped.
    #[error("a network message its claimed sender did not seal (forged, or played again)")]
    Unproven,
}

impl FaultKind {
    /// True if the fault closed the sender's ring on that channel.
    ///
    /// ```
    /// use amrq::conduit::FaultKind;
    /// assert!(!FaultKind::NotPermitted.closes_ring());
    /// assert!(!FaultKind::UnknownHandler { id: 3 }.closes_ring());
    /// ```
    pub fn closes_ring(&self) -> bool {
        matches!(self, FaultKind::Corrupt(_))
    }
}

/// One frame dropped at this rank, and whose it was.
///
/// ```
/// use amrq::conduit::{Fault, FaultKind};
/// let f = Fault { source: Some(3), channel: 0, kind: FaultKind::UnknownHandler { id: 99 } };
/// assert_eq!(f.to_string(), "from rank 3 on queue 0: handler id 99, which is not in this rank's table");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The sender; `None` when a corrupt header on a shared ring hides who wrote it.
    pub source: Option<Rank>,
    /// The channel (queue) it arrived on.
    pub channel: Channel,
    /// What was wrong.
    pub kind: FaultKind,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source {
            Some(r) => write!(f, "from rank {r}")?,
            None => write!(f, "from an unknown sender")?,
        }
        write!(f, " on queue {}: {}", self.channel, self.kind)
    }
}

/// The faults of peers one rank has seen: how many frames each peer had dropped, which
/// rings were closed, and the latest faults in full.
///
/// ```
/// use amrq::prelude::*;
/// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     am.barrier()?;
///     assert!(am.faults().is_empty()); // well-behaved peers
///     assert_eq!(am.faults().of(1 - am.rank()), 0);
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// Frames dropped, per sender rank.
    per_peer: Vec<u64>,
    /// Faults whose sender is unknown.
    unattributed: u64,
    /// Rings closed: (sender, channel).
    closed: Vec<(Option<Rank>, Channel)>,
    /// The latest faults, oldest first.
    recent: std::collections::VecDeque<Fault>,
}

impl Faults {
    /// Frames dropped in all.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Fault, FaultKind};
    /// let eps = threads::endpoints(3, &[16]).unwrap();
    /// for src in [1, 2, 2] {
    ///     eps[0].record_fault(Fault { source: Some(src), channel: 0, kind: FaultKind::NotPermitted });
    /// }
    /// assert_eq!(eps[0].faults().total(), 3);
    /// ```
    pub fn total(&self) -> u64 {
        self.per_peer.iter().sum::<u64>() + self.unattributed
    }

    /// True if no peer has sent a bad frame.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit};
    /// assert!(threads::endpoints(2, &[16]).unwrap()[0].faults().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// Frames of `rank` dropped.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Fault, FaultKind};
    /// let eps = threads::endpoints(3, &[16]).unwrap();
    /// eps[0].record_fault(Fault { source: Some(2), channel: 0, kind: FaultKind::OutOfSegment });
    /// let f = eps[0].faults();
    /// assert_eq!((f.of(1), f.of(2), f.of(99)), (0, 1, 0));
    /// ```
    pub fn of(&self, rank: Rank) -> u64 {
        self.per_peer.get(rank).copied().unwrap_or(0)
    }

    /// The rings closed for corrupt headers: (sender, channel).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Fault, FaultKind};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].record_fault(Fault { source: Some(1), channel: 0, kind: FaultKind::OutsidePool });
    /// assert!(eps[0].faults().closed().is_empty()); // a dropped frame closes no ring
    /// ```
    pub fn closed(&self) -> &[(Option<Rank>, Channel)] {
        &self.closed
    }

    /// The latest faults (up to [`RECENT_FAULTS`]), oldest first.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Fault, FaultKind};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].record_fault(Fault { source: Some(1), channel: 0, kind: FaultKind::NotPermitted });
    /// let f = eps[0].faults();
    /// let last = f.recent().last().unwrap();
    /// assert_eq!((last.source, last.channel), (Some(1), 0));
    /// ```
    pub fn recent(&self) -> impl Iterator<Item = &Fault> {
        self.recent.iter()
    }

    /// Adds `fault`; true if it is the first of its sender.
    fn add(&mut self, fault: Fault) -> bool {
        let first = match fault.source {
            Some(r) => {
                if self.per_peer.len() <= r {
                    self.per_peer.resize(r + 1, 0);
                }
                self.per_peer[r] += 1;
                self.per_peer[r] == 1
            }
            None => {
                self.unattributed += 1;
                self.unattributed == 1
            }
        };
        if fault.kind.closes_ring() {
            self.closed.push((fault.source, fault.channel));
        }
        if self.recent.len() == RECENT_FAULTS {
            self.recent.pop_front();
        }
        self.recent.push_back(fault);
        first
    }

    /// Adds every fault of `other`, whose ranks `rank_of` turns into this log's (a
    /// conduit made of two reports both halves' faults in the job's ranks).
    pub(crate) fn merge(&mut self, other: Faults, rank_of: impl Fn(Rank) -> Rank) {
        for (r, &n) in other.per_peer.iter().enumerate().filter(|(_, &n)| n > 0) {
            let r = rank_of(r);
            if self.per_peer.len() <= r {
                self.per_peer.resize(r + 1, 0);
            }
            self.per_peer[r] += n;
        }
        self.unattributed += other.unattributed;
        let map = |s: Option<Rank>| s.map(&rank_of);
        self.closed
            .extend(other.closed.into_iter().map(|(s, ch)| (map(s), ch)));
        self.recent.extend(other.recent.into_iter().map(|f| Fault {
            source: map(f.source),
            ..f
        }));
        while self.recent.len() > RECENT_FAULTS {
            self.recent.pop_front();
        }
    }
}

/// Where a rank records the faults it sees: shared by its endpoint and the progress
/// thread that drains its Interrupt channels. Faults are rare, so a lock is fine.
#[derive(Debug, Clone)]
pub(crate) struct FaultLog {
    me: Rank,
    faults: Arc<Mutex<Faults>>,
}

impl FaultLog {
    /// The log of rank `me`.
    pub(crate) fn new(me: Rank) -> Self {
        Self {
            me,
            faults: Arc::default(),
        }
    }

    /// Records `fault`, printing it if it is its sender's first.
    #[cold]
    pub(crate) fn record(&self, fault: Fault) {
        let text = fault.to_string();
        let first = self.lock().add(fault);
        if first {
            crate::util::say(&format!(
                "amrq: rank {} dropped a bad frame {text} (further ones are counted in its faults log)",
                self.me
            ));
        }
    }

    /// What has been recorded so far.
    pub(crate) fn snapshot(&self) -> Faults {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Faults> {
        // A panic while holding it cannot leave `Faults` half-updated in a way that
        // matters (counts only): go on with what is there.
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(source: Option<Rank>, kind: FaultKind) -> Fault {
        Fault {
            source,
            channel: 0,
            kind,
        }
    }

    #[test]
    fn counts_per_peer_keeps_the_latest_and_lists_closed_rings() {
        let mut f = Faults::default();
        assert!(f.add(fault(Some(2), FaultKind::NotPermitted)));
        assert!(!f.add(fault(Some(2), FaultKind::OutOfSegment)));
        let corrupt = Corrupt {
            position: 5,
            what: "x",
        };
        assert!(f.add(fault(None, FaultKind::Corrupt(corrupt))));
        for _ in 0..RECENT_FAULTS {
            f.add(fault(Some(0), FaultKind::OutsidePool));
        }
        assert_eq!((f.of(2), f.of(0), f.of(1), f.of(99)), (2, 32, 0, 0));
        assert_eq!(f.total(), 35);
        assert_eq!(f.closed(), &[(None, 0)]);
        assert_eq!(f.recent().count(), RECENT_FAULTS);
        assert!(f.recent().all(|x| x.source == Some(0)));
    }

    #[test]
    fn merging_maps_ranks() {
        let mut job = Faults::default();
        job.add(fault(Some(0), FaultKind::NotPermitted));
        let mut half = Faults::default();
        half.add(fault(Some(1), FaultKind::OutOfSegment));
        job.merge(half, |r| [4, 6][r]);
        assert_eq!((job.of(0), job.of(6), job.total()), (1, 1, 2));
        assert_eq!(job.recent().last().unwrap().source, Some(6));
    }
}
