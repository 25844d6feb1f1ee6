//! The target's half of one-sided operations carried as frames: runtime handlers (tags
//! below the user's) that act on this rank's own segment and reply. The origin's half
//! (issuing, splitting, packing, waiting) is the RMA layer's `rma/frames.rs`; these
//! live here because every rank serves them whether or not it built an `Rma`, and the
//! AM layer cannot call up into the RMA layer (GASNet-EX's core likewise registers its
//! reference extended API's handlers in its own table).
//!
//! | request (args) | at the target | reply (args) |
//! |---|---|---|
//! | `PUT` Long (op, counter + 1 or 0) | the payload is already in its segment; bumps the counter | `PUT_DONE` (op, status) |
//! | `GET` (op, offset, len, at) | reads its segment | `GET_DATA` Medium (op, status, at) + bytes |
//! | `ATOMIC` (op, kind, offset, a, b) | the atomic on its segment's word | `ATOMIC_DONE` (op, status, old) |
//! | `PUT_PACKED` Medium (op, blocks) + (offset, len)… + bytes | scatters the blocks into its segment | `PUT_DONE` (op, status) |
//! | `GET_PACKED` Medium (op, blocks, at) + (offset, len)… | gathers the blocks | `GET_DATA` Medium (op, status, at) + bytes |
//! | `STORE` Long (counter + 1 or 0) | the payload is already in its segment; adds its length to the counter | none |
//!
//! Replies land in the origin's table of operations (`ops.rs`). Nothing a peer sends
//! can make a handler write or read outside this rank's segment: every range is
//! checked, and a bad one is answered `REFUSED`.

use super::ops::{Landed, OK, REFUSED};
use super::payload::Payload;
use super::{Am, AmError, Msg, ReplyHandler};
use crate::conduit::{AtomicOp, Conduit, PayloadView};
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) const TAG_PUT: u16 = 1;
const TAG_PUT_DONE: u16 = 2;
pub(crate) const TAG_GET: u16 = 3;
const TAG_GET_DATA: u16 = 4;
pub(crate) const TAG_ATOMIC: u16 = 5;
const TAG_ATOMIC_DONE: u16 = 6;
pub(crate) const TAG_PUT_PACKED: u16 = 7;
pub(crate) const TAG_GET_PACKED: u16 = 8;
pub(crate) const TAG_STORE: u16 = 9;

/// A block of a segment: (offset, len).
type Block = (usize, usize);

/// Bytes of one block's (offset, len) header in a packed frame.
pub(crate) const BLOCK_HEADER: usize = 16;

