//! What a job's end costs: every rank enters a barrier, then times `Job::finish`, the
//! step that returning from the main takes (each rank tells the others it returned,
//! then flushes what it sent; nothing else is in flight here).
//!
//! ```text
//! amrun -n 2 target/release/examples/exit        # 2 ranks, one per core
//! amrun -n 8 target/release/examples/exit        # 8 ranks on 2 cores: oversubscribed
//! AMRQ_THREADS=1 target/release/examples/exit    # ranks as threads
//! ```
//! Last line (rank 0): `exit: ranks=… finish_us=…`.

use amrq::prelude::*;

fn main() {
    let mut cfg = amrq::Config::new();
    cfg.ranks.set_default(2);
    cfg.run(|setup| {
        let job = setup.start(HandlerTable::<()>::new(), ())?;
        job.barrier()?;
        let (rank, size) = (job.rank(), job.size());
        let t = std::time::Instant::now();
        job.finish()?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        if rank == 0 {
            println!("exit: ranks={size} finish_us={us:.1}");
        }
        Ok(())
    })
}
