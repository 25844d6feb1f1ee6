//! Setup-time collectives for ranks that are threads of one process: a mutex, a condition
//! variable and a generation count. Every wait has a deadline, so a rank that never
//! arrives (it panicked) turns into an error instead of a hang.

use super::BootError;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Debug)]
struct State {
    generation: u64,
    arrived: usize,
    values: Vec<u64>,
    result: Vec<u64>,
    /// The first rank that failed, and how: ends every wait at once.
    failed: Option<(usize, String)>,
    /// Ranks whose thread has finished.
    left: Vec<bool>,
}

/// Barrier and all-gather for `size` thread ranks.
///
/// ```
/// use amrq::bootstrap::ThreadsBoot;
/// use std::sync::Arc;
/// let b = Arc::new(ThreadsBoot::new(2));
/// let b2 = b.clone();
/// let t = std::thread::spawn(move || b2.allgather(1, 20).unwrap());
/// assert_eq!(b.allgather(0, 10).unwrap(), vec![10, 20]);
/// assert_eq!(t.join().unwrap(), vec![10, 20]);
/// ```
#[derive(Debug)]
pub struct ThreadsBoot {
    size: usize,
    timeout: Duration,
    state: Mutex<State>,
    cv: Condvar,
}

impl ThreadsBoot {
    /// Collectives for `size` ranks, waiting at most 60 s for the others.
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// let b = ThreadsBoot::new(3);
    /// assert!(b.check_peers().is_ok() && !b.has_left(2));
    /// ```
    pub fn new(size: usize) -> Self {
        Self::with_timeout(size, Duration::from_secs(60))
    }

    /// Collectives for `size` ranks, waiting at most `timeout` for the others.
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// use std::time::Duration;
    /// let b = ThreadsBoot::with_timeout(2, Duration::from_millis(10));
    /// assert!(b.barrier().is_err()); // rank 1 never comes: the wait ends, with an error
    /// ```
    pub fn with_timeout(size: usize, timeout: Duration) -> Self {
        Self {
            size,
            timeout,
            state: Mutex::new(State {
                generation: 0,
                arrived: 0,
                values: vec![0; size],
                result: Vec::new(),
                failed: None,
                left: vec![false; size],
            }),
            cv: Condvar::new(),
        }
    }

    /// Records that `rank`'s thread has finished normally.
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// let b = ThreadsBoot::new(2);
    /// b.mark_left(1);
    /// assert!(b.has_left(1) && b.check_peers().is_ok()); // leaving is not failing
    /// ```
    pub fn mark_left(&self, rank: usize) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(l) = st.left.get_mut(rank) {
                *l = true;
            }
        }
    }

    /// True once `rank`'s thread has finished normally (the mutex orders what it did
    /// before).
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// let b = ThreadsBoot::new(2);
    /// assert!(!b.has_left(0));
    /// ```
    pub fn has_left(&self, rank: usize) -> bool {
        self.state
            .lock()
            .is_ok_and(|st| st.left.get(rank).copied().unwrap_or(false))
    }

    /// Records that `rank` failed (the first failure is kept) and wakes setup waiters.
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// let b = ThreadsBoot::new(2);
    /// b.mark_failed(1, "it panicked".into());
    /// assert!(b.check_peers().unwrap_err().to_string().contains("it panicked"));
    /// ```
    pub fn mark_failed(&self, rank: usize, cause: String) {
        if let Ok(mut st) = self.state.lock() {
            st.failed.get_or_insert((rank, cause));
        }
        self.cv.notify_all();
    }

    /// [`BootError::PeerDead`] once any rank has been marked failed.
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// let b = ThreadsBoot::new(2);
    /// assert!(b.check_peers().is_ok());
    /// ```
    pub fn check_peers(&self) -> Result<(), BootError> {
        match self.state.lock().map(|st| st.failed.clone()) {
            Ok(None) => Ok(()),
            Ok(Some((rank, cause))) => Err(BootError::PeerDead { rank, cause }),
            Err(_) => Err(BootError::Poisoned),
        }
    }

    /// Every rank contributes `mine`; all get the words in rank order.
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// let b = ThreadsBoot::new(2);
    /// let out = std::thread::scope(|s| {
    ///     let h = s.spawn(|| b.allgather(1, 11).unwrap());
    ///     (b.allgather(0, 10).unwrap(), h.join().unwrap())
    /// });
    /// assert_eq!(out, (vec![10, 11], vec![10, 11]));
    /// ```
    pub fn allgather(&self, rank: usize, mine: u64) -> Result<Vec<u64>, BootError> {
        let mut st = self.state.lock().map_err(poisoned)?;
        st.values[rank] = mine;
        st.arrived += 1;
        if st.arrived == self.size {
            st.result = std::mem::replace(&mut st.values, vec![0; self.size]);
            st.arrived = 0;
            st.generation += 1;
            self.cv.notify_all();
            return Ok(st.result.clone());
        }
        let gen = st.generation;
        let (st, timeout) = self
            .cv
            .wait_timeout_while(st, self.timeout, |s| {
                s.generation == gen && s.failed.is_none()
            })
            .map_err(poisoned)?;
        if let Some((rank, cause)) = st.failed.clone() {
            return Err(BootError::PeerDead { rank, cause });
        }
        if timeout.timed_out() {
            return Err(BootError::Timeout(format!(
                "rank {rank} waited {:?} for {} other ranks to reach setup; one of them failed or is stuck",
                self.timeout,
                self.size - st.arrived
            )));
        }
        Ok(st.result.clone())
    }

    /// Waits until every rank has called `barrier` (or all-gather) once more.
    ///
    /// ```
    /// use amrq::bootstrap::ThreadsBoot;
    /// let b = ThreadsBoot::new(2);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| b.barrier().unwrap());
    ///     b.barrier().unwrap();
    /// });
    /// ```
    pub fn barrier(&self) -> Result<(), BootError> {
        let mut st = self.state.lock().map_err(poisoned)?;
        st.arrived += 1;
        if st.arrived == self.size {
            st.arrived = 0;
            st.generation += 1;
            self.cv.notify_all();
            return Ok(());
        }
        let gen = st.generation;
        let (st, timeout) = self
            .cv
            .wait_timeout_while(st, self.timeout, |s| {
                s.generation == gen && s.failed.is_none()
            })
            .map_err(poisoned)?;
        if let Some((rank, cause)) = st.failed.clone() {
            return Err(BootError::PeerDead { rank, cause });
        }
        if timeout.timed_out() {
            return Err(BootError::Timeout(format!(
                "barrier: waited {:?} for the other ranks; one of them failed or is stuck",
                self.timeout
            )));
        }
        Ok(())
    }
}

fn poisoned<T>(_: T) -> BootError {
    BootError::Poisoned
}
