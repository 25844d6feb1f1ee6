//! Loom models of the hand-off between a rank's thread and its progress thread
//! (`amrq::util::atomicity`): the rank holds for sections, the progress thread enters to
//! run handlers, and whatever the interleaving the two never touch the rank's state at
//! once, every handler runs once, and a deferred progress thread is let go on. The
//! model runs the symmetric fences, loom's stand-in for `membarrier`. Run with
//!
//! ```text
//! RUSTFLAGS="--cfg amrq_loom" cargo test --release --target-dir target/loom --test loom_atomicity
//! ```

#![cfg(amrq_loom)]

use amrq::util::atomicity::Atomicity;
use loom::cell::UnsafeCell;
use loom::sync::Arc;

/// The rank's state, which both sides write without atomics: loom fails the model if
/// two accesses are not ordered by the hand-off.
struct Rank {
    atomicity: Atomicity,
    state: UnsafeCell<u64>,
}

impl Rank {
    fn add(&self, n: u64) {
        // SAFETY: called only inside a section or an entered batch; loom checks that
        // no two such calls overlap.
        self.state.with_mut(|s| unsafe { *s += n });
    }
}

/// The progress thread runs one handler (adds 1), trying until it may.
fn progress(r: Arc<Rank>) -> loom::thread::JoinHandle<()> {
    loom::thread::spawn(move || loop {
        if r.atomicity.try_enter() {
            r.add(1);
            r.atomicity.leave();
            return;
        }
    })
}

/// The rank's thread makes `sections` sections (each adds 10); a release that finds
/// the progress thread deferred lets it go on.
fn sections(r: &Rank, sections: u64) {
    for _ in 0..sections {
        r.atomicity.hold();
        r.add(10);
        if r.atomicity.release() {
            r.atomicity.resume();
        }
    }
}

/// Every interleaving (with a preemption bound: the progress thread's retries would
/// otherwise make every path unbounded) of `n` sections against one handler: both
/// sides' additions are all there at the end.
fn sections_against_a_handler(n: u64) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(move || {
        let r = Arc::new(Rank {
            atomicity: Atomicity::new(),
            state: UnsafeCell::new(0),
        });
        let p = progress(r.clone());
        sections(&r, n);
        p.join().unwrap();
        // SAFETY: both threads are done.
        assert_eq!(r.state.with(|s| unsafe { *s }), 10 * n + 1);
    });
}

#[test]
fn a_section_and_a_handler_never_overlap_and_both_run() {
    sections_against_a_handler(1);
}

#[test]
fn two_sections_in_a_row_against_a_handler() {
    sections_against_a_handler(2);
}
