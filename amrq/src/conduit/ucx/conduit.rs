//! [`UcxConduit`]: one rank's endpoint of the UCX conduit. Sends check what the ring
//! conduit checks, look for room in the credits, and go out as one UCX Active Message;
//! receives progress the worker (which pushes arrived frames into the local queues)
//! and then read the local queues with the ring conduit's code.

use super::auth;
use super::interrupts::UcxInterrupts;
use super::net::Net;
use super::outbox::Outbox;
use super::rx::{shared_charge, Shared};
use super::sys::{self, StatusPtr};
use super::waker::FdWaker;
use super::wire::{self, Kind};
use crate::bootstrap::Boot;
use crate::conduit::mem::{MemConduit, MemFrame};
use crate::conduit::ring::tail_after;
use crate::conduit::{
    Armed, Arming, AtomicOp, Caps, Channel, Conduit, ConduitError, Fault, Faults, Message, OpToken,
    PollSet, Rank, Started,
};
use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One UCX Active Message as it travels: its id, header and data (tests only).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMessage {
    /// The Active Message id.
    pub id: u32,
    /// The header, the MAC's trailer included.
    pub header: Vec<u8>,
    /// The data.
    pub data: Vec<u8>,
}

/// A send UCX has not finished with: its request, and the header and payload it reads.
pub(super) type Pending = (*mut std::ffi::c_void, Vec<u8>, Vec<u8>);

/// How long a setup collective, or the goodbye, waits for peers.
pub(super) const PATIENCE: Duration = Duration::from_secs(60);

/// How long a leaving rank's worker must have been idle before it is destroyed.
const LINGER: Duration = Duration::from_millis(5);

/// One rank's endpoint of the UCX conduit (see the module doc of [`super`]).
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// let eps = ucx::threads(1, &spec, &settings).unwrap();
/// let c: &ucx::UcxConduit = &eps[0];
/// assert!(c.caps().flags.put_get); // RDMA puts and gets through UCP
/// ```
pub struct UcxConduit {
    pub(super) rank: Rank,
    pub(super) size: usize,
    /// Wakes a sleeper when the worker's descriptor is readable; dropped first.
    pub(super) waker: FdWaker,
    /// Reads the local queues.
    pub(super) me: MemConduit,
    pub(super) net: Arc<Net>,
    pub(super) shared: Arc<Shared>,
    /// Per (channel × ranks + destination): where the receiver's ring is written to
    /// (per-sender rings), or the charges taken (shared rings).
    pub(super) tx: Box<[Cell<u64>]>,
    /// Per destination: Tag-On blocks sent.
    pub(super) tag_on_sent: Box<[Cell<u64>]>,
    /// Per destination: the blocks freed there when this rank last asked for more.
    pub(super) tag_on_asked: Box<[Cell<u64>]>,
    pub(super) tag_on_buffers: u64,
    /// Sends UCX has not finished with, and the bytes they read.
    pub(super) pending: RefCell<Vec<Pending>>,
    pub(super) ops: RefCell<super::ops::Ops>,
    pub(super) epoch: Cell<u64>,
    pub(super) boot: Boot,
    pub(super) segment: super::start::SegmentMemory,
    /// Per (channel, peer): the credit at which this rank last asked for more.
    pub(super) asked: Vec<Cell<u64>>,
    pub(super) segment_bytes: usize,
    /// Small frames waiting to travel together, per destination.
    pub(super) outbox: Outbox,
    /// What this rank published to the others.
    pub(super) card: super::Card,
    /// The job ended quiescent ([`Conduit::quiescent`]): nobody waits for this rank.
    pub(super) quiet: Cell<bool>,
}

// SAFETY: the raw request pointers in `pending` and `ops` belong to this endpoint's
// worker, which may be used from whichever one thread owns the endpoint (thread mode
// SERIALIZED or MULTI); everything else is Send. It stays !Sync through its cells.
unsafe impl Send for UcxConduit {}

