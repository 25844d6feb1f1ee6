//! Sends from threads other than the endpoint's own: an [`Injector`] writes one shared
//! channel's rings, reserving slots by compare-and-swap as every other sender to those
//! rings does, with its own view of each ring's head. Any number of a rank's threads
//! send at once through their own injectors, with no lock: the ring protocol already
//! serves producers in other processes, and a thread is one more producer.
//!
//! Frames carry the rank as their hidden word, as the endpoint's own sends on the
//! channel do: the receiver cannot tell the threads apart, and frames of one injector
//! to one receiver arrive in the order it sent them. After each frame an injector rings
//! the receiver's doorbell with the handshake the endpoint's own sends use: no fence
//! where the receiver arms with `membarrier` (which reaches every thread of a
//! registered process), a `SeqCst` fence elsewhere.
//!
//! On a rank of a job across hosts (a front) an injector writes the rank's outbox
//! instead (`outbox.rs`), its hidden word naming the destination and channel, and the
//! rank's thread sends the frames on; a thread's one-sided operations go the same way
//! ([`Injector::try_start`], `thread_op.rs`).

use super::channels::{with_hidden_word, Tx};
use super::doorbell::Doorbell;
use super::outbox::{hidden_word, Outbox, Waker};
use super::thread_op::{self, ThreadOp, ThreadOpKind, OP_CHANNEL};
use super::MemConduit;
use crate::conduit::doorbell;
use crate::conduit::ring::{
    FrameHeader, RawRing, RingMemory, SharedProducer, MAX_ARGS, USER_FLAGS,
};
use crate::conduit::{Channel, ConduitError, Message, Rank};
use crate::sync::AtomicU64;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One receiver's shared ring as an injector sees it.
#[derive(Clone, Copy)]
struct Lane {
    ring: RawRing,
    tail: *const AtomicU64,
    prod: SharedProducer,
    doorbell: *const Doorbell,
    /// The channel's bit if this process may leave its fence out where the receiver
    /// arms with `membarrier` (as the endpoint's own sends: `TxRing::light_bit`).
    light_bit: u64,
}

/// A sender into one shared channel for a thread of this rank other than the
/// endpoint's: `Send`, so the endpoint's thread makes one per worker thread and moves it
/// there; it borrows the endpoint, which outlives it.
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Message, ReceivedFrame};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(64).shared(true)]);
/// let eps = threads::endpoints_for(2, &spec).unwrap();
/// std::thread::scope(|s| {
///     for t in 0..2u64 {
///         let mut inj = eps[0].injector(0).unwrap();
///         s.spawn(move || {
///             let m = Message { tag: 7, args: &[t], ..Message::default() };
///             inj.try_send(1, &m).unwrap();
///         });
///     }
/// });
/// let mut seen = Vec::new();
/// while seen.len() < 2 {
///     eps[1].drain(0, 8, |f| -> Result<(), amrq::conduit::ConduitError> {
///         seen.push((f.source(), f.args()[0]));
///         Ok(())
///     }).unwrap();
/// }
/// seen.sort();
/// assert_eq!(seen, [(0, 0), (0, 1)]);
/// ```
///
/// An injector is one thread's: it is not `Sync` (each thread makes or is given its
/// own), and neither is the endpoint:
///
/// ```compile_fail,E0277
/// fn shared_between_threads<T: Sync>() {}
/// shared_between_threads::<amrq::conduit::mem::Injector<'static>>();
/// ```
///
/// A clone is a new injector into the same channel, for one more thread.
#[derive(Clone)]
pub struct Injector<'a> {
    ch: Channel,
    me: u64,
    /// User args a frame may carry (the hidden word takes one), and payload bytes.
    max_args: usize,
    max_payload: usize,
    /// This rank may send into the channel.
    permitted: bool,
    /// The channel's doorbell bit, or 0 if it does not ring.
    notify_bit: u64,
    /// Per destination; on a front, one: its outbox's.
    lanes: Box<[Lane]>,
    /// Ranks in the job.
    size: usize,
    /// Bytes of every rank's segment.
    segment_bytes: usize,
    /// On a front: how it wakes the rank's thread, whose outbox its frames wait in.
    outbox: Option<*const Waker>,
    /// The job's liveness, for a sender that waits for room.
    boot: crate::bootstrap::Boot,
    endpoint: PhantomData<&'a MemConduit>,
}

