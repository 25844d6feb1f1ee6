//! # amrq — Active Messages on Remote Queues
//!
//! A communication runtime for parallel programs, built in the layers of the classic
//! papers:
//!
//! | module | layer |
//! |---|---|
//! | [`bootstrap`] | who am I (launcher environments), how the ranks of a host meet in shared memory, setup-time collectives, dead peers |
//! | [`conduit`] | moves frames between ranks: lock-free rings ([`conduit::ring`]) in a memory region with registered segments, doorbells and Tag-On pools ([`conduit::mem`]); ranks as threads ([`conduit::threads`]) or processes ([`conduit::shm`]) |
//! | [`rq`] | Remote Queues: `enqueue` / `dequeue` / `read_queue` / `delete_queue` on named queues, message kinds, inlined polling, One-poll, selective interrupts |
//! | [`am`] | Active Messages on RQ: handler table, request/reply, Short, Medium and Long, barrier |
//! | [`rma`] | one-sided put/get, remote atomics, completion events, allocation in the registered segments |
//! | [`coll`] | broadcast, reduce, allreduce, scan, gather, allgather, exchange (the barrier is [`am`]'s) |
//! | [`splitc`] | Split-C: global pointers, spread arrays, read/write, split-phase get/put, store and `all_store_sync`, atomic procedures |
//!
//! Above them, a program's way in: [`Config::run`] runs a rank's main wherever the job
//! was started (alone, under `amrun`, `mpirun` or `srun`, on one host or several; as
//! threads with `AMRQ_THREADS=1`), [`Config::join`] gives this process's rank to a main
//! that stays in control, and [`Config::threads`] runs ranks as threads for tests; each
//! gives the rank a [`Setup`], whose [`Setup::start`] returns the [`Job`] that owns every
//! layer. [`Config`] holds the settings (the `AMRQ_*` variables unless the program sets
//! them), [`Error`] is every layer's error, [`launch`] starts and watches rank processes
//! (`amrun`).
//!
//! Each layer uses only the ones below it. An AM request is an enqueue into the
//! destination's AM request queue; a poll is a dequeue plus dispatch (RQ paper, Fig. 3).
//!
//! # Features
//!
//! - `amrun` (off by default): builds the `amrun` launcher (`cargo install amrq
//!   --features amrun`), which needs `clap`. A program that only depends on the library
//!   leaves it off.
//!
//! Across hosts, the UCX half is loaded at run time (`libucp`), so the library builds
//! without UCX installed; a job across hosts then fails at start-up saying so.
//!
//! ```
//! use amrq::prelude::*;
//! use std::cell::Cell;
//!
//! struct State { pong: ReplyHandler, got: Cell<u64> }
//! amrq::Config::new().threads(2, |setup| {
//!     let mut table = HandlerTable::new();
//!     let pong = table.reply("pong", |s: &State, m| { s.got.set(m.arg(0)?); Ok(()) });
//!     let ping = table.request("ping", |s: &State, ctx, m| ctx.reply(s.pong, &[m.arg(0)? + 1]));
//!     let job = setup.start(table, State { pong, got: Cell::new(0) })?;
//!     if job.rank() == 0 {
//!         job.request(1, ping, &[41])?;
//!         job.wait_until(|s| s.got.get() == 42)?;
//!     }
//!     job.barrier()
//! }).unwrap();
//! ```

#![cfg_attr(amrq_loom, allow(dead_code, unused_imports))]

pub(crate) mod sync;

/// The README's and the guide's Rust blocks, compiled and run as doctests.
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../../README.md")]
    struct Readme;
    #[doc = include_str!("../../docs/guide/01-launching.md")]
    struct Launching;
    #[doc = include_str!("../../docs/guide/02-active-messages.md")]
    struct ActiveMessages;
    #[doc = include_str!("../../docs/guide/03-remote-queues.md")]
    struct RemoteQueues;
    #[doc = include_str!("../../docs/guide/04-one-sided.md")]
    struct OneSided;
    #[doc = include_str!("../../docs/guide/05-split-c.md")]
    struct SplitC;
    #[doc = include_str!("../../docs/guide/06-c.md")]
    struct FromC;
    #[doc = include_str!("../../docs/guide/07-across-hosts.md")]
    struct AcrossHosts;
    #[doc = include_str!("../../docs/guide/08-failures.md")]
    struct Failures;
    #[doc = include_str!("../../docs/guide/09-troubleshooting.md")]
    struct Troubleshooting;
    #[doc = include_str!("../../docs/guide/10-tuning.md")]
    struct Tuning;
}

#[cfg(not(amrq_loom))]
pub mod am;
#[cfg(not(amrq_loom))]
pub mod bootstrap;
#[cfg(not(amrq_loom))]
pub mod coll;
pub mod conduit;
#[cfg(not(amrq_loom))]
pub mod launch;
#[cfg(not(amrq_loom))]
pub mod rma;
#[cfg(not(amrq_loom))]
pub mod rq;
#[cfg(not(amrq_loom))]
pub mod splitc;
pub mod util;

#[cfg(not(amrq_loom))]
pub use config::Config;
#[cfg(not(amrq_loom))]
mod error;
#[cfg(not(amrq_loom))]
pub use error::{Error, Result};
#[cfg(not(amrq_loom))]
mod job;
#[cfg(not(amrq_loom))]
pub use job::{EngineCall, EngineJob, Held, Job, Setup};
#[cfg(not(amrq_loom))]
pub mod config;

/// The names most programs need.
#[cfg(not(amrq_loom))]
pub mod prelude {
    pub use crate::am::{
        Am, AmError, Call, Handler, HandlerTable, Msg, Pending, ReplyHandler, ReqCtx,
        RequestHandler, SendHandlerTable,
    };
    pub use crate::conduit::Rank;
    pub use crate::rq::{QueueId, Rq, RqError};
    pub use crate::{Config, EngineJob, Job, Setup};
}
