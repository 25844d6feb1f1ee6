//! Atomics shim: `std` atomics normally, loom's under `cfg(amrq_loom)`, so the loom
//! models in `tests/loom_ring.rs` run the very same ring algorithm (crossbeam-epoch's
//! `primitive` module does the same).

#[cfg(amrq_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU64, Ordering};
#[cfg(not(amrq_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU64, Ordering};
