//! All-to-all exchange (a transpose of ranks × blocks): the bandwidth-matched
//! `Coll::exchange` (step i: send to me + i, receive from me − i, one chunk out and one
//! in, alternating) against `Coll::exchange_unmatched` (step i: everyone sends to rank
//! i), RQ §4's comparison. Both move the same bytes through the same chunk channels.
//!
//! ```text
//! amrq-bench exchange [--quick] [--ranks N] [--kib K] [--threads] [--json]
//! ```
//! Last line: `exchange: ranks=… block_bytes=… matched_gb_s=… unmatched_gb_s=… ratio=…`
//! (bytes leaving all ranks per second, medians; ratio = matched / unmatched). With more
//! ranks than cores the ranks share cores (the output says so).

use super::{Flags, Ranks};
use crate::reference::median;
use amrq::prelude::*;
use std::time::Instant;

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
    let (mut matched, mut unmatched) = (Vec::new(), Vec::new());
    for b in 0..=batches {
        am.barrier()?;
        let t = Instant::now();
        coll.exchange(&send, &mut recv)?;
        am.barrier()?;
        let tm = t.elapsed().as_secs_f64();
        let t = Instant::now();
        coll.exchange_unmatched(&send, &mut recv)?;
        am.barrier()?;
        let tu = t.elapsed().as_secs_f64();
        if b > 0 {
            matched.push(tm);
            unmatched.push(tu);
        }
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
        let (tm, tu) = (median(&mut matched), median(&mut unmatched));
        let cores = amrq::util::affinity::allowed_cores().len();
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
        f.summary(
            "exchange",
            &[
                ("ranks", n as f64),
                ("block_bytes", block as f64),
                ("matched_gb_s", moved / tm / 1e9),
                ("unmatched_gb_s", moved / tu / 1e9),
                ("ratio", tu / tm),
            ],
        );
    }
    Ok(())
}
