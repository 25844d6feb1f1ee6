//! What travels in a UCX Active Message's header: a frame's (source, channel, tag,
//! flags, kind, args, and where a Long payload goes), or one of the conduit's own
//! messages (credits, setup collectives, goodbye), or a batch of small frames to one
//! destination. Little-endian u64 words; a header or a batch may arrive unaligned, so
//! it is read word by word.
//!
//! ```text
//!   frame   AM 0   w0 = source | channel << 32 | tag << 48
//!                  w1 = flags | kind << 8 | nargs << 16,  w2 = offset (Long), w3.. = args
//!                  data = the payload
//!   batch   AM 5   w0 = source
//!                  data = entries, each one frame, in the order they were sent:
//!                    e0 = entry bytes | channel << 32 | tag << 48
//!                    e1 = flags | kind << 8 | nargs << 16 | payload bytes << 32
//!                    [e2 = offset, Long only], args, then the payload's bytes
//!   credit  AM 1   w0 = source, w1 = what (a channel, or TAG_ON_FREED), w2 = value
//!   coll    AM 2   w0 = source, w1 = epoch, w2 = value
//!   bye     AM 3   w0 = source
//!   want    AM 4   w0 = source, w1 = channel or TAG_ON_FREED (a sender found no room:
//!                  return credits)
//!   resent  AM 6   w0 = source, w1 = its number (see `datagram`)
//!                  data = the message (id, header bytes, header, data)
//! ```

use super::auth::TRAILER;
use crate::conduit::ring::MAX_ARGS;

/// AM id of frames.
pub const AM_FRAME: u32 = 0;
/// AM id of credits a receiver returns.
pub const AM_CREDIT: u32 = 1;
/// AM id of the setup collectives (barrier, all-gather).
pub const AM_COLL: u32 = 2;
/// AM id of a rank's goodbye: it sends nothing after it.
pub const AM_BYE: u32 = 3;
/// AM id of a sender's request for the credits of a ring it found full.
pub const AM_WANT: u32 = 4;
/// AM id of a batch of small frames from one source.
pub const AM_BATCH: u32 = 5;
/// AM id of a message first sent as a datagram, sent again over the endpoint.
pub const AM_RESENT: u32 = 6;

/// A credit's `what` for Tag-On blocks freed (not a channel).
pub const TAG_ON_FREED: u64 = u64::MAX;

/// How a frame's payload travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// In the frame (Short and Medium).
    Medium = 0,
    /// Into the receiver's segment at `offset`.
    Long = 1,
    /// Into a block of the receiver's Tag-On pool.
    TagOn = 2,
}

impl Kind {
    /// The kind a header word names (`w1`'s or `e1`'s second byte), if any.
    pub fn of(w1: u64) -> Option<Self> {
        match (w1 >> 8) & 0xff {
            0 => Some(Kind::Medium),
            1 => Some(Kind::Long),
            2 => Some(Kind::TagOn),
            _ => None,
        }
    }
}

/// A frame's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    /// The sending rank.
    pub source: u32,
    /// The channel at the receiver.
    pub channel: u16,
    /// The frame's tag.
    pub tag: u16,
    /// Its flags (user flags and `Message::INTERRUPT`).
    pub flags: u8,
    /// How its payload travels.
    pub kind: Kind,
    /// Where a Long payload goes in the receiver's segment.
    pub offset: u64,
}

/// Most words of a frame's header.
pub const FRAME_WORDS: usize = 3 + MAX_ARGS;

/// The header words of a frame with `args`, and how many are used.
pub fn frame(h: &FrameHead, args: &[u64]) -> ([u64; FRAME_WORDS], usize) {
    let mut w = [0u64; FRAME_WORDS];
    w[0] = u64::from(h.source) | u64::from(h.channel) << 32 | u64::from(h.tag) << 48;
    w[1] = u64::from(h.flags) | (h.kind as u64) << 8 | (args.len() as u64) << 16;
    w[2] = h.offset;
    let n = args.len().min(MAX_ARGS);
    w[3..3 + n].copy_from_slice(&args[..n]);
    (w, 3 + n)
}

