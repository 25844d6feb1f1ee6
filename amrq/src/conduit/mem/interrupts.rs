//! The receive side of a rank's Interrupt channels, moved out of its endpoint for a
//! progress thread (selective interrupts, RQ §2.2). It drains those channels; when they
//! are idle, the thread arms the rank's doorbell for them through an [`Alarm`] and
//! sleeps on the doorbell's shared futex word: a sender rings (and wakes) only when
//! armed, so its fast path makes no system call.

use super::{MemConduit, MemFrame};
use crate::conduit::{Armed, Channel, Conduit, ConduitError, InterruptAlarm, InterruptChannels};

/// The Interrupt channels of one rank, for its progress thread. `Send`: move it there.
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptChannels};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// let mut eps = threads::endpoints_for(1, &spec).unwrap();
/// let rx: amrq::conduit::mem::InterruptRx = eps[0].take_interrupts().unwrap();
/// assert!(!rx.any_ready());
/// ```
pub struct InterruptRx {
    view: MemConduit,
    channels: Vec<Channel>,
    bits: u64,
}

impl std::fmt::Debug for InterruptRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptRx")
            .field("channels", &self.channels)
            .finish()
    }
}

impl InterruptRx {
    pub(super) fn new(view: MemConduit, channels: Vec<Channel>) -> Self {
        let bits = channels.iter().fold(0, |b, &ch| {
            b | crate::conduit::ConduitSpec::doorbell_bit(ch)
        });
        Self {
            view,
            channels,
            bits,
        }
    }
}

impl InterruptChannels for InterruptRx {
    type Frame<'a> = MemFrame<'a>;
    type Alarm = Alarm;

    fn rank(&self) -> usize {
        self.view.rank()
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    fn any_ready(&self) -> bool {
        self.channels
            .iter()
            .any(|&ch| self.view.rx[ch].next_ready().is_some())
    }

    fn take(&self) -> Result<Option<(Channel, MemFrame<'_>)>, ConduitError> {
        for &ch in &self.channels {
            if let Some(frame) = self.view.peek(ch)? {
                // A frame flagged interrupt is delivered as a frame of the channel it
                // was sent to (checked when it was taken).
                let of = match self.view.caps.interrupt_channel == Some(ch) {
                    true => frame.hidden_word() as Channel,
                    false => ch,
                };
                return Ok(Some((of, frame)));
            }
        }
        Ok(None)
    }

    fn alarm(&self) -> Alarm {
        Alarm {
            doorbell: self.view.doorbell,
            bits: self.bits,
            _owner: self.view._owner.clone(),
        }
    }
}

/// The doorbell of a rank's Interrupt channels: arm, sleep, disarm, without the
/// channels' consumer states (`Send + Sync`).
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptAlarm, InterruptChannels};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// let mut eps = threads::endpoints_for(1, &spec).unwrap();
/// let alarm: amrq::conduit::mem::Alarm = eps[0].take_interrupts().unwrap().alarm();
/// let armed = alarm.arm();
/// alarm.disarm(armed);
/// ```
#[derive(Debug)]
pub struct Alarm {
    doorbell: *const super::Doorbell,
    bits: u64,
    _owner: super::RegionOwner,
}

// SAFETY: the doorbell is only touched atomically and lives in the region `_owner`
// keeps alive; nothing else is reached through the pointer.
unsafe impl Send for Alarm {}
// SAFETY: as above.
unsafe impl Sync for Alarm {}

impl Alarm {
    fn doorbell(&self) -> &super::Doorbell {
        // SAFETY: see the `Send` impl.
        unsafe { &*self.doorbell }
    }
}

impl InterruptAlarm for Alarm {
    /// Arms the channels' bits for a sleeper ([`super::Doorbell::arm_sleeper`]).
    fn arm(&self) -> Armed<'_> {
        let d = self.doorbell();
        let (seen, token) = d.arm_sleeper(self.bits);
        Armed {
            word: &d.wake,
            seen,
            token,
        }
    }

    fn disarm(&self, armed: Armed<'_>) {
        self.doorbell().disarm_sleeper(self.bits, armed.token);
    }
}
