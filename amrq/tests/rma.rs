//! One-sided operations with ranks as threads: against a model for 1 to 5 ranks,
//! atomics from every rank at once, completion events, and every typed refusal.

#![cfg(not(amrq_loom))]

#[path = "common/ranks.rs"]
mod ranks;

#[path = "common/rma.rs"]
mod common_rma;

#[path = "common/put_async.rs"]
mod put_async;

use amrq::conduit::{Conduit, ReceivedFrame};
use amrq::prelude::*;
use amrq::rma::{Rma, RmaError};

fn all_ok<T: std::fmt::Debug>(out: Result<Vec<Result<T, RmaError>>, String>) -> Vec<T> {
    out.expect("job ran")
        .into_iter()
        .enumerate()
        .map(|(r, x)| x.unwrap_or_else(|e| panic!("rank {r}: {e}")))
        .collect()
}

#[test]
fn put_and_get_agree_with_a_model_for_1_to_5_ranks() {
    for frames in [false, true] {
        for n in 1..=5 {
            let out = crate::ranks::run(n, &Config::default(), |c| {
                common_rma::against_a_model(c, 3_000, frames)
            });
            assert!(
                all_ok(out).iter().all(|&checked| checked > 500),
                "{n} ranks, frames: {frames}"
            );
        }
    }
}

#[test]
fn indexed_and_strided_transfers_agree_with_a_model_direct_and_through_frames() {
    for frames in [false, true] {
        for n in 1..=4 {
            let out = crate::ranks::run(n, &Config::default(), |c| {
                common_rma::indexed_against_a_model(c, 120, frames)
            });
            assert!(
                all_ok(out).iter().all(|&k| k > 20),
                "{n} ranks, frames: {frames}"
            );
        }
    }
}

#[test]
fn puts_no_one_waits_for_post_every_event_once_after_the_data_direct_and_through_frames() {
    let mut cfg = Config::default();
    for slots in put_async::SLOTS {
        cfg.add_queue(slots);
    }
    for frames in [false, true] {
        let out = crate::ranks::run(2, &cfg, |c| {
            put_async::put_async_events(c, (500, 8), frames)
        });
        all_ok(out);
    }
}

