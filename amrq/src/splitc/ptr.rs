//! Global pointers: a rank and a byte offset in that rank's registered segment, typed.

use crate::conduit::Rank;
use crate::rma::Word;
use std::marker::PhantomData;

/// A typed address in the global address space: rank `rank()`, byte `offset()` of its
/// registered segment (Split-C's `global` pointer). It holds no machine address, so it
/// is valid on every rank and can be sent in a message; it is dereferenced only through
/// [`SplitC`](super::SplitC)'s operations, which copy values (never a `&`/`&mut` into
/// memory other ranks may write).
///
/// Arithmetic moves within the rank, in elements of `T` (Split-C's `+` on a global
/// pointer); pointers compare by rank, then offset.
///
/// ```
/// use amrq::splitc::GlobalPtr;
/// let p = GlobalPtr::<u64>::new(1, 64);
/// let q = p + 3;
/// assert_eq!((q.rank(), q.offset()), (1, 88));
/// assert_eq!(q.offset_from(p), Some(3));
/// assert!(p < q && q < GlobalPtr::new(2, 0));
/// assert_eq!(q - 3, p);
/// ```
pub struct GlobalPtr<T> {
    rank: Rank,
    offset: usize,
    _elem: PhantomData<fn() -> T>,
}

impl<T: Word> GlobalPtr<T> {
    /// The element at byte `offset` of `rank`'s segment.
    ///
    /// ```
    /// use amrq::splitc::GlobalPtr;
    /// let p = GlobalPtr::<f64>::new(2, 4096);
    /// assert_eq!((p.rank(), p.offset()), (2, 4096));
    /// ```
    pub const fn new(rank: Rank, offset: usize) -> Self {
        Self {
            rank,
            offset,
            _elem: PhantomData,
        }
    }

    /// The rank whose segment holds the element.
    ///
    /// ```
    /// use amrq::splitc::GlobalPtr;
    /// assert_eq!(GlobalPtr::<u8>::new(3, 0).rank(), 3);
    /// ```
    pub const fn rank(self) -> Rank {
        self.rank
    }

    /// Its byte offset in that segment.
    ///
    /// ```
    /// use amrq::splitc::GlobalPtr;
    /// assert_eq!((GlobalPtr::<u32>::new(0, 64) + 2).offset(), 72); // two u32 further
    /// ```
    pub const fn offset(self) -> usize {
        self.offset
    }

    /// The same offset on rank `rank` (where a symmetric allocation puts the same
    /// element of another rank).
    ///
    /// ```
    /// # use amrq::splitc::GlobalPtr;
    /// assert_eq!(GlobalPtr::<u32>::new(0, 8).on(3), GlobalPtr::new(3, 8));
    /// ```
    pub const fn on(self, rank: Rank) -> Self {
        Self::new(rank, self.offset)
    }

    /// Elements from `origin` to `self`, if both are on the same rank and a whole number
    /// of elements apart.
    ///
    /// ```
    /// use amrq::splitc::GlobalPtr;
    /// let p = GlobalPtr::<u64>::new(1, 800);
    /// assert_eq!((p + 5).offset_from(p), Some(5));
    /// assert_eq!(p.offset_from(p.on(0)), None); // another rank
    /// ```
    pub fn offset_from(self, origin: Self) -> Option<isize> {
        let size = std::mem::size_of::<T>() as isize;
        let bytes = (self.offset as isize).checked_sub(origin.offset as isize)?;
        (self.rank == origin.rank && bytes % size == 0).then_some(bytes / size)
    }

    /// Bytes of `n` elements.
    pub(crate) const fn bytes(n: usize) -> usize {
        n * std::mem::size_of::<T>()
    }
}

impl<T: Word> std::ops::Add<usize> for GlobalPtr<T> {
    type Output = Self;
    fn add(self, n: usize) -> Self {
        Self::new(self.rank, self.offset + Self::bytes(n))
    }
}

impl<T: Word> std::ops::Sub<usize> for GlobalPtr<T> {
    type Output = Self;
    fn sub(self, n: usize) -> Self {
        Self::new(self.rank, self.offset - Self::bytes(n))
    }
}

// By hand, not derived: a derive would ask `T` for the trait too.
impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for GlobalPtr<T> {}

impl<T> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.rank, self.offset) == (other.rank, other.offset)
    }
}

impl<T> Eq for GlobalPtr<T> {}

impl<T> PartialOrd for GlobalPtr<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for GlobalPtr<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.rank, self.offset).cmp(&(other.rank, other.offset))
    }
}

impl<T> std::hash::Hash for GlobalPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.rank, self.offset).hash(h);
    }
}

impl<T> std::fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GlobalPtr({}:{:#x})", self.rank, self.offset)
    }
}
