//! One-sided data movement (RMA): put and get of bytes and of number slices between
//! registered segments, remote atomics, completion events, and allocation in the
//! segments (local, and collective *symmetric* allocation: the same offset on every
//! rank, for spread arrays).
//!
//! A remote address is (rank, offset in that rank's registered segment); every access
//! is bounds-checked against the target's segment and refused with
//! [`RmaError::OutOfSegment`].
//!
//! **Through the conduit** where it moves data and performs atomics itself
//! ([`CapFlags`](crate::conduit::CapFlags) `put_get` and `atomics`): on one host every
//! segment is mapped in every process, so put and get are one `memcpy` by the calling
//! core, with no receiver involvement (the T3D's and StarT-Voyager's DMA, done by the
//! CPU), and atomics are the processor's own on the target's memory: correct against
//! every other rank's, whichever path they take. Such an operation is complete when the
//! call returns, so its non-blocking forms ([`Rma::put_nb`], [`Rma::put_nbi`], …) return
//! already-complete handles, exactly as GASNet-EX does for shared memory. A conduit
//! whose operations stay in flight (a network's) completes them when the handle is
//! waited on or at [`Rma::sync_nbi`]. This layer holds no pointer into another rank's
//! memory.
//!
//! **Through frames** (a conduit that lacks those abilities, or
//! [`Rma::over_frames`] on one host) each operation is AM traffic (`frames.rs`) served
//! by the target's runtime handlers: a put is a Long
//! request acknowledged once its bytes are in place, a get one or more requests answered
//! by Medium replies, an atomic a request whose reply carries the old value. Blocking
//! calls wait for the replies (running handlers); `*_nb` handles and `sync_nbi` wait
//! for puts and atomics in flight. A get's bytes need a destination that outlives the
//! call, so `get_nbi` through frames completes before it returns.
//!
//! **From a rank's other threads** (`from_threads.rs`), a [`Sender`](crate::am::Sender)
//! puts, gets and applies atomics: on one host through the mapped segments, as the
//! direct path does, without the rank's thread; across hosts through the rank's
//! outbox, which the rank's thread empties when it polls.
//!
//! **Ordering.** A put is in place, and its source buffer free, when the call returns.
//! Its completion events ([`Completion`]) come after the data: a counter at the target
//! incremented with Release ordering, a frame in a named queue at the target (whose
//! publication is a Release store). A target that reads the counter with Acquire, or
//! takes the frame, sees the data.

mod alloc;
mod atomics;
mod completion;
mod error;
mod frames;
mod from_threads;
mod handle;
mod scope;
mod split_phase;
mod vector;

pub use crate::am::SegmentAllocator;
pub use completion::Completion;
pub use error::RmaError;
pub use handle::Handle;
use handle::Pending;
pub use scope::PutScope;
pub use vector::Strided;

pub use crate::conduit::AtomicOp;

use crate::am::{Am, AmError};
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, ConduitError, Rank};
use std::cell::{Cell, RefCell};

mod sealed {
    pub trait Sealed {}
}

/// Element types that put and get move as raw bytes: plain numbers, for which every bit
/// pattern is a value and there are no padding bytes.
///
/// ```
/// use amrq::rma::Word;
/// // Plain numbers: any bit pattern is a value, so bytes from a peer are always valid.
/// fn words<T: Word>(_: &[T]) {}
/// words(&[1u8, 2]);
/// words(&[1.0f64]);
/// words(&[-1i32]);
/// ```
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

/// The one-sided operations of one rank, over its AM layer.
///
/// ```
/// use amrq::{prelude::*, rma::{Rma, RmaError}};
/// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<u64> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     let rma = am.rma();
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
/// let olds: Vec<u64> = out;
/// assert!(olds == [1, 11] || olds == [11, 1]);
/// ```
pub struct Rma<S, C: Conduit = MemConduit> {
    am: Am<S, C>,
    /// Put and get go through the conduit (else as frames).
    direct: Cell<bool>,
    /// Atomics go through the conduit (else as frames).
    direct_atomics: Cell<bool>,
    /// Ranks in the job.
    size: usize,
    /// Bytes of every rank's segment.
    segment_bytes: usize,
    /// Implicit (`*_nbi`) operations completed, and those still in flight.
    nbi_done: Cell<u64>,
    nbi_ops: RefCell<Vec<Pending>>,
}

impl<S, C: Conduit> std::fmt::Debug for Rma<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rma")
            .field("rank", &self.am.rank())
            .field("alloc", self.am.segment_allocator())
            .finish_non_exhaustive()
    }
}

