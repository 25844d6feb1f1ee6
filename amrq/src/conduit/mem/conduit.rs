//! The [`Conduit`] implementation of the ring conduit: sends (checks, then a push on
//! the ring to the destination), receives (the round-robin scan, then the checks a
//! frame passes before it is handed out) and One-poll, whose arming of an idle set's
//! doorbell bits also serves other pollers ([`Conduit::polled`]).

use super::channels::{with_hidden_word, RxChannel, RxRing, TxRing, FLAG_MOVED};
use super::frame::{close_ring, drop_frame, hidden_word, inline_pair, tag_on_payload};
use super::{MemConduit, MemFrame};
use crate::conduit::ring::{
    ExpressGate, FrameHeader, Look, Peeked, RingMemory, EXPRESS_ARGS, FLAG_LONG, FLAG_TAG_ON,
    MAX_ARGS, USER_FLAGS,
};
use crate::conduit::{
    Armed, Arming, AtomicOp, Caps, Channel, Conduit, ConduitError, ConduitSpec, Fault, FaultKind,
    Faults, Message, OpToken, PollSet, Rank, Started,
};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// Empty polls in a row before One-poll arms the doorbell: arming costs a locked
/// instruction, which a rank that polls often should not pay on every poll.
const ARM_AFTER: u32 = 32;
/// Where arming issues `membarrier` (~10 µs while a peer runs): ring looks (empty polls
/// × channels polled) in a row before One-poll arms: some 30–50 µs of idle polling on
/// the development VM, so that arming costs at most about a quarter of the idle time
/// before it. Arming after 32 polls, a receiver fed every few µs spent most of its time
/// in the system call.
const ARM_AFTER_LOOKS_HEAVY: usize = 8 << 10;
/// Empty polls in a row before `Am::poll`'s set is armed (where arming issues
/// `membarrier`, also `ARM_AFTER_LOOKS_HEAVY`): later than One-poll, because a program
/// that spins on `Am::poll` while it waits for a reply makes some 30–300 empty polls
/// per round trip, and an armed set costs the reply's sender an atomic on the
/// receiver's doorbell line, and the receiver two to disarm.
pub(super) const POLL_ARM_AFTER: u32 = 2 << 10;

/// What [`MemConduit::look_ready`] found: an Express frame of a plain ring (sender,
/// ring, frame, its slot), a ring whose frame needs [`MemConduit::take`]'s checks, or nothing.
enum Ready<'a> {
    Express(usize, &'a RxRing, Peeked, *const u8),
    Other(usize),
    None,
}

impl MemConduit {
    /// One-poll past the armed check of [`Conduit::one_poll`] (which has disarmed a set
    /// that rang): scan, and arm the set once idle long enough.
    #[inline]
    fn one_poll_scan(
        &self,
        set: &PollSet,
    ) -> Result<Option<(Channel, MemFrame<'_>)>, ConduitError> {
        let (armed, idle) = (self.one_poll_armed.get(), self.one_poll_idle.get());
        for &ch in &set.channels {
            if let Some(f) = self.peek(ch)? {
                self.one_poll_idle.set(0);
                return Ok(Some((ch, f)));
            }
        }
        let idle = idle.saturating_add(1);
        self.one_poll_idle.set(idle);
        if self.arm_if_idle(set, armed, idle, ARM_AFTER) {
            for &ch in &set.channels {
                if let Some(f) = self.peek(ch)? {
                    self.disarm(set, armed | set.bits);
                    return Ok(Some((ch, f)));
                }
            }
        }
        Ok(None)
    }

    /// [`Conduit::polled`] after `POLL_ARM_AFTER` empty polls in a row: arms the set.
    #[inline(never)]
    fn polled_idle(&self, set: &PollSet) {
        let (armed, idle) = (self.one_poll_armed.get(), self.one_poll_idle.get());
        let idle = idle.saturating_add(1);
        self.one_poll_idle.set(idle);
        if self.arm_if_idle(set, armed, idle, POLL_ARM_AFTER)
            && !set.channels.iter().all(|&ch| self.quiet(ch))
        {
            // A frame came before the arm: the look after it saw what the summary will
            // not tell.
            self.disarm(set, armed | set.bits);
        }
    }

