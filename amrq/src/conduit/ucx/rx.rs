//! The receive side of a rank's UCX conduit: UCX's Active Message callbacks put each
//! frame into the rank's *local queues*, so that everything the layers above see of a
//! queue (peek, drain, One-poll, priorities, permissions, Long and Tag-On payloads, the
//! interrupt view) is the ring conduit's own code, exactly as on `shm`.
//!
//! The local queues are a heap region of this rank's rings alone
//! ([`RegionLayout::receiver`]): this rank's receiver endpoint reads them, and frames
//! from rank `s` are pushed through the *inlet*'s send side to `s`, whose permissions
//! and checks are `s`'s ([`MemConduit::inlet`]). Credits keep the network from overrunning them: the sender follows each
//! ring's tail with [`tail_after`](crate::conduit::ring::tail_after), the receiver
//! returns the ring's head as it moves; a shared ring gives each sender a share and
//! returns each frame's charge once the head has passed it. A frame that still finds
//! no room (a shared ring's pads) waits in an overflow queue, in order.

use super::auth::{Auth, Refused};
use super::wire::{self, Kind, TAG_ON_FREED};
use crate::conduit::mem::{MemConduit, RegionLayout};
use crate::conduit::ring::{frame_slots, tail_after, RingMemory};
use crate::conduit::{Channel, Conduit, ConduitError, Fault, FaultKind, Message, Rank};
use std::collections::{BTreeMap, VecDeque};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A frame that found its ring full, kept until there is room.
struct Held {
    head: wire::FrameHead,
    args: Vec<u64>,
    payload: Vec<u8>,
}

/// What the senders of this rank know of their receivers' room, updated by credits.
#[derive(Debug)]
pub struct Credits {
    /// Per (channel × ranks + destination): the receiver's ring head (per-sender
    /// rings), or the charges it returned (shared rings).
    pub rings: Box<[AtomicU64]>,
    /// Per destination: Tag-On blocks it freed, in all.
    pub tag_on_freed: Box<[AtomicU64]>,
}

/// A sender's charge for one frame on a shared ring: its slots, and the largest pad
/// that can precede them.
pub fn shared_charge(nargs: usize, len: usize) -> u64 {
    2 * frame_slots(nargs + 1, len) - 1
}

/// Per (channel, source) of the local queues.
#[derive(Default)]
struct RingCredit {
    /// Where the inlet has pushed the source's frames to (per-sender rings).
    tail: u64,
    /// What was last returned: a head, or for shared rings the charges in all.
    returned: u64,
    /// Shared rings: the charges last sent.
    sent: u64,
    /// Frames that found the ring full, in order.
    held: VecDeque<Held>,
    /// Its sender found no room: return what is consumed, however little.
    wanted: bool,
    /// In [`Local::dirty`].
    listed: bool,
}

/// The local queues and their bookkeeping (behind the mutex of [`Shared`]).
pub struct Local {
    me: Rank,
    size: usize,
    layout: RegionLayout,
    base: NonNull<u8>,
    /// The send sides frames from each source are pushed through.
    inlet: MemConduit,
    interrupt_channel: Option<Channel>,
    rings: Vec<RingCredit>,
    /// Frames held in all the rings' overflow queues.
    held: usize,
    /// Rings to look at for credits to return (channel × ranks + source), each once:
    /// a progress call looks at these, not at every ring (see [`Local::list`]).
    dirty: Vec<usize>,
    /// `dirty`'s other buffer: `credits_due` reads one while it fills the other, so
    /// that a progress call allocates nothing.
    dirty_spare: Vec<usize>,
    /// The shared channels.
    shared_channels: Vec<Channel>,
    /// Per shared channel: (end of a frame in the ring, its source, its charge).
    shared_log: Vec<VecDeque<(u64, Rank, u64)>>,
    /// Per source: Tag-On blocks delivered and not yet returned; returned in all.
    tag_on_out: Vec<(u64, u64)>,
    /// Tag-On blocks delivered and not yet returned, from all sources: while none
    /// are, a progress call does not look at the pools.
    tag_on_out_total: u64,
    /// Credits booked that could not be sent, or wait for their peer to ask: they go
    /// with the next ones (one per peer and kind).
    unsent: Vec<Due>,
    /// Per source: it asked for credits (`AM_WANT`) and has not been sent all it
    /// asked for (a ring still `wanted`, or Tag-On blocks).
    asked: Vec<bool>,
    /// Per source: it asked for Tag-On blocks, none freed since.
    tag_on_wanted: Vec<bool>,
    /// Setup collectives' messages: (epoch, step, source) → values.
    pub coll: BTreeMap<(u64, u64, Rank), Vec<u64>>,
}

