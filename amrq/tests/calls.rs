//! Calls with typed answers, many in flight: awaited under three executors (a bare
//! `block_on` that parks its thread until woken, tokio's current-thread runtime and
//! smol), thousands in flight to every rank with every answer checked once, dropped
//! before or after their answers (slots freed, nothing reported, later calls right), a
//! target that left, and typed requests whose words a peer got wrong.

#![cfg(not(amrq_loom))]

use amrq::am::{Call, Words};
use amrq::prelude::*;
use std::cell::Cell;

/// The test's handlers: an answer that names its args, and a counter.
struct Table {
    tagged: Call<(u32, u64), (u64, u64)>,
    bump: Call<(), u64>,
}

fn table() -> (HandlerTable<Cell<f64>>, Table) {
    let mut t = HandlerTable::new();
    let offset = [7u64; 3]; // captured by value
    let tagged = t.call("tagged", move |_s: &Cell<f64>, ctx, (i, x): (u32, u64)| {
        Ok((u64::from(i) + offset[2], x ^ ctx.source() as u64))
    });
    let bump = t.call("bump", |s: &Cell<f64>, _ctx, (): ()| {
        s.set(s.get() + 1.0);
        Ok(s.get() as u64)
    });
    (t, Table { tagged, bump })
}

/// `n` calls from every rank to every rank, `window` in flight at once per rank,
/// awaited by `run` (a block_on of some executor); every answer checked against its
/// args.
fn many_in_flight(
    executor: &'static str,
    n: u32,
    window: usize,
    run: impl Fn(
            std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), AmError>> + '_>>,
        ) -> Result<(), AmError>
        + Sync,
) {
    let out = Config::new().threads(3, |setup| -> amrq::Result<()> {
        let (t, h) = table();
        let am = setup.start(t, Cell::new(0.0))?;
        let me = am.rank() as u64;
        run(Box::pin(async {
            let mut pending = std::collections::VecDeque::new();
            for i in 0..n {
                let dest = i as usize % am.size();
                pending.push_back((i, dest, am.call(dest, h.tagged, (i, i as u64 * 3))?));
                if pending.len() == window {
                    let (i, dest, p) = pending.pop_front().unwrap();
                    assert_eq!(p.target(), dest);
                    assert_eq!(
                        p.await?,
                        (u64::from(i) + 7, (i as u64 * 3) ^ me),
                        "{executor}"
                    );
                }
            }
            for (i, _, p) in pending {
                assert_eq!(
                    p.await?,
                    (u64::from(i) + 7, (i as u64 * 3) ^ me),
                    "{executor}"
                );
            }
            Ok(())
        }))?;
        assert_eq!(am.calls_in_flight(), 0);
        am.barrier()
    });
    assert!(out.is_ok(), "{executor}: {}", out.unwrap_err().chain());
}

#[test]
fn awaited_under_a_bare_block_on() {
    // pollster parks its thread until the future wakes it: a Pending that did not wake
    // itself would hang here.
    many_in_flight("pollster", 3000, 64, |f| pollster::block_on(f));
}

#[test]
fn awaited_under_tokio_current_thread() {
    let rt = || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime")
    };
    many_in_flight("tokio", 3000, 64, |f| rt().block_on(f));
}

#[test]
fn awaited_under_smol() {
    many_in_flight("smol", 3000, 64, |f| smol::block_on(f));
}

#[test]
fn thousands_in_flight_at_once_then_waited() {
    many_in_flight("wait", 5000, 5000, |f| futures_lite::future::block_on(f));
}

#[test]
fn tasks_of_one_executor_await_calls_together() {
    let out = Config::new().threads(2, |setup| -> amrq::Result<()> {
        let (t, h) = table();
        let am = setup.start(t, Cell::new(0.0))?;
        let peer = 1 - am.rank();
        let ex = smol::LocalExecutor::new();
        let tasks: Vec<_> = (0..50u32)
            .map(|i| {
                let am = &am;
                ex.spawn(async move {
                    let mut sum = 0;
                    for j in 0..20u64 {
                        sum += am.call(peer, h.tagged, (i, j))?.await?.1 ^ am.rank() as u64;
                    }
                    Ok::<_, AmError>(sum)
                })
            })
            .collect();
        let sums = smol::block_on(ex.run(async {
            let mut sums = Vec::new();
            for t in tasks {
                sums.push(t.await?);
            }
            Ok::<_, AmError>(sums)
        }))?;
        assert_eq!(sums, [190; 50]);
        am.barrier()
    });
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}

