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
//! **Through frames** (a conduit that does not map peers' memory, or
//! [`Rma::over_frames`] on one host) each operation is AM traffic served by the
//! target's runtime handlers ([`Am::put_via_frames`] and friends): a put is a Long
//! request acknowledged once its bytes are in place, a get one or more requests answered
//! by Medium replies, an atomic a request whose reply carries the old value. Blocking
//! calls wait for the replies (running handlers); `*_nb` handles and `sync_nbi` wait
//! for puts and atomics in flight. A get's bytes need a destination that outlives the
//! call, so `get_nbi` through frames completes before it returns.
//!
//! **Ordering.** A put is in place, and its source buffer free, when the call returns.
//! Its completion events ([`Completion`]) come after the data: a counter at the target
//! incremented with Release ordering, a frame in a named queue at the target (whose
//! publication is a Release store). A target that reads the counter with Acquire, or
//! takes the frame, sees the data.

mod alloc;
mod error;
mod vector;

pub use alloc::SegmentAllocator;
pub use error::RmaError;
pub use vector::Strided;

use crate::am::{Am, AtomicKind, OpId};
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
pub(crate) fn bytes_of<T: Word>(s: &[T]) -> &[u8] {
    // SAFETY: `Word` types have no padding, so every byte of the slice is initialised;
    // u8 has alignment 1; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of words.
pub(crate) fn bytes_of_mut<T: Word>(s: &mut [T]) -> &mut [u8] {
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

/// A non-blocking operation: [`Handle::wait`] for it (dropping it waits too). On
/// mapped memory it completed before it was returned; through frames it completes
/// when the target's reply arrives.
#[must_use = "wait on the handle"]
pub struct Handle<'h, S, C: Conduit = MemConduit> {
    am: &'h Am<S, C>,
    op: Option<OpId>,
    /// Where a get's bytes go when it completes.
    out: Option<&'h mut [u8]>,
}

impl<S, C: Conduit> std::fmt::Debug for Handle<'_, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

impl<S, C: Conduit> Handle<'_, S, C> {
    /// True once the operation is complete (its replies are in).
    pub fn test(&self) -> bool {
        self.op.is_none_or(|op| self.am.op_done(op))
    }

    /// Waits until the operation is complete (a get's bytes are then in its buffer).
    pub fn wait(mut self) -> Result<(), RmaError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), RmaError> {
        let Some(op) = self.op.take() else {
            return Ok(());
        };
        self.am.op_wait(op, self.out.take().unwrap_or_default())?;
        Ok(())
    }
}

