//! Pinning the calling thread to one core (`sched_setaffinity`).

/// Why a thread could not be pinned.
///
/// ```
/// use amrq::util::{affinity::PinError, pin_to_core};
/// let e = pin_to_core(100_000).unwrap_err();
/// assert!(matches!(e, PinError::NoSuchCore { core: 100_000, .. }));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The core number is not below the number of cores this process may use.
    #[error("cannot pin to core {core}: this process may use {available} cores (see `nproc`)")]
    NoSuchCore {
        /// The core asked for.
        core: usize,
        /// How many cores the process may run on.
        available: usize,
    },
    /// The kernel refused.
    #[error("sched_setaffinity(core {core}) failed: {source}")]
    Os {
        /// The core asked for.
        core: usize,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Pins the calling thread to `core` (an index into the cores this process may use).
///
/// ```
/// amrq::util::pin_to_core(0).expect("core 0 exists");
/// ```
pub fn pin_to_core(core: usize) -> Result<(), PinError> {
    let cores = allowed_cores();
    let Some(&cpu) = cores.get(core) else {
        return Err(PinError::NoSuchCore {
            core,
            available: cores.len(),
        });
    };
    // SAFETY: cpu_set_t is plain data; an all-zero value is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` came from the kernel's own mask, so it is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t and the size passed is its size; pid 0 = this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(PinError::Os {
            core,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// The CPU numbers this process may run on, in increasing order.
///
/// ```
/// let cores = amrq::util::affinity::allowed_cores();
/// assert!(!cores.is_empty() && cores.windows(2).all(|w| w[0] < w[1]));
/// ```
pub fn allowed_cores() -> Vec<usize> {
    // SAFETY: as above, all-zero is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and sized correctly; pid 0 = this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE and `set` is initialised.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// CPUs online on this host, whatever this thread's affinity (a pinned rank sees one).
///
/// ```
/// assert!(amrq::util::affinity::host_cores() >= 1);
/// ```
pub fn host_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        allowed_cores().len()
    }
}
