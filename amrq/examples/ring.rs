//! A ring: every rank streams Short Active Messages to its right neighbour while it
//! receives its left neighbour's (Liu & Culler's loaded ring). The handler checks that
//! they arrive in order; rank 0 prints the job's message rate.
//!
//! ```text
//! cargo run --release --example ring                   # 2 ranks: processes of this host
//! amrun -n 4 target/release/examples/ring --quick      # 4 ranks, a shorter stream
//! ```
//! Last line (rank 0): `ring: ranks=… msgs_per_s=… slowest_rank_msgs_per_s=…`.

use amrq::coll;
use amrq::prelude::*;
use std::cell::Cell;
use std::time::Instant;

/// What the handler sees: how many messages came from the left neighbour.
struct Ring {
    received: Cell<u64>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let messages: u64 = if quick { 200_000 } else { 5_000_000 };
    let mut cfg = Config::new();
    cfg.ranks.set_default(2);
    cfg.run(|setup| {
        let mut handlers = HandlerTable::new();
        let next = handlers.handler("next", |s: &Ring, _ctx, i: u64| {
            let k = s.received.get() + 1;
            if i != k {
                // The sender's next wait returns this as `AmError::RequestFailed`.
                return Err(format!("message {i} arrived as number {k}").into());
            }
            s.received.set(k);
            Ok(())
        });
        let ring = Ring {
            received: Cell::new(0),
        };
        let job = setup.start(handlers, ring)?;
        let (me, n) = (job.rank(), job.size());
        job.barrier()?;
        let t = Instant::now();
        for i in 1..=messages {
            job.send((me + 1) % n, next, i)?; // waits (polling) while the ring is full
        }
        job.wait_until(|s| s.received.get() == messages)?;
        let rate = messages as f64 / t.elapsed().as_secs_f64();
        let (mut total, mut slowest) = ([rate], [rate]);
        job.coll().reduce(0, &mut total, coll::sum)?;
        job.coll().reduce(0, &mut slowest, coll::min)?;
        if me == 0 {
            println!(
                "{n} ranks, {messages} messages each, in order: {:.1} M msgs/s in all",
                total[0] / 1e6
            );
            println!(
                "ring: ranks={n} msgs_per_s={:.0} slowest_rank_msgs_per_s={:.0}",
                total[0], slowest[0]
            );
        }
        job.barrier()
    })
}
