//! The receive side of Interrupt channels and the sleeping waits: what a progress thread
//! drains ([`InterruptChannels`]) and sleeps on ([`InterruptAlarm`], [`Armed`]), what a
//! blocking wait is told when it arms ([`Arming`]), and the empty stand-ins of a conduit
//! without Interrupt channels ([`NoInterrupts`], [`NoFrame`]).

use super::api::drain_taken;
use super::{Channel, ConduitError, PayloadView, Rank, ReceivedFrame, TagOnData};

/// The receive side of a rank's Interrupt channels, moved out of its endpoint
/// ([`Conduit::take_interrupts`](super::Conduit::take_interrupts)) into a progress thread (RQ's selective interrupts).
/// The RQ layer's progress thread is written against this, so it serves any conduit.
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptChannels, Message, ReceivedFrame};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// let mut eps = threads::endpoints_for(1, &spec).unwrap();
/// let rx = eps[0].take_interrupts().unwrap();
/// eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[1], payload: &[] }).unwrap();
/// let mut seen = 0;
/// rx.drain(10, |_ch, f| -> Result<(), amrq::conduit::ConduitError> { seen += f.args()[0]; Ok(()) }).unwrap();
/// assert_eq!(seen, 1);
/// ```
pub trait InterruptChannels: Send + 'static {
    /// A received frame, borrowed from the view.
    type Frame<'a>: ReceivedFrame<'a>
    where
        Self: 'a;
    /// What the progress thread sleeps on while it does not hold the view.
    type Alarm: InterruptAlarm;

    /// The rank whose channels these are.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptChannels};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(2, &spec).unwrap();
    /// assert_eq!(eps[1].take_interrupts().unwrap().rank(), 1);
    /// ```
    fn rank(&self) -> Rank;
    /// The channels this view drains.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptChannels};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(1, &spec).unwrap();
    /// assert_eq!(eps[0].take_interrupts().unwrap().channels(), [1]);
    /// ```
    fn channels(&self) -> &[Channel];
    /// True if a frame waits on one of the channels.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptChannels, Message};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(1, &spec).unwrap();
    /// let rx = eps[0].take_interrupts().unwrap();
    /// assert!(!rx.any_ready());
    /// eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[], payload: &[] }).unwrap();
    /// assert!(rx.any_ready());
    /// ```
    fn any_ready(&self) -> bool;
    /// The next frame of the channels, in place, and the channel it belongs to (for a
    /// frame flagged [`Message::INTERRUPT`](super::Message::INTERRUPT), the channel it was sent to); the caller
    /// releases it. One frame out at a time.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptChannels, Message, ReceivedFrame};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(1, &spec).unwrap();
    /// let rx = eps[0].take_interrupts().unwrap();
    /// eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[3], payload: &[] }).unwrap();
    /// let (ch, f) = rx.take().unwrap().unwrap();
    /// assert_eq!((ch, f.args()), (0, &[3][..]));
    /// f.release();
    /// ```
    #[allow(clippy::type_complexity)]
    fn take(&self) -> Result<Option<(Channel, Self::Frame<'_>)>, ConduitError>;
    /// The sleeping side of this view, usable while another thread holds the view.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptAlarm, InterruptChannels};
    /// use std::time::Duration;
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(1, &spec).unwrap();
    /// let rx = eps[0].take_interrupts().unwrap();
    /// // The progress thread sleeps on the alarm while nothing is ready (here: 1 ms at most).
    /// rx.alarm().sleep_if(|| !rx.any_ready(), Duration::from_millis(1));
    /// ```
    fn alarm(&self) -> Self::Alarm;

    /// Runs `f` on up to `budget` frames ([`InterruptChannels::take`]), removing each
    /// after `f` returns (also when it fails: its error is returned after the frame is
    /// removed). Returns how many ran.
    fn drain<E, F>(&self, budget: usize, mut f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(Channel, &Self::Frame<'_>) -> Result<(), E>,
    {
        drain_taken(
            budget,
            || self.take(),
            |(ch, frame)| f(*ch, frame),
            |(_, frame)| frame.release(),
        )
    }
}

/// The sleeping side of a rank's Interrupt channels (`Send + Sync`).
///
/// ```
/// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptAlarm, InterruptChannels};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// let mut eps = threads::endpoints_for(1, &spec).unwrap();
/// let alarm = eps[0].take_interrupts().unwrap().alarm();
/// let armed = alarm.arm(); // senders now wake the word's sleepers
/// alarm.disarm(armed);
/// ```
pub trait InterruptAlarm: Send + Sync + 'static {
    /// Arms the channels' wake-up: a sender that delivers after this changes the
    /// returned word.
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptAlarm, InterruptChannels, Message};
    /// use std::sync::atomic::Ordering;
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(1, &spec).unwrap();
    /// let alarm = eps[0].take_interrupts().unwrap().alarm();
    /// let armed = alarm.arm();
    /// eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[], payload: &[] }).unwrap();
    /// assert_ne!(armed.word.load(Ordering::Acquire), armed.seen); // the sender rang
    /// alarm.disarm(armed);
    /// ```
    fn arm(&self) -> Armed<'_>;
    /// Undoes [`InterruptAlarm::arm`].
    ///
    /// ```
    /// use amrq::conduit::{threads, ChannelSpec, Conduit, ConduitSpec, Delivery, InterruptAlarm, InterruptChannels};
    /// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// let mut eps = threads::endpoints_for(1, &spec).unwrap();
    /// let alarm = eps[0].take_interrupts().unwrap().alarm();
    /// let armed = alarm.arm();
    /// alarm.disarm(armed); // back to quiet sends: no doorbell atomics
    /// ```
    fn disarm(&self, armed: Armed<'_>);

    /// Arms, then, if `still_idle()` (a last look, made after arming so that no
    /// arrival is missed) says so, sleeps until a sender rings or `timeout` passes;
    /// disarms before returning.
    fn sleep_if(&self, still_idle: impl FnOnce() -> bool, timeout: std::time::Duration) {
        let armed = self.arm();
        if still_idle() {
            crate::util::futex::wait(armed.word, armed.seen, timeout);
        }
        self.disarm(armed);
    }
}

/// A blocking wait, armed: the futex word to sleep on and the value it had when armed
/// (a sender that delivers after the arm changes it, and wakes the word's sleepers),
/// and what the conduit needs to disarm. Several conduits' words are slept on together
/// with `futex_waitv` ([`crate::util::futex::wait_any`]): that is how a conduit made of
/// two sleeps on both.
///
/// ```
/// use amrq::conduit::{threads, Arming, ChannelSpec, Conduit, ConduitSpec};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true)]);
/// let eps = threads::endpoints_for(1, &spec).unwrap();
/// let set = eps[0].poll_set(&[0]).unwrap();
/// if let Arming::Armed(armed) = eps[0].arm_arrival(&set).unwrap() {
///     // A waiter would sleep on armed.word while it still holds armed.seen.
///     eps[0].disarm_arrival(&set, armed);
/// }
/// ```
#[derive(Debug)]
pub struct Armed<'a> {
    /// The word (it may be in memory shared with other processes).
    pub word: &'a std::sync::atomic::AtomicU32,
    /// Its value when armed.
    pub seen: u32,
    /// The conduit's own (what it armed).
    pub token: u64,
}

