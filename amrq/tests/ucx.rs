//! The UCX conduit beyond the conformance suite: that the transport asked for is the
//! one UCX really uses (read from UCX's own description of the endpoint), and that a
//! get from a target that is computing completes once the target calls amrq again;
//! that small frames travel in batches exactly once and in order, a lone frame leaves
//! at the sender's next poll whatever the deadline, and a batch past its deadline at
//! the next send; that the set-up collectives gather every rank, whatever the number
//! of ranks. Each test says it was skipped where UCX is not installed.

#![cfg(not(amrq_loom))]

use amrq::conduit::ucx::{self, UcxConduit};
use amrq::conduit::{ChannelSpec, Coalescing, Conduit, ConduitSpec, Started};
use std::time::{Duration, Instant};

#[path = "common/ucx.rs"]
mod common_ucx;

fn job(ranks: usize) -> Option<Vec<UcxConduit>> {
    job_coalescing(ranks, Coalescing::default())
}

#[test]
fn the_transport_asked_for_is_the_one_ucx_uses() {
    let Some(eps) = job(2) else { return };
    let info = std::thread::scope(|s| {
        let mut it = eps.into_iter();
        let (a, b) = (it.next().unwrap(), it.next().unwrap());
        let peer = s.spawn(move || {
            b.barrier().expect("barrier");
            b.barrier().expect("barrier");
        });
        // Connects, then both ends set the connection up while they use it.
        let info = a.endpoint_info(1).expect("an endpoint to rank 1");
        a.barrier().expect("barrier");
        a.barrier().expect("barrier");
        peer.join().unwrap();
        info
    });
    eprintln!("UCX's endpoint to rank 1:\n{info}");
    assert!(info.contains("tcp/lo"), "UCX's endpoint to rank 1:\n{info}");
    assert!(
        !info.contains("posix") && !info.contains("sysv") && !info.contains("cma"),
        "{info}"
    );
}

#[test]
fn a_get_from_a_computing_target_completes_when_it_calls_amrq_again() {
    let Some(eps) = job(2) else { return };
    const BUSY: Duration = Duration::from_millis(300);
    std::thread::scope(|s| {
        let mut it = eps.into_iter();
        let (a, b) = (it.next().unwrap(), it.next().unwrap());
        s.spawn(move || {
            let local = b.put_nb(1, 128, &0x5eed_u64.to_le_bytes());
            assert_eq!(local.expect("local put"), Started::Done(0));
            b.barrier().expect("barrier");
            let until = Instant::now() + BUSY; // computing: no amrq call
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            b.barrier().expect("barrier"); // any amrq call progresses the worker
        });
        a.barrier().expect("barrier");
        let mut word = [0u8; 8];
        // SAFETY: `word` outlives the operation, completed below before it is read.
        let got = unsafe { a.get_nb(1, 128, word.as_mut_ptr(), 8) }.expect("get");
        if let Started::InFlight(op) = got {
            let since = Instant::now();
            while a.op_test(op).expect("op_test").is_none() {
                assert!(
                    since.elapsed() < Duration::from_secs(30),
                    "the get never completed"
                );
            }
        }
        assert_eq!(u64::from_le_bytes(word), 0x5eed);
        a.barrier().expect("barrier");
    });
}

