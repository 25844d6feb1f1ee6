//! Active Messages: rank 0 sends requests to rank 1, each carrying two numbers; rank
//! 1's handler adds them to its running sum and replies with the sum so far; rank 0
//! waits for every reply and prints the last, the sum of all.
//!
//! ```text
//! cargo run --release --example sum             # 2 ranks: processes of this host
//! amrun -n 4 target/release/examples/sum        # more ranks: the others only take part in the barrier
//! AMRQ_THREADS=1 target/release/examples/sum    # ranks as threads
//! ```
//! Last line (rank 0): `sum: requests=… sum=…`.

use amrq::prelude::*;
use std::cell::Cell;

/// What the handlers see on each rank.
struct Sum {
    /// Rank 1: the running sum. Rank 0: the sum the last reply carried.
    sum: Cell<u64>,
    /// Rank 0: replies received.
    replies: Cell<u64>,
    /// The reply handler, for the request handler to answer with.
    done: ReplyHandler,
}

const REQUESTS: u64 = 100_000;

fn main() {
    let mut cfg = amrq::Config::new();
    cfg.ranks.set_default(2);
    cfg.run(|setup| {
        // The same handlers, in the same order, on every rank.
        let mut handlers = HandlerTable::new();
        let done = handlers.reply("done", |s: &Sum, m| {
            s.sum.set(m.arg(0)?);
            s.replies.set(s.replies.get() + 1);
            Ok(())
        });
        let add = handlers.request("add", |s: &Sum, ctx, m| {
            s.sum.set(s.sum.get() + m.arg(0)? + m.arg(1)?);
            ctx.reply(s.done, &[s.sum.get()])
        });
        let state = Sum {
            sum: Cell::new(0),
            replies: Cell::new(0),
            done,
        };
        let job = setup.start(handlers, state)?;
        if job.size() < 2 {
            return Err("sum needs 2 ranks or more".into());
        }
        if job.rank() == 0 {
            for i in 0..REQUESTS {
                job.request(1, add, &[i, 2 * i])?;
            }
            job.wait_until(|s| s.replies.get() == REQUESTS)?;
            let sum = job.state().sum.get();
            let expected = 3 * REQUESTS * (REQUESTS - 1) / 2;
            if sum != expected {
                return Err(format!("sum {sum}, expected {expected}").into());
            }
            println!("rank 1 added {REQUESTS} pairs: {sum}");
            println!("sum: requests={REQUESTS} sum={sum}");
        }
        job.barrier()
    })
}