    /// Arms `set` (all of whose channels ring the doorbell) if it was found empty
    /// `idle` times in a row, `after` at least (and, where arming issues `membarrier`,
    /// for `ARM_AFTER_LOOKS_HEAVY` ring looks). True if it armed it: the caller looks
    /// at the channels once more, and disarms if a frame is there.
    fn arm_if_idle(&self, set: &PollSet, armed: u64, idle: u32, after: u32) -> bool {
        // A front never arms: its frames come through two halves, which one word of its
        // own cannot tell (it sleeps on both instead: `arm_arrival`).
        if !set.all_notify || armed & set.bits == set.bits || idle < after || self.across.is_some()
        {
            return false;
        }
        let d = self.doorbell();
        let heavy = d.heavy.load(Ordering::Relaxed);
        if heavy & set.bits != 0 && (idle as usize) * set.channels.len() < ARM_AFTER_LOOKS_HEAVY {
            return false;
        }
        crate::conduit::doorbell::arm(&d.armed, None, set.bits, heavy);
        self.one_poll_armed.set(armed | set.bits);
        true
    }

    /// Disarms `set`, `armed` being the bits armed now: a sender rang it, or the look
    /// after arming found a frame.
    #[cold]
    #[inline(never)]
    fn disarm(&self, set: &PollSet, armed: u64) {
        let d = self.doorbell();
        d.armed.fetch_and(!set.bits, Ordering::Relaxed);
        d.summary.fetch_and(!set.bits, Ordering::Relaxed);
        self.one_poll_armed.set(armed & !set.bits);
        self.one_poll_idle.set(0);
    }

