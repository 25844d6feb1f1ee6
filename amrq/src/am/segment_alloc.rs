//! Allocation in a rank's registered segment: two arenas that grow toward each other.
//!
//! ```text
//! 0                                                                segment_bytes
//! ├── symmetric arena ──►  sym_end        local_start  ◄── local arena ──┤
//! ```
//!
//! The symmetric arena serves collective allocations: every rank makes the same
//! sequence of them, so the same first-fit rule over the same free list gives the same
//! offset everywhere (the caller checks that it did, in case a rank's local arena had
//! grown into the room). The local arena serves a rank's own allocations, from the top
//! down, so that they never disturb the symmetric offsets.

use std::collections::BTreeMap;

/// One arena's free ranges (offset → length) and how far it reaches.
#[derive(Debug, Clone, Default)]
struct Arena {
    free: BTreeMap<usize, usize>,
}

impl Arena {
    /// First fit: the lowest (or, `from_top`, the highest) free range that holds `len`
    /// bytes at alignment `align`; removes them from the free list.
    fn take(&mut self, len: usize, align: usize, from_top: bool) -> Option<usize> {
        let fits = |(&off, &n): (&usize, &usize)| -> Option<(usize, usize, usize)> {
            let start = if from_top {
                (off + n).checked_sub(len)? / align * align
            } else {
                off.div_ceil(align).checked_mul(align)?
            };
            (start >= off && start.checked_add(len)? <= off + n).then_some((off, n, start))
        };
        let found = if from_top {
            self.free.iter().rev().find_map(fits)
        } else {
            self.free.iter().find_map(fits)
        };
        let (off, n, start) = found?;
        self.free.remove(&off);
        if start > off {
            self.free.insert(off, start - off);
        }
        if start + len < off + n {
            self.free.insert(start + len, off + n - start - len);
        }
        Some(start)
    }

    /// Returns `[off, off + len)` to the free list, merged with its neighbours.
    fn give(&mut self, mut off: usize, mut len: usize) {
        if let Some((&prev, &n)) = self.free.range(..off).next_back() {
            if prev + n == off {
                self.free.remove(&prev);
                off = prev;
                len += n;
            }
        }
        if let Some(n) = self.free.remove(&(off + len)) {
            len += n;
        }
        self.free.insert(off, len);
    }
}

/// Where a rank's allocations are, for a segment of `bytes` bytes.
///
/// ```
/// use amrq::rma::SegmentAllocator;
/// let mut a = SegmentAllocator::new(1 << 20);
/// let sym = a.alloc_symmetric(4096, 64).unwrap();
/// let mine = a.alloc_local(100, 8).unwrap();
/// assert_eq!(sym, 0); // the symmetric arena starts at the bottom
/// assert!(mine >= (1 << 20) - 100 - 8); // the local one at the top
/// a.free(mine).unwrap();
/// assert_eq!(a.alloc_local(100, 8), Some(mine));
/// ```
#[derive(Debug, Clone)]
pub struct SegmentAllocator {
    bytes: usize,
    /// The symmetric arena is `[0, sym_end)`, the local one `[local_start, bytes)`.
    sym_end: usize,
    local_start: usize,
    sym: Arena,
    local: Arena,
    /// Live allocations: offset → (length, symmetric).
    live: BTreeMap<usize, (usize, bool)>,
    /// The furthest either arena ever reached: the bytes of `[sym_reached,
    /// local_reached)` were never handed out, and are as the conduit made them, zero.
    sym_reached: usize,
    local_reached: usize,
}

impl SegmentAllocator {
    /// An allocator for a segment of `bytes` bytes, all free.
    ///
    /// ```
    /// use amrq::am::SegmentAllocator;
    /// let a = SegmentAllocator::new(1 << 20);
    /// assert_eq!((a.segment_bytes(), a.free_bytes()), (1 << 20, 1 << 20));
    /// ```
    pub fn new(bytes: usize) -> Self {
        Self {
            bytes,
            sym_end: 0,
            local_start: bytes,
            sym: Arena::default(),
            local: Arena::default(),
            live: BTreeMap::new(),
            sym_reached: 0,
            local_reached: bytes,
        }
    }

