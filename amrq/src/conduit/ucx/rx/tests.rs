use super::super::test_ranks::{leave, ranks};
use super::super::UcxConduit;
use super::{Kind, TAG_ON_FREED};

/// Two ranks, one channel of 64 slots.
fn two_ranks() -> Option<Vec<UcxConduit>> {
    ranks(2, &[64])
}

#[test]
fn an_unsent_tag_on_credit_goes_again_and_blocks_freed_meanwhile_count() {
    let Some(eps) = two_ranks() else { return };
    let mut local = eps[0].shared.local();
    // Three Tag-On frames from rank 1 on channel 0 (ring key 0 × 2 + 1), their
    // blocks already free: a credit of 3 blocks in all...
    for _ in 0..3 {
        local.pushed(1, Kind::TagOn, 0, 16);
    }
    let due = local.credits_due(|_| true);
    let first = *due.iter().find(|d| d.what == TAG_ON_FREED).unwrap();
    assert_eq!((first.peer, first.value), (1, 3));
    // ... that cannot be sent now; meanwhile a fourth frame comes (the progress
    // thread's callback can push one between the booking and the failed send).
    local.pushed(1, Kind::TagOn, 0, 16);
    local.unsent(&first);
    let due = local.credits_due(|_| true);
    let sent = |d: &&super::Due| d.what == TAG_ON_FREED && d.peer == 1;
    assert_eq!(
        due.iter().filter(sent).map(|d| d.value).max(),
        Some(4),
        "{due:?}"
    );
    assert_eq!(local.tag_on_out_total, 0);
    drop(local);
    leave(eps);
}

/// A credit to a peer this rank never connected to waits until the peer asks.
#[test]
fn a_credit_to_a_peer_not_connected_waits_until_it_asks() {
    let Some(eps) = two_ranks() else { return };
    let mut local = eps[0].shared.local();
    for _ in 0..3 {
        local.pushed(1, Kind::TagOn, 0, 16);
    }
    assert!(local.credits_due(|_| false).is_empty(), "not asked");
    local.want(1, TAG_ON_FREED);
    let due = local.credits_due(|_| false);
    let got: Vec<_> = due.iter().map(|d| (d.peer, d.what, d.value)).collect();
    assert_eq!(got, [(1, TAG_ON_FREED, 3)]);
    assert!(
        local.credits_due(|_| false).is_empty(),
        "asked once, sent once"
    );
    drop(local);
    leave(eps);
}

/// A peer that asked for room before its frames were consumed gets that credit
/// once they are, even if another credit went to it meanwhile: it does not ask
/// twice for the same room (a stall of a rank whose queues a progress thread
/// drains, its senders not connected to).
#[test]
fn an_ask_is_answered_once_the_frames_are_consumed() {
    use crate::conduit::{Conduit, ConduitError, Message};
    let Some(eps) = ranks(2, &[64, 4]) else {
        return;
    };
    let m = Message::default();
    for ch in [0, 1] {
        eps[1].try_send(0, ch, &m).unwrap();
    }
    let took = |ch| {
        let since = std::time::Instant::now();
        while since.elapsed() < std::time::Duration::from_secs(20) {
            eps[1].progress_now();
            if eps[0].drain(ch, 1, |_| Ok::<(), ConduitError>(())).unwrap() == 1 {
                return;
            }
        }
        panic!("rank 1's frame on channel {ch} never came");
    };
    // Channel 1's frame is consumed (a credit due: a quarter of its ring); channel
    // 0's is not when rank 1 asks for channel 0's room.
    took(1);
    let mut local = eps[0].shared.local();
    local.want(1, 0);
    let due = local.credits_due(|_| false);
    assert_eq!(due.iter().map(|d| d.what).collect::<Vec<_>>(), [1]);
    drop(local);
    took(0);
    let due = eps[0].shared.local().credits_due(|_| false);
    let got: Vec<_> = due.iter().map(|d| (d.peer, d.what)).collect();
    assert_eq!(
        got,
        [(1, 0)],
        "the room asked for is returned once it is free"
    );
    leave(eps);
}

/// Whatever bytes a peer sends as a batch, the receiver records faults and never
/// panics, and a real frame sent after them still arrives.
#[test]
fn any_bytes_unpacked_as_a_batch_leave_the_rank_working() {
    use crate::conduit::{Conduit, ConduitError, Message, ReceivedFrame};
    use proptest::prelude::*;
    let Some(eps) = two_ranks() else { return };
    let mut runner = proptest::test_runner::TestRunner::default();
    let bytes = proptest::collection::vec(any::<u8>(), 0..400);
    let header = prop_oneof![Just(0u64), Just(1), any::<u64>()];
    runner
        .run(&(header, bytes), |(source, data)| {
            eps[1].shared.on_batch(&source.to_le_bytes(), &data, false);
            eps[1].shared.on_batch(&data, &data, false); // any header too
            Ok(())
        })
        .unwrap();
    assert!(eps[1].faults().total() > 0, "garbage is recorded as faults");
    // Whatever the garbage put in rank 1's queues, rank 0's frame comes after it.
    let m = Message {
        tag: 0xbeef,
        args: &[42],
        ..Message::default()
    };
    eps[0].try_send(1, 0, &m).unwrap();
    let since = std::time::Instant::now();
    let mut found = false;
    while !found && since.elapsed() < std::time::Duration::from_secs(20) {
        eps[0].progress_now(); // sends its batch, and UCX moves it on
        eps[1]
            .drain(0, 64, |f| {
                found |= f.source() == 0 && f.tag() == 0xbeef && f.args() == [42];
                Ok::<(), ConduitError>(())
            })
            .unwrap();
    }
    assert!(found, "the real frame arrived");
    leave(eps);
}
