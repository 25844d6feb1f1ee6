//! Endpoints built by hand over one region, for what the conduits' builders never make.

use super::*;
use crate::bootstrap::{Boot, ThreadsBoot};
use crate::conduit::{
    ChannelSpec, Conduit, ConduitError, ConduitSpec, Message, ReceivedFrame, Senders,
};
use std::sync::Arc;

/// A Short frame of tag 1 with `args`.
fn short(args: &[u64]) -> Message<'_> {
    Message {
        tag: 1,
        flags: 0,
        args,
        payload: &[],
    }
}

/// Two endpoints over one region whose logical destination tables disagree: rank 1
/// believes it may send into channel 0, rank 0 (the receiver) says only rank 0 may.
#[test]
fn frames_from_a_sender_that_may_not_send_are_dropped_and_counted() {
    rogue_frames_are_dropped(false);
}

#[test]
fn frames_from_a_sender_that_may_not_send_are_dropped_and_counted_on_a_shared_ring() {
    rogue_frames_are_dropped(true);
}

fn rogue_frames_are_dropped(shared: bool) {
    let spec_of = |senders: Senders| ConduitSpec {
        tag_on_buffers: 0,
        segment_bytes: 4096,
        ..ConduitSpec::new(vec![ChannelSpec::new(8).shared(shared).senders(senders)])
    };
    let layout = RegionLayout::new(2, &spec_of(Senders::All)).unwrap();
    let region = Arc::new(HeapRegion::new(layout.total_bytes()).unwrap());
    // SAFETY: fresh zeroed region of the layout's size.
    unsafe { layout.init(region.base()) };
    let segs: Arc<[HeapRegion]> = vec![
        HeapRegion::new(4096).unwrap(),
        HeapRegion::new(4096).unwrap(),
    ]
    .into();
    let boot = Boot::Threads(Arc::new(ThreadsBoot::new(2)));
    let make = |rank: usize, senders: Senders| {
        // SAFETY: initialised region and segments kept alive by the owner; one
        // endpoint per rank.
        unsafe {
            MemConduit::new(Parts {
                rank,
                ranks: 2,
                spec: &spec_of(senders),
                layout: &layout,
                rings: region.base(),
                segments: segs.iter().map(HeapRegion::base).collect(),
                segment_bytes: 4096,
                owner: RegionOwner::Heap(region.clone(), segs.clone()),
                boot: boot.clone(),
            })
        }
    };
    let receiver = make(0, Senders::Only(vec![0]));
    let rogue = make(1, Senders::All);
    rogue.try_send(0, 0, &short(&[13])).unwrap();
    receiver.try_send(0, 0, &short(&[7])).unwrap();
    rogue.try_send(0, 0, &short(&[14])).unwrap();
    let mut seen = Vec::new();
    let n = receiver
        .drain(0, 10, |f| -> Result<(), ConduitError> {
            seen.push((f.source(), f.args()[0]));
            Ok(())
        })
        .unwrap();
    assert_eq!(
        (n, seen),
        (1, vec![(0, 7)]),
        "only the permitted frame is delivered"
    );
    assert_eq!(receiver.dropped(0), 2, "both rogue frames counted");
    let faults = receiver.faults();
    let rogue_rank = (!shared).then_some(1); // a shared ring's frames name their sender
    assert_eq!(faults.total(), 2);
    assert!(faults
        .recent()
        .all(|f| f.source == rogue_rank && f.kind == crate::conduit::FaultKind::NotPermitted));
    assert!(receiver.peek(0).unwrap().is_none());
    // And a rank that knows it may not send is refused before anything is written.
    let honest = make(1, Senders::Only(vec![0]));
    assert_eq!(
        honest.try_send(0, 0, &short(&[1])),
        Err(ConduitError::NotPermitted {
            rank: 1,
            channel: 0
        })
    );
}

