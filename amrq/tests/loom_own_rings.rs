//! Loom models of the claims of `amrq::conduit::claims`: own rings (`conduit::mem::own_rings`) and the Tag-On pool a
//! receiver's senders without one share: two senders after one own ring, exactly one
//! takes it, and a receiver that reads the marker frame published after the claim sees
//! the claim; two senders after one Tag-On block, exactly one holds it at a time, and
//! the block's bytes pass from one holder to the next (its writer gave it back, or the
//! receiver freed it after reading) without a race. Run with
//!
//! ```text
//! RUSTFLAGS="--cfg amrq_loom" cargo test --release --target-dir target/loom --test loom_own_rings
//! ```

#![cfg(amrq_loom)]

use amrq::conduit::claims::{claim_flag, free_flag, give_back_flag, take_free, taken_by};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

#[test]
fn one_own_ring_goes_to_one_sender_and_its_marker_shows_the_claim() {
    loom::model(|| {
        let dir = Arc::new([AtomicU64::new(0)]);
        // Each sender's marker frame: its sequence word (1: published).
        let seq = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let senders: Vec<_> = (0..2u64)
            .map(|s| {
                let (dir, seq) = (dir.clone(), seq.clone());
                loom::thread::spawn(move || {
                    let took = take_free(&dir[..], s + 1);
                    if took.is_some() {
                        seq[s as usize].store(1, Ordering::Release); // the marker
                    }
                    took.is_some()
                })
            })
            .collect();
        // The receiver reads whichever marker is published, then checks the claim.
        for s in 0..2u64 {
            if seq[s as usize].load(Ordering::Acquire) == 1 {
                assert!(taken_by(&dir[0], s + 1), "a marker without its claim");
            }
        }
        let took: Vec<bool> = senders.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(took.iter().filter(|&&t| t).count(), 1, "{took:?}");
    });
}

#[test]
fn a_shared_tag_on_block_has_one_holder_at_a_time() {
    loom::model(|| {
        // One flag word (0 free, 1 held) and the block's one byte.
        let flag = Arc::new(AtomicU64::new(0));
        let block = Arc::new(UnsafeCell::new(0u8));
        let held = Arc::new(AtomicU64::new(0)); // holders at once, for the check
        let senders: Vec<_> = (1..=2u8)
            .map(|s| {
                let (flag, block, held) = (flag.clone(), block.clone(), held.clone());
                loom::thread::spawn(move || {
                    if !claim_flag(&flag) {
                        return;
                    }
                    assert_eq!(held.fetch_add(1, Ordering::Relaxed), 0, "two holders");
                    // SAFETY: the block is this sender's while it holds the flag.
                    block.with_mut(|b| unsafe { *b = s });
                    held.fetch_sub(1, Ordering::Relaxed);
                    // Its frame found no room: the block goes back unnamed.
                    give_back_flag(&flag);
                })
            })
            .collect();
        for t in senders {
            t.join().unwrap();
        }
        // The receiver's side, after the senders (not beside them: loom cannot model a
        // claim that waits): a block it frees after reading passes on the same way.
        if claim_flag(&flag) {
            // SAFETY: held by this thread; every earlier holder gave it back.
            block.with(|b| assert!(unsafe { *b } <= 2));
            free_flag(&flag);
        }
    });
}
