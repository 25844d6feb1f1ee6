//! Point-to-point chunk channels for the collectives, built on RMA: per (sender,
//! receiver) pair one slot of a chunk ([`chunk_bytes`]) in the receiver's mailbox and
//! two counters, so that a sender never overwrites a chunk the receiver has not taken.
//!
//! ```text
//! mailbox of rank d (symmetric):
//!   full[0..n]   one 64-byte line per sender s: chunks s has put into d's slot
//!   taken[0..n]  one line per receiver r: chunks r has taken from this rank's sends
//!   slot[0..n]   a chunk's bytes per sender s
//! ```
//! Sending chunk k to d: wait until `taken[d]` (in the sender's own mailbox) reaches
//! k − 1, put the bytes into d's `slot[me]`, then store k into d's `full[me]` (Release).
//! Taking chunk k from s: wait until `full[s]` reaches k (Acquire), read `slot[s]`, then
//! store k into s's `taken[me]` (Release). One chunk in flight per pair: the receiver
//! paces the sender (window flow control with a window of one).
//!
//! A call may split the slot into a window of `w` pieces of `chunk / w` bytes: chunk k
//! then goes to piece (k − 1) mod w, and a sender waits only until `taken` reaches
//! k − w, so up to w chunks are in flight (for a rate-paced exchange, where the credits
//! are a guard, not the pace). A chunk sent with another window than the one before it
//! to the same rank waits until every earlier chunk is taken, as the pieces move.

use crate::conduit::{Conduit, Rank};
use crate::rma::{Rma, RmaError};
use crate::util::Backoff;
use std::cell::RefCell;

/// Bytes of one chunk in a job of up to 128 ranks, the largest (a multiple of every
/// `Word` size).
///
/// ```
/// // A broadcast or reduce moves its data CHUNK bytes at a time through each mailbox.
/// assert_eq!(amrq::coll::CHUNK, 32 << 10);
/// ```
pub const CHUNK: usize = 32 << 10;

/// The slots of a mailbox together, past which a larger job gets smaller chunks.
const SLOTS_BYTES: usize = 4 << 20;

/// The smallest chunk.
const MIN_CHUNK: usize = 1 << 10;

/// Bytes of one chunk in a job of `ranks` ranks: [`CHUNK`] up to 128 ranks, then
/// smaller (a power of two, at least 1 KiB), so that a rank's mailbox, a slot per
/// peer, stays within 4 MiB of its segment up to 4 096 ranks.
///
/// ```
/// use amrq::coll::{chunk_bytes, CHUNK};
/// assert_eq!(chunk_bytes(2), CHUNK);
/// assert_eq!(chunk_bytes(256), CHUNK / 2);
/// assert_eq!(chunk_bytes(1100), 2 << 10);
/// assert_eq!(chunk_bytes(100_000), 1 << 10);
/// ```
pub fn chunk_bytes(ranks: usize) -> usize {
    let fair = SLOTS_BYTES / ranks.max(1);
    let pow2 = if fair == 0 { 0 } else { 1 << fair.ilog2() };
    pow2.clamp(MIN_CHUNK, CHUNK)
}

const LINE: usize = 64;

/// One rank's ends of every channel (over the rank's one-sided operations, passed to
/// each call).
pub(super) struct Channels {
    mailbox: usize,
    n: usize,
    /// Bytes of a slot ([`chunk_bytes`] of the job).
    chunk: usize,
    /// Chunks sent to each rank, and taken from each rank.
    sent: RefCell<Vec<u64>>,
    taken: RefCell<Vec<u64>>,
    /// The window of the last chunk sent to each rank.
    window_to: RefCell<Vec<usize>>,
}

impl Channels {
    /// Bytes of a mailbox for `n` ranks.
    pub(super) fn mailbox_bytes(n: usize) -> usize {
        2 * n * LINE + n * chunk_bytes(n)
    }

    /// Bytes of a chunk in this job.
    pub(super) fn chunk(&self) -> usize {
        self.chunk
    }

    /// Where chunk `k` lies in a slot split into `window` pieces.
    fn piece(&self, k: u64, window: usize) -> usize {
        ((k - 1) % window as u64) as usize * (self.chunk / window)
    }

    /// The channels of this rank, over the symmetric `mailbox` (zeroed, of
    /// [`Channels::mailbox_bytes`]).
    pub(super) fn new<S, C: Conduit>(rma: &Rma<S, C>, mailbox: usize) -> Self {
        let n = rma.am().size();
        Self {
            mailbox,
            n,
            chunk: chunk_bytes(n),
            sent: RefCell::new(vec![0; n]),
            taken: RefCell::new(vec![0; n]),
            window_to: RefCell::new(vec![1; n]),
        }
    }

    fn full(&self, sender: Rank) -> usize {
        self.mailbox + sender * LINE
    }

    fn taken_by(&self, receiver: Rank) -> usize {
        self.mailbox + (self.n + receiver) * LINE
    }

    fn slot(&self, sender: Rank) -> usize {
        self.mailbox + 2 * self.n * LINE + sender * self.chunk
    }

    /// Waits until the word at `offset` of this rank's segment reaches `k`, running
    /// handlers meanwhile.
    fn wait_for<S, C: Conduit>(
        &self,
        rma: &Rma<S, C>,
        offset: usize,
        k: u64,
    ) -> Result<(), RmaError> {
        let me = rma.am().rank();
        let mut backoff = Backoff::new();
        // The read is Acquire: the chunk (or the slot's release) is seen.
        while rma.load(me, offset)? < k {
            if rma.am().poll_runtime()? == 0 {
                if backoff.is_yielding() {
                    rma.am().rq().conduit().check_peers()?;
                }
                backoff.snooze();
            } else {
                backoff.reset();
            }
        }
        Ok(())
    }

    /// Sends `data` (at most a chunk's bytes / `window`) to `dest` as one chunk, up to
    /// `window` chunks ahead of the receiver.
    pub(super) fn send<S, C: Conduit>(
        &self,
        rma: &Rma<S, C>,
        dest: Rank,
        data: &[u8],
        window: usize,
    ) -> Result<(), RmaError> {
        debug_assert!(data.len() <= self.chunk / window);
        let k = self.sent.borrow()[dest] + 1;
        let ahead = match self.window_to.borrow()[dest] == window {
            true => window as u64,
            false => 1, // the pieces move: every earlier chunk taken first
        };
        self.wait_for(rma, self.taken_by(dest), k.saturating_sub(ahead))?;
        let me = rma.am().rank();
        rma.put(dest, self.slot(me) + self.piece(k, window), data)?;
        rma.store(dest, self.full(me), k)?;
        self.sent.borrow_mut()[dest] = k;
        self.window_to.borrow_mut()[dest] = window;
        Ok(())
    }

    /// Takes the next chunk from `source` into `out` (its length and the window it
    /// was sent with are the chunk's: both sides know them).
    pub(super) fn recv<S, C: Conduit>(
        &self,
        rma: &Rma<S, C>,
        source: Rank,
        out: &mut [u8],
        window: usize,
    ) -> Result<(), RmaError> {
        debug_assert!(out.len() <= self.chunk / window);
        let k = self.taken.borrow()[source] + 1;
        self.wait_for(rma, self.full(source), k)?;
        let me = rma.am().rank();
        rma.get(me, self.slot(source) + self.piece(k, window), out)?;
        rma.store(source, self.taken_by(me), k)?;
        self.taken.borrow_mut()[source] = k;
        Ok(())
    }
}
