//! Small helpers shared by every layer: waiting, pinning, prefetching, the tree over
//! the ranks, and the atomicity between a rank's thread and its progress thread.

#[cfg(not(amrq_loom))]
pub mod affinity;
pub mod atomicity;
#[cfg(not(amrq_loom))]
pub mod backoff;
#[cfg(not(amrq_loom))]
pub mod futex;
#[cfg(not(amrq_loom))]
pub mod heap_tree;
#[cfg(not(amrq_loom))]
pub mod membarrier;
#[cfg(not(amrq_loom))]
pub(crate) mod prefetch;
#[cfg(not(amrq_loom))]
mod say;
#[cfg(not(amrq_loom))]
pub mod shm;
#[cfg(not(amrq_loom))]
pub mod slice;

#[cfg(not(amrq_loom))]
pub use affinity::{pin_to_core, PinError};
#[cfg(not(amrq_loom))]
pub use backoff::{Backoff, SLEEP_BACKSTOP};
#[cfg(not(amrq_loom))]
pub use say::say;

/// Locks `m`, whether or not a thread panicked while holding it: its callers go on
/// with what it holds (an Interrupt queue's drain, a call's landed outcome).
#[cfg(not(amrq_loom))]
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
