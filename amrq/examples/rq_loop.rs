//! Single-thread cost of the Remote Queues fast path: one rank enqueues a Short frame
//! (one u64 arg) into its own queue and dequeues it, in place, `--iters` times per batch.
//! Deterministic enough for `valgrind --tool=callgrind` instruction counts.
//!
//! ```text
//! cargo run --release --example rq_loop [-- --quick] [--iters N] [--json]
//! ```
//! Last line: `rq_loop: ns_per_frame=…` (median over batches).

mod common;

use amrq::conduit::{threads, ReceivedFrame};
use amrq::reference::median;
use amrq::rq::{QueueId, Rq};
use std::time::Instant;

const USAGE: &str = "usage: rq_loop [--quick] [--iters N] [--batches B] [--json]";

fn main() {
    let o = common::opts(USAGE);
    let iters = o.iters.unwrap_or(if o.quick { 200_000 } else { 2_000_000 });
    let batches = o.num("batches", 11, USAGE).max(1);
    let mut eps =
        threads::endpoints(1, &[256, 256]).unwrap_or_else(|e| common::fail(USAGE, &e.to_string()));
    let rq = Rq::new(eps.remove(0));
    let q = QueueId::AM_REQUEST;
    let mut per_batch = Vec::new();
    let mut sum = 0u64;
    for _ in 0..batches {
        let t = Instant::now();
        for i in 0..iters {
            match rq.enqueue(0, q, &[i], &[]) {
                Ok(true) => {}
                other => common::fail(USAGE, &format!("enqueue: {other:?}")),
            }
            match rq.read_queue(q) {
                Ok(Some(f)) => {
                    sum = sum.wrapping_add(f.args()[0]);
                    f.release();
                }
                other => common::fail(USAGE, &format!("read_queue: {other:?}")),
            }
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    let expect = (iters * (iters - 1) / 2).wrapping_mul(batches);
    if sum != expect {
        common::fail(
            USAGE,
            &format!("checksum {sum} != {expect}: frames lost or duplicated"),
        );
    }
    let ns = median(&mut per_batch);
    println!(
        "one rank, enqueue → read_queue → release of a Short frame, {batches} batches of {iters}"
    );
    common::summary("rq_loop", o.json, &[("ns_per_frame", ns)]);
}
