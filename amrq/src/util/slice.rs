//! A short time slice for a thread that must run soon after it wakes (a progress
//! engine sharing its core with the program): Linux's EEVDF scheduler (6.6 and later)
//! gives a thread that asks for a shorter slice an earlier deadline, and from 6.12 lets
//! it preempt the running thread on wake-up, instead of waiting for that thread's
//! slice (milliseconds) to run out. No privilege is needed; older kernels ignore it.

/// `struct sched_attr` of `sched_setattr(2)` (its first version, 48 bytes, and the
/// utilisation clamps of the second).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// Asks for a time slice of `slice` for the calling thread, staying in the normal
/// scheduling class at its nice value. True if the kernel took it.
///
/// ```
/// let took = amrq::util::slice::request_short_slice(std::time::Duration::from_micros(100));
/// println!("short slice: {took}");
/// ```
pub fn request_short_slice(slice: std::time::Duration) -> bool {
    // SAFETY: getpriority reads this thread's nice value; no memory of ours.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        nice,
        runtime: u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX),
        ..SchedAttr::default()
    };
    // SAFETY: `attr` is a valid `sched_attr` of the size it states, read by the call.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) == 0 }
}
