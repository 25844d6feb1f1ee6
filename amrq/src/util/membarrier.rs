//! `membarrier(2)`, the heavy half of an asymmetric fence: a rank that rarely needs a
//! Dekker handshake (a receiver going idle) pays a system call that makes every running
//! thread of every *registered* process execute a full memory barrier, so that the
//! threads on the frequent side (its senders) need no fence instruction of their own —
//! only a compiler barrier. Folly's `asymmetricHeavyBarrier` and liburcu's
//! `urcu-memb` flavour make the same trade. The GLOBAL commands serve the doorbell
//! between processes, the PRIVATE ones the `hold` sections within one.
//!
//! Measured on the development VM (2 vCPUs): ~10 µs per call while a registered peer
//! runs on the other core (an IPI), ~0.5 µs when none runs; the locked instruction it
//! saves costs a streaming sender ~20 ns per message (the store buffer drains on it).

use std::sync::OnceLock;

// From <linux/membarrier.h>.
const CMD_QUERY: libc::c_long = 0;
const CMD_GLOBAL_EXPEDITED: libc::c_long = 1 << 1;
const CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_long = 1 << 2;
const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

fn membarrier(cmd: libc::c_long) -> libc::c_long {
    // SAFETY: membarrier takes two integer arguments and touches no memory of ours.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            cmd,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    }
}

/// Registers this process as a target of [`global_expedited`] (once per process) and
/// checks that the call works here. True if it does: this process's threads may then
/// leave out their side of the fence, and may issue the heavy side. False where the
/// kernel lacks it (Linux < 4.16) or a seccomp filter forbids it: then both sides fence.
///
/// ```
/// // The answer does not change within a process.
/// assert_eq!(amrq::util::membarrier::register(), amrq::util::membarrier::register());
/// ```
pub fn register() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        let wanted = CMD_GLOBAL_EXPEDITED | CMD_REGISTER_GLOBAL_EXPEDITED;
        let offered = membarrier(CMD_QUERY);
        offered >= 0
            && offered & wanted == wanted
            && membarrier(CMD_REGISTER_GLOBAL_EXPEDITED) == 0
            && membarrier(CMD_GLOBAL_EXPEDITED) == 0
    })
}

/// The heavy side: returns once every running thread of every registered process has
/// executed a full memory barrier (threads not running pass one when they are next
/// scheduled). Only after [`register`] answered true.
///
/// # Panics
/// If the kernel refuses a call it accepted at registration: the light side of every
/// handshake relies on it, and going on would lose wake-ups.
///
/// ```
/// if amrq::util::membarrier::register() {
///     amrq::util::membarrier::global_expedited();
/// }
/// ```
pub fn global_expedited() {
    let r = membarrier(CMD_GLOBAL_EXPEDITED);
    assert!(
        r == 0,
        "membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) failed ({}) after it succeeded at start-up; \
         set AMRQ_DOORBELL_FENCE=symmetric to run without it",
        std::io::Error::last_os_error()
    );
}

/// Registers this process for [`private_expedited`]; true if the kernel accepts (the
/// `hold` sections of Remote Queues' interrupts then need no fence).
///
/// ```
/// let _ = amrq::util::membarrier::register_private();
/// ```
pub fn register_private() -> bool {
    membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
}

/// The heavy side within this process: returns once every running thread of it has
/// executed a full memory barrier. Only after [`register_private`] answered true, when
/// it cannot fail.
///
/// ```
/// if amrq::util::membarrier::register_private() {
///     amrq::util::membarrier::private_expedited();
/// }
/// ```
pub fn private_expedited() {
    membarrier(CMD_PRIVATE_EXPEDITED);
}
