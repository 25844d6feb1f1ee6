//! Arming for a progress engine: a thread that serves a rank's handlers while the rank's
//! own thread computes arms the rank's AM queues while it holds the rank, then sleeps on
//! the doorbell's word without it, so the rank's thread may poll (and arm and disarm
//! One-poll) before the engine takes the rank back to disarm.

use super::MemConduit;
use crate::conduit::{Arming, Conduit, ConduitError, PollSet};
use std::sync::atomic::{AtomicU32, Ordering};

/// What a progress engine's arming answers.
pub(crate) enum EngineArming<'a> {
    /// Armed: sleep on `wake` while it holds `seen` and [`sleeper_stands`] says so of
    /// `bell` and `bits`; `token`: the bits this arming armed (none if they were
    /// armed already), for [`MemConduit::disarm_for_engine`].
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

/// True while `bits` are armed: a sender of their channels rings (sets the summary, and
/// bumps the word if a sleeper is marked). The rank's own polls, made in sections while
/// the engine sleeps, may disarm them (One-poll's disarm); the engine then disarms what
/// it kept and arms again.
pub(crate) fn arming_stands(bell: &super::Doorbell, bits: u64) -> bool {
    bell.armed.load(Ordering::Relaxed) & bits == bits
}

/// True while `bits` are armed and marked for a sleeper: a sender bumps the word. The
/// sender that wakes the sleeper clears the mark (its claim), and so does the end of
/// the rank's own blocking wait: an engine that finds it gone looks and marks again.
pub(crate) fn sleeper_stands(bell: &super::Doorbell, bits: u64) -> bool {
    arming_stands(bell, bits) && bell.sleepers.load(Ordering::Relaxed) & bits == bits
}
