//! Operations awaiting replies: the origin's table of runtime requests in flight (the
//! one-sided operations carried as frames, `rma/frames.rs`), which their replies fill.
//!
//! Each operation has a slot until its replies are in; a get's bytes land in a buffer
//! the slot owns (reused from operation to operation), copied out when the program
//! collects the result, so no reply ever writes into memory the program may have let go
//! — or, for a get into this rank's own segment (which stays mapped as long as the
//! conduit), straight at their place there, with no copy in between.

use super::{Am, AmError, Msg};
use crate::conduit::{Conduit, ConduitError, Rank};

/// A reply's status word: the target did what was asked.
pub(crate) const OK: u64 = 0;
/// A reply's status word: the target refused (outside its segment, malformed).
pub(crate) const REFUSED: u64 = 1;

/// An operation in flight through frames, named by its slot in the table and the
/// slot's generation (so that a late reply for an operation given up on can never be
/// taken for one of a later operation in the same slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "collect the operation with Am::op_wait"]
pub(crate) struct OpId {
    slot: usize,
    generation: u32,
}

impl OpId {
    /// The word that names it in frames: generation above, slot below.
    pub(crate) fn word(self) -> u64 {
        u64::from(self.generation) << 32 | self.slot as u64
    }
}

/// One operation's slot: replies still expected, and what they brought (a get's
/// bytes, an atomic's old value).
#[derive(Debug, Default)]
struct OpSlot {
    generation: u32,
    /// The rank that serves it (whose replies it awaits).
    target: Rank,
    live: bool,
    pending: usize,
    refused: bool,
    /// Its wait ended with an error before every reply was in: freed when the last
    /// one lands (so that a late reply is neither a fault nor another operation's).
    abandoned: bool,
    /// Bytes the replies bring, in all.
    len: usize,
    /// Where they land: the slot's buffer, or this offset of the rank's own segment.
    land: Option<usize>,
    data: Vec<u8>,
    value: u64,
    /// No one waits for it: its last reply tells the events waiting in line
    /// (`events.rs`).
    posting: bool,
}

/// The origin's table of operations in flight.
#[derive(Debug, Default)]
pub(super) struct Ops {
    slots: Vec<OpSlot>,
    free: Vec<usize>,
}

impl Ops {
    fn open(&mut self, target: Rank, pending: usize, len: usize, land: Option<usize>) -> OpId {
        let i = self.free.pop().unwrap_or_else(|| {
            self.slots.push(OpSlot::default());
            self.slots.len() - 1
        });
        let s = &mut self.slots[i];
        s.generation = s.generation.wrapping_add(1);
        (s.live, s.target, s.pending, s.refused, s.value) = (true, target, pending, false, 0);
        s.abandoned = false;
        s.posting = false;
        (s.len, s.land) = (len, land);
        s.data.clear();
        if land.is_none() {
            s.data.resize(len, 0);
        }
        OpId {
            slot: i,
            generation: s.generation,
        }
    }

    /// The live slot a reply names, or why it names none.
    fn slot(&mut self, op: u64, source: Rank) -> Result<&mut OpSlot, AmError> {
        let (slot, generation) = ((op & u64::from(u32::MAX)) as usize, (op >> 32) as u32);
        match self.slots.get_mut(slot) {
            Some(s)
                if s.live && s.pending > 0 && s.generation == generation && s.target == source =>
            {
                Ok(s)
            }
            _ => Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "a reply for no operation in flight to it",
            }),
        }
    }

    /// One reply of the operation `op` names is in: an abandoned operation whose
    /// last reply this was is freed.
    fn landed(&mut self, op: u64) {
        let slot = (op & u64::from(u32::MAX)) as usize;
        let s = &mut self.slots[slot];
        s.pending -= 1;
        if s.pending == 0 && s.abandoned {
            s.live = false;
            self.free.push(slot);
        }
    }

    fn close(&mut self, op: OpId) {
        self.slots[op.slot].live = false;
        self.free.push(op.slot);
    }
}

/// What a reply brings to its operation.
pub(super) enum Landed<'m> {
    /// Nothing but its status (a put's acknowledgement).
    Status,
    /// Bytes of a get, at this offset of the operation's buffer.
    Bytes { at: usize, bytes: &'m [u8] },
    /// An atomic's value before.
    Value(u64),
}

impl<S, C: Conduit> Am<S, C> {
    /// Opens an operation that awaits `replies` replies from `target` and collects
    /// `data_len` bytes.
    pub(crate) fn op_open(&self, target: Rank, replies: usize, data_len: usize) -> OpId {
        self.ops.borrow_mut().open(target, replies, data_len, None)
    }