/// A 2-slot ring takes frames of one slot: a frame without payload but with more args
/// than one slot holds is refused when sent, never written and then read as corrupt.
#[test]
fn a_two_slot_ring_refuses_frames_it_cannot_hold_and_delivers_the_rest() {
    let eps = crate::conduit::threads::endpoints(2, &[2]).unwrap();
    let max = eps[0].caps().channels[0].max_args;
    assert_eq!(max, 6, "16 header bytes and six args fill the one slot");
    for n in [7usize, 8] {
        let args = vec![9u64; n];
        assert!(
            matches!(eps[1].try_send(0, 0, &short(&args)), Err(ConduitError::TooManyArgs { nargs, max: 6 }) if nargs == n),
            "{n} args"
        );
    }
    let args = [1u64, 2, 3, 4, 5, 6];
    eps[1].try_send(0, 0, &short(&args)).unwrap();
    let f = eps[0].peek(0).unwrap().expect("the frame");
    assert_eq!(f.args(), &args[..]);
    f.release();
}

/// Plays a misbehaving sender: overwrites the header of the frame that `sender` has
/// just sent to `receiver` on channel 0 (the next one the receiver will read).
fn overwrite_next_header(receiver: &MemConduit, sender: usize, header: u64) {
    use crate::conduit::ring::RingMemory;
    let r = &receiver.rx[0].rings[sender];
    let p = r.cons.with(|c| c.peek(&r.ring)).unwrap().expect("a frame");
    // SAFETY: the frame is published and unread; nobody else touches the ring now.
    unsafe { r.ring.write_header(p.index(r.ring.nslots()), header) };
}

/// A corrupt header from one sender closes that sender's ring only: the receiver's
/// drain returns no error, records the fault against the sender, and goes on with the
/// other senders' frames; the sender, once its ring is full, is told it is closed.
#[test]
fn a_corrupt_header_closes_that_senders_ring_only_and_the_sender_is_told() {
    use crate::conduit::ring::FrameHeader;
    let eps = crate::conduit::threads::endpoints(3, &[4]).unwrap();
    eps[1].try_send(0, 0, &short(&[1])).unwrap();
    let bad = FrameHeader {
        nargs: 9,
        ..FrameHeader::default()
    };
    overwrite_next_header(&eps[0], 1, bad.pack());
    eps[1].try_send(0, 0, &short(&[2])).unwrap(); // behind the corrupt one: lost
    eps[2].try_send(0, 0, &short(&[3])).unwrap();
    let mut seen = Vec::new();
    let n = eps[0]
        .drain(0, 10, |f| -> Result<(), ConduitError> {
            seen.push((f.source(), f.args()[0]));
            Ok(())
        })
        .expect("a peer's corrupt frame is not this call's error");
    assert_eq!((n, seen), (1, vec![(2, 3)]));
    let faults = eps[0].faults();
    assert_eq!((faults.of(1), faults.of(2), faults.total()), (1, 0, 1));
    assert_eq!(faults.closed(), &[(Some(1), 0)]);
    let f = faults.recent().next().unwrap();
    assert!(
        f.kind.closes_ring() && f.to_string().contains("more than 8 args"),
        "{f}"
    );
    // Rank 2 goes on; rank 1 fills its closed ring and is then told, not left waiting.
    eps[2].try_send(0, 0, &short(&[4])).unwrap();
    let mut sent = 0;
    let refused = loop {
        match eps[1].try_send(0, 0, &short(&[5])) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 10, "a 4-slot ring cannot take more");
    };
    assert_eq!(
        refused,
        ConduitError::ChannelClosed {
            rank: 0,
            channel: 0
        }
    );
    let f = eps[0].peek(0).unwrap().expect("rank 2's frame");
    assert_eq!((f.source(), f.args()), (2, &[4u64][..]));
    f.release();
    assert!(
        eps[0].peek(0).unwrap().is_none(),
        "the closed ring is not read"
    );
}

