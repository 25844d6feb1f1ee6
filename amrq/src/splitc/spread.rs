//! Spread arrays: one array dealt out over every rank's segment, at the same offset on
//! each (Split-C's `A[n]::` and `A[n]::[b]`).
//!
//! ```text
//!   BlockCyclic(2), 3 ranks, 10 elements:   global index → (rank, local index)
//!     rank 0: 0 1 | 6 7          block k of b elements goes to rank k mod P,
//!     rank 1: 2 3 | 8 9          as local block k div P
//!     rank 2: 4 5
//! ```

use super::GlobalPtr;
use crate::conduit::Rank;
use crate::rma::Word;
use std::marker::PhantomData;

/// How a spread array's elements are dealt to the ranks.
///
/// ```
/// use amrq::splitc::{Layout, SpreadArray};
/// let cyclic = SpreadArray::<u8>::new(0, 6, Layout::Cyclic, 3);
/// let blocked = SpreadArray::<u8>::new(0, 6, Layout::BlockCyclic(2), 3);
/// assert_eq!((0..6).map(|i| cyclic.owner(i)).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2]);
/// assert_eq!((0..6).map(|i| blocked.owner(i)).collect::<Vec<_>>(), [0, 0, 1, 1, 2, 2]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Element `i` on rank `i mod P` (Split-C `A[n]::`).
    Cyclic,
    /// Blocks of this many consecutive elements, block `k` on rank `k mod P` (Split-C
    /// `A[n]::[b]`); a block as large as `ceil(n / P)` gives each rank one block.
    BlockCyclic(usize),
}

impl Layout {
    /// Elements per block (at least 1).
    ///
    /// ```
    /// use amrq::splitc::Layout;
    /// assert_eq!((Layout::Cyclic.block(), Layout::BlockCyclic(8).block()), (1, 8));
    /// ```
    pub fn block(self) -> usize {
        match self {
            Layout::Cyclic => 1,
            Layout::BlockCyclic(b) => b.max(1),
        }
    }
}

/// An array of `len()` elements of `T` spread over `procs` ranks by a [`Layout`], whose
/// local part starts at the same byte offset of every rank's segment.
/// [`SplitC::all_spread_malloc`](super::SplitC::all_spread_malloc) allocates one.
///
/// ```
/// use amrq::splitc::{GlobalPtr, Layout, SpreadArray};
/// let a = SpreadArray::<f64>::new(4096, 10, Layout::BlockCyclic(2), 3);
/// assert_eq!(a.at(7), GlobalPtr::new(0, 4096 + 3 * 8)); // block 3: rank 0's 2nd block
/// assert_eq!(a.owner(9), 1);
/// assert_eq!(a.local_indices(1).collect::<Vec<_>>(), [2, 3, 8, 9]);
/// assert_eq!(a.local_len(2), 2);
/// assert_eq!(a.local_bytes(), 4 * 8); // what each rank holds room for
/// ```
#[derive(Debug)]
pub struct SpreadArray<T> {
    base: usize,
    len: usize,
    block: usize,
    procs: usize,
    _elem: PhantomData<fn() -> T>,
}

impl<T> Clone for SpreadArray<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SpreadArray<T> {}

impl<T: Word> SpreadArray<T> {
    /// The array of `len` elements laid out by `layout` over `procs` ranks (at least
    /// one), whose local part starts at byte `base` of every rank's segment.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// let a = SpreadArray::<u64>::new(256, 7, Layout::Cyclic, 2);
    /// assert_eq!((a.len(), a.base(), a.local_len(0), a.local_len(1)), (7, 256, 4, 3));
    /// ```
    pub fn new(base: usize, len: usize, layout: Layout, procs: usize) -> Self {
        Self {
            base,
            len,
            block: layout.block(),
            procs: procs.max(1),
            _elem: PhantomData,
        }
    }

