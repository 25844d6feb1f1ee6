//! One-sided operations carried as AM frames: the path that works over any conduit (a
//! network's too), which the RMA layer takes when peers' segments are not mapped, or
//! when asked to on one host. Runtime handlers (tags below the user's) serve them:
//!
//! | request (args) | at the target | reply (args) |
//! |---|---|---|
//! | `PUT` Long (op, counter + 1 or 0) | the payload is already in its segment; bumps the counter | `PUT_DONE` (op, status) |
//! | `GET` (op, offset, len, at) | reads its segment | `GET_DATA` Medium (op, status, at) + bytes |
//! | `ATOMIC` (op, kind, offset, a, b) | the atomic on its segment's word | `ATOMIC_DONE` (op, status, old) |
//!
//! The origin keeps each operation in a table until its replies are in; a get's bytes
//! land in a buffer the table owns (reused from operation to operation), copied out
//! when the program collects the result, so no reply ever writes into memory the
//! program may have let go.

use super::engine::Payload;
use super::{Am, AmError, Msg, ReplyHandler};
use crate::conduit::{Conduit, Rank};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const TAG_PUT: u16 = 1;
pub(super) const TAG_PUT_DONE: u16 = 2;
pub(super) const TAG_GET: u16 = 3;
pub(super) const TAG_GET_DATA: u16 = 4;
pub(super) const TAG_ATOMIC: u16 = 5;
pub(super) const TAG_ATOMIC_DONE: u16 = 6;

const OK: u64 = 0;
const REFUSED: u64 = 1;

/// A remote atomic operation on a u64 word, as frames carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicKind {
    /// Wrapping add of `a`.
    Add,
    /// Store `a`.
    Swap,
    /// Store `b` if the word is `a`.
    CompareSwap,
    /// And with `a`.
    And,
    /// Or with `a`.
    Or,
    /// Xor with `a`.
    Xor,
}

impl AtomicKind {
    const ALL: [AtomicKind; 6] = [
        AtomicKind::Add,
        AtomicKind::Swap,
        AtomicKind::CompareSwap,
        AtomicKind::And,
        AtomicKind::Or,
        AtomicKind::Xor,
    ];

    /// Applies the operation to `w`; returns the value before.
    pub fn apply(self, w: &AtomicU64, a: u64, b: u64) -> u64 {
        // ORDERING: AcqRel, as for any remote atomic (as on mapped memory): it
        // publishes and acquires the data around it; pairs with the other ranks' ones.
        let o = Ordering::AcqRel;
        match self {
            AtomicKind::Add => w.fetch_add(a, o),
            AtomicKind::Swap => w.swap(a, o),
            AtomicKind::CompareSwap => {
                // ORDERING: as above; Acquire when it fails (the value is returned).
                match w.compare_exchange(a, b, o, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
            AtomicKind::And => w.fetch_and(a, o),
            AtomicKind::Or => w.fetch_or(a, o),
            AtomicKind::Xor => w.fetch_xor(a, o),
        }
    }
}

/// An operation in flight through frames, named by its slot in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "collect the operation with Am::op_wait"]
pub struct OpId(usize);

/// One operation's slot: replies still expected, and what they brought (a get's
/// bytes, an atomic's old value).
#[derive(Debug, Default)]
pub(super) struct OpSlot {
    live: bool,
    pending: usize,
    refused: bool,
    data: Vec<u8>,
    value: u64,
}

/// The origin's table of operations in flight.
#[derive(Debug, Default)]
pub(super) struct Ops {
    slots: Vec<OpSlot>,
    free: Vec<usize>,
}

impl Ops {
    fn open(&mut self, pending: usize, data_len: usize) -> OpId {
        let i = self.free.pop().unwrap_or_else(|| {
            self.slots.push(OpSlot::default());
            self.slots.len() - 1
        });
        let s = &mut self.slots[i];
        (s.live, s.pending, s.refused, s.value) = (true, pending, false, 0);
        s.data.clear();
        s.data.resize(data_len, 0);
        OpId(i)
    }

    /// The live slot a reply names, or why it names none.
    fn slot(&mut self, op: u64, source: Rank) -> Result<&mut OpSlot, AmError> {
        match self.slots.get_mut(op as usize) {
            Some(s) if s.live && s.pending > 0 => Ok(s),
            _ => Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "a reply for no operation in flight",
            }),
        }
    }
}