// SAFETY: an injector holds addresses inside the job's region, which the endpoint it
// borrows keeps mapped for `'a`; it touches them only through the shared ring's
// protocol (slots reserved by compare-and-swap, published by Release stores) and the
// doorbell's atomics, both made for senders in any thread or process; on a front, the
// outbox's ring the same way and its waker's atomics, which the front keeps for `'a`.
// Its own state (each ring's cached head) it alone uses.
unsafe impl Send for Injector<'_> {}

impl MemConduit {
    /// An [`Injector`] into shared channel `ch`, for another thread of this rank.
    /// [`ConduitError::NoSuchChannel`] for a channel out of range,
    /// [`ConduitError::Unsupported`] for one that is not shared, or on a front of a
    /// job across hosts started without a channel received with another (no outbox:
    /// `sender_slots` 0); a front's injector writes its outbox.
    pub fn injector(&self, ch: Channel) -> Result<Injector<'_>, ConduitError> {
        let channels = self.caps.channels.len();
        if ch >= channels {
            return Err(ConduitError::NoSuchChannel {
                channel: ch,
                channels,
            });
        }
        let unsupported = |what| Err(ConduitError::Unsupported { what });
        if !self.caps.channels[ch].shared {
            return unsupported("an injector into a channel that is not shared");
        }
        if let Some(a) = &self.across {
            return match &a.outbox {
                Some(outbox) => Ok(self.forwarding_injector(ch, outbox)),
                None => unsupported("an injector on a front without an outbox (no sender_slots)"),
            };
        }
        if self.tx.len() < (ch + 1) * self.size {
            return unsupported("an injector on an endpoint whose rings are not all mapped");
        }
        let first = &self.tx[ch * self.size];
        let mut lanes = Vec::with_capacity(self.size);
        for t in &self.tx[ch * self.size..(ch + 1) * self.size] {
            // SAFETY: only ring code runs while the state is borrowed; the tail word's
            // address is copied out.
            let Tx::Shared { tail, .. } = (unsafe { t.prod.get() }) else {
                return unsupported("an injector into a channel that is not shared");
            };
            lanes.push(Lane {
                ring: t.ring.get(),
                tail: *tail,
                // ORDERING: Acquire, as every view of the head a producer takes (pairs
                // with the consumer's Release store of it); a view that is older only
                // sends the first reservation to look again.
                prod: SharedProducer::new(t.ring.get().head().load(Ordering::Acquire)),
                doorbell: t.doorbell,
                light_bit: t.light_bit,
            });
        }
        Ok(Injector {
            ch,
            me: self.rank as u64,
            max_args: first.max_args,
            max_payload: self.caps.channels[ch].max_payload,
            permitted: first.permitted,
            notify_bit: first.notify_bit,
            lanes: lanes.into(),
            size: self.size,
            segment_bytes: self.segment_bytes,
            outbox: None,
            boot: self.boot.clone(),
            endpoint: PhantomData,
        })
    }

    /// A front's injector into channel `ch`: every frame into `outbox`, whatever its
    /// destination, with the channel's limits.
    fn forwarding_injector(&self, ch: Channel, outbox: &Outbox) -> Injector<'_> {
        let c = &self.caps.channels[ch];
        // The frames go on through the channel `ch` is received with, if any: within
        // both channels' limits, the cluster refuses none of them for its size.
        let to = &self.caps.channels[c.received_with.unwrap_or(ch)];
        let (ring, tail, prod) = outbox.lane();
        let lane = Lane {
            ring,
            tail,
            prod,
            // Never rung (`notify_bit` is 0): the outbox wakes the rank itself.
            doorbell: self.doorbell,
            light_bit: 0,
        };
        Injector {
            ch,
            me: self.rank as u64,
            max_args: c.max_args.min(to.max_args),
            max_payload: c
                .max_payload
                .min(to.max_payload)
                // Room for the args too: an enqueue carries them in its op frame.
                .min(super::max_payload(ring.nslots()).saturating_sub(MAX_ARGS * 8)),
            permitted: c.senders.allows(self.rank),
            notify_bit: 0,
            lanes: Box::new([lane]),
            size: self.size,
            segment_bytes: self.segment_bytes,
            outbox: Some(outbox.waker()),
            boot: self.boot.clone(),
            endpoint: PhantomData,
        }
    }
}

