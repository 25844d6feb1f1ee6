//! The UCX conduit: ranks on different hosts, over UCX's UCP API (loaded at run time:
//! see its `sys` module).
//!
//! How amrq's frames and operations map onto UCP:
//!
//! | amrq | UCP |
//! |---|---|
//! | Short / Medium frame | one eager `ucp_am_send_nbx` (AM id 0): header = source, channel, tag, flags, args; data = payload |
//! | a pair's first messages | UDP datagrams carrying the same messages, until the pair connects (`datagram` module; AM id 6 sends those not acknowledged again over the new endpoint) |
//! | small frames to one rank, coalesced | one eager Active Message (AM id 5): header = source; data = the frames, each with its header ([`Coalescing`](crate::conduit::Coalescing)) |
//! | Long frame | the same Active Message, its payload written into the receiver's segment at the offset by the receiver before the frame is queued (the data and the header are one message, so their order needs no fence) |
//! | Tag-On frame | the same, its payload put in a block of the receiver's pool; blocks come back as credits |
//! | receive queues | the ring conduit's own rings in local memory, filled by the AM callback ([`rx`](self) module): peek, drain, One-poll, priorities, permissions behave as on `shm` |
//! | flow control | per (peer, channel) credits: the sender follows the receiver's ring, the receiver returns its head (AM id 1); a full ring answers `Busy`, nothing sent |
//! | put / get / atomics | `ucp_put_nbx`, `ucp_get_nbx`, `ucp_atomic_op_nbx` with the segment keys exchanged at start-up; completion by request and `ucp_worker_flush_nbx` |
//! | sleeping | `ucp_worker_arm` and the worker's event descriptor, turned into the local queues' futex word by a helper thread ([`waker`](self) module) |
//! | Interrupt queues | the progress thread progresses the worker too (thread mode MULTI) |
//! | setup barrier / all-gather, leaving | Active Messages (ids 2 and 3), ordered after the frames on each endpoint |
//! | who may send | every message's header ends in a MAC under a key derived from the job key, and a growing sequence number (`auth`): forged or replayed messages are dropped and recorded as faults naming the rank they claim |
//!
//! Progress: UCX moves data only inside a call on the worker. An amrq call that waits,
//! flushes, sends alone or finds no room progresses it, and so does a poll that finds
//! no frame waiting (or has found frames 16 times in a row), and the progress thread
//! when the job has Interrupt queues; a rank that computes for a long time without
//! calling amrq delays the gets and atomics aimed at it (over tcp they are messages its
//! worker answers).
//!
//! | file | holds |
//! |---|---|
//! | `sys/` | the hand-written UCP bindings, loaded with `dlopen`, and their check against the headers |
//! | `net.rs` | a rank's UCX context, worker, its endpoint to itself, and the endpoints and keys made when a pair connects |
//! | `datagram.rs` | a pair's first messages as UDP datagrams, numbered, acknowledged, sent again; the connection they lead to |
//! | `wire.rs` | the Active Messages' headers, and batches of frames |
//! | `auth.rs` | the MAC every message carries: only the job's ranks get in |
//! | `outbox.rs` | the batches of small frames waiting per destination |
//! | `rx.rs` | the local queues, the AM callbacks' work, the credits |
//! | `conduit.rs` | [`UcxConduit`]: sends, receives, sleeping, leaving |
//! | `collectives.rs` | the set-up all-gather and barrier, over a tree |
//! | `ops.rs` | put, get, atomics and their completion |
//! | `waker.rs` | the event descriptor turned into a futex word |
//! | `start.rs` | making the endpoints: [`open`], [`Opened::connect`], [`threads`], [`join`] across hosts |

mod auth;
mod collectives;
mod conduit;
mod datagram;
mod interrupts;
mod mac;
mod net;
mod ops;
mod outbox;
mod rx;
mod start;
pub(crate) mod sys;
#[cfg(test)]
mod test_ranks;
mod waker;
mod wire;

pub use conduit::{RawMessage, UcxConduit};
pub use datagram::{FIRST_MESSAGES, MAX_BYTES};
pub use interrupts::{UcxAlarm, UcxInterrupts};
pub use net::Card;
pub use outbox::Coalesced;
pub(crate) use start::{form, wire_up};
pub use start::{join, open, open_on, threads, Opened, SegmentMemory};

/// This process exits once its job ends ([`exit_follows_job`]).
static EXIT_FOLLOWS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that this process exits as soon as its job ends (`Config::run`'s ranks): a
/// job that ends quiescent then leaves its UCX worker to the exit instead of
/// destroying it (UCX 1.13 can assert destroying one that still owes a peer a
/// connection set-up reply, which connecting on first use leaves possible at the end).
pub(crate) fn exit_follows_job() {
    EXIT_FOLLOWS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// True once [`exit_follows_job`] was said.
pub(crate) fn exit_follows() -> bool {
    EXIT_FOLLOWS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether UCX can be used on this machine: `Err` says what to install.
///
/// ```
/// match amrq::conduit::ucx::available() {
///     Ok(version) => println!("UCX {version}"),
///     Err(why) => println!("no UCX: {why}"),
/// }
/// ```
pub fn available() -> Result<String, sys::Missing> {
    let (a, b, c) = sys::Ucp::get()?.version();
    Ok(format!("{a}.{b}.{c}"))
}
