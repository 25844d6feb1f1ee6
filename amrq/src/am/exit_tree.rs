//! The tree the job's end counts on: the heap of `util::heap_tree`, over which the
//! conduit's set-up collectives ran too (so its connections are made already). Each
//! rank reports to its parent how many ranks of its part of the tree have returned and
//! finished their flush, and the root sends the totals down. A rank talks to its parent
//! and children only, so the end costs each rank O(1) messages and connections, not one
//! per rank of the job.
//!
//! A rank that left early (without taking part) is skipped: its nearest ancestor still
//! there adopts its children and counts it as done. Once rank 0 has left, the lowest
//! rank still there is the root (every rank below it left, so all its ancestors did)
//! and adopts every rank whose ancestors all left. Ranks learn of departures at
//! different times; a part's count can only lag, never count a rank twice: a rank is
//! counted by the one rank that, in its own view, reaches it first.

use crate::conduit::Rank;
use crate::util::heap_tree::{children_of, parent_of};

/// Where rank `me` of `n` reports, given who has left (`left`; `me` has not): its
/// nearest ancestor still there, else the lowest rank still there; `None` if `me` is
/// the root.
pub(super) fn report_to(me: Rank, n: usize, left: &mut impl FnMut(Rank) -> bool) -> Option<Rank> {
    let mut up = parent_of(me);
    while let Some(p) = up {
        if !left(p) {
            return Some(p);
        }
        up = parent_of(p);
    }
    (0..n).find(|&r| r == me || !left(r)).filter(|&r| r != me)
}

/// Rank `me`'s part: the ranks it hears reports from (its children still there,
/// through any that left), and how many ranks that left it counts itself. `root`: `me`
/// is the root ([`report_to`] is `None`), which also adopts every rank whose ancestors
/// all left.
pub(super) fn part(
    me: Rank,
    n: usize,
    root: bool,
    left: &mut impl FnMut(Rank) -> bool,
) -> (Vec<Rank>, u32) {
    let mut stack: Vec<Rank> = children_of(me, n).collect();
    if root && me != 0 {
        stack.push(0);
    }
    let (mut kids, mut skipped) = (Vec::new(), 0);
    while let Some(r) = stack.pop() {
        if r == me {
            continue; // the root's own children are on the stack already
        }
        if left(r) {
            skipped += 1;
            stack.extend(children_of(r, n));
        } else {
            kids.push(r);
        }
    }
    kids.sort_unstable();
    (kids, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank still there is counted once, by itself, and every rank that left once,
    /// by one rank's part, when all ranks know the same departures.
    fn covers_once(n: usize, gone: &[Rank]) {
        let mut left = |r: Rank| gone.contains(&r);
        let mut counted = vec![0u32; n];
        let mut skipped_total = 0;
        let mut roots = 0;
        for me in (0..n).filter(|r| !gone.contains(r)) {
            counted[me] += 1;
            let up = report_to(me, n, &mut left);
            roots += usize::from(up.is_none());
            let (kids, skipped) = part(me, n, up.is_none(), &mut left);
            skipped_total += skipped;
            for k in kids {
                assert_eq!(
                    report_to(k, n, &mut left),
                    Some(me),
                    "{k} reports elsewhere"
                );
            }
        }
        assert_eq!(roots, 1, "one root");
        assert!(counted
            .iter()
            .enumerate()
            .all(|(r, &c)| c == u32::from(!gone.contains(&r))));
        assert_eq!(
            skipped_total as usize,
            gone.len(),
            "{n} ranks, left {gone:?}"
        );
    }

    #[test]
    fn every_rank_is_counted_once_whoever_left() {
        for n in [1, 2, 3, 8, 9, 10, 73, 100] {
            covers_once(n, &[]);
            if n > 1 {
                covers_once(n, &[n - 1]);
                covers_once(n, &[0]);
            }
            if n > 9 {
                covers_once(n, &[0, 1, 9]);
                covers_once(n, &[1, 2, 3, 4, 5, 6, 7, 8]);
                covers_once(n, &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
            }
        }
    }

    #[test]
    fn the_lowest_rank_still_there_is_the_root_once_rank_0_left() {
        let mut left = |r: Rank| r == 0;
        assert_eq!(report_to(1, 20, &mut left), None);
        assert_eq!(report_to(2, 20, &mut left), Some(1));
        assert_eq!(report_to(9, 20, &mut left), Some(1)); // its parent, rank 1
        let (kids, skipped) = part(1, 20, true, &mut left);
        assert_eq!(skipped, 1);
        assert_eq!(kids, [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    }
}
