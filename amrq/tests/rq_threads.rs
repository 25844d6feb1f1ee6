//! Remote Queues with ranks as threads: full queues, dequeue/read/delete semantics.

#![cfg(not(amrq_loom))]

#[path = "common/ranks.rs"]
mod ranks;

use amrq::conduit::doorbell::DoorbellFence;
use amrq::conduit::{Conduit, ConduitError, ReceivedFrame};
use amrq::prelude::*;
use amrq::rq::Dequeued;
use std::time::Duration;

#[test]
fn full_queue_returns_false_and_loses_nothing() {
    let mut cfg = Config::default();
    let q = cfg.add_queue(8);
    let out = crate::ranks::run(2, &cfg, |conduit| -> Result<(), AmError> {
        let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
        let rq = am.rq();
        let mut accepted = Vec::new();
        if am.rank() == 0 {
            // Rank 1 does not read until the barrier: fill its queue.
            let mut refused = 0;
            for i in 0..100u64 {
                if rq.enqueue(1, q, &[i, i * i], &[])? {
                    assert_eq!(
                        refused, 0,
                        "accepted {i} after a refusal without any dequeue"
                    );
                    accepted.push(i);
                } else {
                    refused += 1;
                }
            }
            assert_eq!(accepted.len(), 8, "an 8-slot queue holds 8 Express frames");
            assert_eq!(refused, 92);
        }
        am.barrier()?;
        if am.rank() == 1 {
            let mut args = [0u64; 8];
            let mut buf = [0u8; 0];
            for i in 0..8u64 {
                let d = rq.dequeue(q, &mut args, &mut buf)?;
                assert_eq!(
                    d,
                    Some(Dequeued {
                        source: 0,
                        tag: 0,
                        nargs: 2,
                        len: 0
                    })
                );
                assert_eq!(&args[..2], &[i, i * i], "frames in order, none lost");
            }
            assert_eq!(
                rq.dequeue(q, &mut args, &mut buf)?,
                None,
                "refused frames never arrive"
            );
        }
        am.barrier()?;
        // Room is back once the receiver has drained.
        if am.rank() == 0 {
            assert!(rq.enqueue(1, q, &[1], &[])?);
        }
        am.barrier()?;
        if am.rank() == 1 {
            assert!(rq.delete_queue(q)?);
            assert!(!rq.delete_queue(q)?);
        }
        am.barrier()
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn read_queue_leaves_the_frame_and_release_removes_it() {
    let mut cfg = Config::default();
    let q = cfg.add_queue(16);
    let out = crate::ranks::run(1, &cfg, |conduit| -> Result<(), RqError> {
        let rq = Rq::new(conduit);
        assert!(rq.enqueue(0, q, &[5], b"first")?);
        assert!(rq.enqueue(0, q, &[6], b"second")?);
        {
            let f = rq.read_queue(q)?.expect("a frame");
            assert_eq!(
                (f.args(), &*f.payload().to_cow()),
                (&[5u64][..], &b"first"[..])
            );
            // Only one frame of a queue can be borrowed at a time.
            assert_eq!(
                rq.read_queue(q).err(),
                Some(RqError::Conduit(ConduitError::FrameOutstanding {
                    channel: q.index()
                }))
            );
        } // dropped, not released: still queued
        let f = rq.read_queue(q)?.expect("still there");
        assert_eq!(f.payload(), b"first");
        f.release();
        let mut args = [0u64; 1];
        let mut small = [0u8; 3];
        assert_eq!(
            rq.dequeue(q, &mut args, &mut small),
            Err(RqError::BufferTooSmall { nargs: 1, len: 6 })
        );
        let mut buf = [0u8; 6];
        let d = rq
            .dequeue(q, &mut args, &mut buf)?
            .expect("the second frame stayed");
        assert_eq!((d.len, args[0], &buf), (6, 6, b"second"));
        assert!(rq.read_queue(q)?.is_none());
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn the_papers_dequeue_takes_a_prefix_of_a_longer_head_and_leaves_a_shorter_one() {
    let mut cfg = Config::default();
    let q = cfg.add_queue(64);
    let out = crate::ranks::run(2, &cfg, |conduit| -> Result<(), AmError> {
        let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
        let rq = am.rq();
        let long: Vec<u8> = (0..2000).map(|i| (i % 251) as u8).collect(); // Tag-On
        if am.rank() == 0 {
            assert!(rq.enqueue(1, q, &[1, 2, 3], &long[..100])?);
            assert!(rq.enqueue(1, q, &[4], &[])?);
            assert!(rq.enqueue(1, q, &[5, 6], &long)?);
        }
        am.barrier()?;
        if am.rank() == 1 {
            let (mut args, mut buf) = ([0u64; 4], [0u8; 1500]);
            // Four args asked, three there: false, nothing copied, nothing removed.
            assert_eq!(rq.dequeue_prefix(q, &mut args, &mut buf[..1])?, None);
            assert_eq!(args, [0; 4]);
            assert_eq!(
                rq.read_queue_prefix(q, &mut args[..3], &mut buf[..101])?,
                None
            );
            // A prefix read, then taken: the rest of the frame goes with it.
            let head = rq.read_queue_prefix(q, &mut args[..1], &mut [])?;
            assert_eq!(head.map(|d| (d.nargs, d.len, args[0])), Some((1, 0, 1)));
            let d = rq
                .dequeue_prefix(q, &mut args[..2], &mut buf[..50])?
                .expect("3 ≥ 2, 100 ≥ 50");
            assert_eq!((d.source, d.nargs, d.len), (0, 2, 50));
            assert_eq!((&args[..2], &buf[..50]), (&[1, 2][..], &long[..50]));
            // The next frame has one arg and no bytes: one byte asked is more than it has.
            assert_eq!(rq.dequeue_prefix(q, &mut args[..1], &mut buf[..1])?, None);
            let d = rq
                .dequeue_prefix(q, &mut args[..1], &mut [])?
                .expect("exactly its size");
            assert_eq!((d.nargs, d.len, args[0]), (1, 0, 4));
            // A Tag-On frame: 1500 of its 2000 bytes.
            let d = rq
                .dequeue_prefix(q, &mut args[..2], &mut buf)?
                .expect("2000 ≥ 1500");
            assert_eq!(
                (d.len, &args[..2], &buf[..]),
                (1500, &[5, 6][..], &long[..1500])
            );
            assert!(
                rq.read_queue(q)?.is_none(),
                "each frame removed once, whole"
            );
            assert_eq!(
                rq.dequeue_prefix(q, &mut [], &mut [])?,
                None,
                "empty: false"
            );
        }
        am.barrier()?;
        // A stream of frames of many lengths, each taken by the length its first arg
        // names (read first, then dequeued): every frame once, in order, none left.
        let frames = 3000u64;
        if am.rank() == 0 {
            for i in 0..frames {
                let n = (i * 37 % 700) as usize;
                while !rq.enqueue(1, q, &[n as u64, i], &long[..n])? {
                    am.poll()?;
                }
            }
        } else {
            let (mut sum, mut next) = (0u64, 0u64);
            let (mut args, mut buf) = ([0u64; 2], vec![0u8; 700]);
            while next < frames {
                if rq.read_queue_prefix(q, &mut args[..1], &mut [])?.is_none() {
                    am.poll()?;
                    continue;
                }
                let n = args[0] as usize;
                rq.dequeue_prefix(q, &mut args, &mut buf[..n])?
                    .expect("the length it names");
                assert_eq!((args[1], &buf[..n]), (next, &long[..n]));
                sum += buf[..n].iter().map(|&b| u64::from(b)).sum::<u64>();
                next += 1;
            }
            let want: u64 = (0..frames)
                .map(|i| {
                    long[..(i * 37 % 700) as usize]
                        .iter()
                        .map(|&b| u64::from(b))
                        .sum::<u64>()
                })
                .sum();
            assert_eq!(sum, want);
        }
        am.barrier()?;
        assert!(rq.read_queue(q)?.is_none());
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn reading_the_head_leaves_it_the_head_whatever_the_senders() {
    // Two senders into one queue, sending while the receiver reads: a frame looked at
    // and left stays the head, however often it is looked at and whatever arrives
    // meanwhile (the queue's turn between senders moves only with frames taken), so the
    // paper's read_queue-then-dequeue takes what it read.
    let mut cfg = Config::default();
    let q = cfg.add_queue(16);
    let frames = 3000u64;
    let out = crate::ranks::run(3, &cfg, |conduit| -> Result<(), AmError> {
        let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
        let rq = am.rq();
        if am.rank() > 0 {
            for i in 0..frames {
                while !rq.enqueue(0, q, &[am.rank() as u64, i], &[])? {
                    rq.conduit().check_peers()?; // a receiver that failed ends the wait
                }
                // Rank 1 sends slowly: its ring is often empty when the receiver looks,
                // and a frame of its lands while the receiver reads rank 2's.
                for _ in 0..(if am.rank() == 1 { 500 } else { 0 }) {
                    std::hint::spin_loop();
                }
            }
        } else {
            let mut next = [0u64; 3];
            for _ in 0..2 * frames {
                let mut read = [0u64; 2];
                while rq.read_queue_prefix(q, &mut read, &mut [])?.is_none() {}
                for _ in 0..40 {
                    let mut again = [0u64; 2];
                    let d = rq.read_queue_prefix(q, &mut again, &mut [])?;
                    assert_eq!(d.map(|d| d.source as u64), Some(read[0]));
                    assert_eq!(again, read, "the same head");
                }
                let mut took = [0u64; 2];
                rq.dequeue_prefix(q, &mut took, &mut [])?
                    .expect("the same head");
                assert_eq!(took, read, "dequeue took what read_queue read");
                let src = took[0] as usize;
                assert_eq!(took[1], next[src], "in order per sender");
                next[src] += 1;
            }
            assert_eq!(next, [0, frames, frames]);
        }
        am.barrier()?;
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn bad_destination_queue_and_sizes_are_typed_errors() {
    let mut cfg = Config::default();
    let q = cfg.add_queue(4);
    let out = crate::ranks::run(2, &cfg, |conduit| -> Result<(), RqError> {
        let rq = Rq::new(conduit);
        let err = |r: Result<bool, RqError>| match r {
            Err(RqError::Conduit(e)) => e,
            other => panic!("expected an error, got {other:?}"),
        };
        assert_eq!(
            err(rq.enqueue(2, q, &[], &[])),
            ConduitError::NoSuchRank { rank: 2, size: 2 }
        );
        assert_eq!(
            err(rq.enqueue(0, QueueId::new(9), &[], &[])),
            ConduitError::NoSuchChannel {
                channel: 9,
                channels: 3
            }
        );
        assert_eq!(
            err(rq.enqueue(0, q, &[0; 9], &[])),
            ConduitError::TooManyArgs { nargs: 9, max: 8 }
        );
        // A 4-slot queue takes frames of at most 2 slots: 128 - 16 - 64 = 48 payload bytes.
        assert!(matches!(
            err(rq.enqueue(0, q, &[], &[0; 49])),
            ConduitError::PayloadTooLarge {
                len: 49,
                max: 48,
                ..
            }
        ));
        assert!(rq.enqueue(rq.rank(), q, &[], &[0; 48])?);
        // The AM queues are the runtime's: no call here forges its messages.
        for am_q in [QueueId::AM_REQUEST, QueueId::AM_REPLY] {
            let refused = Err(RqError::RuntimeQueue {
                queue: am_q.index(),
            });
            assert_eq!(rq.enqueue(0, am_q, &[0], &[]), refused);
            assert_eq!(rq.enqueue_tagged(0, am_q, 0, &[0], &[]), refused);
            assert_eq!(rq.enqueue_long(0, am_q, 0, &[0], b"x", 0), refused);
            assert_eq!(rq.enqueue_interrupt(0, am_q, &[0], &[]), refused);
        }
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn a_queue_takes_only_its_senders() {
    use amrq::config::QueueSpec;
    let mut cfg = Config::default();
    let q = cfg.add(QueueSpec::new("from-rank-0", 16).senders_only(vec![0]));
    assert_eq!(cfg.queue_named("from-rank-0"), Some(q));
    let out = crate::ranks::run(2, &cfg, |conduit| -> Result<(), AmError> {
        let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
        let rq = am.rq();
        if am.rank() == 0 {
            assert!(rq.enqueue(1, q, &[42], &[])?);
        } else {
            assert_eq!(
                rq.enqueue(0, q, &[1], &[]),
                Err(RqError::Conduit(ConduitError::NotPermitted {
                    rank: 1,
                    channel: q.index()
                }))
            );
        }
        am.barrier()?;
        if am.rank() == 1 {
            let mut args = [0u64; 1];
            assert!(rq.dequeue(q, &mut args, &mut [])?.is_some());
            assert_eq!((args[0], rq.dropped(q)), (42, 0));
        }
        if am.rank() == 0 {
            assert!(
                rq.read_queue(q)?.is_none(),
                "the refused frame was never sent"
            );
        }
        am.barrier()?;
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[path = "common/one_poll.rs"]
mod one_poll;

#[test]
fn one_poll_through_its_armed_path_loses_nothing() {
    let (cfg, _) = one_poll::config();
    let out = crate::ranks::run(2, &cfg, |c| one_poll::armed_bursts(c, 2000)).unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn am_poll_loses_nothing_that_arrives_around_its_arm_point() {
    for fence in [DoorbellFence::Asymmetric, DoorbellFence::Symmetric] {
        let cfg = {
            let mut c = Config::new();
            c.doorbell_fence.set(fence);
            c
        };
        let out = crate::ranks::run(2, &cfg, |c| {
            one_poll::am_poll_around_the_arm_point(c, 10_000, Duration::from_micros(200))
        })
        .unwrap();
        assert!(out.iter().all(|r| r.is_ok()), "{fence:?}: {out:?}");
    }
}

#[test]
fn one_poll_loses_nothing_that_arrives_around_its_arm_point() {
    let runs = [
        (
            DoorbellFence::Asymmetric,
            10_000,
            Duration::from_micros(200),
        ),
        (DoorbellFence::Symmetric, 200_000, Duration::from_micros(2)),
    ];
    for (fence, frames, max_pause) in runs {
        let (mut cfg, _) = one_poll::config();
        cfg.doorbell_fence.set(fence);
        let out = crate::ranks::run(2, &cfg, |c| {
            one_poll::arrivals_around_the_arm_point(c, frames, max_pause)
        })
        .unwrap();
        assert!(out.iter().all(|r| r.is_ok()), "{fence:?}: {out:?}");
    }
}

#[test]
fn one_poll_takes_queues_in_priority_order() {
    let (cfg, [urgent, normal, bulk]) = one_poll::config();
    let out = crate::ranks::run(2, &cfg, |c| -> Result<(), AmError> {
        let am = Am::new(c, HandlerTable::<()>::new(), ())?;
        let rq = am.rq();
        if am.rank() == 0 {
            for (q, v) in [
                (bulk, 3u64),
                (normal, 2),
                (urgent, 1),
                (bulk, 6),
                (urgent, 4),
                (normal, 5),
            ] {
                assert!(rq.enqueue(1, q, &[v], &[])?);
            }
        }
        am.barrier()?;
        if am.rank() == 1 {
            let mut order = Vec::new();
            let set = rq.poll_set(&[urgent, normal, bulk])?;
            while let Some((q, f)) = rq.one_poll(&set)? {
                order.push((q, f.args()[0]));
                f.release();
            }
            assert_eq!(
                order,
                vec![
                    (urgent, 1),
                    (urgent, 4),
                    (normal, 2),
                    (normal, 5),
                    (bulk, 3),
                    (bulk, 6)
                ]
            );
        }
        am.barrier()
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[path = "common/tag_on.rs"]
mod tag_on;

#[test]
fn tag_on_blocks_are_reused_without_leaks() {
    let (cfg, _) = tag_on::config();
    let out = crate::ranks::run(2, &cfg, |c| tag_on::tag_on_reuse(c, 5_000)).unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn the_plain_enqueue_chooses_the_kind_by_size() {
    use amrq::rq::Kind;
    let (cfg, q) = tag_on::config();
    let out = crate::ranks::run(1, &cfg, |c| -> Result<(), RqError> {
        let rq = Rq::new(c);
        for (len, tag_on) in [
            (0usize, false),
            (40, false),
            (300, false),
            (512, false),
            (513, true),
            (4096, true),
        ] {
            assert!(rq.enqueue(0, q, &[1], &vec![7u8; len])?, "{len} bytes");
            let f = rq.read_queue(q)?.expect("a frame");
            assert_eq!(
                (f.payload().len(), f.is_tag_on()),
                (len, tag_on),
                "{len} bytes"
            );
            f.release();
        }
        // Above a Tag-On block: Basic, which a 64-slot queue cannot hold either.
        assert!(matches!(
            rq.enqueue(0, q, &[1], &[0; 4097]),
            Err(RqError::Conduit(ConduitError::PayloadTooLarge {
                len: 4097,
                max: 1968,
                ..
            }))
        ));
        assert_eq!(
            rq.enqueue_as(0, q, Kind::Express, 0, &[1, 2, 3, 4, 5, 6, 7], &[]),
            Err(RqError::NotExpress { nargs: 7, len: 0 })
        );
        assert!(rq.enqueue_as(0, q, Kind::Express, 0, &[1, 2, 3, 4, 5, 6], &[])?);
        assert!(rq.delete_queue(q)?);
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

mod interrupts {
    use amrq::conduit::{Conduit, ConduitError, ReceivedFrame};
    use amrq::config::{Delivery, QueueSpec};
    use amrq::prelude::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn config() -> (Config, QueueId, QueueId) {
        let mut cfg = Config::default();
        let alarms = cfg.add(QueueSpec::new("alarms", 64).delivery(Delivery::Interrupt));
        let work = cfg.add_queue(64);
        (cfg, alarms, work)
    }

    fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
        let t = Instant::now();
        while !cond() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "timed out waiting for {what}"
            );
            std::hint::spin_loop();
        }
    }

    #[test]
    fn frames_flagged_interrupt_by_their_sender_run_on_the_progress_thread() {
        const N: u64 = 2_000;
        let mut cfg = Config::default();
        let data = cfg.add_queue(64); // a Poll queue
        let only0 = cfg.add(QueueSpec::new("only0", 8).senders_only(vec![0]));
        cfg.interrupt_slots.set(16);
        let out = crate::ranks::run(2, &cfg, |c| -> Result<(), RqError> {
            let mut rq = Rq::new(c);
            let (flagged, sum) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
            let (f2, s2) = (flagged.clone(), sum.clone());
            let intr = rq.start_interrupts(move |q, src, args, payload| {
                assert_eq!(
                    (q, src, args.len(), payload.held()),
                    (data, 0, 7, Some(&b"!"[..]))
                );
                assert_eq!(args[1..], [1, 2, 3, 4, 5, 6]);
                s2.fetch_add(args[0], Ordering::Relaxed);
                // ORDERING: Release pairs with the owner's Acquire load of the count.
                f2.fetch_add(1, Ordering::Release);
            });
            if rq.rank() == 0 {
                for i in 0..N {
                    // Every other frame flagged; the plain ones stay for polling.
                    while !rq.enqueue_interrupt(1, data, &[i, 1, 2, 3, 4, 5, 6], b"!")? {}
                    while !rq.enqueue(1, data, &[i], &[])? {}
                }
            } else {
                assert_eq!(
                    rq.enqueue_interrupt(0, only0, &[1], &[]),
                    Err(RqError::Conduit(ConduitError::NotPermitted {
                        rank: 1,
                        channel: only0.index()
                    }))
                );
                // Poll `data`: only the plain half arrives here, the flagged half runs
                // on the progress thread meanwhile.
                let mut plain = 0;
                wait_for("every frame", || {
                    while let Some(f) = rq.read_queue(data).unwrap() {
                        assert_eq!(f.args(), &[plain]);
                        plain += 1;
                        f.release();
                    }
                    // ORDERING: Acquire pairs with the handler's Release increment.
                    plain == N && flagged.load(Ordering::Acquire) == N
                });
                assert_eq!(sum.load(Ordering::Relaxed), N * (N - 1) / 2);
            }
            drop(intr);
            Ok(())
        })
        .unwrap();
        assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
        // Without an interrupt queue, a flagged enqueue says what to set.
        let mut cfg = Config::default();
        let q = cfg.add_queue(8);
        let out = crate::ranks::run(1, &cfg, |c| Rq::new(c).enqueue_interrupt(0, q, &[], &[]));
        assert_eq!(
            out.unwrap()[0],
            Err(RqError::Conduit(ConduitError::NoInterruptChannel))
        );
    }

    #[test]
    fn interrupts_run_while_the_owner_computes_and_leave_poll_queues_alone() {
        let (cfg, alarms, work) = config();
        let out = crate::ranks::run(2, &cfg, |c| -> Result<(), RqError> {
            let mut rq = Rq::new(c);
            if rq.rank() == 1 {
                let sum = Arc::new(AtomicU64::new(0));
                let s = sum.clone();
                let intr = rq
                    .start_interrupts(move |q, src, args, _p| {
                        assert_eq!((q, src), (alarms, 0));
                        s.fetch_add(args[0], Ordering::Relaxed);
                    })
                    .expect("an Interrupt queue");
                assert!(matches!(
                    rq.read_queue(alarms),
                    Err(RqError::Conduit(ConduitError::DeliveredByInterrupts { .. }))
                ));
                rq.conduit().barrier()?;
                // Compute without polling: the handlers run anyway.
                wait_for("1000 interrupts", || {
                    sum.load(Ordering::Relaxed) == (1..=1000).sum::<u64>()
                });
                // The Poll queue was not touched: all 10 frames wait for our poll.
                for i in 0..10u64 {
                    let mut a = [0u64; 1];
                    assert!(rq.dequeue(work, &mut a, &mut [])?.is_some());
                    assert_eq!(a[0], i);
                }
                drop(intr);
            } else {
                rq.conduit().barrier()?;
                for i in 0..10u64 {
                    assert!(rq.enqueue(1, work, &[i], &[])?);
                }
                for i in 1..=1000u64 {
                    while !rq.enqueue(1, alarms, &[i], &[])? {}
                    if i % 100 == 0 {
                        std::thread::sleep(Duration::from_millis(2)); // let it go idle and sleep
                    }
                }
            }
            rq.conduit().barrier()?;
            Ok(())
        })
        .unwrap();
        assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
    }

    #[test]
    fn handlers_wait_while_interrupts_are_held() {
        let (cfg, alarms, _) = config();
        let out = crate::ranks::run(2, &cfg, |c| -> Result<(), RqError> {
            let mut rq = Rq::new(c);
            if rq.rank() == 1 {
                let count = Arc::new(AtomicU64::new(0));
                let on_owner = Arc::new(AtomicU64::new(0));
                let (n, o) = (count.clone(), on_owner.clone());
                let owner = std::thread::current().id();
                let intr = rq.start_interrupts(move |_, _, _, _| {
                    n.fetch_add(1, Ordering::Relaxed);
                    if std::thread::current().id() == owner {
                        o.fetch_add(1, Ordering::Relaxed);
                    }
                });
                let intr = intr.expect("an Interrupt queue");
                for round in 0..20u64 {
                    let section = intr.hold();
                    rq.conduit().barrier()?; // rank 0 sends 5 now
                    rq.conduit().barrier()?; // … and has sent them
                    let before = count.load(Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                    assert_eq!(
                        count.load(Ordering::Relaxed),
                        before,
                        "a handler ran inside the section"
                    );
                    assert_eq!(before, round * 5);
                    drop(section); // the deferred handlers run now
                    wait_for("the deferred handlers", || {
                        count.load(Ordering::Relaxed) == (round + 1) * 5
                    });
                }
                // The progress thread found frames during (nearly) every 5 ms section
                // and left them to the owner's release.
                assert!(
                    on_owner.load(Ordering::Relaxed) > 0,
                    "no deferred handler ran at a section's end"
                );
                drop(intr);
            } else {
                for _ in 0..20 {
                    rq.conduit().barrier()?;
                    for i in 0..5u64 {
                        while !rq.enqueue(1, alarms, &[i], &[])? {}
                    }
                    rq.conduit().barrier()?;
                }
            }
            Ok(())
        })
        .unwrap();
        assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
    }
}

#[test]
fn many_queues_many_senders_exactly_once() {
    use amrq::config::QueueSpec;
    const RANKS: usize = 4;
    const PER_PAIR: u64 = 3_000;
    let mut cfg = Config::default();
    let qs = [
        cfg.add(QueueSpec::new("small", 16).one_poll()),
        cfg.add(QueueSpec::new("medium", 64).one_poll()),
        cfg.add(QueueSpec::new("large", 64).one_poll()),
    ];
    let sizes = [0usize, 200, 2000]; // Express, Basic, Tag-On (plain enqueue picks)
    let out = crate::ranks::run(RANKS, &cfg, |c| -> Result<(u64, u64), RqError> {
        let rq = Rq::new(c);
        let me = rq.rank();
        let set = rq.poll_set(&qs)?;
        let mut next = [[0u64; 3]; RANKS]; // per (sender, queue): next sequence number
        let (mut got, mut sum) = (0u64, 0u64);
        let want = (RANKS as u64) * 3 * PER_PAIR;
        let mut sent = [[0u64; 3]; RANKS];
        let mut receive = |rq: &Rq, got: &mut u64, sum: &mut u64| -> Result<(), RqError> {
            while let Some((q, f)) = rq.one_poll(&set)? {
                let k = qs.iter().position(|&x| x == q).expect("one of ours");
                let (src, seq) = (f.source(), f.args()[0]);
                assert_eq!(
                    seq, next[src][k],
                    "queue {k} from rank {src}: out of order or twice"
                );
                next[src][k] += 1;
                assert_eq!(f.payload().len(), sizes[k]);
                assert!(f
                    .payload()
                    .to_vec()
                    .iter()
                    .all(|&b| b == (seq as u8) ^ (src as u8)));
                *sum = sum.wrapping_add(seq * 31 + src as u64);
                *got += 1;
                f.release();
            }
            Ok(())
        };
        // Send round-robin over destinations and queues, receiving whenever a queue is full.
        let mut payload = Vec::new();
        for i in 0..PER_PAIR {
            for d in 0..RANKS {
                let dest = (me + d) % RANKS;
                for k in 0..3 {
                    payload.clear();
                    payload.resize(sizes[k], (i as u8) ^ (me as u8));
                    while !rq.enqueue(dest, qs[k], &[sent[dest][k]], &payload)? {
                        receive(&rq, &mut got, &mut sum)?;
                    }
                    sent[dest][k] += 1;
                }
            }
        }
        let t = std::time::Instant::now();
        while got < want {
            receive(&rq, &mut got, &mut sum)?;
            assert!(
                t.elapsed() < std::time::Duration::from_secs(60),
                "only {got} of {want} frames arrived"
            );
        }
        Ok((got, sum))
    })
    .unwrap();
    let want_sum: u64 = (0..RANKS as u64)
        .map(|src| (0..PER_PAIR).map(|seq| seq * 31 + src).sum::<u64>() * 3)
        .sum();
    for (rank, r) in out.into_iter().enumerate() {
        let (got, sum) = r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        assert_eq!(got, RANKS as u64 * 3 * PER_PAIR, "rank {rank}");
        assert_eq!(sum, want_sum, "rank {rank}: checksum");
    }
}

#[path = "common/shared.rs"]
mod shared;

#[test]
fn a_shared_queue_delivers_every_senders_frames_exactly_once_and_in_order() {
    const RANKS: usize = 4;
    const PER_PAIR: u64 = 4_000;
    let (cfg, _) = shared::config();
    let out = crate::ranks::run(RANKS, &cfg, |c| shared::flood(c, PER_PAIR)).unwrap();
    for (rank, r) in out.into_iter().enumerate() {
        let (got, sum) = r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        assert_eq!(got, RANKS as u64 * PER_PAIR, "rank {rank}");
        assert_eq!(
            sum,
            shared::want_sum(RANKS, PER_PAIR),
            "rank {rank}: checksum"
        );
    }
}

#[test]
fn a_shared_queue_checks_senders_args_and_carries_long_frames() {
    use amrq::config::QueueSpec;
    let mut cfg = Config::default();
    let q = cfg.add(
        QueueSpec::new("to-rank-0", 8)
            .shared()
            .senders_only(vec![1]),
    );
    let out = crate::ranks::run(2, &cfg, |c| -> Result<(), RqError> {
        let rq = Rq::new(c);
        assert!(rq.conduit().caps().channels[q.index()].shared);
        if rq.rank() == 1 {
            assert_eq!(
                rq.enqueue(0, q, &[0; 8], &[]),
                Err(RqError::Conduit(ConduitError::TooManyArgs {
                    nargs: 8,
                    max: 7
                })),
                "the eighth word names the sender"
            );
            assert!(rq.enqueue_long(0, q, 5, &[1, 2, 3, 4, 5, 6, 7], b"long bytes", 64)?);
        } else {
            assert_eq!(
                rq.enqueue(1, q, &[1], &[]),
                Err(RqError::Conduit(ConduitError::NotPermitted {
                    rank: 0,
                    channel: q.index()
                }))
            );
            let f = loop {
                if let Some(f) = rq.read_queue(q)? {
                    break f;
                }
            };
            assert!(f.is_long());
            assert_eq!(
                (f.source(), f.tag(), f.args(), &*f.payload().to_cow()),
                (1, 5, &[1u64, 2, 3, 4, 5, 6, 7][..], &b"long bytes"[..])
            );
            f.release();
        }
        Ok(())
    })
    .unwrap();
    assert!(out.iter().all(|r| r.is_ok()), "{out:?}");
}

#[test]
fn an_interrupt_queue_sharing_a_doorbell_bit_is_refused_at_setup() {
    use amrq::config::{Delivery, QueueSpec};
    let mut cfg = Config::default();
    cfg.add(QueueSpec::new("irq", 4).delivery(Delivery::Interrupt)); // queue 2: bit 2
    for _ in 0..63 {
        cfg.add_queue(2);
    }
    cfg.add(QueueSpec::new("late", 4).one_poll()); // queue 66: bit 2 again
    match cfg.clone().threads(1, |_| Ok(())) {
        Err(amrq::Error::Conduit(ConduitError::Setup(why))) => {
            assert!(why.contains("shares doorbell bit 2 with queue 66"), "{why}")
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
    // One-poll queues may share bits: 64 of them are fine.
    let mut cfg = Config::default();
    for i in 0..64 {
        cfg.add(QueueSpec::new(format!("q{i}"), 2).one_poll());
    }
    assert!(crate::ranks::run(1, &cfg, |_| ()).is_ok());
}

#[path = "common/cpu.rs"]
mod cpu;

#[test]
fn a_blocking_wait_on_one_poll_queues_sleeps_and_sees_every_frame() {
    use amrq::config::QueueSpec;
    use std::time::Duration;
    const ROUNDS: u64 = 200;
    let mut cfg = Config::default();
    let q = cfg.add(QueueSpec::new("events", 8).one_poll());
    let out = crate::ranks::run(2, &cfg, |c| -> Result<(Duration, Duration), RqError> {
        let rq = Rq::new(c);
        let set = rq.poll_set(&[q])?;
        let cpu = cpu::thread_cpu;
        let (wall, cpu0) = (std::time::Instant::now(), cpu());
        for k in 0..ROUNDS {
            if rq.rank() == 0 {
                // Sleep past the receiver's spin now and then, and send at once otherwise:
                // arrivals land before, during and after it arms.
                if k % 4 == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
                assert!(rq.enqueue(1, q, &[k], &[])?);
                let (_, ack) = rq.wait(&set, Some(Duration::from_secs(20)))?;
                ack.release();
            } else {
                let (_, f) = rq.wait(&set, Some(Duration::from_secs(20)))?;
                assert_eq!(f.args(), &[k], "every frame once, in order");
                f.release();
                assert!(rq.enqueue(0, q, &[k], &[])?);
            }
        }
        Ok((wall.elapsed(), cpu() - cpu0))
    })
    .unwrap();
    let (wall, cpu) = out[1].clone().unwrap();
    assert!(out[0].is_ok(), "{:?}", out[0]);
    assert!(
        cpu * 3 < wall,
        "the waiting rank used {cpu:?} of CPU in {wall:?}"
    );
}

/// Remote Queues and a rank that has left: the blocking enqueue into its full queue
/// ends with `PeerLeft`; a blocking wait with nobody left first delivers what the rank
/// sent before it left, then ends with `AllPeersLeft` instead of sleeping forever.
#[test]
fn a_rank_that_left_ends_blocking_enqueues_and_waits_with_typed_errors() {
    use amrq::config::QueueSpec;
    let mut cfg = Config::default();
    let q = cfg.add(QueueSpec::new("work", 4).one_poll());
    let out = crate::ranks::run(2, &cfg, |c| -> Result<(), String> {
        let rq = Rq::new(c);
        let set = rq.poll_set(&[q]).map_err(|e| e.to_string())?;
        if rq.rank() == 1 {
            // Sends one frame, then leaves.
            assert!(rq.enqueue(0, q, &[42], &[]).map_err(|e| e.to_string())?);
            return Ok(());
        }
        let mut sent = 0;
        let err = loop {
            match rq.enqueue_or_serve(1, q, &[sent], &[], &set, |_, _| {}) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
        };
        assert!(
            matches!(err, RqError::Conduit(ConduitError::PeerLeft { rank: 1 })),
            "{err}"
        );
        assert_eq!(
            sent, 4,
            "the queue took its 4 slots, then the sender gave up"
        );
        // enqueue_or_serve served rank 1's frame while it waited, or it is still queued.
        match rq.wait(&set, None) {
            Ok((_, f)) => {
                assert_eq!(f.args(), &[42]);
                f.release();
                let err = rq.wait(&set, None).map(|_| ()).unwrap_err();
                assert!(
                    matches!(err, RqError::Conduit(ConduitError::AllPeersLeft)),
                    "{err}"
                );
            }
            Err(e) => assert!(
                matches!(e, RqError::Conduit(ConduitError::AllPeersLeft)),
                "{e}"
            ),
        }
        Ok(())
    });
    for r in out.unwrap() {
        r.unwrap();
    }
}
