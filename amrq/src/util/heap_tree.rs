//! The tree over a job's ranks that its collectives and its end run on: a heap of
//! fan-out [`FANOUT`], rank `r`'s parent `(r - 1) / FANOUT`. A rank talks to its parent
//! and at most [`FANOUT`] children, so a collective costs each rank O(1) connections,
//! and one made at start-up serves the job's end again.

/// Children per rank.
pub const FANOUT: usize = 8;

/// Rank `r`'s parent (`None` for rank 0).
///
/// ```
/// use amrq::util::heap_tree::parent_of;
/// assert_eq!((parent_of(0), parent_of(8), parent_of(9)), (None, Some(0), Some(1)));
/// ```
pub fn parent_of(r: usize) -> Option<usize> {
    r.checked_sub(1).map(|r| r / FANOUT)
}

/// Rank `r`'s children in a job of `n` ranks.
///
/// ```
/// use amrq::util::heap_tree::children_of;
/// assert_eq!(children_of(0, 5).collect::<Vec<_>>(), [1, 2, 3, 4]);
/// assert_eq!(children_of(1, 100).collect::<Vec<_>>(), (9..17).collect::<Vec<_>>());
/// ```
pub fn children_of(r: usize, n: usize) -> impl Iterator<Item = usize> {
    let first = r.saturating_mul(FANOUT).saturating_add(1);
    (first..first.saturating_add(FANOUT)).filter(move |&c| c < n)
}
