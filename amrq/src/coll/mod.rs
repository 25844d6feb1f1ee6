//! Collectives over all ranks: broadcast, reduce and allreduce (sum, min, max or any
//! function) over slices, inclusive and exclusive scan, gather and allgather, and
//! exchange (all-to-all, a transpose). The barrier, blocking and split-phase, is the AM
//! layer's ([`Am::barrier`], [`Am::barrier_notify`]).
//!
//! Data moves in chunks ([`chunk_bytes`]: [`CHUNK`] up to 128 ranks, smaller beyond)
//! through per-pair channels in a symmetric mailbox (the `channel` module), so any
//! length works and a sender never runs ahead of its receiver. Trees are binomial, rooted anywhere, for any number of
//! ranks (not only powers of two). Every rank calls each collective, in the same order,
//! with the same root and lengths.
//!
//! **Exchange** follows RQ §4: in step i = 1 … N−1 each rank sends to `me + i` and
//! receives from `me − i`, strictly alternating one chunk out and one chunk in, so
//! every rank sends to one rank and receives from one rank at a time and no receiver is
//! the target of everyone at once; senders are paced by credits or, with
//! [`Matching::Rate`], to a rate (bandwidth matching).

mod channel;
mod exchange;

pub use channel::{chunk_bytes, CHUNK};
pub use exchange::{Matching, RATE_WINDOW};

use crate::am::Am;
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, Rank};
use crate::rma::{bytes_of, bytes_of_mut, Rma, RmaError, Word};
use channel::Channels;

/// `a + b` (wrapping for integers is the caller's choice of type): for [`Coll::reduce`]
/// and friends.
///
/// ```
/// assert_eq!(amrq::coll::sum(2.5, 0.5), 3.0);
/// ```
pub fn sum<T: Word + std::ops::Add<Output = T>>(a: T, b: T) -> T {
    a + b
}

/// The smaller (by `PartialOrd`; the first if unordered).
///
/// ```
/// assert_eq!(amrq::coll::min(3u8, 7), 3);
/// assert!(amrq::coll::min(f64::NAN, 1.0).is_nan()); // unordered: the first
/// ```
pub fn min<T: Word + PartialOrd>(a: T, b: T) -> T {
    if b < a {
        b
    } else {
        a
    }
}

/// The larger (by `PartialOrd`; the first if unordered).
///
/// ```
/// assert_eq!(amrq::coll::max(-3i32, 7), 7);
/// ```
pub fn max<T: Word + PartialOrd>(a: T, b: T) -> T {
    if b > a {
        b
    } else {
        a
    }
}

/// The collectives of one rank.
///
/// ```
/// use amrq::{prelude::*, coll};
/// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<Vec<u64>> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     let coll = am.coll();
///     let mut v = vec![am.rank() as u64 + 1; 4];
///     coll.allreduce(&mut v, coll::sum)?; // 1 + 2 + 3 everywhere
///     Ok(v)
/// }).unwrap();
/// assert!(out.iter().all(|v| *v == vec![6u64; 4]));
/// ```
pub struct Coll<S, C: Conduit = MemConduit> {
    rma: Rma<S, C>,
    ch: Channels,
}

impl<S, C: Conduit> std::fmt::Debug for Coll<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coll")
            .field("rank", &self.am().rank())
            .finish_non_exhaustive()
    }
}

/// The alignment of a mailbox in the segment: a line.
pub(crate) const MAILBOX_ALIGN: usize = 64;

/// Values of `T` in a chunk of `chunk` bytes.
fn per_chunk<T>(chunk: usize) -> usize {
    (chunk / std::mem::size_of::<T>().max(1)).max(1)
}

