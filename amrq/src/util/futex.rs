//! Futex wait/wake on words in *shared* mappings: the plain (not `_PRIVATE`) operations,
//! because the private ones key the wait queue on this process's address space and
//! would never see a wake from another process.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, at most `timeout` (spurious wake-ups happen: re-check).
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// let word = AtomicU32::new(0);
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         word.store(1, Ordering::Release);
///         amrq::util::futex::wake_all(&word);
///     });
///     while word.load(Ordering::Acquire) == 0 {
///         amrq::util::futex::wait(&word, 0, Duration::from_millis(100));
///     }
/// });
/// ```
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; FUTEX_WAIT only
    // reads it; `ts` outlives the call. Errors (EAGAIN, ETIMEDOUT, EINTR) all mean
    // "re-check", which every caller does.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every waiter on `word`.
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// let word = AtomicU32::new(0);
/// amrq::util::futex::wake_all(&word); // nobody waits: a no-op
/// ```
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not touch memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// Sleeps until one of `words` no longer holds its expected value (or is woken), at
/// most `timeout`: `futex_waitv` (Linux 5.16). Where the kernel lacks it, sleeps on the
/// first word for at most a millisecond (the caller re-checks and waits again, so the
/// others are looked at every millisecond).
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// let (a, b) = (AtomicU32::new(0), AtomicU32::new(0));
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         b.store(1, Ordering::Release);
///         amrq::util::futex::wake_all(&b);
///     });
///     while a.load(Ordering::Acquire) == 0 && b.load(Ordering::Acquire) == 0 {
///         amrq::util::futex::wait_any(&[(&a, 0), (&b, 0)], Duration::from_millis(100));
///     }
/// });
/// ```
pub fn wait_any(words: &[(&AtomicU32, u32)], timeout: Duration) {
    /// The kernel's `struct futex_waitv`.
    #[repr(C)]
    struct WaitV {
        val: u64,
        uaddr: u64,
        flags: u32,
        reserved: u32,
    }
    const FUTEX2_SIZE_U32: u32 = 0x02;
    let v: Vec<WaitV> = words
        .iter()
        .map(|&(w, seen)| WaitV {
            val: u64::from(seen),
            uaddr: w.as_ptr() as u64,
            // Shared, not private: the words may be in mappings of several processes.
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        })
        .collect();
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let end_ns = now.tv_nsec as u128 + timeout.subsec_nanos() as u128;
    let deadline = libc::timespec {
        tv_sec: now.tv_sec
            + timeout.as_secs() as libc::time_t
            + (end_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (end_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `v` holds `v.len()` valid entries naming aligned u32 words that live for
    // the call; `deadline` outlives it. Errors (EAGAIN: a word changed, ETIMEDOUT,
    // EINTR) all mean "re-check", which every caller does.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            v.as_ptr(),
            v.len() as libc::c_uint,
            0,
            &deadline as *const libc::timespec,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        if let Some(&(w, seen)) = words.first() {
            wait(w, seen, timeout.min(Duration::from_millis(1)));
        }
    }
}