impl std::fmt::Debug for UcxConduit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UcxConduit")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Progresses the worker, moves held frames into rings with room, and returns the
/// credits due (with sends that complete at once; what cannot go now goes next time),
/// sealed on `lane` (the calling thread's: [`auth::OWN`] or [`auth::PROGRESS`]). True
/// if the worker did something.
pub(super) fn pump(net: &Net, shared: &Shared, lane: usize) -> bool {
    // Once: a second call to see that nothing more came is a system call (tcp's
    // epoll_wait) on the round trip's path, and one call reads what the socket holds.
    let worked = net.progress();
    if net.datagrams().is_some_and(|d| d.due()) {
        super::datagram::look_at(net, shared);
    }
    let due = {
        let mut local = shared.local();
        if local.holds() {
            local.retry_held(&shared.faults);
        }
        local.credits_due(|p| net.connected(p))
    };
    if due.is_empty() {
        return worked;
    }
    // Sent without the lock (see `Local::credits_due`); a peer that left or failed
    // takes no more credits.
    let me = shared.me as u64;
    let mut sent = false;
    let unsent: Vec<_> = due
        .into_iter()
        .filter(|d| !shared.has_left(d.peer) && !shared.has_failed(d.peer))
        .filter(|d| {
            let words = [me, d.what, d.value];
            let credit = Out::bare(wire::AM_CREDIT, &words);
            let gone = match send_now(net, shared, lane, d.peer, &credit) {
                Ok(()) => true,
                Err(sys::UCS_ERR_NO_RESOURCE) => false,
                // The sender waits for this credit: a peer this rank cannot reach, or
                // whose endpoint failed, is reported, not waited for.
                Err(e) => {
                    shared.on_error(d.peer, shared.lost(d.peer, &net.ucp.status(e)));
                    false
                }
            };
            sent |= gone;
            !gone
        })
        .collect();
    if !unsent.is_empty() {
        let mut local = shared.local();
        unsent.iter().for_each(|d| local.unsent(d));
    }
    worked || sent
}

/// Posts an eager Active Message (`ucp_am_send_nbx`). `now`: UCX must complete it at
/// once (or answer `UCS_ERR_NO_RESOURCE`), so the buffers need not outlive the call;
/// otherwise the caller keeps them until the request it may return is done.
fn post(net: &Net, dest: Rank, id: u32, header: &[u8], payload: &[u8], now: bool) -> StatusPtr {
    let mut p = sys::ucp_request_param_t::empty();
    p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
    if now {
        p.op_attr_mask |= sys::UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    }
    p.flags = sys::UCP_AM_SEND_FLAG_EAGER;
    let ep = match net.made(dest) {
        Some(ep) => ep,
        None if net.datagram(dest, id, header, payload) => return StatusPtr::Done,
        None => match net.ep(dest) {
            Ok(ep) => ep,
            Err(e) => return StatusPtr::Err(e),
        },
    };
    // SAFETY: a live endpoint; header and payload stay valid until the operation is
    // done (the caller's contract, above).
    StatusPtr::of(unsafe {
        (net.ucp.ucp_am_send_nbx)(
            ep,
            id,
            header.as_ptr().cast(),
            header.len(),
            payload.as_ptr().cast(),
            payload.len(),
            &p,
        )
    })
}

/// An Active Message to send: its id, header words and data, and whether the MAC
/// covers the data (all but the payload of a Long frame sent alone: see `auth`).
pub(super) struct Out<'a> {
    pub id: u32,
    pub header: &'a [u64],
    pub data: &'a [u8],
    pub cover: bool,
}

impl<'a> Out<'a> {
    /// A message of `header` only.
    pub fn bare(id: u32, header: &'a [u64]) -> Self {
        Self::with(id, header, &[])
    }

    /// A message of `header` and `data`, all of it under the MAC.
    pub fn with(id: u32, header: &'a [u64], data: &'a [u8]) -> Self {
        Self {
            id,
            header,
            data,
            cover: true,
        }
    }