/// Reads a frame header: `None` if it is not one this conduit writes.
pub fn read_frame(bytes: &[u8]) -> Option<(FrameHead, [u64; MAX_ARGS], usize)> {
    let w = |i: usize| word(bytes, i);
    let (w0, w1) = (w(0)?, w(1)?);
    let kind = Kind::of(w1)?;
    let nargs = ((w1 >> 16) & 0xff) as usize;
    if nargs > MAX_ARGS || bytes.len() != (3 + nargs) * 8 || w1 >> 24 != 0 {
        return None;
    }
    let mut args = [0u64; MAX_ARGS];
    for (i, a) in args.iter_mut().enumerate().take(nargs) {
        *a = w(3 + i)?;
    }
    let head = FrameHead {
        source: w0 as u32,
        channel: (w0 >> 32) as u16,
        tag: (w0 >> 48) as u16,
        flags: w1 as u8,
        kind,
        offset: w(2)?,
    };
    Some((head, args, nargs))
}

/// The bytes a frame of `nargs` args and `len` payload bytes takes in a batch.
pub fn entry_bytes(kind: Kind, nargs: usize, len: usize) -> usize {
    8 * (2 + usize::from(kind == Kind::Long) + nargs) + len
}

/// Appends a frame to a batch (the entry [`Batch`] reads back).
pub fn append(batch: &mut Vec<u8>, h: &FrameHead, args: &[u64], payload: &[u8]) {
    let n = args.len().min(MAX_ARGS);
    let bytes = entry_bytes(h.kind, n, payload.len());
    let e0 = bytes as u64 | u64::from(h.channel) << 32 | u64::from(h.tag) << 48;
    let e1 = u64::from(h.flags) | (h.kind as u64) << 8 | (n as u64) << 16;
    batch.reserve(bytes);
    batch.extend_from_slice(&e0.to_le_bytes());
    batch.extend_from_slice(&(e1 | (payload.len() as u64) << 32).to_le_bytes());
    if h.kind == Kind::Long {
        batch.extend_from_slice(&h.offset.to_le_bytes());
    }
    for a in &args[..n] {
        batch.extend_from_slice(&a.to_le_bytes());
    }
    batch.extend_from_slice(payload);
}

/// A frame read from a batch: its header, args and payload.
pub type Entry<'a> = (FrameHead, [u64; MAX_ARGS], usize, &'a [u8]);

/// The frames of a batch from `source`, in order. An entry this conduit does not write
/// is `Err` and skipped (its length says where the next begins); a length that leaves
/// the batch or cannot hold a header ends it with one `Err`, since nothing after it can
/// be found.
pub struct Batch<'a> {
    source: u32,
    rest: &'a [u8],
}

impl<'a> Batch<'a> {
    /// The entries of `data`, a batch `source` sent.
    pub fn new(source: u32, data: &'a [u8]) -> Self {
        Self { source, rest: data }
    }

