//! Active Messages with ranks as threads: exactly-once and per-pair order, floods of
//! requests with replies, Medium payloads, the barrier, and every typed error.

#![cfg(not(amrq_loom))]

#[path = "common/ranks.rs"]
mod ranks;

use amrq::conduit::{Conduit, ConduitError, FaultKind, Message};
use amrq::prelude::*;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

fn all_ok<T: std::fmt::Debug, E: std::fmt::Debug>(
    out: Result<Vec<Result<T, E>>, String>,
) -> Vec<T> {
    out.expect("job ran")
        .into_iter()
        .map(|r| r.expect("rank ok"))
        .collect()
}

/// Per source: next sequence number expected, count, and a checksum of args and payloads.
struct Seen {
    next: RefCell<Vec<u64>>,
    count: Cell<u64>,
    sum: Cell<u64>,
    disorder: Cell<u64>,
}

fn mix(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17)
}

#[test]
fn million_messages_exactly_once_in_order_per_pair() {
    const RANKS: usize = 4;
    const PER_RANK: u64 = 250_000; // 10^6 in all
    let out = crate::ranks::run(RANKS, &Config::default(), |conduit| -> Result<_, AmError> {
        let mut table = HandlerTable::new();
        let on_msg = table.request("msg", |s: &Seen, _ctx, m| {
            let src = m.source();
            let mut next = s.next.borrow_mut();
            if m.arg(0)? != next[src] {
                s.disorder.set(s.disorder.get() + 1);
            }
            next[src] = m.arg(0)? + 1;
            let payload_sum = m
                .payload()
                .iter()
                .fold(0u64, |a, &b| a.wrapping_mul(31).wrapping_add(u64::from(b)));
            s.sum
                .set(s.sum.get().wrapping_add(mix(m.arg(1)?) ^ payload_sum));
            s.count.set(s.count.get() + 1);
            Ok(())
        });
        let size = conduit_size(&conduit);
        let seen = Seen {
            next: RefCell::new(vec![0; size]),
            count: Cell::new(0),
            sum: Cell::new(0),
            disorder: Cell::new(0),
        };
        let am = Am::new(conduit, table, seen)?;
        let me = am.rank() as u64;
        let mut per_dest_seq = vec![0u64; am.size()];
        let mut sent_sum = vec![0u64; am.size()];
        let mut payload = Vec::new();
        for i in 0..PER_RANK {
            let dest = (i as usize + am.rank()) % am.size();
            let value = me << 40 | i;
            let seq = per_dest_seq[dest];
            per_dest_seq[dest] += 1;
            if i % 16 == 0 {
                payload.clear();
                payload.extend((0..(i % 300) as u8).map(|b| b ^ me as u8));
                am.request_medium(dest, on_msg, &[seq, value], &payload)?;
            } else {
                payload.clear();
                am.request(dest, on_msg, &[seq, value])?;
            }
            let psum = payload
                .iter()
                .fold(0u64, |a, &b| a.wrapping_mul(31).wrapping_add(u64::from(b)));
            sent_sum[dest] = sent_sum[dest].wrapping_add(mix(value) ^ psum);
        }
        // Each rank is the destination of PER_RANK messages (the round-robin is balanced).
        // A deadline, so that a lost message fails the test instead of hanging it.
        am.wait_until_for(std::time::Duration::from_secs(60), |s| {
            s.count.get() >= PER_RANK
        })?;
        am.barrier()?;
        Ok((
            sent_sum,
            am.state().count.get(),
            am.state().sum.get(),
            am.state().disorder.get(),
        ))
    });
    let ranks = all_ok(out);
    let total: u64 = ranks.iter().map(|r| r.1).sum();
    assert_eq!(
        total,
        RANKS as u64 * PER_RANK,
        "every message delivered exactly once"
    );
    for (dest, r) in ranks.iter().enumerate() {
        let expected = ranks.iter().fold(0u64, |a, s| a.wrapping_add(s.0[dest]));
        assert_eq!(r.2, expected, "checksum of what rank {dest} received");
        assert_eq!(r.3, 0, "rank {dest} saw messages out of order");
    }
}

fn conduit_size(c: &impl Conduit) -> usize {
    c.size()
}

struct Flood {
    back: ReplyHandler,
    replies: Cell<u64>,
    reply_sum: Cell<u64>,
}

