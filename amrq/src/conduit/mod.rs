//! Conduits move frames between ranks. Everything above this layer talks to a
//! [`Conduit`], never to memory of another rank: a network conduit can implement it.
//!
//! The interface is shaped like UCX's `uct_iface_ops_t`: a conduit describes itself
//! ([`Caps`]), sends never block (a full ring answers [`ConduitError::Busy`] and the layer
//! above decides what to do), and received frames are read in place and handed back
//! explicitly. Long messages deposit into the destination's registered segment, Tag-On
//! messages into its receiver-side pool; One-poll and the interrupt progress thread use
//! a per-rank doorbell. Put, get and remote atomics are the conduit's too where it
//! offers them ([`CapFlags`]), non-blocking with completion as UCX's `_nbx` calls; the
//! RMA layer carries them as AM frames where it does not.
//!
//! Implementations: [`mem::MemConduit`], rings in one memory region, used by the
//! [`threads`] conduit (ranks as threads, heap memory) and by the [`shm`] conduit (ranks
//! as processes of one host, a shared mapping); [`ucx::UcxConduit`], ranks on several
//! hosts over UCX; [`combined::Combined`], a conduit made of a local and a remote one,
//! per destination, which [`cluster`] fills with `shm` and UCX.
//!
//! # How to write a conduit
//!
//! A conduit is a type that implements [`Conduit`] for one rank's endpoint (`Send`,
//! used by one thread), built from a [`ConduitSpec`] (the channels the layers above
//! need, and the sizes of the memory behind them). It implements:
//!
//! - **Self-description**: `rank`, `size`, `caps` (per channel: senders, slots, largest
//!   payload, whether it rings a doorbell or is delivered by interrupts; the segment and
//!   Tag-On sizes; [`CapFlags`]).
//! - **Sending**: `try_send`, `try_send_long` (into the destination's registered
//!   segment), `try_send_tag_on`; each sends all or nothing and answers `Busy` when
//!   there is no room, `NotPermitted` for a sender the channel does not allow, and a
//!   typed error for anything out of range.
//! - **Receiving**: `peek` (one frame in place, its type implementing
//!   [`ReceivedFrame`]), `drain` (the fast path), `poll_set` and `one_poll`, `dropped`.
//!   A frame a correct peer never sends is dropped and recorded against its sender
//!   (`record_fault`, read with `faults`: see [`Faults`]), never returned as the error
//!   of the call that happened to poll; a ring whose frame boundaries are lost is closed,
//!   and its sender told so ([`ConduitError::ChannelClosed`]) when it finds it full.
//! - **Sleeping**: `arm_arrival` and `disarm_arrival` (a futex word to sleep on and a
//!   last look; `wait_for_arrival` is provided on top), and `take_interrupts` with
//!   [`InterruptChannels`] for the progress thread ([`NoInterrupts`] if it has none). A
//!   wake-up that is a file descriptor (a network's) is turned into a futex word by a
//!   helper thread that waits on the descriptor while the rank sleeps, so that a
//!   combined conduit sleeps on all its halves with one `futex_waitv`.
//! - **One-sided operations** (optional, said by [`CapFlags`]): `put_nb`, `get_nb`,
//!   `atomic_nb`, `op_test`, `flush`; the defaults answer `Unsupported`, and the RMA
//!   layer then carries them as AM frames.
//! - **The job**: `segment` (this rank's registered memory), `allgather` and `barrier`
//!   at setup, `check_peers` (a dead peer is reported, never waited for), `peer_left`.
//!
//! It is done when the conformance suite passes (`amrq/tests/conformance/`): one line,
//! `suite!(name, runner, ranks)`, where the runner starts a job of the new conduit.
//! Its cases define the contract: exactly once and in order per pair for every kind of
//! frame on per-sender and shared rings; `Busy` with nothing sent; the limits in `caps`
//! exactly; One-poll in priority order; a sleeping wait woken by an arrival (and not
//! spinning); interrupts without polling; put/get/atomics and their completion (at
//! once, by `op_test`, by `flush`); departed and dead peers; `NotPermitted`.
//!
//! Where the rest lives: completion events (the RMA layer's `Completion`: a counter bumped
//! after a put, a frame after it) and the symmetric allocator
//! (`SegmentAllocator`) are the RMA layer's, built on
//! any conduit's put and atomics; segment registration is the conduit's (a rank has one
//! segment, which every half of a combined conduit registers: the shared mapping is
//! also registered with the network).

pub mod claims;
pub mod doorbell;
pub mod handoff;
pub mod ring;

#[cfg(not(amrq_loom))]
mod api;
#[cfg(not(amrq_loom))]
pub mod cluster;
#[cfg(not(amrq_loom))]
pub mod combined;
#[cfg(not(amrq_loom))]
mod error;
#[cfg(not(amrq_loom))]
mod faults;
#[cfg(not(amrq_loom))]
mod interrupt;
#[cfg(not(amrq_loom))]
pub mod mem;
#[cfg(not(amrq_loom))]
mod one_sided;
#[cfg(not(amrq_loom))]
mod payload_view;
#[cfg(not(amrq_loom))]
mod received;
#[cfg(not(amrq_loom))]
pub mod shm;
#[cfg(not(amrq_loom))]
mod spec;
#[cfg(not(amrq_loom))]
pub mod threads;
#[cfg(not(amrq_loom))]
pub mod ucx;

#[cfg(not(amrq_loom))]
pub use api::{CapFlags, Caps, Channel, ChannelCaps, Conduit, Message, PollSet, Rank, Senders};
#[cfg(not(amrq_loom))]
pub use error::ConduitError;
#[cfg(not(amrq_loom))]
pub(crate) use faults::FaultLog;
#[cfg(not(amrq_loom))]
pub use faults::{Fault, FaultKind, Faults, RECENT_FAULTS};
#[cfg(not(amrq_loom))]
pub use interrupt::{Armed, Arming, InterruptAlarm, InterruptChannels, NoFrame, NoInterrupts};
#[cfg(not(amrq_loom))]
pub use one_sided::{AtomicOp, OpToken, Started};
#[cfg(not(amrq_loom))]
pub use payload_view::PayloadView;
#[cfg(not(amrq_loom))]
pub use received::{ReceivedFrame, TagOnData};
#[cfg(not(amrq_loom))]
pub use spec::{ChannelSpec, Coalescing, ConduitSpec, Delivery, PairRings};