/// [`ConduitError::PeerDead`] if a rank of `boot`'s job has failed,
/// [`ConduitError::PeerLeft`] if `rank` has left it: what a thread other than the
/// endpoint's checks while it waits for `rank`.
pub(crate) fn check_peer(boot: &crate::bootstrap::Boot, rank: Rank) -> Result<(), ConduitError> {
    boot.check_peers()?;
    match boot.has_left(rank) {
        true => Err(ConduitError::PeerLeft { rank }),
        false => Ok(()),
    }
}

impl MemConduit {
    /// [`Conduit::joined_taken`](crate::conduit::Conduit::joined_taken): the joined
    /// rings' counts. A joined
    /// ring closed as corrupt gives nothing more: `u64::MAX`, so that nobody waits for
    /// the rest of its frames.
    pub(super) fn taken_from_threads(&self, rank: Rank) -> u64 {
        if self.across.is_some() {
            // A front's threads' frames go out as its own (its outbox): none is
            // counted, and none is waited for.
            return u64::MAX;
        }
        let rings = self.rx.iter().flat_map(|c| c.rings.iter());
        let joined = rings.filter(|r| !r.joined_senders.is_empty());
        joined
            .map(|r| match r.shut.get() {
                true => u64::MAX,
                false => r.joined_taken.get(rank).map_or(0, std::cell::Cell::get),
            })
            .fold(0, u64::saturating_add)
    }
}

impl<'a> Injector<'a> {
    /// On a front, its outbox's [`Waker`]: how it wakes the rank's thread, and what
    /// that thread learnt of ranks that left, for waits of its threads.
    pub(crate) fn waker(&self) -> Option<&'a Waker> {
        // SAFETY: the waker is the front's, which the injector borrows for `'a`.
        self.outbox.map(|w| unsafe { &*w })
    }

    /// [`ConduitError::NoSuchRank`] unless `dest` is a rank of the job.
    fn in_job(&self, dest: Rank) -> Result<(), ConduitError> {
        match dest < self.size {
            true => Ok(()),
            false => Err(ConduitError::NoSuchRank {
                rank: dest,
                size: self.size,
            }),
        }
    }

    /// [`ConduitError::NoSuchRank`] or [`ConduitError::OutOfSegment`] unless `len`
    /// bytes at `offset` of `rank`'s segment are in the job.
    pub(crate) fn in_segment(
        &self,
        rank: Rank,
        offset: usize,
        len: usize,
    ) -> Result<(), ConduitError> {
        self.in_job(rank)?;
        super::one_sided::in_segment(self.segment_bytes, rank, offset, len)
    }
}