impl<S, C: Conduit> Coll<S, C> {
    /// Collective: the collectives of this rank, with a mailbox allocated symmetrically
    /// in the segments through `rma` (`2·N·64 + N·chunk_bytes(N)` bytes per rank).
    ///
    /// ```
    /// use amrq::{am::{Am, HandlerTable}, coll::Coll, conduit::threads, rma::Rma, Config};
    /// // A job's is made with it (`Job::coll`); here over an endpoint of one rank's own:
    /// let mut eps = threads::endpoints_for(1, &Config::new().conduit_spec()).unwrap();
    /// let rma = Rma::new(Am::new(eps.remove(0), HandlerTable::<()>::new(), ())?);
    /// let free = rma.am().segment_allocator().borrow().free_bytes();
    /// let coll = Coll::new(rma)?; // every rank, together: its mailbox is symmetric
    /// assert!(coll.am().segment_allocator().borrow().free_bytes() < free);
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn new(rma: Rma<S, C>) -> Result<Self, RmaError> {
        let bytes = Self::mailbox_bytes(rma.am().size());
        let mailbox = rma.alloc_symmetric_zeroed(bytes, MAILBOX_ALIGN)?;
        Self::with_mailbox(rma, mailbox)
    }

    /// Bytes of the mailbox of a job of `n` ranks.
    pub(crate) fn mailbox_bytes(n: usize) -> usize {
        Channels::mailbox_bytes(n)
    }

    /// Collective: the collectives of this rank over the mailbox at `mailbox`, which
    /// every rank allocated symmetrically ([`Coll::mailbox_bytes`], aligned to
    /// [`MAILBOX_ALIGN`]) and zeroed.
    pub(crate) fn with_mailbox(rma: Rma<S, C>, mailbox: usize) -> Result<Self, RmaError> {
        // Every rank done zeroing before anyone sends; the rest is untouched until a
        // peer sends there.
        rma.am().barrier()?;
        Ok(Self {
            ch: Channels::new(&rma, mailbox),
            rma,
        })
    }

    /// The one-sided operations below.
    pub fn rma(&self) -> &Rma<S, C> {
        &self.rma
    }

    /// The one-sided operations below, to change (see [`Rma::am_mut`]).
    pub fn rma_mut(&mut self) -> &mut Rma<S, C> {
        &mut self.rma
    }

    /// The AM layer below.
    pub fn am(&self) -> &Am<S, C> {
        self.rma.am()
    }

    fn me_n(&self) -> (Rank, usize) {
        (self.am().rank(), self.am().size())
    }

    /// This rank's parent (none at the root) and children in the binomial tree rooted
    /// at `root`.
    fn tree(&self, root: Rank) -> Result<(Option<Rank>, Vec<Rank>), RmaError> {
        let (me, n) = self.me_n();
        check_root(root, n)?;
        let vr = (me + n - root) % n;
        let parent = (vr != 0).then(|| (clear_top_bit(vr) + root) % n);
        Ok((parent, children(vr, n).map(|c| (c + root) % n).collect()))
    }

    /// Rank `root`'s `data` into every rank's `data` (same length everywhere).
    ///
    /// ```
    /// use amrq::{prelude::*, coll::Coll};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<Vec<f64>> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let mut v = if am.rank() == 2 { vec![0.5, 1.5] } else { vec![0.0; 2] };
    ///     coll.broadcast(2, &mut v)?;
    ///     Ok(v)
    /// })
    /// .unwrap();
    /// assert!(out.iter().all(|v| v.as_slice() == [0.5, 1.5]));
    /// ```
    pub fn broadcast<T: Word>(&self, root: Rank, data: &mut [T]) -> Result<(), RmaError> {
        let (parent, children) = self.tree(root)?;
        for chunk in data.chunks_mut(per_chunk::<T>(self.ch.chunk())) {
            let b = bytes_of_mut(chunk);
            if let Some(p) = parent {
                self.ch.recv(&self.rma, p, b, 1)?;
            }
            for &c in &children {
                self.ch.send(&self.rma, c, b, 1)?;
            }
        }
        Ok(())
    }

