//! The doorbell handshake, shared by senders and receivers (and by the loom models in
//! `tests/loom_doorbell.rs`, which run these very functions): a receiver that goes idle
//! *arms* its channels' bits, fences, and looks at its rings once more; a sender that
//! publishes a frame fences, then rings (sets the summary bit, and wakes a sleeper) only
//! if the channel is armed. The two fences make it a Dekker handshake: either the
//! sender sees the arm, or the receiver's last look sees the frame. Never both missed.
//!
//! The fences are symmetric (a locked instruction on each side) or asymmetric: senders
//! send often and receivers arm rarely, so where `membarrier(2)` works the receiver's
//! arm issues it ([`crate::util::membarrier`]), which puts a full barrier into every
//! running thread of the job, and the sender's fence is only a compiler barrier. On a
//! streaming sender the locked instruction cost ~20 ns per message (it waits for the
//! store buffer to drain); the system call costs the arming receiver ~10 µs. Which bits
//! of a receiver are armed that way is in its doorbell ([`crate::conduit::mem::Doorbell`]'s
//! `heavy`), so a sender decides per channel, and a job whose processes differ (one
//! cannot register) stays correct: a sender leaves its fence out only if it is a target
//! of the receiver's `membarrier` and the receiver issues one.

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::atomic::compiler_fence;

/// How a job's doorbell handshakes fence (see the module doc). Environment:
/// `AMRQ_DOORBELL_FENCE` (`asymmetric` or `symmetric`).
///
/// ```
/// use amrq::conduit::doorbell::DoorbellFence;
/// assert_eq!(DoorbellFence::default(), DoorbellFence::Asymmetric);
/// assert_eq!("symmetric".parse(), Ok(DoorbellFence::Symmetric));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DoorbellFence {
    /// Receivers issue `membarrier` when they arm; senders need no fence instruction
    /// (where `membarrier` works and the host's ranks fit its cores; elsewhere, as
    /// `Symmetric`).
    #[default]
    Asymmetric,
    /// A locked instruction on each side: on every send, and on every arm.
    Symmetric,
}

impl std::str::FromStr for DoorbellFence {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "asymmetric" => Ok(Self::Asymmetric),
            "symmetric" => Ok(Self::Symmetric),
            _ => Err(format!("{s}: expected asymmetric or symmetric")),
        }
    }
}

impl DoorbellFence {
    /// True if this process may leave out its side of the fence, and issue the heavy
    /// side, in a job of `ranks` ranks on this host: asymmetric, this process registered
    /// for `membarrier`, and the ranks fit the host's cores. Oversubscribed ranks sleep
    /// often, and each sleep would pay the system call (an IPI to the running ranks):
    /// a 3-rank blocking barrier on 2 cores took 180 µs against 105–112 µs with
    /// symmetric fences.
    ///
    /// ```
    /// use amrq::conduit::doorbell::DoorbellFence;
    /// assert!(!DoorbellFence::Symmetric.asymmetric_here(2)); // never with symmetric fences
    /// let cores = amrq::util::affinity::host_cores();
    /// assert!(!DoorbellFence::Asymmetric.asymmetric_here(cores + 1)); // nor oversubscribed
    /// ```
    #[cfg(not(amrq_loom))]
    pub fn asymmetric_here(self, ranks: usize) -> bool {
        self == Self::Asymmetric
            && ranks <= crate::util::affinity::host_cores()
            && crate::util::membarrier::register()
    }
}

/// Sender side, right after publishing a frame on the channel of doorbell bit `bit`:
/// sets the bit in `summary` if the receiver armed it; returns true if the receiver
/// sleeps on it and this sender claimed the wake-up (the caller then bumps the futex
/// word and wakes it). Claiming clears the bit in `sleepers`: of the senders that find
/// the receiver asleep, one makes the wake-up syscall, and the others, until the
/// receiver arms again, do not (on an oversubscribed host, a woken receiver may not run
/// for a while, and every send would otherwise pay a syscall meanwhile).
///
/// `light`: this process is registered for `membarrier` and the receiver issues one when
/// it arms `bit` (see the module doc); then no fence instruction is needed here.
///
/// ```
/// use amrq::conduit::doorbell::{arm, ring};
/// use amrq::conduit::mem::HeapRegion;
/// # let mem = HeapRegion::new(4096).unwrap();
/// # // SAFETY: a fresh zeroed page, used only as this doorbell.
/// # let bell = unsafe { &*mem.base().as_ptr().cast::<amrq::conduit::mem::Doorbell>() };
/// use std::sync::atomic::Ordering;
/// arm(&bell.armed, None, 0b10, 0); // the receiver arms channel 1's bit
/// let wake = ring(&bell.armed, &bell.summary, &bell.sleepers, 0b10, false);
/// assert!(!wake); // nobody sleeps: no wake-up
/// assert_eq!(bell.summary.load(Ordering::Acquire), 0b10); // the idle receiver sees it
/// ```
#[inline(always)]
pub fn ring(
    armed: &AtomicU64,
    summary: &AtomicU64,
    sleepers: &AtomicU64,
    bit: u64,
    light: bool,
) -> bool {
    is_armed(armed, bit, light) && ring_armed(summary, sleepers, bit)
}

