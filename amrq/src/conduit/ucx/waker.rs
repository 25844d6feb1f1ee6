//! A file descriptor turned into a futex word: UCX wakes a sleeper through its worker's
//! event descriptor, the ring conduit through a futex word. While a rank sleeps, a
//! helper thread waits on the descriptor and, when it becomes readable, bumps the
//! word the rank sleeps on (the local queues' doorbell), so one futex wait, or one
//! `futex_waitv` over several conduits, covers the network too.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct State {
    fd: i32,
    /// A second descriptor (the datagram socket) and the flag set when it is readable.
    also: Option<(i32, Arc<AtomicBool>)>,
    /// The word sleepers wait on.
    word: *const AtomicU32,
    /// Sleepers armed now.
    armed: AtomicU32,
    /// Bumped by every arm: the helper fires once per arm.
    epoch: AtomicU32,
    stop: AtomicBool,
    /// An eventfd `Drop` writes to, so that a helper in `poll` stops at once (not at
    /// its timeout, which a job's exit would wait for).
    stop_fd: OwnedFd,
}

// SAFETY: `word` points into memory the owner of the `FdWaker` keeps alive until the
// helper has stopped (joined in `Drop`); it is only touched atomically.
unsafe impl Send for State {}
// SAFETY: as above.
unsafe impl Sync for State {}

/// The helper thread and its state (see the module doc).
pub struct FdWaker {
    state: Arc<State>,
    helper: Option<std::thread::JoinHandle<()>>,
}

/// What a sleeper needs of the waker: arming and disarming it (the progress thread
/// holds one).
#[derive(Clone)]
pub struct WakerHandle(Arc<State>);

impl FdWaker {
    /// Starts the helper for `fd` (and `also`'s, whose flag it sets), bumping `word`
    /// when one is readable while armed.
    ///
    /// # Safety
    /// `word` stays valid until this value is dropped.
    pub unsafe fn new(
        fd: i32,
        also: Option<(i32, Arc<AtomicBool>)>,
        word: &AtomicU32,
    ) -> std::io::Result<Self> {
        // SAFETY: creates a descriptor; no memory is passed.
        let made = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if made < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just made, owned by nothing else.
        let stop_fd = unsafe { OwnedFd::from_raw_fd(made) };
        let state = Arc::new(State {
            fd,
            also,
            word,
            armed: AtomicU32::new(0),
            epoch: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            stop_fd,
        });
        let s = state.clone();
        let helper = std::thread::Builder::new()
            .name("amrq-ucx-waker".into())
            .spawn(move || watch(&s))?;
        Ok(Self {
            state,
            helper: Some(helper),
        })
    }

    /// A handle for another sleeper.
    pub fn handle(&self) -> WakerHandle {
        WakerHandle(self.state.clone())
    }

    /// See [`WakerHandle::arm`].
    pub fn arm(&self) {
        WakerHandle(self.state.clone()).arm();
    }

    /// See [`WakerHandle::disarm`].
    pub fn disarm(&self) {
        self.state.armed.fetch_sub(1, Ordering::Relaxed);
    }
}

impl WakerHandle {
    /// A sleeper is about to wait on the word (after arming the descriptor).
    pub fn arm(&self) {
        let state = &self.0;
        state.armed.fetch_add(1, Ordering::Relaxed);
        // ORDERING: Release pairs with the helper's Acquire load of `epoch`: it sees
        // the sleeper counted before it polls.
        state.epoch.fetch_add(1, Ordering::Release);
        crate::util::futex::wake_all(&state.epoch);
    }

    /// The sleeper woke.
    pub fn disarm(&self) {
        self.0.armed.fetch_sub(1, Ordering::Relaxed);
    }
}

fn watch(s: &State) {
    let mut fired = 0u32;
    while !s.stop.load(Ordering::Relaxed) {
        // ORDERING: Acquire pairs with the Release increments in `arm` and `Drop`: an
        // epoch from `Drop` comes with its `stop`, looked at again here.
        let e = s.epoch.load(Ordering::Acquire);
        if s.stop.load(Ordering::Relaxed) {
            break;
        }
        if s.armed.load(Ordering::Relaxed) == 0 || e == fired {
            crate::util::futex::wait(&s.epoch, e, Duration::from_millis(200));
            continue;
        }
        let fd = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let also = s.also.as_ref().map_or(-1, |a| a.0);
        let mut p = [fd(s.fd), fd(also), fd(s.stop_fd.as_raw_fd())];
        // SAFETY: three valid pollfds (a negative descriptor is skipped).
        let n = unsafe { libc::poll(p.as_mut_ptr(), 3, 100) };
        if p[2].revents != 0 {
            break;
        }
        if let (Some(a), true) = (&s.also, p[1].revents != 0) {
            a.1.store(true, Ordering::Relaxed);
        }
        if n > 0 {
            fired = e;
            // SAFETY: see `State`'s Send impl: the word outlives the helper.
            let word = unsafe { &*s.word };
            // ORDERING: Release pairs with the sleeper's Acquire read of the word
            // when it arms; nothing is published through it but the wake-up.
            word.fetch_add(1, Ordering::Release);
            crate::util::futex::wake_all(word);
        }
    }
}

impl Drop for FdWaker {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
        // A new epoch: a helper between its look at `stop` and its futex wait does not
        // sleep. ORDERING: Release pairs with the helper's Acquire load, as in `arm`.
        self.state.epoch.fetch_add(1, Ordering::Release);
        crate::util::futex::wake_all(&self.state.epoch);
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes to our own eventfd; a failure leaves the 100 ms timeout.
        unsafe { libc::write(self.state.stop_fd.as_raw_fd(), one.as_ptr().cast(), 8) };
        if let Some(h) = self.helper.take() {
            let _ = h.join();
        }
    }
}
