//! Who am I, how many are we, and setup-time collectives (barrier, all-gather) that run
//! before the rings can carry anything.
//!
//! Ranks as threads share a [`ThreadsBoot`]; ranks as processes learn their place from
//! the launcher's environment ([`env`](mod@env)), prove they belong to the job
//! ([`key`], [`rendezvous`]) and meet in the job's shared memory ([`shm`](mod@shm)),
//! watching each other's processes ([`liveness`]); ranks on several hosts meet at rank
//! 0's TCP rendezvous instead ([`network`]). [`fault`] points let tests crash
//! any step of it.

pub mod env;
mod error;
pub mod fault;
pub mod key;
pub mod liveness;
pub mod network;
pub mod rendezvous;
pub mod secret;
pub mod shm;
mod socket;
mod threads;

pub use error::BootError;
pub use key::JobKey;
pub use network::NetJob;
pub use shm::ShmJob;
pub use threads::ThreadsBoot;

use std::sync::Arc;

/// The bootstrap a conduit endpoint uses (closed set: no `dyn`).
///
/// ```
/// use amrq::bootstrap::{Boot, ThreadsBoot};
/// use std::sync::Arc;
/// let boot = Boot::Threads(Arc::new(ThreadsBoot::new(1)));
/// assert_eq!(boot.allgather(0, 7).unwrap(), [7]);
/// boot.barrier().unwrap();
/// ```
#[derive(Debug, Clone)]
pub enum Boot {
    /// Ranks are threads of this process.
    Threads(Arc<ThreadsBoot>),
    /// Ranks are processes of this host, meeting in shared memory.
    Shm(Arc<ShmJob>),
    /// Ranks are processes on several hosts, meeting at rank 0's TCP rendezvous.
    Net(Arc<NetJob>),
}

impl Boot {
    /// All-gather of one word per rank.
    ///
    /// ```
    /// use amrq::bootstrap::{Boot, ThreadsBoot};
    /// let boot = Boot::Threads(std::sync::Arc::new(ThreadsBoot::new(1)));
    /// assert_eq!(boot.allgather(0, 3).unwrap(), [3]);
    /// ```
    pub fn allgather(&self, rank: usize, mine: u64) -> Result<Vec<u64>, BootError> {
        match self {
            Boot::Threads(b) => b.allgather(rank, mine),
            Boot::Shm(j) => j.allgather(mine),
            Boot::Net(j) => j.allgather(mine),
        }
    }

    /// [`BootError::PeerDead`] if a rank is known to have failed.
    ///
    /// ```
    /// use amrq::bootstrap::{Boot, BootError, ThreadsBoot};
    /// let boot = Boot::Threads(std::sync::Arc::new(ThreadsBoot::new(2)));
    /// boot.mark_failed(1, "out of memory".into());
    /// assert!(matches!(boot.check_peers(), Err(BootError::PeerDead { rank: 1, .. })));
    /// ```
    pub fn check_peers(&self) -> Result<(), BootError> {
        match self {
            Boot::Threads(b) => b.check_peers(),
            Boot::Shm(j) => j.check_peers(),
            Boot::Net(j) => j.check_peers(),
        }
    }

    /// True once `rank` has left the job cleanly; what it published before is visible
    /// to loads after this returns true.
    ///
    /// ```
    /// use amrq::bootstrap::{Boot, ThreadsBoot};
    /// let boot = Boot::Threads(std::sync::Arc::new(ThreadsBoot::new(2)));
    /// boot.mark_left(1);
    /// assert!(boot.has_left(1));
    /// ```
    pub fn has_left(&self, rank: usize) -> bool {
        match self {
            Boot::Threads(b) => b.has_left(rank),
            Boot::Shm(j) => j.has_left(rank),
            // Across hosts the conduit hears goodbyes itself (the UCX conduit's BYE).
            Boot::Net(_) => false,
        }
    }

    /// Records that `rank` has finished (threads; a process says so when its job
    /// handle drops).
    ///
    /// ```
    /// use amrq::bootstrap::{Boot, ThreadsBoot};
    /// let boot = Boot::Threads(std::sync::Arc::new(ThreadsBoot::new(2)));
    /// boot.mark_left(0);
    /// assert!(boot.has_left(0) && !boot.has_left(1));
    /// ```
    pub fn mark_left(&self, rank: usize) {
        if let Boot::Threads(b) = self {
            b.mark_left(rank);
        }
    }

    /// Records that `rank` failed, so that waits elsewhere end with an error.
    ///
    /// ```
    /// use amrq::bootstrap::{Boot, ThreadsBoot};
    /// let boot = Boot::Threads(std::sync::Arc::new(ThreadsBoot::new(2)));
    /// boot.mark_failed(0, "a bug".into());
    /// assert!(boot.check_peers().is_err());
    /// ```
    pub fn mark_failed(&self, rank: usize, cause: String) {
        match self {
            Boot::Threads(b) => b.mark_failed(rank, cause),
            // A process records only its own failure; peers see a dead one's pid gone.
            Boot::Shm(j) => {
                if rank == j.rank() {
                    j.mark_failed(&cause)
                }
            }
            Boot::Net(j) => {
                if rank == j.rank() {
                    j.mark_failed(&cause)
                }
            }
        }
    }

    /// Barrier over all ranks.
    ///
    /// ```
    /// use amrq::bootstrap::{Boot, ThreadsBoot};
    /// let boot = Boot::Threads(std::sync::Arc::new(ThreadsBoot::new(1)));
    /// boot.barrier().unwrap(); // one rank: passes at once
    /// ```
    pub fn barrier(&self) -> Result<(), BootError> {
        match self {
            Boot::Threads(b) => b.barrier(),
            Boot::Shm(j) => j.barrier(),
            Boot::Net(j) => j.barrier(),
        }
    }
}