    /// Its header's bytes, sealed with the MAC for `dest` on `lane`.
    fn sealed(&self, shared: &Shared, lane: usize, dest: Rank) -> wire::HeaderBytes {
        let mut h = wire::as_bytes(self.header);
        let covered = if self.cover { self.data } else { &[] };
        let len = self.data.len();
        let body = h.as_slice();
        let trailer = shared.auth.seal(dest, lane, self.id, body, covered, len);
        h.seal(&trailer);
        h
    }
}

/// Sends an Active Message that UCX must complete at once (its header and payload
/// are not kept), sealed on `lane`: `Err(UCS_ERR_NO_RESOURCE)` if it cannot now.
pub(super) fn send_now(
    net: &Net,
    shared: &Shared,
    lane: usize,
    dest: Rank,
    out: &Out<'_>,
) -> Result<(), sys::ucs_status_t> {
    let h = out.sealed(shared, lane, dest);
    match post(net, dest, out.id, h.as_slice(), out.data, true) {
        StatusPtr::Done => Ok(()),
        StatusPtr::Err(e) => Err(e),
        // Not expected with forced immediate completion; finish it before the
        // buffers go.
        StatusPtr::Request(r) => net.wait(r, PATIENCE),
    }
}

impl UcxConduit {
    /// Progress: sends every batch of small frames, then see [`pump`]; and forgets the
    /// sends UCX has finished. True if the worker did something.
    pub(super) fn progress(&self) -> bool {
        self.send_batches();
        let worked = pump(&self.net, &self.shared, auth::OWN);
        let mut pending = self.pending.borrow_mut();
        // A failed send is the peer's failure, which its endpoint reports.
        pending.retain(|&(req, _, _)| self.net.done(req) == Ok(false));
        worked
    }

    /// Sends an Active Message whose header and payload UCX may read after this
    /// returns (then copied and kept until it is done).
    pub(super) fn send(&self, dest: Rank, out: &Out<'_>) -> Result<(), ConduitError> {
        match send_now(&self.net, &self.shared, auth::OWN, dest, out) {
            Ok(()) => Ok(()),
            Err(sys::UCS_ERR_NO_RESOURCE) => {
                let h = out.sealed(&self.shared, auth::OWN, dest);
                self.send_kept(dest, out.id, h.as_slice().to_vec(), out.data.to_vec())
            }
            Err(e) => Err(self.peer_failed(dest, e)),
        }
    }

    /// Posts Active Message `id` whose sealed header `h` and data stay in `pending`
    /// until UCX is done with them.
    fn send_kept(
        &self,
        dest: Rank,
        id: u32,
        h: Vec<u8>,
        data: Vec<u8>,
    ) -> Result<(), ConduitError> {
        match post(&self.net, dest, id, &h, &data, false) {
            StatusPtr::Done => Ok(()),
            StatusPtr::Request(r) => {
                self.pending.borrow_mut().push((r, h, data));
                Ok(())
            }
            StatusPtr::Err(e) => Err(self.peer_failed(dest, e)),
        }
    }

    /// Sends one frame as its own Active Message (a Long frame's payload bound by length
    /// only, see `auth.rs`).
    fn send_alone(
        &self,
        dest: Rank,
        head: &wire::FrameHead,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), ConduitError> {
        let (w, n) = wire::frame(head, args);
        let out = Out {
            cover: head.kind != Kind::Long,
            ..Out::with(wire::AM_FRAME, &w[..n], payload)
        };
        self.send(dest, &out)
    }

