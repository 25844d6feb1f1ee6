use super::super::test_ranks::leave;
use super::super::UcxConduit;
use super::{ACK_WITHIN, FIRST_MESSAGES, NUMBER_BYTES, PREFIX, TRIES};
use crate::conduit::{Conduit, ConduitError, FaultKind, Message, ReceivedFrame};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// `n` ranks, one channel of 64 slots.
fn ranks(n: usize) -> Option<Vec<UcxConduit>> {
    super::super::test_ranks::ranks(n, &[64])
}

/// Rank `from` sends frame `i` to rank `to`, progressing every rank while there is no
/// room, and then once (a lone frame leaves at the next poll).
fn send(eps: &[UcxConduit], from: usize, to: usize, i: u64) {
    let m = Message {
        tag: 7,
        args: &[i],
        ..Message::default()
    };
    loop {
        match eps[from].try_send(to, 0, &m) {
            Ok(()) => break,
            Err(ConduitError::Busy) => eps.iter().for_each(|e| e.progress_now()),
            Err(e) => panic!("rank {from} to {to}: {e}"),
        }
    }
    eps[from].progress_now();
}

/// What rank `at` takes until it has `n` frames (every rank progressing meanwhile).
fn take(eps: &[UcxConduit], at: usize, n: usize) -> Vec<u64> {
    let mut got = Vec::new();
    let since = Instant::now();
    while got.len() < n {
        assert!(since.elapsed() < Duration::from_secs(20), "took {got:?}");
        eps.iter().for_each(|e| e.progress_now());
        if let Some(f) = eps[at].peek(0).unwrap() {
            got.push(f.args()[0]);
            f.release();
        }
    }
    got
}

/// Rank `at` takes no frame while every rank progresses a hundred times.
fn takes_nothing_more(eps: &[UcxConduit], at: usize, why: &str) {
    for _ in 0..100 {
        eps.iter().for_each(|e| e.progress_now());
        assert!(eps[at].peek(0).unwrap().is_none(), "{why}");
    }
}

/// Rank `at` recorded no fault.
fn assert_no_fault(eps: &[UcxConduit], at: usize, why: &str) {
    assert!(eps[at].faults().recent().next().is_none(), "{why}");
}

/// The next datagram waiting at rank `at`'s socket, taken from it before the rank
/// looks: lost, as far as the rank knows.
fn steal(eps: &[UcxConduit], at: usize) -> Vec<u8> {
    let d = eps[at].net.datagrams().expect("datagrams");
    let mut buf = vec![0u8; 4096];
    let since = Instant::now();
    loop {
        if let Ok(n) = d.sock.recv(&mut buf) {
            return buf[..n].to_vec();
        }
        assert!(since.elapsed() < Duration::from_secs(5), "no datagram came");
    }
}

#[test]
fn a_few_messages_make_no_connection_and_arrive_once_in_order() {
    let Some(eps) = ranks(3) else { return };
    for i in 0..10 {
        send(&eps, 0, 1, i);
    }
    assert_eq!(take(&eps, 1, 10), (0..10).collect::<Vec<_>>());
    assert!(eps[0].contacted(1) && !eps[0].connected(1));
    assert!(!eps[0].contacted(2), "rank 2 was never talked to");
    // Acknowledged: nothing waits, nothing is owed.
    let since = Instant::now();
    while eps[0].net.datagrams().unwrap().waiting() {
        eps.iter().for_each(|e| e.progress_now());
        assert!(since.elapsed() < ACK_WITHIN, "unacknowledged");
    }
    assert!(!eps[0].connected(1), "acknowledged in time: no connection");
    leave(eps);
}

#[test]
fn past_its_first_messages_a_pair_connects_and_every_frame_arrives_once_in_order() {
    let Some(eps) = ranks(2) else { return };
    let n = 3 * FIRST_MESSAGES;
    let mut got = Vec::new();
    for i in 0..n {
        send(&eps, 0, 1, i);
        if i % 8 == 7 {
            got.extend(take(&eps, 1, 8));
        }
    }
    assert_eq!(got, (0..n).collect::<Vec<_>>());
    assert!(
        eps[0].connected(1),
        "connected once its datagrams were spent"
    );
    leave(eps);
}