/// What arming a blocking wait answers ([`Conduit::arm_arrival`](super::Conduit::arm_arrival)).
///
/// ```
/// use amrq::conduit::{threads, Arming, ChannelSpec, Conduit, ConduitSpec, Message};
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true)]); // it rings
/// let eps = threads::endpoints_for(1, &spec).unwrap();
/// let set = eps[0].poll_set(&[0]).unwrap();
/// eps[0].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[], payload: &[] }).unwrap();
/// assert!(matches!(eps[0].arm_arrival(&set).unwrap(), Arming::Ready)); // do not sleep
/// ```
#[derive(Debug)]
pub enum Arming<'a> {
    /// Armed: sleep on the word, then disarm.
    Armed(Armed<'a>),
    /// A frame may be there already: do not sleep (nothing is armed).
    Ready,
    /// This set cannot be slept on (a channel of it rings no doorbell): yield instead.
    CannotSleep,
}

/// For a conduit without Interrupt channels: no value of this type exists, so
/// [`Conduit::take_interrupts`](super::Conduit::take_interrupts) always answers `None`.
///
/// ```
/// use amrq::conduit::{threads, Conduit};
/// // A conduit without Interrupt channels answers None; this type has no value.
/// let mut eps = threads::endpoints(1, &[16]).unwrap();
/// assert!(eps[0].take_interrupts().is_none());
/// ```
#[derive(Debug)]
pub enum NoInterrupts {}

impl InterruptChannels for NoInterrupts {
    type Frame<'a> = NoFrame;
    type Alarm = NoInterrupts;
    fn rank(&self) -> Rank {
        match *self {}
    }
    fn channels(&self) -> &[Channel] {
        match *self {}
    }
    fn any_ready(&self) -> bool {
        match *self {}
    }
    fn take(&self) -> Result<Option<(Channel, NoFrame)>, ConduitError> {
        match *self {}
    }
    fn alarm(&self) -> Self::Alarm {
        match *self {}
    }
}

impl InterruptAlarm for NoInterrupts {
    fn arm(&self) -> Armed<'_> {
        match *self {}
    }
    fn disarm(&self, _: Armed<'_>) {
        match *self {}
    }
}

/// The frame type of [`NoInterrupts`]: none exists.
///
/// ```
/// use amrq::conduit::{InterruptChannels, NoInterrupts};
/// // NoInterrupts' frames: an uninhabited type, so code over it compiles to nothing.
/// fn never(rx: &NoInterrupts) -> bool { rx.any_ready() }
/// let _ = never;
/// ```
#[derive(Debug)]
pub enum NoFrame {}

impl<'a> ReceivedFrame<'a> for NoFrame {
    fn source(&self) -> Rank {
        match *self {}
    }
    fn tag(&self) -> u16 {
        match *self {}
    }
    fn flags(&self) -> u8 {
        match *self {}
    }
    fn is_long(&self) -> bool {
        match *self {}
    }
    fn args(&self) -> &[u64] {
        match *self {}
    }
    fn payload(&self) -> PayloadView<'_> {
        match *self {}
    }
    fn is_tag_on(&self) -> bool {
        match *self {}
    }
    fn release(self) {
        match self {}
    }
    fn keep(self) -> Option<TagOnData<'a>> {
        match self {}
    }
}
