//! Inlined polling against handler dispatch (RQ §3.2.3): rank 0 streams Short frames
//! (one u64 arg) to rank 1, once as AM requests that rank 1's handler counts, once
//! enqueued into a user queue that rank 1 reads in place with `Rq::poll_queue` and a
//! loop body of its own — no handler table, no indirect call. Batches alternate.
//!
//! ```text
//! amrq-bench dispatch [--quick] [--iters N] [--batches B] [--threads] [--json]
//! ```
//! Last line (rank 0, after both finished):
//! `dispatch: inline_msgs_per_s=… handler_msgs_per_s=… ratio=…` (ratio = inline / handler).

use super::{Flags, Ranks};
use crate::reference::median;
use amrq::conduit::ReceivedFrame;
use amrq::prelude::*;
use std::cell::Cell;
use std::time::Instant;

/// Inlined polling against handler dispatch (RQ §3.2.3).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// How much to measure.
    #[command(flatten)]
    pub run: super::Batches,
}

struct State {
    count: Cell<u64>,
    sum: Cell<u64>,
    done: ReplyHandler,
    acked: Cell<u64>,
}

/// Runs the command.
pub fn main(o: &Args, f: &Flags) -> ! {
    let mut cfg = Config::new();
    cfg.ring_slots.set_default(1024);
    let q = cfg.add_queue(1024);
    f.run(cfg, Ranks::Exactly(2), |setup| rank_main(setup, o, f, q));
}

fn rank_main(setup: Setup, o: &Args, f: &Flags, q: QueueId) -> amrq::Result<()> {
    let threads = setup.config().threads.get();
    let (iters, batches) = o.run.or(f.quick, (500_000, 5_000_000), (5, 11));
    crate::fixture::require_ranks(&setup, "dispatch", 2, false)?;
    let mut table = HandlerTable::new();
    let done = table.reply("done", |s: &State, m| {
        s.acked.set(m.arg(0)?);
        Ok(())
    });
    let count = table.request("count", |s: &State, _ctx, m| {
        s.count.set(s.count.get() + 1);
        s.sum.set(s.sum.get().wrapping_add(m.arg(0)?));
        Ok(())
    });
    let finish = table.request("finish", |s: &State, ctx, _m| {
        ctx.reply(s.done, &[s.count.get()])
    });
    let state = State {
        count: Cell::new(0),
        sum: Cell::new(0),
        done,
        acked: Cell::new(0),
    };
    let am = setup.start(table, state)?;
    let (mut inline, mut handler) = (Vec::new(), Vec::new());
    // Frames rank 1 will have counted at the end of this batch, in both modes (`finish`
    // answers with its count). Both ranks keep it: rank 1's barrier may already run the
    // first frames of a batch, so its count is no base to count from.
    let mut expected = 0u64;
    for b in 0..=batches {
        for inlined in [false, true] {
            expected += iters;
            am.barrier()?;
            if am.rank() == 0 {
                let t = Instant::now();
                for i in 0..iters {
                    if inlined {
                        // Queue full: rank 1 catches up; our own queues stay polled.
                        while !am.rq().enqueue(1, q, &[i], &[])? {
                            am.poll()?;
                        }
                    } else {
                        am.request(1, count, &[i])?;
                    }
                }
                // The batch ends when rank 1 has counted everything: `finish` is served
                // after the counts (same ring) or after the inline loop (rank 1 polls
                // its AM queues only once that loop is done).
                am.request(1, finish, &[])?;
                am.wait_until(|s| s.acked.get() >= expected)?;
                if b > 0 {
                    let rate = iters as f64 / t.elapsed().as_secs_f64();
                    if inlined {
                        inline.push(rate);
                    } else {
                        handler.push(rate);
                    }
                }
            } else if inlined {
                // The consumer's own loop: each frame read in place, no dispatch.
                let s = am.state();
                let mut left = iters;
                while left > 0 {
                    left -= am
                        .rq()
                        .poll_queue(q, left as usize, |f| -> Result<(), RqError> {
                            s.count.set(s.count.get() + 1);
                            s.sum.set(s.sum.get().wrapping_add(f.args()[0]));
                            Ok(())
                        })? as u64;
                }
            } else {
                am.wait_until(|s| s.count.get() >= expected)?;
            }
        }
    }
    // Both ways saw every frame: each batch's args sum to iters·(iters−1)/2.
    let want = (iters * (iters - 1) / 2).wrapping_mul(2 * (batches + 1));
    if am.rank() == 1 && am.state().sum.get() != want {
        return Err("frames lost or duplicated".into());
    }
    am.barrier()?;
    if am.rank() == 0 {
        let (ri, rh) = (median(&mut inline), median(&mut handler));
        let how = super::placement(threads);
        println!("ranks: 2 {how}; {batches} batches of {iters} Short frames each way of receiving");
        println!(
            "handler dispatch (AM requests):      {:.1} M msgs/s",
            rh / 1e6
        );
        println!(
            "inlined polling (RQ queue, in place): {:.1} M msgs/s",
            ri / 1e6
        );
        f.summary(
            "dispatch",
            &[
                ("inline_msgs_per_s", ri),
                ("handler_msgs_per_s", rh),
                ("ratio", ri / rh),
            ],
        );
    }
    Ok(())
}
