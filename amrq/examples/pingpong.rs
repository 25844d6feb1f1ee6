//! Short AM round trip between two ranks, next to the raw cache-line round trip measured
//! in the same run between the same two pinned ranks.
//!
//! ```text
//! cargo run --release --example pingpong [-- --quick] [--iters N] [--batches B] [--threads] [--json]
//! ```
//! Two ranks as processes (self-launched, or under `amrun -n 2`), pinned to cores 0 and
//! 1; `--threads` runs them as threads instead. Rank 0 prints, after both have finished,
//! `pingpong: rtt_ns=… raw_rtt_ns=… ratio=… batch_ratio=…`: medians over batches,
//! `ratio` = amrq median / raw median, and `batch_ratio` the median of each
//! amrq batch over the raw batch just before it, which stays right when the VM moves its
//! CPUs in the middle of a run (the raw figure then jumps, e.g. from 150 to 600 ns).
//! The raw lines live in rank 0's registered segment, mapped by both. Across hosts (one
//! rank on each) there is no memory to share: it prints the round trip alone, and says so.

mod common;

use amrq::prelude::*;
use amrq::reference::{median, RawPingPong, RAW_PINGPONG_BYTES};
use std::cell::Cell;
use std::time::Instant;

/// Short AM round trip beside the raw cache-line round trip.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    common: common::Common,
    #[command(flatten)]
    run: common::Batches,
}

struct State {
    pong: ReplyHandler,
    /// Requests served (rank 1) / replies received (rank 0).
    count: Cell<u64>,
}

fn main() {
    let o = <Args as clap::Parser>::parse();
    common::run(
        &o.common,
        Config::new(),
        common::Ranks::Exactly(2),
        |setup| rank_main(setup, &o),
    );
}

// Out of line: the loops measured are compiled the same whatever the closure that calls
// this inlines (inlined into it, the AM loop's code moved and its timing with it).
#[inline(never)]
fn rank_main(setup: Setup, o: &Args) -> amrq::Result<()> {
    let (iters, batches) = o.run.or(o.common.quick, (20_000, 100_000), (11, 31));
    common::two_ranks("pingpong", setup.size())?;
    let threads = setup.config().threads.get();
    let mut table = HandlerTable::new();
    let pong = table.reply("pong", |s: &State, m| {
        s.count.set(m.arg(0)?);
        Ok(())
    });
    let ping = table.request("ping", |s: &State, ctx, m| {
        s.count.set(s.count.get() + 1);
        ctx.reply(s.pong, &[m.arg(0)?])
    });
    let state = State {
        pong,
        count: Cell::new(0),
    };
    let job = setup.start(table, state)?;
    // The raw lines in rank 0's segment, mapped by both where they share memory; across
    // hosts no memory is shared, and there is no raw reference to measure.
    let at = job.rma().alloc_symmetric(RAW_PINGPONG_BYTES, 4096)?;
    let raw = job.rq().conduit().mapped_segment(0).map(|(seg, _)| {
        // SAFETY: `at` is a fresh page-aligned allocation of RAW_PINGPONG_BYTES in rank
        // 0's segment (zeroed at creation), used for the raw ping-pong only.
        unsafe { RawPingPong::in_memory(seg.add(at)) }
    });
    let am = job.am();
    let (mut am_ns, mut raw_ns) = (Vec::new(), Vec::new());
    // Batch 0 warms up and is dropped; then raw and amrq batches alternate.
    for b in 0..=batches {
        let base = b * iters;
        if am.rank() == 0 {
            let r = raw.as_ref().map(|raw| raw.initiate(base, iters));
            let t = Instant::now();
            for i in base + 1..=base + iters {
                am.request(1, ping, &[i])?;
                am.wait_until(|s| s.count.get() >= i)?;
            }
            if b > 0 {
                raw_ns.extend(r);
                am_ns.push(t.elapsed().as_nanos() as f64 / iters as f64);
            }
        } else {
            if let Some(raw) = &raw {
                raw.respond(base, iters);
            }
            am.wait_until(|s| s.count.get() >= base + iters)?;
        }
    }
    am.barrier()?;
    if am.rank() == 0 && raw.is_none() {
        let rtt = median(&mut am_ns);
        println!("ranks: 2 processes on two hosts; {batches} batches of {iters} round trips");
        println!(
            "raw cache-line round trip: not measured (the ranks share no memory across hosts)"
        );
        println!(
            "AM Short request→reply:    median {:.2} µs (min {:.2}, max {:.2})",
            rtt / 1e3,
            am_ns[0] / 1e3,
            am_ns[am_ns.len() - 1] / 1e3
        );
        common::summary("pingpong", o.common.json, &[("rtt_ns", rtt)]);
    } else if am.rank() == 0 {
        let mut per_batch: Vec<f64> = am_ns.iter().zip(&raw_ns).map(|(a, r)| a / r).collect();
        let batch_ratio = median(&mut per_batch);
        let (rtt, raw_rtt) = (median(&mut am_ns), median(&mut raw_ns));
        println!(
            "ranks: 2 {} pinned to cores 0 and 1; {batches} batches of {iters} round trips",
            common::placement(threads)
        );
        println!(
            "raw cache-line round trip: median {raw_rtt:.1} ns (min {:.1}, max {:.1})",
            raw_ns[0],
            raw_ns[raw_ns.len() - 1]
        );
        println!(
            "AM Short request→reply:    median {rtt:.1} ns (min {:.1}, max {:.1})",
            am_ns[0],
            am_ns[am_ns.len() - 1]
        );
        common::summary(
            "pingpong",
            o.common.json,
            &[
                ("rtt_ns", rtt),
                ("raw_rtt_ns", raw_rtt),
                ("ratio", rtt / raw_rtt),
                ("batch_ratio", batch_ratio),
            ],
        );
    }
    Ok(())
}