/// A Long frame naming bytes outside the receiver's segment, and a Tag-On frame naming
/// a block outside the pool, are dropped and recorded; their ring stays open (the
/// frame boundaries are intact), so the sender's next frame is delivered.
#[test]
fn frames_naming_memory_outside_the_receiver_are_dropped_and_recorded() {
    use crate::conduit::ring::{FLAG_LONG, FLAG_TAG_ON};
    use crate::conduit::FaultKind;
    let eps = crate::conduit::threads::endpoints(2, &[16]).unwrap();
    let t = &eps[1].tx[0];
    let huge = usize::MAX - 8;
    assert!(t.push_pair(&short(&[1]), FLAG_LONG, (huge, 16), || {}));
    assert!(t.push_pair(&short(&[2]), FLAG_LONG, (0, 1 << 40), || {}));
    assert!(t.push_pair(&short(&[3]), FLAG_TAG_ON, (1 << 30, 8), || {}));
    eps[1].try_send(0, 0, &short(&[4])).unwrap();
    let f = eps[0].peek(0).unwrap().expect("the good frame");
    assert_eq!(f.args(), &[4]);
    f.release();
    let faults = eps[0].faults();
    let kinds: Vec<_> = faults.recent().map(|f| f.kind.clone()).collect();
    assert_eq!(
        kinds,
        [
            FaultKind::OutOfSegment,
            FaultKind::OutOfSegment,
            FaultKind::OutsidePool
        ]
    );
    assert!(faults.closed().is_empty());
    assert_eq!((faults.of(1), eps[0].dropped(0)), (3, 3));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..Default::default()
    })]

    /// Arbitrary bytes where a frame's header and first words are (as a faulty or
    /// hostile peer could write them, on a per-sender or a shared ring): the receiver
    /// never panics and never returns an error; what it hands out lies within its
    /// memory; what it drops is recorded; and a good frame of another sender is still
    /// delivered afterwards.
    #[test]
    fn arbitrary_bytes_in_a_frame_never_break_the_receiver(
        header in proptest::prelude::any::<u64>(),
        words in proptest::collection::vec(proptest::prelude::any::<u64>(), 6),
        shared in proptest::prelude::any::<bool>(),
        flags in 0u8..8,
    ) {
        use crate::conduit::ring::RingMemory;
        let spec = ConduitSpec {
            tag_on_buffers: 2,
            segment_bytes: 4096,
            ..ConduitSpec::new(vec![ChannelSpec::new(8).shared(shared)])
        };
        let eps = crate::conduit::threads::endpoints_for(3, &spec).unwrap();
        eps[1].try_send(0, 0, &short(&[1])).unwrap();
        // The top three flag bits (pad, Long, Tag-On) drawn often, the rest at random.
        let header = (header & !(0xe0 << 56)) | (u64::from(flags) << 61);
        let ring = if shared { 0 } else { 1 };
        let r = &eps[0].rx[0].rings[ring];
        let p = r.cons.with(|c| c.peek(&r.ring)).unwrap().expect("a frame");
        let idx = p.index(r.ring.nslots());
        // SAFETY: the frame is published and unread; nobody else touches the ring now.
        unsafe {
            r.ring.write_header(idx, header);
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
            r.ring.write_bytes(idx, crate::conduit::ring::ARGS_OFFSET, &bytes);
        }
        let (segment, seg_len) = eps[0].segment();
        let seg = segment.as_ptr() as usize..segment.as_ptr() as usize + seg_len;
        let mut delivered = 0;
        let drained = eps[0].drain(0, 16, |f| -> Result<(), ConduitError> {
            delivered += 1;
            assert!(f.args().len() <= 8);
            let (at, len) = (f.payload().as_ptr() as usize, f.payload().len());
            if f.is_long() {
                assert!(seg.contains(&at) || len == 0);
                assert!(at + len <= seg.end);
            }
            assert_eq!(f.payload().is_shared(), f.is_long()); // a Long one is never lent
            let _ = f.payload().to_vec().iter().map(|&b| u64::from(b)).sum::<u64>(); // readable
            Ok(())
        });
        proptest::prop_assert!(drained.is_ok(), "{drained:?}");
        let faults = eps[0].faults();
        // Every fault is a frame dropped or a ring closed, nothing else.
        let closed = faults.closed().len() as u64;
        proptest::prop_assert_eq!(faults.total(), eps[0].dropped(0) + closed);
        proptest::prop_assert!(delivered <= 2);
        // Another sender's frame still arrives (on a shared ring, unless it was closed).
        eps[2].try_send(0, 0, &short(&[9])).unwrap_or(());
        let mut later = Vec::new();
        eps[0]
            .drain(0, 16, |f| -> Result<(), ConduitError> {
                later.push((f.source(), f.args().first().copied()));
                Ok(())
            })
            .unwrap();
        if !shared || faults.closed().is_empty() {
            proptest::prop_assert!(later.contains(&(2, Some(9))), "{later:?} {faults:?}");
        }
    }
}