impl<S, C: Conduit> Rma<S, C> {
    /// The one-sided operations of `am`'s rank: through the conduit where it offers
    /// them ([`CapFlags`](crate::conduit::CapFlags)), as frames elsewhere. Not
    /// collective; but every rank that takes part in symmetric allocations makes one.
    ///
    /// ```
    /// use amrq::{am::{Am, HandlerTable}, conduit::threads, rma::Rma, Config};
    /// // A job's is made with it (`Job::rma`); here over an endpoint of one rank's own:
    /// let mut eps = threads::endpoints_for(1, &Config::new().conduit_spec()).unwrap();
    /// let rma = Rma::new(Am::new(eps.remove(0), HandlerTable::<()>::new(), ())?);
    /// assert!(rma.is_direct(0)); // a copy into mapped memory
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn new(am: Am<S, C>) -> Self {
        let flags = am.rq().conduit().caps().flags;
        Self::with_paths(am, flags.put_get, flags.atomics)
    }

    /// [`Rma::new`] that sends every operation as AM frames, even to mapped peers: what
    /// a network conduit does, measurable on one host.
    ///
    /// ```
    /// use amrq::{am::{Am, HandlerTable}, conduit::threads, rma::Rma, Config};
    /// let mut eps = threads::endpoints_for(1, &Config::new().conduit_spec()).unwrap();
    /// let rma = Rma::over_frames(Am::new(eps.remove(0), HandlerTable::<()>::new(), ())?);
    /// assert!(!rma.is_direct(0)); // even its own segment: a request and its reply
    /// let at = rma.alloc_symmetric(8, 8)?;
    /// assert_eq!(rma.fetch_add(0, at, 5)?, 0);
    /// assert_eq!(rma.load(0, at)?, 5);
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn over_frames(am: Am<S, C>) -> Self {
        Self::with_paths(am, false, false)
    }

    /// [`Rma::over_frames`] when `frames`, else [`Rma::new`]: for programs that take
    /// the path as a setting (a job's `rma_frames` setting) or compare both.
    ///
    /// ```
    /// use amrq::{am::{Am, HandlerTable}, conduit::threads, rma::Rma, Config};
    /// for frames in [false, true] {
    ///     let mut eps = threads::endpoints_for(1, &Config::new().conduit_spec()).unwrap();
    ///     let am = Am::new(eps.remove(0), HandlerTable::<()>::new(), ())?;
    ///     let rma = Rma::new_or_over_frames(am, frames);
    ///     assert_eq!(rma.is_direct(0), !frames);
    /// }
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn new_or_over_frames(am: Am<S, C>, frames: bool) -> Self {
        match frames {
            true => Self::over_frames(am),
            false => Self::new(am),
        }
    }

    fn with_paths(am: Am<S, C>, direct: bool, direct_atomics: bool) -> Self {
        let segment_bytes = am.rq().conduit().caps().segment_bytes;
        Self {
            size: am.size(),
            am,
            direct: Cell::new(direct),
            direct_atomics: Cell::new(direct_atomics),
            segment_bytes,
            nbi_done: Cell::new(0),
            nbi_ops: RefCell::new(Vec::new()),
        }
    }

    /// True if put and get on `rank` go through the conduit (copies into mapped memory
    /// on one host) rather than as frames.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// for frames in [false, true] {
    ///     let mut cfg = amrq::Config::new();
    ///     cfg.rma_frames.set(frames); // true: the message path, as across a network
    ///     let direct = cfg.threads(2, |setup| {
    ///         let job = setup.start(HandlerTable::new(), ())?;
    ///         Ok(job.rma().is_direct(1 - job.rank()))
    ///     })?;
    ///     assert_eq!(direct, [!frames; 2]); // threads map each other's segments
    /// }
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn is_direct(&self, rank: Rank) -> bool {
        self.direct.get() && rank < self.size
    }

    /// From now on, every operation as AM frames (`true`), or through the conduit
    /// where it offers them (`false`, as [`Rma::new`]): to compare both paths in one
    /// job. Operations in flight complete as they started.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(2, |setup| {
    ///     let job = setup.start(HandlerTable::new(), ())?;
    ///     let at = job.rma().alloc_symmetric(8, 8)?;
    ///     for frames in [false, true] {
    ///         job.rma().use_frames(frames);
    ///         assert_eq!(job.rma().is_direct(1 - job.rank()), !frames);
    ///         job.rma().fetch_add(0, at, 1)?; // either way, one atomic add at rank 0
    ///     }
    ///     job.barrier()?;
    ///     assert_eq!(job.rma().load(0, at)?, 4);
    ///     job.barrier()
    /// })
    /// .unwrap();
    /// ```
    pub fn use_frames(&self, frames: bool) {
        let flags = self.am.rq().conduit().caps().flags;
        self.direct.set(!frames && flags.put_get);
        self.direct_atomics.set(!frames && flags.atomics);
    }

