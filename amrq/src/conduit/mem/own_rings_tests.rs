//! Own rings ([`PairRings`]): senders share a ring per receiver until they have sent
//! enough to move to one of their own; frames stay in order across the move, each
//! arrives once, the own rings go to the first senders that ask, and a receiver reads
//! an own ring only for the sender its directory names.

use super::channels::{RxRing, FLAG_MOVED};
use super::*;
use crate::conduit::ring::{FrameHeader, SharedProducer, MAX_ARGS};
use crate::conduit::{
    threads, ChannelSpec, Conduit, ConduitError, ConduitSpec, FaultKind, Message, PairRings,
    ReceivedFrame,
};

/// Channel 0 per sender (64 slots), channel 1 shared; Tag-On blocks of 256 bytes, as
/// many per pool as five senders sharing one send at once.
fn spec(own: usize) -> ConduitSpec {
    ConduitSpec {
        pair_rings: PairRings::Own(own),
        tag_on_buffers: 5,
        tag_on_bytes: 256,
        segment_bytes: 4096,
        ..ConduitSpec::new(vec![
            ChannelSpec::new(64),
            ChannelSpec::new(64).shared(true),
        ])
    }
}

/// Frame `i` of `src`: args `[src, i, …]` (2 to 8 of them), a payload of a few bytes
/// on every third, a Tag-On block on every seventh.
fn send(ep: &MemConduit, dest: usize, src: usize, i: u64) -> Result<(), ConduitError> {
    let mut args = [src as u64, i, 0, 0, 0, 0, 0, 0];
    let n = 2 + (i as usize % (MAX_ARGS - 1));
    for (k, a) in args.iter_mut().enumerate().skip(2) {
        *a = i * 10 + k as u64;
    }
    let payload = vec![(i % 251) as u8; (i % 40) as usize];
    let msg = Message {
        tag: 9,
        flags: 0,
        args: &args[..n],
        payload: if i.is_multiple_of(3) { &payload } else { &[] },
    };
    match i % 7 {
        0 => ep.try_send_tag_on(
            dest,
            0,
            &Message {
                payload: &payload,
                ..msg
            },
        ),
        _ => ep.try_send(dest, 0, &msg),
    }
}

/// Checks frame `f` as `send` made it, against the next index expected of its sender.
fn check(f: &MemFrame<'_>, next: &mut [u64]) {
    let (src, i) = (f.args()[0] as usize, f.args()[1]);
    assert_eq!(f.source(), src, "the frame's sender is the one it names");
    assert_eq!(i, next[src], "frames of sender {src} in order, each once");
    next[src] += 1;
    assert_eq!(f.args().len(), 2 + (i as usize % (MAX_ARGS - 1)));
    let want = if i.is_multiple_of(3) || i.is_multiple_of(7) {
        (i % 40) as usize
    } else {
        0
    };
    let p = f.payload().to_vec();
    assert!(
        p.len() == want && p.iter().all(|&b| b == (i % 251) as u8),
        "payload of {i}"
    );
}

/// Senders of rank 0 whose own ring it reads.
fn moved(ep: &MemConduit) -> Vec<usize> {
    let mut v: Vec<usize> = ep.rx[0]
        .rings
        .iter()
        .filter(|r| r.own_index.is_some() && r.source.get() != RxRing::NO_SOURCE)
        .map(|r| r.source.get())
        .collect();
    v.sort();
    v
}

#[test]
fn frames_stay_in_order_across_the_move_and_the_first_senders_get_the_own_rings() {
    let eps = threads::endpoints_for(6, &spec(2)).unwrap();
    assert_eq!(eps[0].caps().channels[0].max_args, MAX_ARGS);
    let rounds = 3 * u64::from(PairRings::MOVE_AFTER);
    let mut next = vec![0u64; 6];
    for i in 0..rounds {
        // Rank 1 and 2 first: they reach the count first and take the two own rings.
        for (src, ep) in eps.iter().enumerate().skip(1) {
            send(ep, 0, src, i).unwrap();
        }
        // The receiver's three ways to take frames, in turn.
        let rx = &eps[0];
        match i % 3 {
            0 => {
                let n = rx
                    .drain(0, 100, |f| -> Result<(), ConduitError> {
                        check(f, &mut next);
                        Ok(())
                    })
                    .unwrap();
                assert_eq!(n, 5);
            }
            1 => {
                while let Some(f) = rx.peek(0).unwrap() {
                    check(&f, &mut next);
                    f.release();
                }
            }
            _ => {
                while rx
                    .drain_one(0, |f| -> Result<(), ConduitError> {
                        check(f, &mut next);
                        Ok(())
                    })
                    .unwrap()
                    == 1
                {}
            }
        }
        assert!(next[1..].iter().all(|&n| n == i + 1), "round {i}: {next:?}");
    }
    assert_eq!(moved(&eps[0]), [1, 2]);
    assert_eq!((eps[0].faults().total(), eps[0].dropped(0)), (0, 0));
}

#[test]
fn with_no_own_ring_every_frame_goes_through_the_shared_ring_whole() {
    let eps = threads::endpoints_for(3, &spec(0)).unwrap();
    let caps = &eps[0].caps().channels[0];
    assert_eq!(caps.max_args, MAX_ARGS);
    let data = vec![7u8; caps.max_payload];
    let args = [1, 2, 3, 4, 5, 6, 7, 8];
    let msg = Message {
        tag: 2,
        flags: 0,
        args: &args,
        payload: &data,
    };
    eps[1].try_send(0, 0, &msg).unwrap();
    let f = eps[0].peek(0).unwrap().unwrap();
    assert_eq!((f.source(), f.args()), (1, &args[..]));
    assert!(f.payload().to_vec() == data, "the largest payload, whole");
    f.release();
    let mut next = vec![0u64; 3];
    for i in 0..200 {
        send(&eps[2], 0, 2, i).unwrap();
        let f = eps[0].peek(0).unwrap().unwrap();
        check(&f, &mut next);
        f.release();
    }
    assert!(moved(&eps[0]).is_empty());
}

