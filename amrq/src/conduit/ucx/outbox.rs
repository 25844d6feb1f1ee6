//! Coalescing: small frames to a remote rank wait in that destination's batch, and
//! one UCX Active Message carries the batch (`wire`'s AM 5), so a stream of small
//! frames pays one `sendmsg` per batch rather than one per frame.
//!
//! A batch leaves when the next frame would overflow it; when the rank progresses the
//! conduit, which sends every batch first: a poll that finds no frame waiting (or has
//! found frames 16 times in a row), a wait, a flush, leaving, a send that finds no
//! room (a request followed by a wait leaves at once; the replies a rank's handlers
//! send while it works through arrived frames leave together once it is through);
//! when a frame that does not coalesce goes to the same destination (it follows the
//! batch, in order); or when it has waited longer than the deadline since a send or
//! one-sided operation first found it waiting (each of them checks). No thread or timer is involved: a
//! rank that computes without calling amrq keeps its batches until its next call.
//! Frames flagged interrupt never wait.
//!
//! The credits are those of the frames themselves: a frame is charged to its ring when
//! it joins a batch, and the receiver unpacks the batch into its queues frame by frame.

use super::wire::{self, FrameHead};
use crate::conduit::{Coalescing, Rank};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Instant;

/// What a rank's coalescing has done: batches sent, and frames they carried or that
/// wait in a batch now.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec, Message};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// let eps = ucx::threads(2, &spec, &settings).unwrap();
/// for i in 0..10 {
///     eps[0].try_send(1, 0, &Message { tag: 1, args: &[i], ..Message::default() }).unwrap();
/// }
/// assert_eq!(eps[0].coalesced(), ucx::Coalesced { batches: 0, frames: 0, waiting: 10 });
/// assert!(eps[0].peek(0).unwrap().is_none()); // a call that polls sends the batch
/// assert_eq!(eps[0].coalesced(), ucx::Coalesced { batches: 1, frames: 10, waiting: 0 });
/// # std::thread::scope(|s| { for e in eps { s.spawn(move || drop(e)); } });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Coalesced {
    /// Batches sent.
    pub batches: u64,
    /// Frames those batches carried.
    pub frames: u64,
    /// Frames in a batch not sent yet.
    pub waiting: u64,
}

/// The batches of one rank, per destination (owned by its endpoint: one thread).
pub(super) struct Outbox {
    how: Coalescing,
    inner: RefCell<Batches>,
}

struct Batches {
    /// Per destination: the frames waiting, as a batch's bytes.
    bytes: Vec<Vec<u8>>,
    /// Per destination: when a send or operation first found its batch waiting (not
    /// read when a frame joins: a lone request followed by a wait reads no clock).
    since: Vec<Option<Instant>>,
    /// Destinations whose batch holds frames, the oldest first.
    waiting: VecDeque<Rank>,
    /// Buffers UCX is done with, to take the next frames.
    spare: Vec<Vec<u8>>,
    /// Per destination: the frames in its batch.
    frames: Vec<u64>,
    counts: Coalesced,
}

impl Outbox {
    /// An outbox for a job of `size` ranks.
    pub fn new(size: usize, how: Coalescing) -> Self {
        Self {
            how,
            inner: RefCell::new(Batches {
                bytes: vec![Vec::new(); size],
                since: vec![None; size],
                waiting: VecDeque::new(),
                spare: Vec::new(),
                frames: vec![0; size],
                counts: Coalesced::default(),
            }),
        }
    }

    /// True if a frame of `entry` bytes ([`wire::entry_bytes`]) joins a batch.
    #[inline]
    pub fn takes(&self, entry: usize) -> bool {
        entry <= self.how.bytes / 4
    }

    /// Takes `dest`'s batch out if a frame of `entry` bytes would overflow it: it is
    /// sent first, and the frame starts the next one.
    pub fn full_for(&self, dest: Rank, entry: usize) -> Option<Vec<u8>> {
        let mut b = self.inner.borrow_mut();
        (b.bytes[dest].len() + entry > self.how.bytes).then(|| b.take(dest))
    }

    /// Adds a frame to `dest`'s batch (room made by [`Outbox::full_for`]).
    pub fn add(&self, dest: Rank, head: &FrameHead, args: &[u64], payload: &[u8]) {
        let mut b = self.inner.borrow_mut();
        if b.bytes[dest].is_empty() {
            if b.bytes[dest].capacity() == 0 {
                b.bytes[dest] = b.spare.pop().unwrap_or_default();
            }
            b.since[dest] = None;
            b.waiting.push_back(dest);
        }
        wire::append(&mut b.bytes[dest], head, args, payload);
        b.frames[dest] += 1;
        b.counts.waiting += 1;
    }

    /// What coalescing has done so far.
    pub fn counts(&self) -> Coalesced {
        self.inner.borrow().counts
    }

    /// Takes `dest`'s batch out, if it holds frames.
    pub fn take(&self, dest: Rank) -> Option<Vec<u8>> {
        let mut b = self.inner.borrow_mut();
        (!b.bytes[dest].is_empty()).then(|| b.take(dest))
    }

    /// Takes out the oldest batch, if any.
    pub fn take_oldest(&self) -> Option<(Rank, Vec<u8>)> {
        let mut b = self.inner.borrow_mut();
        let dest = *b.waiting.front()?;
        Some((dest, b.take(dest)))
    }

    /// Takes out the oldest batch if it has waited past the deadline since a send or
    /// operation first found it waiting.
    #[inline]
    pub fn take_overdue(&self) -> Option<(Rank, Vec<u8>)> {
        let mut b = self.inner.borrow_mut();
        let dest = *b.waiting.front()?;
        match b.since[dest] {
            None => {
                b.since[dest] = Some(Instant::now());
                None
            }
            Some(t) => (t.elapsed() >= self.how.wait).then(|| (dest, b.take(dest))),
        }
    }

    /// A buffer UCX is done with, for later batches.
    pub fn recycle(&self, mut buf: Vec<u8>) {
        buf.clear();
        let mut b = self.inner.borrow_mut();
        if b.spare.len() < b.bytes.len().min(64) {
            b.spare.push(buf);
        }
    }
}

impl Batches {
    /// Takes `dest`'s batch (which holds frames) out of the waiting list.
    fn take(&mut self, dest: Rank) -> Vec<u8> {
        if let Some(i) = self.waiting.iter().position(|&d| d == dest) {
            self.waiting.remove(i);
        }
        let n = std::mem::take(&mut self.frames[dest]);
        self.counts.batches += 1;
        self.counts.frames += n;
        self.counts.waiting -= n;
        let next = self.spare.pop().unwrap_or_default();
        std::mem::replace(&mut self.bytes[dest], next)
    }
}
