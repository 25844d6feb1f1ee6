//! Loom models of the doorbell handshake (`amrq::conduit::doorbell`): a receiver that
//! arms and looks once more, against a sender that publishes a frame and rings; and a
//! front's thread about to sleep on its outbox, against a writer of a frame. Whatever
//! the interleaving, either the receiver's last look sees the frame, or the sender rang:
//! the summary bit is set (One-poll), and a sleeper's futex word was bumped (a wait that
//! would sleep on the value it read first returns). Run with
//!
//! ```text
//! RUSTFLAGS="--cfg amrq_loom" cargo test --release --target-dir target/loom --test loom_doorbell
//! ```

#![cfg(amrq_loom)]

use amrq::conduit::doorbell::{about_to_sleep, arm, finds_sleeper, ring};
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;

const BIT: u64 = 1 << 5;

#[derive(Default)]
struct Bell {
    /// The frame's sequence word (1: published).
    seq: AtomicU64,
    armed: AtomicU64,
    summary: AtomicU64,
    sleepers: AtomicU64,
    wake: AtomicU32,
}

/// One sender publishes and rings; the receiver arms (as a sleeper or not) and looks.
/// Returns (the receiver saw the frame, the wake value it read before arming).
fn run(sleeper: bool) -> (Arc<Bell>, bool, u32) {
    let b = Arc::new(Bell::default());
    let s = b.clone();
    let sender = loom::thread::spawn(move || {
        s.seq.store(1, Ordering::Release);
        if ring(&s.armed, &s.summary, &s.sleepers, BIT, false) {
            s.wake.fetch_add(1, Ordering::Release);
        }
    });
    let w = b.wake.load(Ordering::Acquire);
    arm(&b.armed, sleeper.then_some(&b.sleepers), BIT, 0);
    let saw = b.seq.load(Ordering::Acquire) == 1;
    sender.join().unwrap();
    (b, saw, w)
}

#[test]
fn a_sleeper_is_never_left_asleep_with_a_frame_waiting() {
    loom::model(|| {
        let (b, saw, w) = run(true);
        assert!(
            saw || b.wake.load(Ordering::Acquire) != w,
            "the receiver would sleep through a published frame"
        );
    });
}

/// Two senders publish on the same channel (a shared queue) and ring; the receiver
/// arms as a sleeper and looks. Only one of them may make the wake-up (the claim), but
/// whatever the interleaving, a frame the last look misses has had the futex word
/// bumped after the value the receiver will sleep on.
#[test]
fn two_senders_one_claimed_wake_up_no_frame_slept_through() {
    loom::model(|| {
        let b = Arc::new(Bell::default());
        let senders: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|frame| {
                let s = b.clone();
                loom::thread::spawn(move || {
                    s.seq.fetch_or(frame, Ordering::Release);
                    if ring(&s.armed, &s.summary, &s.sleepers, BIT, false) {
                        s.wake.fetch_add(1, Ordering::Release);
                    }
                })
            })
            .collect();
        let w = b.wake.load(Ordering::Acquire);
        arm(&b.armed, Some(&b.sleepers), BIT, 0);
        let seen = b.seq.load(Ordering::Acquire);
        for s in senders {
            s.join().unwrap();
        }
        let wakes = b.wake.load(Ordering::Acquire);
        assert!(
            seen == 3 || wakes != w,
            "the receiver would sleep through a published frame"
        );
        assert!(wakes <= 1, "one claimed wake-up per sleep, not {wakes}");
    });
}

#[test]
fn an_armed_summary_never_misses_a_frame() {
    loom::model(|| {
        let (b, saw, _) = run(false);
        assert!(
            saw || b.summary.load(Ordering::Acquire) & BIT != 0,
            "One-poll would read an empty summary with a frame waiting"
        );
        assert_eq!(
            b.wake.load(Ordering::Relaxed),
            0,
            "nobody sleeps: no wake-up"
        );
    });
}

/// A front's thread marks itself about to sleep and looks at its outbox once more; a
/// worker thread publishes a frame and wakes it if it finds it asleep. Whatever the
/// interleaving, either the last look sees the frame, or the word the thread would
/// sleep on moved (its futex wait on the value read first returns).
#[test]
fn an_outbox_writer_finds_the_sleeper_or_its_frame_is_seen() {
    loom::model(|| {
        // The frame's sequence word, the sleeping mark, the word slept on.
        let b = Arc::new((AtomicU64::new(0), AtomicU32::new(0), AtomicU32::new(0)));
        let w = b.clone();
        let writer = loom::thread::spawn(move || {
            w.0.store(1, Ordering::Release);
            if finds_sleeper(&w.1) {
                w.2.fetch_add(1, Ordering::Release);
            }
        });
        let seen = b.2.load(Ordering::Acquire);
        about_to_sleep(&b.1);
        let saw = b.0.load(Ordering::Acquire) == 1;
        writer.join().unwrap();
        assert!(saw || b.2.load(Ordering::Acquire) != seen, "a lost wake-up");
    });
}
