//! Split-C (AM paper §2.3; Begel, Buonadonna and Gay, "Split-C for the New
//! Millennium") in Rust: a global address space over the ranks' registered segments,
//! built on [`rma`](crate::rma) and [`coll`](crate::coll).
//!
//! - [`GlobalPtr`]: a typed (rank, segment offset) pair with pointer arithmetic; it holds
//!   no machine address, so it is valid everywhere and travels in messages.
//! - [`SpreadArray`]: one array dealt over all ranks at the same offset, cyclic or
//!   block-cyclic ([`Layout`]), indexed into global pointers.
//! - [`SplitC`]: one rank's context (`MYPROC`, `PROCS`): blocking `read`/`write`,
//!   split-phase `get`/`put` completed by `sync`, reply-free `store` counted by
//!   `store_sync`/`all_store_sync`, the bulk forms of all of them, `all_spread_malloc`,
//!   barriers. A pointer into the rank's own segment is a plain copy; others take the
//!   direct path (a copy into the mapped segment) or the message path (AM frames the
//!   owner serves), by the [`Rma`](crate::rma::Rma) it is made over: what the conduit
//!   can do, or frames forced by [`Rma::over_frames`](crate::rma::Rma::over_frames).
//!   Reductions, scans and broadcasts through [`coll`](crate::coll), a timer, and
//!   atomic procedures ([`SplitC::atomic`]: a handler run at an element's owner).
//!
//! How each operation completes, by path (Begel et al. §4–5):
//!
//! | operation | direct path (mapped segments) | message path (AM frames) | complete |
//! |---|---|---|---|
//! | `read`, `write` | a copy | a request, waited for | on return |
//! | `get` | a copy into this rank's segment | a request; its reply writes the bytes in place when this rank polls it in | after `sync` |
//! | `put` | a copy | a Long request; its reply acks | after `sync` |
//! | `store` | a copy, then an atomic add of its length to the target's store counter | a Long request the target counts; no reply | when the target's `store_sync` counts it |
//!
//! A store on the direct path is countable at the target when the call returns (the
//! count is added, with Release, after the bytes); on the message path the target
//! counts it when it serves the request, which its `store_sync` does while it waits. In
//! neither case must the storing rank do anything more, and a `store_sync` never waits
//! on bytes that have arrived: it polls while it waits.
//!
//! Element types are the plain numbers of [`Word`]: every bit pattern is a value, so a
//! copy of bytes another rank may be writing is still one.

mod ctx;
mod error;
mod ptr;
mod spread;

pub use crate::rma::Word;
pub use ctx::{update_local, SplitC};
pub use error::SplitCError;
pub use ptr::GlobalPtr;
pub use spread::{Layout, SpreadArray};