fn flood(ranks: usize, per_peer: u64, ring_slots: u64) {
    let cfg = {
        let mut c = Config::new();
        c.ring_slots.set(ring_slots);
        c
    };
    let out = crate::ranks::run(ranks, &cfg, |conduit| -> Result<_, AmError> {
        let mut table = HandlerTable::new();
        let back = table.reply("back", |s: &Flood, m| {
            s.replies.set(s.replies.get() + 1);
            let p: u64 = m.payload().iter().map(|&b| u64::from(b)).sum();
            s.reply_sum.set(s.reply_sum.get() + m.arg(0)? + p);
            Ok(())
        });
        let ask = table.request("ask", |s: &Flood, ctx, m| {
            // Every 8th reply is Medium: it takes several slots of the small reply ring.
            if m.arg(0)? % 8 == 0 {
                ctx.reply_medium(s.back, &[m.arg(0)? * 2], &[1u8; 100])
            } else {
                ctx.reply(s.back, &[m.arg(0)? * 2])
            }
        });
        let am = Am::new(
            conduit,
            table,
            Flood {
                back,
                replies: Cell::new(0),
                reply_sum: Cell::new(0),
            },
        )?;
        for i in 0..per_peer {
            for k in 0..am.size() {
                // Everyone hits everyone at once, self included, in a different order.
                let dest = (am.rank() + k) % am.size();
                am.request(dest, ask, &[i])?;
            }
        }
        let want = per_peer * am.size() as u64;
        am.wait_until_for(std::time::Duration::from_secs(60), |s| {
            s.replies.get() == want
        })?;
        am.barrier()?;
        Ok((am.state().replies.get(), am.state().reply_sum.get()))
    });
    let expect_sum: u64 = (0..per_peer)
        .map(|i| 2 * i + if i % 8 == 0 { 100 } else { 0 })
        .sum::<u64>()
        * ranks as u64;
    for (rank, (n, sum)) in all_ok(out).into_iter().enumerate() {
        assert_eq!(n, per_peer * ranks as u64, "replies counted at rank {rank}");
        assert_eq!(sum, expect_sum, "reply contents at rank {rank}");
    }
}

#[test]
fn all_to_all_flood_4_ranks_small_rings() {
    flood(4, 20_000, 16);
}

#[test]
fn all_to_all_flood_8_ranks() {
    flood(8, 5_000, 256);
}

#[test]
fn medium_payload_is_delivered_in_place_up_to_the_maximum() {
    struct S {
        got: RefCell<Vec<(usize, u64)>>,
    }
    let out = crate::ranks::run(2, &Config::default(), |conduit| -> Result<_, AmError> {
        let mut table = HandlerTable::new();
        let h = table.request("bytes", |s: &S, _ctx, m| {
            let seed = m.arg(0)?;
            let ok = m
                .payload()
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i as u64 ^ seed) as u8);
            assert!(ok, "payload bytes intact");
            s.got.borrow_mut().push((m.payload_len(), seed));
            Ok(())
        });
        let am = Am::new(
            conduit,
            table,
            S {
                got: RefCell::new(Vec::new()),
            },
        )?;
        let max = am.max_medium();
        assert!(max >= 4096, "documented minimum Medium size, got {max}");
        let sizes = [0, 1, 7, 8, 40, 48, 49, 63, 64, 1000, 4096, max];
        if am.rank() == 0 {
            for (k, &len) in sizes.iter().enumerate() {
                let p: Vec<u8> = (0..len).map(|i| (i as u64 ^ k as u64) as u8).collect();
                am.request_medium(1, h, &[k as u64], &p)?;
            }
            let too_big = vec![0u8; max + 1];
            let e = am.request_medium(1, h, &[], &too_big).unwrap_err();
            assert_eq!(
                e.conduit(),
                Some(&ConduitError::PayloadTooLarge {
                    len: max + 1,
                    max,
                    channel: 0
                }),
                "{e}"
            );
        } else {
            am.wait_until_for(std::time::Duration::from_secs(60), |s| {
                s.got.borrow().len() == sizes.len()
            })?;
            let got = am.state().got.borrow().clone();
            let want: Vec<_> = sizes
                .iter()
                .enumerate()
                .map(|(k, &l)| (l, k as u64))
                .collect();
            assert_eq!(got, want);
        }
        am.barrier()
    });
    all_ok(out);
}

