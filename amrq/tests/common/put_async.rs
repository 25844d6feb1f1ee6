//! Puts no one waits for (`Rma::put_async`): every put's events posted once, in order,
//! after its data and its count are in place, at the target and at the sender, with the
//! sender's own queue too small to hold them all (so that events wait for room). Shared
//! by the threads tests and the UCX tests (a put the conduit leaves in flight).

use amrq::conduit::{Conduit, ReceivedFrame};
use amrq::prelude::*;
use amrq::rma::{Completion, Rma, RmaError};
use amrq::rq::QueueId;

/// The sender's own queue (8 slots: smaller than the puts it leaves undrained).
pub const SENT: QueueId = QueueId::new(QueueId::FIRST_USER);
/// The target's queue.
pub const ARRIVED: QueueId = QueueId::new(QueueId::FIRST_USER + 1);
/// Slots of the two queues.
pub const SLOTS: [u64; 2] = [8, 16];

/// Rank 0 makes `puts` asynchronous puts of `bytes` bytes each to rank 1, draining its
/// own queue only every 20 puts; rank 1 checks each put's bytes and the count as each
/// frame arrives; every third put bumps a count too. (`frames`: every operation as AM
/// frames.)
pub fn put_async_events<C: Conduit>(
    c: C,
    (puts, bytes): (u64, usize),
    frames: bool,
) -> Result<(), RmaError> {
    let am = Am::new(c, HandlerTable::<(), C>::new(), ())?;
    let rma = Rma::new_or_over_frames(am, frames);
    let am = rma.am();
    let (data, count) = (
        rma.alloc_symmetric(bytes * puts as usize, 8)?,
        rma.alloc_symmetric(8, 8)?,
    );
    // Every third put counts (then the put is complete before the count goes up).
    let counted = |i: u64| i.is_multiple_of(3);
    let fill = |i: u64| vec![(i * 7 + 1) as u8; bytes];
    am.barrier()?;
    if am.rank() == 0 {
        let mut next = 0; // the next sender-side event expected
        let take_events = |am: &Am<(), C>, next: &mut u64| -> Result<(), RmaError> {
            while let Some(f) = am.rq().read_queue(SENT)? {
                assert_eq!(f.args(), [*next], "sender-side events once, in order");
                *next += 1;
                f.release();
            }
            Ok(())
        };
        for i in 0..puts {
            let done = Completion {
                counter: counted(i).then_some(count),
                notify: Some((ARRIVED, &[i])),
                local: Some((SENT, &[i])),
            };
            let put = fill(i);
            rma.put_async(1, data + bytes * i as usize, &put, done)?;
            drop(put); // taken: the buffer is free
            am.poll()?;
            if i % 20 == 19 {
                take_events(am, &mut next)?;
            }
        }
        while next < puts {
            take_events(am, &mut next)?;
            am.poll()?;
        }
    } else if am.rank() == 1 {
        let mut i = 0;
        while i < puts {
            // Through frames this rank's polls serve the puts.
            let Some(f) = am.rq().read_queue(ARRIVED)? else {
                am.poll()?;
                continue;
            };
            assert_eq!(f.args(), [i], "the target's events once, in order");
            f.release();
            let mut got = vec![0u8; bytes];
            rma.get(1, data + bytes * i as usize, &mut got)?;
            assert!(got == fill(i), "put {i}'s data in place before its event");
            if counted(i) {
                assert!(
                    rma.load(1, count)? > i / 3,
                    "put {i}'s count before its event"
                );
            }
            i += 1;
        }
    }
    am.barrier()?;
    if am.rank() == 1 {
        assert_eq!(rma.load(1, count)?, puts.div_ceil(3));
    }
    assert!(am.rq().read_queue(SENT)?.is_none() && am.rq().read_queue(ARRIVED)?.is_none());
    am.barrier()?;
    Ok(())
}