/// Starts `frame` afresh with the (offset, len) headers of `blocks`; returns their
/// total length in bytes.
pub(crate) fn packed_headers(frame: &mut Vec<u8>, blocks: &[Block]) -> usize {
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
            let at = out.len();
            out.resize(at + n, 0);
            // SAFETY: `o + n` ≤ the segment's length (`blocks` checked).
            unsafe { segment_bytes(base, o, n) }.copy_to(&mut out[at..]);
        }
        Some(out)
    }

    /// A copy of the `len` bytes at `offset` of this rank's segment, if inside and one
    /// reply holds them.
    fn own_bytes(&self, offset: u64, len: u64) -> Option<Vec<u8>> {
        let (base, seg) = self.segment();
        let (o, n) = (usize::try_from(offset).ok()?, usize::try_from(len).ok()?);
        if o.checked_add(n)? > seg || n > self.max_medium() {
            return None;
        }
        // SAFETY: `o + n` ≤ the segment's length (checked above).
        Some(unsafe { segment_bytes(base, o, n) }.to_vec())
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

    /// Serves a runtime request or reply of the one-sided operations; `false` if `tag`
    /// is not one of theirs.
    pub(super) fn serve_one_sided(
        &self,
        is_request: bool,
        tag: u16,
        msg: Msg<'_>,
    ) -> Result<bool, AmError> {
        let reply = |tag: u16, args: &[u64], payload: &[u8]| {
            self.send_reply(
                msg.source(),
                ReplyHandler(tag),
                args,
                Payload::Inline(payload),
            )
        };
        let status = |ok: bool| if ok { OK } else { REFUSED };
        let op = || msg.arg(0);
        match (tag, is_request) {
            (TAG_PUT, true) => {
                let bumped = match msg.arg(1)?.checked_sub(1) {
                    None => true,
                    // ORDERING: Release: the put's bytes (in place before this frame
                    // was published) are seen by whoever reads the count with Acquire.
                    Some(off) => self
                        .own_word(off)
                        .map(|w| w.fetch_add(1, Ordering::Release))
                        .is_some(),
                };
                reply(TAG_PUT_DONE, &[op()?, status(bumped)], &[])?;
            }
            (TAG_GET, true) => match self.own_bytes(msg.arg(1)?, msg.arg(2)?) {
                Some(bytes) => reply(TAG_GET_DATA, &[op()?, OK, msg.arg(3)?], &bytes)?,
                None => reply(TAG_GET_DATA, &[op()?, REFUSED, msg.arg(3)?], &[])?,
            },
            (TAG_ATOMIC, true) => {
                let atomic = AtomicOp::from_words(msg.arg(1)?, msg.arg(3)?, msg.arg(4)?);
                match (atomic, self.own_word(msg.arg(2)?)) {
                    (Some(a), Some(w)) => reply(TAG_ATOMIC_DONE, &[op()?, OK, a.apply(w)], &[])?,
                    _ => reply(TAG_ATOMIC_DONE, &[op()?, REFUSED, 0], &[])?,
                }
            }
            (TAG_STORE, true) => {
                // No reply (Split-C's store): a counter the target does not have is
                // the sender's fault, recorded as such.
                if let Some(off) = msg.arg(0)?.checked_sub(1) {
                    let Some(w) = self.own_word(off) else {
                        return Err(AmError::BadRuntimeMessage {
                            source_rank: msg.source(),
                            what: "a store's counter is outside the segment or misaligned",
                        });
                    };
                    // ORDERING: Release: the store's bytes (in place before this frame
                    // was published) are seen by whoever reads the count with Acquire.
                    w.fetch_add(msg.payload_len() as u64, Ordering::Release);
                }
            }
            (TAG_PUT_PACKED, true) => {
                let ok = self.scatter_blocks(msg.arg(1)?, &msg.payload());
                reply(TAG_PUT_DONE, &[op()?, status(ok)], &[])?;
            }
            (TAG_GET_PACKED, true) => match self.gather_blocks(msg.arg(1)?, &msg.payload()) {
                Some(bytes) => reply(TAG_GET_DATA, &[op()?, OK, msg.arg(2)?], &bytes)?,
                None => reply(TAG_GET_DATA, &[op()?, REFUSED, msg.arg(2)?], &[])?,
            },
            (TAG_PUT_DONE, false) => self.land_reply(&msg, Landed::Status)?,
            (TAG_GET_DATA, false) => {
                let at = usize::try_from(msg.arg(2)?).unwrap_or(usize::MAX);
                self.land_reply(
                    &msg,
                    Landed::Bytes {
                        at,
                        bytes: &msg.payload(),
                    },
                )?
            }
            (TAG_ATOMIC_DONE, false) => self.land_reply(&msg, Landed::Value(msg.arg(2)?))?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The `n` bytes at `o` of a segment at `base`, which peers may write meanwhile: only
/// copied out, never lent.
///
/// # Safety
/// `o + n` ≤ the segment's length; the segment stays mapped while the view lives.
unsafe fn segment_bytes<'a>(base: std::ptr::NonNull<u8>, o: usize, n: usize) -> PayloadView<'a> {
    // SAFETY: the caller's range lies inside the mapped segment.
    unsafe { PayloadView::shared(base.as_ptr().add(o), n) }
}
