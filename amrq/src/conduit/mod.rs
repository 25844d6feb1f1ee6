//! Conduits move frames between ranks. Everything above this layer talks to a
//! [`Conduit`], never to memory of another rank: a network conduit can implement it.
//!
//! The interface is shaped like UCX's `uct_iface_ops_t`: a conduit describes itself
//! ([`Caps`]), sends never block (a full ring answers [`ConduitError::Busy`] and the layer
//! above decides what to do), and received frames are read in place and handed back
//! explicitly. Long messages deposit into the destination's registered segment, Tag-On
//! messages into its receiver-side pool; One-poll and the interrupt progress thread use
//! a per-rank doorbell. Put/get and remote atomics are not in the trait yet;
//! [`CapFlags`] says which a conduit offers.
//!
//! Implementations: [`mem::MemConduit`], rings in one memory region, used by the
//! [`threads`] conduit (ranks as threads, heap memory) and by the [`shm`] conduit (ranks
//! as processes of one host, a shared mapping).

pub mod doorbell;
pub mod ring;

#[cfg(not(amrq_loom))]
mod api;
#[cfg(not(amrq_loom))]
mod error;
#[cfg(not(amrq_loom))]
pub mod mem;
#[cfg(not(amrq_loom))]
mod one_sided;
#[cfg(not(amrq_loom))]
pub mod shm;
#[cfg(not(amrq_loom))]
mod spec;
#[cfg(not(amrq_loom))]
pub mod threads;

#[cfg(not(amrq_loom))]
pub use api::{
    Armed, Arming, CapFlags, Caps, Channel, ChannelCaps, Conduit, InterruptAlarm,
    InterruptChannels, Message, NoFrame, NoInterrupts, PollSet, Rank, ReceivedFrame, Senders,
    TagOnData,
};
#[cfg(not(amrq_loom))]
pub use error::ConduitError;
#[cfg(not(amrq_loom))]
pub use one_sided::{AtomicOp, OpToken, Started};
#[cfg(not(amrq_loom))]
pub use spec::{ChannelSpec, ConduitSpec, Delivery};
