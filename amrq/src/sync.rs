//! Atomics shim: `std` atomics normally, loom's under `cfg(amrq_loom)`, so the loom
//! models in `tests/loom_ring.rs` run the very same ring algorithm, and
//! `tests/loom_calls.rs` the same hand-off of a thread's call (crossbeam-epoch's
//! `primitive` module does the same).

#[cfg(amrq_loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(not(amrq_loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