#[test]
fn a_lost_datagram_is_sent_again() {
    let Some(eps) = ranks(2) else { return };
    send(&eps, 0, 1, 0);
    steal(&eps, 1);
    send(&eps, 0, 1, 1);
    let since = Instant::now();
    // Frame 1 alone is not taken (frame 0 comes first); both come again when frame
    // 0 is not acknowledged in time.
    assert_eq!(take(&eps, 1, 2), [0, 1]);
    assert!(since.elapsed() >= ACK_WITHIN);
    assert!(!eps[0].connected(1), "sent again as a datagram");
    assert_no_fault(&eps, 1, "a loss is no fault");
    leave(eps);
}

#[test]
fn a_receiver_that_never_looks_gets_a_connection_and_each_frame_once() {
    let Some(eps) = ranks(2) else { return };
    send(&eps, 0, 1, 0);
    send(&eps, 0, 1, 1);
    // Rank 1 does not look while rank 0 sends its datagrams again, TRIES times.
    let since = Instant::now();
    while !eps[0].connected(1) {
        eps[0].progress_now();
        assert!(since.elapsed() < Duration::from_secs(10), "never connected");
    }
    assert!(since.elapsed() >= ACK_WITHIN * ((1 << TRIES) - 1));
    // Each frame came 1 + TRIES times as a datagram and once over the connection.
    assert_eq!(take(&eps, 1, 2), [0, 1]);
    takes_nothing_more(&eps, 1, "a frame was taken twice");
    assert_no_fault(&eps, 1, "copies are no fault");
    leave(eps);
}

#[test]
fn a_datagram_played_again_relabelled_or_made_up_is_refused_and_the_real_ones_arrive_once() {
    let Some(eps) = ranks(3) else { return };
    // A message datagram without an acknowledgement: prefix, sealed number
    // ([source, number, nonce]), message.
    let (note, body) = (PREFIX..PREFIX + NUMBER_BYTES, PREFIX + NUMBER_BYTES..);
    let capture = |i| {
        send(&eps, 0, 1, i);
        let d = steal(&eps, 1);
        assert_eq!(d[3], 0, "no acknowledgement rides with it");
        d
    };
    let to = eps[1].net.datagrams().unwrap().address().unwrap();
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let resend = |bytes: &[u8]| {
        stranger.send_to(bytes, to).unwrap();
        eps.iter().for_each(|e| e.progress_now());
    };
    let first = capture(0);
    resend(&first); // the real one, late: taken
    assert_eq!(take(&eps, 1, 1), [0]);
    resend(&first); // again under its number: a copy, dropped
    let (second, third) = (capture(1), capture(2));
    // The third message under the second's number: its nonce is not the one that
    // number was sealed with.
    resend(&[&second[..note.end], &third[body.clone()]].concat());
    let mut renumbered = first.clone();
    renumbered[note.start + 8..note.start + 16].copy_from_slice(&1u64.to_le_bytes());
    resend(&renumbered); // the first under the second's number: its seal is broken
    let mut relabelled = first.clone();
    relabelled[note.start..note.start + 8].copy_from_slice(&2u64.to_le_bytes());
    resend(&relabelled); // in rank 2's name
    resend(b"not a datagram of amrq");
    takes_nothing_more(&eps, 1, "a refused datagram was taken");
    let faults: Vec<_> = eps[1]
        .faults()
        .recent()
        .map(|f| (f.source, f.kind.clone()))
        .collect();
    let unproven = |r| {
        faults
            .iter()
            .filter(|f| **f == (Some(r), FaultKind::Unproven))
            .count()
    };
    assert!(unproven(0) == 2 && unproven(2) == 1, "{faults:?}");
    assert!(
        faults
            .iter()
            .any(|f| matches!(f, (None, FaultKind::BadRuntimeMessage { .. }))),
        "{faults:?}"
    );
    // The real second and third, late: taken once each, in order.
    resend(&second);
    resend(&third);
    assert_eq!(take(&eps, 1, 2), [1, 2]);
    leave(eps);
}
