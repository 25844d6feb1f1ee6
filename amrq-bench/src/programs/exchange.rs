//! All-to-all exchange (a transpose of ranks × blocks): `Coll::exchange` (step i: send
//! to me + i, receive from me − i, one chunk out and one in, alternating; a credit per
//! chunk) against `Coll::exchange_unmatched` (step i: everyone sends to rank i), RQ §4's
//! comparison, and against the same order paced to a rate (`Matching::Rate`, the
//! paper's bandwidth matching: up to 4 smaller chunks in flight, injected no more often
//! than once per gap, the gap being the time per chunk the credit exchange took in the
//! batch before). All move the same bytes through the same chunk channels.
//!
//! ```text
//! amrq-bench exchange [--quick] [--ranks N] [--kib K] [--threads] [--json]
//! ```
//! Last line: `exchange: ranks=… block_bytes=… matched_gb_s=… unmatched_gb_s=… ratio=…
//! rate_gb_s=… rate_over_credit=… gap_ns=…` (bytes leaving all ranks per second,
//! medians; ratio = matched / unmatched; rate_over_credit = the rate-paced exchange's
//! bandwidth over the credit one's). With more ranks than cores the ranks share cores
//! (the output says so).

use super::{Flags, Ranks};
use crate::reference::median;
use amrq::coll::Matching;
use amrq::prelude::*;
use std::time::{Duration, Instant};

/// All-to-all exchange, bandwidth-matched against the unmatched order (RQ §4).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// KiB per block (default 64 with --quick, 1024 otherwise).
    #[arg(long)]
    pub kib: Option<u64>,
}

/// Runs the command.
pub fn main(o: &Args, f: &Flags) -> ! {
    f.run(Config::new(), Ranks::Default(4), |setup| {
        rank_main(setup, o, f)
    });
}

fn rank_main(setup: Setup, o: &Args, f: &Flags) -> amrq::Result<()> {
    let threads = setup.config().threads.get();
    let am = setup.start(HandlerTable::<()>::new(), ())?;
    let _rma = am.rma();
    let coll = am.coll();
    let (me, n) = (am.rank(), am.size());
    let block = (o.kib.unwrap_or(if f.quick { 64 } else { 1024 }) as usize) << 10;
    let m = block / 8;
    let send: Vec<u64> = (0..n * m).map(|i| (me * n * m + i) as u64).collect();
    let mut recv = vec![0u64; n * m];
    let batches = if f.quick { 5 } else { 15 };
    let (mut matched, mut unmatched, mut rated, mut gaps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Pieces each rank sends under a rate: its N − 1 blocks in chunks of CHUNK / 4.
    let pieces = ((n - 1) * block.div_ceil(amrq::coll::CHUNK / amrq::coll::RATE_WINDOW)).max(1);
    let mut gap = Duration::ZERO;
    for b in 0..=batches {
        am.barrier()?;
        let t = Instant::now();
        coll.exchange(&send, &mut recv)?;
        am.barrier()?;
        let tm = t.elapsed().as_secs_f64();
        let t = Instant::now();
        coll.exchange_matched(&send, &mut recv, Matching::Rate { gap })?;
        am.barrier()?;
        let tr = t.elapsed().as_secs_f64();
        let t = Instant::now();
        coll.exchange_unmatched(&send, &mut recv)?;
        am.barrier()?;
        let tu = t.elapsed().as_secs_f64();
        if b > 0 {
            matched.push(tm);
            unmatched.push(tu);
            rated.push(tr);
            gaps.push(gap.as_secs_f64() * 1e9);
        }
        // The pace of the next batch: the credit exchange's time per piece, the same
        // on every rank (rank 0's, broadcast).
        let mut per_piece = [tm / pieces as f64];
        coll.broadcast(0, &mut per_piece)?;
        gap = Duration::from_secs_f64(per_piece[0]);
    }
    // Block `me` of every sender came here.
    for (from, blk) in recv.chunks(m).enumerate() {
        assert_eq!(
            blk[0],
            (from * n * m + me * m) as u64,
            "block from rank {from}"
        );
    }
    if me == 0 {
        let moved = (n * (n - 1) * block) as f64;
        let (tm, tu, tr) = (
            median(&mut matched),
            median(&mut unmatched),
            median(&mut rated),
        );
        let gap_ns = median(&mut gaps);
        let cores = amrq::util::affinity::host_cores();
        let how = super::placement(threads);
        let note = if n > cores {
            ", more ranks than cores: they share cores"
        } else {
            ""
        };
        println!("ranks: {n} {how}{note}; blocks of {block} bytes; {batches} batches");
        println!(
            "bandwidth-matched exchange: {:.3} ms, {:.2} GB/s",
            tm * 1e3,
            moved / tm / 1e9
        );
        println!(
            "unmatched (all to rank i):  {:.3} ms, {:.2} GB/s",
            tu * 1e3,
            moved / tu / 1e9
        );
        println!(
            "rate-paced (gap {gap_ns:.0} ns per {} B): {:.3} ms, {:.2} GB/s",
            amrq::coll::CHUNK / amrq::coll::RATE_WINDOW,
            tr * 1e3,
            moved / tr / 1e9
        );
        f.summary(
            "exchange",
            &[
                ("ranks", n as f64),
                ("block_bytes", block as f64),
                ("matched_gb_s", moved / tm / 1e9),
                ("unmatched_gb_s", moved / tu / 1e9),
                ("ratio", tu / tm),
                ("rate_gb_s", moved / tr / 1e9),
                ("rate_over_credit", tm / tr),
                ("gap_ns", gap_ns),
            ],
        );
    }
    Ok(())
}
