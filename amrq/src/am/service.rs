//! One-sided operations carried as AM frames: the path that works over any conduit (a
//! network's too), which the RMA layer takes when peers' segments are not mapped, or
//! when asked to on one host. Runtime handlers (tags below the user's) serve them:
//!
//! | request (args) | at the target | reply (args) |
//! |---|---|---|
//! | `PUT` Long (op, counter + 1 or 0) | the payload is already in its segment; bumps the counter | `PUT_DONE` (op, status) |
//! | `GET` (op, offset, len, at) | reads its segment | `GET_DATA` Medium (op, status, at) + bytes |
//! | `ATOMIC` (op, kind, offset, a, b) | the atomic on its segment's word | `ATOMIC_DONE` (op, status, old) |
//! | `PUT_PACKED` Medium (op, blocks) + (offset, len)… + bytes | scatters the blocks into its segment | `PUT_DONE` (op, status) |
//! | `GET_PACKED` Medium (op, blocks, at) + (offset, len)… | gathers the blocks | `GET_DATA` Medium (op, status, at) + bytes |
//!
//! Packed frames carry many small blocks of an indexed or strided transfer in one
//! message (RQ §4.1: small blocks must not each pay a message).
//!
//! The origin keeps each operation in a table until its replies are in; a get's bytes
//! land in a buffer the table owns (reused from operation to operation), copied out
//! when the program collects the result, so no reply ever writes into memory the
//! program may have let go.

use super::payload::Payload;
use super::{Am, AmError, Msg, ReplyHandler};
use crate::conduit::{AtomicOp, Conduit, Rank};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const TAG_PUT: u16 = 1;
pub(super) const TAG_PUT_DONE: u16 = 2;
pub(super) const TAG_GET: u16 = 3;
pub(super) const TAG_GET_DATA: u16 = 4;
pub(super) const TAG_ATOMIC: u16 = 5;
pub(super) const TAG_ATOMIC_DONE: u16 = 6;
pub(super) const TAG_PUT_PACKED: u16 = 7;
pub(super) const TAG_GET_PACKED: u16 = 8;

/// A block of a segment: (offset, len).
type Block = (usize, usize);

/// Bytes of one block's (offset, len) header in a packed frame.
const BLOCK_HEADER: usize = 16;

const OK: u64 = 0;
const REFUSED: u64 = 1;

/// An operation in flight through frames, named by its slot in the table and the
/// slot's generation (so that a late reply for an operation given up on can never be
/// taken for one of a later operation in the same slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "collect the operation with Am::op_wait"]
pub struct OpId {
    slot: usize,
    generation: u32,
}

impl OpId {
    /// The word that names it in frames: generation above, slot below.
    fn word(self) -> u64 {
        u64::from(self.generation) << 32 | self.slot as u64
    }
}

/// One operation's slot: replies still expected, and what they brought (a get's
/// bytes, an atomic's old value).
#[derive(Debug, Default)]
pub(super) struct OpSlot {
    generation: u32,
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
        s.generation = s.generation.wrapping_add(1);
        (s.live, s.pending, s.refused, s.value) = (true, pending, false, 0);
        s.data.clear();
        s.data.resize(data_len, 0);
        OpId {
            slot: i,
            generation: s.generation,
        }
    }

    /// The live slot a reply names, or why it names none.
    fn slot(&mut self, op: u64, source: Rank) -> Result<&mut OpSlot, AmError> {
        let (slot, generation) = ((op & u64::from(u32::MAX)) as usize, (op >> 32) as u32);
        match self.slots.get_mut(slot) {
            Some(s) if s.live && s.pending > 0 && s.generation == generation => Ok(s),
            _ => Err(AmError::BadRuntimeMessage {
                source_rank: source,
                what: "a reply for no operation in flight",
            }),
        }
    }
}

/// Starts `frame` afresh with the (offset, len) headers of `blocks`; returns their
/// total length in bytes.
fn packed_headers(frame: &mut Vec<u8>, blocks: &[Block]) -> usize {
    frame.clear();
    for &(o, n) in blocks {
        frame.extend_from_slice(&(o as u64).to_ne_bytes());
        frame.extend_from_slice(&(n as u64).to_ne_bytes());
    }
    blocks.iter().map(|b| b.1).sum()
}

