//! Remote Queues: a named queue on every rank; every rank but 0 produces items into
//! rank 0's, and rank 0 consumes them by polling its queue, taking each item's args
//! out (`dequeue`), until it has them all.
//!
//! ```text
//! cargo run --release --example queues          # 2 ranks: one producer
//! amrun -n 4 target/release/examples/queues     # three producers
//! ```
//! Last line (rank 0): `queues: producers=… items=… sum=…`.

use amrq::config::QueueSpec;
use amrq::prelude::*;

const ITEMS: u64 = 50_000;

fn main() {
    let mut cfg = amrq::Config::new();
    cfg.ranks.set_default(2);
    // 64 slots from each producer; rank 0 polls it (Poll delivery, the default).
    let work = cfg.add(QueueSpec::new("work", 64));
    cfg.run(|setup| {
        let job = setup.start(HandlerTable::new(), ())?;
        let (rq, me, producers) = (job.rq(), job.rank() as u64, job.size() as u64 - 1);
        if me != 0 {
            for i in 0..ITEMS {
                // A full queue answers false, nothing sent: rank 0 is taking items out.
                while !rq.enqueue(0, work, &[me, i], &[])? {
                    std::hint::spin_loop();
                }
            }
        } else {
            let (mut args, mut sum, mut taken) = ([0u64; 2], 0u64, 0u64);
            let mut next = vec![0u64; producers as usize + 1];
            while taken < producers * ITEMS {
                let Some(item) = rq.dequeue(work, &mut args, &mut [])? else {
                    continue; // polling: nothing there yet
                };
                let (from, i) = (args[0] as usize, args[1]);
                if item.source != from || i != next[from] {
                    return Err(format!("item {i} of rank {from} out of order").into());
                }
                next[from] += 1;
                (sum, taken) = (sum + i, taken + 1);
            }
            let expected = producers * ITEMS * (ITEMS - 1) / 2;
            if sum != expected {
                return Err(format!("sum {sum}, expected {expected}").into());
            }
            println!("rank 0 took {taken} items from {producers} producers, each rank's in order");
            println!("queues: producers={producers} items={taken} sum={sum}");
        }
        job.barrier()
    })
}
