//! One-sided operations carried as AM frames: the path the RMA layer takes where the
//! conduit lacks put/get or atomics ([`CapFlags`](crate::conduit::CapFlags)), or when
//! asked to on one host ([`Rma::over_frames`](super::Rma::over_frames)). Like
//! GASNet-EX's reference extended API on its core AMs, it needs nothing of a conduit
//! but frames.
//!
//! This is the origin's half: each operation opens a slot in the AM layer's table of
//! operations awaiting replies, and goes out as runtime requests — a put as one Long
//! request (acknowledged once its bytes are in place), a get as one request per
//! [`Am::max_medium`] bytes (each answered by a Medium reply), an atomic as a request
//! whose reply carries the value before, and indexed or strided transfers with many
//! small blocks packed into as few Medium requests as their headers and bytes fit (RQ
//! §4.1: small blocks must not each pay a message). The target's half, the handlers
//! that serve them on its own segment, is the AM layer's (`am/segment_service.rs`).

use super::RmaError;
use crate::am::{
    packed_headers, Am, AmError, Event, OpId, Payload, BLOCK_HEADER, TAG_ATOMIC, TAG_GET,
    TAG_GET_PACKED, TAG_PUT, TAG_PUT_PACKED, TAG_STORE,
};
use crate::conduit::{AtomicOp, Conduit, Rank};

/// Puts `data` at `offset` of `dest`'s segment (a Long request), then, if `counter` is
/// given, bumps the u64 at that offset of `dest`'s segment. Complete (the data in
/// place) when [`Am::op_done`] says so.
pub(super) fn put<S, C: Conduit>(
    am: &Am<S, C>,
    dest: Rank,
    offset: usize,
    data: &[u8],
    counter: Option<usize>,
) -> Result<OpId, AmError> {
    send_put(am, am.op_open(dest, 1, 0), (dest, offset), data, counter)
}

/// [`put`] that no one waits for: `events` are posted once its data (and count) are
/// in place.
pub(super) fn put_posting<S, C: Conduit>(
    am: &Am<S, C>,
    (dest, offset): (Rank, usize),
    data: &[u8],
    counter: Option<usize>,
    events: Vec<Event>,
) -> Result<(), AmError> {
    let op = am.op_open_posting(dest, 1, events);
    send_put(am, op, (dest, offset), data, counter).map(drop)
}

/// Sends put `op`'s Long request.
fn send_put<S, C: Conduit>(
    am: &Am<S, C>,
    op: OpId,
    (dest, offset): (Rank, usize),
    data: &[u8],
    counter: Option<usize>,
) -> Result<OpId, AmError> {
    let c = counter.map_or(0, |c| c as u64 + 1);
    let sent = am.send_request(dest, TAG_PUT, &[op.word(), c], Payload::Long(data, offset));
    am.op_sent(op, sent)
}

/// Puts `data` at `offset` of `dest`'s segment (a Long request) and has `dest` add its
/// length to the u64 at `counter` of its segment; no reply (Split-C's store).
pub(super) fn store<S, C: Conduit>(
    am: &Am<S, C>,
    dest: Rank,
    offset: usize,
    data: &[u8],
    counter: usize,
) -> Result<(), AmError> {
    let c = counter as u64 + 1;
    am.send_request(dest, TAG_STORE, &[c], Payload::Long(data, offset))
}

/// Reads `len` bytes at `offset` of `src`'s segment, in Medium replies of at most
/// [`Am::max_medium`] bytes: [`Am::op_wait`] returns them, or with `land` they land at
/// that offset of this rank's own segment (the caller checked the range).
pub(super) fn get<S, C: Conduit>(
    am: &Am<S, C>,
    src: Rank,
    (offset, len): (usize, usize),
    land: Option<usize>,
) -> Result<OpId, AmError> {
    let chunk = am.max_medium().max(1); // the caller checked `medium_room`
    let pieces = len.div_ceil(chunk).max(1);
    let op = match land {
        None => am.op_open(src, pieces, len),
        Some(at) => am.op_open_landing(src, pieces, len, at).ok_or(
            crate::conduit::ConduitError::OutOfSegment {
                rank: am.rank(),
                offset: at,
                len,
                segment_bytes: am.segment().1,
            },
        )?,
    };
    for k in 0..pieces {
        let at = k * chunk;
        let n = chunk.min(len - at);
        let args = [op.word(), (offset + at) as u64, n as u64, at as u64];
        let sent = am.send_request(src, TAG_GET, &args, Payload::Inline(&[]));
        if sent.is_err() {
            return am.op_sent(op, sent);
        }
    }
    Ok(op)
}

