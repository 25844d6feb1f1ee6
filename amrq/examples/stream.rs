//! One-way stream of Short AMs: rank 0 sends `--iters` requests with one u64 arg to
//! rank 1, whose handler counts them (and checks their order).
//!
//! ```text
//! cargo run --release --example stream [-- --quick] [--iters N] [--batches B] [--ring-slots S] [--threads] [--json]
//! ```
//! Two ranks as processes (or threads with `--threads`) pinned to cores 0 and 1. Rank 0
//! prints last, after both finished: `stream: msgs_per_s=…` (median over batches; a
//! batch ends when rank 1 has run every handler).

mod common;

use amrq::prelude::*;
use amrq::reference::median;
use std::cell::Cell;
use std::time::Instant;

/// One-way stream of Short AMs.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    common: common::Common,
    #[command(flatten)]
    run: common::Batches,
    /// Slots of each AM ring.
    #[arg(long, default_value_t = 1024)]
    ring_slots: u64,
}

struct State {
    count: Cell<u64>,
    out_of_order: Cell<u64>,
    done: ReplyHandler,
    acked: Cell<u64>,
}

fn main() {
    let o = <Args as clap::Parser>::parse();
    let mut cfg = Config::from_env().unwrap_or_else(|e| common::fail(&e));
    cfg.am_ring_slots = o.ring_slots;
    common::run_ranks(&o.common, 2, &cfg, |c| {
        rank_main(c, &o, &cfg).map_err(|e| e.to_string())
    });
}

fn rank_main(
    conduit: amrq::conduit::mem::MemConduit,
    o: &Args,
    cfg: &Config,
) -> Result<(), AmError> {
    use amrq::conduit::Conduit;
    let (iters, batches) = o.run.or(o.common.quick, (1_000_000, 10_000_000), (5, 11));
    common::two_ranks("stream", conduit.size());
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
        ctx.reply(s.done, &[s.count.get()])
    });
    let state = State {
        count: Cell::new(0),
        out_of_order: Cell::new(0),
        done,
        acked: Cell::new(0),
    };
    let am = Am::new(conduit, table, state)?;
    let mut rates = Vec::new();
    let mut sent = 0u64;
    for b in 0..=batches {
        if am.rank() == 0 {
            let t = Instant::now();
            for _ in 0..iters {
                sent += 1;
                am.request(1, count, &[sent])?;
            }
            // The batch ends when rank 1 has handled everything: it answers `finish`
            // only after the counts before it (one ring, in order).
            am.request(1, finish, &[])?;
            am.wait_until(|s| s.acked.get() >= sent)?;
            if b > 0 {
                rates.push(iters as f64 / t.elapsed().as_secs_f64());
            }
        } else {
            // `finish` is served by the next batch's wait or by the barrier. `>=`: a
            // wait round handles up to 64 requests, and the next batch's may be among
            // them.
            am.wait_until(|s| s.count.get() >= (b + 1) * iters)?;
        }
    }
    am.barrier()?;
    if am.rank() == 1 && am.state().out_of_order.get() != 0 {
        return Err(AmError::BadRuntimeMessage {
            source_rank: 0,
            what: "stream arrived out of order",
        });
    }
    if am.rank() == 0 {
        let rate = median(&mut rates);
        let how = if o.common.threads {
            "threads"
        } else {
            "processes"
        };
        println!(
            "ranks: 2 {how} pinned to cores 0 and 1; ring {} slots; {batches} batches of {iters} Short AMs",
            cfg.am_ring_slots
        );
        println!(
            "one-way Short AM stream: median {:.1} M msgs/s ({:.2} ns/msg; min {:.1}, max {:.1} M/s)",
            rate / 1e6,
            1e9 / rate,
            rates[0] / 1e6,
            rates[rates.len() - 1] / 1e6
        );
        common::summary("stream", o.common.json, &[("msgs_per_s", rate)]);
    }
    Ok(())
}