    /// Bytes not allocated (in free lists or between the arenas).
    ///
    /// ```
    /// use amrq::am::SegmentAllocator;
    /// let mut a = SegmentAllocator::new(4096);
    /// let at = a.alloc_symmetric(1024, 64).unwrap();
    /// assert_eq!(a.free_bytes(), 3072);
    /// a.free(at).unwrap();
    /// assert_eq!(a.free_bytes(), 4096);
    /// ```
    pub fn free_bytes(&self) -> usize {
        let listed: usize = self.sym.free.values().chain(self.local.free.values()).sum();
        listed + (self.local_start - self.sym_end)
    }

    /// `len` bytes at alignment `align` (a power of two) in the symmetric arena, lowest
    /// fit first; `None` if there is no room (or `align` is not a power of two).
    ///
    /// ```
    /// use amrq::am::SegmentAllocator;
    /// // Every rank makes the same calls in the same order, so every rank gets the same
    /// // offsets: a symmetric allocation.
    /// let (mut a, mut b) = (SegmentAllocator::new(4096), SegmentAllocator::new(4096));
    /// assert_eq!(a.alloc_symmetric(100, 64), b.alloc_symmetric(100, 64));
    /// assert_eq!(a.alloc_symmetric(8, 8), b.alloc_symmetric(8, 8));
    /// assert_eq!(a.alloc_symmetric(1 << 20, 8), None); // no room
    /// ```
    pub fn alloc_symmetric(&mut self, len: usize, align: usize) -> Option<usize> {
        if !align.is_power_of_two() {
            return None;
        }
        let len = len.max(1);
        let off = match self.sym.take(len, align, false) {
            Some(off) => off,
            None => {
                let start = self.sym_end.div_ceil(align).checked_mul(align)?;
                if start.checked_add(len)? > self.local_start {
                    return None;
                }
                if start > self.sym_end {
                    self.sym.give(self.sym_end, start - self.sym_end);
                }
                self.sym_end = start + len;
                self.sym_reached = self.sym_reached.max(self.sym_end);
                start
            }
        };
        self.live.insert(off, (len, true));
        Some(off)
    }

    /// [`SegmentAllocator::alloc_symmetric`], with the part of the allocation that an
    /// earlier one may have written: zero it, and the rest is zero already (a
    /// conduit's segment starts zeroed, and nothing else writes where nothing was
    /// allocated).
    ///
    /// ```
    /// use amrq::am::SegmentAllocator;
    /// let mut a = SegmentAllocator::new(1 << 16);
    /// let (at, used) = a.alloc_symmetric_fresh(4096, 64).unwrap();
    /// assert!(used.is_empty()); // never handed out before
    /// a.free(at).unwrap();
    /// let (again, used) = a.alloc_symmetric_fresh(8192, 64).unwrap();
    /// assert_eq!((again, used), (at, at..at + 4096)); // the first 4 KiB were
    /// ```
    pub fn alloc_symmetric_fresh(
        &mut self,
        len: usize,
        align: usize,
    ) -> Option<(usize, std::ops::Range<usize>)> {
        let (sym, local) = (self.sym_reached, self.local_reached);
        let off = self.alloc_symmetric(len, align)?;
        let end = off + len.max(1);
        // The smallest range that covers what either arena reached before.
        let start = if off < sym { off } else { off.max(local) };
        let stop = if end > local { end } else { end.min(sym) };
        Some((off, start..stop.max(start)))
    }

    /// `len` bytes at alignment `align` (a power of two) in the local arena, highest fit
    /// first; `None` if there is no room.
    ///
    /// ```
    /// use amrq::am::SegmentAllocator;
    /// let mut a = SegmentAllocator::new(4096);
    /// let local = a.alloc_local(256, 128).unwrap(); // from the top: symmetric ones are unmoved
    /// let sym = a.alloc_symmetric(256, 128).unwrap();
    /// assert!(sym < local && local % 128 == 0);
    /// ```
    pub fn alloc_local(&mut self, len: usize, align: usize) -> Option<usize> {
        if !align.is_power_of_two() {
            return None;
        }
        let len = len.max(1);
        let off = match self.local.take(len, align, true) {
            Some(off) => off,
            None => {
                let start = self.local_start.checked_sub(len)? / align * align;
                if start < self.sym_end {
                    return None;
                }
                if start + len < self.local_start {
                    self.local.give(start + len, self.local_start - start - len);
                }
                self.local_start = start;
                self.local_reached = self.local_reached.min(start);
                start
            }
        };
        self.live.insert(off, (len, false));
        Some(off)
    }