// SAFETY: the inlet and the region pointer are only used under the mutex of
// `Shared`; the region is kept alive by the inlet's owner handle.
unsafe impl Send for Local {}

/// What the UCX callbacks reach: the local queues, the credits, and who said goodbye
/// or failed.
pub struct Shared {
    pub me: Rank,
    pub local: Mutex<Local>,
    pub credits: Credits,
    pub byes: Box<[AtomicBool]>,
    pub failed: Mutex<Vec<Option<String>>>,
    pub faults: crate::conduit::FaultLog,
    /// The job's bootstrap and the transports asked for, to name a peer this rank
    /// cannot reach (set when it connects).
    pub reach: std::sync::OnceLock<(crate::bootstrap::Boot, String)>,
    /// The keys that seal and open every message.
    pub auth: Arc<Auth>,
    /// Per source: the datagrams taken from it (`datagram`).
    pub numbered: super::datagram::Numbered,
    /// Per peer: it sent here over a connection (`datagram`).
    pub reached: super::datagram::Reached,
}

/// True if the MAC of message `id` with header body `body` covers its data: all but
/// a Long frame's payload, bound by its length only.
fn covers(id: u32, body: &[u8]) -> bool {
    let long = wire::words(body).nth(1).and_then(Kind::of) == Some(Kind::Long);
    id != wire::AM_FRAME || !long
}

pub(super) fn fault(source: Option<Rank>, channel: Channel, kind: FaultKind) -> Fault {
    Fault {
        source,
        channel,
        kind,
    }
}

