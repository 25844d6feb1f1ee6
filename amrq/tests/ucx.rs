//! The UCX conduit beyond the conformance suite: that the transport asked for is the
//! one UCX really uses (read from UCX's own description of the endpoint), and that a
//! get from a target that is computing completes once the target calls amrq again.
//! Each test says it was skipped where UCX is not installed.

#![cfg(not(amrq_loom))]

use amrq::conduit::ucx::{self, UcxConduit};
use amrq::conduit::{ChannelSpec, Conduit, ConduitSpec, Started};
use std::time::{Duration, Instant};

#[path = "common/ucx.rs"]
mod common_ucx;

fn job(ranks: usize) -> Option<Vec<UcxConduit>> {
    let settings = common_ucx::loopback_or_skip("this UCX test")?;
    let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    Some(ucx::threads(ranks, &spec, &settings).expect("a UCX job over tcp"))
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
        a.barrier().expect("barrier"); // the endpoints are wired up by now
        let info = a.endpoint_info(1).expect("an endpoint to rank 1");
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
