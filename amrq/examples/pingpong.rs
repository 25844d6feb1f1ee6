//! Short AM round trip between two ranks, next to the raw cache-line round trip measured
//! in the same run between the same two pinned ranks.
//!
//! ```text
//! cargo run --release --example pingpong [-- --quick] [--iters N] [--batches B] [--json]
//! ```
//! Ranks are threads here, pinned to cores 0 and 1; the last line is
//! `pingpong: rtt_ns=… raw_rtt_ns=… ratio=…` (medians over batches; ratio = amrq / raw).

mod common;

use amrq::prelude::*;
use amrq::reference::{median, RawPingPong};
use std::cell::Cell;
use std::time::Instant;

const USAGE: &str = "usage: pingpong [--quick] [--iters N] [--batches B] [--json]";

struct State {
    pong: ReplyHandler,
    /// Requests served (rank 1) / replies received (rank 0).
    count: Cell<u64>,
}

fn main() {
    let o = common::opts(USAGE);
    let iters = o.iters.unwrap_or(if o.quick { 20_000 } else { 100_000 });
    let batches = o
        .num("batches", if o.quick { 11 } else { 31 }, USAGE)
        .max(1);
    let raw = RawPingPong::new();
    let out = amrq::threads::run(2, &Config::default(), |conduit| -> Result<_, AmError> {
        let mut table = HandlerTable::new();
        let pong = table.reply("pong", |s: &State, m| {
            s.count.set(m.arg(0));
            Ok(())
        });
        let ping = table.request("ping", |s: &State, ctx, m| {
            s.count.set(s.count.get() + 1);
            ctx.reply(s.pong, &[m.arg(0)])
        });
        let am = Am::new(
            conduit,
            table,
            State {
                pong,
                count: Cell::new(0),
            },
        )?;
        let (mut am_ns, mut raw_ns) = (Vec::new(), Vec::new());
        // Batch 0 warms up and is dropped; then raw and amrq batches alternate.
        for b in 0..=batches {
            let base = b * iters;
            if am.rank() == 0 {
                raw_ns.push(raw.initiate(base, iters));
                let t = Instant::now();
                for i in base + 1..=base + iters {
                    am.request(1, ping, &[i])?;
                    am.wait_until(|s| s.count.get() == i)?;
                }
                am_ns.push(t.elapsed().as_nanos() as f64 / iters as f64);
            } else {
                raw.respond(base, iters);
                am.wait_until(|s| s.count.get() == base + iters)?;
            }
        }
        am.barrier()?;
        Ok((
            am_ns.split_off(1.min(am_ns.len())),
            raw_ns.split_off(1.min(raw_ns.len())),
        ))
    });
    let (mut am_ns, mut raw_ns) = match out {
        Ok(mut v) => match v.swap_remove(0) {
            Ok(r) => r,
            Err(e) => common::fail(USAGE, &e.to_string()),
        },
        Err(e) => common::fail(USAGE, &e.to_string()),
    };
    let (rtt, raw_rtt) = (median(&mut am_ns), median(&mut raw_ns));
    println!("ranks: 2 threads pinned to cores 0 and 1; {batches} batches of {iters} round trips");
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
        o.json,
        &[
            ("rtt_ns", rtt),
            ("raw_rtt_ns", raw_rtt),
            ("ratio", rtt / raw_rtt),
        ],
    );
}