    /// Elements in the whole array.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// assert_eq!(SpreadArray::<u8>::new(0, 9, Layout::Cyclic, 4).len(), 9);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if it has no elements.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// assert!(SpreadArray::<u8>::new(0, 0, Layout::Cyclic, 4).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The layout (a block of 1 is [`Layout::Cyclic`]).
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// assert_eq!(SpreadArray::<u8>::new(0, 9, Layout::BlockCyclic(1), 2).layout(), Layout::Cyclic);
    /// ```
    pub fn layout(&self) -> Layout {
        match self.block {
            1 => Layout::Cyclic,
            b => Layout::BlockCyclic(b),
        }
    }

    /// Byte offset of the local part in every rank's segment.
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, Layout, SpreadArray};
    /// let a = SpreadArray::<u16>::new(512, 4, Layout::Cyclic, 2);
    /// assert_eq!(a.at(1), GlobalPtr::new(1, a.base())); // element 1 starts rank 1's part
    /// ```
    pub fn base(&self) -> usize {
        self.base
    }

    /// The rank that holds element `i`.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// let a = SpreadArray::<u8>::new(0, 10, Layout::BlockCyclic(3), 2);
    /// assert_eq!((a.owner(2), a.owner(3), a.owner(6)), (0, 1, 0));
    /// ```
    pub fn owner(&self, i: usize) -> Rank {
        (i / self.block) % self.procs
    }

    /// Element `i`, if `i < len()`.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// let a = SpreadArray::<u8>::new(0, 4, Layout::Cyclic, 2);
    /// assert!(a.get(3).is_some() && a.get(4).is_none());
    /// ```
    pub fn get(&self, i: usize) -> Option<GlobalPtr<T>> {
        (i < self.len).then(|| {
            let (blk, within) = (i / self.block, i % self.block);
            let local = (blk / self.procs) * self.block + within;
            GlobalPtr::new(blk % self.procs, self.base + GlobalPtr::<T>::bytes(local))
        })
    }

    /// Element `i`.
    ///
    /// # Panics
    /// If `i >= len()`, as slice indexing does.
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, Layout, SpreadArray};
    /// let a = SpreadArray::<u32>::new(64, 6, Layout::Cyclic, 3);
    /// assert_eq!(a.at(4), GlobalPtr::new(1, 64 + 4)); // rank 1's second element
    /// ```
    pub fn at(&self, i: usize) -> GlobalPtr<T> {
        match self.get(i) {
            Some(p) => p,
            None => panic!("spread array index {i} out of bounds (len {})", self.len),
        }
    }

    /// Elements rank `rank` holds (none for a rank past the last).
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// let a = SpreadArray::<u8>::new(0, 5, Layout::Cyclic, 3);
    /// assert_eq!([a.local_len(0), a.local_len(1), a.local_len(2), a.local_len(7)], [2, 2, 1, 0]);
    /// ```
    pub fn local_len(&self, rank: Rank) -> usize {
        if rank >= self.procs {
            return 0;
        }
        let round = self.block * self.procs;
        let tail = (self.len % round).saturating_sub(rank * self.block);
        (self.len / round) * self.block + tail.min(self.block)
    }

    /// The global indices of the elements rank `rank` holds, in increasing order (which
    /// is also their order in its segment).
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// let a = SpreadArray::<u8>::new(0, 7, Layout::BlockCyclic(2), 2);
    /// assert_eq!(a.local_indices(1).collect::<Vec<_>>(), [2, 3, 6]);
    /// ```
    pub fn local_indices(&self, rank: Rank) -> impl Iterator<Item = usize> + '_ {
        let (block, step, len) = (self.block, self.block * self.procs, self.len);
        let first = if rank < self.procs { rank * block } else { len };
        (first..len)
            .step_by(step.max(1))
            .flat_map(move |start| start..(start + block).min(len))
    }

    /// Bytes of the local part each rank allocates: room for the most any rank holds.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SpreadArray};
    /// let a = SpreadArray::<u64>::new(0, 5, Layout::Cyclic, 2);
    /// assert_eq!(a.local_bytes(), 3 * 8); // rank 0 holds three
    /// ```
    pub fn local_bytes(&self) -> usize {
        GlobalPtr::<T>::bytes(self.local_len(0))
    }
}
