//! A conduit over rings in one memory region: per (sender → receiver, channel) a
//! single-producer/single-consumer [`ring`](crate::conduit::ring), plus every rank's
//! registered segment, all mapped in every rank. The `threads` conduit puts them on the
//! heap; the `shm` conduit maps them from /dev/shm. The hot path is the same code in both.
//!
//! A *shared* channel has instead one ring per receiver that all senders write into,
//! reserving slots with a [`SharedProducer`](crate::conduit::ring::SharedProducer); the first arg word of each of its frames
//! is hidden and names the sender (checked against the channel's senders on receipt).
//!
//! A rank's endpoint keeps its producer and consumer states in `Local` cells: an
//! endpoint is used by one thread (`Send`, not `Sync`), and every operation takes
//! `&self`, so a handler can reply while the frame it handles is still borrowed in place.
//!
//! | file | holds |
//! |---|---|
//! | `across.rs` | the front of a job across hosts: an endpoint without rings that hands every call to the cluster conduit behind it |
//! | `region.rs` | where every ring, doorbell, Tag-On pool and own-ring directory sits in a region (offsets only) |
//! | `doorbell.rs` | [`Doorbell`]: a rank's words for One-poll and sleeping receivers, armed by it and rung by its senders |
//! | `heap.rs` | [`HeapRegion`]: zeroed private memory, the `threads` conduit's region |
//! | `endpoint.rs` | [`MemConduit`]: one rank's endpoint, built from [`Parts`] |
//! | `channels.rs` | the per-ring states of an endpoint: send side, receive side, the round-robin scan of a channel |
//! | `refusals.rs` | why a send is refused: the checks behind the sends' fast tests, and the refusal a network conduit answers as they would |
//! | `conduit.rs` | the [`Conduit`](crate::conduit::Conduit) implementation: send checks, receive checks, One-poll, sleeping |
//! | `injector.rs` | [`Injector`]: a sender into a shared channel for another thread of the rank, lock-free beside the endpoint's own sends |
//! | `lane.rs` | [`ExpressLane`]: one per-pair ring's addresses, for a send compiled into its caller (the C header's inline sends) |
//! | `receive.rs` | the receive loop of `drain`: ring by ring, Express frames on plain rings handed out after one test; `drain_one`, a wait's one reply in one look per ring |
//! | `one_sided.rs` | put, get and atomics: copies into mapped segments, processor atomics; [`Segments`], the same for another thread of the rank |
//! | `outbox.rs` | a front's outbox: its threads' frames, which its thread sends on through the cluster |
//! | `thread_op.rs` | `ThreadOp`: a front's thread's put, get, atomic or enqueue, carried by the outbox and started by the rank's thread |
//! | `own_rings.rs` | own rings on a host of many ranks: a sender's move from the shared ring to its own, and the receiver's check of it |
//! | `frame.rs` | [`MemFrame`], a received frame in place, and the checks of its payload |
//! | `tag_on.rs` | [`TagOnPool`], the receiver-side blocks of Tag-On messages |
//! | `interrupts.rs` | [`InterruptRx`], the receive side of the Interrupt channels moved to a progress thread |

mod across;
mod channels;
mod conduit;
mod doorbell;
mod endpoint;
mod engine_arming;
mod frame;
mod heap;
mod injector;
mod interrupts;
mod lane;
mod one_sided;
mod outbox;
pub mod own_rings;
#[cfg(test)]
mod own_rings_tests;
mod receive;
mod refusals;
mod region;
mod tag_on;
#[cfg(test)]
mod tests;
mod thread_op;

pub use doorbell::Doorbell;
pub use endpoint::{MemConduit, Parts, RegionOwner};
pub(crate) use engine_arming::{arming_stands, sleeper_stands, EngineArming};
pub use frame::MemFrame;
pub use heap::HeapRegion;
pub(crate) use injector::check_peer;
pub use injector::Injector;
pub use interrupts::{Alarm, InterruptRx};
pub use lane::ExpressLane;
pub use one_sided::Segments;
pub(crate) use outbox::Waker;
pub use region::{RegionHeader, RegionLayout, REGION_MAGIC};
pub use tag_on::TagOnPool;
pub(crate) use thread_op::{ThreadOp, ThreadOpKind};

pub(crate) use endpoint::{channel_max_payload, max_payload};