    /// The AM layer below.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     rma.am().barrier()?; // the AM layer below, for what RMA does not do
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn am(&self) -> &Am<S, C> {
        &self.am
    }

    /// The AM layer below, to change (to start the progress thread of the job's
    /// Interrupt queues: [`Am::start_interrupts`]).
    pub fn am_mut(&mut self) -> &mut Am<S, C> {
        &mut self.am
    }

    /// The conduit below.
    fn conduit(&self) -> &C {
        self.am.rq().conduit()
    }

    /// Checks that `len` bytes at `offset` are inside `rank`'s segment.
    fn target(&self, rank: Rank, offset: usize, len: usize) -> Result<(), RmaError> {
        if rank >= self.size {
            return Err(RmaError::NoSuchRank {
                rank,
                size: self.size,
            });
        }
        if offset
            .checked_add(len)
            .is_none_or(|end| end > self.segment_bytes)
        {
            return Err(RmaError::OutOfSegment {
                rank,
                offset,
                len,
                segment_bytes: self.segment_bytes,
            });
        }
        Ok(())
    }

    /// Checks the u64 at `offset` of `rank`'s segment for an atomic: inside, aligned.
    fn word(&self, rank: Rank, offset: usize) -> Result<(), RmaError> {
        self.target(rank, offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(RmaError::Misaligned { offset });
        }
        Ok(())
    }

    /// Copies `data` to `offset` of `rank`'s segment; returns when it is in place (and
    /// `data` may be reused).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(16, 8)?;
    ///     if am.rank() == 0 {
    ///         rma.put(1, at, b"written by 0")?; // in place at rank 1 when it returns
    ///     }
    ///     am.barrier()?;
    ///     let mut back = [0u8; 12];
    ///     rma.get(1, at, &mut back)?;
    ///     assert_eq!(&back, b"written by 0");
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put(&self, rank: Rank, offset: usize, data: &[u8]) -> Result<(), RmaError> {
        match self.put_start(rank, offset, data, None)? {
            Some(op) => self.collect(op, &mut []).map(drop),
            None => Ok(()),
        }
    }

    /// Starts a put: `None` when it is complete, else the operation in flight.
    fn put_start(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
        counter: Option<usize>,
    ) -> Result<Option<Pending>, RmaError> {
        // The counter is checked before anything is written.
        if let Some(c) = counter {
            self.word(rank, c)?;
        }
        if !self.direct.get() {
            self.target(rank, offset, data.len())?;
            let op = frames::put(&self.am, rank, offset, data, counter)?;
            return Ok(Some(Pending::Frames(op)));
        }
        // The conduit checks the range (one check on the fast path).
        let put = Pending::of(
            self.conduit()
                .put_nb(rank, offset, data)
                .map_err(rma_error)?,
        );
        let Some(c) = counter else {
            return Ok(put);
        };
        // The count comes after the data: the put complete, then an atomic increment
        // (AcqRel, so whoever reads the count with Acquire sees the bytes).
        if let Some(p) = put {
            p.wait(&self.am, &mut [])?;
        }
        self.atomic(rank, c, AtomicOp::FetchAdd(1))?;
        Ok(None)
    }

    /// Waits for an operation in flight: a get's bytes into `out` (frames); returns an
    /// atomic's old value.
    fn collect(&self, op: Pending, out: &mut [u8]) -> Result<u64, RmaError> {
        op.wait(&self.am, out)
    }

    /// Copies `buf.len()` bytes at `offset` of `rank`'s segment into `buf`.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     rma.put(am.rank(), at, &[am.rank() as u8 + 1; 8])?; // my own
    ///     am.barrier()?;
    ///     let mut theirs = [0u8; 8];
    ///     rma.get(1 - am.rank(), at, &mut theirs)?;
    ///     assert_eq!(theirs, [2 - am.rank() as u8; 8]);
    ///     let e = rma.get(1, usize::MAX - 4, &mut theirs).unwrap_err(); // outside the segment
    ///     assert!(e.to_string().contains("segment"), "{e}");
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get(&self, rank: Rank, offset: usize, buf: &mut [u8]) -> Result<(), RmaError> {
        match self.get_start(rank, offset, buf)? {
            Some(op) => self.collect(op, buf).map(drop),
            None => Ok(()),
        }
    }