impl Injector<'_> {
    /// The rank this injector sends from.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).shared(true)]);
    /// let eps = threads::endpoints_for(2, &spec).unwrap();
    /// let inj = eps[1].injector(0).unwrap();
    /// assert_eq!((inj.rank(), inj.size()), (1, 2));
    /// ```
    pub fn rank(&self) -> Rank {
        self.me as Rank
    }

    /// Ranks in the job.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).shared(true)]);
    /// let eps = threads::endpoints_for(3, &spec).unwrap();
    /// assert_eq!(eps[0].injector(0).unwrap().size(), 3);
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// True if its frames wait in the rank's outbox for the rank's thread to send them
    /// on (a rank of a job across hosts), rather than going to their destination's ring.
    pub fn forwards(&self) -> bool {
        self.outbox.is_some()
    }

    /// The largest payload a frame carries.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(256).shared(true)]);
    /// let eps = threads::endpoints_for(1, &spec).unwrap();
    /// assert!(eps[0].injector(0).unwrap().max_payload() >= 4096);
    /// ```
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// What a sender waiting for room at `dest` checks between tries:
    /// [`ConduitError::PeerDead`] if a rank of the job has failed,
    /// [`ConduitError::PeerLeft`] if `dest` has left it.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, ConduitSpec};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).shared(true)]);
    /// let eps = threads::endpoints_for(2, &spec).unwrap();
    /// assert!(eps[0].injector(0).unwrap().check_peer(1).is_ok());
    /// ```
    pub fn check_peer(&self, dest: Rank) -> Result<(), ConduitError> {
        check_peer(&self.boot, dest)?;
        match self.waker().is_some_and(|w| w.has_left(dest)) {
            true => Err(ConduitError::PeerLeft { rank: dest }),
            false => Ok(()),
        }
    }

    /// The checks [`Injector::try_send`] makes of a frame to `dest`, without sending it.
    pub(crate) fn check(&self, dest: Rank, msg: &Message<'_>) -> Result<(), ConduitError> {
        self.in_job(dest)?;
        self.checked(msg).map(drop)
    }

    /// Sends `msg` (args, payload, tag and user flags) to `dest`'s shared ring of this
    /// injector's channel, as [`Conduit::try_send`](crate::conduit::Conduit::try_send)
    /// does: [`ConduitError::Busy`] with nothing sent if the ring is full, and the same
    /// refusals for a bad rank, too many args or too large a payload, a channel this
    /// rank may not send into, or an interrupt flag (an injector does not send those).
    #[inline]
    pub fn try_send(&mut self, dest: Rank, msg: &Message<'_>) -> Result<(), ConduitError> {
        if let Some(waker) = self.waker() {
            return self.try_forward(waker, dest, msg);
        }
        let header = self.checked(msg)?;
        let (words, n) = with_hidden_word(self.me, msg.args);
        let size = self.size;
        let Some(lane) = self.lanes.get_mut(dest) else {
            return Err(ConduitError::NoSuchRank { rank: dest, size });
        };
        push(lane, header, &words[..n], msg.payload, dest, self.ch)?;
        if self.notify_bit != 0 {
            // SAFETY: the doorbell is inside the region the endpoint keeps mapped;
            // atomic only.
            let d = unsafe { &*lane.doorbell };
            // As the endpoint's own sends: no fence where the receiver arms this bit
            // with `membarrier`, which reaches every thread of this process.
            let light = d.heavy.load(Ordering::Relaxed) & lane.light_bit != 0;
            if doorbell::ring(&d.armed, &d.summary, &d.sleepers, self.notify_bit, light) {
                // ORDERING: Release pairs with the sleeper's Acquire load of `wake`
                // before it sleeps; the futex wake ends its sleep.
                d.wake.fetch_add(1, Ordering::Release);
                crate::util::futex::wake_all(&d.wake);
            }
        }
        Ok(())
    }

    /// [`Injector::try_send`] on a front: into the outbox, the hidden word naming the
    /// destination and channel; then wakes the rank's thread if it sleeps.
    #[cold]
    #[inline(never)]
    fn try_forward(
        &mut self,
        waker: &Waker,
        dest: Rank,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        self.in_job(dest)?;
        let header = self.checked(msg)?;
        let (words, n) = with_hidden_word(hidden_word(dest, self.ch), msg.args);
        push(
            &mut self.lanes[0],
            header,
            &words[..n],
            msg.payload,
            dest,
            self.ch,
        )?;
        waker.wake();
        Ok(())
    }

    /// Starts a one-sided operation on `dest`'s segment through the rank's outbox, for
    /// the rank's thread to start on the cluster (a rank of a job across hosts;
    /// [`ConduitError::Unsupported`] elsewhere, where a thread copies through
    /// [`Segments`](super::Segments)): [`ConduitError::Busy`] with nothing started if
    /// the outbox is full, [`ConduitError::PayloadTooLarge`] for a put of more than
    /// [`Injector::max_payload`] bytes. The range is checked where it starts; its
    /// failure is the operation's outcome.
    pub(crate) fn try_start(
        &mut self,
        dest: Rank,
        offset: usize,
        what: ThreadOpKind<'_>,
    ) -> Result<Arc<ThreadOp>, ConduitError> {
        let Some(waker) = self.waker() else {
            return Err(ConduitError::Unsupported {
                what: "a one-sided operation through the outbox of a rank of one host",
            });
        };
        self.in_job(dest)?;
        let bytes = thread_op::frame_bytes(&what);
        let (payload, max_payload) = match (what, &bytes) {
            (ThreadOpKind::Put(data), _) => (data, self.max_payload),
            // An enqueue's frame, checked against its queue's limits by the caller
            // ([`Injector::check`]), with its args: it fits a frame of the outbox.
            (_, Some(b)) => (
                b.as_slice(),
                super::max_payload(self.lanes[0].ring.nslots()),
            ),
            _ => (&[][..], 0),
        };
        if payload.len() > max_payload {
            return Err(ConduitError::PayloadTooLarge {
                len: payload.len(),
                max: max_payload,
                channel: self.ch,
            });
        }
        let (op, args) = thread_op::op_args(&what, offset);
        let (words, n) = with_hidden_word(hidden_word(dest, OP_CHANNEL), &args);
        let header = FrameHeader::default();
        if let Err(e) = push(
            &mut self.lanes[0],
            header,
            &words[..n],
            payload,
            dest,
            self.ch,
        ) {
            thread_op::unsend(&args);
            return Err(e);
        }
        waker.wake();
        Ok(op)
    }

    /// The header of `msg` once it passed the channel's checks: args, payload,
    /// permission, no interrupt flag.
    #[inline(always)]
    fn checked(&self, msg: &Message<'_>) -> Result<FrameHeader, ConduitError> {
        if msg.args.len() > self.max_args {
            return Err(ConduitError::TooManyArgs {
                nargs: msg.args.len(),
                max: self.max_args,
            });
        }
        if !msg.payload.is_empty() && msg.payload.len() > self.max_payload {
            return Err(ConduitError::PayloadTooLarge {
                len: msg.payload.len(),
                max: self.max_payload,
                channel: self.ch,
            });
        }
        if !self.permitted || msg.flags & Message::INTERRUPT != 0 {
            return Err(ConduitError::NotPermitted {
                channel: self.ch,
                rank: self.me as Rank,
            });
        }
        Ok(FrameHeader {
            tag: msg.tag,
            flags: msg.flags & USER_FLAGS,
            ..FrameHeader::default()
        })
    }
}

/// Writes one frame (hidden word first) into `lane`'s ring: [`ConduitError::Busy`] if
/// it lacks room, [`ConduitError::ChannelClosed`] if its receiver closed it.
#[inline(always)]
fn push(
    lane: &mut Lane,
    header: FrameHeader,
    words: &[u64],
    payload: &[u8],
    dest: Rank,
    ch: Channel,
) -> Result<(), ConduitError> {
    // SAFETY: the tail word is inside the region (or the outbox) the endpoint keeps
    // mapped.
    let tail = unsafe { &*lane.tail };
    if lane.prod.try_push(&lane.ring, tail, header, words, payload) {
        return Ok(());
    }
    Err(match lane.ring.is_closed() {
        true => ConduitError::ChannelClosed {
            rank: dest,
            channel: ch,
        },
        false => ConduitError::Busy,
    })
}
