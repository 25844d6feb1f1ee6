//! The Interrupt channels of a UCX endpoint, for a progress thread: [`UcxInterrupts`]
//! reads them after progressing the worker it shares with the endpoint, and
//! [`UcxAlarm`] sleeps until a frame or a network event comes.

use super::conduit::pump;
use super::net::Net;
use super::rx::Shared;
use super::{auth, sys};
use crate::conduit::mem::{InterruptRx, MemFrame};
use crate::conduit::{Armed, Channel, ConduitError, InterruptAlarm, InterruptChannels, Rank};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The receive side of the Interrupt channels of a UCX endpoint, for a progress
/// thread: it progresses the worker (shared with the owner: thread mode MULTI), then
/// reads the local queues' Interrupt channels.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64), ChannelSpec::new(16).delivery(amrq::conduit::Delivery::Interrupt)]);
/// use amrq::conduit::InterruptChannels;
/// let mut eps = ucx::threads(1, &spec, &settings).unwrap();
/// let rx: ucx::UcxInterrupts = eps[0].take_interrupts().unwrap();
/// assert_eq!(rx.channels(), [1]);
/// ```
pub struct UcxInterrupts {
    rx: InterruptRx,
    net: Arc<Net>,
    shared: Arc<Shared>,
    waker: super::waker::WakerHandle,
}

impl UcxInterrupts {
    pub(super) fn new(
        rx: InterruptRx,
        net: Arc<Net>,
        shared: Arc<Shared>,
        waker: super::waker::WakerHandle,
    ) -> Self {
        Self {
            rx,
            net,
            shared,
            waker,
        }
    }
}

impl std::fmt::Debug for UcxInterrupts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UcxInterrupts").finish_non_exhaustive()
    }
}

impl InterruptChannels for UcxInterrupts {
    type Frame<'a> = MemFrame<'a>;
    type Alarm = UcxAlarm;

    fn rank(&self) -> Rank {
        self.rx.rank()
    }

    fn channels(&self) -> &[Channel] {
        self.rx.channels()
    }

    fn any_ready(&self) -> bool {
        pump(&self.net, &self.shared, auth::PROGRESS);
        self.rx.any_ready()
    }

    fn take(&self) -> Result<Option<(Channel, MemFrame<'_>)>, ConduitError> {
        pump(&self.net, &self.shared, auth::PROGRESS);
        self.rx.take()
    }

    fn alarm(&self) -> UcxAlarm {
        UcxAlarm {
            alarm: self.rx.alarm(),
            net: self.net.clone(),
            waker: self.waker.clone(),
        }
    }
}

/// The sleeping side of [`UcxInterrupts`]: the local queues' doorbell, which the
/// waker also rings when the worker's descriptor becomes readable.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64), ChannelSpec::new(16).delivery(amrq::conduit::Delivery::Interrupt)]);
/// use amrq::conduit::{InterruptAlarm, InterruptChannels};
/// let mut eps = ucx::threads(1, &spec, &settings).unwrap();
/// let alarm: ucx::UcxAlarm = eps[0].take_interrupts().unwrap().alarm();
/// alarm.sleep_if(|| true, std::time::Duration::from_millis(1));
/// ```
pub struct UcxAlarm {
    alarm: crate::conduit::mem::Alarm,
    net: Arc<Net>,
    waker: super::waker::WakerHandle,
}

impl InterruptAlarm for UcxAlarm {
    fn arm(&self) -> Armed<'_> {
        let armed = self.alarm.arm();
        // SAFETY: a live worker (thread mode MULTI: shared with the owner).
        if unsafe { (self.net.ucp.ucp_worker_arm)(self.net.worker) } != sys::UCS_OK {
            // Events wait already: make the sleep end at once.
            // ORDERING: Release, as a sender's bump of the word.
            armed.word.fetch_add(1, Ordering::Release);
        }
        self.waker.arm();
        armed
    }

    fn disarm(&self, armed: Armed<'_>) {
        self.waker.disarm();
        self.alarm.disarm(armed);
    }
}