/// Applies `atomic` to the u64 at `offset` of `dest`'s segment; [`Am::op_wait`]
/// returns the value before.
pub(super) fn atomic<S, C: Conduit>(
    am: &Am<S, C>,
    dest: Rank,
    offset: usize,
    atomic: AtomicOp,
) -> Result<OpId, AmError> {
    let op = am.op_open(dest, 1, 0);
    let (k, a, b) = atomic.to_words();
    let args = [op.word(), k, offset as u64, a, b];
    let sent = am.send_request(dest, TAG_ATOMIC, &args, Payload::Inline(&[]));
    am.op_sent(op, sent)
}

/// Puts blocks `(offset, len)` of `dest`'s segment, their bytes concatenated in
/// `data`, packing as many blocks as fit into each Medium request. The caller checked
/// the blocks against the segment, against [`max_packed_block`], and `data.len()`
/// against their sum.
pub(super) fn put_blocks<S, C: Conduit>(
    am: &Am<S, C>,
    dest: Rank,
    blocks: &[(usize, usize)],
    data: &[u8],
) -> Result<OpId, AmError> {
    let groups = pack(am, blocks);
    // No groups (no blocks): nothing to wait for, the operation is done at once.
    let op = am.op_open(dest, groups.len(), 0);
    let mut frame = Vec::with_capacity(am.max_medium());
    let mut at = 0;
    for g in groups {
        let len = packed_headers(&mut frame, &blocks[g.clone()]);
        frame.extend_from_slice(&data[at..at + len]);
        at += len;
        let args = [op.word(), g.len() as u64];
        let sent = am.send_request(dest, TAG_PUT_PACKED, &args, Payload::Inline(&frame));
        if sent.is_err() {
            return am.op_sent(op, sent);
        }
    }
    Ok(op)
}

/// Gets blocks `(offset, len)` of `src`'s segment, concatenated, packing as many
/// blocks as fit into each request and its Medium reply; [`Am::op_wait`] returns the
/// bytes. The caller checked the blocks as for [`put_blocks`].
pub(super) fn get_blocks<S, C: Conduit>(
    am: &Am<S, C>,
    src: Rank,
    blocks: &[(usize, usize)],
) -> Result<OpId, AmError> {
    let groups = pack(am, blocks);
    let total = blocks.iter().map(|b| b.1).sum();
    let op = am.op_open(src, groups.len(), total);
    let mut frame = Vec::with_capacity(am.max_medium());
    let mut at = 0;
    for g in groups {
        let len = packed_headers(&mut frame, &blocks[g.clone()]);
        let args = [op.word(), g.len() as u64, at as u64];
        at += len;
        let sent = am.send_request(src, TAG_GET_PACKED, &args, Payload::Inline(&frame));
        if sent.is_err() {
            return am.op_sent(op, sent);
        }
    }
    Ok(op)
}

/// The smallest Medium payload that carries one-sided operations usefully.
const MIN_MEDIUM: usize = BLOCK_HEADER + 64;

/// The largest Medium payload, or [`RmaError::FramesTooSmall`] if the AM rings are
/// too small to carry gets and packed blocks (rings of a few slots).
pub(super) fn medium_room<S, C: Conduit>(am: &Am<S, C>) -> Result<usize, RmaError> {
    let max_medium = am.max_medium();
    if max_medium < MIN_MEDIUM {
        return Err(RmaError::FramesTooSmall {
            max_medium,
            needed: MIN_MEDIUM,
        });
    }
    Ok(max_medium)
}

/// The largest block a packed frame carries: longer blocks must be split.
pub(super) fn max_packed_block<S, C: Conduit>(am: &Am<S, C>) -> Result<usize, RmaError> {
    Ok(medium_room(am)? - BLOCK_HEADER)
}

/// Groups of consecutive blocks whose headers and bytes fit one Medium payload (a
/// block too large for one is split beforehand: see [`max_packed_block`]).
fn pack<S, C: Conduit>(am: &Am<S, C>, blocks: &[(usize, usize)]) -> Vec<std::ops::Range<usize>> {
    let max = am.max_medium();
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
