//! The Split-C layer against models: spread-array indexing against a direct count;
//! random reads and writes, and random puts, stores and gets, on 1–4 and 8 ranks, on the
//! direct and the message path, against a copy of the array each rank keeps; store
//! counting with several storers; a get through frames complete at `sync`; atomic
//! procedures under contention; misuse; the split-phase model again over the UCX
//! conduit (the network path: tcp on the loopback device).

#![cfg(not(amrq_loom))]

#[path = "common/ranks.rs"]
mod ranks;

use amrq::conduit::{Conduit, FaultKind};
use amrq::prelude::*;
use amrq::rma::{Rma, RmaError};
use amrq::splitc::{GlobalPtr, Layout, SplitC, SplitCError, SpreadArray};

/// Every index has one home, distinct from every other's, inside the local part its
/// rank allocates; the local indices of the ranks partition the array, in order.
#[test]
fn spread_indexing_is_a_bijection_onto_the_local_parts() {
    for procs in 1..=5 {
        for len in [0, 1, 7, 30, 64, 101] {
            for layout in [
                Layout::Cyclic,
                Layout::BlockCyclic(3),
                Layout::BlockCyclic(64),
            ] {
                let a = SpreadArray::<u32>::new(128, len, layout, procs);
                let mut homes = std::collections::HashSet::new();
                let mut per_rank = vec![Vec::new(); procs];
                for i in 0..len {
                    let p = a.at(i);
                    assert_eq!(p.rank(), a.owner(i));
                    assert!(p.offset() >= 128 && p.offset() + 4 <= 128 + a.local_bytes());
                    assert!(homes.insert(p), "{i} shares a home: {layout:?} {procs}");
                    per_rank[p.rank()].push(i);
                }
                assert_eq!(a.get(len), None);
                for (r, mine) in per_rank.iter().enumerate() {
                    assert_eq!(a.local_indices(r).collect::<Vec<_>>(), *mine);
                    assert_eq!(a.local_len(r), mine.len());
                    // In increasing order in the segment too.
                    let offs: Vec<usize> = mine.iter().map(|&i| a.at(i).offset()).collect();
                    assert!(offs.windows(2).all(|w| w[0] < w[1]));
                }
                assert_eq!(a.local_len(procs), 0);
                assert_eq!(a.local_indices(procs).count(), 0);
            }
        }
    }
}

#[test]
#[should_panic(expected = "out of bounds")]
fn a_spread_index_past_the_end_panics_like_a_slice() {
    SpreadArray::<u8>::new(0, 4, Layout::Cyclic, 2).at(4);
}

/// A small deterministic generator, so that every rank draws the same operations.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Rounds of random writes, each rank to its own share of indices, then random reads
/// of any index, bulk and single, checked against the value the model says was last
/// written there; on the direct and the message path.
fn random_reads_and_writes(procs: usize, frames: bool) {
    const LEN: usize = 97;
    let out = crate::ranks::run(procs, &Config::default(), |c| -> Result<(), SplitCError> {
        let sc = SplitC::new(Rma::new_or_over_frames(
            Am::new(c, HandlerTable::<()>::new(), ())?,
            frames,
        ))?;
        let (_rma, _am) = (sc.rma(), sc.am());
        let a = sc.all_spread_malloc::<u64>(LEN, Layout::BlockCyclic(4))?;
        let mut model = vec![0u64; LEN];
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for round in 1..=4u64 {
            // Each index is written by rank (index mod procs) this round: no two ranks
            // write the same element between barriers.
            for (i, m) in model.iter_mut().enumerate() {
                let v = next(&mut seed) ^ round;
                *m = v;
                if i % procs == sc.my_proc() {
                    sc.write(a.at(i), v)?;
                }
            }
            sc.barrier()?;
            for _ in 0..40 {
                let i = (next(&mut seed) as usize) % LEN;
                assert_eq!(sc.read(a.at(i))?, model[i], "index {i}, round {round}");
            }
            // A bulk read of each rank's whole local part.
            for r in 0..procs {
                let mine: Vec<usize> = a.local_indices(r).collect();
                let mut got = vec![0u64; mine.len()];
                if let Some(&first) = mine.first() {
                    sc.bulk_read(a.at(first), &mut got)?;
                }
                let want: Vec<u64> = mine.iter().map(|&i| model[i]).collect();
                assert_eq!(got, want, "rank {r}'s part, round {round}");
            }
            sc.barrier()?;
        }
        // A bulk write of a run inside one rank's part, read back by everyone.
        if sc.my_proc() == procs - 1 {
            let target = a.at(a.local_indices(0).next().unwrap_or(0));
            sc.bulk_write(target, &[1, 2, 3])?;
        }
        sc.barrier()?;
        let mut got = [0u64; 3];
        sc.bulk_read(a.at(0), &mut got)?;
        assert_eq!(got, [1, 2, 3]);
        sc.all_spread_free(a)
    })
    .unwrap();
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}

