//! Cache-line prefetch of ring slots: `prefetchw` asks for a line in exclusive state
//! before writing it.
//!
//! The ring producer prefetches its next slots for writing; ANCHORS.md measured 146 M
//! against 23 M Short messages/s with and without it. Stable `_mm_prefetch` has no
//! `prefetchw` hint, so it is inline assembly.
//!
//! The ring consumer prefetches nothing: a read prefetch past its head, which had
//! doubled a one-way stream on an Intel host, cost one on the AMD host of 2026-11-26
//! (the ring consumer says what was measured).

/// Hints that the line holding `p` will be written soon. Never faults, whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` is a hint: it never faults, even on an invalid address, reads
    // no register but `p`, writes no memory, and leaves flags alone. CPUs without
    // PRFCHW decode it as a no-op.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
