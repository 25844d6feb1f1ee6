//! Single-thread cost of the fast paths, one rank, no other core involved, so that
//! `valgrind --tool=callgrind` counts are repeatable:
//!
//! - default: enqueue a Short frame (one u64 arg) into the rank's own queue and take it
//!   back out in place (read_queue + release);
//! - `--am`: a whole Short AM round trip to itself: request, poll (the request handler
//!   replies), poll (the reply handler runs). The software cost of a round trip, both
//!   sides, without the cache-line transfers;
//! - `--empty-poll`: `Am::poll` when nothing has arrived.
//!
//! ```text
//! cargo run --release --example rq_loop [-- --quick] [--am] [--iters N] [--json]
//! ```
//! Last line: `rq_loop: ns_per_frame=…` or `am_loop: ns_per_round_trip=…` (medians).

mod common;

use amrq::conduit::{threads, ReceivedFrame};
use amrq::prelude::*;
use amrq::reference::median;
use std::cell::Cell;
use std::time::Instant;

const USAGE: &str =
    "usage: rq_loop [--quick] [--am | --empty-poll] [--iters N] [--batches B] [--json]";

fn main() {
    let am_mode = std::env::args().any(|a| a == "--am");
    let poll_mode = std::env::args().any(|a| a == "--empty-poll");
    let args: Vec<String> = std::env::args()
        .filter(|a| a != "--am" && a != "--empty-poll")
        .collect();
    let o = common::opts_from(args, USAGE);
    if am_mode {
        am_loop(&o);
    } else if poll_mode {
        empty_poll(&o);
    } else {
        rq_loop(&o);
    }
}

/// `Am::poll` on empty request and reply queues of a one-rank job: the unsuccessful
/// poll of Liu & Culler.
fn empty_poll(o: &common::Opts) {
    let iters = o
        .iters
        .unwrap_or(if o.quick { 2_000_000 } else { 20_000_000 });
    let batches = o.num("batches", 11, USAGE).max(1);
    let mut one =
        threads::endpoints(1, &[256, 256]).unwrap_or_else(|e| common::fail(USAGE, &e.to_string()));
    let am = Am::new(one.remove(0), HandlerTable::<()>::new(), ())
        .unwrap_or_else(|e| common::fail(USAGE, &e.to_string()));
    let mut v = Vec::new();
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters {
            if am.poll().unwrap_or(1) != 0 {
                common::fail(USAGE, "a poll found something in empty queues");
            }
        }
        v.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    println!("one rank, Am::poll on empty request and reply queues, {batches} batches of {iters}");
    common::summary("empty_poll", o.json, &[("ns_per_poll", median(&mut v))]);
}

struct State {
    pong: ReplyHandler,
    got: Cell<u64>,
}

fn am_loop(o: &common::Opts) {
    let iters = o.iters.unwrap_or(if o.quick { 200_000 } else { 2_000_000 });
    let batches = o.num("batches", 11, USAGE).max(1);
    let out = amrq::threads::run(
        1,
        &Config::default(),
        |conduit| -> Result<Vec<f64>, AmError> {
            let mut table = HandlerTable::new();
            let pong = table.reply("pong", |s: &State, m| {
                s.got.set(m.arg(0));
                Ok(())
            });
            let ping = table.request("ping", |s: &State, ctx, m| ctx.reply(s.pong, &[m.arg(0)]));
            let am = Am::new(
                conduit,
                table,
                State {
                    pong,
                    got: Cell::new(0),
                },
            )?;
            let mut per_batch = Vec::new();
            let mut i = 0;
            for _ in 0..batches {
                let t = Instant::now();
                for _ in 0..iters {
                    i += 1;
                    am.request(0, ping, &[i])?;
                    am.wait_until(|s| s.got.get() == i)?;
                }
                per_batch.push(t.elapsed().as_nanos() as f64 / iters as f64);
            }
            Ok(per_batch)
        },
    );
    let mut v = match out {
        Ok(mut v) => v
            .swap_remove(0)
            .unwrap_or_else(|e| common::fail(USAGE, &e.to_string())),
        Err(e) => common::fail(USAGE, &e.to_string()),
    };
    println!("one rank, Short AM request → reply to itself, {batches} batches of {iters}");
    common::summary("am_loop", o.json, &[("ns_per_round_trip", median(&mut v))]);
}

fn rq_loop(o: &common::Opts) {
    let iters = o.iters.unwrap_or(if o.quick { 200_000 } else { 2_000_000 });
    let batches = o.num("batches", 11, USAGE).max(1);
    let mut eps =
        threads::endpoints(1, &[256, 256]).unwrap_or_else(|e| common::fail(USAGE, &e.to_string()));
    let rq = amrq::rq::Rq::new(eps.remove(0));
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
