//! The doorbell handshake, shared by senders and receivers (and by the loom models in
//! `tests/loom_doorbell.rs`, which run these very functions): a receiver that goes idle
//! *arms* its channels' bits, fences, and looks at its rings once more; a sender that
//! publishes a frame fences, then rings (sets the summary bit, and wakes a sleeper) only
//! if the channel is armed. The two fences make it a Dekker handshake: either the
//! sender sees the arm, or the receiver's last look sees the frame. Never both missed.

use crate::sync::{fence, AtomicU64, Ordering};

/// Sender side, right after publishing a frame on the channel of doorbell bit `bit`:
/// sets the bit in `summary` if the receiver armed it; returns true if the receiver
/// sleeps on it and this sender claimed the wake-up (the caller then bumps the futex
/// word and wakes it). Claiming clears the bit in `sleepers`: of the senders that find
/// the receiver asleep, one makes the wake-up syscall, and the others, until the
/// receiver arms again, do not (on an oversubscribed host, a woken receiver may not run
/// for a while, and every send would otherwise pay a syscall meanwhile).
#[inline(always)]
pub fn ring(armed: &AtomicU64, summary: &AtomicU64, sleepers: &AtomicU64, bit: u64) -> bool {
    // ORDERING: a SeqCst fence between the frame's Release store (just done) and the
    // load of `armed`; pairs with the receiver's SeqCst fence in `arm` (Dekker). One
    // locked instruction.
    fence(Ordering::SeqCst);
    if armed.load(Ordering::Relaxed) & bit == 0 {
        return false;
    }
    // ORDERING: Release pairs with the receiver's Acquire load of the summary, which
    // then scans for the frame published before.
    summary.fetch_or(bit, Ordering::Release);
    // Relaxed: `sleepers` is set before `armed`, both before the receiver's fence; the
    // claim is an RMW, so exactly one sender clears the bit the receiver set.
    sleepers.load(Ordering::Relaxed) & bit != 0
        && sleepers.fetch_and(!bit, Ordering::Relaxed) & bit != 0
}

/// Receiver side, before its last look at the channels of `bits`: arms them (and marks
/// it a sleeper, if `sleepers` is given). Returns the bits this call armed (others were
/// armed already).
#[inline(always)]
pub fn arm(armed: &AtomicU64, sleepers: Option<&AtomicU64>, bits: u64) -> u64 {
    if let Some(s) = sleepers {
        s.fetch_or(bits, Ordering::Relaxed);
    }
    let mine = bits & !armed.fetch_or(bits, Ordering::Relaxed);
    // ORDERING: SeqCst fence between arming and the look that follows; pairs with the
    // senders' SeqCst fence in `ring` (Dekker).
    fence(Ordering::SeqCst);
    mine
}
