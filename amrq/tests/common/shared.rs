//! Shared queues (one ring per receiver, slots reserved by compare-and-swap): every
//! rank floods every rank with Express, Basic and Tag-On frames through one small
//! queue; each frame arrives exactly once and in order per sender. Shared by the
//! threads and the processes tests.

use amrq::conduit::mem::MemConduit;
use amrq::conduit::ReceivedFrame;
use amrq::config::QueueSpec;
use amrq::prelude::*;

pub fn config() -> (Config, QueueId) {
    let mut cfg = Config::default();
    let q = cfg.add(QueueSpec::new("shared", 32).shared());
    (cfg, q)
}

/// Payload sizes by message number: Express (no payload), Basic, Tag-On.
fn len_of(i: u64) -> usize {
    [0, 200, 1500][(i % 3) as usize]
}

/// Every rank sends `per_pair` frames to every rank (itself included) and receives
/// `ranks × per_pair`; returns (frames received, checksum).
pub fn flood(c: MemConduit, per_pair: u64) -> Result<(u64, u64), RqError> {
    let (_, q) = config();
    let rq = Rq::new(c);
    let (me, ranks) = (rq.rank(), rq.size());
    let mut next = vec![0u64; ranks];
    let (mut got, mut sum) = (0u64, 0u64);
    let mut receive = |rq: &Rq, got: &mut u64, sum: &mut u64| -> Result<(), RqError> {
        while let Some(f) = rq.read_queue(q)? {
            let (src, seq) = (f.source(), f.args()[0]);
            assert_eq!(
                f.args().len(),
                7,
                "seven user args, the hidden word removed"
            );
            assert_eq!(seq, next[src], "from rank {src}: out of order or twice");
            assert_eq!(f.args()[6], seq ^ src as u64);
            assert_eq!(f.payload().len(), len_of(seq));
            assert!(f
                .payload()
                .to_vec()
                .iter()
                .all(|&b| b == (seq as u8) ^ (src as u8)));
            next[src] += 1;
            *sum = sum.wrapping_add(seq * 31 + src as u64);
            *got += 1;
            f.release();
        }
        Ok(())
    };
    let mut payload = Vec::new();
    for i in 0..per_pair {
        for d in 0..ranks {
            let dest = (me + d) % ranks;
            payload.clear();
            payload.resize(len_of(i), (i as u8) ^ (me as u8));
            let args = [i, 1, 2, 3, 4, 5, i ^ me as u64];
            let t = std::time::Instant::now();
            while !rq.enqueue(dest, q, &args, &payload)? {
                receive(&rq, &mut got, &mut sum)?;
                assert!(
                    t.elapsed() < std::time::Duration::from_secs(60),
                    "rank {me}: no room at rank {dest} for frame {i} of {} bytes",
                    payload.len()
                );
            }
        }
    }
    let want = ranks as u64 * per_pair;
    let t = std::time::Instant::now();
    while got < want {
        receive(&rq, &mut got, &mut sum)?;
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "only {got} of {want} frames arrived"
        );
    }
    assert_eq!(rq.dropped(q), 0);
    Ok((got, sum))
}

/// The checksum `flood` returns on every rank.
pub fn want_sum(ranks: usize, per_pair: u64) -> u64 {
    (0..ranks as u64)
        .map(|src| (0..per_pair).map(|seq| seq * 31 + src).sum::<u64>())
        .sum()
}
