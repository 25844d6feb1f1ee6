//! Barrier latency: the runtime's dissemination barrier (⌈log2 N⌉ rounds of one Short
//! message), blocking and split-phase, against two raw references between ranks 0 and
//! 1 measured in the same run: the cache-line round trip (the floor of its designs)
//! and the raw exchange, both ranks writing a line and waiting for the other's at once.
//! With 2 ranks the barrier's one round is such an exchange (a message each way at the
//! same time), so the exchange is its floor and it can take less than a round trip.
//!
//! ```text
//! amrq-bench barrier [--quick] [--ranks N] [--iters N] [--threads] [--json]
//! ```
//! Last line: `barrier: ranks=… barrier_ns=… split_ns=… raw_rtt_ns=… ratio=…
//! raw_exchange_ns=… exchange_ratio=…` (medians; ratio = barrier / raw round trip,
//! exchange_ratio = barrier / raw exchange). With more ranks than cores the ranks are not
//! pinned and share cores (the output says so): waits then sleep and wake by futex.

use super::{Flags, Ranks};
use crate::reference::{
    median, Floor, RawExchange, RawPingPong, RAW_EXCHANGE_BYTES, RAW_PINGPONG_BYTES,
};
use amrq::prelude::*;
use std::time::Instant;

/// The runtime's barrier, blocking and split-phase, against the raw round trip.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Messages (or operations) per batch.
    #[arg(long)]
    pub iters: Option<u64>,
}

/// Runs the command.
pub fn main(o: &Args, f: &Flags) -> ! {
    f.run(Config::new(), Ranks::Default(2), |setup| {
        rank_main(setup, o, f)
    });
}

fn rank_main(setup: Setup, o: &Args, f: &Flags) -> amrq::Result<()> {
    let threads = setup.config().threads.get();
    let n = setup.size();
    let oversubscribed = n > amrq::util::affinity::host_cores().max(1);
    let iters = o.iters.unwrap_or(match (f.quick, oversubscribed) {
        (true, true) => 200,
        (true, false) => 20_000,
        (false, true) => 2_000,
        (false, false) => 100_000,
    });
    let batches = if f.quick { 7 } else { 21 };
    let am = setup.start(HandlerTable::<()>::new(), ())?;
    let at = am
        .rma()
        .alloc_symmetric(RAW_PINGPONG_BYTES + RAW_EXCHANGE_BYTES, 4096)?;
    let Some((seg, _)) = am.rq().conduit().mapped_segment(0) else {
        return Err(
            "barrier measures against the raw round trip in shared memory: run it on one host"
                .into(),
        );
    };
    // SAFETY: a fresh page-aligned allocation in rank 0's segment (zeroed at creation),
    // mapped by every rank, used only for the raw reference.
    let raw = unsafe { RawPingPong::in_memory(seg.add(at)) };
    // SAFETY: the same allocation's bytes after the round trip's (a multiple of 128
    // from a page boundary), used only for the raw exchange.
    let exchange = unsafe { RawExchange::in_memory(seg.add(at + RAW_PINGPONG_BYTES)) };
    let me = am.rank();
    let (mut blocking, mut split, mut floor) = (Vec::new(), Vec::new(), Floor::default());
    let mut exchanges: [Vec<f64>; 2] = Default::default();
    for b in 0..=batches as u64 {
        am.barrier()?;
        if n >= 2 && me < 2 {
            let base = b * 1000;
            if me == 0 {
                let r = raw.initiate_all(base, 1000);
                if b > 0 {
                    floor.push(r);
                }
            } else {
                raw.respond_all(base, 1000);
            }
            let x = exchange.exchange(me, base, 1000);
            if b > 0 && me == 0 {
                exchanges.iter_mut().zip(x).for_each(|(v, x)| v.push(x));
            }
        }
        am.barrier()?;
        let t = Instant::now();
        for _ in 0..iters {
            am.barrier()?;
        }
        let bl = t.elapsed().as_nanos() as f64 / iters as f64;
        let t = Instant::now();
        for _ in 0..iters {
            am.barrier_notify()?;
            // What a program with nothing else to do would do between tries: spin a
            // while, then yield (ranks may share cores).
            let mut backoff = amrq::util::Backoff::new();
            while !am.barrier_try()? {
                backoff.snooze();
            }
        }
        let sp = t.elapsed().as_nanos() as f64 / iters as f64;
        if b > 0 {
            blocking.push(bl);
            split.push(sp);
        }
    }
    am.barrier()?;
    if me == 0 {
        let (bl, sp) = (median(&mut blocking), median(&mut split));
        let (design, rtt) = floor.floor();
        let how = super::placement(threads);
        let placement = if oversubscribed {
            "more ranks than cores: not pinned, sharing cores"
        } else {
            "one per core"
        };
        println!("ranks: {n} {how}, {placement}; {batches} batches of {iters} barriers");
        println!("barrier (blocking):           median {bl:.1} ns");
        println!("barrier_notify + barrier_try: median {sp:.1} ns");
        if n >= 2 {
            println!(
                "raw cache-line round trip (ranks 0 and 1), the fastest design ({}): median {rtt:.1} ns",
                design.describe()
            );
        }
        let [hot, rotating] = exchanges.map(|mut v| median(&mut v));
        let raw_exchange = hot.min(rotating);
        if n >= 2 {
            println!(
                "raw exchange (ranks 0 and 1 each write a line and wait for the other's), the faster of one line pair ({hot:.1}) and rotating pairs ({rotating:.1}): median {raw_exchange:.1} ns"
            );
        }
        let of = |x: f64| if x > 0.0 { bl / x } else { 0.0 };
        let ratio = of(rtt);
        f.summary(
            "barrier",
            &[
                ("ranks", n as f64),
                ("barrier_ns", bl),
                ("split_ns", sp),
                ("raw_rtt_ns", rtt),
                ("ratio", ratio),
                ("raw_exchange_ns", raw_exchange),
                ("exchange_ratio", of(raw_exchange)),
            ],
        );
    }
    Ok(())
}
