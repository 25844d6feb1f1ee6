//! Arming for a progress engine: a thread that serves a rank's handlers while the rank's
//! own thread computes arms the rank's AM queues while it holds the rank, then sleeps on
//! the doorbell's word without it, so the rank's thread may poll (and arm and disarm
//! One-poll) before the engine takes the rank back to disarm.

use super::MemConduit;
use crate::conduit::{Arming, Conduit, ConduitError, PollSet};
use std::sync::atomic::{AtomicU32, Ordering};

/// What a progress engine's arming answers.
pub(crate) enum EngineArming<'a> {
    /// Armed: sleep on `wake` while it holds `seen` and [`still_armed`] says so of
    /// `bell` and `bits`; disarm with `token` ([`MemConduit::disarm_for_engine`]).
    Armed {
        wake: &'a AtomicU32,
        seen: u32,
        token: u64,
        bell: &'a super::Doorbell,
        bits: u64,
    },
    /// A frame may be there: look again.
    Ready,
    /// No word to sleep on (a front, whose frames come through two halves): nap.
    Nap,
}

impl MemConduit {
    /// Arms `set` for a progress engine's sleep, as [`Conduit::arm_arrival`] does.
    pub(crate) fn arm_for_engine(&self, set: &PollSet) -> Result<EngineArming<'_>, ConduitError> {
        if self.across.is_some() {
            return Ok(EngineArming::Nap);
        }
        Ok(match self.arm_arrival(set)? {
            Arming::Armed(a) => EngineArming::Armed {
                wake: a.word,
                seen: a.seen,
                token: a.token,
                bell: self.doorbell(),
                bits: set.bits,
            },
            Arming::Ready => EngineArming::Ready,
            Arming::CannotSleep => EngineArming::Nap,
        })
    }

    /// Undoes [`MemConduit::arm_for_engine`] (`token`: what its arming held), leaving
    /// armed the bits that the rank's own One-poll has armed since: its record of them
    /// stays true, so its polls go on reading the summary those bits keep up to date.
    pub(crate) fn disarm_for_engine(&self, set: &PollSet, token: u64) {
        self.doorbell()
            .disarm_sleeper(set.bits, token & !self.one_poll_armed.get());
    }
}

/// True while an engine's arming of `bits` stands: they are armed, and armed for a
/// sleeper (a sender bumps the word). The rank's own polls and waits, made in sections
/// while the engine sleeps, may disarm them; the engine then takes the rank back to arm
/// again instead of sleeping on a word no sender will bump.
pub(crate) fn still_armed(bell: &super::Doorbell, bits: u64) -> bool {
    bell.armed.load(Ordering::Relaxed) & bits == bits
        && bell.sleepers.load(Ordering::Relaxed) & bits == bits
}