impl<S, C: Conduit> Drop for Handle<'_, S, C> {
    fn drop(&mut self) {
        // Collect the operation so that its slot is freed; an error was the program's
        // to see through `wait`.
        let _ = self.finish();
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
///     am.barrier()?; // both have looked before either adds
///     Ok(rma.fetch_add(0, at, 10)?) // both add 10 to rank 0's first word
/// }).unwrap();
/// let olds: Vec<u64> = out.into_iter().map(Result::unwrap).collect();
/// assert!(olds == [1, 11] || olds == [11, 1]);
/// ```
pub struct Rma<'a, S, C: Conduit = MemConduit> {
    am: &'a Am<S, C>,
    alloc: RefCell<SegmentAllocator>,
    /// Every rank's segment as mapped here (`None`: through frames).
    peers: Vec<Option<(NonNull<u8>, usize)>>,
    /// Bytes of every rank's segment.
    segment_bytes: usize,
    /// Implicit (`*_nbi`) operations completed, and those in flight through frames.
    nbi_done: Cell<u64>,
    nbi_ops: RefCell<Vec<OpId>>,
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
    /// The one-sided operations of `am`'s rank: direct copies where the conduit maps
    /// peers' segments, frames elsewhere. Not collective; but every rank that takes
    /// part in symmetric allocations makes one.
    pub fn new(am: &'a Am<S, C>) -> Self {
        let c = am.rq().conduit();
        Self::with_peers(am, (0..c.size()).map(|r| c.peer_segment(r)).collect())
    }

    /// [`Rma::new`] that sends every operation as AM frames, even to mapped peers: what
    /// a network conduit does, measurable on one host.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::threads::run(2, &Config::default(), |c| -> Result<(), RmaError> {
    ///     let am = Am::new(c, HandlerTable::<()>::new(), ())?;
    ///     let rma = Rma::over_frames(&am);
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     assert_eq!(rma.fetch_add(0, at, 5)? % 5, 0); // a request and its reply
    ///     am.barrier()?;
    ///     let mut v = [0u64];
    ///     rma.get_slice(0, at, &mut v)?;
    ///     assert_eq!(v[0], 10);
    ///     am.barrier()?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn over_frames(am: &'a Am<S, C>) -> Self {
        Self::with_peers(am, vec![None; am.size()])
    }

    fn with_peers(am: &'a Am<S, C>, peers: Vec<Option<(NonNull<u8>, usize)>>) -> Self {
        let segment_bytes = am.rq().conduit().caps().segment_bytes;
        Self {
            am,
            alloc: RefCell::new(SegmentAllocator::new(segment_bytes)),
            peers,
            segment_bytes,
            nbi_done: Cell::new(0),
            nbi_ops: RefCell::new(Vec::new()),
        }
    }

    /// True if operations on `rank` are direct copies (its segment is mapped here).
    pub fn is_direct(&self, rank: Rank) -> bool {
        self.peers.get(rank).is_some_and(Option::is_some)
    }

    /// The AM layer below.
    pub fn am(&self) -> &'a Am<S, C> {
        self.am
    }

    /// Where `len` bytes at `offset` of `rank`'s segment are mapped here (`None`:
    /// through frames), after checking that they are inside it.
    fn target(&self, rank: Rank, offset: usize, len: usize) -> Result<Option<*mut u8>, RmaError> {
        let Some(peer) = self.peers.get(rank) else {
            return Err(RmaError::NoSuchRank {
                rank,
                size: self.peers.len(),
            });
        };
        let bytes = peer.map_or(self.segment_bytes, |(_, b)| b);
        if offset.checked_add(len).is_none_or(|end| end > bytes) {
            return Err(RmaError::OutOfSegment {
                rank,
                offset,
                len,
                segment_bytes: bytes,
            });
        }
        // SAFETY: offset + len ≤ the segment's length (checked above).
        Ok(peer.map(|(base, _)| unsafe { base.as_ptr().add(offset) }))
    }

    /// The u64 at `offset` of `rank`'s segment for an atomic operation (`None`: through
    /// frames), checked inside and aligned.
    fn word(&self, rank: Rank, offset: usize) -> Result<Option<&AtomicU64>, RmaError> {
        let p = self.target(rank, offset, 8)?;
        if offset % 8 != 0 {
            return Err(RmaError::Misaligned { offset });
        }
        // SAFETY: 8 bytes inside a page-aligned segment at an 8-aligned offset, mapped
        // for as long as the conduit (which `self.am` borrows) lives; every rank
        // accesses remote words used as atomics atomically (the program's protocol).
        Ok(p.map(|p| unsafe { &*p.cast::<AtomicU64>() }))
    }

    /// Copies `data` to `offset` of `rank`'s segment; returns when it is in place (and
    /// `data` may be reused).
    pub fn put(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), RmaError> {
        match self.put_start(rank, offset, data, None)? {
            Some(op) => self.collect(op, &mut []).map(drop),
            None => Ok(()),
        }
    }

    /// Starts a put: done on return when direct (`None`), else the operation in flight.
    fn put_start(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
        counter: Option<usize>,
    ) -> Result<Option<OpId>, RmaError> {
        // The counter is checked before anything is written.
        let word = counter.map(|c| self.word(rank, c)).transpose()?.flatten();
        let Some(to) = self.target(rank, offset, data.len())? else {
            return Ok(Some(self.am.put_via_frames(rank, offset, data, counter)?));
        };
        // SAFETY: `to` is valid for `data.len()` bytes (checked) and cannot overlap
        // `data`, a borrowed Rust slice. Other ranks writing the same bytes at the same
        // time is the program's protocol, as with any RMA.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
        if let Some(c) = word {
            // ORDERING: Release: the put's bytes are visible to whoever reads the count
            // with Acquire.
            c.fetch_add(1, Ordering::Release);
        }
        Ok(None)
    }

    /// Waits for an operation through frames: a get's bytes into `out`; returns an
    /// atomic's old value.
    fn collect(&self, op: OpId, out: &mut [u8]) -> Result<u64, RmaError> {
        Ok(self.am.op_wait(op, out)?)
    }

    /// Copies `buf.len()` bytes at `offset` of `rank`'s segment into `buf`.
    pub fn get(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), RmaError> {
        match self.get_start(rank, offset, buf)? {
            Some(op) => self.collect(op, buf).map(drop),
            None => Ok(()),
        }
    }

    /// Starts a get: done on return when direct (`None`, the bytes in `buf`), else the
    /// operation in flight (its result holds the bytes).
    fn get_start(
        &self,
        rank: Rank,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<Option<OpId>, RmaError> {
        let Some(from) = self.target(rank, offset, buf.len())? else {
            return Ok(Some(self.am.get_via_frames(rank, offset, buf.len())?));
        };
        // SAFETY: as in `put_start`, the other way round.
        unsafe { std::ptr::copy_nonoverlapping(from, buf.as_mut_ptr(), buf.len()) };
        Ok(None)
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
        if let Some(op) = self.put_start(rank, offset, data, done.counter)? {
            self.collect(op, &mut [])?; // the data (and the count) in place before the frame
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

    /// Non-blocking [`Rma::put`]: the data has been taken (`data` may be reused) when
    /// it returns; it is in place once the handle is complete.
    pub fn put_nb(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<Handle<'_, S, C>, RmaError> {
        let op = self.put_start(rank, offset, data, None)?;
        Ok(Handle {
            am: self.am,
            op,
            out: None,
        })
    }

    /// Non-blocking [`Rma::get`]: `buf` holds the data once the handle is complete.
    pub fn get_nb<'h>(
        &'h self,
        rank: Rank,
        offset: usize,
        buf: &'h mut [u8],
    ) -> Result<Handle<'h, S, C>, RmaError> {
        let op = self.get_start(rank, offset, buf)?;
        Ok(Handle {
            am: self.am,
            out: op.is_some().then_some(buf),
            op,
        })
    }

    /// Implicit-handle [`Rma::put`]: the data has been taken when it returns, and is in
    /// place after the next [`Rma::sync_nbi`].
    pub fn put_nbi(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), RmaError> {
        match self.put_start(rank, offset, data, None)? {
            Some(op) => self.nbi_ops.borrow_mut().push(op),
            None => self.nbi_done.set(self.nbi_done.get() + 1),
        }
        Ok(())
    }

    /// Implicit-handle [`Rma::get`]: `buf` holds the data after the next
    /// [`Rma::sync_nbi`] (through frames: already when it returns, see the module doc).
    pub fn get_nbi(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), RmaError> {
        self.get(rank, offset, buf)?;
        self.nbi_done.set(self.nbi_done.get() + 1);
        Ok(())
    }

    /// Waits until every implicit-handle operation of this rank is complete; returns
    /// how many completed since the last call.
    pub fn sync_nbi(&self) -> Result<u64, RmaError> {
        let ops = std::mem::take(&mut *self.nbi_ops.borrow_mut());
        let mut done = self.nbi_done.replace(0);
        let mut first_error = None;
        for op in ops {
            match self.collect(op, &mut []) {
                Ok(_) => done += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(done), Err)
    }

    /// Applies `op` to the u64 at `offset` (8-byte aligned) of `rank`'s segment and
    /// returns the value before; for [`AtomicOp::CompareSwap`], it was stored if that
    /// value equals `current`. Atomic against every other rank's atomics on the word.
    pub fn atomic(&self, rank: Rank, offset: usize, op: AtomicOp) -> Result<u64, RmaError> {
        let Some(w) = self.word(rank, offset)? else {
            let (kind, a, b) = match op {
                AtomicOp::FetchAdd(v) => (AtomicKind::Add, v, 0),
                AtomicOp::Swap(v) => (AtomicKind::Swap, v, 0),
                AtomicOp::CompareSwap { current, new } => (AtomicKind::CompareSwap, current, new),
                AtomicOp::FetchAnd(v) => (AtomicKind::And, v, 0),
                AtomicOp::FetchOr(v) => (AtomicKind::Or, v, 0),
                AtomicOp::FetchXor(v) => (AtomicKind::Xor, v, 0),
            };
            let op = self.am.atomic_via_frames(rank, offset, kind, a, b)?;
            return self.collect(op, &mut []);
        };
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
        match self.word(rank, offset)? {
            // ORDERING: Acquire pairs with the Release of `store` and the AcqRel of
            // `atomic`.
            Some(w) => Ok(w.load(Ordering::Acquire)),
            None => self.atomic(rank, offset, AtomicOp::FetchOr(0)),
        }
    }

    /// Writes the u64 at `offset` (8-byte aligned) of `rank`'s segment atomically, with
    /// Release ordering (see [`Rma::load`]).
    pub fn store(&self, rank: Rank, offset: usize, v: u64) -> Result<(), RmaError> {
        match self.word(rank, offset)? {
            // ORDERING: Release pairs with the Acquire of `load` and the AcqRel of
            // `atomic`.
            Some(w) => w.store(v, Ordering::Release),
            None => drop(self.atomic(rank, offset, AtomicOp::Swap(v))?),
        }
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
        // The offsets are compared by the bootstrap's all-gather, which serves no AM
        // traffic: first let every rank finish what it waits for (an operation through
        // frames needs its target to serve it).
        self.am.barrier()?;
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