#[test]
fn barrier_holds_every_rank_for_1_to_8_ranks() {
    for n in 1..=8usize {
        let entered: Vec<AtomicU64> = (0..20).map(|_| AtomicU64::new(0)).collect();
        let out = crate::ranks::run(n, &Config::default(), |conduit| -> Result<(), AmError> {
            let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
            for (k, e) in entered.iter().enumerate() {
                e.fetch_add(1, Ordering::SeqCst);
                am.barrier()?;
                assert_eq!(
                    e.load(Ordering::SeqCst),
                    n as u64,
                    "rank {} left barrier {k} early",
                    am.rank()
                );
            }
            Ok(())
        });
        all_ok(out);
    }
}

/// Reply handler `rep` (id `id`) named by a request.
fn wrong_kind(id: u16) -> FaultKind {
    FaultKind::WrongHandlerKind {
        id,
        name: "rep".into(),
        arrived_as: "request",
    }
}

/// Messages a correct peer never sends are dropped and recorded against their sender,
/// never run by the wrong handler and never returned by the poll that met them; the
/// sender is told of each.
#[test]
fn bad_messages_are_dropped_and_recorded_as_the_senders_faults() {
    struct S {
        ran: Cell<u64>,
    }
    let out = crate::ranks::run(2, &Config::default(), |conduit| -> Result<(), AmError> {
        let mut table = HandlerTable::new();
        let rep = table.reply("rep", |_s: &S, _m| Ok(()));
        let req = table.request("req", |s: &S, _ctx, m| {
            s.ran.set(s.ran.get() + m.arg(0)?);
            Ok(())
        });
        let am = Am::new(conduit, table, S { ran: Cell::new(0) })?;
        if am.rank() == 0 {
            // A peer gone wrong, writing frames with the conduit (the AM and RQ calls
            // refuse them): a handler id nobody registered, a reply handler's id sent
            // as a request, a request without the arg its handler reads; then a good
            // request.
            let raw = |tag: u16, args: &[u64]| {
                let m = Message {
                    tag,
                    args,
                    ..Message::default()
                };
                am.rq()
                    .conduit()
                    .try_send(1, QueueId::AM_REQUEST.index(), &m)
            };
            raw(999, &[])?;
            raw(rep.id(), &[])?;
            raw(req.id(), &[])?;
            am.request(1, req, &[1])?;
            // Each comes back, in order, as the failure of a wait.
            let told = [
                ("", FaultKind::UnknownHandler { id: 999 }),
                ("rep", wrong_kind(rep.id())),
                ("req", FaultKind::MissingArg { index: 0, nargs: 0 }),
            ];
            for (name, reason) in told {
                match am.wait_until(|_| false) {
                    Err(AmError::RequestFailed(f)) => {
                        assert_eq!((f.target, f.name.as_str(), &f.reason), (1, name, &reason))
                    }
                    other => panic!("the failure {reason} came back as {other:?}"),
                }
            }
        } else {
            while am.state().ran.get() == 0 {
                am.poll()?; // never an error: the faults are rank 0's
            }
            let faults = am.faults();
            assert_eq!((faults.of(0), faults.total()), (3, 3));
            let kinds: Vec<_> = faults.recent().map(|f| f.kind.clone()).collect();
            assert_eq!(
                kinds,
                vec![
                    FaultKind::UnknownHandler { id: 999 },
                    wrong_kind(rep.id()),
                    FaultKind::MissingArg { index: 0, nargs: 0 },
                ]
            );
            assert!(faults
                .recent()
                .all(|f| f.source == Some(0) && f.channel == 0));
        }
        am.barrier()
    });
    all_ok(out);
}

/// A bad frame of one peer is not the error of a barrier that happens to poll it: the
/// barrier completes, and the fault is the peer's.
#[test]
fn a_barrier_is_not_failed_by_a_peers_bad_frame() {
    let out = crate::ranks::run(3, &Config::default(), |conduit| -> Result<u64, AmError> {
        let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
        if am.rank() == 2 {
            let m = Message {
                tag: 999,
                ..Message::default()
            };
            am.rq()
                .conduit()
                .try_send(0, QueueId::AM_REQUEST.index(), &m)?;
        }
        am.barrier()?; // rank 0 meets the bad frame in here
        am.barrier()?;
        Ok(am.faults().of(2))
    });
    assert_eq!(all_ok(out), [1, 0, 0]);
}