/// The `count` (offset, len) headers at the start of a packed payload, checked against
/// a segment of `seg` bytes, and the bytes after them.
fn blocks(count: u64, payload: &[u8], seg: usize) -> Option<(Vec<Block>, &[u8])> {
    let count = usize::try_from(count).ok()?;
    let heads = payload.get(..count.checked_mul(BLOCK_HEADER)?)?;
    let word = |c: &[u8]| usize::try_from(u64::from_ne_bytes(c.try_into().ok()?)).ok();
    let list = heads
        .chunks_exact(BLOCK_HEADER)
        .map(|h| {
            let (o, n) = (word(&h[..8])?, word(&h[8..])?);
            (o.checked_add(n)? <= seg).then_some((o, n))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((list, &payload[heads.len()..]))
}

impl<S, C: Conduit> Am<S, C> {
    /// Writes the blocks of a packed put into this rank's segment; `false` (nothing
    /// written) if a block lies outside it or the bytes do not match the blocks.
    fn scatter_blocks(&self, count: u64, payload: &[u8]) -> bool {
        let (base, seg) = self.segment();
        let Some((list, mut data)) = blocks(count, payload, seg) else {
            return false;
        };
        if list.iter().map(|b| b.1).sum::<usize>() != data.len() {
            return false;
        }
        for (o, n) in list {
            // SAFETY: `o + n` ≤ the segment's length (`blocks` checked); the source is
            // the frame's payload, which cannot overlap the segment's bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base.as_ptr().add(o), n) };
            data = &data[n..];
        }
        true
    }

    /// The blocks of a packed get, read from this rank's segment and concatenated;
    /// `None` if a block lies outside it or they would not fit one reply.
    fn gather_blocks(&self, count: u64, payload: &[u8]) -> Option<Vec<u8>> {
        let (base, seg) = self.segment();
        let (list, rest) = blocks(count, payload, seg)?;
        let total: usize = list.iter().map(|b| b.1).sum();
        if !rest.is_empty() || total > self.max_medium() {
            return None;
        }
        let mut out = Vec::with_capacity(total);
        for (o, n) in list {
            // SAFETY: `o + n` ≤ the segment's length (`blocks` checked).
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(base.as_ptr().add(o), n) });
        }
        Some(out)
    }

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
        let sent = self.send_request(dest, TAG_PUT, &[op.word(), c], Payload::Long(data, offset));
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
            let args = [op.word(), (offset + at) as u64, n as u64, at as u64];
            let sent = self.send_request(src, TAG_GET, &args, Payload::Inline(&[]));
            if sent.is_err() {
                return self.opened(op, sent);
            }
        }
        Ok(op)
    }

    /// Applies `atomic` to the u64 at `offset` of `dest`'s segment through frames;
    /// [`Am::op_wait`] returns the value before.
    pub fn atomic_via_frames(
        &self,
        dest: Rank,
        offset: usize,
        atomic: AtomicOp,
    ) -> Result<OpId, AmError> {
        let op = self.ops.borrow_mut().open(1, 0);
        let (k, a, b) = atomic.to_words();
        let args = [op.word(), k, offset as u64, a, b];
        let sent = self.send_request(dest, TAG_ATOMIC, &args, Payload::Inline(&[]));
        self.opened(op, sent)
    }

    /// Puts blocks `(offset, len)` of `dest`'s segment, their bytes concatenated in
    /// `data`, packing as many blocks as fit into each Medium request. The caller
    /// checked the blocks against the segment and `data.len()` against their sum.
    pub fn put_blocks_via_frames(
        &self,
        dest: Rank,
        blocks: &[(usize, usize)],
        data: &[u8],
    ) -> Result<OpId, AmError> {
        let groups = self.pack(blocks);
        // No groups (no blocks): nothing to wait for, the operation is done at once.
        let op = self.ops.borrow_mut().open(groups.len(), 0);
        let mut frame = Vec::with_capacity(self.max_medium());
        let mut at = 0;
        for g in groups {
            let len = packed_headers(&mut frame, &blocks[g.clone()]);
            frame.extend_from_slice(&data[at..at + len]);
            at += len;
            let args = [op.word(), g.len() as u64];
            let sent = self.send_request(dest, TAG_PUT_PACKED, &args, Payload::Inline(&frame));
            if sent.is_err() {
                return self.opened(op, sent);
            }
        }
        Ok(op)
    }

    /// Gets blocks `(offset, len)` of `src`'s segment, concatenated, packing as many
    /// blocks as fit into each request and its Medium reply; [`Am::op_wait`] returns
    /// the bytes. The caller checked the blocks against the segment.
    pub fn get_blocks_via_frames(
        &self,
        src: Rank,
        blocks: &[(usize, usize)],
    ) -> Result<OpId, AmError> {
        let groups = self.pack(blocks);
        let total = blocks.iter().map(|b| b.1).sum();
        let op = self.ops.borrow_mut().open(groups.len(), total);
        let mut frame = Vec::with_capacity(self.max_medium());
        let mut at = 0;
        for g in groups {
            let len = packed_headers(&mut frame, &blocks[g.clone()]);
            let args = [op.word(), g.len() as u64, at as u64];
            at += len;
            let sent = self.send_request(src, TAG_GET_PACKED, &args, Payload::Inline(&frame));
            if sent.is_err() {
                return self.opened(op, sent);
            }
        }
        Ok(op)
    }

    /// Groups of consecutive blocks whose headers and bytes fit one Medium payload (a
    /// block too large for one is split beforehand by the caller: see
    /// [`Am::max_packed_block`]).
    fn pack(&self, blocks: &[(usize, usize)]) -> Vec<std::ops::Range<usize>> {
        let max = self.max_medium();
        let mut groups = Vec::new();
        let (mut start, mut used) = (0, 0);
        for (i, &(_, n)) in blocks.iter().enumerate() {
            let need = BLOCK_HEADER + n;
            if used + need > max && i > start {
                groups.push(start..i);
                (start, used) = (i, 0);
            }
            used += need;
        }
        if start < blocks.len() {
            groups.push(start..blocks.len());
        }
        groups
    }

    /// The largest block a packed frame carries: longer blocks must be split.
    pub fn max_packed_block(&self) -> usize {
        self.max_medium() - BLOCK_HEADER
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
        ops.slots[op.slot].live = false;
        ops.free.push(op.slot);
    }

    /// True once every reply of `op` is in.
    pub fn op_done(&self, op: OpId) -> bool {
        self.ops.borrow().slots[op.slot].pending == 0
    }

    /// Waits for `op` (running handlers), copies a get's bytes into `out` (as many as
    /// both hold), frees its slot and returns an atomic's old value (0 for others).
    /// [`AmError::RemoteRefused`] if the target refused it.
    pub fn op_wait(&self, op: OpId, out: &mut [u8]) -> Result<u64, AmError> {
        self.wait_until(|_| self.op_done(op))?;
        let (refused, value) = {
            let ops = self.ops.borrow();
            let s = &ops.slots[op.slot];
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
                let atomic = AtomicOp::from_words(msg.arg(1), msg.arg(3), msg.arg(4));
                let op = msg.arg(0);
                match (atomic, self.own_word(msg.arg(2))) {
                    (Some(a), Some(w)) => reply(TAG_ATOMIC_DONE, &[op, OK, a.apply(w)], &[])?,
                    _ => reply(TAG_ATOMIC_DONE, &[op, REFUSED, 0], &[])?,
                }
            }
            (TAG_PUT_PACKED, true) => {
                let ok = self.scatter_blocks(msg.arg(1), msg.payload());
                reply(
                    TAG_PUT_DONE,
                    &[msg.arg(0), if ok { OK } else { REFUSED }],
                    &[],
                )?;
            }
            (TAG_GET_PACKED, true) => {
                let (op, at) = (msg.arg(0), msg.arg(2));
                match self.gather_blocks(msg.arg(1), msg.payload()) {
                    Some(bytes) => reply(TAG_GET_DATA, &[op, OK, at], &bytes)?,
                    None => reply(TAG_GET_DATA, &[op, REFUSED, at], &[])?,
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
