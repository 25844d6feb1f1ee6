//! The enqueue → dequeue pipeline between two ranks for each of StarT-Voyager's message
//! kinds: Express (one u64 arg, one slot), Basic (one arg + 1 KiB in consecutive
//! slots) and Tag-On (one arg + 1 KiB in a pool block named by a one-slot frame). Rank 0
//! enqueues, rank 1 reads each message in place (`Rq::poll_queue`) and sums its bytes,
//! so the data really crosses. Batches of the three kinds alternate, with a fourth:
//! Express into a shared queue (one ring all senders reserve slots in by
//! compare-and-swap), to show what the reservation costs against a sender's own ring.
//!
//! ```text
//! amrq-bench kinds [--quick] [--iters N] [--batches B] [--threads] [--json]
//! ```
//! Last line (rank 0, after both finished): `kinds: express_ns=… basic_ns=… tag_on_ns=…
//! shared_express_ns=…` (median ns per message).

use super::{Flags, Ranks};
use crate::reference::median;
use amrq::conduit::ReceivedFrame;
use amrq::prelude::*;
use amrq::rq::Kind;
use std::cell::Cell;
use std::time::Instant;

/// The enqueue → dequeue pipeline per message kind: Express, Basic, Tag-On, shared.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// How much to measure.
    #[command(flatten)]
    pub run: super::Batches,
}

/// (kind, payload bytes, into the shared queue).
const KINDS: [(Kind, usize, bool); 4] = [
    (Kind::Express, 0, false),
    (Kind::Basic, 1024, false),
    (Kind::TagOn, 1024, false),
    (Kind::Express, 0, true),
];

struct State {
    count: Cell<u64>,
    done: ReplyHandler,
    acked: Cell<u64>,
}

/// Runs the command.
pub fn main(o: &Args, f: &Flags) -> ! {
    let mut cfg = Config::new();
    cfg.tag_on_buffers.set(64);
    let q = cfg.add_queue(1024);
    let shared = cfg.add(amrq::config::QueueSpec::new("shared", 1024).shared());
    f.run(cfg, Ranks::Exactly(2), |setup| {
        rank_main(setup, o, f, [q, shared])
    });
}

fn rank_main(setup: Setup, o: &Args, f: &Flags, queues: [QueueId; 2]) -> amrq::Result<()> {
    let threads = setup.config().threads.get();
    let (iters, batches) = o.run.or(f.quick, (200_000, 2_000_000), (5, 11));
    crate::fixture::require_ranks(&setup, "kinds", 2, false)?;
    let mut table = HandlerTable::new();
    let done = table.reply("done", |s: &State, m| {
        s.acked.set(m.arg(0)?);
        Ok(())
    });
    let finish = table.request("finish", |s: &State, ctx, _m| {
        ctx.reply(s.done, &[s.count.get()])
    });
    let am = setup.start(
        table,
        State {
            count: Cell::new(0),
            done,
            acked: Cell::new(0),
        },
    )?;
    let payload: Vec<u8> = (0..1024).map(|i| i as u8).collect();
    let want_sum: u64 = payload.iter().map(|&b| u64::from(b)).sum();
    let mut ns = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let mut expected = 0u64;
    let mut bad = 0u64;
    for b in 0..=batches {
        for (k, &(kind, len, shared)) in KINDS.iter().enumerate() {
            let q = queues[usize::from(shared)];
            expected += iters;
            am.barrier()?;
            if am.rank() == 0 {
                let t = Instant::now();
                for i in 0..iters {
                    while !am.rq().enqueue_as(1, q, kind, 0, &[i], &payload[..len])? {
                        am.poll()?;
                    }
                }
                am.request(1, finish, &[])?;
                am.wait_until(|s| s.acked.get() >= expected)?;
                if b > 0 {
                    ns[k].push(t.elapsed().as_nanos() as f64 / iters as f64);
                }
            } else {
                let s = am.state();
                let mut left = iters;
                while left > 0 {
                    left -= am
                        .rq()
                        .poll_queue(q, left as usize, |f| -> Result<(), RqError> {
                            let sum: u64 = f.payload().to_cow().iter().map(|&b| u64::from(b)).sum();
                            if f.payload().len() != len || (len > 0 && sum != want_sum) {
                                bad += 1;
                            }
                            s.count.set(s.count.get() + 1);
                            Ok(())
                        })? as u64;
                }
            }
        }
    }
    am.barrier()?;
    if bad != 0 {
        return Err("a payload arrived wrong".into());
    }
    if am.rank() == 0 {
        let m: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();
        let how = super::placement(threads);
        println!(
            "ranks: 2 {how}; {batches} batches of {iters} messages of each kind, read in place"
        );
        println!("Express (1 arg):               {:.1} ns/msg", m[0]);
        println!("Basic (1 arg + 1 KiB inline):  {:.1} ns/msg", m[1]);
        println!("Tag-On (1 arg + 1 KiB block):  {:.1} ns/msg", m[2]);
        println!("Express, shared queue:         {:.1} ns/msg", m[3]);
        f.summary(
            "kinds",
            &[
                ("express_ns", m[0]),
                ("basic_ns", m[1]),
                ("tag_on_ns", m[2]),
                ("shared_express_ns", m[3]),
            ],
        );
    }
    Ok(())
}
