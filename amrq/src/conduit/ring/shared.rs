//! The producer side of a ring many senders share (the T3D's slot reservation): a
//! producer reserves its slots by a compare-and-swap on a tail word the producers share,
//! after checking room against the consumer's head, then writes and publishes exactly
//! like a single producer. The consumer is the same [`super::Consumer`]: frames become
//! readable in reservation order, whichever producer publishes first.
//!
//! A compare-and-swap, not the T3D's fetch-and-add: a fetch-and-add cannot be taken
//! back, so a producer that found the queue full would have to wait for room; with the
//! check before the swap, a full queue answers "full" and nothing is committed.
//!
//! ```text
//! shared tail word: own 128-byte line pair, before the ring's control block
//! ```

use super::layout::{frame_slots, FrameHeader, MAX_ARGS};
use super::memory::RingMemory;
use super::producer::{write_frame, write_pad};
use crate::sync::AtomicU64;
use crate::sync::Ordering::{Acquire, Relaxed};

/// One producer's private view of a shared ring: what it last saw of the head.
///
/// ```
/// let p = amrq::conduit::ring::SharedProducer::new(0);
/// # let _ = p;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct SharedProducer {
    cached_head: u64,
}

impl SharedProducer {
    /// A producer for a ring initialised at position `start`.
    pub const fn new(start: u64) -> Self {
        Self { cached_head: start }
    }

    /// Reserves room for one frame by CAS on `tail`, writes it and publishes it; `false`
    /// with nothing reserved or written if the ring lacks room. Same preconditions as
    /// [`super::Producer::try_push`].
    pub fn try_push<M: RingMemory>(
        &mut self,
        mem: &M,
        tail: &AtomicU64,
        header: FrameHeader,
        args: &[u64],
        payload: &[u8],
    ) -> bool {
        debug_assert!(args.len() <= MAX_ARGS);
        let n = mem.nslots();
        let k = frame_slots(args.len(), payload.len());
        let mut t = tail.load(Relaxed);
        let (pos, pad) = loop {
            let idx = t & (n - 1);
            let pad = if idx + k > n { n - idx } else { 0 };
            let need = pad + k;
            if t.wrapping_sub(self.cached_head) + need > n {
                // ORDERING: Acquire pairs with the consumer's Release store of `head`: its
                // reads of the slots we may take happen before our writes.
                self.cached_head = mem.head().load(Acquire);
                if t.wrapping_sub(self.cached_head) + need > n {
                    return false;
                }
            }
            // Relaxed: the CAS only hands out positions; the slots' contents are
            // published by the Release stores of their sequence words below, and the
            // room was established by the Acquire load of `head` above. (Strong CAS: a
            // weak one may fail spuriously, which loom explores without end; on x86 both
            // are one `lock cmpxchg`.)
            match tail.compare_exchange(t, t.wrapping_add(need), Relaxed, Relaxed) {
                Ok(_) => break (t, pad),
                Err(now) => t = now,
            }
        };
        if pad > 0 {
            write_pad(mem, pos, pad);
        }
        write_frame(mem, pos.wrapping_add(pad), header, args, payload);
        true
    }
}