    /// Starts a get: `None` when it is complete (the bytes in `buf`), else the
    /// operation in flight (through frames its result holds the bytes; in the conduit
    /// they land in `buf`, which the caller keeps borrowed until it completes).
    fn get_start(
        &self,
        rank: Rank,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<Option<Pending>, RmaError> {
        if !self.direct.get() {
            self.target(rank, offset, buf.len())?;
            frames::medium_room(&self.am)?;
            let op = frames::get(&self.am, rank, (offset, buf.len()), None)?;
            return Ok(Some(Pending::Frames(op)));
        }
        // SAFETY: `buf` is borrowed by this call's caller, which completes an operation
        // left in flight before it lets `buf` go: `get` collects it, `get_nb` too
        // (before it returns the handle, so that no forgotten handle leaves a write
        // pending); `op_test` ending in an error ends the operation too.
        let started = unsafe {
            self.conduit()
                .get_nb(rank, offset, buf.as_mut_ptr(), buf.len())
        };
        Ok(Pending::of(started.map_err(rma_error)?))
    }

    /// [`Rma::put`] of a slice of numbers (no alignment needed at the target).
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(3 * 8, 8)?;
    ///     if am.rank() == 0 {
    ///         rma.put_slice(1, at, &[1.5f64, 2.5, 3.5])?;
    ///     }
    ///     am.barrier()?;
    ///     let mut v = [0f64; 3];
    ///     rma.get_slice(1, at, &mut v)?;
    ///     assert_eq!(v, [1.5, 2.5, 3.5]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put_slice<T: Word>(
        &self,
        rank: Rank,
        offset: usize,
        data: &[T],
    ) -> Result<(), RmaError> {
        self.put(rank, offset, bytes_of(data))
    }

    /// [`Rma::get`] into a slice of numbers.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(4 * 4, 8)?;
    ///     rma.put_slice(am.rank(), at, &[am.rank() as u32; 4])?;
    ///     am.barrier()?;
    ///     let mut v = [9u32; 4];
    ///     rma.get_slice(1, at, &mut v)?;
    ///     assert_eq!(v, [1; 4]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_slice<T: Word>(
        &self,
        rank: Rank,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), RmaError> {
        self.get(rank, offset, bytes_of_mut(out))
    }

    /// Puts `data` at `offset` of `rank`'s segment and adds its length to the u64 at
    /// `counter` (8-aligned) of that segment, with no reply (Split-C's `store`): the
    /// target learns that the bytes are in place from the count, read with Acquire.
    /// Through the conduit the bytes and the count are in place when it returns;
    /// through frames the request is on its way, and the target counts it when it
    /// serves it (in any of its polls or waits), so the sender need do nothing more.
    ///
    /// ```
    /// use amrq::{prelude::*, rma::{Rma, RmaError}};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let (count, data) = (rma.alloc_symmetric(8, 8)?, rma.alloc_symmetric(24, 8)?);
    ///     rma.put_counted(1 - am.rank(), data, &[7u8; 24], count)?;
    ///     am.wait_until(|_| rma.load(am.rank(), count).is_ok_and(|n| n == 24))?;
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn put_counted(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
        counter: usize,
    ) -> Result<(), RmaError> {
        self.target(rank, offset, data.len())?;
        self.word(rank, counter)?;
        if self.direct.get() && self.direct_atomics.get() {
            self.put(rank, offset, data)?;
            self.fetch_add(rank, counter, data.len() as u64)?;
            return Ok(());
        }
        Ok(frames::store(&self.am, rank, offset, data, counter)?)
    }
}

/// A conduit's refusal as the RMA layer reports it: the address errors as its own (the
/// conduit's path leaves the checks to the conduit), anything else as it came.
#[cold]
fn rma_error(e: ConduitError) -> RmaError {
    match e {
        ConduitError::OutOfSegment {
            rank,
            offset,
            len,
            segment_bytes,
        } => RmaError::OutOfSegment {
            rank,
            offset,
            len,
            segment_bytes,
        },
        ConduitError::NoSuchRank { rank, size } => RmaError::NoSuchRank { rank, size },
        ConduitError::Misaligned { offset } => RmaError::Misaligned { offset },
        e => AmError::from(e).into(),
    }
}