/// A reply handler's own error ends the barrier call that ran it, and the next
/// `barrier()` finishes that barrier instead of answering `BarrierInProgress`: every
/// rank stays in step (each later barrier still separates the ranks).
#[test]
fn a_barrier_interrupted_by_a_handler_error_can_be_finished() {
    const BARRIERS: u64 = 20;
    let passed = AtomicU64::new(0);
    let out = crate::ranks::run(3, &Config::default(), |conduit| -> Result<u32, AmError> {
        let mut table = HandlerTable::<Cell<Option<ReplyHandler>>>::new();
        let fail = table.reply("fail", |_, _m| {
            Err(AmError::Timeout {
                waited: std::time::Duration::ZERO,
            })
        });
        let ask = table.request("ask", |s, ctx, _m| ctx.reply(s.get().expect("set"), &[]));
        let am = Am::new(conduit, table, Cell::new(Some(fail)))?;
        let interrupted = Cell::new(0);
        let barrier = || loop {
            match am.barrier() {
                Ok(()) => return Ok(()),
                Err(AmError::Timeout { .. }) => interrupted.set(interrupted.get() + 1), // handled: go on
                Err(e) => return Err(e),
            }
        };
        for k in 0..BARRIERS {
            if am.rank() == 0 && k % 3 == 0 {
                am.request(1, ask, &[])?; // its reply fails at rank 0, in a barrier
            }
            barrier()?;
            // Everyone passed barrier k before anyone passes the next one.
            let before = passed.fetch_add(1, Ordering::SeqCst);
            assert!(
                before >= 3 * k,
                "rank {} ran ahead at barrier {k}",
                am.rank()
            );
            barrier()?;
            assert!(passed.load(Ordering::SeqCst) >= 3 * (k + 1));
        }
        Ok(interrupted.get())
    });
    let interrupted = all_ok(out);
    assert_eq!(interrupted[1..], [0, 0]);
    assert!(
        interrupted[0] >= 1,
        "the handler's error reached rank 0's barrier"
    );
}

/// A barrier that needs a rank which has left the job ends with `PeerLeft`, naming a
/// rank that left, instead of waiting forever.
#[test]
fn a_barrier_waiting_on_a_rank_that_left_ends() {
    let out = crate::ranks::run(3, &Config::default(), |conduit| -> Result<(), AmError> {
        let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
        if am.rank() == 0 {
            return Ok(()); // leaves without entering the barrier
        }
        am.barrier()
    })
    .expect("job ran");
    assert_eq!(out[0], Ok(()));
    for r in &out[1..] {
        assert!(
            matches!(r, Err(e) if matches!(e.conduit(), Some(ConduitError::PeerLeft { rank: 0..=2 }))),
            "{r:?}"
        );
    }
}

#[test]
fn handler_table_mismatch_is_reported_on_every_rank() {
    let out = crate::ranks::run(3, &Config::default(), |conduit| {
        let mut table = HandlerTable::<()>::new();
        table.request("a", |_, _, _| Ok(()));
        if amrq::conduit::Conduit::rank(&conduit) == 2 {
            table.request("b", |_, _, _| Ok(()));
        }
        Am::new(conduit, table, ()).map(|_| ())
    })
    .expect("job ran");
    for (rank, r) in out.into_iter().enumerate() {
        match r {
            Err(AmError::HandlerTableMismatch {
                me,
                rank: other,
                my_len,
                their_len,
                ..
            }) => {
                assert_eq!(me, rank);
                assert_eq!(other, if rank == 2 { 0 } else { 2 });
                assert_eq!((my_len, their_len), if rank == 2 { (2, 1) } else { (1, 2) });
            }
            other => panic!("rank {rank}: expected a mismatch, got {other:?}"),
        }
    }
}

#[test]
fn bad_rank_and_too_many_args_are_typed_errors() {
    let out = crate::ranks::run(2, &Config::default(), |conduit| -> Result<(), AmError> {
        let mut table = HandlerTable::<()>::new();
        let h = table.request("h", |_, _, _| Ok(()));
        let am = Am::new(conduit, table, ())?;
        assert_eq!(
            am.request(2, h, &[]).unwrap_err().conduit(),
            Some(&ConduitError::NoSuchRank { rank: 2, size: 2 })
        );
        assert_eq!(
            am.request(0, h, &[0; 9]).unwrap_err().conduit(),
            Some(&ConduitError::TooManyArgs { nargs: 9, max: 8 })
        );
        am.request(0, h, &[0; 8])?; // 8 args is a Short request
        am.barrier()
    });
    all_ok(out);
}