#[test]
fn reads_and_writes_match_a_model_on_the_direct_path() {
    for procs in [1, 2, 3, 4, 8] {
        random_reads_and_writes(procs, false);
    }
}

#[test]
fn reads_and_writes_match_a_model_on_the_message_path() {
    for procs in [1, 2, 3, 4, 8] {
        random_reads_and_writes(procs, true);
    }
}

/// A pointer outside a segment is a typed error on both paths, local and remote.
#[test]
fn a_pointer_out_of_the_segment_is_refused() {
    for frames in [false, true] {
        let out = crate::ranks::run(2, &Config::default(), |c| -> Result<(), SplitCError> {
            let sc = SplitC::new(Rma::new_or_over_frames(
                Am::new(c, HandlerTable::<()>::new(), ())?,
                frames,
            ))?;
            let (_rma, am) = (sc.rma(), sc.am());
            let past = am.segment().1;
            for rank in 0..2 {
                let p = GlobalPtr::<u32>::new(rank, past - 2);
                let outside = |r| matches!(r, Err(SplitCError::Rma(RmaError::OutOfSegment { .. })));
                assert!(outside(sc.read(p).map(drop)));
                assert!(outside(sc.write(p, 1)));
            }
            sc.barrier()
        })
        .unwrap();
        assert!(out.iter().all(Result::is_ok), "{out:?}");
    }
}

/// Rounds in which each element is written by its writer with a random one of write,
/// put and store (single or bulk), completed by `sync` and `all_store_sync`; then every
/// rank gets random elements into its own scratch part, completed by `sync`, and
/// checks them against the model; on 1–4 ranks, both paths.
fn random_split_phase(procs: usize, frames: bool) {
    let out =
        crate::ranks::run(procs, &Config::default(), |c| split_phase_rank(c, frames)).unwrap();
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}

/// One rank's part of [`random_split_phase`].
fn split_phase_rank<C: Conduit>(c: C, frames: bool) -> Result<(), SplitCError> {
    const LEN: usize = 61;
    const SCRATCH: usize = 16;
    let procs = c.size();
    {
        let sc = SplitC::new(Rma::new_or_over_frames(
            Am::new(c, HandlerTable::<(), C>::new(), ())?,
            frames,
        ))?;
        let (_rma, _am) = (sc.rma(), sc.am());
        let me = sc.my_proc();
        let a = sc.all_spread_malloc::<u64>(LEN, Layout::BlockCyclic(5))?;
        let scratch = sc.all_spread_malloc::<u64>(procs * SCRATCH, Layout::BlockCyclic(SCRATCH))?;
        let mine = |j: usize| scratch.at(me * SCRATCH + j);
        let mut model = vec![0u64; LEN];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for round in 1..=5u64 {
            let mut i = 0;
            while i < LEN {
                // Runs of 1–3 elements, all by one writer (the run's first index).
                let run = (1 + next(&mut seed) as usize % 3).min(LEN - i);
                let how = next(&mut seed) % 3;
                let vals: Vec<u64> = (0..run).map(|_| next(&mut seed) ^ round).collect();
                model[i..i + run].copy_from_slice(&vals);
                let writer = i % procs;
                // A run may cross into another rank's part: element by element then.
                let contiguous = (i..i + run).all(|k| a.at(k) == a.at(i) + (k - i));
                if writer == me {
                    for (k, chunk) in match contiguous {
                        true => vec![(i, &vals[..])],
                        false => (0..run).map(|d| (i + d, &vals[d..d + 1])).collect(),
                    } {
                        match how {
                            0 => sc.bulk_write(a.at(k), chunk)?,
                            1 => sc.bulk_put(a.at(k), chunk)?,
                            _ => sc.bulk_store(a.at(k), chunk)?,
                        }
                    }
                }
                i += run;
            }
            sc.sync()?;
            sc.all_store_sync()?;
            for _ in 0..3 {
                let picks: Vec<usize> = (0..SCRATCH)
                    .map(|_| next(&mut seed) as usize % LEN)
                    .collect();
                for (j, &k) in picks.iter().enumerate() {
                    sc.get(mine(j), a.at(k))?;
                }
                assert_eq!(sc.sync()?, SCRATCH);
                for (j, &k) in picks.iter().enumerate() {
                    assert_eq!(sc.read(mine(j))?, model[k], "element {k}, round {round}");
                }
            }
            // A bulk get of a whole block of another rank's part.
            let from = a.at(5 * ((me + 1) % procs));
            sc.bulk_get(mine(0), from, 5)?;
            sc.sync()?;
            let mut got = [0u64; 5];
            sc.bulk_read(mine(0), &mut got)?;
            let first = 5 * ((me + 1) % procs);
            let want: Vec<u64> = (first..first + 5)
                .map(|k| model.get(k).copied().unwrap_or(0))
                .collect();
            if first + 5 <= LEN {
                assert_eq!(got.to_vec(), want, "bulk get, round {round}");
            }
            sc.barrier()?;
        }
        assert_eq!(sc.sync()?, 0, "nothing pending");
        let remote = GlobalPtr::<u64>::new((me + 1) % procs, a.at(0).offset());
        if procs > 1 {
            assert_eq!(
                sc.get(remote, a.at(0)),
                Err(SplitCError::NotLocal {
                    rank: remote.rank(),
                    me
                })
            );
        }
        sc.barrier()
    }
}