/// Credits come back in batches of a quarter ring. Here the receiver of a 16-slot ring
/// has returned 6 of 9 one-slot frames (it consumed 6, then 3), so the sender knows of
/// 13 free slots from position 9; its largest frame (8 slots, half the ring) needs the
/// 7 to the ring's end as pad, and 8 more: it asks for the other 3 (less than a
/// batch), and the frame goes through.
#[test]
fn a_frame_that_needs_credits_short_of_a_batch_is_not_stuck() {
    use amrq::conduit::{ConduitError, Message, ReceivedFrame};
    let Some(settings) = common_ucx::loopback_or_skip("this UCX test") else {
        return;
    };
    let spec = ConduitSpec::new(vec![ChannelSpec::new(16)]);
    let eps = ucx::threads(2, &spec, &settings).expect("a UCX job over tcp");
    let caps = eps[0].caps().channels[0].clone();
    let (big, args) = (vec![7u8; caps.max_payload], vec![3u64; caps.max_args]);
    let big_len = big.len();
    assert_eq!(amrq::conduit::ring::frame_slots(args.len(), big_len), 8);
    std::thread::scope(|s| {
        let mut it = eps.into_iter();
        let (a, b) = (it.next().unwrap(), it.next().unwrap());
        s.spawn(move || {
            b.barrier().expect("barrier"); // the 9 small frames are here
            let mut lens = Vec::new();
            let since = Instant::now();
            for budget in [6, 3, 1] {
                let want = lens.len() + budget;
                while lens.len() < want && since.elapsed() < Duration::from_secs(20) {
                    b.drain(0, want - lens.len(), |f| {
                        lens.push(f.payload().len());
                        Ok::<(), ConduitError>(())
                    })
                    .expect("drain");
                }
            }
            let mut expected = vec![1; 9];
            expected.push(big_len);
            assert_eq!(lens, expected, "every frame, in order");
        });
        let small = Message {
            tag: 1,
            payload: &[1],
            ..Message::default()
        };
        for _ in 0..9 {
            a.try_send(1, 0, &small).expect("a small frame");
        }
        a.barrier().expect("barrier");
        let m = Message {
            tag: 2,
            args: &args,
            payload: &big,
            ..Message::default()
        };
        let since = Instant::now();
        loop {
            match a.try_send(1, 0, &m) {
                Ok(()) => break,
                Err(ConduitError::Busy) => {
                    assert!(since.elapsed() < Duration::from_secs(20), "stuck on Busy");
                    std::thread::yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        }
    });
}

/// A job of `ranks` over UCX with coalescing `how`.
fn job_coalescing(ranks: usize, how: Coalescing) -> Option<Vec<UcxConduit>> {
    let settings = common_ucx::loopback_or_skip("this UCX test")?;
    let spec = ConduitSpec {
        coalescing: how,
        ..ConduitSpec::new(vec![ChannelSpec::new(64)])
    };
    Some(ucx::threads(ranks, &spec, &settings).expect("a UCX job over tcp"))
}

/// The next frame `c` takes from channel 0, polling; fails the test if none comes
/// within 20 s of `since`.
fn next_frame<'a>(
    c: &'a UcxConduit,
    since: Instant,
    what: &str,
) -> amrq::conduit::mem::MemFrame<'a> {
    loop {
        if let Some(f) = c.peek(0).expect("peek") {
            return f;
        }
        assert!(since.elapsed() < Duration::from_secs(20), "no {what}");
    }
}

/// Rank 0 streams `n` two-arg frames (sequence number, its square) to rank 1, which
/// checks each arrives once and in order; returns rank 0's coalescing counts.
fn stream(how: Coalescing, n: u64) -> Option<ucx::Coalesced> {
    use amrq::conduit::{ConduitError, Message, ReceivedFrame};
    let mut eps = job_coalescing(2, how)?.into_iter();
    let (a, b) = (eps.next()?, eps.next()?);
    let receiver = std::thread::spawn(move || {
        let (mut next, since) = (0u64, Instant::now());
        while next < n {
            assert!(since.elapsed() < Duration::from_secs(60), "stuck at {next}");
            b.drain(0, 64, |f| {
                assert_eq!(f.args(), [next, next.wrapping_mul(next)], "frame {next}");
                next += 1;
                Ok::<(), ConduitError>(())
            })
            .expect("drain");
        }
        b.barrier().expect("barrier");
    });
    let since = Instant::now();
    for i in 0..n {
        let m = Message {
            tag: 1,
            args: &[i, i.wrapping_mul(i)],
            ..Message::default()
        };
        while let Err(e) = a.try_send(1, 0, &m) {
            assert_eq!(e, ConduitError::Busy);
            assert!(since.elapsed() < Duration::from_secs(60), "stuck on Busy");
        }
    }
    a.barrier().expect("barrier");
    let counts = a.coalesced();
    drop(a);
    receiver.join().expect("the receiver checked every frame");
    Some(counts)
}

