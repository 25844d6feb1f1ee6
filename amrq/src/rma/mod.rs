//! One-sided data movement (RMA): put and get of bytes and of number slices between
//! registered segments, remote atomics, completion events, and allocation in the
//! segments (local, and collective *symmetric* allocation: the same offset on every
//! rank, for spread arrays).
//!
//! A remote address is (rank, offset in that rank's registered segment); every access
//! is bounds-checked against the target's segment and refused with
//! [`RmaError::OutOfSegment`].
//!
//! **On one host** every segment is mapped in every process, so put and get are one
//! `memcpy` by the calling core, with no receiver involvement (the T3D's and
//! StarT-Voyager's DMA, done by the CPU), and atomics are the processor's own on the
//! target's memory: correct against every other rank's, whichever path they take.
//! Such an operation is complete when the call returns, so its non-blocking forms
//! ([`Rma::put_nb`], [`Rma::put_nbi`], …) return already-complete handles, exactly as
//! GASNet-EX does for shared memory.
//!
//! **Ordering.** A put is in place, and its source buffer free, when the call returns.
//! Its completion events ([`Completion`]) come after the data: a counter at the target
//! incremented with Release ordering, a frame in a named queue at the target (whose
//! publication is a Release store). A target that reads the counter with Acquire, or
//! takes the frame, sees the data.

mod alloc;
mod error;

pub use alloc::SegmentAllocator;
pub use error::RmaError;

use crate::am::Am;
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, Rank};
use crate::rq::QueueId;
use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

mod sealed {
    pub trait Sealed {}
}

/// Element types that put and get move as raw bytes: plain numbers, for which every bit
/// pattern is a value and there are no padding bytes.
pub trait Word: Copy + sealed::Sealed {}

macro_rules! words {
    ($($t:ty)*) => {$(
        impl sealed::Sealed for $t {}
        impl Word for $t {}
    )*};
}
words!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64);

/// The bytes of a slice of words.
fn bytes_of<T: Word>(s: &[T]) -> &[u8] {
    // SAFETY: `Word` types have no padding, so every byte of the slice is initialised;
    // u8 has alignment 1; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of words.
fn bytes_of_mut<T: Word>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as for `bytes_of`, and every bit pattern written through the bytes is a
    // valid `T` (`Word`).
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}

/// A remote atomic operation on a u64 (i64 values work through `as u64`: the bits of
/// two's-complement add, swap, compare-and-swap and the bitwise operations are the
/// same; see [`Rma::fetch_add_i64`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// Adds, wrapping.
    FetchAdd(u64),
    /// Stores the value.
    Swap(u64),
    /// Stores `new` if the word is `current`.
    CompareSwap {
        /// Expected value.
        current: u64,
        /// Value stored if it matched.
        new: u64,
    },
    /// Bitwise and.
    FetchAnd(u64),
    /// Bitwise or.
    FetchOr(u64),
    /// Bitwise xor.
    FetchXor(u64),
}

/// What a put announces at its target once its data is in place (RQ §2.4).
#[derive(Debug, Clone, Copy, Default)]
pub struct Completion<'a> {
    /// Offset of a u64 counter in the target's segment, incremented by one.
    pub counter: Option<usize>,
    /// A frame enqueued into this queue of the target, with these args (the sender
    /// waits for room, running handlers meanwhile).
    pub notify: Option<(QueueId, &'a [u64])>,
}

/// A non-blocking operation. On one host it completed before it was returned; it is the
/// handle through which conduits that move data asynchronously report completion.
#[derive(Debug)]
#[must_use = "wait on the handle (or drop it once `test` says done)"]
pub struct Handle {
    done: bool,
}

impl Handle {
    /// True once the operation is complete.
    pub fn test(&self) -> bool {
        self.done
    }

    /// Waits until the operation is complete.
    pub fn wait(self) -> Result<(), RmaError> {
        debug_assert!(
            self.done,
            "every operation on mapped memory completes at once"
        );
        Ok(())
    }
}

