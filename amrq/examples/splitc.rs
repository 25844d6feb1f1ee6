//! A Split-C program in Rust (the guide's Split-C chapter): a spread array written by
//! its owners, shifted by one element with reply-free stores completed by
//! `all_store_sync`, checked and summed with a reduction; then the same shift read back
//! with split-phase gets.
//!
//! ```text
//! cargo run --release --example splitc                  # 2 ranks: processes of this host
//! amrun -n 4 target/release/examples/splitc --quick     # 4 ranks, a shorter array
//! AMRQ_RMA_FRAMES=1 target/release/examples/splitc      # every remote access as AM frames
//! ```
//! Last line (rank 0): `splitc: ranks=… sum=…`.

use amrq::coll;
use amrq::prelude::*;
use amrq::splitc::Layout;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: usize = if quick { 1 << 14 } else { 1 << 20 };
    let mut cfg = Config::new();
    cfg.ranks.set_default(2);
    cfg.run(|setup| {
        let job = setup.start(HandlerTable::new(), ())?;
        let sc = job.splitc(); // Split-C's view of the job: MYPROC, PROCS, global pointers
        let me = sc.my_proc();
        let a = sc.all_spread_malloc::<f64>(n, Layout::Cyclic)?;
        let b = sc.all_spread_malloc::<f64>(n, Layout::Cyclic)?;
        for i in a.local_indices(me) {
            sc.write(a.at(i), i as f64)?; // local: a plain store
        }
        sc.barrier()?;

        // b[i + 1] :- a[i] — a store into the next rank's part, no reply.
        let t = sc.seconds();
        for i in a.local_indices(me) {
            sc.store(b.at((i + 1) % n), sc.read(a.at(i))?)?;
        }
        sc.all_store_sync()?; // every store of every rank has landed
        let stores_s = sc.seconds() - t;
        let mut bad = 0u64;
        let mut mine = 0.0;
        for j in b.local_indices(me) {
            let v = sc.read(b.at(j))?;
            bad += u64::from(v != ((j + n - 1) % n) as f64);
            mine += v;
            sc.write(b.at(j), -1.0)?; // so that the gets below must fill it again
        }

        // The same shift read back: split-phase gets of a[j - 1], all issued, one sync.
        sc.barrier()?;
        let t = sc.seconds();
        for j in b.local_indices(me) {
            sc.get(b.at(j), a.at((j + n - 1) % n))?;
        }
        sc.sync()?;
        sc.barrier()?; // every rank's gets are done: the rate is the job's
        let gets_s = sc.seconds() - t;
        for j in b.local_indices(me) {
            bad += u64::from(sc.read(b.at(j))? != ((j + n - 1) % n) as f64);
        }

        let sum = sc.all_reduce(mine, coll::sum)?;
        let bad = sc.all_reduce(bad, coll::sum)?;
        if bad != 0 || sum != (n * (n - 1) / 2) as f64 {
            return Err(format!("{bad} elements wrong after the shifts; sum {sum}").into());
        }
        if me == 0 {
            let per_s = |secs: f64| n as f64 / secs;
            let path = match sc.is_direct() {
                true => "loads and stores where memory is shared, AM frames elsewhere",
                false => "AM frames",
            };
            println!(
                "{} ranks, {n} elements: {:.0} stores/s, {:.0} gets/s ({path})",
                sc.procs(),
                per_s(stores_s),
                per_s(gets_s),
            );
            println!("splitc: ranks={} sum={sum}", sc.procs());
        }
        job.barrier()
    })
}