/// `quiet` says that a drain would take nothing and change nothing: not while a frame
/// waits, nor while the head has moved unpublished (a `peek` and release leave it so),
/// nor while a frame is out.
#[test]
fn a_channel_is_quiet_only_when_a_drain_would_do_nothing() {
    let eps = crate::conduit::threads::endpoints(2, &[16]).unwrap();
    let (rx, tx) = (&eps[0], &eps[1]);
    assert!(rx.quiet(0));
    tx.try_send(0, 0, &short(&[1])).unwrap();
    assert!(!rx.quiet(0), "a frame waits");
    rx.peek(0).unwrap().expect("the frame").release();
    assert!(!rx.quiet(0), "the head moved and is not published");
    let nothing = rx.drain(0, 8, |_| Ok::<(), ConduitError>(())).unwrap();
    assert_eq!(nothing, 0);
    assert!(rx.quiet(0), "the empty drain published the head");
    tx.try_send(0, 0, &short(&[2])).unwrap();
    let f = rx.peek(0).unwrap().expect("the frame");
    assert!(!rx.quiet(0), "a frame is out");
    f.release();
}

/// A drain that stops at its budget publishes its head: the sender, which sees room
/// only through the published head, gets every slot back with no further poll.
#[test]
fn a_drain_cut_short_by_its_budget_hands_its_slots_back() {
    let eps = crate::conduit::threads::endpoints(2, &[16]).unwrap();
    let (rx, tx) = (&eps[0], &eps[1]);
    let mut sent = 0;
    while tx.try_send(0, 0, &short(&[sent])).is_ok() {
        sent += 1;
    }
    assert_eq!(sent, 16);
    let mut seen = Vec::new();
    let took = rx.drain(0, 15, |f| {
        seen.push(f.args()[0]);
        Ok::<(), ConduitError>(())
    });
    assert_eq!(took.unwrap(), 15, "15 of 16, a budget past the last batch");
    assert_eq!(seen, (0..15).collect::<Vec<u64>>());
    for i in 0..15 {
        tx.try_send(0, 0, &short(&[i]))
            .unwrap_or_else(|e| panic!("slot {i} of the 15 released: {e}"));
    }
}

/// A poller's set is armed once idle long enough (`polled` with nothing taken), and
/// then `nothing_arrived` answers from the doorbell's summary: a frame sent just before
/// the arm is seen by the look that follows it (the set is disarmed), one sent after
/// rings the summary; either way `nothing_arrived` never hides a frame.
#[test]
fn an_armed_poll_set_never_hides_a_frame() {
    let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true)]);
    // Symmetric fences: the test runs no second thread for `membarrier` to reach.
    let spec = ConduitSpec {
        doorbell_fence: crate::conduit::doorbell::DoorbellFence::Symmetric,
        ..spec
    };
    let eps = crate::conduit::threads::endpoints_for(2, &spec).unwrap();
    let (rx, tx) = (&eps[0], &eps[1]);
    let set = rx.poll_set(&[0]).unwrap();
    let arm = |before_arm: bool| {
        let mut polls = 0;
        while rx.one_poll_armed() == 0 {
            if before_arm && polls == super::conduit::POLL_ARM_AFTER - 1 {
                tx.try_send(0, 0, &short(&[1])).unwrap(); // lands before the arm
            }
            rx.polled(&set, 0);
            polls += 1;
            if polls > 1 << 20 {
                return false; // the look after the arm saw the frame: disarmed
            }
        }
        true
    };
    // Sent after the arm: the summary tells.
    assert!(arm(false));
    assert!(rx.nothing_arrived(&set));
    tx.try_send(0, 0, &short(&[2])).unwrap();
    assert!(!rx.nothing_arrived(&set), "the sender rang the summary");
    assert_eq!(rx.one_poll_armed(), 0, "ringing disarmed the set");
    let took = rx.drain(0, 8, |_| Ok::<(), ConduitError>(())).unwrap();
    assert_eq!(took, 1);
    rx.polled(&set, took);
    // Sent just before the arm: the look after it sees the frame and disarms.
    assert!(!arm(true), "armed over a frame no sender will ring for");
    assert!(!rx.nothing_arrived(&set));
    assert_eq!(rx.drain(0, 8, |_| Ok::<(), ConduitError>(())).unwrap(), 1);
}