    /// Combines every rank's `data` element by element with `op` (associative and
    /// commutative); the result lands in rank `root`'s `data` (the others' are left
    /// with partial results).
    ///
    /// ```
    /// use amrq::{prelude::*, coll};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<u64> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let mut v = [am.rank() as u64 * 10];
    ///     coll.reduce(0, &mut v, coll::max)?;
    ///     Ok(v[0])
    /// })
    /// .unwrap();
    /// assert_eq!(out[0], 20); // the root has the result; the others partial ones
    /// ```
    pub fn reduce<T: Word>(
        &self,
        root: Rank,
        data: &mut [T],
        op: impl Fn(T, T) -> T,
    ) -> Result<(), RmaError> {
        let (parent, children) = self.tree(root)?;
        for chunk in data.chunks_mut(per_chunk::<T>(self.ch.chunk())) {
            for &c in &children {
                let mut got: Vec<T> = chunk.to_vec();
                self.ch.recv(&self.rma, c, bytes_of_mut(&mut got), 1)?;
                for (x, y) in chunk.iter_mut().zip(got) {
                    *x = op(*x, y);
                }
            }
            if let Some(p) = parent {
                self.ch.send(&self.rma, p, bytes_of(chunk), 1)?;
            }
        }
        Ok(())
    }

    /// [`Coll::reduce`] whose result lands in every rank's `data`.
    ///
    /// ```
    /// use amrq::{prelude::*, coll};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<i64> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let mut v = [am.rank() as i64 - 1];
    ///     coll.allreduce(&mut v, coll::min)?;
    ///     Ok(v[0])
    /// })
    /// .unwrap();
    /// assert_eq!(out, [-1, -1, -1]);
    /// ```
    pub fn allreduce<T: Word>(
        &self,
        data: &mut [T],
        op: impl Fn(T, T) -> T,
    ) -> Result<(), RmaError> {
        self.reduce(0, data, op)?;
        self.broadcast(0, data)
    }

    /// Prefix reduction along the ranks: rank r's `data` becomes `d0 op d1 op … op dr`
    /// (inclusive), or `identity op d0 op … op d(r−1)` (exclusive: rank 0 gets
    /// `identity`). A chain, one chunk at a time.
    ///
    /// ```
    /// use amrq::{prelude::*, coll};
    /// let out = amrq::Config::new().threads(4, |setup| -> amrq::Result<[u32; 2]> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let (mut inc, mut exc) = ([1u32], [1u32]);
    ///     coll.scan(&mut inc, true, 0, coll::sum)?;
    ///     coll.scan(&mut exc, false, 0, coll::sum)?;
    ///     Ok([inc[0], exc[0]])
    /// })
    /// .unwrap();
    /// assert_eq!(out, [[1, 0], [2, 1], [3, 2], [4, 3]]);
    /// ```
    pub fn scan<T: Word>(
        &self,
        data: &mut [T],
        inclusive: bool,
        identity: T,
        op: impl Fn(T, T) -> T,
    ) -> Result<(), RmaError> {
        let (me, n) = self.me_n();
        for chunk in data.chunks_mut(per_chunk::<T>(self.ch.chunk())) {
            // What the ranks before this one add up to, element by element.
            let mut before = vec![identity; chunk.len()];
            if me > 0 {
                self.ch
                    .recv(&self.rma, me - 1, bytes_of_mut(&mut before), 1)?;
            }
            if me + 1 < n {
                let upto: Vec<T> = before
                    .iter()
                    .zip(chunk.iter())
                    .map(|(&a, &b)| op(a, b))
                    .collect();
                self.ch.send(&self.rma, me + 1, bytes_of(&upto), 1)?;
            }
            for (x, b) in chunk.iter_mut().zip(before) {
                *x = if inclusive { op(b, *x) } else { b };
            }
        }
        Ok(())
    }

