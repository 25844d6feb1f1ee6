//! RMA against a model: puts and gets of random ranges, remote atomics from every rank
//! at once, completion counters. Shared by the threads and the processes tests.

use amrq::conduit::mem::MemConduit;
use amrq::conduit::Conduit;
use amrq::prelude::*;
use amrq::rma::{AtomicOp, Completion, Rma, RmaError};

/// A small xorshift generator, seeded per rank.
pub struct Rand(u64);

impl Rand {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Bytes of each rank's slice of every symmetric buffer.
const SLICE: usize = 4096;

/// (`frames`: every operation as AM frames, as over a network.)
///
/// Each rank owns slice `me` of a symmetric buffer on every rank and writes only
/// there: random puts (bytes and u32 slices, any offset and length) and gets, checked
/// against a model of what it wrote, before and after a barrier. Returns the number of
/// operations checked.
pub fn against_a_model(c: MemConduit, ops: usize, frames: bool) -> Result<usize, RmaError> {
    let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    let rma = Rma::new_or_over_frames(am, frames);
    let am = rma.am();
    let (me, n) = (am.rank(), am.size());
    let buf = rma.alloc_symmetric(n * SLICE, 64)?;
    let mine = buf + me * SLICE;
    let mut model = vec![vec![0u8; SLICE]; n];
    let mut rng = Rand::new(me as u64 + 1);
    let mut checked = 0;
    for _ in 0..ops {
        let t = rng.below(n);
        let (off, len) = {
            let a = rng.below(SLICE);
            (a, rng.below(SLICE - a + 1))
        };
        match rng.below(4) {
            0 => {
                let data: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                rma.put(t, mine + off, &data)?;
                model[t][off..off + len].copy_from_slice(&data);
            }
            1 => {
                let words: Vec<u32> = (0..len / 4).map(|_| rng.below(1 << 30) as u32).collect();
                rma.put_slice(t, mine + off, &words)?;
                for (i, w) in words.iter().enumerate() {
                    model[t][off + 4 * i..off + 4 * i + 4].copy_from_slice(&w.to_ne_bytes());
                }
            }
            2 => {
                let mut got = vec![0u8; len];
                rma.get_nb(t, mine + off, &mut got)?.wait()?;
                assert_eq!(
                    got,
                    model[t][off..off + len],
                    "get from rank {t} at {off}+{len}"
                );
                checked += 1;
            }
            _ => {
                let data: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                rma.put_nbi(t, mine + off, &data)?;
                model[t][off..off + len].copy_from_slice(&data);
            }
        }
    }
    rma.sync_nbi()?;
    am.barrier()?;
    for (t, want) in model.iter().enumerate() {
        let mut got = vec![0u8; SLICE];
        rma.get(t, mine, &mut got)?;
        assert_eq!(
            &got, want,
            "rank {me}'s slice at rank {t} after the barrier"
        );
        checked += 1;
    }
    am.barrier()?;
    rma.free(buf)?;
    Ok(checked)
}

/// Every rank hammers rank 0's words with `k` of each atomic: fetch-add (every old
/// value is seen by exactly one rank: their sum is known), a compare-and-swap loop, and
/// an xor of each rank's own bit, and an i64 add of negative and positive steps; then
/// a put with a completion counter to every rank. Panics on a wrong total.
pub fn atomics_from_every_rank(c: MemConduit, k: u64, frames: bool) -> Result<(), RmaError> {
    let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    let rma = Rma::new_or_over_frames(am, frames);
    let am = rma.am();
    let (me, n) = (am.rank(), am.size() as u64);
    let words = rma.alloc_symmetric(64, 64)?;
    let (add, cas, xor, neg) = (words, words + 8, words + 16, words + 24);
    am.barrier()?;
    let mut olds = 0u64;
    for i in 0..k {
        olds = olds.wrapping_add(rma.fetch_add(0, add, 1)?);
        let mut seen = rma.atomic(0, cas, AtomicOp::FetchAdd(0))?;
        loop {
            let was = rma.compare_swap(0, cas, seen, seen + 3)?;
            if was == seen {
                break;
            }
            seen = was;
        }
        rma.atomic(0, xor, AtomicOp::FetchXor(1 << (me % 64)))?;
        rma.fetch_add_i64(0, neg, if i % 2 == 0 { -5 } else { 2 })?;
    }
    am.barrier()?;
    let all = am.rq().conduit().allgather(olds)?;
    let total = k * n;
    assert_eq!(
        all.iter().fold(0u64, |a, &b| a.wrapping_add(b)),
        total * (total - 1) / 2,
        "each fetch-add saw a distinct old value"
    );
    let mut w = [0u64; 4];
    rma.get_slice(0, words, &mut w)?;
    let per_rank_neg = (k / 2) as i64 * -3 + if k % 2 == 1 { -5 } else { 0 };
    assert_eq!(w[0], total);
    assert_eq!(w[1], 3 * total);
    assert_eq!(w[2], if k.is_multiple_of(2) { 0 } else { all_bits(n) });
    assert_eq!(w[3] as i64, per_rank_neg * n as i64);
    // A counter completion: rank 0 puts to everyone, each waits for its count.
    let ctr = rma.alloc_symmetric(8, 8)?;
    let data = rma.alloc_symmetric(256, 64)?;
    am.barrier()?;
    if me == 0 {
        for t in 0..am.size() {
            let done = Completion {
                counter: Some(ctr),
                ..Completion::default()
            };
            rma.put_with(t, data, &[t as u8 + 1; 256], done)?;
        }
    }
    while rma.atomic(me, ctr, AtomicOp::FetchAdd(0))? == 0 {
        am.poll()?;
    }
    let mut got = [0u8; 256];
    rma.get(me, data, &mut got)?;
    assert!(
        got.iter().all(|&b| b == me as u8 + 1),
        "data in place with its count"
    );
    am.barrier()?;
    Ok(())
}

/// The xor word's value when every rank of `n` flipped its bit once.
fn all_bits(n: u64) -> u64 {
    (0..n).fold(0, |a, r| a ^ (1 << (r % 64)))
}

/// Indexed and strided puts and gets of many small blocks (packed into few frames on
/// the frame path) against a model, each rank in its own slice of every target.
pub fn indexed_against_a_model(
    c: MemConduit,
    rounds: usize,
    frames: bool,
) -> Result<usize, RmaError> {
    use amrq::rma::Strided;
    let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    let rma = Rma::new_or_over_frames(am, frames);
    let am = rma.am();
    let (me, n) = (am.rank(), am.size());
    let buf = rma.alloc_symmetric(n * SLICE, 64)?;
    let mine = buf + me * SLICE;
    let mut model = vec![vec![0u8; SLICE]; n];
    let mut rng = Rand::new(me as u64 + 7);
    let mut checked = 0;
    for _ in 0..rounds {
        let t = rng.below(n);
        let blocks: Vec<(usize, usize)> = (0..1 + rng.below(300))
            .map(|_| {
                let o = rng.below(SLICE);
                (o, rng.below((SLICE - o).min(3000) + 1))
            })
            .collect();
        let total: usize = blocks.iter().map(|b| b.1).sum();
        if rng.below(2) == 0 {
            let data: Vec<u8> = (0..total).map(|_| rng.below(256) as u8).collect();
            let remote: Vec<(usize, usize)> = blocks.iter().map(|&(o, l)| (mine + o, l)).collect();
            rma.put_indexed(t, &remote, &data)?;
            let mut at = 0;
            for &(o, l) in &blocks {
                model[t][o..o + l].copy_from_slice(&data[at..at + l]);
                at += l;
            }
        } else {
            let remote: Vec<(usize, usize)> = blocks.iter().map(|&(o, l)| (mine + o, l)).collect();
            let mut got = vec![0u8; total];
            rma.get_indexed(t, &remote, &mut got)?;
            let want: Vec<u8> = blocks
                .iter()
                .flat_map(|&(o, l)| model[t][o..o + l].to_vec())
                .collect();
            assert_eq!(got, want, "indexed get from rank {t}");
            checked += 1;
        }
    }
    // A 3-D sub-block: 3 planes of 4 rows of 5 bytes in a 16 × 8 × 4 array.
    let region = Strided {
        offset: mine + 3,
        counts: &[5, 4, 3],
        strides: &[16, 128],
    };
    let data: Vec<u8> = (0..60).map(|i| i as u8 ^ me as u8).collect();
    let t = (me + 1) % n;
    rma.put_strided(t, &region, &data)?;
    for (k, (o, l)) in region.blocks()?.into_iter().enumerate() {
        model[t][o - mine..o - mine + l].copy_from_slice(&data[k * 5..k * 5 + 5]);
    }
    let mut back = vec![0u8; 60];
    rma.get_strided(t, &region, &mut back)?;
    assert_eq!(back, data, "strided round trip");
    am.barrier()?;
    for (t, want) in model.iter().enumerate() {
        let mut got = vec![0u8; SLICE];
        rma.get(t, mine, &mut got)?;
        assert_eq!(
            &got, want,
            "rank {me}'s slice at rank {t} after the barrier"
        );
        checked += 1;
    }
    // Refusals: a block outside the segment, data not matching the blocks.
    let seg = am.rq().conduit().caps().segment_bytes;
    assert!(matches!(
        rma.put_indexed(t, &[(seg - 2, 4)], &[0; 4]),
        Err(RmaError::OutOfSegment { .. })
    ));
    assert!(matches!(
        rma.put_indexed(t, &[(mine, 4)], &[0; 3]),
        Err(RmaError::LengthMismatch { .. })
    ));
    am.barrier()?;
    Ok(checked)
}
