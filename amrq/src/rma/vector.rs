//! Indexed and strided transfers: many blocks of a target's segment in one call, the
//! local side packed (contiguous). On mapped memory each block is one copy; through
//! frames the blocks are packed into as few Medium messages as their headers and bytes
//! fit (RQ §4.1: small blocks must not each pay a message).

use super::{Rma, RmaError};
use crate::conduit::{Conduit, Rank};

/// Most blocks one strided region may have: split larger transfers.
const MAX_BLOCKS: usize = 1 << 24;

/// A strided region of a segment (a 2-D or 3-D sub-block of an array): `counts[0]`
/// contiguous bytes, `counts[1]` times `strides[0]` bytes apart, that `counts[2]` times
/// `strides[1]` bytes apart, and so on (`strides.len() + 1 == counts.len()`).
///
/// ```
/// use amrq::rma::Strided;
/// // 3 rows of 4 bytes from a 10-byte-wide array, starting at byte 12.
/// let r = Strided { offset: 12, counts: &[4, 3], strides: &[10] };
/// assert_eq!(r.blocks().unwrap(), vec![(12, 4), (22, 4), (32, 4)]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Strided<'s> {
    /// First byte.
    pub offset: usize,
    /// Bytes per block, then the repeat count of each dimension.
    pub counts: &'s [usize],
    /// Byte distance between repeats, per dimension.
    pub strides: &'s [usize],
}

impl Strided<'_> {
    /// The region as (offset, len) blocks, in order (fastest dimension first). A region
    /// whose block offsets overflow, or that has more blocks than a segment has bytes,
    /// is refused.
    ///
    /// ```
    /// use amrq::rma::Strided;
    /// let r = Strided { offset: 0, counts: &[8, 2, 2], strides: &[16, 64] };
    /// assert_eq!(r.blocks().unwrap(), vec![(0, 8), (16, 8), (64, 8), (80, 8)]);
    /// let bad = Strided { offset: 0, counts: &[8, 2], strides: &[] };
    /// assert!(bad.blocks().is_err()); // a stride per repeated dimension
    /// ```
    pub fn blocks(&self) -> Result<Vec<(usize, usize)>, RmaError> {
        let bad = |why| RmaError::BadStrided {
            counts: self.counts.len(),
            strides: self.strides.len(),
            why,
        };
        let Some((&len, reps)) = self.counts.split_first() else {
            return Err(bad("no block size"));
        };
        if reps.len() != self.strides.len() {
            return Err(bad("the strides do not match the repeat counts"));
        }
        let total = reps
            .iter()
            .try_fold(1usize, |n, &c| n.checked_mul(c))
            .filter(|&n| n <= MAX_BLOCKS)
            .ok_or_else(|| bad("more than 2^24 blocks: split the transfer"))?;
        if total == 0 {
            // A repeat count of 0: no blocks (and no loop over the other counts, which
            // may be anything when their product is 0).
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(total);
        out.push((self.offset, len));
        for (&count, &stride) in reps.iter().zip(self.strides) {
            let one = std::mem::take(&mut out);
            for k in 0..count {
                for &(o, n) in &one {
                    let at = k
                        .checked_mul(stride)
                        .and_then(|d| o.checked_add(d))
                        .ok_or_else(|| bad("a block's offset overflows"))?;
                    out.push((at, n));
                }
            }
        }
        Ok(out)
    }
}

impl<S, C: Conduit> Rma<S, C> {
    /// Checks every block against `rank`'s segment and `bytes` against their total;
    /// returns the blocks split to at most `piece` bytes each.
    fn checked_blocks(
        &self,
        rank: Rank,
        blocks: &[(usize, usize)],
        bytes: usize,
        piece: usize,
    ) -> Result<Vec<(usize, usize)>, RmaError> {
        let mut total = 0usize;
        let mut out = Vec::with_capacity(blocks.len());
        for &(o, n) in blocks {
            self.target(rank, o, n)?;
            // Each block is inside the segment, so the sum of their lengths cannot
            // overflow before it exceeds what `bytes` can match.
            total = total.saturating_add(n);
            let mut at = 0;
            while at < n {
                let k = piece.min(n - at);
                out.push((o + at, k));
                at += k;
            }
        }
        if total != bytes {
            return Err(RmaError::LengthMismatch {
                expected: total,
                got: bytes,
            });
        }
        Ok(out)
    }