#[test]
fn events_of_puts_to_several_targets_through_frames_come_in_the_order_of_the_puts() {
    // Rank 0 puts to ranks 1 and 2 in turn, through frames; rank 2 starts serving late,
    // so rank 1's acknowledgements come first: the sender-side events still come in
    // the order the puts were made, once each.
    let mut cfg = Config::default();
    let sent = cfg.add_queue(512);
    let puts = 100u64;
    let out = crate::ranks::run(3, &cfg, |c| -> Result<(), RmaError> {
        let am = Am::new(c, HandlerTable::<()>::new(), ())?;
        let rma = Rma::over_frames(am);
        let am = rma.am();
        let at = rma.alloc_symmetric(8 * puts as usize, 8)?;
        am.barrier()?;
        if am.rank() == 0 {
            for i in 0..puts {
                let done = amrq::rma::Completion {
                    local: Some((sent, &[i])),
                    ..Default::default()
                };
                let to = 1 + (i % 2) as usize;
                rma.put_async(to, at + 8 * i as usize, &i.to_ne_bytes(), done)?;
            }
            let mut next = 0;
            while next < puts {
                match am.rq().read_queue(sent)? {
                    Some(f) => {
                        assert_eq!(f.args(), [next], "events in the order of the puts");
                        f.release();
                        next += 1;
                    }
                    None => drop(am.poll()?),
                }
            }
        } else if am.rank() == 2 {
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        am.barrier()?; // ranks 1 and 2 serve the puts here
        assert!(am.rq().read_queue(sent)?.is_none());
        am.barrier()?;
        Ok(())
    });
    all_ok(out);
}

#[test]
fn atomics_from_every_rank_sum_exactly() {
    for (frames, k) in [(false, 5_001), (true, 1_001)] {
        for n in [1, 2, 3, 4, 8] {
            let out = crate::ranks::run(n, &Config::default(), |c| {
                common_rma::atomics_from_every_rank(c, k, frames)
            });
            all_ok(out);
        }
    }
}

#[test]
fn bad_addresses_sizes_and_frees_are_typed_errors() {
    let cfg = {
        let mut c = Config::new();
        c.segment_bytes.set(1 << 20);
        c
    };
    let out = crate::ranks::run(2, &cfg, |c| -> Result<(), RmaError> {
        let am = Am::new(c, HandlerTable::<()>::new(), ())?;
        let rma = Rma::new(am);
        let am = rma.am();
        let seg = 1 << 20;
        assert_eq!(
            rma.put(1, seg - 4, &[0; 8]),
            Err(RmaError::OutOfSegment {
                rank: 1,
                offset: seg - 4,
                len: 8,
                segment_bytes: seg
            })
        );
        assert!(matches!(
            rma.get(0, usize::MAX, &mut [0; 2]),
            Err(RmaError::OutOfSegment { .. })
        ));
        assert_eq!(
            rma.put(2, 0, &[1]),
            Err(RmaError::NoSuchRank { rank: 2, size: 2 })
        );
        assert_eq!(
            rma.fetch_add(1, 12, 1),
            Err(RmaError::Misaligned { offset: 12 })
        );
        assert!(
            matches!(rma.alloc_local(seg + 1, 8), Err(RmaError::OutOfMemory { len, .. }) if len == seg + 1)
        );
        assert_eq!(rma.free(77), Err(RmaError::NotAllocated { offset: 77 }));
        // A symmetric allocation only one rank has room for fails on every rank.
        let hog = if am.rank() == 1 {
            Some(rma.alloc_local(seg - 4096, 8)?)
        } else {
            None
        };
        assert!(matches!(
            rma.alloc_symmetric(8192, 64),
            Err(RmaError::NotSymmetric { len: 8192, .. })
        ));
        if let Some(h) = hog {
            rma.free(h)?;
        }
        assert_eq!(
            rma.alloc_symmetric(8192, 64)?,
            0,
            "and succeeds once there is room"
        );
        // Implicit operations are counted and completed by sync_nbi.
        for i in 0..10u8 {
            rma.put_nbi(1 - am.rank(), 64 + i as usize, &[i])?;
        }
        assert_eq!(rma.sync_nbi()?, 10);
        assert_eq!(rma.sync_nbi()?, 0);
        am.barrier()?;
        Ok(())
    });
    all_ok(out);
}

#[test]
fn handles_and_sync_nbi_complete_every_operation_once_through_frames() {
    let out = crate::ranks::run(2, &Config::default(), |c| -> Result<(), RmaError> {
        let am = Am::new(c, HandlerTable::<()>::new(), ())?;
        let rma = Rma::over_frames(am);
        let am = rma.am();
        let at = rma.alloc_symmetric(4096, 64)?;
        let peer = 1 - am.rank();
        for i in 0..100u8 {
            rma.put_nbi(peer, at + i as usize, &[i])?;
        }
        assert_eq!(rma.sync_nbi()?, 100, "each implicit put completed once");
        assert_eq!(rma.sync_nbi()?, 0);
        rma.put_nb(peer, at + 200, b"xyz")?.wait()?;
        am.barrier()?;
        let mut got = [0u8; 3];
        let h = rma.get_nb(am.rank(), at + 200, &mut got)?;
        while !h.test() {
            am.poll()?;
        }
        h.wait()?;
        assert_eq!(&got, b"xyz");
        let mut mine = [0u8; 100];
        rma.get(am.rank(), at, &mut mine)?;
        assert!(mine.iter().enumerate().all(|(i, &b)| b == i as u8));
        assert!(matches!(
            rma.get(peer, usize::MAX - 1, &mut got),
            Err(RmaError::OutOfSegment { .. })
        ));
        am.barrier()?;
        Ok(())
    });
    all_ok(out);
}

/// Implicit gets through frames land straight in the getter's segment, in pieces when
/// longer than a Medium reply: every byte in place at `sync_nbi`, nothing around it
/// touched, however many gets a round has; a destination outside the segment is
/// refused before anything is sent.
#[test]
fn implicit_gets_through_frames_land_every_piece_in_place() {
    let out = crate::ranks::run(2, &Config::default(), |c| -> Result<(), RmaError> {
        let am = Am::new(c, HandlerTable::<()>::new(), ())?;
        let rma = Rma::over_frames(am);
        let am = rma.am();
        let len = 3 * am.max_medium() + 5; // four replies
        let src = rma.alloc_symmetric(len, 8)?;
        let dst = rma.alloc_symmetric(3 * len + 2, 8)?;
        let pattern: Vec<u8> = (0..len).map(|i| (i * 7 + am.rank()) as u8).collect();
        rma.put(am.rank(), src, &pattern)?;
        rma.put(am.rank(), dst, &vec![0xee; 3 * len + 2])?;
        am.barrier()?;
        let peer = 1 - am.rank();
        for round in 0..3 {
            for k in 0..=round {
                rma.get_local_nbi(peer, src, len, dst + 1 + k * len)?;
            }
            assert_eq!(rma.sync_nbi()?, round as u64 + 1);
        }
        let mut got = vec![0u8; 3 * len + 2];
        rma.get(am.rank(), dst, &mut got)?;
        let want: Vec<u8> = (0..len).map(|i| (i * 7 + peer) as u8).collect();
        assert_eq!(
            (got[0], got[3 * len + 1]),
            (0xee, 0xee),
            "a byte around was touched"
        );
        for k in 0..3 {
            assert!(got[1 + k * len..1 + (k + 1) * len] == want[..], "get {k}");
        }
        assert!(matches!(
            rma.get_local_nbi(peer, src, len, usize::MAX - 8),
            Err(RmaError::OutOfSegment { .. })
        ));
        am.barrier()?;
        Ok(())
    });
    all_ok(out);
}

/// Arguments that once panicked (a division by zero, an overflow) or corrupted state:
/// each is now a typed error, and the job goes on.
#[test]
fn bad_arguments_are_typed_errors_not_panics() {
    let out = crate::ranks::run(2, &Config::default(), |c| -> Result<(), RmaError> {
        let am = Am::new(c, HandlerTable::<()>::new(), ())?;
        let rma = Rma::new(am);
        let am = rma.am();
        for align in [0, 3, 24, usize::MAX] {
            assert!(
                matches!(
                    rma.alloc_local(8, align),
                    Err(RmaError::BadAlignment { .. })
                ),
                "align {align}"
            );
            assert!(matches!(
                rma.alloc_symmetric(8, align),
                Err(RmaError::BadAlignment { .. })
            ));
        }
        assert!(matches!(
            rma.alloc_local(usize::MAX, 8),
            Err(RmaError::OutOfMemory { .. })
        ));
        // Allocations never overlap.
        let a = rma.alloc_local(100, 8)?;
        let b = rma.alloc_local(100, 8)?;
        assert!(a + 100 <= b || b + 100 <= a, "{a} and {b} overlap");
        rma.free(b)?;
        rma.free(a)?;
        // Strided regions that describe nothing, overflow, or are absurdly many.
        let data = [0u8; 16];
        let empty = amrq::rma::Strided {
            offset: 0,
            counts: &[],
            strides: &[],
        };
        let e = rma.put_strided(1, &empty, &data).expect_err("empty");
        assert!(matches!(e, RmaError::BadStrided { .. }), "{e}");
        assert!(!e.to_string().contains("0 elements where 0"), "{e}");
        // A zero repeat count beside a huge one: no blocks, at once (this looped for
        // usize::MAX rounds before; found by tests/bad_input.rs).
        let none = amrq::rma::Strided {
            offset: 0,
            counts: &[8, 0, usize::MAX],
            strides: &[8, 8],
        };
        assert_eq!(none.blocks()?, []);
        rma.put_strided(1, &none, &[])?;
        let overflow = amrq::rma::Strided {
            offset: 8,
            counts: &[1, 3],
            strides: &[usize::MAX / 2 + 1],
        };
        assert!(matches!(
            rma.put_strided(1, &overflow, &data[..3]),
            Err(RmaError::BadStrided { .. })
        ));
        let many = amrq::rma::Strided {
            offset: 0,
            counts: &[1, usize::MAX, 2],
            strides: &[1, 1],
        };
        assert!(matches!(
            rma.get_strided(1, &many, &mut [0u8; 4]),
            Err(RmaError::BadStrided { .. })
        ));
        // The job is intact.
        am.barrier()?;
        Ok(())
    });
    all_ok(out);
}

/// AM rings of 2 slots carry no Medium payload: one-sided operations through frames
/// say so instead of dividing by zero.
#[test]
fn frames_too_small_for_one_sided_operations_are_refused_with_the_remedy() {
    let cfg = {
        let mut c = Config::new();
        c.ring_slots.set(2);
        c
    };
    let out = crate::ranks::run(2, &cfg, |c| -> Result<(), RmaError> {
        let am = Am::new(c, HandlerTable::<()>::new(), ())?;
        let rma = Rma::over_frames(am);
        let am = rma.am();
        let mut buf = [0u8; 8];
        let e = rma
            .get(1 - am.rank(), 0, &mut buf)
            .expect_err("no Medium room");
        assert!(matches!(e, RmaError::FramesTooSmall { .. }), "{e}");
        assert!(e.to_string().contains("AMRQ_RING_SLOTS"), "{e}");
        let e = rma
            .get_indexed(1 - am.rank(), &[(0, 4), (8, 4)], &mut buf)
            .expect_err("no Medium room");
        assert!(matches!(e, RmaError::FramesTooSmall { .. }), "{e}");
        am.barrier()?;
        Ok(())
    });
    all_ok(out);
}

/// An operation through frames whose target leaves the job without answering ends with
/// `PeerLeft` naming it, while another rank is still there (so the wait is not ended by
/// "every other rank has left").
#[test]
fn an_operation_whose_target_left_ends_with_peer_left() {
    use amrq::conduit::ConduitError;
    let out = crate::ranks::run(3, &Config::default(), |c| -> Result<(), RmaError> {
        let rma = Rma::over_frames(Am::new(c, HandlerTable::<()>::new(), ())?);
        let am = rma.am();
        match am.rank() {
            1 => Ok(()), // leaves at once, serving nothing
            0 => {
                while !am.rq().conduit().peer_left(1) {
                    std::thread::yield_now();
                }
                let mut buf = [0u8; 8];
                let got = rma.get(1, 0, &mut buf);
                let left = ConduitError::PeerLeft { rank: 1 };
                assert!(
                    matches!(&got, Err(RmaError::Am(e)) if e.conduit() == Some(&left)),
                    "{got:?}"
                );
                Ok(())
            }
            _ => {
                // Stays until rank 0 is done (or a deadline), so rank 0 is not alone.
                let _ = am.wait_until_for(std::time::Duration::from_secs(20), |_| {
                    am.rq().conduit().peer_left(0)
                });
                Ok(())
            }
        }
    })
    .expect("job ran");
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}
