//! Fault points: named steps of start-up at which a process can be told to kill itself
//! with SIGKILL, so that tests can crash a rank or the launcher at every moment of
//! start-up and check what is left behind (nothing) and what the survivors say.
//!
//! `AMRQ_FAULT=<step>` kills every process that reaches `<step>`; `AMRQ_FAULT=<step>@<rank>`
//! only rank `<rank>` (for the launcher's steps, the rank it has just started). The
//! variable is read once; unset, a fault point costs one branch.

use std::sync::OnceLock;

/// The environment variable that names the fault point.
///
/// ```
/// // AMRQ_FAULT=attached@1 kills rank 1 with SIGKILL at that step of its start-up.
/// assert_eq!(amrq::bootstrap::fault::ENV_FAULT, "AMRQ_FAULT");
/// ```
pub const ENV_FAULT: &str = "AMRQ_FAULT";

/// The steps of a rank's start-up, in order, for rank 0 then for the others (joiners).
///
/// ```
/// use amrq::bootstrap::fault::RANK_STEPS;
/// assert!(RANK_STEPS.contains(&"attached"));
/// ```
pub const RANK_STEPS: &[&str] = &[
    "listening",   // rank 0: the rendezvous socket is bound
    "created",     // rank 0: the job's memory exists, not yet initialised
    "initialised", // rank 0: header and rings written, before any joiner is admitted
    "admitting",   // rank 0: a joiner connected, before it is answered
    "admitted",    // rank 0: a joiner was sent the memory
    "connected",   // joiner: connected to rank 0's socket
    "proved",      // joiner: sent its proof of the key
    "received",    // joiner: holds the job's memory, not yet mapped
    "attached",    // any rank: mapped and its pid published, before the start barrier
    "started",     // any rank: start-up done
];

/// The launcher's steps: `spawned@r` once rank `r`'s process exists.
///
/// ```
/// assert_eq!(amrq::bootstrap::fault::LAUNCHER_STEPS, ["spawned"]);
/// ```
pub const LAUNCHER_STEPS: &[&str] = &["spawned"];

fn configured() -> &'static Option<(String, Option<usize>)> {
    static FAULT: OnceLock<Option<(String, Option<usize>)>> = OnceLock::new();
    FAULT.get_or_init(|| {
        let v = std::env::var(ENV_FAULT).ok().filter(|v| !v.is_empty())?;
        Some(match v.split_once('@') {
            Some((step, rank)) => (step.to_string(), rank.parse().ok()),
            None => (v, None),
        })
    })
}

/// Kills this process with SIGKILL if `AMRQ_FAULT` names `step` (and `rank`, if it
/// names one).
///
/// ```
/// // Without AMRQ_FAULT (or naming another step) a fault point does nothing.
/// if std::env::var_os("AMRQ_FAULT").is_none() {
///     amrq::bootstrap::fault::point("attached", 0);
/// }
/// ```
pub fn point(step: &str, rank: usize) {
    if let Some((s, r)) = configured() {
        if s == step && r.is_none_or(|r| r == rank) {
            // SAFETY: signalling this process; SIGKILL cannot be caught.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}