impl<S, C: Conduit> Am<S, C> {
    /// The word at `offset` of this rank's segment, if it is inside and 8-aligned.
    fn own_word(&self, offset: u64) -> Option<&AtomicU64> {
        let (base, len) = self.segment();
        let off = usize::try_from(offset).ok()?;
        if off % 8 != 0 || off.checked_add(8)? > len {
            return None;
        }
        // SAFETY: 8 bytes at an 8-aligned offset inside this rank's page-aligned
        // segment, alive as long as the conduit; words used as atomics are accessed
        // atomically by every rank (the program's protocol).
        Some(unsafe { &*base.as_ptr().add(off).cast::<AtomicU64>() })
    }

    /// Puts `data` at `offset` of `dest`'s segment through frames (a Long request),
    /// then, if `counter` is given, bumps the u64 at that offset of `dest`'s segment.
    /// Complete (the data in place) when [`Am::op_done`] says so.
    pub fn put_via_frames(
        &self,
        dest: Rank,
        offset: usize,
        data: &[u8],
        counter: Option<usize>,
    ) -> Result<OpId, AmError> {
        let op = self.ops.borrow_mut().open(1, 0);
        let c = counter.map_or(0, |c| c as u64 + 1);
        let sent = self.send_request(
            dest,
            TAG_PUT,
            &[op.0 as u64, c],
            Payload::Long(data, offset),
        );
        self.opened(op, sent)
    }

    /// Reads `len` bytes at `offset` of `src`'s segment through frames, in Medium
    /// replies of at most [`Am::max_medium`] bytes; [`Am::op_wait`] returns them.
    pub fn get_via_frames(&self, src: Rank, offset: usize, len: usize) -> Result<OpId, AmError> {
        let chunk = self.max_medium();
        let pieces = len.div_ceil(chunk).max(1);
        let op = self.ops.borrow_mut().open(pieces, len);
        for k in 0..pieces {
            let at = k * chunk;
            let n = chunk.min(len - at);
            let args = [op.0 as u64, (offset + at) as u64, n as u64, at as u64];
            let sent = self.send_request(src, TAG_GET, &args, Payload::Inline(&[]));
            if sent.is_err() {
                return self.opened(op, sent);
            }
        }
        Ok(op)
    }

    /// Applies `kind` with operands `a`, `b` to the u64 at `offset` of `dest`'s segment
    /// through frames; [`Am::op_wait`] returns the value before.
    pub fn atomic_via_frames(
        &self,
        dest: Rank,
        offset: usize,
        kind: AtomicKind,
        a: u64,
        b: u64,
    ) -> Result<OpId, AmError> {
        let op = self.ops.borrow_mut().open(1, 0);
        let k = AtomicKind::ALL.iter().position(|&x| x == kind).unwrap_or(0) as u64;
        let args = [op.0 as u64, k, offset as u64, a, b];
        let sent = self.send_request(dest, TAG_ATOMIC, &args, Payload::Inline(&[]));
        self.opened(op, sent)
    }

    /// `op` if its request went out; otherwise the slot is given back.
    fn opened(&self, op: OpId, sent: Result<(), AmError>) -> Result<OpId, AmError> {
        match sent {
            Ok(()) => Ok(op),
            Err(e) => {
                self.close(op);
                Err(e)
            }
        }
    }

    fn close(&self, op: OpId) {
        let mut ops = self.ops.borrow_mut();
        ops.slots[op.0].live = false;
        ops.free.push(op.0);
    }

    /// True once every reply of `op` is in.
    pub fn op_done(&self, op: OpId) -> bool {
        self.ops.borrow().slots[op.0].pending == 0
    }