    /// Sends a batch of frames to `dest` (its buffer is kept for later batches if UCX
    /// is done with it at once).
    fn send_batch(&self, dest: Rank, batch: Vec<u8>) -> Result<(), ConduitError> {
        if let Some(Ok((head, args, nargs, payload))) = wire::Batch::lone(self.rank as u32, &batch)
        {
            // A frame that waited alone goes as if sent alone: the batch's header, its
            // MAC over the entry and its unpacking would cost a round trip ~3 %.
            let sent = self.send_alone(dest, &head, &args[..nargs], payload);
            self.outbox.recycle(batch);
            return sent;
        }
        let header = [self.rank as u64];
        let out = Out::with(wire::AM_BATCH, &header, &batch);
        match send_now(&self.net, &self.shared, auth::OWN, dest, &out) {
            Ok(()) => {
                self.outbox.recycle(batch);
                Ok(())
            }
            Err(sys::UCS_ERR_NO_RESOURCE) => {
                let h = out
                    .sealed(&self.shared, auth::OWN, dest)
                    .as_slice()
                    .to_vec();
                self.send_kept(dest, wire::AM_BATCH, h, batch)
            }
            Err(e) => Err(self.peer_failed(dest, e)),
        }
    }

    /// Sends every batch, the oldest first. A peer that failed is recorded (its
    /// endpoint reports it), and its batch is lost with it.
    pub(super) fn send_batches(&self) {
        while let Some((dest, batch)) = self.outbox.take_oldest() {
            let _ = self.send_batch(dest, batch);
        }
    }

    pub(super) fn peer_failed(&self, peer: Rank, status: sys::ucs_status_t) -> ConduitError {
        let cause = self.shared.lost(peer, &self.net.ucp.status(status));
        self.shared.on_error(peer, cause.clone());
        ConduitError::PeerDead { rank: peer, cause }
    }

    /// The position the receiver's ring `key` (channel `ch`) will be at after a frame
    /// of `nargs` args and `len` bytes, if the credits leave room for it.
    fn room(&self, key: usize, ch: Channel, nargs: usize, len: usize) -> Option<u64> {
        let c = &self.me.caps().channels[ch];
        let at = self.tx[key].get();
        let fits = |credit: u64| {
            if c.shared {
                let new = at + shared_charge(nargs, len);
                let budget = (c.slots / self.size as u64).max(1);
                (at == credit || new - credit <= budget).then_some(new)
            } else {
                let new = tail_after(at, c.slots, nargs, len);
                (new.wrapping_sub(credit) <= c.slots).then_some(new)
            }
        };
        // ORDERING: Relaxed: credits are counts (see `Shared::on_credit`).
        let credit = || self.shared.credits.rings[key].load(Ordering::Relaxed);
        fits(credit()).or_else(|| {
            self.progress();
            let now = credit();
            let room = fits(now);
            // No room: ask the receiver for what it has consumed (it returns credits
            // in batches otherwise, and to a sender it has not connected to only when
            // asked), once per credit value it sent.
            if room.is_none() {
                self.want(&self.asked[key], now, key % self.size, ch as u64);
            }
            room
        })
    }

    /// Asks `dest` for the credits of `what` (a channel, or `TAG_ON_FREED`), once per
    /// value `now` of them (`asked` keeps the last asked at); a request that could not
    /// go now is tried again at the next look.
    fn want(&self, asked: &Cell<u64>, now: u64, dest: Rank, what: u64) {
        if asked.get() != now {
            let words = [self.rank as u64, what];
            let want = Out::bare(wire::AM_WANT, &words);
            if send_now(&self.net, &self.shared, auth::OWN, dest, &want).is_ok() {
                asked.set(now);
            }
        }
    }

    fn tag_on_room(&self, dest: Rank) -> bool {
        // ORDERING: Relaxed: as in `room`.
        let freed = |s: &Self| s.shared.credits.tag_on_freed[dest].load(Ordering::Relaxed);
        let sent = self.tag_on_sent[dest].get();
        sent - freed(self) < self.tag_on_buffers || {
            self.progress();
            let room = sent - freed(self) < self.tag_on_buffers;
            if !room {
                self.want(
                    &self.tag_on_asked[dest],
                    freed(self),
                    dest,
                    wire::TAG_ON_FREED,
                );
            }
            room
        }
    }

