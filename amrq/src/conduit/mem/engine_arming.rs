//! Arming for a progress engine: a thread that serves a rank's handlers while the rank's
//! own thread computes arms the rank's AM queues while it holds the rank, then sleeps on
//! the doorbell's word without it, so the rank's thread may poll (and arm and disarm
//! One-poll) before the engine takes the rank back to disarm.

use super::MemConduit;
use crate::conduit::{Arming, Conduit, ConduitError, PollSet};

impl MemConduit {
    /// Arms `set` for a progress engine's sleep, as [`Conduit::arm_arrival`] does, or
    /// [`Arming::CannotSleep`] for a front, whose frames come through two halves that
    /// one word cannot tell about (its engine naps instead).
    pub(crate) fn arm_for_engine(&self, set: &PollSet) -> Result<Arming<'_>, ConduitError> {
        if self.across.is_some() {
            return Ok(Arming::CannotSleep);
        }
        self.arm_arrival(set)
    }

    /// Undoes [`MemConduit::arm_for_engine`] (`token`: what its `Armed` held), leaving
    /// armed the bits that the rank's own One-poll has armed since: its record of them
    /// stays true, so its polls go on reading the summary those bits keep up to date.
    pub(crate) fn disarm_for_engine(&self, set: &PollSet, token: u64) {
        self.doorbell()
            .disarm_sleeper(set.bits, token & !self.one_poll_armed.get());
    }
}