impl Shared {
    /// The receive side of rank `me`: `inlet` pushes frames into its queues, the
    /// region `base` of `layout`.
    pub fn new(
        me: Rank,
        layout: RegionLayout,
        base: NonNull<u8>,
        inlet: MemConduit,
        faults: crate::conduit::FaultLog,
        auth: Auth,
    ) -> Self {
        let size = inlet.size();
        let channels = layout.channels();
        let interrupt_channel = inlet.caps().interrupt_channel;
        let zeros = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        Shared {
            me,
            local: Mutex::new(Local {
                me,
                size,
                base,
                inlet,
                interrupt_channel,
                rings: (0..channels * size)
                    .map(|_| RingCredit::default())
                    .collect(),
                held: 0,
                dirty: Vec::new(),
                dirty_spare: Vec::new(),
                shared_channels: (0..channels).filter(|&c| layout.is_shared(c)).collect(),
                shared_log: vec![VecDeque::new(); channels],
                tag_on_out: vec![(0, 0); size],
                tag_on_out_total: 0,
                unsent: Vec::new(),
                asked: vec![false; size],
                tag_on_wanted: vec![false; size],
                coll: BTreeMap::new(),
                layout,
            }),
            credits: Credits {
                rings: zeros(channels * size),
                tag_on_freed: zeros(size),
            },
            byes: (0..size).map(|_| AtomicBool::new(false)).collect(),
            failed: Mutex::new(vec![None; size]),
            faults,
            reach: std::sync::OnceLock::new(),
            auth: Arc::new(auth),
            numbered: super::datagram::Numbered::new(size),
            reached: (0..size).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// The local queues (a poisoned lock is still usable: every update is complete).
    pub fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes an arrived message `id` (over UCX, or as a datagram) if the MAC proves the
    /// sender it names: into the local queues, or the conduit's own bookkeeping.
    /// Returns the sender it proved; `rndv`: the data was not sent eagerly, which this
    /// conduit never does.
    pub fn deliver(&self, id: u32, header: &[u8], data: &[u8], rndv: bool) -> Option<Rank> {
        let (header, source) = self.proven(id, header, data)?;
        match id {
            wire::AM_BATCH => self.on_batch(header, data, rndv),
            wire::AM_COLL => self.on_coll(header, data),
            wire::AM_FRAME => self.on_frame(header, data, rndv),
            _ => self.on_header(id, header),
        }
        Some(source)
    }

    /// The body of an arrived message `id` (its header without the MAC's trailer) and
    /// its sender if the MAC proves the sender it names (see `auth`); a refused one is
    /// recorded as a fault naming the rank it claims, and dropped.
    fn proven<'a>(&self, id: u32, header: &'a [u8], data: &[u8]) -> Option<(&'a [u8], Rank)> {
        self.refusal(self.auth.open(id, header, data, |b| covers(id, b)))
    }

    /// The sender of a message `id` that may have come before (sent again), if its
    /// MAC proves it; a refused one is recorded as in [`Shared::proven`].
    pub fn vouched(&self, id: u32, header: &[u8], data: &[u8]) -> Option<Rank> {
        let vouched = self.auth.vouch(id, header, data, |b| covers(id, b));
        self.refusal(vouched.map(|r| (&[][..], r))).map(|(_, r)| r)
    }

    /// What was proven, or `None` with why not recorded as a fault.
    fn refusal<'a>(&self, opened: Result<(&'a [u8], Rank), Refused>) -> Option<(&'a [u8], Rank)> {
        match opened {
            Ok(proven) => Some(proven),
            Err(Refused::Malformed) => {
                let what = "a UCX message too short for a MAC, or naming a sender outside the job";
                self.faults
                    .record(fault(None, 0, FaultKind::BadRuntimeMessage { what }));
                None
            }
            Err(Refused::Unproven(claimed)) => {
                self.faults
                    .record(fault(Some(claimed), 0, FaultKind::Unproven));
                None
            }
        }
    }

    /// A frame arrived (the AM callback, its header proven); `rndv`: its payload was
    /// not sent eagerly, which this conduit never does.
    fn on_frame(&self, header: &[u8], payload: &[u8], rndv: bool) {
        let parsed = wire::read_frame(header).filter(|_| !rndv);
        let Some((head, args, nargs)) = parsed else {
            let what = "a UCX frame header amrq does not write";
            self.faults
                .record(fault(None, 0, FaultKind::BadRuntimeMessage { what }));
            return;
        };
        self.local()
            .arrived(&self.faults, head, &args[..nargs], payload);
    }

    /// A batch of frames arrived (the AM callback, its header proven): each goes into
    /// the local queues in order, as if it had come alone. An entry this conduit does
    /// not write is a fault recorded, and the entries around it still arrive.
    fn on_batch(&self, header: &[u8], data: &[u8], rndv: bool) {
        let size = self.byes.len() as u64;
        let source = wire::words(header)
            .next()
            .filter(|&s| header.len() == 8 && s < size && !rndv);
        let Some(source) = source else {
            let what = "a UCX batch header amrq does not write";
            self.faults
                .record(fault(None, 0, FaultKind::BadRuntimeMessage { what }));
            return;
        };
        let mut local = self.local();
        for entry in wire::Batch::new(source as u32, data) {
            match entry {
                Ok((head, args, nargs, payload)) => {
                    local.arrived(&self.faults, head, &args[..nargs], payload)
                }
                Err(()) => {
                    let what = "a frame in a UCX batch amrq does not write";
                    let f = fault(
                        Some(source as Rank),
                        0,
                        FaultKind::BadRuntimeMessage { what },
                    );
                    self.faults.record(f);
                }
            }
        }
    }

    /// One of the conduit's own messages arrived (AM id `id`, its header proven).
    fn on_header(&self, id: u32, header: &[u8]) {
        match id {
            wire::AM_CREDIT => self.on_credit(header),
            wire::AM_BYE => self.on_bye(header),
            wire::AM_WANT => self.on_want(header),
            _ => {}
        }
    }

    /// A credit arrived.
    fn on_credit(&self, header: &[u8]) {
        let w: Vec<u64> = wire::words(header).collect();
        let (Some(&src), Some(&what), Some(&value)) = (w.first(), w.get(1), w.get(2)) else {
            return;
        };
        let size = self.byes.len() as u64;
        let slot = if what == TAG_ON_FREED {
            self.credits.tag_on_freed.get(src as usize)
        } else {
            self.credits
                .rings
                .get((what.saturating_mul(size).saturating_add(src)) as usize)
                .filter(|_| src < size)
        };
        // Credits only grow: a late one never takes room back.
        // ORDERING: Relaxed: a credit publishes no data, only room in the peer's ring.
        if let Some(a) = slot {
            a.fetch_max(value, Ordering::Relaxed);
        }
    }

    /// A sender asks for the credits of its ring of a channel.
    fn on_want(&self, header: &[u8]) {
        let w: Vec<u64> = wire::words(header).collect();
        if let (Some(&src), Some(&ch)) = (w.first(), w.get(1)) {
            self.local().want(src, ch);
        }
    }

    /// A round of a setup collective arrived: its source, epoch and round in the
    /// header, the values it passes on in the data.
    fn on_coll(&self, header: &[u8], data: &[u8]) {
        let w: Vec<u64> = wire::words(header).collect();
        if let (Some(&src), Some(&epoch), Some(&round)) = (w.first(), w.get(1), w.get(2)) {
            let values = wire::words(data).collect();
            self.local()
                .coll
                .insert((epoch, round, src as Rank), values);
        }
    }

    /// A peer said goodbye: it sends nothing more.
    fn on_bye(&self, header: &[u8]) {
        if let Some(src) = wire::words(header).next() {
            self.left(src as usize);
        }
    }

    /// `peer` has left the job: it sends nothing more.
    pub fn left(&self, peer: Rank) {
        // ORDERING: Release: the frames before its goodbye were pushed into the local
        // queues; pairs with the Acquire load in `has_left`.
        if let Some(b) = self.byes.get(peer) {
            b.store(true, Ordering::Release);
        }
    }

    /// True once `rank` said goodbye.
    pub fn has_left(&self, rank: Rank) -> bool {
        // ORDERING: Acquire pairs with the Release store in `on_bye`.
        self.byes
            .get(rank)
            .is_some_and(|b| b.load(Ordering::Acquire))
    }

    /// True once `rank`'s endpoint failed.
    pub fn has_failed(&self, rank: Rank) -> bool {
        let f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        f.get(rank).is_some_and(Option::is_some)
    }

    /// Why the endpoint to `peer` failed, as UCX says `why`: a peer never heard from
    /// is one this rank cannot reach (named with both hosts and the transports).
    pub fn lost(&self, peer: Rank, why: &str) -> String {
        match self.reach.get() {
            Some((boot, transports)) if !self.auth.heard_from(peer) => {
                super::start::unreachable(boot, self.me, peer, transports, why)
            }
            _ => format!("its UCX endpoint failed: {why}"),
        }
    }

    /// An endpoint failed: its peer is dead unless it said goodbye first.
    pub fn on_error(&self, peer: Rank, why: String) {
        if !self.has_left(peer) {
            let mut f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(slot) = f.get_mut(peer) {
                slot.get_or_insert(why);
            }
        }
    }
}