    /// The one entry of `data` if it holds exactly one (a batch this rank packed).
    pub fn lone(source: u32, data: &'a [u8]) -> Option<Result<Entry<'a>, ()>> {
        let bytes = word(data, 0).map_or(0, |e0| (e0 & 0xffff_ffff) as usize);
        (bytes == data.len()).then(|| Self::new(source, data).next())?
    }

    fn entry(&self, e: &'a [u8]) -> Option<Entry<'a>> {
        let w = |i: usize| word(e, i);
        let (e0, e1) = (w(0)?, w(1)?);
        let kind = Kind::of(e1)?;
        let nargs = ((e1 >> 16) & 0xff) as usize;
        let len = (e1 >> 32) as usize;
        if nargs > MAX_ARGS || (e1 >> 24) & 0xff != 0 || e.len() != entry_bytes(kind, nargs, len) {
            return None;
        }
        let first = 2 + usize::from(kind == Kind::Long);
        let mut args = [0u64; MAX_ARGS];
        for (i, a) in args.iter_mut().enumerate().take(nargs) {
            *a = w(first + i)?;
        }
        let head = FrameHead {
            source: self.source,
            channel: (e0 >> 32) as u16,
            tag: (e0 >> 48) as u16,
            flags: e1 as u8,
            kind,
            offset: if kind == Kind::Long { w(2)? } else { 0 },
        };
        Some((head, args, nargs, &e[8 * (first + nargs)..]))
    }
}

impl<'a> Iterator for Batch<'a> {
    type Item = Result<Entry<'a>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let bytes = word(self.rest, 0).map_or(0, |e0| (e0 & 0xffff_ffff) as usize);
        if bytes < 16 || bytes > self.rest.len() {
            self.rest = &[];
            return Some(Err(()));
        }
        let (e, rest) = self.rest.split_at(bytes);
        self.rest = rest;
        Some(self.entry(e).ok_or(()))
    }
}

/// The `i`th little-endian word of `bytes`, if it holds one.
fn word(bytes: &[u8], i: usize) -> Option<u64> {
    let b = bytes.get(8 * i..8 * i + 8)?;
    Some(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

/// The little-endian words of `bytes` (a trailing partial word is ignored).
pub fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
}

/// The bytes of up to [`FRAME_WORDS`] header words, on the stack: a send allocates
/// nothing (callgrind, `hosts` example: a heap copy cost ~130 instructions a send).
pub struct HeaderBytes {
    bytes: [u8; 8 * FRAME_WORDS + TRAILER],
    len: usize,
}

impl HeaderBytes {
    /// The header's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Appends the MAC's trailer.
    pub fn seal(&mut self, trailer: &[u8; TRAILER]) {
        self.bytes[self.len..self.len + TRAILER].copy_from_slice(trailer);
        self.len += TRAILER;
    }
}

/// The little-endian bytes of header words (at most [`FRAME_WORDS`]).
pub fn as_bytes(w: &[u64]) -> HeaderBytes {
    assert!(w.len() <= FRAME_WORDS, "a UCX header of {} words", w.len());
    let mut h = HeaderBytes {
        bytes: [0; 8 * FRAME_WORDS + TRAILER],
        len: 8 * w.len(),
    };
    for (to, x) in h.bytes.chunks_exact_mut(8).zip(w) {
        to.copy_from_slice(&x.to_le_bytes());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_header_reads_back_as_written() {
        let h = FrameHead {
            source: 7,
            channel: 3,
            tag: 0xbeef,
            flags: 0x11,
            kind: Kind::Long,
            offset: 1 << 40,
        };
        let (w, n) = frame(&h, &[1, 2, 3]);
        let (back, args, nargs) = read_frame(as_bytes(&w[..n]).as_slice()).unwrap();
        assert_eq!((back, &args[..nargs]), (h, &[1u64, 2, 3][..]));
    }

    #[test]
    fn headers_this_conduit_never_writes_are_refused() {
        let (w, n) = frame(
            &FrameHead {
                source: 1,
                channel: 0,
                tag: 0,
                flags: 0,
                kind: Kind::Medium,
                offset: 0,
            },
            &[5],
        );
        let good = as_bytes(&w[..n]).as_slice().to_vec();
        assert!(read_frame(&good).is_some());
        assert!(read_frame(&good[..good.len() - 1]).is_none()); // cut short
        let mut kind = good.clone();
        kind[9] = 9; // no such kind
        assert!(read_frame(&kind).is_none());
        let mut nargs = good.clone();
        nargs[10] = 200; // more args than a frame carries
        assert!(read_frame(&nargs).is_none());
        assert!(read_frame(&[]).is_none());
    }

    fn head(kind: Kind, tag: u16) -> FrameHead {
        FrameHead {
            source: 3,
            channel: 1,
            tag,
            flags: 0x10,
            kind,
            offset: if kind == Kind::Long { 4096 } else { 0 },
        }
    }

    #[test]
    fn a_batch_reads_back_its_frames_in_order() {
        let mut b = Vec::new();
        append(&mut b, &head(Kind::Medium, 1), &[1, 2], &[]);
        append(&mut b, &head(Kind::Long, 2), &[9], b"long");
        append(&mut b, &head(Kind::TagOn, 3), &[], b"tag-on bytes");
        append(&mut b, &head(Kind::Medium, 4), &[7; MAX_ARGS], b"x");
        let read: Vec<_> = Batch::new(3, &b)
            .map(|e| e.map(|(h, a, n, p)| (h, a[..n].to_vec(), p.to_vec())))
            .collect();
        assert_eq!(
            read,
            [
                Ok((head(Kind::Medium, 1), vec![1, 2], vec![])),
                Ok((head(Kind::Long, 2), vec![9], b"long".to_vec())),
                Ok((head(Kind::TagOn, 3), vec![], b"tag-on bytes".to_vec())),
                Ok((head(Kind::Medium, 4), vec![7; MAX_ARGS], b"x".to_vec())),
            ]
        );
    }

    #[test]
    fn a_bad_entry_is_skipped_and_its_neighbours_still_read() {
        let mut b = Vec::new();
        append(&mut b, &head(Kind::Medium, 1), &[1], &[]);
        let bad = b.len();
        append(&mut b, &head(Kind::Medium, 2), &[2], &[]);
        append(&mut b, &head(Kind::Medium, 3), &[3], &[]);
        b[bad + 9] = 7; // no such kind
        let tags: Vec<_> = Batch::new(0, &b).map(|e| e.map(|e| e.0.tag)).collect();
        assert_eq!(tags, [Ok(1), Err(()), Ok(3)]);
        // A length that leaves the batch ends it: nothing after it can be found.
        b[bad] = 200;
        let tags: Vec<_> = Batch::new(0, &b).map(|e| e.map(|e| e.0.tag)).collect();
        assert_eq!(tags, [Ok(1), Err(())]);
    }

    proptest::proptest! {
        /// Whatever a peer sends, reading a batch ends, never panics, and yields
        /// entries that fit what this conduit could have written.
        #[test]
        fn any_bytes_read_as_a_batch_end_without_panicking(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            let mut n = 0;
            for e in Batch::new(1, &data) {
                n += 1;
                if let Ok((h, _, nargs, payload)) = e {
                    proptest::prop_assert!(nargs <= MAX_ARGS);
                    proptest::prop_assert_eq!(h.source, 1);
                    proptest::prop_assert!(payload.len() <= data.len());
                }
            }
            proptest::prop_assert!(n <= data.len() / 16 + 1);
        }

        /// Frames appended read back unchanged, in order.
        #[test]
        fn appended_frames_read_back(frames in proptest::collection::vec((0u8..3, proptest::collection::vec(proptest::prelude::any::<u64>(), 0..=MAX_ARGS), proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100), proptest::prelude::any::<u16>()), 0..20)) {
            let kinds = [Kind::Medium, Kind::Long, Kind::TagOn];
            let mut b = Vec::new();
            for (k, args, payload, tag) in &frames {
                append(&mut b, &head(kinds[*k as usize], *tag), args, payload);
            }
            let read: Vec<_> = Batch::new(3, &b).collect();
            proptest::prop_assert_eq!(read.len(), frames.len());
            for (e, (k, args, payload, tag)) in read.into_iter().zip(&frames) {
                let (h, a, n, p) = e.map_err(|()| proptest::test_runner::TestCaseError::fail("unread"))?;
                proptest::prop_assert_eq!(h, head(kinds[*k as usize], *tag));
                proptest::prop_assert_eq!(&a[..n], &args[..]);
                proptest::prop_assert_eq!(p, &payload[..]);
            }
        }
    }
}