/// The one-sided operations of one rank, over its AM layer.
///
/// ```
/// use amrq::{prelude::*, rma::{Rma, RmaError}};
/// let out = amrq::threads::run(2, &Config::default(), |c| -> Result<u64, RmaError> {
///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
///     let rma = Rma::new(&am);
///     let at = rma.alloc_symmetric(8 * 4, 8)?; // the same offset on both ranks
///     let peer = 1 - am.rank();
///     rma.put_slice(peer, at, &[1u64, 2, 3, 4])?;
///     am.barrier()?;
///     let mut got = [0u64; 4];
///     rma.get_slice(am.rank(), at, &mut got)?;
///     assert_eq!(got, [1, 2, 3, 4]);
///     Ok(rma.fetch_add(0, at, 10)?) // both add 10 to rank 0's first word
/// }).unwrap();
/// let olds: Vec<u64> = out.into_iter().map(Result::unwrap).collect();
/// assert!(olds == [1, 11] || olds == [11, 1]);
/// ```
pub struct Rma<'a, S, C: Conduit = MemConduit> {
    am: &'a Am<S, C>,
    alloc: RefCell<SegmentAllocator>,
    /// Every rank's segment as mapped here (`None`: not mapped).
    peers: Vec<Option<(NonNull<u8>, usize)>>,
    /// Implicit (`*_nbi`) operations issued and completed.
    nbi: Cell<(u64, u64)>,
}

impl<S, C: Conduit> std::fmt::Debug for Rma<'_, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rma")
            .field("rank", &self.am.rank())
            .field("alloc", &self.alloc)
            .finish_non_exhaustive()
    }
}

impl<'a, S, C: Conduit> Rma<'a, S, C> {
    /// The one-sided operations of `am`'s rank. Not collective; but every rank that
    /// takes part in symmetric allocations makes one.
    pub fn new(am: &'a Am<S, C>) -> Self {
        let c = am.rq().conduit();
        let peers = (0..c.size()).map(|r| c.peer_segment(r)).collect();
        Self {
            am,
            alloc: RefCell::new(SegmentAllocator::new(c.caps().segment_bytes)),
            peers,
            nbi: Cell::new((0, 0)),
        }
    }