    /// Sends a frame of `kind` to a peer: checks, room, then one Active Message.
    fn send_frame(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        kind: Kind,
        offset: usize,
    ) -> Result<(), ConduitError> {
        self.send_overdue();
        let (long, tag_on) = (kind == Kind::Long, kind == Kind::TagOn);
        self.me
            .refusal(dest, ch, msg, long.then_some(offset), tag_on)?;
        if dest == self.rank {
            return self.shared.local().to_self(kind, ch, msg, offset);
        }
        let flagged = kind == Kind::Medium && msg.flags & Message::INTERRUPT != 0;
        let (ring, nargs, len) = match kind {
            Kind::Medium if flagged => {
                let via = self.me.caps().interrupt_channel.unwrap_or(ch);
                (via, msg.args.len() + 1, msg.payload.len())
            }
            Kind::Medium => (ch, msg.args.len(), msg.payload.len()),
            Kind::Long | Kind::TagOn => (ch, msg.args.len(), 16),
        };
        let key = ring * self.size + dest;
        if tag_on && !self.tag_on_room(dest) {
            return Err(ConduitError::Busy);
        }
        let Some(at) = self.room(key, ring, nargs, len) else {
            return Err(ConduitError::Busy);
        };
        let head = wire::FrameHead {
            source: self.rank as u32,
            channel: ch as u16,
            tag: msg.tag,
            flags: msg.flags,
            kind,
            offset: offset as u64,
        };
        let entry = wire::entry_bytes(kind, msg.args.len(), msg.payload.len());
        // A frame flagged interrupt goes at once: its receiver's progress thread serves
        // it, and its sender may wait outside amrq for what that does.
        if self.outbox.takes(entry) && !flagged {
            if let Some(batch) = self.outbox.full_for(dest, entry) {
                self.send_batch(dest, batch)?; // the frame then starts the next one
            }
            self.outbox.add(dest, &head, msg.args, msg.payload);
            self.charge(key, at, dest, tag_on);
        } else {
            // After the frames before it, in order.
            if let Some(batch) = self.outbox.take(dest) {
                self.send_batch(dest, batch)?;
            }
            self.send_alone(dest, &head, msg.args, msg.payload)?;
            self.charge(key, at, dest, tag_on);
        }
        Ok(())
    }

    /// Sends the oldest batch if it has waited past the deadline: each
    /// send, put, get and atomic looks (a failed peer is recorded).
    #[inline]
    pub(super) fn send_overdue(&self) {
        if let Some((late, batch)) = self.outbox.take_overdue() {
            let _ = self.send_batch(late, batch);
        }
    }

    /// Books a frame sent (or batched) into ring `key`, now at `at`.
    fn charge(&self, key: usize, at: u64, dest: Rank, tag_on: bool) {
        self.tx[key].set(at);
        if tag_on {
            self.tag_on_sent[dest].set(self.tag_on_sent[dest].get() + 1);
        }
    }

    /// The local queues' endpoint, whose channels a front endpoint takes over
    /// (`conduit::mem`'s `across.rs`): the network keeps filling their rings.
    pub(crate) fn receiver_mut(&mut self) -> &mut MemConduit {
        &mut self.me
    }

    /// Progresses the worker: frames that came go into the local queues, credits and
    /// sends go out.
    pub(crate) fn progress_now(&self) {
        self.progress();
    }

    /// What coalescing small frames has done on this rank so far (see
    /// [`Coalesced`](super::Coalesced)).
    ///
    /// ```
    /// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
    /// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
    /// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// let eps = ucx::threads(1, &spec, &settings).unwrap();
    /// assert_eq!(eps[0].coalesced().batches, 0);
    /// ```
    pub fn coalesced(&self) -> super::Coalesced {
        self.outbox.counts()
    }