    /// The first ring of `chan` from the cursor on (round-robin) with a frame, in one
    /// look per ring (an empty look publishes the head if slots were read since, as
    /// the drains' do): an Express frame of a plain ring is handed out from that look
    /// after one test of its header (callgrind: 39 instructions fewer per enqueue and
    /// `read_queue` than `take`'s checks, 181 against 142; then 21 fewer than a test of
    /// the ring's readiness before a look, and the slot's address worked out again
    /// after it, 142.3 against 121.3), anything else goes through [`Self::take`].
    #[inline(always)]
    fn look_ready<'a>(&self, chan: &'a RxChannel) -> Ready<'a> {
        let n = chan.rings.len();
        let mut s = chan.cursor.get();
        for _ in 0..n {
            debug_assert!(s < n);
            // SAFETY: the cursor is always a ring's index (`took`, `looked_at` and the
            // drains set it only to one; a channel's rings never change), and so is
            // `s`, which wraps at the count.
            let r = unsafe { chan.rings.get_unchecked(s) };
            if r.gate.get() == ExpressGate::OPEN {
                let ring = r.ring;
                // SAFETY: only ring code runs while the consumer state is borrowed.
                match unsafe { r.cons.get() }.look(&ring) {
                    Look::Empty => {}
                    Look::Express(p) => {
                        // Its slot from the ring's copy, while it is in registers.
                        let slot = ring.slot_ptr(p.index(ring.nslots()));
                        return Ready::Express(s, r, p, slot);
                    }
                    Look::Other => return Ready::Other(s),
                }
            } else if r.ready() {
                return Ready::Other(s);
            }
            s = if s + 1 >= n { 0 } else { s + 1 };
        }
        Ready::None
    }

    /// The frame at the head of ring `s` of `chan`, which `look_ready` saw, checked and
    /// handed out; `None` if it was a pad, or a frame a correct peer never sends
    /// (dropped and recorded against its sender; a corrupt header closes the ring).
    /// It never fails: the `Result` is `peek`'s own return type, so that the frame is
    /// built in place where `peek` returns it (an `Option` here cost 33 instructions per
    /// enqueue and `read_queue` in `amrq-bench rq-loop` under callgrind, 282 against 249: the frame
    /// was copied). An Express frame of a plain ring does not come here: `peek` and the
    /// drains hand it out from their own look.
    #[inline(always)]
    pub(super) fn take<'a>(
        &'a self,
        chan: &'a RxChannel,
        s: usize,
        ch: Channel,
    ) -> Result<Option<MemFrame<'a>>, ConduitError> {
        let r = &chan.rings[s];
        let p = match r.cons.with(|c| c.take_ready(&r.ring)) {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(None),
            Err(detail) => {
                close_ring(&self.faults, chan, (s, ch), detail);
                return Ok(None);
            }
        };
        let source = if r.hidden {
            match self.hidden_word_checked(chan, r, s, &p) {
                Some(src) => src,
                None => {
                    let fault = (chan.sender(s), FaultKind::NotPermitted);
                    drop_frame(&self.faults, (chan, ch), r, &p, fault);
                    return Ok(None);
                }
            }
        } else if r.permitted.get() {
            r.source.get()
        } else {
            // A sender that may not send here bypassed its own check: never deliver.
            let fault = (chan.sender(s), FaultKind::NotPermitted);
            drop_frame(&self.faults, (chan, ch), r, &p, fault);
            return Ok(None);
        };
        match self.payload_of(chan, r, source, &p) {
            Ok(payload) => Ok(Some(MemFrame::out(chan, (r, s), source, p, payload))),
            Err(bad) => {
                self.undelivered(chan, (s, ch), source, &p, bad);
                Ok(None)
            }
        }
    }

    /// The sender of frame `p` of ring `s` of `chan`, whose first arg word is hidden,
    /// if that word is valid: on a shared ring it names a sender allowed here; on the
    /// interrupt channel, a channel this sender may send into. `None`: drop the frame.
    #[cold]
    #[inline(never)]
    fn hidden_word_checked(
        &self,
        chan: &RxChannel,
        r: &RxRing,
        s: usize,
        p: &Peeked,
    ) -> Option<Rank> {
        let word = hidden_word(r, p)?;
        let joined = !r.joined_senders.is_empty();
        if joined || !chan.shared_senders.is_empty() {
            let named = usize::try_from(word).ok()?;
            // A joined ring's list is in the numbering its senders use, a shared
            // channel's in the job's.
            if joined && r.joined_senders.get(named) != Some(&true) {
                return None;
            }
            let src = match &r.hidden_ranks {
                Some(ranks) => *ranks.get(named)?,
                None => named,
            };
            if joined {
                let taken = r.joined_taken.get(named)?;
                taken.set(taken.get() + 1);
                return Some(src);
            }
            return (chan.shared_senders.get(src) == Some(&true)).then_some(src);
        }
        if let Some(claims) = &r.own_claims {
            // The shared ring of a channel with own rings: senders named by host rank.
            let named = usize::try_from(word).ok()?;
            if claims.senders.get(named) != Some(&true) {
                return None;
            }
            return match &r.hidden_ranks {
                Some(ranks) => ranks.get(named).copied(),
                None => Some(named),
            };
        }

        let ch = usize::try_from(word).ok()?;
        let allowed = Some(ch) != self.caps.interrupt_channel // never carried twice
            && self.caps.channels.get(ch)?.senders.allows(s);
        allowed.then_some(r.source.get())
    }

    /// Checks a frame before it is handed out: a Long frame must name a range inside
    /// this rank's segment. Returns where its payload is.
    #[inline(always)]
    fn payload_of(
        &self,
        chan: &RxChannel,
        r: &RxRing,
        source: Rank,
        p: &Peeked,
    ) -> Result<(*const u8, usize), FaultKind> {
        let base = r.slot_of(p);
        // SAFETY: the consumer checked that the frame, payload included, lies in the ring.
        let inline = unsafe { base.add(p.payload_offset()) };
        if p.header.flags & (FLAG_LONG | FLAG_TAG_ON) == 0 {
            return Ok((inline, p.header.len as usize));
        }
        if p.header.flags & FLAG_MOVED == FLAG_MOVED {
            return Err(FaultKind::NotPermitted); // a move, not a payload (see `take`)
        }
        if p.header.flags & FLAG_TAG_ON != 0 {
            let Some(pool) = r.pool_for(chan, source) else {
                return Err(FaultKind::OutsidePool);
            };
            return tag_on_payload(pool, inline, p);
        }
        self.long_payload(inline, p)
    }

    #[cold]
    fn long_payload(&self, inline: *const u8, p: &Peeked) -> Result<(*const u8, usize), FaultKind> {
        let bad = FaultKind::OutOfSegment;
        let Some((offset, len)) = inline_pair(inline, p) else {
            return Err(bad);
        };
        match offset.checked_add(len) {
            Some(end) if end <= self.segment_bytes => {
                // SAFETY: offset + len ≤ segment length: inside this rank's segment.
                Ok((unsafe { self.segment().0.as_ptr().add(offset) }, len))
            }
            _ => Err(bad),
        }
    }

    /// The ring to `dest` on channel `ch` for a Long or Tag-On `msg`, after the checks
    /// every send makes (rank, channel, args, permission).
    pub(super) fn sender(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<&TxRing, ConduitError> {
        // No receive side of `ch` here: a front's, which sends through its cluster; no
        // send side: a receiver's.
        if dest >= self.size || ch >= self.rx.len() || ch >= self.tx_channels {
            return Err(self.check_send(dest, ch, msg.args.len(), msg.payload.len()));
        }
        let t = &self.tx[ch * self.size + dest];
        if msg.args.len() > t.max_args {
            return Err(self.check_send(dest, ch, msg.args.len(), msg.payload.len()));
        }
        if !t.permitted {
            return Err(self.not_permitted(ch));
        }
        Ok(t)
    }

    /// Sends a frame of channel `ch` flagged [`Message::INTERRUPT`] on `dest`'s
    /// interrupt channel, its first arg word naming `ch`. The caller checked `dest`,
    /// `ch` and this rank's permission for `ch`.
    #[cold]
    #[inline(never)]
    fn send_flagged(
        &self,
        dest: Rank,
        ch: Channel,
        header: FrameHeader,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        let (via, t) = self.flagged_ring(dest, ch, msg)?;
        let (words, n) = with_hidden_word(ch as u64, msg.args);
        if !t.push(header, &words[..n], msg.payload) {
            return Err(t.no_room(dest, via));
        }
        t.ring_doorbell();
        Ok(())
    }

    /// The interrupt channel and its ring to `dest` that carry `msg`, a frame of
    /// channel `ch` flagged [`Message::INTERRUPT`], if it fits them (one arg word names
    /// `ch`).
    #[cold]
    pub(super) fn flagged_ring(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<(Channel, &TxRing), ConduitError> {
        let via = self.flagged_refusal(ch, msg)?;
        if via >= self.tx_channels || dest >= self.size {
            return Err(self.check_send(dest, ch, msg.args.len(), msg.payload.len()));
        }
        Ok((via, &self.tx[via * self.size + dest]))
    }

    /// `send` through the cluster a front hands its calls to; without one, `refusal`.
    #[cold]
    #[inline(never)]
    pub(super) fn or_across<T>(
        &self,
        refusal: ConduitError,
        send: impl FnOnce(&crate::conduit::cluster::ClusterConduit) -> Result<T, ConduitError>,
    ) -> Result<T, ConduitError> {
        match &self.across {
            Some(a) => send(&a.cluster),
            None => Err(refusal),
        }
    }
}

impl Conduit for MemConduit {
    type Frame<'a> = MemFrame<'a>;
    type Interrupts = super::InterruptRx;

    fn take_interrupts(&mut self) -> Option<super::InterruptRx> {
        if let Some(a) = &mut self.across {
            return a.cluster.take_interrupts().map(super::InterruptRx::across);
        }
        self.interrupts_view()
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn caps(&self) -> &Caps {
        &self.caps
    }

    #[inline(always)]
    fn try_send(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> Result<(), ConduitError> {
        // The send side exists (every channel's, for each rank; none in a view that only
        // receives): `ch < tx.len()` first, so that the product cannot wrap.
        let ok = dest < self.size
            && ch < self.tx.len()
            && ch * self.size + dest < self.tx.len()
            && msg.args.len() <= MAX_ARGS
            && (msg.payload.is_empty() || msg.payload.len() <= self.caps.channels[ch].max_payload);
        if !ok {
            return Err(self.check_send(dest, ch, msg.args.len(), msg.payload.len()));
        }
        let t = &self.tx[ch * self.size + dest];
        let header = FrameHeader {
            tag: msg.tag,
            flags: msg.flags & USER_FLAGS,
            ..FrameHeader::default()
        };
        // One test admits the common send (permitted, this rank's own ring, few enough
        // args, not flagged); the others are told apart here.
        if msg.args.len() >= t.own_args_below.get() || msg.flags & Message::INTERRUPT != 0 {
            if !t.permitted {
                return Err(self.not_permitted(ch));
            }
            if msg.flags & Message::INTERRUPT != 0 {
                return self.send_flagged(dest, ch, header, msg);
            }
            if msg.args.len() > t.max_args {
                // the hidden word of a shared ring
                return Err(self.check_send(dest, ch, msg.args.len(), msg.payload.len()));
            }
        }
        if t.push(header, msg.args, msg.payload) {
            t.ring_doorbell();
            Ok(())
        } else {
            Err(t.no_room(dest, ch))
        }
    }

    /// A destination and channel in range, at most the six args an Express frame
    /// holds, a ring of this rank's own that it may send into (`own_args_below`, set
    /// up once, or when the ring moves to an own ring), room by the cached view of the
    /// head: the rest of `try_send`'s checks hold.
    #[inline(always)]
    fn try_send_quick(&self, dest: Rank, ch: Channel, tag: u16, args: &[u64]) -> bool {
        if dest >= self.size || ch >= self.tx_channels || args.len() > EXPRESS_ARGS {
            return false;
        }
        debug_assert_eq!(self.tx.len(), self.tx_channels * self.size);
        // SAFETY: `ch * size + dest < tx_channels * size`, which is `tx.len()`.
        let t = unsafe { self.tx.get_unchecked(ch * self.size + dest) };
        if args.len() >= t.own_args_below.get() {
            return false;
        }
        let header = FrameHeader {
            tag,
            ..FrameHeader::default()
        };
        if !t.push_express(header, args) {
            return false;
        }
        t.ring_doorbell();
        true
    }

    fn try_send_long(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        offset: usize,
    ) -> Result<(), ConduitError> {
        let t = match self.sender(dest, ch, msg) {
            Ok(t) => t,
            Err(e) => return self.or_across(e, |c| c.try_send_long(dest, ch, msg, offset)),
        };
        let len = msg.payload.len();
        self.in_segment(dest, offset, len)?;
        // A ring whose pair took an own ring moves there first (as every send does).
        t.settle();
        let to = self.segments[dest].as_ptr();
        // Room first (`push_pair`): the data is never written for a frame that cannot
        // follow.
        let write = || {
            // SAFETY: the range is inside `dest`'s segment (checked above), mapped here;
            // the source is a distinct slice. Concurrent writes to the same bytes by
            // other ranks are the application's protocol, as with any RMA.
            unsafe { std::ptr::copy_nonoverlapping(msg.payload.as_ptr(), to.add(offset), len) }
        };
        if t.push_pair(msg, FLAG_LONG, (offset, len), write) {
            Ok(())
        } else {
            Err(t.no_room(dest, ch))
        }
    }

    fn try_send_tag_on(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        let t = match self.sender(dest, ch, msg) {
            Ok(t) => t,
            Err(e) => return self.or_across(e, |c| c.try_send_tag_on(dest, ch, msg)),
        };
        let len = msg.payload.len();
        Self::fits_tag_on(t, len)?;
        // A ring moving to its own ring moves before the claim: the block must be of
        // the pool of the ring its frame goes into.
        t.settle();
        let pool = t.pool.get();
        let mut cursor = t.pool_cursor.get();
        let Some(i) = pool.claim(&mut cursor) else {
            return Err(t.no_room(dest, ch)); // every block still in the receiver's hands
        };
        let Some(block) = pool.block(i) else {
            return Err(ConduitError::Busy); // `claim` returns blocks of the pool: never
        };
        let write = || {
            // SAFETY: block `i` is ours (claimed: the receiver freed it); `len` fits it.
            unsafe { std::ptr::copy_nonoverlapping(msg.payload.as_ptr(), block, len) }
        };
        if t.push_pair(msg, FLAG_TAG_ON, (i, len), write) {
            t.pool_cursor.set(cursor);
            Ok(())
        } else {
            pool.unclaim(i);
            Err(t.no_room(dest, ch))
        }
    }

    fn segment(&self) -> (NonNull<u8>, usize) {
        match &self.across {
            Some(a) => a.cluster.segment(),
            None => (self.segments[self.rank], self.segment_bytes),
        }
    }

    #[inline(always)]
    fn peek(&self, ch: Channel) -> Result<Option<MemFrame<'_>>, ConduitError> {
        let chan = match self.rx.get(ch) {
            Some(chan) => chan,
            None => match self.channel_across(ch) {
                Ok(chan) => chan,
                Err(early) => return early.map(|_| None),
            },
        };
        if chan.busy.get() && !chan.rings.is_empty() {
            return Err(ConduitError::FrameOutstanding { channel: ch });
        }
        loop {
            let s = match self.look_ready(chan) {
                Ready::Express(s, r, p, slot) => {
                    chan.looked_at(s);
                    chan.busy.set(true);
                    return Ok(Some(MemFrame::express(chan, r, s, p, slot)));
                }
                Ready::Other(s) => s,
                Ready::None if chan.moved => {
                    return Err(ConduitError::DeliveredByInterrupts { channel: ch })
                }
                Ready::None => return Ok(None),
            };
            match self.take(chan, s, ch) {
                Ok(Some(frame)) => {
                    chan.looked_at(s);
                    return Ok(Some(frame));
                }
                Ok(None) => {} // a pad, or a dropped frame: look again
                Err(e) => return Err(e),
            }
        }
    }

    #[inline(always)]
    fn quiet(&self, ch: Channel) -> bool {
        self.rx.get(ch).is_some_and(RxChannel::quiet)
    }

    #[inline(always)]
    fn drain<E, F>(&self, ch: Channel, budget: usize, f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        self.drain_frames(ch, budget, f)
    }

    #[inline(always)]
    fn drain_one<E, F>(&self, ch: Channel, f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        self.drain_one_frame(ch, f)
    }

    #[inline(always)]
    fn drain_both<E, F1, F2>(
        &self,
        first: (Channel, usize),
        on_first: F1,
        second: (Channel, usize),
        on_second: F2,
    ) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F1: FnMut(&MemFrame<'_>) -> Result<(), E>,
        F2: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        self.drain_both_frames(first, on_first, second, on_second)
    }

    fn poll_set(&self, channels: &[Channel]) -> Result<PollSet, ConduitError> {
        if let Some(a) = &self.across {
            return a.cluster.poll_set(channels);
        }
        let mut set = PollSet {
            channels: channels.to_vec(),
            bits: 0,
            all_notify: !channels.is_empty(),
        };
        for &ch in channels {
            match self.caps.channels.get(ch) {
                Some(c) if c.notify => set.bits |= ConduitSpec::doorbell_bit(ch),
                Some(_) => set.all_notify = false,
                None => return Err(self.no_channel(ch)),
            }
        }
        Ok(set)
    }

    /// Idle and armed, it reads one word, inline in the caller; everything else is
    /// `MemConduit::one_poll_scan`.
    #[inline(always)]
    fn one_poll(&self, set: &PollSet) -> Result<Option<(Channel, MemFrame<'_>)>, ConduitError> {
        if self.nothing_arrived(set) {
            return Ok(None);
        }
        self.one_poll_scan(set)
    }

    /// Armed (every channel rings the doorbell, and the set was armed when idle): one
    /// word says whether anything arrived. If it did, the set is disarmed here.
    #[inline(always)]
    fn nothing_arrived(&self, set: &PollSet) -> bool {
        let armed = self.one_poll_armed.get();
        // Nothing armed (a busy rank): one test.
        if armed == 0 || armed & set.bits != set.bits || !set.all_notify {
            return false;
        }
        // ORDERING: Acquire pairs with the senders' Release fetch_or in `ring_doorbell`.
        if self.doorbell().summary.load(Ordering::Acquire) & set.bits == 0 {
            return true;
        }
        self.disarm(set, armed); // it rang: look at the channels until idle again
        false
    }

    /// Inline: the count of empty polls, and a test when frames came; arming out of
    /// line.
    #[inline(always)]
    fn polled(&self, set: &PollSet, took: usize) {
        let idle = self.one_poll_idle.get();
        if took > 0 {
            // A store without a test: the word is this rank's own.
            self.one_poll_idle.set(0);
        } else if idle < POLL_ARM_AFTER - 1 {
            self.one_poll_idle.set(idle + 1);
        } else if set.all_notify && self.one_poll_armed.get() & set.bits != set.bits {
            self.polled_idle(set);
        }
    }

    /// A front sleeps here on both halves of its cluster (at most
    /// [`SLEEP_BACKSTOP`](crate::util::SLEEP_BACKSTOP)) and answers `Ready`, so that the
    /// wait looks again: overriding `wait_for_arrival` instead changed how the waits
    /// that inline it are compiled (callgrind: 3 instructions per empty wait round).
    fn arm_arrival(&self, set: &PollSet) -> Result<Arming<'_>, ConduitError> {
        if let Some(a) = &self.across {
            a.sleep(set, crate::util::SLEEP_BACKSTOP)?;
            return Ok(Arming::Ready);
        }
        if !set.all_notify {
            return Ok(Arming::CannotSleep); // no doorbell to be woken by
        }
        // Armed, then one more look: either a sender saw the arm (and bumps the word),
        // or this look sees its frame.
        let d = self.doorbell();
        let (seen, token) = d.arm_sleeper(set.bits, self.size == 1);
        if set
            .channels
            .iter()
            .any(|&ch| self.rx[ch].next_ready().is_some())
        {
            d.disarm_sleeper(set.bits, token);
            return Ok(Arming::Ready);
        }
        Ok(Arming::Armed(Armed {
            word: &d.wake,
            seen,
            token,
        }))
    }

    fn disarm_arrival(&self, set: &PollSet, armed: Armed<'_>) {
        // A front answers `Ready` (it slept already): never armed here.
        self.doorbell().disarm_sleeper(set.bits, armed.token);
    }

    #[inline(always)]
    fn put_nb(&self, dest: Rank, offset: usize, data: &[u8]) -> Result<Started, ConduitError> {
        self.put_now(dest, offset, data)
    }

    unsafe fn put_nb_borrowed(
        &self,
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        // SAFETY: the caller's contract on `data`, passed on.
        unsafe { self.put_borrowed(dest, offset, data, len) }
    }

    #[inline(always)]
    unsafe fn get_nb(
        &self,
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        // SAFETY: the caller's contract: `buf` is valid for writes of `len` bytes (the
        // copy completes before this returns).
        unsafe { self.get_now(src, offset, buf, len) }
    }

    #[inline(always)]
    fn atomic_nb(&self, dest: Rank, offset: usize, op: AtomicOp) -> Result<Started, ConduitError> {
        self.atomic_now(dest, offset, op)
    }

    fn op_test(&self, op: OpToken) -> Result<Option<u64>, ConduitError> {
        match &self.across {
            Some(a) => a.cluster.op_test(op),
            None => Err(ConduitError::Unsupported {
                what: "operations in flight",
            }),
        }
    }

    fn flush(&self) -> Result<(), ConduitError> {
        match &self.across {
            Some(a) => a.cluster.flush(),
            None => Ok(()), // every operation completed when it started
        }
    }

    fn dropped(&self, ch: Channel) -> u64 {
        match &self.across {
            Some(a) => a.cluster.dropped(ch) + a.channel(ch).map_or(0, |c| c.dropped.get()),
            None => self.rx.get(ch).map_or(0, |c| c.dropped.get()),
        }
    }

    fn faults(&self) -> Faults {
        match &self.across {
            Some(a) => {
                let mut all = a.cluster.faults();
                all.merge(self.faults.snapshot(), |r| r);
                all
            }
            None => self.faults.snapshot(),
        }
    }

    fn record_fault(&self, fault: Fault) {
        match &self.across {
            Some(a) => a.cluster.record_fault(fault),
            None => self.faults.record(fault),
        }
    }

    fn allgather(&self, mine: u64) -> Result<Vec<u64>, ConduitError> {
        match &self.across {
            Some(a) => a.cluster.allgather(mine),
            None => Ok(self.boot.allgather(self.rank, mine)?),
        }
    }

    fn barrier(&self) -> Result<(), ConduitError> {
        match &self.across {
            Some(a) => a.cluster.barrier(),
            None => Ok(self.boot.barrier()?),
        }
    }

    fn check_peers(&self) -> Result<(), ConduitError> {
        match &self.across {
            Some(a) => a.cluster.check_peers(),
            None => Ok(self.boot.check_peers()?),
        }
    }

    fn joined_taken(&self, rank: Rank) -> u64 {
        self.taken_from_threads(rank)
    }

    fn forward_threads(&self) -> Result<bool, ConduitError> {
        self.forward_threads()
    }

    fn peer_left(&self, rank: Rank) -> bool {
        match &self.across {
            Some(a) => a.cluster.peer_left(rank),
            None => self.boot.has_left(rank),
        }
    }

    fn contacted(&self, peer: Rank) -> bool {
        self.across
            .as_ref()
            .is_none_or(|a| a.cluster.contacted(peer))
    }

    fn quiescent(&self) {
        if let Some(a) = &self.across {
            a.cluster.quiescent();
        }
    }
}
