//! The receive side of a rank's Interrupt channels, moved out of its endpoint for a
//! progress thread (selective interrupts, RQ §2.2). It drains those channels; when they
//! are idle, the thread arms the rank's doorbell for them through an [`Alarm`] and
//! sleeps on the doorbell's shared futex word: a sender rings (and wakes) only when
//! armed, so its fast path makes no system call.

use super::across::job_frame;
use super::{MemConduit, MemFrame};
use crate::conduit::combined::{CombinedAlarm, CombinedInterrupts};
use crate::conduit::ucx::{UcxAlarm, UcxInterrupts};
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
pub struct InterruptRx(Rx);

/// Where the channels are: this endpoint's rings, or both halves of the cluster a
/// front endpoint hands its calls to (`across.rs`).
enum Rx {
    Here {
        view: Box<MemConduit>,
        channels: Vec<Channel>,
        bits: u64,
    },
    Across(Box<CombinedInterrupts<InterruptRx, UcxInterrupts>>),
}

impl std::fmt::Debug for InterruptRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptRx")
            .field("channels", &self.channels())
            .finish()
    }
}

impl InterruptRx {
    pub(super) fn new(view: MemConduit, channels: Vec<Channel>) -> Self {
        let bits = channels.iter().fold(0, |b, &ch| {
            b | crate::conduit::ConduitSpec::doorbell_bit(ch)
        });
        Self(Rx::Here {
            view: Box::new(view),
            channels,
            bits,
        })
    }

    /// The Interrupt channels of both halves of a cluster, for a front endpoint.
    pub(super) fn across(both: CombinedInterrupts<InterruptRx, UcxInterrupts>) -> Self {
        Self(Rx::Across(Box::new(both)))
    }
}

impl InterruptChannels for InterruptRx {
    type Frame<'a> = MemFrame<'a>;
    type Alarm = Alarm;

    fn rank(&self) -> usize {
        match &self.0 {
            Rx::Here { view, .. } => view.rank(),
            Rx::Across(both) => both.rank(),
        }
    }

    fn channels(&self) -> &[Channel] {
        match &self.0 {
            Rx::Here { channels, .. } => channels,
            Rx::Across(both) => both.channels(),
        }
    }

    fn any_ready(&self) -> bool {
        match &self.0 {
            Rx::Here { view, channels, .. } => channels
                .iter()
                .any(|&ch| view.rx[ch].next_ready().is_some()),
            Rx::Across(both) => both.any_ready(),
        }
    }

    fn take(&self) -> Result<Option<(Channel, MemFrame<'_>)>, ConduitError> {
        let (view, channels) = match &self.0 {
            Rx::Here { view, channels, .. } => (view, channels),
            Rx::Across(both) => return Ok(both.take()?.map(|(ch, f)| (ch, job_frame(f)))),
        };
        for &ch in channels {
            if let Some(frame) = view.peek(ch)? {
                // A frame flagged interrupt is delivered as a frame of the channel it
                // was sent to (checked when it was taken).
                let of = match view.caps.interrupt_channel == Some(ch) {
                    true => frame.hidden_word() as Channel,
                    false => ch,
                };
                return Ok(Some((of, frame)));
            }
        }
        Ok(None)
    }

    fn alarm(&self) -> Alarm {
        match &self.0 {
            Rx::Here { view, bits, .. } => Alarm(Doorbell::Here {
                doorbell: view.doorbell,
                bits: *bits,
                _owner: view._owner.clone(),
            }),
            Rx::Across(both) => Alarm(Doorbell::Across(Box::new(both.alarm()))),
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
pub struct Alarm(Doorbell);

impl std::fmt::Debug for Alarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let across = matches!(self.0, Doorbell::Across(_));
        f.debug_struct("Alarm").field("across", &across).finish()
    }
}

/// What an [`Alarm`] arms: this rank's doorbell, or both halves' alarms of a cluster.
enum Doorbell {
    Here {
        doorbell: *const super::Doorbell,
        bits: u64,
        _owner: super::RegionOwner,
    },
    Across(Box<CombinedAlarm<Alarm, UcxAlarm>>),
}

// SAFETY: the doorbell is only touched atomically and lives in the region `_owner`
// keeps alive; nothing else is reached through the pointer. The network half's alarm
// is `Send + Sync` itself (checked below), and the other half is an `Alarm`.
unsafe impl Send for Alarm {}
const _: () = {
    fn send_and_sync<T: Send + Sync>() {}
    let _ = send_and_sync::<UcxAlarm>;
};
// SAFETY: as above.
unsafe impl Sync for Alarm {}

impl InterruptAlarm for Alarm {
    /// Arms the channels' bits for a sleeper ([`super::Doorbell::arm_sleeper`]).
    fn arm(&self) -> Armed<'_> {
        match &self.0 {
            Doorbell::Here { doorbell, bits, .. } => {
                // SAFETY: see the `Send` impl.
                let d = unsafe { &**doorbell };
                let (seen, token) = d.arm_sleeper(*bits, false);
                Armed {
                    word: &d.wake,
                    seen,
                    token,
                }
            }
            Doorbell::Across(both) => both.arm(),
        }
    }

    fn disarm(&self, armed: Armed<'_>) {
        match &self.0 {
            Doorbell::Here { doorbell, bits, .. } => {
                // SAFETY: see the `Send` impl.
                unsafe { &**doorbell }.disarm_sleeper(*bits, armed.token)
            }
            Doorbell::Across(both) => both.disarm(armed),
        }
    }

    fn sleep_if(&self, still_idle: impl FnOnce() -> bool, timeout: std::time::Duration) {
        match &self.0 {
            Doorbell::Here { .. } => {
                let armed = self.arm();
                if still_idle() {
                    crate::util::futex::wait(armed.word, armed.seen, timeout);
                }
                self.disarm(armed);
            }
            Doorbell::Across(both) => both.sleep_if(still_idle, timeout),
        }
    }
}