    /// The AM layer below.
    pub fn am(&self) -> &'a Am<S, C> {
        self.am
    }

    /// Where `len` bytes at `offset` of `rank`'s segment are mapped here, checked.
    fn target(&self, rank: Rank, offset: usize, len: usize) -> Result<*mut u8, RmaError> {
        let Some(peer) = self.peers.get(rank) else {
            return Err(RmaError::NoSuchRank {
                rank,
                size: self.peers.len(),
            });
        };
        let (base, bytes) = peer.ok_or(RmaError::NotMapped { rank })?;
        if offset.checked_add(len).is_none_or(|end| end > bytes) {
            return Err(RmaError::OutOfSegment {
                rank,
                offset,
                len,
                segment_bytes: bytes,
            });
        }
        // SAFETY: offset + len ≤ the segment's length (checked above).
        Ok(unsafe { base.as_ptr().add(offset) })
    }

    /// The u64 at `offset` of `rank`'s segment, for an atomic operation.
    fn word(&self, rank: Rank, offset: usize) -> Result<&AtomicU64, RmaError> {
        let p = self.target(rank, offset, 8)?;
        if offset % 8 != 0 {
            return Err(RmaError::Misaligned { offset });
        }
        // SAFETY: 8 bytes inside a page-aligned segment at an 8-aligned offset, mapped
        // for as long as the conduit (which `self.am` borrows) lives; every rank
        // accesses remote words used as atomics atomically (the program's protocol).
        Ok(unsafe { &*p.cast::<AtomicU64>() })
    }

    /// Copies `data` to `offset` of `rank`'s segment; returns when it is in place (and
    /// `data` may be reused).
    pub fn put(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), RmaError> {
        let to = self.target(rank, offset, data.len())?;
        // SAFETY: `to` is valid for `data.len()` bytes (checked) and cannot overlap
        // `data`, a borrowed Rust slice. Other ranks writing the same bytes at the same
        // time is the program's protocol, as with any RMA.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        Ok(())
    }

    /// Copies `buf.len()` bytes at `offset` of `rank`'s segment into `buf`.
    pub fn get(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), RmaError> {
        let from = self.target(rank, offset, buf.len())?;
        // SAFETY: as in `put`, the other way round.
        unsafe { std::ptr::copy_nonoverlapping(from, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// [`Rma::put`] of a slice of numbers (no alignment needed at the target).
    pub fn put_slice<T: Word>(
        &self,
        rank: Rank,
        offset: usize,
        data: &[T],
    ) -> Result<(), RmaError> {
        self.put(rank, offset, bytes_of(data))
    }

    /// [`Rma::get`] into a slice of numbers.
    pub fn get_slice<T: Word>(
        &self,
        rank: Rank,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), RmaError> {
        self.get(rank, offset, bytes_of_mut(out))
    }

    /// [`Rma::put`], then the completion events of `done` at the target, in that order.
    ///
    /// ```
    /// use amrq::{prelude::*, conduit::ReceivedFrame, rma::{Completion, Rma, RmaError}};
    /// let mut cfg = Config::default();
    /// let arrived = cfg.add_queue(16);
    /// amrq::threads::run(2, &cfg, |c| -> Result<(), RmaError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     let rma = Rma::new(&am);
    ///     let buf = rma.alloc_symmetric(64, 64)?;
    ///     if am.rank() == 0 {
    ///         let done = Completion { notify: Some((arrived, &[buf as u64])), ..Default::default() };
    ///         rma.put_with(1, buf, b"hello", done)?;
    ///     } else {
    ///         let set = am.rq().poll_set(&[arrived])?;
    ///         let (_, f) = am.rq().wait(&set, None)?; // the data is in place once this arrives
    ///         let mut got = [0u8; 5];
    ///         rma.get(1, f.args()[0] as usize, &mut got)?;
    ///         assert_eq!(&got, b"hello");
    ///         f.release();
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn put_with(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
        done: Completion<'_>,
    ) -> Result<(), RmaError> {
        // Check the counter before writing anything.
        let counter = done.counter.map(|c| self.word(rank, c)).transpose()?;
        self.put(rank, offset, data)?;
        if let Some(c) = counter {
            // ORDERING: Release: the put's bytes are visible to whoever reads the count
            // with Acquire.
            c.fetch_add(1, Ordering::Release);
        }
        if let Some((q, args)) = done.notify {
            self.notify(rank, q, args)?;
        }
        Ok(())
    }

    /// Enqueues a completion frame, waiting for room (running handlers meanwhile).
    fn notify(&self, rank: Rank, q: QueueId, args: &[u64]) -> Result<(), RmaError> {
        while !self.am.rq().enqueue(rank, q, args, &[])? {
            self.am.poll()?;
        }
        Ok(())
    }

    /// [`Rma::get`], then a frame with `args` into this rank's queue `q`: the data is in
    /// `buf` when the frame can be taken (RQ §2.4: a get's completion in a local queue).
    pub fn get_with(
        &self,
        rank: Rank,
        offset: usize,
        buf: &mut [u8],
        q: QueueId,
        args: &[u64],
    ) -> Result<(), RmaError> {
        self.get(rank, offset, buf)?;
        self.notify(self.am.rank(), q, args)
    }

    /// Non-blocking [`Rma::put`]: the source may be reused once the handle is complete.
    pub fn put_nb(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<Handle, RmaError> {
        self.put(rank, offset, data)?;
        Ok(Handle { done: true })
    }

    /// Non-blocking [`Rma::get`]: `buf` holds the data once the handle is complete.
    pub fn get_nb(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<Handle, RmaError> {
        self.get(rank, offset, buf)?;
        Ok(Handle { done: true })
    }

    /// Implicit-handle [`Rma::put`]: complete after the next [`Rma::sync_nbi`].
    pub fn put_nbi(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), RmaError> {
        self.put(rank, offset, data)?;
        self.issued_and_done();
        Ok(())
    }

    /// Implicit-handle [`Rma::get`]: `buf` holds the data after the next
    /// [`Rma::sync_nbi`].
    pub fn get_nbi(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), RmaError> {
        self.get(rank, offset, buf)?;
        self.issued_and_done();
        Ok(())
    }

    fn issued_and_done(&self) {
        let (issued, done) = self.nbi.get();
        self.nbi.set((issued + 1, done + 1));
    }

    /// Waits until every implicit-handle operation of this rank is complete; returns
    /// how many completed since the last call.
    pub fn sync_nbi(&self) -> Result<u64, RmaError> {
        let (issued, done) = self.nbi.get();
        debug_assert_eq!(issued, done, "operations on mapped memory complete at once");
        self.nbi.set((0, 0));
        Ok(done)
    }

    /// Applies `op` to the u64 at `offset` (8-byte aligned) of `rank`'s segment and
    /// returns the value before; for [`AtomicOp::CompareSwap`], it was stored if that
    /// value equals `current`. Atomic against every other rank's atomics on the word.
    pub fn atomic(&self, rank: Rank, offset: usize, op: AtomicOp) -> Result<u64, RmaError> {
        let w = self.word(rank, offset)?;
        // ORDERING: AcqRel: a remote atomic orders like a lock operation, so that a
        // counter or flag built on it publishes (Release) and acquires (Acquire) the
        // data around it; pairs with the same operations of other ranks.
        let o = Ordering::AcqRel;
        Ok(match op {
            AtomicOp::FetchAdd(v) => w.fetch_add(v, o),
            AtomicOp::Swap(v) => w.swap(v, o),
            AtomicOp::CompareSwap { current, new } => {
                // ORDERING: as above; Acquire on failure (the value read is returned).
                match w.compare_exchange(current, new, o, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
            AtomicOp::FetchAnd(v) => w.fetch_and(v, o),
            AtomicOp::FetchOr(v) => w.fetch_or(v, o),
            AtomicOp::FetchXor(v) => w.fetch_xor(v, o),
        })
    }

    /// Reads the u64 at `offset` (8-byte aligned) of `rank`'s segment atomically, with
    /// Acquire ordering: what was written before a Release [`Rma::store`] (or any other
    /// remote atomic) of the value read is visible after.
    pub fn load(&self, rank: Rank, offset: usize) -> Result<u64, RmaError> {
        // ORDERING: Acquire pairs with the Release of `store` and the AcqRel of `atomic`.
        Ok(self.word(rank, offset)?.load(Ordering::Acquire))
    }

    /// Writes the u64 at `offset` (8-byte aligned) of `rank`'s segment atomically, with
    /// Release ordering (see [`Rma::load`]).
    pub fn store(&self, rank: Rank, offset: usize, v: u64) -> Result<(), RmaError> {
        // ORDERING: Release pairs with the Acquire of `load` and the AcqRel of `atomic`.
        self.word(rank, offset)?.store(v, Ordering::Release);
        Ok(())
    }

    /// Remote fetch-and-add on a u64; returns the old value.
    pub fn fetch_add(&self, rank: Rank, offset: usize, v: u64) -> Result<u64, RmaError> {
        self.atomic(rank, offset, AtomicOp::FetchAdd(v))
    }

    /// Remote fetch-and-add on an i64; returns the old value.
    pub fn fetch_add_i64(&self, rank: Rank, offset: usize, v: i64) -> Result<i64, RmaError> {
        Ok(self.atomic(rank, offset, AtomicOp::FetchAdd(v as u64))? as i64)
    }

    /// Remote compare-and-swap on a u64; returns the old value (stored `new` if it was
    /// `current`).
    pub fn compare_swap(
        &self,
        rank: Rank,
        offset: usize,
        current: u64,
        new: u64,
    ) -> Result<u64, RmaError> {
        self.atomic(rank, offset, AtomicOp::CompareSwap { current, new })
    }

    /// `len` bytes at alignment `align` (a power of two) in this rank's segment, for
    /// its own use (others may still put and get there once told the offset).
    pub fn alloc_local(&self, len: usize, align: usize) -> Result<usize, RmaError> {
        let mut a = self.alloc.borrow_mut();
        a.alloc_local(len, align).ok_or(RmaError::OutOfMemory {
            len,
            free: a.free_bytes(),
        })
    }

    /// Collective: `len` bytes at alignment `align` at the same offset in every rank's
    /// segment (a spread array's home). Every rank calls it, with the same arguments, in
    /// the same order as its other symmetric allocations; [`RmaError::NotSymmetric`] on
    /// every rank if any had no room.
    pub fn alloc_symmetric(&self, len: usize, align: usize) -> Result<usize, RmaError> {
        let mine = self.alloc.borrow_mut().alloc_symmetric(len, align);
        let all = self
            .am
            .rq()
            .conduit()
            .allgather(mine.map_or(u64::MAX, |o| o as u64))?;
        if let Some(rank) = (0..all.len()).find(|&r| all[r] == u64::MAX || all[r] != all[0]) {
            if let Some(off) = mine {
                let _ = self.alloc.borrow_mut().free(off);
            }
            return Err(RmaError::NotSymmetric { len, rank });
        }
        Ok(all[0] as usize)
    }

    /// Frees an allocation of this rank ([`Rma::alloc_local`], or its share of a
    /// symmetric one: free those on every rank, in the same order).
    pub fn free(&self, offset: usize) -> Result<(), RmaError> {
        self.alloc
            .borrow_mut()
            .free(offset)
            .map(|_| ())
            .map_err(|offset| RmaError::NotAllocated { offset })
    }
}