#[test]
fn senders_racing_for_one_own_ring_deliver_each_frame_once_and_in_order() {
    const FRAMES: u64 = 20_000;
    let ranks = 4;
    let mut eps = threads::endpoints_for(ranks, &spec(1)).unwrap();
    let rx = eps.remove(0);
    let senders: Vec<_> = eps
        .into_iter()
        .enumerate()
        .map(|(i, ep)| {
            std::thread::spawn(move || {
                let src = i + 1;
                for n in 0..FRAMES {
                    while let Err(e) = send(&ep, 0, src, n) {
                        assert!(matches!(e, ConduitError::Busy), "{e}");
                        std::thread::yield_now();
                    }
                }
                ep // kept alive until the receiver is done
            })
        })
        .collect();
    let mut next = vec![0u64; ranks];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while next[1..].iter().any(|&n| n < FRAMES) {
        assert!(std::time::Instant::now() < deadline, "stuck at {next:?}");
        let took = rx
            .drain(0, 64, |f| -> Result<(), ConduitError> {
                check(f, &mut next);
                Ok(())
            })
            .unwrap();
        if took == 0 {
            std::thread::yield_now();
        }
    }
    let eps: Vec<_> = senders.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(rx.peek(0).unwrap().is_none(), "nothing more than was sent");
    assert_eq!(moved(&rx).len(), 1, "one own ring, taken by one sender");
    assert_eq!(rx.faults().total(), 0);
    drop(eps);
}

#[test]
fn a_move_to_an_own_ring_the_sender_did_not_take_is_dropped_and_recorded() {
    let spec = spec(1);
    let eps = threads::endpoints_for(3, &spec).unwrap();
    // Rank 2 writes a marker into rank 0's shared ring by hand, naming own ring 0,
    // which nobody took.
    let shared = eps[0].rx[0]
        .rings
        .iter()
        .find(|r| r.own_claims.is_some())
        .unwrap();
    let tail = eps[2].tx[0].prod.with(|t| match t {
        channels::Tx::Sharing { tail, .. } => *tail,
        _ => unreachable!("rank 2 shares rank 0's ring"),
    });
    let marker = FrameHeader {
        flags: FLAG_MOVED,
        ..FrameHeader::default()
    };
    // SAFETY: the tail word is in the region the endpoints keep alive.
    let pushed =
        SharedProducer::new(0).try_push(&shared.ring, unsafe { &*tail }, marker, &[2, 0], b"");
    assert!(pushed);
    send(&eps[1], 0, 1, 0).unwrap();
    let mut next = vec![0u64; 3];
    let n = eps[0]
        .drain(0, 10, |f| -> Result<(), ConduitError> {
            check(f, &mut next);
            Ok(())
        })
        .unwrap();
    assert_eq!(n, 1, "the real frame, not the forged marker");
    assert!(moved(&eps[0]).is_empty(), "the own ring stays shut");
    let faults = eps[0].faults();
    assert_eq!((faults.of(2), faults.total()), (1, 1));
    assert!(matches!(
        faults.recent().next().unwrap().kind,
        FaultKind::NotPermitted
    ));
}

#[test]
fn a_sender_of_long_frames_alone_moves_to_its_own_ring() {
    let eps = threads::endpoints_for(3, &spec(1)).unwrap();
    let data = [7u8; 64];
    for i in 0..2 * u64::from(PairRings::MOVE_AFTER) {
        let msg = Message {
            tag: 1,
            flags: 0,
            args: &[1, i],
            payload: &data,
        };
        eps[1].try_send_long(0, 0, &msg, 128).unwrap();
        let f = eps[0].peek(0).unwrap().unwrap();
        assert_eq!(
            (f.source(), f.args(), f.payload().len()),
            (1, &[1, i][..], 64)
        );
        f.release();
    }
    assert_eq!(moved(&eps[0]), [1]);
}

#[test]
fn own_rings_on_rings_of_two_slots_refuse_what_they_cannot_carry() {
    // The smallest rings: a frame of one slot, and a shared ring's hidden word in it.
    let spec = ConduitSpec {
        pair_rings: PairRings::Own(0),
        ..ConduitSpec::new(vec![ChannelSpec::new(2)])
    };
    let eps = threads::endpoints_for(3, &spec).unwrap();
    let caps = &eps[0].caps().channels[0];
    assert_eq!(caps.max_payload, 0);
    let big = Message {
        tag: 1,
        flags: 0,
        args: &[],
        payload: &[1],
    };
    assert!(matches!(
        eps[1].try_send(0, 0, &big),
        Err(ConduitError::PayloadTooLarge { .. })
    ));
    let args: Vec<u64> = (0..caps.max_args as u64).collect();
    eps[1]
        .try_send(
            0,
            0,
            &Message {
                tag: 1,
                flags: 0,
                args: &args,
                payload: &[],
            },
        )
        .unwrap();
    let f = eps[0].peek(0).unwrap().unwrap();
    assert_eq!((f.source(), f.args()), (1, &args[..]));
    f.release();
}