    /// Opens a get whose `len` bytes land at offset `at` of this rank's own segment as
    /// the replies come (no copy through the slot); `None` if that range is not inside
    /// the segment.
    pub(crate) fn op_open_landing(
        &self,
        target: Rank,
        replies: usize,
        len: usize,
        at: usize,
    ) -> Option<OpId> {
        let inside = at
            .checked_add(len)
            .is_some_and(|end| end <= self.segment().1);
        inside.then(|| self.ops.borrow_mut().open(target, replies, len, Some(at)))
    }

    /// Opens an operation that awaits `replies` replies from `target` and that no one
    /// waits for: its slot is freed when the last reply is in, and `events` are posted
    /// then, in their turn (or, if the target refused it, the refusal is kept for the
    /// program's next poll or wait instead).
    pub(crate) fn op_open_posting(
        &self,
        target: Rank,
        replies: usize,
        events: Vec<super::Event>,
    ) -> OpId {
        let mut ops = self.ops.borrow_mut();
        let op = ops.open(target, replies, 0, None);
        let s = &mut ops.slots[op.slot];
        (s.abandoned, s.posting) = (true, true);
        drop(ops);
        self.post_on_reply(op, events);
        op
    }

    /// `op` if its request went out; otherwise its slot is given back and the error
    /// returned.
    pub(crate) fn op_sent(&self, op: OpId, sent: Result<(), AmError>) -> Result<OpId, AmError> {
        if sent.is_err() {
            let mut ops = self.ops.borrow_mut();
            let posting = ops.slots[op.slot].posting;
            ops.close(op);
            drop(ops);
            if posting {
                self.never_replied(op);
            }
        }
        sent.map(|()| op)
    }

    /// True once every reply of `op` is in.
    pub(crate) fn op_done(&self, op: OpId) -> bool {
        self.ops.borrow().slots[op.slot].pending == 0
    }

    /// Waits for `op` (running handlers), copies a get's bytes into `out` (as many as
    /// both hold), frees its slot and returns an atomic's old value (0 for others).
    /// [`AmError::RemoteRefused`] if the target refused it;
    /// [`ConduitError::PeerLeft`] if the target left the job without answering.
    pub(crate) fn op_wait(&self, op: OpId, out: &mut [u8]) -> Result<u64, AmError> {
        let target = self.ops.borrow().slots[op.slot].target;
        let waited = self.wait_on(target, |_| self.op_done(op));
        if let Err(e) = waited {
            let mut ops = self.ops.borrow_mut();
            let left = e.conduit() == Some(&ConduitError::PeerLeft { rank: target });
            match left || ops.slots[op.slot].pending == 0 {
                true => ops.close(op), // no reply can come any more
                false => ops.slots[op.slot].abandoned = true,
            }
            return Err(e);
        }
        let mut ops = self.ops.borrow_mut();
        let s = &ops.slots[op.slot];
        let n = out.len().min(s.data.len());
        out[..n].copy_from_slice(&s.data[..n]);
        let (refused, value) = (s.refused, s.value);
        ops.close(op);
        match refused {
            true => Err(AmError::RemoteRefused),
            false => Ok(value),
        }
    }

    /// Lands a reply (`msg`: the operation's word, the status, then what `landed`
    /// says) in its operation's slot.
    pub(super) fn land_reply(&self, msg: &Msg<'_>, landed: Landed<'_>) -> Result<(), AmError> {
        let mut ops = self.ops.borrow_mut();
        let (op, ok) = (msg.arg(0)?, msg.arg(1)? == OK);
        let slot = ops.slot(op, msg.source())?;
        slot.refused |= !ok;
        match landed {
            Landed::Status => {}
            Landed::Bytes { .. } if !ok => {}
            Landed::Bytes { at, bytes } => {
                let end = at.checked_add(bytes.len()).filter(|&end| end <= slot.len);
                match (end, slot.land) {
                    (None, _) => slot.refused = true,
                    (Some(end), None) => slot.data[at..end].copy_from_slice(bytes),
                    // SAFETY: `base .. base + slot.len` lies in this rank's segment
                    // (`op_open_landing` checked it), mapped as long as the conduit,
                    // and `at .. end` inside that range; `bytes` is a frame's payload,
                    // which cannot overlap the segment. No reference to those bytes is
                    // handed out while the get is in flight.
                    (Some(_), Some(base)) => unsafe {
                        let to = self.segment().0.as_ptr().add(base + at);
                        std::ptr::copy_nonoverlapping(bytes.as_ptr(), to, bytes.len());
                    },
                }
            }
            Landed::Value(v) => slot.value = v,
        }
        let replied = (slot.pending == 1 && slot.posting).then(|| {
            let id = OpId {
                slot: (op & u64::from(u32::MAX)) as usize,
                generation: slot.generation,
            };
            (id, slot.refused)
        });
        ops.landed(op);
        drop(ops);
        if let Some((id, refused)) = replied {
            self.replied(id, refused);
        }
        Ok(())
    }
}