    /// Waits for `op` (running handlers), copies a get's bytes into `out` (as many as
    /// both hold), frees its slot and returns an atomic's old value (0 for others).
    /// [`AmError::RemoteRefused`] if the target refused it.
    pub fn op_wait(&self, op: OpId, out: &mut [u8]) -> Result<u64, AmError> {
        self.wait_until(|_| self.op_done(op))?;
        let (refused, value) = {
            let ops = self.ops.borrow();
            let s = &ops.slots[op.0];
            let n = out.len().min(s.data.len());
            out[..n].copy_from_slice(&s.data[..n]);
            (s.refused, s.value)
        };
        self.close(op);
        if refused {
            return Err(AmError::RemoteRefused);
        }
        Ok(value)
    }

    /// Serves a runtime request or reply of the one-sided operations; `false` if `tag`
    /// is not one of theirs.
    pub(super) fn serve_one_sided(
        &self,
        is_request: bool,
        tag: u16,
        msg: Msg<'_>,
    ) -> Result<bool, AmError> {
        let src = msg.source();
        let reply = |tag: u16, args: &[u64], payload: &[u8]| {
            self.send_reply(src, ReplyHandler(tag), args, Payload::Inline(payload))
        };
        match (tag, is_request) {
            (TAG_PUT, true) => {
                let c = msg.arg(1);
                let status = match c.checked_sub(1) {
                    None => OK,
                    Some(off) => match self.own_word(off) {
                        // ORDERING: Release: the put's bytes (in place before this frame
                        // was published) are seen by whoever reads the count with Acquire.
                        Some(w) => {
                            w.fetch_add(1, Ordering::Release);
                            OK
                        }
                        None => REFUSED,
                    },
                };
                reply(TAG_PUT_DONE, &[msg.arg(0), status], &[])?;
            }
            (TAG_GET, true) => {
                let (op, off, len, at) = (msg.arg(0), msg.arg(1), msg.arg(2), msg.arg(3));
                let (base, seg) = self.segment();
                let range = usize::try_from(off).ok().zip(usize::try_from(len).ok());
                match range.filter(|&(o, n)| {
                    o.checked_add(n).is_some_and(|e| e <= seg) && n <= self.max_medium()
                }) {
                    Some((o, n)) => {
                        // SAFETY: `o + n` ≤ the segment's length (checked above).
                        let bytes = unsafe { std::slice::from_raw_parts(base.as_ptr().add(o), n) };
                        reply(TAG_GET_DATA, &[op, OK, at], bytes)?;
                    }
                    None => reply(TAG_GET_DATA, &[op, REFUSED, at], &[])?,
                }
            }
            (TAG_ATOMIC, true) => {
                let kind = AtomicKind::ALL.get(msg.arg(1) as usize);
                let (op, a, b) = (msg.arg(0), msg.arg(3), msg.arg(4));
                match (kind, self.own_word(msg.arg(2))) {
                    (Some(k), Some(w)) => reply(TAG_ATOMIC_DONE, &[op, OK, k.apply(w, a, b)], &[])?,
                    _ => reply(TAG_ATOMIC_DONE, &[op, REFUSED, 0], &[])?,
                }
            }
            (TAG_PUT_DONE | TAG_GET_DATA | TAG_ATOMIC_DONE, false) => {
                let mut ops = self.ops.borrow_mut();
                let slot = ops.slot(msg.arg(0), src)?;
                slot.refused |= msg.arg(1) != OK;
                if tag == TAG_GET_DATA && msg.arg(1) == OK {
                    let at = msg.arg(2) as usize;
                    let p = msg.payload();
                    match slot.data.get_mut(at..at + p.len()) {
                        Some(d) => d.copy_from_slice(p),
                        None => slot.refused = true,
                    }
                }
                if tag == TAG_ATOMIC_DONE {
                    slot.value = msg.arg(2);
                }
                slot.pending -= 1;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
