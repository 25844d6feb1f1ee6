//! Loom models of the hand-off of a thread's call (`amrq::conduit::handoff::CallSlot`): the rank's
//! thread lands the outcome while the calling thread waits for it, takes it or gives up
//! on it. Whatever the interleaving, a taken answer is the one landed, whole, and a
//! slot given up on is free again once its answer lands, never before. Run with
//!
//! ```text
//! RUSTFLAGS="--cfg amrq_loom" cargo test --release --target-dir target/loom --test loom_calls
//! ```

#![cfg(amrq_loom)]

use amrq::conduit::handoff::CallSlot;
use loom::sync::Arc;

const TARGET: usize = 3;

#[test]
fn a_taken_answer_is_the_landed_one_whole() {
    loom::model(|| {
        let slot = Arc::new(CallSlot::<()>::default());
        slot.open(TARGET);
        let rank = slot.clone();
        let lander = loom::thread::spawn(move || assert!(rank.answer(TARGET, &[7, 8, 9])));
        while !slot.is_done() {
            loom::thread::yield_now();
        }
        let (words, len) = slot.take().expect("an answer, not a failure");
        assert_eq!(&words[..len], &[7, 8, 9]);
        assert!(slot.is_free());
        lander.join().unwrap();
    });
}

#[test]
fn a_call_given_up_on_is_freed_once_its_answer_lands_whatever_comes_first() {
    loom::model(|| {
        let slot = Arc::new(CallSlot::<()>::default());
        slot.open(TARGET);
        let rank = slot.clone();
        let lander = loom::thread::spawn(move || assert!(rank.answer(TARGET, &[1])));
        slot.abandon();
        lander.join().unwrap();
        assert!(slot.is_free(), "the slot of an abandoned call stays taken");
    });
}

#[test]
fn a_slot_given_up_on_is_not_free_before_its_answer_lands() {
    loom::model(|| {
        let slot = Arc::new(CallSlot::<()>::default());
        slot.open(TARGET);
        let caller = slot.clone();
        let giver = loom::thread::spawn(move || caller.abandon());
        giver.join().unwrap();
        // Not free: a late answer could otherwise land in the next call.
        assert!(!slot.is_free());
        assert!(slot.answer(TARGET, &[1]));
        assert!(slot.is_free());
        assert!(
            !slot.answer(TARGET, &[1]),
            "a second answer for no call lands"
        );
    });
}