impl Local {
    /// The inlet's side of `src`, and its checks, take a frame into the local queues,
    /// or it waits behind others from `src` on its ring.
    fn arrived(
        &mut self,
        faults: &crate::conduit::FaultLog,
        head: wire::FrameHead,
        args: &[u64],
        payload: &[u8],
    ) {
        let (src, ch) = (head.source as Rank, head.channel as Channel);
        if src >= self.size || src == self.me {
            let what = "a UCX frame naming a sender outside the job";
            faults.record(fault(None, ch, FaultKind::BadRuntimeMessage { what }));
            return;
        }
        let Some(key) = self.ring_key(&head) else {
            let what = "a UCX frame for a channel this job does not have";
            faults.record(fault(Some(src), ch, FaultKind::BadRuntimeMessage { what }));
            return;
        };
        if !self.rings[key].held.is_empty() {
            self.hold(key, head, args, payload);
            return;
        }
        if let Err(ConduitError::Busy) = self.push(faults, key, &head, args, payload) {
            self.hold(key, head, args, payload);
        }
    }

    /// A frame to this rank itself: straight through the inlet (no credits).
    pub fn to_self(
        &self,
        kind: Kind,
        ch: Channel,
        msg: &Message<'_>,
        offset: usize,
    ) -> Result<(), ConduitError> {
        through(&self.inlet, self.me, kind, ch, msg, offset)
    }

