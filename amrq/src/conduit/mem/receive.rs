//! The receive loop of a channel: [`MemConduit::drain`](crate::conduit::Conduit::drain)
//! takes frames ring by ring, as many in a row from one sender's ring as fairness
//! allows, and hands each to the caller in place.
//!
//! The common frame — Express (one slot, no payload, at most six args) on a per-pair
//! ring whose sender may send here — is handed out after one sequence-word load and one
//! test of its header; anything else goes through the full checks of `take`, out of line.
//! The channel is marked as having a frame out once per call, not per frame.

use super::channels::{RxChannel, FAIR_BURST};
use super::{MemConduit, MemFrame};
use crate::conduit::ring::Look;
use crate::conduit::{Channel, ConduitError, ReceivedFrame};
use std::mem::ManuallyDrop;

impl MemConduit {
    /// Runs `f` on up to `budget` frames of channel `ch`, releasing each after it;
    /// returns how many ran. `f`'s error ends the loop after its frame was released.
    ///
    /// Pollers look first whether the channel is [quiet](RxChannel::quiet). A ring left
    /// before it was found empty (fairness, the budget, an error) gets its head
    /// published then: its producer sees the room at once, not at the next poll.
    #[inline(always)]
    pub(super) fn drain_frames<E, F>(
        &self,
        ch: Channel,
        budget: usize,
        mut f: F,
    ) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        let Some(chan) = self.rx.get(ch) else {
            return Err(self.no_channel(ch).into());
        };
        let n = chan.rings.len();
        if chan.outstanding.get() || n == 0 {
            return Self::nothing_to_drain(chan, ch).map_err(Into::into);
        }
        chan.outstanding.set(true);
        let (mut s, mut burst) = (chan.cursor.get(), chan.burst.get());
        let (mut done, mut idle) = (0, 0);
        let mut out = Ok(());
        let mut r = &chan.rings[s];
        while done < budget {
            // SAFETY: only ring code runs while the consumer state is borrowed.
            let look = unsafe { r.cons.get() }.look(&r.ring);
            if matches!(look, Look::Empty) || r.broken.get() {
                idle += 1;
                if idle >= n {
                    break;
                }
                (s, burst) = (if s + 1 == n { 0 } else { s + 1 }, 0);
                r = &chan.rings[s];
                continue;
            }
            // Whether `f` succeeded; its error goes to `out` (moved only on that path).
            let ok = match look {
                Look::Express(p) if r.plain => {
                    // Not dropped: its drop would clear the channel's mark.
                    let result = f(&ManuallyDrop::new(MemFrame::express(chan, r, s, p)));
                    // SAFETY: as above; `f` has returned, and the frame with it.
                    unsafe { r.cons.get() }.release_one(&r.ring);
                    result.map_err(|e| out = Err(e)).is_ok()
                }
                _ => match self.run_slowly(chan, s, ch, &mut f) {
                    Some(result) => result.map_err(|e| out = Err(e)).is_ok(),
                    None => continue, // a pad, or a frame dropped: look again
                },
            };
            done += 1;
            idle = 0;
            burst += 1;
            if !ok {
                r.publish_if_behind();
                break;
            }
            if burst >= FAIR_BURST {
                r.publish_if_behind();
                (s, burst) = (if s + 1 == n { 0 } else { s + 1 }, 0);
                r = &chan.rings[s];
            }
        }
        if done == budget {
            r.publish_if_behind();
        }
        chan.cursor.set(s);
        chan.burst.set(burst);
        chan.outstanding.set(false);
        out.map(|()| done)
    }

    /// Why `drain` of channel `ch` takes nothing: a frame of it is out, or its receive
    /// side moved to the progress thread; `Ok(0)` for a channel without rings.
    #[cold]
    fn nothing_to_drain(chan: &RxChannel, ch: Channel) -> Result<usize, ConduitError> {
        if chan.outstanding.get() {
            Err(ConduitError::FrameOutstanding { channel: ch })
        } else if chan.moved {
            Err(ConduitError::DeliveredByInterrupts { channel: ch })
        } else {
            Ok(0)
        }
    }

    /// Runs `f` on the frame at the head of ring `s` of `chan`, which is readable and not
    /// Express on a plain ring, after every check, and releases it; `None` for a pad or
    /// a frame dropped.
    #[inline(never)]
    fn run_slowly<E, F>(
        &self,
        chan: &RxChannel,
        s: usize,
        ch: Channel,
        f: &mut F,
    ) -> Option<Result<(), E>>
    where
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        // Not dropped: its drop would clear the channel's mark.
        let frame = ManuallyDrop::new(self.take(chan, s, ch).ok().flatten()?);
        let result = f(&frame);
        if frame.is_tag_on() {
            // Its block is freed with it (see `release`).
            ManuallyDrop::into_inner(frame).release();
            chan.outstanding.set(true);
        } else {
            frame.release_slots();
        }
        Some(result)
    }
}
