//! Only the job's ranks get in: every UCX message carries a MAC under a key derived
//! from the job key for its (source, destination) direction, so a process that reaches
//! a rank's UCX listener cannot send in a rank's name, and a sequence number that
//! only grows, so a message cannot be played again.
//!
//! The MAC is a Carter–Wegman one (`mac.rs`): POLYVAL (GHASH's little-endian twin,
//! carry-less multiplication) of the message, masked with AES-128 of its nonce: one AES
//! block and a POLYVAL pass per message, so a batch of small frames shares one (~20 ns
//! for a header alone, ~6 GB/s over data: a 8 KiB batch ~1.4 µs on this project's VM).
//! It covers the message's id, its header and its data, except the payload of a Long
//! frame sent alone, which it binds by length only (hashing 64 KiB payloads would cost
//! their bandwidth): a process that can rewrite a rank's live TCP stream could change
//! that payload; one that can only connect cannot.
//!
//! What it cannot cover is UCX's own tcp transport: its receive path writes a peer's put
//! to whatever address the peer names (no key check), after a handshake anyone can make.
//! The guide says so, and how to keep such peers out (a private network, or pinned and
//! filtered ports).
//!
//! ```text
//!   header = body (the words of `wire`) | nonce (8 B: seq | lane << 63) | tag (16 B)
//! ```
//! A sender's messages go out on two lanes, each numbered in the order it seals them:
//! the rank's own thread, and its progress thread, which sends only credits. The
//! receiver keeps, per (source, lane), the largest number taken and which of the
//! [`WINDOW`] numbers below it were taken, as IPsec does: a number seen before, or
//! older than the window, is refused; a message that overtakes others on the way (UCX
//! does not promise a connection's order across its lanes and fragments) is not.

use super::mac::Mac;
use super::wire::words;
use crate::bootstrap::JobKey;
use crate::conduit::Rank;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Bytes the MAC adds to a message's header: the nonce and the tag.
pub const TRAILER: usize = 24;

/// The lane of messages sent by the rank's own thread.
pub const OWN: usize = 0;
/// The lane of credits sent by the rank's progress thread.
pub const PROGRESS: usize = 1;

/// Sequence numbers below the largest taken that may still arrive, per lane.
pub const WINDOW: u64 = 64;

/// The nonce bit of notes (`seal_note`): a sequence number never reaches it, so no
/// nonce is used twice under a key, and a message bearing it is refused.
const NOTES: u64 = 1 << 62;

/// The note of a datagram's acknowledgement: words [this rank, the next number it
/// takes]. (A note's id is no Active Message's: its MAC is bound to it.)
pub const ACK_NOTE: u32 = u32::MAX;
/// The note of a datagram's number: words [its source, its number, the nonce of the
/// message it carries], so that a message cannot be played again under another one.
pub const NUMBER_NOTE: u32 = u32::MAX - 1;

/// The key of messages from `source` to `dest` in the job of `job`.
fn key(job: &JobKey, source: Rank, dest: Rank) -> Mac {
    let k = job.mac(
        "amrq ucx data",
        &[&(source as u64).to_le_bytes(), &(dest as u64).to_le_bytes()],
    );
    Mac::new(k[..16].try_into().expect("a job MAC has 32 bytes"))
}

/// Why an arrived message was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Too short to carry a MAC, or naming a sender outside the job.
    Malformed,
    /// Its MAC is not one rank `.0`'s key makes, or its sequence number was seen:
    /// forged or played again.
    Unproven(Rank),
}

/// One rank's keys, to and from every rank, and the sequence numbers.
pub struct Auth {
    me: Rank,
    to: Vec<Mac>,
    from: Vec<Mac>,
    /// Per destination and lane: the next sequence number.
    next: Vec<[AtomicU64; 2]>,
    /// Per destination: notes sealed (their nonces are apart, [`NOTES`]).
    notes: Vec<AtomicU64>,
    /// Per source and lane: the largest sequence number taken, and which of the
    /// [`WINDOW`] below it were (bit `i`: number `largest - 1 - i`).
    seen: Vec<[Mutex<(u64, u64)>; 2]>,
}

