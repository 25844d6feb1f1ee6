//! One-way stream of Short AMs: rank 0 sends `--iters` requests with one u64 arg to
//! rank 1, whose handler counts them (and checks their order).
//!
//! ```text
//! cargo run --release --example stream [-- --quick] [--iters N] [--batches B] [--ring-slots S] [--threads] [--json]
//! ```
//! Two ranks as processes (or threads with `--threads`) pinned to cores 0 and 1. Each
//! batch of AMs alternates with a batch of the raw stream ([`amrq::reference::RawStream`]:
//! a plain SPSC ring of 1024 slots, no amrq code) between the same two cores. Rank 0
//! prints last, after both finished:
//! `stream: msgs_per_s=… raw_msgs_per_s=… ratio=… batch_ratio=…` (medians over batches;
//! an AM batch ends when rank 1 has run every handler; `ratio` is amrq's median over
//! the raw stream's, `batch_ratio` the median of the per-batch ratios).

mod common;

use amrq::prelude::*;
use amrq::reference::{median, RawStream, RAW_STREAM_BYTES};
use std::cell::Cell;
use std::time::Instant;

/// One-way stream of Short AMs.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    common: common::Common,
    #[command(flatten)]
    run: common::Batches,
    /// Slots of each AM ring (default: the runtime's, `AMRQ_RING_SLOTS` or 256).
    #[arg(long)]
    ring_slots: Option<u64>,
}

struct State {
    count: Cell<u64>,
    out_of_order: Cell<u64>,
    done: ReplyHandler,
    acked: Cell<u64>,
    finished: Cell<u64>,
}

fn main() {
    let o = <Args as clap::Parser>::parse();
    let mut cfg = Config::new();
    if let Some(slots) = o.ring_slots {
        cfg.ring_slots.set(slots);
    }
    common::run(&o.common, cfg, common::Ranks::Exactly(2), |setup| {
        rank_main(setup, &o)
    });
}

// Out of line: the loops measured are compiled the same whatever the closure that calls
// this inlines (see `pingpong`).
#[inline(never)]
fn rank_main(setup: Setup, o: &Args) -> amrq::Result<()> {
    let threads = setup.config().threads.get();
    let ring_slots = setup.config().ring_slots.get();
    let (iters, batches) = o.run.or(o.common.quick, (1_000_000, 10_000_000), (5, 11));
    common::two_ranks("stream", setup.size())?;
    let mut table = HandlerTable::new();
    let done = table.reply("done", |s: &State, m| {
        s.acked.set(m.arg(0)?);
        Ok(())
    });
    let count = table.request("count", |s: &State, _ctx, m| {
        let n = s.count.get() + 1;
        if m.arg(0)? != n {
            s.out_of_order.set(s.out_of_order.get() + 1);
        }
        s.count.set(n);
        Ok(())
    });
    let finish = table.request("finish", |s: &State, ctx, _m| {
        s.finished.set(s.finished.get() + 1);
        ctx.reply(s.done, &[s.count.get()])
    });
    let state = State {
        count: Cell::new(0),
        out_of_order: Cell::new(0),
        done,
        acked: Cell::new(0),
        finished: Cell::new(0),
    };
    let am = setup.start(table, state)?;
    let at = am.rma().alloc_symmetric(RAW_STREAM_BYTES, 4096)?;
    let Some((seg, _)) = am.rq().conduit().mapped_segment(1) else {
        return Err(
            "stream measures against the raw stream in shared memory: run it on one host".into(),
        );
    };
    // SAFETY: a fresh page-aligned allocation in rank 1's segment (zeroed at creation),
    // mapped by both ranks, used for the raw stream only.
    let raw = unsafe { RawStream::in_memory(seg.add(at)) };
    let (mut rates, mut raw_rates) = (Vec::new(), Vec::new());
    let mut sent = 0u64;
    for b in 0..=batches {
        if am.rank() == 0 {
            let r = raw.send(b * iters, iters);
            let t = Instant::now();
            for i in sent + 1..=sent + iters {
                am.request(1, count, &[i])?;
            }
            sent += iters;
            // The batch ends when rank 1 has handled everything: it answers `finish`
            // only after the counts before it (one ring, in order).
            am.request(1, finish, &[])?;
            am.wait_until(|s| s.acked.get() >= sent)?;
            if b > 0 {
                rates.push(iters as f64 / t.elapsed().as_secs_f64());
                raw_rates.push(r);
            }
        } else {
            if raw.receive(b * iters, iters) != 0 {
                return Err("the raw stream's memory is not shared".into());
            }
            // Rank 0 waits for the answer to `finish` before its next raw batch.
            am.wait_until(|s| s.finished.get() > b)?;
        }
    }
    am.barrier()?;
    if am.rank() == 1 && am.state().out_of_order.get() != 0 {
        return Err("stream arrived out of order".into());
    }
    if am.rank() == 0 {
        let mut per_batch: Vec<f64> = rates.iter().zip(&raw_rates).map(|(a, r)| a / r).collect();
        let batch_ratio = median(&mut per_batch);
        let raw_rate = median(&mut raw_rates);
        let rate = median(&mut rates);
        let how = if threads { "threads" } else { "processes" };
        println!(
            "ranks: 2 {how} pinned to cores 0 and 1; ring {} slots; {batches} batches of {iters} Short AMs",
            ring_slots
        );
        println!(
            "one-way Short AM stream: median {:.1} M msgs/s ({:.2} ns/msg; min {:.1}, max {:.1} M/s)",
            rate / 1e6,
            1e9 / rate,
            rates[0] / 1e6,
            rates[rates.len() - 1] / 1e6
        );
        println!(
            "raw one-way stream (SPSC ring, 1024 slots, head every 256): median {:.1} M msgs/s",
            raw_rate / 1e6
        );
        common::summary(
            "stream",
            o.common.json,
            &[
                ("msgs_per_s", rate),
                ("raw_msgs_per_s", raw_rate),
                ("ratio", rate / raw_rate),
                ("batch_ratio", batch_ratio),
            ],
        );
    }
    Ok(())
}
