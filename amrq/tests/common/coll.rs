//! Every collective against a sequential model of what each rank must end with, for
//! lengths that fit one chunk and lengths that take several. Shared by the threads and
//! the processes tests.

use amrq::coll::{self, Coll, Matching};
use amrq::conduit::mem::MemConduit;
use amrq::prelude::*;
use amrq::rma::{Rma, RmaError};

/// Rank r's input element i (the model knows every rank's).
fn input(r: usize, i: usize) -> u64 {
    ((r as u64 + 1) * 1_000_003) ^ (i as u64).wrapping_mul(0x9e37_79b9)
}

/// Runs every collective for each length in `lens` with every root and checks it.
pub fn all_collectives(c: MemConduit, lens: &[usize]) -> Result<(), RmaError> {
    let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    let coll = Coll::new(Rma::new(am))?;
    let am = coll.am();
    let (me, n) = (am.rank(), am.size());
    let mine = |len: usize| (0..len).map(|i| input(me, i)).collect::<Vec<u64>>();
    let column = |i: usize| (0..n).map(move |r| input(r, i));
    for &len in lens {
        for root in 0..n {
            let mut v = if me == root { mine(len) } else { vec![0; len] };
            coll.broadcast(root, &mut v)?;
            assert_eq!(
                v,
                (0..len).map(|i| input(root, i)).collect::<Vec<_>>(),
                "broadcast from {root}"
            );

            let mut v = mine(len);
            coll.reduce(root, &mut v, |a: u64, b| a.wrapping_add(b))?;
            if me == root {
                let want: Vec<u64> = (0..len)
                    .map(|i| column(i).fold(0, u64::wrapping_add))
                    .collect();
                assert_eq!(v, want, "reduce to {root}");
            }

            let mut out = vec![0u64; n * len];
            coll.gather(root, &mine(len), &mut out)?;
            if me == root {
                let want: Vec<u64> = (0..n)
                    .flat_map(|r| (0..len).map(move |i| input(r, i)))
                    .collect();
                assert_eq!(out, want, "gather to {root}");
            }
        }
        let mut v = mine(len);
        coll.allreduce(&mut v, coll::max)?;
        assert_eq!(
            v,
            (0..len)
                .map(|i| column(i).max().unwrap())
                .collect::<Vec<_>>(),
            "allreduce max"
        );

        let mut f: Vec<f64> = (0..len).map(|i| (me * len + i) as f64).collect();
        coll.allreduce(&mut f, coll::min)?;
        assert_eq!(
            f,
            (0..len).map(|i| i as f64).collect::<Vec<_>>(),
            "allreduce min"
        );

        let mut s: Vec<i32> = (0..len).map(|i| i as i32 - me as i32).collect();
        coll.allreduce(&mut s, coll::sum)?;
        let want: Vec<i32> = (0..len)
            .map(|i| (0..n as i32).map(|r| i as i32 - r).sum())
            .collect();
        assert_eq!(s, want, "allreduce sum of i32");

        for inclusive in [true, false] {
            let mut v = mine(len);
            coll.scan(&mut v, inclusive, 0, |a: u64, b| a.wrapping_add(b))?;
            let upto = if inclusive { me + 1 } else { me };
            let want: Vec<u64> = (0..len)
                .map(|i| (0..upto).map(|r| input(r, i)).fold(0, u64::wrapping_add))
                .collect();
            assert_eq!(v, want, "scan inclusive={inclusive}");
        }

        let mut out = vec![0u64; n * len];
        coll.allgather(&mine(len), &mut out)?;
        let want: Vec<u64> = (0..n)
            .flat_map(|r| (0..len).map(move |i| input(r, i)))
            .collect();
        assert_eq!(out, want, "allgather");

        // Exchange: block j of rank r is (r, j, k); rank j must end with block r = (r, j, k).
        let cell = |from: usize, to: usize, k: usize| ((from * 64 + to) * 1_000_000 + k) as u64;
        let send: Vec<u64> = (0..n)
            .flat_map(|to| (0..len).map(move |k| cell(me, to, k)))
            .collect();
        let want: Vec<u64> = (0..n)
            .flat_map(|from| (0..len).map(move |k| cell(from, me, k)))
            .collect();
        // Credits, then a rate (a window of smaller chunks), then credits again (the
        // pieces of the channel move between them), then the unmatched order.
        let paced = Matching::Rate {
            gap: std::time::Duration::from_micros(1),
        };
        for (how, matching) in [
            ("credit", Matching::Credit),
            ("rate", paced),
            ("credit after rate", Matching::Credit),
        ] {
            let mut recv = vec![0u64; n * len];
            coll.exchange_matched(&send, &mut recv, matching)?;
            assert_eq!(recv, want, "exchange, {how}");
        }
        let mut recv = vec![0u64; n * len];
        coll.exchange_unmatched(&send, &mut recv)?;
        assert_eq!(recv, want, "exchange, unmatched");
    }
    // Refusals.
    assert!(matches!(
        coll.broadcast(n, &mut [0u64; 1]),
        Err(RmaError::NoSuchRank { .. })
    ));
    if n > 1 {
        assert_eq!(
            coll.allgather(&[1u64], &mut [0u64; 1]),
            Err(RmaError::LengthMismatch {
                expected: n,
                got: 1
            })
        );
    }
    am.barrier()?;
    Ok(())
}