/// Sender side of [`ring`], its first half: after the frame's Release store, whether
/// the receiver has armed `bit` (with the fence `light` calls for).
#[inline(always)]
pub(crate) fn is_armed(armed: &AtomicU64, bit: u64, light: bool) -> bool {
    if light {
        // ORDERING: the frame's Release store (just done) stays before the load of
        // `armed` in program order; the receiver's `membarrier` in `arm` runs a full
        // barrier on this thread at some point of that order (asymmetric Dekker): the
        // store is before it, so the receiver's last look sees the frame, or both are
        // after it, so the load sees the arm.
        compiler_fence(Ordering::SeqCst);
    } else {
        // ORDERING: a SeqCst fence between the frame's Release store (just done) and
        // the load of `armed`; pairs with the receiver's SeqCst fence in `arm`
        // (Dekker). One locked instruction.
        fence(Ordering::SeqCst);
    }
    armed.load(Ordering::Relaxed) & bit != 0
}

/// Sender side of [`ring`], its second half, once [`is_armed`] said the receiver armed
/// `bit`: sets the summary's bit; true if this sender is to wake the receiver.
#[inline(always)]
pub(crate) fn ring_armed(summary: &AtomicU64, sleepers: &AtomicU64, bit: u64) -> bool {
    // ORDERING: Release pairs with the receiver's Acquire load of the summary, which
    // then scans for the frame published before.
    summary.fetch_or(bit, Ordering::Release);
    // A receiver whose bit stayed armed (One-poll's, or a progress engine's between
    // its sleeps) marks itself a sleeper again with a fence and no `membarrier`: the
    // frame's store and the load of `sleepers` below need a full barrier between them,
    // which on x86-64 the locked RMW above is; elsewhere (and in the loom models) a
    // fence, paid only by a sender whose receiver is armed.
    #[cfg(any(amrq_loom, not(target_arch = "x86_64")))]
    fence(Ordering::SeqCst);
    // Relaxed: `sleepers` is set before `armed`, both before the receiver's fence; the
    // claim is an RMW, so exactly one sender clears the bit the receiver set.
    sleepers.load(Ordering::Relaxed) & bit != 0
        && sleepers.fetch_and(!bit, Ordering::Relaxed) & bit != 0
}

/// Receiver side, before its last look at the channels of `bits`: arms them (and marks
/// it a sleeper, if `sleepers` is given). Returns the bits this call armed (others were
/// armed already). `heavy`: the bits whose senders may leave their fence out (the
/// receiver's doorbell says so); arming one of them issues `membarrier`.
///
/// ```
/// use amrq::conduit::doorbell::arm;
/// use std::sync::atomic::AtomicU64;
/// let armed = AtomicU64::new(0b01);
/// assert_eq!(arm(&armed, None, 0b11, 0), 0b10); // bit 0 was armed already
/// ```
#[inline(always)]
pub fn arm(armed: &AtomicU64, sleepers: Option<&AtomicU64>, bits: u64, heavy: u64) -> u64 {
    if let Some(s) = sleepers {
        s.fetch_or(bits, Ordering::Relaxed);
    }
    let mine = bits & !armed.fetch_or(bits, Ordering::Relaxed);
    // ORDERING: SeqCst fence between arming and the look that follows; pairs with the
    // senders' SeqCst fence in `ring` (Dekker).
    fence(Ordering::SeqCst);
    if mine & heavy != 0 {
        // ORDERING: pairs with the light senders' compiler barrier in `ring`: a full
        // barrier on each of their threads, after the arm above and before the look
        // that follows. Bits armed before (not `mine`) had theirs when they were armed,
        // and have stayed armed since. (Loom cannot model it: its models pass no heavy
        // bits, and the stress tests in `tests/common/one_poll.rs` cover this side.)
        #[cfg(not(amrq_loom))]
        crate::util::membarrier::global_expedited();
        #[cfg(amrq_loom)]
        unreachable!("the loom models run the symmetric handshake");
    }
    mine
}

/// A thread about to sleep on a word that writers bump (a front's outbox, whose writers
/// are the rank's other threads) marks itself sleeping and fences; then it looks once
/// more for work, and sleeps only if it finds none. With [`finds_sleeper`], a Dekker
/// handshake: either a writer sees the mark, or the last look sees its work.
///
/// ```
/// use amrq::conduit::doorbell::{about_to_sleep, finds_sleeper};
/// use std::sync::atomic::AtomicU32;
/// let sleeping = AtomicU32::new(0);
/// assert!(!finds_sleeper(&sleeping));
/// about_to_sleep(&sleeping);
/// assert!(finds_sleeper(&sleeping)); // the writer bumps the word and wakes it
/// ```
pub fn about_to_sleep(sleeping: &AtomicU32) {
    sleeping.store(1, Ordering::Relaxed);
    // ORDERING: SeqCst pairs with the writer's fence in `finds_sleeper`.
    fence(Ordering::SeqCst);
}

/// A writer that has just published work: true if the thread that takes it may be
/// asleep, or about to sleep ([`about_to_sleep`]): it must then bump the word that
/// thread sleeps on and wake it.
pub fn finds_sleeper(sleeping: &AtomicU32) -> bool {
    // ORDERING: SeqCst pairs with the sleeper's fence in `about_to_sleep`: either this
    // load sees its mark, or its last look sees the work published before this fence.
    fence(Ordering::SeqCst);
    sleeping.load(Ordering::Relaxed) != 0
}
