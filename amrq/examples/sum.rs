//! Calls: rank 0 asks rank 1 to add pairs of numbers to its running sum, with 256
//! calls in flight; each answer is the sum so far; rank 0 checks them and prints the
//! last, the sum of all.
//!
//! ```text
//! cargo run --release --example sum             # 2 ranks: processes of this host
//! amrun -n 4 target/release/examples/sum        # more ranks: the others only take part in the barrier
//! AMRQ_THREADS=1 target/release/examples/sum    # ranks as threads
//! ```
//! Last line (rank 0): `sum: requests=… sum=…`.

use amrq::prelude::*;
use std::cell::Cell;
use std::collections::VecDeque;

const REQUESTS: u64 = 100_000;
/// Calls in flight at once.
const WINDOW: usize = 256;

fn main() {
    let mut cfg = amrq::Config::new();
    cfg.ranks.set_default(2);
    cfg.run(|setup| {
        // The same handlers, in the same order, on every rank; the state is the sum.
        let mut handlers = HandlerTable::new();
        let add = handlers.call("add", |sum: &Cell<u64>, _ctx, (a, b): (u64, u64)| {
            sum.set(sum.get() + a + b);
            Ok(sum.get()) // the answer: the sum so far
        });
        let job = setup.start(handlers, Cell::new(0))?;
        if job.size() < 2 {
            return Err("sum needs 2 ranks or more".into());
        }
        if job.rank() == 0 {
            let mut pending: VecDeque<Pending<u64, _>> = VecDeque::with_capacity(WINDOW);
            let mut sum = 0;
            for i in 0..REQUESTS {
                if pending.len() == WINDOW {
                    sum = pending.pop_front().expect("a full window").wait()?;
                }
                pending.push_back(job.call(1, add, (i, 2 * i))?);
            }
            for p in pending {
                sum = p.wait()?; // answers come in the order the calls were made
            }
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
