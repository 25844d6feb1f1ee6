//! amrq's side of the peers table, measured as the peers measure it: streaming
//! bandwidth (windows of Long requests of 64 KiB and 1 MiB, each window acknowledged,
//! like `mpi_bench.c`'s windows of `MPI_Isend` and `ucx_perftest`'s `ucp_am_bw`) and
//! the 2-rank barrier. The round trip and the message rate come from *round-trip* and
//! *one-to-one*.

use crate::fixture::{require_ranks, BenchAm};
use crate::report::{Figure, Outcome};
use crate::Params;
use amrq::conduit::mem::MemConduit;
use amrq::prelude::*;

/// Requests per acknowledged window.
const WINDOW: u64 = 64;

/// *stream*: `bw_64k_mb_s`, `bw_1m_mb_s` and `barrier_ns` on rank 0.
pub fn stream(c: MemConduit, p: &Params) -> Result<Option<Outcome>, AmError> {
    require_ranks(&c, "stream", 2, false)?;
    let b = BenchAm::new(c)?;
    let me = b.rank();
    let mut o = Outcome::new("stream", 2, p.clock.overhead_ns());
    let mut expect = 0;
    for (key, size, windows) in [
        ("bw_64k_mb_s", 64usize << 10, p.pick(4, 32)),
        ("bw_1m_mb_s", 1 << 20, p.pick(1, 4)),
    ] {
        let data = vec![5u8; size];
        let mut v = Vec::new();
        for batch in 0..=p.batches {
            b.am.barrier()?;
            expect += windows * WINDOW;
            if me != 0 {
                b.wait_count(expect)?;
                continue;
            }
            let t = p.clock.start();
            for _ in 0..windows {
                let acks = b.am.state().acks.get();
                for i in 1..=WINDOW {
                    b.am.request_long(1, b.land, &[u64::from(i == WINDOW)], &data, 0)?;
                }
                b.wait_acks(acks + 1)?;
            }
            let ns = p.clock.since(t);
            if batch > 0 {
                v.push((windows * WINDOW) as f64 * size as f64 * 1e3 / ns);
            }
        }
        if me == 0 {
            o.figures.push(Figure::of(key, &mut v));
        }
    }
    let iters = p.pick(2_000, 20_000);
    let mut v = Vec::new();
    for _ in 0..=p.batches {
        b.am.barrier()?;
        let t = p.clock.start();
        for _ in 0..iters {
            b.am.barrier()?;
        }
        v.push(p.clock.since(t) / iters as f64);
    }
    v.remove(0);
    o.figures.push(Figure::of("barrier_ns", &mut v));
    b.am.barrier()?;
    Ok((me == 0).then_some(o))
}