impl Auth {
    /// Rank `me`'s keys in a job of `size` ranks with key `job`.
    pub fn new(job: &JobKey, me: Rank, size: usize) -> Self {
        let lanes = || [AtomicU64::new(0), AtomicU64::new(0)];
        let windows = || [Mutex::new((0, 0)), Mutex::new((0, 0))];
        Self {
            me,
            to: (0..size).map(|d| key(job, me, d)).collect(),
            from: (0..size).map(|s| key(job, s, me)).collect(),
            next: (0..size).map(|_| lanes()).collect(),
            notes: (0..size).map(|_| AtomicU64::new(0)).collect(),
            seen: (0..size).map(|_| windows()).collect(),
        }
    }

    /// The trailer of message `id` to `dest` on `lane`: `body` is its header's words,
    /// `covered` the part of its `len` data bytes the MAC covers.
    pub fn seal(
        &self,
        dest: Rank,
        lane: usize,
        id: u32,
        body: &[u8],
        covered: &[u8],
        len: usize,
    ) -> [u8; TRAILER] {
        // ORDERING: Relaxed: a count, each lane used by one thread at a time.
        let seq = self.next[dest][lane].fetch_add(1, Ordering::Relaxed) + 1;
        let nonce = seq | (lane as u64) << 63;
        let mut t = [0u8; TRAILER];
        t[..8].copy_from_slice(&nonce.to_le_bytes());
        t[8..].copy_from_slice(&self.to[dest].tag(nonce, id, body, covered, len));
        t
    }

    /// Checks an arrived message `id` whose `header` ends in a trailer: its body and
    /// the source it proves, or why it is refused. `cover` picks the part of `data`
    /// the MAC covers, from the body.
    pub fn open<'a>(
        &self,
        id: u32,
        header: &'a [u8],
        data: &[u8],
        cover: impl FnOnce(&[u8]) -> bool,
    ) -> Result<(&'a [u8], Rank), Refused> {
        self.check(id, header, data, cover, true)
    }

    /// [`Auth::open`] without taking its sequence number: whether a message that may
    /// have come before is one its source sealed.
    pub fn vouch(
        &self,
        id: u32,
        header: &[u8],
        data: &[u8],
        cover: impl FnOnce(&[u8]) -> bool,
    ) -> Result<Rank, Refused> {
        self.check(id, header, data, cover, false).map(|(_, r)| r)
    }

    fn check<'a>(
        &self,
        id: u32,
        header: &'a [u8],
        data: &[u8],
        cover: impl FnOnce(&[u8]) -> bool,
        take_it: bool,
    ) -> Result<(&'a [u8], Rank), Refused> {
        let Some(n) = header.len().checked_sub(TRAILER).filter(|&n| n >= 8) else {
            return Err(Refused::Malformed);
        };
        let (body, trailer) = header.split_at(n);
        let source = words(body)
            .next()
            .map_or(usize::MAX, |w| (w & 0xffff_ffff) as usize);
        if source >= self.from.len() || source == self.me {
            return Err(Refused::Malformed);
        }
        let nonce = words(trailer).next().unwrap_or(0);
        if nonce & NOTES != 0 {
            return Err(Refused::Unproven(source));
        }
        let covered = if cover(body) { data } else { &[] };
        let tag = self.from[source].tag(nonce, id, body, covered, data.len());
        if !same_tag(&tag, &trailer[8..]) {
            return Err(Refused::Unproven(source));
        }
        if !take_it {
            return Ok((body, source));
        }
        let (lane, seq) = ((nonce >> 63) as usize, nonce & !(1 << 63));
        let mut w = self.seen[source][lane]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match take(&mut w, seq) {
            true => Ok((body, source)),
            false => Err(Refused::Unproven(source)),
        }
    }
}

impl Auth {
    /// Note `id` to `dest` sealed: `words` (the first: this rank) and a MAC without a
    /// sequence number, for what playing again changes nothing (an acknowledgement
    /// only ever says more than an older one; a number is taken once, its message's
    /// nonce with it).
    pub fn seal_note<const N: usize>(&self, dest: Rank, id: u32, words: [u64; N]) -> Vec<u8> {
        // ORDERING: Relaxed: a count, unique per value.
        let nonce = NOTES | self.notes[dest].fetch_add(1, Ordering::Relaxed);
        let body = super::wire::as_bytes(&words);
        let mut note = Vec::with_capacity(8 * N + TRAILER);
        note.extend_from_slice(body.as_slice());
        note.extend_from_slice(&nonce.to_le_bytes());
        note.extend_from_slice(&self.to[dest].tag(nonce, id, body.as_slice(), &[], 0));
        note
    }

