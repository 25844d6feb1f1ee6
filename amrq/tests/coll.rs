//! Collectives with ranks as threads, 1 to 8 ranks, against a sequential model.

#![cfg(not(amrq_loom))]

#[path = "common/ranks.rs"]
mod ranks;

#[path = "common/coll.rs"]
mod common_coll;

use amrq::prelude::*;

#[test]
fn every_collective_matches_the_model_for_1_to_8_ranks() {
    for n in 1..=8 {
        // 0 and 1 element, one chunk, and several chunks (5000 u64 = 40 KB > 32 KiB).
        let lens: &[usize] = if n <= 4 {
            &[0, 1, 37, 5000]
        } else {
            &[1, 37, 5000]
        };
        let out = crate::ranks::run(n, &Config::default(), |c| {
            common_coll::all_collectives(c, lens)
        });
        for (r, res) in out.expect("job ran").into_iter().enumerate() {
            res.unwrap_or_else(|e| panic!("{n} ranks, rank {r}: {e}"));
        }
    }
}