#[test]
fn a_panicking_rank_ends_the_others_waits_with_peer_dead() {
    let out = crate::ranks::run(2, &Config::default(), |conduit| -> Result<(), AmError> {
        let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
        if am.rank() == 1 {
            panic!("rank 1 fails on purpose");
        }
        // Rank 0 waits for something rank 1 will never send.
        let e = am.wait_until(|_| false).unwrap_err();
        assert_eq!(
            e.conduit(),
            Some(&ConduitError::PeerDead {
                rank: 1,
                cause: "rank 1 fails on purpose".into()
            })
        );
        Ok(())
    });
    match out {
        Err(message) => assert_eq!(message, "rank 1 panicked: rank 1 fails on purpose"),
        other => panic!("expected rank 1's panic, got {other:?}"),
    }
}

#[path = "common/long.rs"]
mod common_long;

#[test]
fn long_requests_and_replies_land_in_the_segment() {
    let cfg = {
        let mut c = Config::new();
        c.segment_bytes.set(4 << 20);
        c
    };
    let out = crate::ranks::run(2, &cfg, common_long::long_round_trips);
    all_ok(out);
}

#[path = "common/left.rs"]
mod common_left;

#[test]
fn a_rank_that_left_is_reported_not_waited_for() {
    let out = crate::ranks::run(2, &Config::default(), common_left::left_rank);
    all_ok(out);
}

#[path = "common/cpu.rs"]
mod cpu;
use cpu::thread_cpu;

#[test]
fn a_blocking_wait_sleeps_until_a_message_arrives() {
    const ROUNDS: u64 = 20;
    let out = crate::ranks::run(2, &Config::default(), |conduit| -> Result<_, AmError> {
        let mut table = HandlerTable::new();
        let bump = table.request("bump", |s: &Cell<u64>, _ctx, m| {
            s.set(m.arg(0)?);
            Ok(())
        });
        let am = Am::new(conduit, table, Cell::new(0))?;
        // Both clocks start as the barrier lets the ranks go, so the waiting rank's
        // clock cannot start after the sender's first sleep has begun by more than a
        // wake-up.
        am.barrier()?;
        let (wall, cpu) = (std::time::Instant::now(), thread_cpu());
        for k in 1..=ROUNDS {
            if am.rank() == 0 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                am.request(1, bump, &[k])?;
            } else {
                am.wait_until(|s| s.get() == k)?;
            }
        }
        am.barrier()?;
        Ok((wall.elapsed(), thread_cpu() - cpu))
    });
    let (wall, cpu) = all_ok(out)[1];
    // The sender slept 20 ms before each message; one round of slack covers the
    // waiting rank leaving the barrier late.
    assert!(
        wall >= std::time::Duration::from_millis(20 * (ROUNDS - 1)),
        "the waiting rank saw {ROUNDS} messages sent 20 ms apart in {wall:?}"
    );
    // Spinning through the waits would use all of `wall`; sleeping uses the bounded
    // spin before each sleep and a look per backstop wake-up.
    assert!(
        cpu * 4 < wall,
        "the waiting rank used {cpu:?} of CPU in {wall:?}"
    );
}

#[test]
fn split_phase_barrier_completes_only_after_every_rank_entered() {
    use std::sync::atomic::AtomicBool;
    for n in 1..=8 {
        let entered: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
        let out = crate::ranks::run(n, &Config::default(), |conduit| -> Result<u64, AmError> {
            let am = Am::new(conduit, HandlerTable::<()>::new(), ())?;
            let me = am.rank();
            assert!(matches!(am.barrier_wait(), Err(AmError::NoBarrier)));
            let mut tries = 0;
            for round in 0..20 {
                // One late rank per round: nobody may leave before it enters.
                if me == round % n {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                entered[me].store(true, Ordering::SeqCst);
                am.barrier_notify()?;
                assert!(matches!(
                    am.barrier_notify(),
                    Err(AmError::BarrierInProgress)
                ));
                while !am.barrier_try()? {
                    tries += 1;
                }
                assert!(
                    entered.iter().all(|e| e.load(Ordering::SeqCst)),
                    "left round {round} before every rank entered"
                );
                am.barrier()?; // everyone has checked before the flags are cleared
                entered[me].store(false, Ordering::SeqCst);
                am.barrier()?;
            }
            Ok(tries)
        });
        let tries: u64 = all_ok(out).iter().sum();
        assert!(n == 1 || tries > 0, "{n} ranks: barrier_try never said no");
    }
}