    /// Every rank's `mine` (same length everywhere) into rank `root`'s `out`, in rank
    /// order (`out.len() == N · mine.len()` at the root; ignored elsewhere).
    ///
    /// ```
    /// use amrq::{prelude::*, coll::Coll};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<Vec<u16>> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let r = am.rank() as u16;
    ///     let mut all = vec![0u16; 2 * am.size()];
    ///     coll.gather(1, &[r, r * 100], &mut all)?;
    ///     Ok(all)
    /// })
    /// .unwrap();
    /// assert_eq!(out[1], vec![0, 0, 1, 100, 2, 200]);
    /// ```
    pub fn gather<T: Word>(&self, root: Rank, mine: &[T], out: &mut [T]) -> Result<(), RmaError> {
        let (me, n) = self.me_n();
        check_root(root, n)?;
        let m = mine.len();
        if me != root {
            for chunk in mine.chunks(per_chunk::<T>(self.ch.chunk())) {
                self.ch.send(&self.rma, root, bytes_of(chunk), 1)?;
            }
            return Ok(());
        }
        if out.len() != n * m {
            return Err(RmaError::LengthMismatch {
                expected: n * m,
                got: out.len(),
            });
        }
        for (r, block) in out.chunks_mut(m.max(1)).enumerate().take(n) {
            if r == root {
                block.copy_from_slice(mine);
                continue;
            }
            for chunk in block.chunks_mut(per_chunk::<T>(self.ch.chunk())) {
                self.ch.recv(&self.rma, r, bytes_of_mut(chunk), 1)?;
            }
        }
        Ok(())
    }

    /// [`Coll::gather`] into every rank's `out` (`N · mine.len()` everywhere).
    ///
    /// ```
    /// use amrq::{prelude::*, coll::Coll};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<Vec<u8>> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let coll = am.coll();
    ///     let mut all = vec![0u8; am.size()];
    ///     coll.allgather(&[b'a' + am.rank() as u8], &mut all)?;
    ///     Ok(all)
    /// })
    /// .unwrap();
    /// assert!(out.iter().all(|v| v.as_slice() == b"abc"));
    /// ```
    pub fn allgather<T: Word>(&self, mine: &[T], out: &mut [T]) -> Result<(), RmaError> {
        let n = self.me_n().1;
        if out.len() != n * mine.len() {
            return Err(RmaError::LengthMismatch {
                expected: n * mine.len(),
                got: out.len(),
            });
        }
        self.gather(0, mine, out)?;
        self.broadcast(0, out)
    }
}

/// Elements per block of an exchange over `n` ranks, after checking that `send` and
/// `recv` have the same length, a multiple of `n`.
fn block_len<T>(send: &[T], recv: &[T], n: usize) -> Result<usize, RmaError> {
    if send.len() != recv.len() || !send.len().is_multiple_of(n) {
        return Err(RmaError::LengthMismatch {
            expected: n * (send.len() / n),
            got: recv.len(),
        });
    }
    Ok(send.len() / n)
}

fn check_root(root: Rank, n: usize) -> Result<(), RmaError> {
    if root < n {
        Ok(())
    } else {
        Err(RmaError::NoSuchRank {
            rank: root,
            size: n,
        })
    }
}

/// `v` without its highest set bit: a rank's parent in a binomial tree (`v > 0`).
fn clear_top_bit(v: usize) -> usize {
    v & !(1 << (usize::BITS - 1 - v.leading_zeros()))
}

/// The children of virtual rank `v` in a binomial tree of `n`: `v + 2^k` for every
/// `2^k` above `v`'s highest bit, below `n`.
fn children(v: usize, n: usize) -> impl Iterator<Item = usize> {
    let start = if v == 0 {
        1
    } else {
        1 << (usize::BITS - v.leading_zeros())
    };
    std::iter::successors(Some(start), |&b: &usize| b.checked_mul(2))
        .take_while(move |&b| v + b < n)
        .map(move |b| v + b)
}

#[cfg(test)]
mod tests {
    use super::{children, clear_top_bit};

    #[test]
    fn binomial_trees_cover_every_rank_once_for_any_n() {
        for n in 1..40 {
            let mut parent_of = vec![None; n];
            for v in 0..n {
                for c in children(v, n) {
                    assert!(parent_of[c].is_none(), "n={n}: {c} has two parents");
                    parent_of[c] = Some(v);
                }
            }
            for (v, p) in parent_of.iter().enumerate().skip(1) {
                assert_eq!(*p, Some(clear_top_bit(v)), "n={n}, v={v}");
            }
            assert_eq!(parent_of[0], None);
        }
    }
}
