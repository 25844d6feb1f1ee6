//! Claims by compare-and-swap on words of a job's shared memory, for which several
//! senders may race: an own ring in a receiver's directory (see
//! `conduit::mem::own_rings`), a block of a Tag-On pool that senders share. The loom
//! models (`tests/loom_own_rings.rs`) run these functions.

use crate::sync::{AtomicU64, Ordering};

/// Takes the first free word of a receiver's directory for the sender `claim` names
/// (1 + its rank on the host); `None` if every own ring is taken. A word, once taken,
/// is never given back.
///
/// ```
/// use amrq::conduit::claims::take_free;
/// use std::sync::atomic::AtomicU64;
/// let dir = [AtomicU64::new(0), AtomicU64::new(0)];
/// assert_eq!(take_free(&dir, 4), Some(0));
/// assert_eq!(take_free(&dir, 7), Some(1));
/// assert_eq!(take_free(&dir, 9), None); // both taken
/// ```
pub fn take_free(words: &[AtomicU64], claim: u64) -> Option<usize> {
    // Relaxed: the claim publishes nothing; the receiver reads it after the marker
    // frame whose Release publication follows it in the sender's program order.
    words.iter().position(|w| {
        w.load(Ordering::Relaxed) == 0
            && w.compare_exchange(0, claim, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    })
}

/// Whether the sender `claim` names took the own ring of directory word `word`: what
/// a receiver checks when a marker frame says that sender moves there.
///
/// ```
/// use amrq::conduit::claims::{take_free, taken_by};
/// use std::sync::atomic::AtomicU64;
/// let dir = [AtomicU64::new(0)];
/// assert!(!taken_by(&dir[0], 3));
/// take_free(&dir, 3);
/// assert!(taken_by(&dir[0], 3) && !taken_by(&dir[0], 2));
/// ```
pub fn taken_by(word: &AtomicU64, claim: u64) -> bool {
    // Relaxed: the marker frame that asks was read with Acquire, after the sender's
    // claim in its program order (see `take_free`).
    word.load(Ordering::Relaxed) == claim
}

/// Claims a Tag-On block by its flag (0 free, 1 held): true if this caller holds it
/// now. Several senders may share a pool.
///
/// ```
/// use amrq::conduit::claims::{claim_flag, free_flag};
/// use std::sync::atomic::AtomicU64;
/// let flag = AtomicU64::new(0);
/// assert!(claim_flag(&flag) && !claim_flag(&flag)); // one holder
/// free_flag(&flag); // the receiver is done with it
/// assert!(claim_flag(&flag));
/// ```
pub fn claim_flag(flag: &AtomicU64) -> bool {
    // ORDERING: Acquire pairs with the Release of `free_flag` (the receiver's reads of
    // the block are done before it is overwritten) and of `give_back_flag` (the last
    // holder's writes too). The frame that names the block is published with Release
    // after this claim and the data. The load first leaves a block in use without a
    // locked instruction.
    flag.load(Ordering::Relaxed) == 0
        && flag
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
}

/// Gives back a Tag-On block claimed but never named by a frame (its frame found the
/// ring full).
///
/// ```
/// use amrq::conduit::claims::{claim_flag, give_back_flag};
/// use std::sync::atomic::AtomicU64;
/// let flag = AtomicU64::new(0);
/// assert!(claim_flag(&flag));
/// give_back_flag(&flag);
/// assert!(claim_flag(&flag)); // another sender's, or this one's again
/// ```
pub fn give_back_flag(flag: &AtomicU64) {
    // ORDERING: Release pairs with the next claim's Acquire (another sender's, where
    // senders share the pool): this holder's writes of the block come before its.
    flag.store(0, Ordering::Release);
}

/// Frees a Tag-On block the receiver has read, for the senders' next claim.
///
/// ```
/// use amrq::conduit::claims::{claim_flag, free_flag};
/// use std::sync::atomic::AtomicU64;
/// let flag = AtomicU64::new(1); // named by a frame the receiver has handled
/// free_flag(&flag);
/// assert!(claim_flag(&flag));
/// ```
pub fn free_flag(flag: &AtomicU64) {
    // ORDERING: Release: the receiver's reads of the block happen before a sender's
    // next claim of it; pairs with the Acquire in `claim_flag`.
    flag.store(0, Ordering::Release);
}
