//! What travels in a UCX Active Message's header: a frame's (source, channel, tag,
//! flags, kind, args, and where a Long payload goes), or one of the conduit's own
//! messages (credits, setup collectives, goodbye). Little-endian u64 words; the header
//! may arrive unaligned, so it is read word by word.
//!
//! ```text
//!   frame   AM 0   w0 = source | channel << 32 | tag << 48
//!                  w1 = flags | kind << 8 | nargs << 16,  w2 = offset (Long), w3.. = args
//!                  data = the payload
//!   credit  AM 1   w0 = source, w1 = what (a channel, or TAG_ON_FREED), w2 = value
//!   coll    AM 2   w0 = source, w1 = epoch, w2 = value
//!   bye     AM 3   w0 = source
//!   want    AM 4   w0 = source, w1 = channel (a sender found no room: return credits)
//! ```

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
    let w = |i: usize| words(bytes).nth(i);
    let (w0, w1) = (w(0)?, w(1)?);
    let kind = match (w1 >> 8) & 0xff {
        0 => Kind::Medium,
        1 => Kind::Long,
        2 => Kind::TagOn,
        _ => return None,
    };
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

/// The little-endian words of `bytes` (a trailing partial word is ignored).
pub fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
}

/// The bytes of up to [`FRAME_WORDS`] header words, on the stack: a send allocates
/// nothing (callgrind, `hosts` example: a heap copy cost ~130 instructions a send).
pub struct HeaderBytes {
    bytes: [u8; 8 * FRAME_WORDS],
    len: usize,
}

impl HeaderBytes {
    /// The header's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The little-endian bytes of header words (at most [`FRAME_WORDS`]).
pub fn as_bytes(w: &[u64]) -> HeaderBytes {
    assert!(w.len() <= FRAME_WORDS, "a UCX header of {} words", w.len());
    let mut h = HeaderBytes {
        bytes: [0; 8 * FRAME_WORDS],
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
}
