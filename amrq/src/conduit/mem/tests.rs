//! Endpoints built by hand over one region, for what the conduits' builders never make.

use super::*;
use crate::bootstrap::{Boot, ThreadsBoot};
use crate::conduit::{
    ChannelSpec, Conduit, ConduitError, ConduitSpec, Message, ReceivedFrame, Senders,
};
use std::sync::Arc;

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
    let msg = |a: &'static [u64]| Message {
        tag: 1,
        flags: 0,
        args: a,
        payload: &[],
    };
    rogue.try_send(0, 0, &msg(&[13])).unwrap();
    receiver.try_send(0, 0, &msg(&[7])).unwrap();
    rogue.try_send(0, 0, &msg(&[14])).unwrap();
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
    assert!(receiver.peek(0).unwrap().is_none());
    // And a rank that knows it may not send is refused before anything is written.
    let honest = make(1, Senders::Only(vec![0]));
    assert_eq!(
        honest.try_send(0, 0, &msg(&[1])),
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
        let m = Message {
            tag: 1,
            flags: 0,
            args: &args,
            payload: &[],
        };
        assert!(
            matches!(eps[1].try_send(0, 0, &m), Err(ConduitError::TooManyArgs { nargs, max: 6 }) if nargs == n),
            "{n} args"
        );
    }
    let args = [1u64, 2, 3, 4, 5, 6];
    let m = Message {
        tag: 1,
        flags: 0,
        args: &args,
        payload: &[],
    };
    eps[1].try_send(0, 0, &m).unwrap();
    let f = eps[0].peek(0).unwrap().expect("the frame");
    assert_eq!(f.args(), &args[..]);
    f.release();
}
