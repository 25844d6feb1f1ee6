//! Small helpers shared by every layer: waiting, pinning, prefetching.

pub mod affinity;
pub mod backoff;
pub mod futex;
pub mod membarrier;
pub(crate) mod prefetch;
mod say;
pub mod shm;

pub use affinity::{pin_to_core, PinError};
pub use backoff::{Backoff, SLEEP_BACKSTOP};
pub use say::say;
