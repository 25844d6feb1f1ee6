//! The all-to-all exchange (RQ §4's transpose): in step i = 1 … N−1 each rank sends to
//! `me + i` and receives from `me − i`, strictly alternating one chunk out and one chunk
//! in, so every rank sends to one rank and receives from one rank at a time and no
//! receiver is the target of everyone at once.
//!
//! How a sender keeps from outrunning its receiver is [`Matching`]: a credit per chunk
//! (window flow control with a window of one, the receiver's acknowledgement pacing the
//! sender), or the paper's bandwidth matching, a rate the sender keeps to, with credits
//! for a window of [`RATE_WINDOW`] smaller chunks only as a guard against overwriting.
//! And, for measurements, the order the paper warns of: everyone sending to one rank at
//! a time.

use super::{block_len, per_chunk, Coll};
use crate::conduit::Conduit;
use crate::rma::{bytes_of, bytes_of_mut, RmaError, Word};
use std::time::{Duration, Instant};

/// Chunks in flight per pair under [`Matching::Rate`]: the channel's slot split in this
/// many pieces.
///
/// ```
/// assert_eq!(amrq::coll::RATE_WINDOW, 4); // pieces of a quarter chunk
/// ```
pub const RATE_WINDOW: usize = 4;

/// A pacing wait longer than this yields the core between looks.
const YIELD_AFTER: Duration = Duration::from_micros(5);

/// How an exchange keeps senders from outrunning receivers.
///
/// ```
/// use amrq::coll::Matching;
/// use std::time::Duration;
/// assert_eq!(Matching::default(), Matching::Credit);
/// let paced = Matching::Rate { gap: Duration::from_nanos(1500) }; // per chunk sent
/// assert_ne!(paced, Matching::Credit);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Matching {
    /// A sender puts its next chunk ([`chunk_bytes`](super::chunk_bytes)) once the receiver
    /// has taken the last: the receiver paces it, one round of acknowledgement per
    /// chunk.
    #[default]
    Credit,
    /// Bandwidth matching: a sender injects a piece of a chunk / `RATE_WINDOW` bytes no
    /// more often than once per `gap` (the bottleneck's time per chunk, measured), up
    /// to [`RATE_WINDOW`] chunks ahead of its receiver.
    Rate {
        /// The time between two chunks a sender injects.
        gap: Duration,
    },
}

impl<S, C: Conduit> Coll<S, C> {
    /// All-to-all: block j of `send` (`send.len() / N` elements) goes to rank j, and
    /// block i of `recv` comes from rank i (a transpose of the ranks × blocks matrix).
    /// Strictly alternating sends and receives, a credit per chunk (see the module
    /// doc).
    ///
    /// ```
    /// use amrq::{prelude::*, coll::Coll};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<Vec<u64>> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let me = am.rank() as u64;
    ///     // Block j (one word here) goes to rank j: the word 10·me + j.
    ///     let send: Vec<u64> = (0..3).map(|j| 10 * me + j).collect();
    ///     let mut recv = vec![0u64; 3];
    ///     coll.exchange(&send, &mut recv)?;
    ///     Ok(recv)
    /// })
    /// .unwrap();
    /// assert_eq!(out[1], vec![1, 11, 21]); // from ranks 0, 1, 2: their block 1
    /// ```
    pub fn exchange<T: Word>(&self, send: &[T], recv: &mut [T]) -> Result<(), RmaError> {
        self.exchange_matched(send, recv, Matching::Credit)
    }

    /// [`Coll::exchange`] with the flow control `matching` (the same on every rank):
    /// [`Matching::Credit`] is [`Coll::exchange`]'s; [`Matching::Rate`] paces each
    /// sender to a rate, the paper's bandwidth matching.
    ///
    /// ```
    /// use amrq::{prelude::*, coll::{Coll, Matching}};
    /// use std::time::Duration;
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<Vec<u64>> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let me = am.rank() as u64;
    ///     let send: Vec<u64> = (0..2 * 4096).map(|i| 100_000 * me + i).collect();
    ///     let mut recv = vec![0u64; 2 * 4096];
    ///     let paced = Matching::Rate { gap: Duration::from_micros(2) }; // per 8 KiB
    ///     am.coll().exchange_matched(&send, &mut recv, paced)?;
    ///     Ok(vec![recv[0], recv[4096]])
    /// })
    /// .unwrap();
    /// assert_eq!(out[1], vec![4096, 100_000 + 4096]); // block 1 of ranks 0 and 1
    /// ```
    pub fn exchange_matched<T: Word>(
        &self,
        send: &[T],
        recv: &mut [T],
        matching: Matching,
    ) -> Result<(), RmaError> {
        let (me, n) = self.me_n();
        let m = block_len(send, recv, n)?;
        recv[me * m..(me + 1) * m].copy_from_slice(&send[me * m..(me + 1) * m]);
        let (window, gap) = match matching {
            Matching::Credit => (1, None),
            Matching::Rate { gap } => (RATE_WINDOW, Some(gap)),
        };
        let per = (per_chunk::<T>(self.ch.chunk()) / window).max(1);
        let mut next = Instant::now();
        for i in 1..n {
            let (to, from) = ((me + i) % n, (me + n - i) % n);
            let out = send[to * m..(to + 1) * m].chunks(per);
            let inn = recv[from * m..(from + 1) * m].chunks_mut(per);
            for (o, x) in out.zip(inn) {
                if let Some(gap) = gap {
                    self.pace(next)?;
                    next = next.max(Instant::now()) + gap;
                }
                self.ch.send(&self.rma, to, bytes_of(o), window)?;
                self.ch.recv(&self.rma, from, bytes_of_mut(x), window)?;
            }
        }
        Ok(())
    }

    /// Waits until `until`, running handlers: the sender's pace. A wait longer than
    /// [`YIELD_AFTER`] gives the core away between looks (ranks may share cores).
    fn pace(&self, until: Instant) -> Result<(), RmaError> {
        loop {
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            if self.am().poll_runtime()? == 0 {
                match until - now > YIELD_AFTER {
                    true => std::thread::yield_now(),
                    false => std::hint::spin_loop(),
                }
            }
        }
    }

    /// [`Coll::exchange`] without bandwidth matching, for measurements: in step i every
    /// rank sends its block to rank i, which takes them from everyone in rank order
    /// before step i + 1 — the hot spot RQ §4 warns of. Same result.
    ///
    /// ```
    /// use amrq::{prelude::*, coll::Coll};
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<Vec<u32>> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let me = am.rank() as u32;
    ///     let mut recv = vec![0u32; 2];
    ///     coll.exchange_unmatched(&[me, me + 10], &mut recv)?;
    ///     Ok(recv)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [vec![0, 1], vec![10, 11]]);
    /// ```
    pub fn exchange_unmatched<T: Word>(&self, send: &[T], recv: &mut [T]) -> Result<(), RmaError> {
        let (me, n) = self.me_n();
        let m = block_len(send, recv, n)?;
        for target in 0..n {
            if target == me {
                for from in 0..n {
                    let block = &mut recv[from * m..(from + 1) * m];
                    if from == me {
                        block.copy_from_slice(&send[me * m..(me + 1) * m]);
                        continue;
                    }
                    for x in block.chunks_mut(per_chunk::<T>(self.ch.chunk())) {
                        self.ch.recv(&self.rma, from, bytes_of_mut(x), 1)?;
                    }
                }
            } else {
                for o in send[target * m..(target + 1) * m].chunks(per_chunk::<T>(self.ch.chunk()))
                {
                    self.ch.send(&self.rma, target, bytes_of(o), 1)?;
                }
            }
        }
        Ok(())
    }
}
