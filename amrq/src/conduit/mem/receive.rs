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
use crate::conduit::{Channel, ConduitError, ReceivedFrame};
use std::mem::ManuallyDrop;

/// What a look at one ring found.
enum Look<'a> {
    /// A frame, checked, to hand out.
    Frame(MemFrame<'a>),
    /// A pad or a frame that was dropped: look at the same ring again.
    Again,
    /// Nothing readable (or a ring closed for corruption).
    Empty,
}

impl MemConduit {
    /// Runs `f` on up to `budget` frames of channel `ch`, releasing each after it;
    /// returns how many ran. `f`'s error ends the loop after its frame was released.
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
        while done < budget {
            match self.look(chan, s, ch) {
                Look::Frame(frame) => {
                    // Not dropped: its drop would clear the channel's mark.
                    let frame = ManuallyDrop::new(frame);
                    let result = f(&frame);
                    if frame.is_tag_on() {
                        // Its block is freed with it (see `release`).
                        ManuallyDrop::into_inner(frame).release();
                        chan.outstanding.set(true);
                    } else {
                        frame.release_slots();
                    }
                    done += 1;
                    idle = 0;
                    burst += 1;
                    if burst >= FAIR_BURST {
                        (s, burst) = (if s + 1 == n { 0 } else { s + 1 }, 0);
                    }
                    if let Err(e) = result {
                        out = Err(e);
                        break;
                    }
                }
                Look::Again => {}
                Look::Empty => {
                    idle += 1;
                    if idle >= n {
                        break;
                    }
                    (s, burst) = (if s + 1 == n { 0 } else { s + 1 }, 0);
                }
            }
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

    /// A look at ring `s` of `chan` (`s` < its number of rings).
    #[inline(always)]
    fn look<'a>(&'a self, chan: &'a RxChannel, s: usize, ch: Channel) -> Look<'a> {
        let r = &chan.rings[s];
        // SAFETY: only ring code runs while the consumer state is borrowed.
        let c = unsafe { r.cons.get() };
        if !c.ready(&r.ring) || r.broken.get() {
            return Look::Empty;
        }
        if r.plain {
            if let Some(p) = c.take_express(&r.ring) {
                return Look::Frame(MemFrame::express(chan, r, s, p));
            }
        }
        self.look_slowly(chan, s, ch)
    }

    /// [`MemConduit::look`] at a frame that is not Express on a plain ring: every check.
    #[inline(never)]
    fn look_slowly<'a>(&'a self, chan: &'a RxChannel, s: usize, ch: Channel) -> Look<'a> {
        match self.take(chan, s, ch) {
            Ok(Some(frame)) => Look::Frame(frame),
            _ => Look::Again,
        }
    }
}
