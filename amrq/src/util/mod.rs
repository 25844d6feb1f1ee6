//! Small helpers shared by every layer: waiting, pinning, prefetching.

pub mod affinity;
pub mod backoff;
pub(crate) mod prefetch;

pub use affinity::{pin_to_core, PinError};
pub use backoff::Backoff;