    /// Frees the allocation at `off`; `Err(off)` if nothing is allocated there. Returns
    /// whether it was symmetric.
    ///
    /// ```
    /// use amrq::am::SegmentAllocator;
    /// let mut a = SegmentAllocator::new(4096);
    /// let at = a.alloc_symmetric(64, 8).unwrap();
    /// assert_eq!(a.free(at), Ok(true));
    /// assert_eq!(a.free(at), Err(at)); // not allocated any more
    /// ```
    pub fn free(&mut self, off: usize) -> Result<bool, usize> {
        let (len, symmetric) = self.live.remove(&off).ok_or(off)?;
        if symmetric {
            self.sym.give(off, len);
            // Give the top of the arena back to the space between the arenas.
            if let Some((&last, &n)) = self.sym.free.iter().next_back() {
                if last + n == self.sym_end {
                    self.sym.free.remove(&last);
                    self.sym_end = last;
                }
            }
        } else {
            self.local.give(off, len);
            if let Some(n) = self.local.free.remove(&self.local_start) {
                self.local_start += n;
            }
        }
        Ok(symmetric)
    }

    /// Bytes of the segment.
    ///
    /// ```
    /// use amrq::am::SegmentAllocator;
    /// assert_eq!(SegmentAllocator::new(8192).segment_bytes(), 8192);
    /// ```
    pub fn segment_bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::SegmentAllocator;

    /// A model: a byte map of who owns what. Every allocation must be inside the
    /// segment, aligned, and disjoint from every other live one.
    #[test]
    fn allocations_are_aligned_disjoint_and_reusable() {
        const BYTES: usize = 1 << 16;
        let mut a = SegmentAllocator::new(BYTES);
        let mut owner = vec![0u32; BYTES];
        // Bytes any allocation was ever given.
        let mut ever = vec![false; BYTES];
        let mut live: Vec<(usize, usize)> = Vec::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as usize
        };
        for step in 1..20_000u32 {
            if live.len() > 40 || (!live.is_empty() && rnd(3) == 0) {
                let (off, len) = live.swap_remove(rnd(live.len()));
                assert!(a.free(off).is_ok());
                owner[off..off + len].iter_mut().for_each(|o| *o = 0);
                continue;
            }
            let (len, align) = (1 + rnd(3000), 1 << rnd(7));
            let got = if rnd(2) == 0 {
                a.alloc_symmetric_fresh(len, align)
            } else {
                a.alloc_local(len, align).map(|off| (off, off..off + len))
            };
            let Some((off, used)) = got else { continue };
            assert_eq!(off % align, 0, "aligned");
            assert!(off + len <= BYTES, "inside");
            assert!(owner[off..off + len].iter().all(|&o| o == 0), "disjoint");
            let outside = (off..off + len).filter(|b| !used.contains(b));
            assert!(outside.clone().all(|b| !ever[b]), "fresh where it says so");
            owner[off..off + len].iter_mut().for_each(|o| *o = step);
            ever[off..off + len].iter_mut().for_each(|e| *e = true);
            live.push((off, len));
        }
        for (off, _) in live.drain(..) {
            a.free(off).unwrap();
        }
        assert_eq!(a.free_bytes(), BYTES, "everything came back");
        assert_eq!(
            a.alloc_symmetric(BYTES, 1),
            Some(0),
            "and merged into one range"
        );
        assert_eq!(a.free(12345), Err(12345));
    }

    #[test]
    fn the_same_symmetric_sequence_gives_the_same_offsets_whatever_the_local_ones() {
        let mut a = SegmentAllocator::new(1 << 20);
        let mut b = SegmentAllocator::new(1 << 20);
        b.alloc_local(5000, 8).unwrap();
        let x = (a.alloc_symmetric(100, 64), b.alloc_symmetric(100, 64));
        let y = (a.alloc_symmetric(7000, 4096), b.alloc_symmetric(7000, 4096));
        a.free(x.0.unwrap()).unwrap();
        b.free(x.1.unwrap()).unwrap();
        let z = (a.alloc_symmetric(50, 8), b.alloc_symmetric(50, 8));
        assert_eq!((x.0, y.0, z.0), (x.1, y.1, z.1));
        assert!(a.alloc_local(1 << 21, 8).is_none(), "no room is None");
    }
}
