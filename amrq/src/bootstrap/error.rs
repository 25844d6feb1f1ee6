//! The bootstrap layer's error type.

/// Why a setup-time collective or a liveness check failed.
///
/// ```
/// use amrq::bootstrap::{BootError, ThreadsBoot};
/// let b = ThreadsBoot::new(2);
/// b.mark_failed(1, "killed by SIGKILL".into());
/// let e = b.check_peers().unwrap_err();
/// assert!(matches!(e, BootError::PeerDead { rank: 1, .. }));
/// assert_eq!(e.to_string(), "rank 1 failed: killed by SIGKILL");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootError {
    /// A rank of the job failed.
    #[error("rank {rank} failed: {cause}")]
    PeerDead {
        /// The rank.
        rank: usize,
        /// What happened to it.
        cause: String,
    },
    /// Ranks did not all arrive in time.
    #[error("{0}")]
    Timeout(String),
    /// Shared memory could not be set up (the message says what to change).
    #[error("{0}")]
    Shm(String),
    /// Rank 0 refused this rank (the message says why), or this rank refused what
    /// claimed to be rank 0.
    #[error("{0}")]
    Refused(String),
    /// The launcher's environment is incomplete or inconsistent.
    #[error("{0}")]
    Env(String),
    /// A rank panicked while holding the bootstrap's lock.
    #[error("a rank panicked during setup")]
    Poisoned,
}