#[test]
fn split_phase_operations_and_stores_match_a_model_on_the_direct_path() {
    for procs in [1, 2, 3, 4, 8] {
        random_split_phase(procs, false);
    }
}

#[test]
fn split_phase_operations_and_stores_match_a_model_on_the_message_path() {
    for procs in [1, 2, 3, 4, 8] {
        random_split_phase(procs, true);
    }
}

/// Every other rank stores into rank 0 at once; rank 0's `store_sync` of the total
/// returns with every value in place, on both paths, and later `all_store_sync`s agree.
#[test]
fn store_sync_counts_stores_from_several_ranks() {
    const EACH: usize = 50;
    for frames in [false, true] {
        let out = crate::ranks::run(4, &Config::default(), |c| -> Result<(), SplitCError> {
            let sc = SplitC::new(Rma::new_or_over_frames(
                Am::new(c, HandlerTable::<()>::new(), ())?,
                frames,
            ))?;
            let (_rma, _am) = (sc.rma(), sc.am());
            let (me, procs) = (sc.my_proc(), sc.procs());
            let a = sc.all_spread_malloc::<u32>(
                procs * procs * EACH,
                Layout::BlockCyclic(procs * EACH),
            )?;
            // Rank 0's part: `EACH` words from each rank, at `r * EACH`.
            if me != 0 {
                for k in 0..EACH {
                    sc.store(a.at(me * EACH + k), (me * 1000 + k) as u32)?;
                }
            } else {
                sc.store_sync(((procs - 1) * EACH * 4) as u64)?;
                for r in 1..procs {
                    for k in 0..EACH {
                        assert_eq!(sc.read(a.at(r * EACH + k))?, (r * 1000 + k) as u32);
                    }
                }
            }
            sc.all_store_sync()?;
            sc.all_store_sync() // nothing new: returns at once
        })
        .unwrap();
        assert!(out.iter().all(Result::is_ok), "{out:?}");
    }
}

/// On the message path a get is really split-phase: its reply writes the destination
/// when this rank polls it in (Split-C's get: the reply writes the value and counts
/// down), and `sync` returns once it has; until then the destination holds the old
/// value or the new.
#[test]
fn a_get_through_frames_is_complete_at_sync() {
    let out = crate::ranks::run(2, &Config::default(), |c| -> Result<(), SplitCError> {
        let sc = SplitC::new(Rma::over_frames(Am::new(c, HandlerTable::<()>::new(), ())?))?;
        let (_rma, am) = (sc.rma(), sc.am());
        let a = sc.all_spread_malloc::<u64>(4, Layout::Cyclic)?;
        let me = sc.my_proc();
        sc.write(a.at(me), 100 + me as u64)?;
        sc.write(a.at(me + 2), 0)?;
        sc.barrier()?;
        sc.get(a.at(me + 2), a.at(1 - me))?;
        for _ in 0..100 {
            am.poll()?; // the reply may arrive and be taken
            let v = sc.read(a.at(me + 2))?;
            assert!(v == 0 || v == 101 - me as u64, "{v}");
        }
        assert_eq!(sc.sync()?, 1);
        assert_eq!(sc.read(a.at(me + 2))?, 101 - me as u64);
        sc.barrier()
    })
    .unwrap();
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}

