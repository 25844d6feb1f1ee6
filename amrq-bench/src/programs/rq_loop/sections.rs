//! `rq-loop --section KIND`: an uncontended critical section entered and left, its
//! progress thread running and idle: `engine` (a job's `EngineJob::hold` and its drop),
//! `rq` (RQ's `Interrupts::hold` over an Interrupt queue), or `raw` (the floor: a
//! volatile store and a compiler fence to enter, the same to leave, nothing on the
//! other side). Under callgrind the three are the instruction counts `budget` guards.

use super::{median, Args, Flags};
use amrq::prelude::*;
use std::sync::atomic::{compiler_fence, AtomicBool, Ordering};
use std::time::Instant;

/// Which section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    /// `EngineJob::hold` and its drop, the engine running.
    Engine,
    /// `Interrupts::hold` and its drop, the progress thread running.
    Rq,
    /// A volatile store and a compiler fence, twice.
    Raw,
}

/// Times `iters` sections per batch; prints the median and the summary line.
pub fn sections(o: &Args, f: &Flags, kind: Section) {
    let iters = o.iters_or(f, 1_000_000);
    let batches = o.batches.max(1);
    let mut v = match kind {
        Section::Engine => super::one_rank(|setup| {
            let mut job = setup.start_engine(SendHandlerTable::<()>::new(), ())?;
            let v = timed(iters, batches, || drop(job.hold()));
            job.finish()?;
            Ok(v)
        }),
        Section::Rq => {
            use amrq::config::{Delivery, QueueSpec};
            let mut cfg = Config::default();
            cfg.add(QueueSpec::new("alarms", 16).delivery(Delivery::Interrupt));
            let mut eps = amrq::conduit::threads::endpoints_for(1, &cfg.conduit_spec())
                .unwrap_or_else(|e| super::super::fail(e));
            let mut rq = amrq::rq::Rq::new(eps.remove(0));
            let intr = rq
                .start_interrupts(|_, _, _, _| {})
                .unwrap_or_else(|| super::super::fail("no Interrupt queue"));
            timed(iters, batches, || drop(intr.hold()))
        }
        Section::Raw => {
            // A static: a local flag no other thread can see, the compiler may drop.
            static FLAG: AtomicBool = AtomicBool::new(false);
            timed(iters, batches, || {
                // SAFETY: the flag's own byte, written by this thread only.
                unsafe { std::ptr::write_volatile(FLAG.as_ptr(), true) };
                compiler_fence(Ordering::SeqCst);
                // SAFETY: as above.
                unsafe { std::ptr::write_volatile(FLAG.as_ptr(), false) };
                compiler_fence(Ordering::SeqCst);
            })
        }
    };
    let ns = median(&mut v);
    println!(
        "{kind:?} section entered and left, uncontended, {batches} batches of {iters}: {ns:.2} ns"
    );
    f.summary("section", &[("ns_per_section", ns)]);
}

/// Each batch's ns per call of `section`.
#[inline(never)]
fn timed(iters: u64, batches: u64, mut section: impl FnMut()) -> Vec<f64> {
    (0..batches)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                section();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect()
}