#[test]
fn small_frames_travel_in_batches_exactly_once_in_order() {
    let n = 20_000;
    let Some(on) = stream(Coalescing::default(), n) else {
        return;
    };
    assert_eq!((on.frames, on.waiting), (n, 0), "{on:?}");
    assert!(on.batches * 8 <= n, "at least 8 frames a batch: {on:?}");
    let alone = Coalescing {
        bytes: 0,
        ..Coalescing::default()
    };
    let off = stream(alone, n).expect("UCX is here");
    assert_eq!(off, ucx::Coalesced::default(), "every frame alone");
}

#[test]
fn a_lone_frame_leaves_at_the_next_poll_whatever_the_deadline() {
    use amrq::conduit::{Message, ReceivedFrame};
    let hour = Coalescing {
        wait: Duration::from_secs(3600),
        ..Coalescing::default()
    };
    let Some(eps) = job_coalescing(2, hour) else {
        return;
    };
    let mut eps = eps.into_iter();
    let (a, b) = (eps.next().unwrap(), eps.next().unwrap());
    let m = |tag| Message {
        tag,
        args: &[7],
        ..Message::default()
    };
    let since = Instant::now();
    let server = std::thread::spawn(move || {
        // Serves one request; its reply waits in a batch until the next poll.
        let f = next_frame(&b, since, "request");
        assert_eq!(f.tag(), 1);
        f.release();
        b.try_send(0, 0, &m(2)).expect("the reply");
        while !b.peer_left(0) {} // polls until rank 0 leaves
    });
    a.try_send(1, 0, &m(1)).expect("the request");
    assert_eq!(a.coalesced().waiting, 1, "in a batch until a poll");
    let reply = next_frame(&a, since, "reply");
    assert_eq!(reply.tag(), 2);
    reply.release();
    drop(a);
    server.join().expect("the server");
}

#[test]
fn a_batch_past_its_deadline_leaves_at_the_next_send() {
    use amrq::conduit::Message;
    let ms = Coalescing {
        wait: Duration::from_millis(2),
        ..Coalescing::default()
    };
    let Some(eps) = job_coalescing(3, ms) else {
        return;
    };
    let m = Message {
        tag: 1,
        args: &[7],
        ..Message::default()
    };
    eps[0].try_send(1, 0, &m).expect("to rank 1");
    eps[0].try_send(2, 0, &m).expect("to rank 2"); // finds rank 1's batch waiting
    std::thread::sleep(Duration::from_millis(5)); // computing, no amrq call
    eps[0].try_send(2, 0, &m).expect("to rank 2");
    let c = eps[0].coalesced();
    assert_eq!(
        (c.batches, c.frames, c.waiting),
        (1, 1, 2),
        "rank 1's batch left, rank 2's waits: {c:?}"
    );
    // Each leaves on its own thread (a leaving rank waits for the others' goodbyes).
    let leaving: Vec<_> = eps
        .into_iter()
        .map(|e| std::thread::spawn(move || drop(e)))
        .collect();
    leaving.into_iter().for_each(|t| t.join().expect("left"));
}