    /// The (channel × ranks + source) of the ring a frame goes into: a frame flagged
    /// interrupt travels on the interrupt channel.
    fn ring_key(&self, head: &wire::FrameHead) -> Option<usize> {
        let ch = if head.kind == Kind::Medium && head.flags & Message::INTERRUPT != 0 {
            self.interrupt_channel.unwrap_or(head.channel as Channel)
        } else {
            head.channel as Channel
        };
        (ch < self.layout.channels()).then(|| ch * self.size + head.source as usize)
    }

    fn hold(&mut self, key: usize, head: wire::FrameHead, args: &[u64], payload: &[u8]) {
        self.rings[key].held.push_back(Held {
            head,
            args: args.to_vec(),
            payload: payload.to_vec(),
        });
        self.held += 1;
        self.list(key);
    }

    /// Puts ring `key` in [`Local::dirty`] unless it is there.
    fn list(&mut self, key: usize) {
        let r = &mut self.rings[key];
        if !r.listed {
            r.listed = true;
            self.dirty.push(key);
        }
    }

    /// Pushes a frame through the inlet's side of its source; `Busy` if its ring is full. Any other
    /// refusal is the sender's fault, recorded.
    fn push(
        &mut self,
        faults: &crate::conduit::FaultLog,
        key: usize,
        head: &wire::FrameHead,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), ConduitError> {
        let (src, ch) = (head.source as Rank, head.channel as Channel);
        let msg = Message {
            tag: head.tag,
            flags: head.flags,
            args,
            payload,
        };
        let offset = head.offset as usize;
        let sent = through(&self.inlet, src, head.kind, ch, &msg, offset);
        match sent {
            Ok(()) => {
                self.pushed(key, head.kind, args.len(), payload.len());
                Ok(())
            }
            Err(ConduitError::Busy) => Err(ConduitError::Busy),
            Err(e) => {
                let kind = match e {
                    ConduitError::NotPermitted { .. } | ConduitError::InterruptChannel { .. } => {
                        FaultKind::NotPermitted
                    }
                    ConduitError::OutOfSegment { .. } => FaultKind::OutOfSegment,
                    ConduitError::TagOnTooLarge { .. } => FaultKind::OutsidePool,
                    _ => FaultKind::BadRuntimeMessage {
                        what: "a UCX frame its sender's own checks refuse",
                    },
                };
                faults.record(fault(Some(src), ch, kind));
                Err(e)
            }
        }
    }

    /// Books a frame pushed into ring `key`, for the credits to return.
    fn pushed(&mut self, key: usize, kind: Kind, nargs: usize, len: usize) {
        let (ch, src) = (key / self.size, key % self.size);
        // What the frame takes in the ring: Long and Tag-On frames carry two words.
        let (nargs, len) = match kind {
            Kind::Medium => (nargs, len),
            Kind::Long | Kind::TagOn => (nargs, 16),
        };
        if self.layout.is_shared(ch) {
            // SAFETY: a shared channel of this layout, in the region the inlet keeps.
            let tail = unsafe { self.layout.shared_tail(self.base, ch, self.me) };
            let end = tail.load(Ordering::Relaxed);
            self.shared_log[ch].push_back((end, src, shared_charge(nargs, len)));
        } else {
            let hidden = usize::from(Some(ch) == self.interrupt_channel);
            let r = &mut self.rings[key];
            r.tail = tail_after(r.tail, self.layout.slots(ch), nargs + hidden, len);
        }
        if kind == Kind::TagOn {
            self.tag_on_out[src].0 += 1;
            self.tag_on_out_total += 1;
        }
        self.list(key);
    }