#[path = "common/marker.rs"]
mod marker;

/// Runs this test binary's `test` as 3 processes started by `amrun` (the message path
/// when `frames`), and checks that each rank ran its part.
fn as_three_processes(test: &str, frames: bool) {
    let token = marker::token();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_amrun"))
        .env("AMRQ_TEST_TOKEN", &token)
        .env("AMRQ_RMA_FRAMES", if frames { "1" } else { "0" })
        .args(["-n", "3", "--bind", "none", "--timeout", "120"])
        .arg(std::env::current_exe().expect("test binary"))
        .args(marker::child_args(test))
        .status()
        .expect("amrun starts");
    assert!(status.success(), "{status}");
    marker::all_ran(&token, 3);
}

/// The split-phase model again with the ranks as processes started by `amrun` (3 ranks;
/// the message path when `AMRQ_RMA_FRAMES` says so), each leaving word that it ran.
fn split_phase_as_processes(test: &str, frames: bool) {
    let cfg = Config::default();
    marker::run_rank(crate::ranks::joined(&cfg), |c| {
        split_phase_rank(c, std::env::var("AMRQ_RMA_FRAMES").as_deref() == Ok("1"))
    });
    as_three_processes(test, frames);
}

#[test]
fn split_phase_matches_a_model_as_processes_on_the_direct_path() {
    split_phase_as_processes(
        "split_phase_matches_a_model_as_processes_on_the_direct_path",
        false,
    );
}

#[test]
fn split_phase_matches_a_model_as_processes_on_the_message_path() {
    split_phase_as_processes(
        "split_phase_matches_a_model_as_processes_on_the_message_path",
        true,
    );
}

/// Registers the atomic procedure of the contention tests: element += k, answering
/// the element before.
fn register_inc(t: &mut HandlerTable<()>) -> amrq::am::Call<(u64, u64), u64> {
    t.call("inc", |_, ctx, (at, k): (u64, u64)| {
        amrq::splitc::update_local(&ctx, at, |v: u64| v + k)
    })
}

/// Every rank adds 1, `times` times, to every element of a small spread array through
/// the atomic procedure `inc`: every element ends at exactly PROCS · times, and each
/// value a procedure answered (the element before) was answered once per element.
fn contended_sums(
    sc: &SplitC<()>,
    inc: amrq::am::Call<(u64, u64), u64>,
    times: u64,
) -> Result<(), SplitCError> {
    let total = sc.procs() as u64 * times;
    let a = sc.all_spread_malloc::<u64>(6, Layout::Cyclic)?;
    for i in a.local_indices(sc.my_proc()) {
        sc.write(a.at(i), 0)?;
    }
    sc.barrier()?;
    let mut seen = vec![Vec::new(); a.len()];
    for _ in 0..times {
        for (i, s) in seen.iter_mut().enumerate() {
            s.push(sc.atomic(inc, a.at(i), 1)?);
        }
    }
    sc.barrier()?;
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(sc.read(a.at(i))?, total, "element {i}");
        assert!(s.windows(2).all(|w| w[0] < w[1]), "answers grow: {s:?}");
    }
    let mut all = vec![0u64; a.len() * total as usize];
    for (i, s) in seen.iter().enumerate() {
        for &v in s {
            all[i * total as usize + v as usize] += 1;
        }
    }
    sc.all_reduce_slice(&mut all, amrq::coll::sum)?;
    assert!(all.iter().all(|&k| k == 1), "an answer twice or never");
    sc.all_spread_free(a)
}

/// Four threads contend through `splitc_threads_with`, on both paths.
#[test]
fn atomic_procedures_sum_exactly_under_contention() {
    for frames in [false, true] {
        let cfg = {
            let mut c = Config::new();
            c.rma_frames.set(frames);
            c
        };
        cfg.threads(4, |setup| {
            let mut t = HandlerTable::new();
            let inc = register_inc(&mut t);
            let job = setup.start(t, ())?;
            assert_eq!(job.splitc().is_direct(), !frames);
            Ok(contended_sums(job.splitc(), inc, 300)?)
        })
        .unwrap();
    }
}