/// Polls `rx`'s empty `set` until it is armed.
fn arm_idle(rx: &MemConduit, set: &crate::conduit::PollSet) {
    while rx.one_poll_armed() == 0 {
        rx.polled(set, 0);
    }
}

/// What `amrq.h`'s inline send (`amrq_express_`) does with an [`ExpressLane`], written in
/// Rust: room by the cached head, the header word, the args, the sequence word with
/// Release, the tail; then the doorbell's test through `armed_word`.
///
/// # Safety
/// `lane` is a live conduit's open lane, on its thread, outside any call of it.
unsafe fn lane_send(lane: &ExpressLane, tag: u16, args: &[u64]) -> bool {
    use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};
    assert!((args.len() as u64) < lane.args_below);
    // SAFETY: the caller's: the producer's words, the ring's slots and the armed word
    // are live, and only this thread uses them now.
    unsafe {
        let (t, head) = (*lane.tail, *lane.cached_head);
        if t.wrapping_sub(head) > lane.mask {
            return false;
        }
        let slot = lane
            .slots
            .add(((t & lane.mask) << 6) as usize)
            .cast::<u64>();
        slot.add(1)
            .write(u64::from(tag) | (args.len() as u64) << 21);
        for (i, &a) in args.iter().enumerate() {
            slot.add(2 + i).write(a);
        }
        // ORDERING: Release pairs with the consumer's Acquire load of the sequence word.
        AtomicU64::from_ptr(slot).store(t + 1, Ordering::Release);
        *lane.tail = t + 1;
        // ORDERING: the sequence word's store stays before the armed word's load; the
        // receiver's membarrier (or the library's fence, for a word with every bit set)
        // pairs with its arming, as in `TxRing::ring_doorbell`.
        compiler_fence(Ordering::SeqCst);
        let armed = AtomicU64::from_ptr((*lane.armed_word).cast_mut()).load(Ordering::Relaxed);
        if armed & lane.notify_bit != 0 {
            ExpressLane::notify_owner(lane.owner);
        }
    }
    true
}

/// An inline send through an [`ExpressLane`] rings an armed receiver's doorbell as the
/// library's send does, with either fence: the first send takes the full handshake,
/// and where the receiver arms with `membarrier` it leaves the lane's `armed_word`
/// naming the receiver's armed word, which the next sends test alone.
#[test]
fn an_express_lane_send_rings_an_armed_receiver() {
    use crate::conduit::doorbell::DoorbellFence;
    for fence in [DoorbellFence::Symmetric, DoorbellFence::Asymmetric] {
        let spec = ConduitSpec {
            doorbell_fence: fence,
            ..ConduitSpec::new(vec![ChannelSpec::new(16).notify(true)])
        };
        let eps = crate::conduit::threads::endpoints_for(2, &spec).unwrap();
        let (rx, tx) = (&eps[0], &eps[1]);
        let set = rx.poll_set(&[0]).unwrap();
        let lane = tx.express_lane(0, 0).unwrap();
        for round in 0..3u64 {
            arm_idle(rx, &set);
            assert!(rx.nothing_arrived(&set));
            // SAFETY: the lane of a live conduit, on its thread, outside any call of it.
            assert!(unsafe { lane_send(&lane, 7, &[round, round + 1]) });
            assert!(
                !rx.nothing_arrived(&set),
                "{fence:?}, send {round}: the lane's send rang the armed receiver"
            );
            let mut got = Vec::new();
            let took = rx
                .drain(0, 8, |f| {
                    got.push((f.tag(), f.args().to_vec()));
                    Ok::<(), ConduitError>(())
                })
                .unwrap();
            assert_eq!(got, [(7, vec![round, round + 1])]);
            rx.polled(&set, took);
        }
        let light = rx
            .doorbell()
            .heavy
            .load(std::sync::atomic::Ordering::Relaxed)
            & tx.tx[0].light_bit
            != 0;
        // SAFETY: the lane's send state, read on its thread.
        let word = unsafe { *lane.armed_word };
        assert_eq!(
            std::ptr::eq(word, rx.doorbell().armed.as_ptr()),
            light,
            "{fence:?}: the short test once the receiver's membarrier reaches the sender"
        );
        assert_eq!(fence == DoorbellFence::Symmetric, !light);
    }
}