/// A burst of 64 KiB puts far past what the network takes at once (10 MiB, so that the
/// later puts go through the wait at the copies' 4 MiB limit while the target
/// progresses): each put's buffer is overwritten as soon as the put returns, and every
/// put lands intact.
#[test]
fn a_burst_of_large_puts_lands_intact_past_the_copies_limit() {
    const PUTS: usize = 160; // 10 MiB: past the 4 MiB of copies a rank holds
    const BYTES: usize = 64 << 10;
    let Some(settings) = common_ucx::loopback_or_skip("this UCX test") else {
        return;
    };
    let spec = ConduitSpec {
        segment_bytes: PUTS * BYTES,
        ..ConduitSpec::new(vec![ChannelSpec::new(64)])
    };
    let eps = ucx::threads(2, &spec, &settings).expect("a UCX job over tcp");
    let fill = |i: usize| {
        (0..BYTES)
            .map(|b| (i * 31 + b / 7) as u8)
            .collect::<Vec<u8>>()
    };
    std::thread::scope(|s| {
        let mut it = eps.into_iter();
        let (a, b) = (it.next().unwrap(), it.next().unwrap());
        s.spawn(move || {
            b.barrier().expect("barrier"); // serves the puts meanwhile
            let mut got = vec![0u8; BYTES];
            for i in 0..PUTS {
                // SAFETY: `got` outlives the get, which is local (complete at once).
                let local = unsafe { b.get_nb(1, i * BYTES, got.as_mut_ptr(), BYTES) };
                assert_eq!(local.expect("local get"), Started::Done(0));
                assert!(got == fill(i), "put {i} did not land intact");
            }
            b.barrier().expect("barrier");
        });
        let mut buf = vec![0u8; BYTES];
        let mut tokens = Vec::new();
        for i in 0..PUTS {
            buf.copy_from_slice(&fill(i));
            match a.put_nb(1, i * BYTES, &buf).expect("put") {
                Started::InFlight(t) => tokens.push(t),
                Started::Done(_) => {}
            }
            buf.fill(0xee); // the data was taken
        }
        let since = Instant::now();
        for t in tokens {
            while a.op_test(t).expect("op_test").is_none() {
                assert!(
                    since.elapsed() < Duration::from_secs(60),
                    "a put never completed"
                );
            }
        }
        a.barrier().expect("barrier");
        a.barrier().expect("barrier");
    });
}

#[test]
fn set_up_collectives_gather_every_rank_over_the_tree_alone() {
    use amrq::util::heap_tree::{children_of, parent_of};
    // One rank, a root with some children, with all 8, and a grandchild.
    for ranks in [1, 4, 9, 10] {
        let Some(eps) = job(ranks) else { return };
        // Each rank on its own thread, which it returns from.
        let ranks_back: Vec<_> = eps
            .into_iter()
            .map(|ep| {
                std::thread::spawn(move || {
                    let (me, n) = (ep.rank(), ep.size());
                    let mine = 100 + me as u64;
                    let first = ep.allgather(mine).unwrap();
                    // Only its parent and children were talked to, in a few datagrams each:
                    // no connection made.
                    let near =
                        |p: usize| parent_of(me) == Some(p) || children_of(me, n).any(|c| c == p);
                    for p in (0..n).filter(|&p| p != me) {
                        assert_eq!(ep.contacted(p), near(p), "rank {me} and rank {p} of {n}");
                        assert!(!ep.connected(p), "rank {me} connected to rank {p} of {n}");
                    }
                    ep.barrier().unwrap();
                    // A second epoch right after: its rounds are not the first's.
                    let second = ep.allgather(mine * 2).unwrap();
                    assert_eq!(second, first.iter().map(|v| v * 2).collect::<Vec<_>>());
                    (ep, first)
                })
            })
            .collect();
        let (eps, got): (Vec<_>, Vec<_>) =
            ranks_back.into_iter().map(|t| t.join().unwrap()).unzip();
        let want: Vec<u64> = (0..ranks as u64).map(|r| 100 + r).collect();
        assert!(got.iter().all(|g| *g == want), "{ranks} ranks: {got:?}");
        std::thread::scope(|s| {
            for e in eps {
                s.spawn(move || drop(e));
            }
        });
    }
}
