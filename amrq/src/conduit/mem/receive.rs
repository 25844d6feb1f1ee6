//! The receive loop of a channel: [`MemConduit::drain`](crate::conduit::Conduit::drain)
//! takes frames ring by ring, as many in a row from one sender's ring as fairness
//! allows, and hands each to the caller in place.
//! [`Conduit::drain_both`](crate::conduit::Conduit::drain_both) runs the same loop over
//! two channels in one call (the AM poll: replies, then requests), with the first
//! channel's scan left out when all its rings are quiet.
//!
//! The common frame — Express (one slot, no payload, at most six args) on a per-pair
//! ring whose sender may send here — is handed out after one sequence-word load and one
//! test of its header; anything else goes through the full checks of `take`, out of line.
//! The channel is marked as having a frame out once per call, not per frame.
//! [`Conduit::drain_one`](crate::conduit::Conduit::drain_one) (a wait's one reply)
//! looks at each ring once from the cursor and runs the first Express frame it finds,
//! with no scan to set up.

use super::channels::{RxChannel, RxRing, FAIR_BURST};
use super::{MemConduit, MemFrame};
use crate::conduit::ring::{ExpressGate, Look, RingMemory};
use crate::conduit::{Channel, ConduitError, ReceivedFrame};
use std::mem::ManuallyDrop;

/// What a drain returns: how many frames ran, or the error that stopped it. Only the
/// error is moved (a `Result` kept whole was copied out on every poll).
#[inline(always)]
fn stopped<E>(out: Option<E>, done: usize) -> Result<usize, E> {
    match out {
        None => Ok(done),
        Some(e) => Err(unlikely(e)),
    }
}