    /// What this rank published to its peers: its UCX worker's address and its
    /// segment's key and base (whoever reaches the address can connect; only the
    /// job's ranks can send: see the module doc).
    ///
    /// ```
    /// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
    /// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
    /// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// let eps = ucx::threads(1, &spec, &settings).unwrap();
    /// let card = eps[0].card();
    /// assert_eq!(ucx::Card::from_bytes(&card.to_bytes()).as_ref(), Some(card));
    /// ```
    pub fn card(&self) -> &super::Card {
        &self.card
    }

    /// Sends `msg` to `dest` alone (not in a batch), sealed as every message is, and
    /// returns the bytes that went out: for tests that play them again.
    #[doc(hidden)]
    pub fn send_recorded(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<RawMessage, ConduitError> {
        let key = ch * self.size + dest;
        let at = self
            .room(key, ch, msg.args.len(), msg.payload.len())
            .ok_or(ConduitError::Busy)?;
        let head = wire::FrameHead {
            source: self.rank as u32,
            channel: ch as u16,
            tag: msg.tag,
            flags: msg.flags,
            kind: Kind::Medium,
            offset: 0,
        };
        let (w, n) = wire::frame(&head, msg.args);
        let out = Out::with(wire::AM_FRAME, &w[..n], msg.payload);
        let h = out.sealed(&self.shared, auth::OWN, dest);
        let raw = RawMessage {
            id: out.id,
            header: h.as_slice().to_vec(),
            data: msg.payload.to_vec(),
        };
        self.send_raw(dest, &raw)?;
        self.charge(key, at, dest, false);
        Ok(raw)
    }

    /// Sends `raw` to `dest` as it is: for tests of what a receiver refuses.
    #[doc(hidden)]
    pub fn send_raw(&self, dest: Rank, raw: &RawMessage) -> Result<(), ConduitError> {
        self.send_batches();
        self.send_kept(dest, raw.id, raw.header.clone(), raw.data.clone())
    }

    /// The bootstrap that reports this job's failed ranks.
    ///
    /// ```
    /// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
    /// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
    /// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// let eps = ucx::threads(1, &spec, &settings).unwrap();
    /// assert!(eps[0].boot().check_peers().is_ok());
    /// ```
    pub fn boot(&self) -> &Boot {
        &self.boot
    }

    /// True once this rank has connected to `peer`: past the pair's first messages
    /// (datagrams), or for [`UcxConduit::endpoint_info`]; never before.
    ///
    /// ```
    /// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec, Message};
    /// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
    /// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// let eps = ucx::threads(3, &spec, &settings).unwrap();
    /// assert!(!eps[0].connected(1) && !eps[0].connected(2)); // nothing sent yet
    /// eps[0].try_send(1, 0, &Message { tag: 0, args: &[7], ..Message::default() }).unwrap();
    /// assert!(eps[0].peek(0).unwrap().is_none()); // sends the batch, as a datagram
    /// assert!(eps[0].contacted(1) && !eps[0].connected(1) && !eps[0].contacted(2));
    /// assert!(eps[0].endpoint_info(1).is_some() && eps[0].connected(1)); // connects
    /// # std::thread::scope(|s| { for e in eps { s.spawn(move || drop(e)); } });
    /// ```
    pub fn connected(&self, peer: Rank) -> bool {
        self.net.connected(peer)
    }

    /// What UCX says about this rank's endpoint to `peer` (its lanes, transports and
    /// devices, from `ucp_ep_print_info`), connecting to it if it had not yet: to check
    /// which transport carries a job.
    ///
    /// ```
    /// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
    /// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
    /// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// let eps = ucx::threads(2, &spec, &settings).unwrap();
    /// if let Some(info) = eps[0].endpoint_info(1) {
    ///     println!("{info}"); // the lanes: tcp on lo, as asked
    /// }
    /// assert!(eps[0].endpoint_info(5).is_none());
    /// ```
    pub fn endpoint_info(&self, peer: Rank) -> Option<String> {
        self.net.endpoint_info(peer)
    }
}

impl Drop for UcxConduit {
    /// Says goodbye, after everything this rank sent (Active Messages on an endpoint
    /// arrive in order), to every peer still there: after a quiescent end only to those
    /// it connected to (nobody waits for it; a peer that only sent here sees its
    /// connection close, which says the same, and one it sent only datagrams has no
    /// connection to see fail). Waits until UCX has delivered it, and a short while
    /// for its datagrams' acknowledgements (a peer gone since takes none).
    fn drop(&mut self) {
        self.progress();
        let _ = self.flush();
        let (net, shared) = (&self.net, &self.shared);
        let there = |r: Rank| r != self.rank && !shared.has_left(r) && !shared.has_failed(r);
        let bye = |r: Rank| self.send(r, &Out::bare(wire::AM_BYE, &[self.rank as u64]));
        let told = |r: Rank| match self.quiet.get() {
            true => net.connected(r),
            false => net.contacted(r),
        };
        for r in (0..self.size).filter(|&r| told(r) && there(r)) {
            let _ = bye(r);
        }
        // After an early leave, every other may be waiting for this rank: each is
        // looked at again just before (one that has gone said goodbye, and a
        // connection to it would be refused).
        for r in (0..self.size).filter(|&r| !self.quiet.get() && !net.contacted(r)) {
            self.progress();
            if there(r) {
                let _ = bye(r);
            }
        }
        self.settle_datagrams(super::datagram::ACK_DELAY * 2);
        let since = Instant::now();
        while !self.pending.borrow().is_empty() && since.elapsed() < Duration::from_secs(5) {
            self.progress();
        }
        let p = sys::ucp_request_param_t::empty();
        // SAFETY: a live worker.
        let req = unsafe { (self.net.ucp.ucp_worker_flush_nbx)(self.net.worker, &p) };
        let look = || super::datagram::look_at_leaving(&self.net, &self.shared);
        let _ = self.net.wait_with(req, Duration::from_secs(5), look);
        if !self.net.is_left_to_exit() {
            self.linger();
        }
    }
}

impl UcxConduit {
    /// Progresses the worker until it has been idle for [`LINGER`] (at most a second):
    /// a connection a peer opened at the very end (the job's end message down its
    /// tree) may still be completing its set-up here, UCX replying on it as it
    /// progresses, and UCX 1.13 asserts when a worker is destroyed under such a reply.
    fn linger(&self) {
        let since = Instant::now();
        let mut idle = Instant::now();
        while idle.elapsed() < LINGER && since.elapsed() < Duration::from_secs(1) {
            if pump(&self.net, &self.shared, auth::OWN) {
                idle = Instant::now();
            } else {
                self.net.sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Conduit for UcxConduit {
    type Frame<'a> = MemFrame<'a>;
    type Interrupts = UcxInterrupts;

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn caps(&self) -> &Caps {
        self.me.caps()
    }

    fn take_interrupts(&mut self) -> Option<UcxInterrupts> {
        let rx = self.me.take_interrupts()?;
        Some(UcxInterrupts::new(
            rx,
            self.net.clone(),
            self.shared.clone(),
            self.waker.handle(),
        ))
    }

    fn try_send(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> Result<(), ConduitError> {
        self.send_frame(dest, ch, msg, Kind::Medium, 0)
    }

    fn try_send_long(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        offset: usize,
    ) -> Result<(), ConduitError> {
        self.send_frame(dest, ch, msg, Kind::Long, offset)
    }

    fn try_send_tag_on(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        self.send_frame(dest, ch, msg, Kind::TagOn, 0)
    }

    fn segment(&self) -> (NonNull<u8>, usize) {
        (self.segment.base(), self.segment_bytes)
    }

    // Frames already in the local queues are served first: progress (a system call
    // over tcp) only when they are empty, so that no extra call sits between a frame's
    // arrival and its handler.
    fn peek(&self, ch: Channel) -> Result<Option<MemFrame<'_>>, ConduitError> {
        if let Some(f) = self.me.peek(ch)? {
            return Ok(Some(f));
        }
        self.progress();
        self.me.peek(ch)
    }

    fn drain<E, F>(&self, ch: Channel, budget: usize, mut f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        match self.me.drain(ch, budget, &mut f)? {
            0 => {
                self.progress();
                self.me.drain(ch, budget, f)
            }
            n => Ok(n),
        }
    }

    fn arm_arrival(&self, set: &PollSet) -> Result<Arming<'_>, ConduitError> {
        // A worker that moved data (puts or gets this rank serves, over tcp, by
        // progressing) keeps its rank awake: a sleep per arrival would cost a wake-up.
        if self.progress() {
            return Ok(Arming::Ready);
        }
        let armed = match self.me.arm_arrival(set)? {
            Arming::Armed(a) => a,
            other => return Ok(other),
        };
        // SAFETY: a live worker.
        if unsafe { (self.net.ucp.ucp_worker_arm)(self.net.worker) } != sys::UCS_OK {
            self.me.disarm_arrival(set, armed);
            return Ok(Arming::Ready); // events wait: progress first
        }
        self.waker.arm();
        Ok(Arming::Armed(armed))
    }

    fn disarm_arrival(&self, set: &PollSet, armed: Armed<'_>) {
        self.waker.disarm();
        self.me.disarm_arrival(set, armed);
    }

    fn put_nb(&self, dest: Rank, offset: usize, data: &[u8]) -> Result<Started, ConduitError> {
        self.put(dest, offset, data)
    }

    unsafe fn put_nb_borrowed(
        &self,
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.put_borrowed(dest, offset, data, len) }
    }

    unsafe fn get_nb(
        &self,
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.get(src, offset, buf, len) }
    }

    fn atomic_nb(&self, dest: Rank, offset: usize, op: AtomicOp) -> Result<Started, ConduitError> {
        self.atomic(dest, offset, op)
    }

    fn op_test(&self, op: OpToken) -> Result<Option<u64>, ConduitError> {
        self.test(op)
    }

    fn flush(&self) -> Result<(), ConduitError> {
        self.flush_all()
    }

    fn poll_set(&self, channels: &[Channel]) -> Result<PollSet, ConduitError> {
        self.me.poll_set(channels)
    }

    fn one_poll(&self, set: &PollSet) -> Result<Option<(Channel, MemFrame<'_>)>, ConduitError> {
        self.progress();
        self.me.one_poll(set)
    }

    fn dropped(&self, ch: Channel) -> u64 {
        self.me.dropped(ch)
    }

    fn faults(&self) -> Faults {
        self.me.faults()
    }

    fn record_fault(&self, fault: Fault) {
        self.me.record_fault(fault);
    }

    fn allgather(&self, mine: u64) -> Result<Vec<u64>, ConduitError> {
        self.exchange(mine)
    }

    fn barrier(&self) -> Result<(), ConduitError> {
        self.exchange(0).map(drop)
    }

    fn check_peers(&self) -> Result<(), ConduitError> {
        // UCX learns of a peer's end (its connections closing) only while progressing.
        self.progress();
        self.boot.check_peers()?;
        let failed = self.shared.failed.lock().unwrap_or_else(|e| e.into_inner());
        match failed
            .iter()
            .enumerate()
            .find_map(|(r, f)| f.clone().map(|f| (r, f)))
        {
            Some((rank, cause)) => Err(ConduitError::PeerDead { rank, cause }),
            None => Ok(()),
        }
    }

    fn peer_left(&self, rank: Rank) -> bool {
        self.progress();
        self.shared.has_left(rank)
    }

    fn contacted(&self, peer: Rank) -> bool {
        // A frame waiting in a batch has not been sent yet: it goes first.
        self.send_batches();
        self.net.contacted(peer)
    }

    fn quiescent(&self) {
        self.quiet.set(true);
        // The process may exit next: what this rank took is acknowledged now.
        if let Some(d) = self.net.datagrams() {
            d.acknowledge(true);
        }
        self.linger();
        if super::exit_follows() {
            self.net.leave_to_exit();
        }
    }
}