    /// Moves held frames into rings that have room again, in order.
    pub fn retry_held(&mut self, faults: &crate::conduit::FaultLog) {
        for key in 0..self.rings.len() {
            while let Some(h) = self.rings[key].held.pop_front() {
                if let Err(ConduitError::Busy) =
                    self.push(faults, key, &h.head, &h.args, &h.payload)
                {
                    self.rings[key].held.push_front(h);
                    break;
                }
                self.held -= 1;
            }
        }
    }

    /// True if frames wait for room.
    pub fn holds(&self) -> bool {
        self.held > 0
    }

    /// Source `src` found no room in its ring of channel `ch`, or no free Tag-On
    /// block here (`ch` = [`TAG_ON_FREED`]).
    pub fn want(&mut self, src: u64, ch: u64) {
        let src = src as usize;
        if src >= self.size {
            return;
        }
        self.asked[src] = true;
        let Some(ch) = usize::try_from(ch)
            .ok()
            .filter(|&c| c < self.layout.channels())
        else {
            // With no block out, what was freed is booked already (sent now it asked).
            self.tag_on_wanted[src] |= ch == TAG_ON_FREED && self.tag_on_out[src].0 > 0;
            return;
        };
        let key = ch * self.size + src;
        self.rings[key].wanted = true;
        self.list(key);
    }

    /// The credits due to peers, booked as returned: send each (see [`Due`]), and hand
    /// back to [`Local::unsent`] those that could not go now. A credit to a peer this
    /// rank has no endpoint to (`connected` is false) waits until the peer asks for
    /// it: connecting to a peer that may just have left the job is never worth it (a
    /// sender that needs room asks, and is there to be connected to). (No UCX call is
    /// made under the lock of the local queues: the worker's own lock is held around
    /// the callbacks that take it.)
    pub fn credits_due(&mut self, connected: impl Fn(Rank) -> bool) -> Vec<Due> {
        let due = self.credits_booked();
        let (ready, waiting): (Vec<Due>, Vec<Due>) = due
            .into_iter()
            .partition(|d| connected(d.peer) || self.asked[d.peer]);
        waiting.iter().for_each(|d| self.unsent(d));
        // A peer that asked for a ring whose frames are not consumed yet is still
        // owed that credit: it does not ask twice for the same room. A credit that
        // returns all a ring has consumed answers its ask.
        for d in &ready {
            let key = usize::try_from(d.what)
                .ok()
                .filter(|&ch| ch < self.layout.channels())
                .map(|ch| ch * self.size + d.peer);
            if let Some(r) = key.map(|k| &mut self.rings[k]) {
                r.wanted &= r.returned != d.value;
            }
        }
        for d in &ready {
            self.asked[d.peer] = self.still_wanted(d.peer);
        }
        ready
    }

    /// True if `src` asked for room that no credit sent since gave it.
    fn still_wanted(&self, src: Rank) -> bool {
        self.tag_on_wanted[src]
            || (0..self.layout.channels()).any(|ch| self.rings[ch * self.size + src].wanted)
    }