/// A drain takes at most its budget, whatever waits: none for 0, and across senders a
/// budget smaller than what waits leaves the rest for the next call, in order.
#[test]
fn a_drain_takes_at_most_its_budget() {
    let eps = crate::conduit::threads::endpoints(3, &[16]).unwrap();
    for i in 0..3 {
        eps[1].try_send(0, 0, &short(&[i])).unwrap();
        eps[2].try_send(0, 0, &short(&[10 + i])).unwrap();
    }
    let take = |budget| {
        let mut seen = Vec::new();
        let n = eps[0]
            .drain(0, budget, |f| -> Result<(), ConduitError> {
                seen.push(f.args()[0]);
                Ok(())
            })
            .unwrap();
        assert_eq!(n, seen.len());
        seen
    };
    assert!(take(0).is_empty());
    let mut all = take(4);
    assert_eq!(all.len(), 4);
    all.extend(take(usize::MAX));
    let from = |low: bool| {
        all.iter()
            .copied()
            .filter(|&a| (a < 10) == low)
            .collect::<Vec<_>>()
    };
    assert_eq!((from(true), from(false)), (vec![0, 1, 2], vec![10, 11, 12]));
    assert!(take(8).is_empty());
}

/// `drain_one` takes one frame per call, from the senders in turn (round-robin from the
/// ring after the last one served), each sender's frames in order; 0 once all is taken,
/// with the heads published (the channel is quiet again).
#[test]
fn a_drain_of_one_takes_one_frame_from_each_sender_in_turn() {
    let eps = crate::conduit::threads::endpoints(3, &[16]).unwrap();
    for i in 0..3 {
        eps[1].try_send(0, 0, &short(&[10 + i])).unwrap();
        eps[2].try_send(0, 0, &short(&[20 + i])).unwrap();
    }
    let mut seen = Vec::new();
    loop {
        let took = eps[0]
            .drain_one(0, |f| -> Result<(), ConduitError> {
                seen.push((f.source(), f.args()[0]));
                Ok(())
            })
            .unwrap();
        assert!(took <= 1);
        if took == 0 {
            break;
        }
    }
    let want = [(1, 10), (2, 20), (1, 11), (2, 21), (1, 12), (2, 22)];
    assert_eq!(seen, want);
    assert!(eps[0].quiet(0), "every head published");
}

/// A frame `drain_one` does not hand out after one look (a Medium frame, here) goes
/// through the full drain, and an error of `f` reaches the caller after the frame was
/// released; a drain of the same channel from inside `f` is refused.
#[test]
fn a_drain_of_one_runs_every_kind_of_frame_and_reports_errors() {
    let eps = crate::conduit::threads::endpoints(2, &[16]).unwrap();
    let (rx, tx) = (&eps[0], &eps[1]);
    let medium = Message {
        payload: b"medium",
        ..short(&[1])
    };
    tx.try_send(0, 0, &medium).unwrap();
    tx.try_send(0, 0, &short(&[2])).unwrap();
    let mut payload = Vec::new();
    let took = rx.drain_one(0, |f| -> Result<(), ConduitError> {
        payload.extend_from_slice(&f.payload().to_cow());
        Ok(())
    });
    assert_eq!((took, payload.as_slice()), (Ok(1), &b"medium"[..]));
    let nested = rx.drain_one(0, |_| -> Result<(), ConduitError> {
        match rx.drain_one(0, |_| Ok::<(), ConduitError>(())) {
            Err(ConduitError::FrameOutstanding { channel: 0 }) => Err(ConduitError::Busy),
            other => panic!("a nested drain of the same channel: {other:?}"),
        }
    });
    assert_eq!(
        nested,
        Err(ConduitError::Busy),
        "f's error, after its frame"
    );
    assert_eq!(rx.drain_one(0, |_| Ok::<(), ConduitError>(())), Ok(0));
    assert!(rx.quiet(0));
}