    /// Puts the bytes of `data`, in order, into blocks `(offset, len)` of `rank`'s
    /// segment (`data.len()` is the blocks' total).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     for rma in [am.rma(), am.rma()] {
    ///         let at = rma.alloc_symmetric(64, 64)?;
    ///         if am.rank() == 0 {
    ///             rma.put_indexed(1, &[(at + 1, 2), (at + 10, 3)], b"abcde")?;
    ///             let mut back = [0u8; 5];
    ///             rma.get_indexed(1, &[(at + 10, 3), (at + 1, 2)], &mut back)?;
    ///             assert_eq!(&back, b"cdeab");
    ///         }
    ///         am.barrier()?;
    ///         rma.free(at)?;
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn put_indexed(
        &self,
        rank: Rank,
        blocks: &[(usize, usize)],
        data: &[u8],
    ) -> Result<(), RmaError> {
        if self.is_direct(rank) {
            self.checked_blocks(rank, blocks, data.len(), usize::MAX)?;
            let mut at = 0;
            for &(o, n) in blocks {
                self.put(rank, o, &data[at..at + n])?;
                at += n;
            }
            return Ok(());
        }
        let am = &self.am;
        let list = self.checked_blocks(
            rank,
            blocks,
            data.len(),
            super::frames::max_packed_block(am)?,
        )?;
        let op = super::frames::put_blocks(am, rank, &list, data)?;
        am.op_wait(op, &mut [])?;
        Ok(())
    }

    /// Gets blocks `(offset, len)` of `rank`'s segment, in order, into `out` (the
    /// blocks' total length).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(16, 8)?;
    ///     rma.put(am.rank(), at, b"0123456789abcdef")?;
    ///     am.barrier()?;
    ///     let mut out = [0u8; 4];
    ///     rma.get_indexed(1 - am.rank(), &[(at + 14, 2), (at, 2)], &mut out)?;
    ///     assert_eq!(&out, b"ef01");
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_indexed(
        &self,
        rank: Rank,
        blocks: &[(usize, usize)],
        out: &mut [u8],
    ) -> Result<(), RmaError> {
        if self.is_direct(rank) {
            self.checked_blocks(rank, blocks, out.len(), usize::MAX)?;
            let mut at = 0;
            for &(o, n) in blocks {
                self.get(rank, o, &mut out[at..at + n])?;
                at += n;
            }
            return Ok(());
        }
        let am = &self.am;
        let list = self.checked_blocks(
            rank,
            blocks,
            out.len(),
            super::frames::max_packed_block(am)?,
        )?;
        let op = super::frames::get_blocks(am, rank, &list)?;
        am.op_wait(op, out)?;
        Ok(())
    }

    /// [`Rma::put_indexed`] into a strided region of `rank`'s segment.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError, Strided}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let grid = rma.alloc_symmetric(4 * 4, 8)?; // a 4×4 grid of bytes at each rank
    ///     am.barrier()?;
    ///     if am.rank() == 0 {
    ///         // Column 1 of rank 1's grid: 4 blocks of 1 byte, 4 bytes apart.
    ///         let col = Strided { offset: grid + 1, counts: &[1, 4], strides: &[4] };
    ///         rma.put_strided(1, &col, b"wxyz")?;
    ///     }
    ///     am.barrier()?;
    ///     let mut row = [0u8; 4];
    ///     rma.get(1, grid + 8, &mut row)?; // row 2
    ///     assert_eq!(row, [0, b'y', 0, 0]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put_strided(
        &self,
        rank: Rank,
        region: &Strided<'_>,
        data: &[u8],
    ) -> Result<(), RmaError> {
        self.put_indexed(rank, &region.blocks()?, data)
    }

    /// [`Rma::get_indexed`] from a strided region of `rank`'s segment.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError, Strided}};
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let grid = rma.alloc_symmetric(9, 8)?;
    ///     rma.put(0, grid, b"abcdefghi")?; // a 3×3 grid
    ///     let diag = Strided { offset: grid, counts: &[1, 3], strides: &[4] };
    ///     let mut d = [0u8; 3];
    ///     rma.get_strided(0, &diag, &mut d)?;
    ///     assert_eq!(&d, b"aei");
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_strided(
        &self,
        rank: Rank,
        region: &Strided<'_>,
        out: &mut [u8],
    ) -> Result<(), RmaError> {
        self.get_indexed(rank, &region.blocks()?, out)
    }
}