#[test]
fn dropped_calls_still_run_and_free_their_slots() {
    let out = Config::new().threads(2, |setup| -> amrq::Result<()> {
        let (t, h) = table();
        let am = setup.start(t, Cell::new(0.0))?;
        let peer = 1 - am.rank();
        // Dropped before their answers: the handlers run, the answers are discarded.
        for _ in 0..1000 {
            drop(am.call(peer, h.bump, ())?);
        }
        // Dropped after: answered, then discarded on drop.
        let answered = am.call(peer, h.bump, ())?;
        while !answered.is_ready() {
            am.poll()?;
        }
        drop(answered);
        let last = am.call(peer, h.bump, ())?.wait()?;
        assert_eq!(last, 1002, "every dropped call ran, in order");
        am.wait_until(|_| am.calls_in_flight() == 0)?;
        // The slots are reused: a thousand more do not grow the table past a window.
        for _ in 0..1000 {
            am.call(peer, h.bump, ())?.wait()?;
        }
        assert_eq!(am.calls_in_flight(), 0);
        am.barrier()?;
        assert_eq!(am.faults().total(), 0, "a dropped call is no fault");
        Ok(())
    });
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}

#[test]
fn typed_requests_and_words_a_peer_got_wrong() {
    use amrq::conduit::FaultKind;
    let out = Config::new().threads(2, |setup| -> amrq::Result<()> {
        let mut t = HandlerTable::new();
        // Rank 0 types `add` as raw words (the names match, so the tables do): what a
        // peer built from other sources could send to rank 1's typed handler.
        let raw = match setup.rank() {
            0 => Some(t.handler("add", |_s: &Cell<f64>, _ctx, _w: Words| Ok(()))),
            _ => {
                t.handler(
                    "add",
                    |s: &Cell<f64>, _ctx, (n, x, neg): (i32, f64, bool)| {
                        let v = f64::from(n) * x;
                        s.set(s.get() + if neg { -v } else { v });
                        Ok(())
                    },
                );
                None
            }
        };
        let am = setup.start(t, Cell::new(0.0))?;
        if let Some(raw) = raw {
            let words = |w: &[u64]| Words::new(w).expect("at most 7");
            let cases = [
                (
                    words(&[5, 1f64.to_bits(), 2]),
                    FaultKind::BadArg { index: 2 },
                ),
                (words(&[5]), FaultKind::MissingArg { index: 1, nargs: 1 }),
                (words(&[1 << 40, 0, 0]), FaultKind::BadArg { index: 0 }),
            ];
            for (w, reason) in cases {
                am.send(1, raw, w)?;
                let Err(AmError::RequestFailed(f)) = am.wait_until(|_| false) else {
                    panic!("{w:?} must fail at rank 1");
                };
                assert_eq!((f.name.as_str(), &f.reason), ("add", &reason));
            }
            am.send(1, raw, words(&[(-4i64) as u64, 0.5f64.to_bits(), 1]))?;
        } else {
            am.wait_until(|s| s.get() == 2.0)?; // -(-4 · 0.5)
            assert_eq!(am.faults().of(0), 3);
        }
        am.barrier()
    });
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}

#[test]
fn a_target_that_left_ends_the_wait() {
    let out = Config::new().threads(2, |setup| -> amrq::Result<()> {
        let mut t = HandlerTable::new();
        // Never answers in time: rank 1 returns without polling for it.
        let slow = t.call("slow", |_s: &(), _ctx, (): ()| Ok(1u8));
        let am = setup.start(t, ())?;
        if am.rank() == 0 {
            am.barrier()?;
            let e = am.call(1, slow, ())?.wait();
            let left = matches!(
                e.as_ref().err().and_then(AmError::conduit),
                Some(amrq::conduit::ConduitError::PeerLeft { rank: 1 })
            );
            assert!(left || e == Ok(1), "{e:?}");
        } else {
            am.barrier()?;
        }
        Ok(())
    });
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}

#[test]
fn a_pending_used_after_it_completed_panics_and_takes_nothing() {
    let out = Config::new().threads(1, |setup| -> amrq::Result<()> {
        let mut t = HandlerTable::new();
        let id = t.call("id", |_s: &(), _ctx, x: u64| Ok(x));
        let am = setup.start(t, ())?;
        let mut p = am.call(0, id, 1)?;
        assert_eq!(pollster::block_on(&mut p)?, 1);
        let later = am.call(0, id, 2)?; // may reuse the slot p had
        let used = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.is_ready()));
        assert!(
            used.is_err(),
            "a completed Pending must not look at another call"
        );
        drop(p);
        assert_eq!(later.wait()?, 2, "the later call's answer is its own");
        assert_eq!(am.calls_in_flight(), 0);
        Ok(())
    });
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}

#[test]
fn one_name_registered_as_a_call_and_as_a_request_is_a_table_mismatch() {
    let out = Config::new().threads(2, |setup| -> amrq::Result<()> {
        let mut t = HandlerTable::<()>::new();
        match setup.rank() {
            0 => drop(t.call("x", |_s, _ctx, (): ()| Ok(0u8))),
            _ => drop(t.handler("x", |_s, _ctx, (): ()| Ok(()))),
        }
        match setup.start(t, ()) {
            Err(amrq::Error::Am(AmError::HandlerTableMismatch { .. })) => Ok(()),
            other => panic!("{other:?}"),
        }
    });
    assert!(out.is_ok(), "{}", out.unwrap_err().chain());
}