/// `e`, on a path the compiler lays out as the rare one: the common return then tests
/// the error once instead of selecting between the two results first.
#[cold]
#[inline(never)]
fn unlikely<E>(e: E) -> E {
    e
}

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
        let chan = match self.drainable(ch) {
            Ok(chan) => chan,
            Err(early) => return early.map_err(Into::into),
        };
        let mut out = None;
        chan.busy.set(true);
        let done = self.scan(chan, ch, budget, &mut f, &mut out);
        chan.busy.set(false);
        stopped(out, done)
    }

    /// Runs `f` on one frame of channel `ch`, from the first ring with one from the
    /// cursor on; returns 1, or 0 if there was none. The ring it served gets its head
    /// published and the cursor moves past it, as a drain of one frame does; a ring
    /// whose look only had a head to publish publishes it.
    ///
    /// One look per ring, where a [quiet](RxRing::quiet) test and then a drain looked
    /// twice at the ring that had the frame and set up a scan between: 16 instructions
    /// fewer per AM round trip (callgrind). An empty look costs more than a quiet test
    /// (14 instructions more per empty wait round with two ranks); a quiet test first,
    /// or the rings walked as slices or ranges, each cost the round trip's gain.
    #[inline(always)]
    pub(super) fn drain_one_frame<E, F>(&self, ch: Channel, mut f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        let chan = match self.drainable(ch) {
            Ok(chan) => chan,
            Err(early) => return early.map_err(Into::into),
        };
        let rings: &[RxRing] = &chan.rings;
        let mut s = chan.cursor.get();
        for _ in 0..rings.len() {
            debug_assert!(s < rings.len());
            // SAFETY: the cursor is always a ring's index (every store of it, here, in
            // `scan`, `RxChannel::took` and `looked_at`, stores one; a channel's rings
            // never change), and so is `s`, which wraps at the count.
            let r = unsafe { rings.get_unchecked(s) };
            let this = s;
            s = if s + 1 == rings.len() { 0 } else { s + 1 };
            let ring = r.ring;
            // The gate tested after the look, not passed to it: the wait's looks mostly
            // find the ring empty, and a gate passed in is loaded before the look.
            // SAFETY: only ring code runs while the consumer state is borrowed.
            match unsafe { r.cons.get() }.look(&ring) {
                Look::Empty => continue,
                Look::Express(p) if r.gate.get() == ExpressGate::OPEN => {
                    let slot = ring.slot_ptr(p.index(ring.nslots()));
                    let frame = ManuallyDrop::new(MemFrame::express(chan, r, this, p, slot));
                    chan.busy.set(true);
                    let result = f(&frame);
                    chan.busy.set(false);
                    // SAFETY: as above; `f` has returned, and the frame with it.
                    unsafe { r.cons.get() }.release_one(&ring);
                    r.publish_if_behind();
                    chan.cursor.set(s);
                    return result.map(|()| 1);
                }
                // Anything else through the full drain's checks, from this ring on.
                _ => {
                    chan.cursor.set(this);
                    return self.drain_frames(ch, 1, f);
                }
            }
        }
        Ok(0)
    }

    /// Drains channel `a` (up to `budget_a` frames, through `fa`), then channel `b` (up
    /// to `budget_b`, through `fb`), with the set-up of one call: the AM poll's scan of
    /// its reply then request rings. Each ring visited gives up to [`FAIR_BURST`]
    /// frames in a row; a scan that runs out of budget starts its next call at the
    /// ring after the last one it served, so every sender is served in turn.
    #[inline(always)]
    pub(super) fn drain_both_frames<E, FA, FB>(
        &self,
        (a, budget_a): (Channel, usize),
        mut fa: FA,
        (b, budget_b): (Channel, usize),
        mut fb: FB,
    ) -> Result<usize, E>
    where
        E: From<ConduitError>,
        FA: FnMut(&MemFrame<'_>) -> Result<(), E>,
        FB: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        let (Some(ca), Some(cb)) = (self.rx.get(a), self.rx.get(b)) else {
            return self.drain_each((a, budget_a), fa, (b, budget_b), fb);
        };
        if ca.busy.get() || cb.busy.get() {
            return self.drain_each((a, budget_a), fa, (b, budget_b), fb);
        }
        let mut out = None;
        // The second channel's scan written twice: alone, in the common poll that finds
        // no reply, it has no count to add to (callgrind: 3 instructions fewer per
        // one-way AM, for ~650 bytes more code where the poll is inlined).
        if ca.rings.iter().all(RxRing::quiet) {
            cb.busy.set(true);
            let done = self.scan(cb, b, budget_b, &mut fb, &mut out);
            cb.busy.set(false);
            return stopped(out, done);
        }
        ca.busy.set(true);
        let mut done = self.scan(ca, a, budget_a, &mut fa, &mut out);
        ca.busy.set(false);
        if out.is_none() {
            // Not marked before: a request handler waiting for room to reply drains
            // the replies.
            cb.busy.set(true);
            done += self.scan(cb, b, budget_b, &mut fb, &mut out);
            cb.busy.set(false);
        }
        stopped(out, done)
    }

    /// [`Self::drain_both_frames`] of channels without rings or with a frame out: two
    /// drains, which say why they take nothing.
    #[cold]
    #[inline(never)]
    fn drain_each<E, FA, FB>(
        &self,
        (a, budget_a): (Channel, usize),
        fa: FA,
        (b, budget_b): (Channel, usize),
        fb: FB,
    ) -> Result<usize, E>
    where
        E: From<ConduitError>,
        FA: FnMut(&MemFrame<'_>) -> Result<(), E>,
        FB: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        let took = self.drain_frames(a, budget_a, fa)?;
        Ok(took + self.drain_frames(b, budget_b, fb)?)
    }

    /// Runs `f` on up to `budget` frames of `chan` (channel `ch`, marked as having a
    /// frame out by the caller, at least one ring), ring by ring from its cursor, up to
    /// [`FAIR_BURST`] in a row from each, until the budget is spent or every ring was
    /// last found empty; the first error of `f` goes to `out` and ends the scan.
    /// Returns how many ran.
    #[inline(always)]
    fn scan<E, F>(
        &self,
        chan: &RxChannel,
        ch: Channel,
        budget: usize,
        f: &mut F,
        out: &mut Option<E>,
    ) -> usize
    where
        F: FnMut(&MemFrame<'_>) -> Result<(), E>,
    {
        if budget == 0 {
            return 0;
        }
        let rings: &[RxRing] = &chan.rings;
        let n = rings.len();
        // Rings still to be found empty, in a row, before the scan ends.
        let (mut s, mut done, mut left) = (chan.cursor.get(), 0, n);
        loop {
            debug_assert!(s < n);
            // SAFETY: the channel has a ring (the caller's contract) and the cursor is
            // always a ring's index (every store of it, here, in `drain_one_frame`, in
            // `RxChannel::took` and `looked_at`, stores one; a channel's rings never
            // change), and so is `s`, which wraps at the count.
            let r = unsafe { rings.get_unchecked(s) };
            // A copy: the ring's address and mask stay in registers across handlers
            // instead of being loaded again after each frame's Acquire.
            let ring = r.ring;
            // Where this ring's burst ends: one count checked per frame, not two.
            let stop = budget.min(done + FAIR_BURST as usize);
            let emptied = loop {
                // Express only on a plain ring: any other's gate is shut (one closed
                // as corrupt, too).
                // SAFETY: only ring code runs while the consumer state is borrowed.
                let ok = match unsafe { r.cons.get() }.look_through(&ring, r.gate.get()) {
                    Look::Empty => break true,
                    Look::Express(p) => {
                        // Not dropped: its drop would clear the channel's mark.
                        let slot = ring.slot_ptr(p.index(ring.nslots()));
                        let frame = ManuallyDrop::new(MemFrame::express(chan, r, s, p, slot));
                        // The error set aside at once: kept across the release, the
                        // result went through memory on every frame.
                        let ok = f(&frame).map_err(|e| *out = Some(e)).is_ok();
                        // SAFETY: as above; `f` has returned, and the frame with it.
                        unsafe { r.cons.get() }.release_one(&ring);
                        ok
                    }
                    _ if r.shut.get() => break true,
                    _ => match self.run_slowly(chan, s, ch, f) {
                        Some(result) => result.map_err(|e| *out = Some(e)).is_ok(),
                        None => continue, // a pad, or a frame dropped: look again
                    },
                };
                done += 1;
                if !ok {
                    r.publish_if_behind();
                    chan.cursor.set(s);
                    return done;
                }
                if done == stop {
                    r.publish_if_behind();
                    break false;
                }
            };
            left = if emptied { left - 1 } else { n };
            s = if s + 1 == n { 0 } else { s + 1 };
            if left == 0 || done == budget {
                break;
            }
        }
        chan.cursor.set(s);
        done
    }

    /// Channel `ch`, if a drain of it can take frames (it exists, has rings and no frame
    /// out); otherwise what that drain returns.
    #[inline(always)]
    fn drainable(&self, ch: Channel) -> Result<&RxChannel, Result<usize, ConduitError>> {
        let chan = match self.rx.get(ch) {
            Some(chan) => chan,
            None => self.channel_across(ch)?,
        };
        if chan.busy.get() {
            return Err(Self::nothing_to_drain(chan, ch));
        }
        Ok(chan)
    }

    /// Why `drain` of channel `ch` takes nothing: a frame of it is out, or its receive
    /// side moved to the progress thread; `Ok(0)` for a channel without rings.
    #[cold]
    fn nothing_to_drain(chan: &RxChannel, ch: Channel) -> Result<usize, ConduitError> {
        if !chan.rings.is_empty() {
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
            chan.busy.set(true);
        } else {
            frame.release_slots();
        }
        Some(result)
    }
}