/// Three processes started by `amrun` contend through atomic procedures (the message
/// path when `AMRQ_RMA_FRAMES` says so), each leaving word that it ran.
fn atomic_procedures_as_processes(test: &str, frames: bool) {
    if std::env::var_os("AMRQ_TEST_TOKEN").is_some() {
        let mut cfg = Config::new();
        cfg.ranks.set(3);
        cfg.run(|setup| {
            let frames = setup.config().rma_frames.get();
            let mut t = HandlerTable::new();
            let inc = register_inc(&mut t);
            let job = setup.start(t, ())?;
            let sc = job.splitc();
            assert_eq!(sc.is_direct(), !frames);
            contended_sums(sc, inc, 200)?;
            assert!(marker::mark_ran(sc.my_proc()), "could not leave word");
            Ok(())
        });
    }
    as_three_processes(test, frames);
}

#[test]
fn atomic_procedures_sum_exactly_as_processes_on_the_direct_path() {
    atomic_procedures_as_processes(
        "atomic_procedures_sum_exactly_as_processes_on_the_direct_path",
        false,
    );
}

#[test]
fn atomic_procedures_sum_exactly_as_processes_on_the_message_path() {
    atomic_procedures_as_processes(
        "atomic_procedures_sum_exactly_as_processes_on_the_message_path",
        true,
    );
}

/// A call whose handler fails, or whose args do not decode (a peer whose table types
/// a handler otherwise: the names match, so the tables do), comes back as a failure
/// naming the target, the handler and the reason, and the target records each as the
/// caller's fault.
#[test]
fn calls_are_refused_clearly() {
    use amrq::am::Words;
    let out = crate::ranks::run(2, &Config::default(), |c| -> Result<(), SplitCError> {
        let me = c.rank();
        let mut t = HandlerTable::<()>::new();
        let third = t.call("third", |_, _ctx, w: Words| {
            w.as_slice()
                .get(3)
                .copied()
                .ok_or(AmError::from("no word 3"))
        });
        // Rank 0 sends words to rank 1's bool.
        let flag = match me {
            0 => Some(t.call("flag", |_, _ctx, w: Words| Ok(w.as_slice().len() as u64))),
            _ => {
                t.call("flag", |_, _ctx, b: bool| Ok(u64::from(b)));
                None
            }
        };
        let am = Am::new(c, t, ())?;
        if me == 0 {
            let words = Words::new(&[1]).unwrap();
            let Err(AmError::RequestFailed(f)) = am.call(1, third, words)?.wait() else {
                panic!("a call whose handler fails must fail");
            };
            assert_eq!((f.target, f.name.as_str()), (1, "third"));
            let error = "no word 3".to_string();
            assert_eq!(f.reason, FaultKind::HandlerFailed { error });
            let flag = flag.expect("rank 0's");
            let Err(AmError::RequestFailed(f)) =
                am.call(1, flag, Words::new(&[2]).unwrap())?.wait()
            else {
                panic!("a bool of 2 must not decode");
            };
            assert_eq!(
                (f.name.as_str(), f.reason),
                ("flag", FaultKind::BadArg { index: 1 })
            );
        }
        am.barrier()?;
        assert_eq!(am.faults().of(0), if me == 1 { 2 } else { 0 });
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}

#[path = "common/ucx.rs"]
mod ucx_common;

/// The split-phase model on 3 ranks over the UCX conduit (threads, tcp on the loopback
/// device): through what the conduit offers for one-sided operations, and through AM
/// frames. Skipped, saying so, where UCX is not installed.
#[test]
fn split_phase_matches_a_model_over_the_network_conduit() {
    let Some(settings) = ucx_common::loopback_or_skip("split_phase over UCX") else {
        return;
    };
    for frames in [false, true] {
        let spec = Config::default().conduit_spec();
        let eps = amrq::conduit::ucx::threads(3, &spec, &settings).expect("a UCX job over tcp");
        let out: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = eps
                .into_iter()
                .map(|c| s.spawn(move || split_phase_rank(c, frames)))
                .collect();
            hs.into_iter().map(|h| h.join().expect("rank")).collect()
        });
        assert!(out.iter().all(Result::is_ok), "frames: {frames}: {out:?}");
    }
}