    /// Every credit due now, booked as returned, with the unsent ones.
    fn credits_booked(&mut self) -> Vec<Due> {
        let mut due = std::mem::take(&mut self.unsent);
        // Shared rings: a frame's charge comes back once the head has passed it.
        for i in 0..self.shared_channels.len() {
            let ch = self.shared_channels[i];
            if self.shared_log[ch].is_empty() {
                continue;
            }
            // SAFETY: a ring of this layout, in the region the inlet keeps alive; a
            // shared channel's ring is its receiver's only one.
            let head = unsafe { self.layout.ring(self.base, ch, self.me, 0) }
                .head()
                // ORDERING: Relaxed: the head only says how far the consumer got; the
                // peer reuses the room only after this credit crosses the network.
                .load(Ordering::Relaxed);
            while let Some(&(end, src, charge)) = self.shared_log[ch].front() {
                if (head.wrapping_sub(end) as i64) < 0 {
                    break;
                }
                self.rings[ch * self.size + src].returned += charge;
                self.shared_log[ch].pop_front();
                self.list(ch * self.size + src);
            }
        }
        let spare = std::mem::take(&mut self.dirty_spare);
        let dirty = std::mem::replace(&mut self.dirty, spare);
        for &key in &dirty {
            self.rings[key].listed = false;
            let (ch, src) = (key / self.size, key % self.size);
            if self.layout.is_shared(ch) {
                let r = &mut self.rings[key];
                if r.returned != r.sent {
                    due.push(Due {
                        peer: src,
                        what: ch as u64,
                        value: r.returned,
                    });
                    r.sent = r.returned;
                    r.wanted = false;
                }
                continue; // listed again when a charge comes back
            }
            // SAFETY: a ring of this layout, in the region the inlet keeps alive.
            let ring = unsafe { self.layout.ring(self.base, ch, self.me, src) };
            // ORDERING: Relaxed: as above.
            let head = ring.head().load(Ordering::Relaxed);
            let r = &mut self.rings[key];
            let unreturned = head.wrapping_sub(r.returned);
            // Returned in batches (a credit is a message of its own on the network),
            // or at once when the sender found no room (it asked: `want`).
            let batch = (self.layout.slots(ch) / 4).max(1);
            if unreturned >= batch || (r.wanted && unreturned != 0) {
                r.wanted = false;
                due.push(Due {
                    peer: src,
                    what: ch as u64,
                    value: head,
                });
                r.returned = head;
            }
            if r.returned != r.tail || !r.held.is_empty() || r.wanted {
                self.list(key);
            }
        }
        self.dirty_spare = dirty;
        self.dirty_spare.clear();
        if self.tag_on_out_total > 0 {
            self.tag_on_credits(&mut due);
        }
        due
    }

    /// The Tag-On blocks each source's frames held and the handlers have freed.
    fn tag_on_credits(&mut self, due: &mut Vec<Due>) {
        for src in 0..self.size {
            let (out, back) = self.tag_on_out[src];
            if out == 0 {
                continue;
            }
            // SAFETY: the pool of `src`'s blocks here, in the region the inlet keeps.
            let pool = unsafe { self.layout.tag_on_pool(self.base, self.me, src) };
            let in_use = (0..pool.buffers())
                // ORDERING: Relaxed: counting only; the sender reuses a block after
                // this credit crosses the network.
                .filter(|&i| pool.flag(i).is_some_and(|f| f.load(Ordering::Relaxed) != 0))
                .count() as u64;
            let freed = out.saturating_sub(in_use);
            if freed > 0 {
                due.push(Due {
                    peer: src,
                    what: TAG_ON_FREED,
                    value: back + freed,
                });
                self.tag_on_out[src] = (out - freed, back + freed);
                self.tag_on_wanted[src] = false;
                self.tag_on_out_total -= freed;
            }
        }
    }

    /// A credit that could not be sent now: it goes with the next ones. Its value is
    /// a running total and the peer keeps the largest it has seen, so sending it late,
    /// or after a newer one, is harmless; undoing its booking instead was not (a
    /// Tag-On frame pushed by the progress thread between the booking and the undo
    /// was forgotten, and with it a block the sender would never get back).
    pub fn unsent(&mut self, d: &Due) {
        match self
            .unsent
            .iter_mut()
            .find(|u| (u.peer, u.what) == (d.peer, d.what))
        {
            Some(u) => u.value = u.value.max(d.value),
            None => self.unsent.push(*d),
        }
    }
}

/// Pushes a frame of `kind` from `src` into the queues `inlet` fills.
fn through(
    inlet: &MemConduit,
    src: Rank,
    kind: Kind,
    ch: Channel,
    msg: &Message<'_>,
    offset: usize,
) -> Result<(), ConduitError> {
    match kind {
        Kind::Medium => inlet.try_send(src, ch, msg),
        Kind::Long => inlet.try_send_long(src, ch, msg, offset),
        Kind::TagOn => inlet.try_send_tag_on(src, ch, msg),
    }
}

/// A credit due to a peer: `what` (a channel, or [`TAG_ON_FREED`]) and its value.
#[derive(Debug, Clone, Copy)]
pub struct Due {
    /// The peer it goes to.
    pub peer: Rank,
    /// A channel, or [`TAG_ON_FREED`].
    pub what: u64,
    /// The ring's head, the charges returned, or the blocks freed, in all.
    pub value: u64,
}

#[cfg(test)]
mod tests;