    /// The words of note `id` (`N` of them, the first its sender) if its MAC proves
    /// that sender.
    pub fn open_note<const N: usize>(&self, id: u32, sealed: &[u8]) -> Option<[u64; N]> {
        let n = sealed.len().checked_sub(TRAILER).filter(|&n| n == 8 * N)?;
        let (body, trailer) = sealed.split_at(n);
        let mut said = [0u64; N];
        said.iter_mut().zip(words(body)).for_each(|(s, w)| *s = w);
        let nonce = words(trailer).next()?;
        let source = usize::try_from(*said.first()?).ok()?;
        let mac = self.from.get(source).filter(|_| nonce & NOTES != 0)?;
        same_tag(&mac.tag(nonce, id, body, &[], 0), &trailer[8..]).then_some(said)
    }

    /// True once a message from `source` was taken: it has reached this rank.
    pub fn heard_from(&self, source: Rank) -> bool {
        self.seen.get(source).is_some_and(|lanes| {
            lanes
                .iter()
                .any(|w| w.lock().unwrap_or_else(|e| e.into_inner()).0 > 0)
        })
    }
}

/// True if the tag made is the one that came, compared in constant time (how long it
/// takes says nothing of where they differ).
fn same_tag(made: &[u8], came: &[u8]) -> bool {
    made.len() == came.len() && made.iter().zip(came).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

/// The nonce of a sealed message's `header` (see the module doc), if it has a trailer.
pub fn nonce_of(header: &[u8]) -> Option<u64> {
    let at = header.len().checked_sub(TRAILER)?;
    Some(u64::from_le_bytes(header.get(at..at + 8)?.try_into().ok()?))
}

/// Takes sequence number `seq` into window `w` (the largest taken, and the bits of the
/// [`WINDOW`] below it): false if it was taken before or is older than the window.
fn take(w: &mut (u64, u64), seq: u64) -> bool {
    let (largest, bits) = *w;
    if seq > largest {
        let shift = seq - largest;
        // The old largest becomes bit `shift - 1`; what falls out of the window goes.
        let moved = if shift > WINDOW {
            0
        } else {
            (bits << (shift - 1) << 1) | 1 << (shift - 1)
        };
        *w = (seq, moved);
        return true;
    }
    let back = largest - seq;
    if back == 0 || back > WINDOW || bits & 1 << (back - 1) != 0 {
        return false;
    }
    w.1 |= 1 << (back - 1);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Auth, Auth) {
        let job = JobKey::parse("00112233445566778899aabbccddeeff").unwrap();
        (Auth::new(&job, 0, 3), Auth::new(&job, 1, 3))
    }

    /// Rank 0's message `id` to rank 1 with `body` (its source word first) and `data`.
    fn sealed(a: &Auth, id: u32, body: &[u8], data: &[u8]) -> Vec<u8> {
        let mut h = body.to_vec();
        h.extend_from_slice(&a.seal(1, OWN, id, body, data, data.len()));
        h
    }

    const BODY: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn a_sealed_message_opens_once() {
        let (a, b) = pair();
        let h = sealed(&a, 5, &BODY, b"data");
        assert_eq!(b.open(5, &h, b"data", |_| true), Ok((&BODY[..], 0)));
        // Played again: refused, naming the source it claims.
        assert_eq!(b.open(5, &h, b"data", |_| true), Err(Refused::Unproven(0)));
        // Later messages still open, and earlier ones never again.
        let h2 = sealed(&a, 5, &BODY, b"more");
        assert!(b.open(5, &h2, b"more", |_| true).is_ok());
        assert!(b.open(5, &h, b"data", |_| true).is_err());
    }

    #[test]
    fn a_changed_byte_anywhere_is_refused() {
        let (a, b) = pair();
        let h = sealed(&a, 5, &BODY, b"data");
        for i in 8..h.len() {
            let mut bad = h.clone();
            bad[i] ^= 1;
            assert!(b.open(5, &bad, b"data", |_| true).is_err(), "byte {i}");
        }
        assert!(b.open(4, &h, b"data", |_| true).is_err(), "another id");
        assert!(b.open(5, &h, b"datb", |_| true).is_err(), "other data");
        assert!(b.open(5, &h, b"dat", |_| true).is_err(), "shorter data");
        assert!(
            b.open(5, &h, b"data", |_| true).is_ok(),
            "the message itself"
        );
    }

    #[test]
    fn another_source_or_job_cannot_seal_for_a_rank() {
        let (_, b) = pair();
        let other = JobKey::parse("ffeeddccbbaa99887766554433221100").unwrap();
        let outsider = Auth::new(&other, 0, 3);
        let h = sealed(&outsider, 5, &BODY, b"x");
        assert_eq!(b.open(5, &h, b"x", |_| true), Err(Refused::Unproven(0)));
        // Rank 2 of the job cannot claim to be rank 0: its key is its own.
        let job = JobKey::parse("00112233445566778899aabbccddeeff").unwrap();
        let c = Auth::new(&job, 2, 3);
        let mut h = BODY.to_vec();
        h.extend_from_slice(&c.seal(1, OWN, 5, &BODY, b"x", 1));
        assert_eq!(b.open(5, &h, b"x", |_| true), Err(Refused::Unproven(0)));
        // Too short, or naming the receiver itself or a rank outside the job.
        assert_eq!(b.open(5, &h[..20], b"x", |_| true), Err(Refused::Malformed));
        let mut me = h.clone();
        me[0] = 1;
        assert_eq!(b.open(5, &me, b"x", |_| true), Err(Refused::Malformed));
        me[0] = 9;
        assert_eq!(b.open(5, &me, b"x", |_| true), Err(Refused::Malformed));
    }

    #[test]
    fn an_uncovered_payload_is_bound_by_its_length() {
        let (a, b) = pair();
        let mut h = BODY.to_vec();
        h.extend_from_slice(&a.seal(1, OWN, 0, &BODY, &[], 4));
        assert!(b.open(0, &h, b"abcd", |_| false).is_ok());
        let mut h2 = BODY.to_vec();
        h2.extend_from_slice(&a.seal(1, OWN, 0, &BODY, &[], 4));
        assert!(
            b.open(0, &h2, b"abcde", |_| false).is_err(),
            "another length"
        );
    }

    #[test]
    fn a_window_takes_each_number_once_in_any_order_within_it() {
        let mut w = (0, 0);
        assert!(take(&mut w, 3));
        assert!(take(&mut w, 1), "overtaken by 3");
        assert!(!take(&mut w, 1), "again");
        assert!(!take(&mut w, 3), "again");
        assert!(take(&mut w, 2));
        assert!(take(&mut w, 100));
        assert!(take(&mut w, 100 - WINDOW), "the window's oldest");
        assert!(!take(&mut w, 100 - WINDOW - 1), "older than the window");
        assert!(!take(&mut w, 3), "long gone");
        assert!(take(&mut w, 99) && !take(&mut w, 99));
        assert!(take(&mut w, 100 + 2 * WINDOW));
        assert!(!take(&mut w, 100), "fell out of the window");
        // Every number of a shuffled run of 10 000 is taken once.
        let mut w = (0, 0);
        let mut order: Vec<u64> = (1..=10_000).collect();
        for c in order.chunks_mut(32) {
            c.reverse(); // each number overtaken by up to 31 later ones
        }
        assert!(order.iter().all(|&s| take(&mut w, s)));
        assert!(order.iter().all(|&s| !take(&mut w, s)));
    }

    #[test]
    fn the_two_lanes_keep_their_own_order() {
        let (a, b) = pair();
        let own = sealed(&a, 1, &BODY, b"");
        let mut progress = BODY.to_vec();
        progress.extend_from_slice(&a.seal(1, PROGRESS, 1, &BODY, b"", 0));
        // The progress thread's first credit may arrive after the rank's second message.
        let own2 = sealed(&a, 1, &BODY, b"");
        assert!(b.open(1, &own, b"", |_| true).is_ok());
        assert!(b.open(1, &own2, b"", |_| true).is_ok());
        assert!(b.open(1, &progress, b"", |_| true).is_ok());
        assert!(b.open(1, &progress, b"", |_| true).is_err());
    }
}
