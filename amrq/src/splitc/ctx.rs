//! The context a Split-C program runs with: `MYPROC`, `PROCS`, and the operations on
//! global pointers and spread arrays. Reads, writes, gets and puts are in [`access`];
//! signalling stores in [`store`].

use super::{GlobalPtr, Layout, SplitCError, SpreadArray};
use crate::am::{Am, AmError, Arg, Args, Call, ReqCtx};
use crate::coll::Coll;
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, Rank};
use crate::rma::{Rma, Word};

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

mod access;
mod store;

/// The unit symmetric allocations of this layer are aligned and rounded to: two cache
/// lines, since the adjacent-line prefetcher pulls lines in pairs.
const LINE_PAIR: usize = 128;

/// One rank's view of the global address space (Split-C's runtime): reads, writes,
/// split-phase gets and puts, stores, spread arrays, barriers.
///
/// A pointer to this rank's own segment is accessed by a plain copy in memory, whatever
/// the path (Begel et al. §5.3); others go through [`Rma`]: a copy into the mapped
/// segment on one host ([`SplitC::new`] where the conduit maps peers' segments), AM
/// frames served by the owner elsewhere, or everywhere over
/// [`Rma::over_frames`].
///
/// ```
/// use amrq::prelude::*;
/// use amrq::splitc::{Layout, SplitC, SplitCError};
/// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<f64> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     let sc = am.splitc();
///     let a = sc.all_spread_malloc::<f64>(30, Layout::Cyclic)?;
///     for i in a.local_indices(sc.my_proc()) {
///         sc.write(a.at(i), i as f64)?; // local: a plain store
///     }
///     sc.barrier()?;
///     let mut sum = 0.0;
///     for i in 0..a.len() {
///         sum += sc.read(a.at(i))?; // a third of them local, the rest remote
///     }
///     sc.barrier()?;
///     Ok(sum)
/// })
/// .unwrap();
/// assert!(out.iter().all(|s| *s == 435.0));
/// ```
pub struct SplitC<S, C: Conduit = MemConduit> {
    /// Barriers' company: reductions, scans, broadcasts; and the one-sided operations
    /// and the AM layer below it.
    coll: Coll<S, C>,
    me: Rank,
    procs: usize,
    /// This rank's segment: where a local pointer's access is a plain copy.
    segment: (NonNull<u8>, usize),
    /// The store counter (bytes stored into this rank), then one word per rank: what
    /// each has stored here, written by it in `all_store_sync`. Same offset on every
    /// rank.
    counters: usize,
    /// Bytes this rank has stored into each rank, since the start.
    stored_to: RefCell<Vec<u64>>,
    /// Bytes of the store counter `store_sync` and `all_store_sync` have accounted for.
    accounted: Cell<u64>,
    /// Gets and puts started since the last `sync`.
    started: Cell<usize>,
    /// When the context was made: the origin of [`SplitC::seconds`].
    start: std::time::Instant,
}

impl<S, C: Conduit> std::fmt::Debug for SplitC<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitC")
            .field("my_proc", &self.me)
            .field("procs", &self.procs)
            .field("direct", &self.rma().is_direct(self.me))
            .finish_non_exhaustive()
    }
}

impl<S, C: Conduit> SplitC<S, C> {
    /// Collective: Split-C on `rma`'s rank, remote accesses by `rma`'s path: through
    /// mapped memory where the conduit maps peers' segments ([`Rma::new`], the direct
    /// path), as AM frames otherwise or with [`Rma::over_frames`] (the message path, as
    /// on a network, for comparing the two on one host). Allocates its store counters
    /// (`8 · (PROCS + 1)` bytes per rank, on lines of their own) and the collectives' mailbox
    /// (as [`Coll::new`] does) in one symmetric allocation.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::rma::Rma;
    /// use amrq::splitc::{GlobalPtr, SplitC, SplitCError};
    /// let mut frames = amrq::Config::new();
    /// frames.rma_frames.set(true); // every one-sided operation as AM frames
    /// frames.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let sc = am.splitc();
    ///     assert!(!sc.is_direct());
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     let peer = GlobalPtr::<u64>::new(1 - sc.my_proc(), at);
    ///     sc.write(peer, 7)?; // a request, acknowledged once the bytes are in place
    ///     sc.barrier()?;
    ///     assert_eq!(sc.read(peer.on(sc.my_proc()))?, 7);
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn new(rma: Rma<S, C>) -> Result<Self, SplitCError> {
        let am = rma.am();
        let procs = am.size();
        // Lines of their own: a peer's store writing into the array next to them,
        // while this rank counts stores, would make the line bounce between the cores.
        let bytes = (8 * (procs + 1)).next_multiple_of(LINE_PAIR);
        // The counters, then the collectives' mailbox, in one symmetric allocation
        // (one barrier and all-gather fewer at start-up): zeroed, and every rank done
        // with that before anyone stores (`Coll::with_mailbox` begins with a barrier).
        let counters =
            rma.alloc_symmetric_zeroed(bytes + Coll::<S, C>::mailbox_bytes(procs), LINE_PAIR)?;
        let (me, segment) = (am.rank(), am.segment());
        const { assert!(LINE_PAIR.is_multiple_of(crate::coll::MAILBOX_ALIGN)) };
        let coll = Coll::with_mailbox(rma, counters + bytes)?;
        Ok(Self {
            me,
            procs,
            segment,
            counters,
            stored_to: RefCell::new(vec![0; procs]),
            accounted: Cell::new(0),
            started: Cell::new(0),
            start: std::time::Instant::now(),
            coll,
        })
    }

    /// This rank (Split-C's `MYPROC`).
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// let me = amrq::Config::new().threads(3, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     Ok(sc.my_proc())
    /// })
    /// .unwrap();
    /// assert_eq!(me, [0, 1, 2]);
    /// ```
    pub fn my_proc(&self) -> Rank {
        self.me
    }

    /// Ranks in the job (Split-C's `PROCS`).
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// let p = amrq::Config::new().threads(2, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     Ok(sc.procs())
    /// })
    /// .unwrap();
    /// assert_eq!(p, [2, 2]);
    /// ```
    pub fn procs(&self) -> usize {
        self.procs
    }

    /// True if remote accesses go through mapped memory rather than as AM frames.
    ///
    /// ```
    /// use amrq::{splitc::SplitCError, Config};
    /// let mut cfg = Config::default();
    /// cfg.rma_frames.set(true); // every remote access as AM frames, as across a network
    /// let direct = cfg.threads(2, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     Ok(sc.is_direct())
    /// })
    /// .unwrap();
    /// assert_eq!(direct, [false, false]);
    /// ```
    pub fn is_direct(&self) -> bool {
        self.rma().is_direct(self.me)
    }

    /// True if `p` is in this rank's own segment (its accesses are plain copies).
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let p = GlobalPtr::<u64>::new(sc.my_proc(), 0);
    ///     assert!(sc.is_local(p) && !sc.is_local(p.on(1 - sc.my_proc())));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn is_local<T: Word>(&self, p: GlobalPtr<T>) -> bool {
        p.rank() == self.me
    }

    /// The one-sided operations below (allocation, atomics, strided transfers).
    ///
    /// ```
    /// use amrq::splitc::{GlobalPtr, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let at = sc.rma().alloc_symmetric(8, 8)?; // one u64 at the same offset everywhere
    ///     sc.write(GlobalPtr::<u64>::new(0, at), 1)?;
    ///     Ok(sc.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn rma(&self) -> &Rma<S, C> {
        self.coll.rma()
    }

    /// The collectives below (gather, exchange, …).
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let mut all = [0u32; 2];
    ///     sc.coll().allgather(&[sc.my_proc() as u32 * 7], &mut all)?;
    ///     Ok(all)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [[0, 7], [0, 7]]);
    /// ```
    pub fn coll(&self) -> &Coll<S, C> {
        &self.coll
    }

    /// The collectives below, to change (see [`Rma::am_mut`]).
    pub fn coll_mut(&mut self) -> &mut Coll<S, C> {
        &mut self.coll
    }

    /// Wall-clock seconds since this context was made (Split-C's timers), for timing
    /// phases of a program.
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let t0 = sc.seconds();
    ///     sc.barrier()?;
    ///     assert!(sc.seconds() >= t0);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Collective: `v` combined over every rank with `op` (associative and
    /// commutative), on every rank (Split-C's `all_reduce_to_all`).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::{coll, rma::Rma, splitc::{SplitC, SplitCError}};
    /// let out = amrq::Config::new().threads(4, |setup| -> amrq::Result<(u64, u64, u64)> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let sc = am.splitc();
    ///     let me = sc.my_proc() as u64;
    ///     Ok((sc.all_reduce(me, coll::sum)?, sc.all_reduce(me, coll::max)?, sc.all_scan(me + 1, 0, coll::sum)?))
    /// })
    /// .unwrap();
    /// assert_eq!(out[3], (6, 3, 10));
    /// assert_eq!(out[1], (6, 3, 3));
    /// ```
    pub fn all_reduce<T: Word>(&self, v: T, op: impl Fn(T, T) -> T) -> Result<T, SplitCError> {
        let mut data = [v];
        self.coll.allreduce(&mut data, op)?;
        Ok(data[0])
    }

    /// Collective: [`SplitC::all_reduce`] element by element over a slice.
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let mut v = [1.0f64, sc.my_proc() as f64];
    ///     sc.all_reduce_slice(&mut v, amrq::coll::sum)?;
    ///     Ok(v)
    /// })
    /// .unwrap();
    /// assert!(out.iter().all(|v| *v == [3.0, 3.0]));
    /// ```
    pub fn all_reduce_slice<T: Word>(
        &self,
        data: &mut [T],
        op: impl Fn(T, T) -> T,
    ) -> Result<(), SplitCError> {
        Ok(self.coll.allreduce(data, op)?)
    }

    /// Collective: the inclusive prefix of `v` along the ranks (rank r gets
    /// `v0 op … op vr`; Split-C's `all_scan`); `identity` is `op`'s (0 for a sum).
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     Ok(sc.all_scan(10u64, 0, amrq::coll::sum)?)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [10, 20, 30]);
    /// ```
    pub fn all_scan<T: Word>(
        &self,
        v: T,
        identity: T,
        op: impl Fn(T, T) -> T,
    ) -> Result<T, SplitCError> {
        let mut data = [v];
        self.coll.scan(&mut data, true, identity, op)?;
        Ok(data[0])
    }

    /// Collective: rank `root`'s `v`, on every rank (Split-C's `all_bcast`).
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<_> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     Ok(sc.broadcast(2, sc.my_proc() as i32 - 10)?)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [-8, -8, -8]);
    /// ```
    pub fn broadcast<T: Word>(&self, root: Rank, v: T) -> Result<T, SplitCError> {
        let mut data = [v];
        self.coll.broadcast(root, &mut data)?;
        Ok(data[0])
    }

    /// The AM layer below.
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     assert_eq!(sc.am().size(), sc.procs()); // the AM layer below
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn am(&self) -> &Am<S, C> {
        self.coll.am()
    }

    /// Runs atomic procedure `proc` (a call handler of the `Am`'s table, taking the
    /// element's byte offset and `x`) at the owner of `at`, and returns its answer:
    /// Split-C's atomic functions. It runs atomically with respect to the owner's other
    /// handlers (not to direct reads and writes of the element); [`update_local`]
    /// changes the element in it.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use amrq::rma::Rma;
    /// use amrq::splitc::{update_local, GlobalPtr, SplitC, SplitCError};
    /// let out = amrq::Config::new().threads(3, |setup| -> amrq::Result<f64> {
    ///     let mut t = HandlerTable::<()>::new();
    ///     // element += x; answers the element before.
    ///     let add = t.call("add", |_, ctx, (at, x): (u64, f64)| update_local(&ctx, at, |v: f64| v + x));
    ///     let am = setup.start(t, ())?;
    ///     let rma = am.rma();
    ///     let sc = am.splitc();
    ///     let at = GlobalPtr::<f64>::new(0, rma.alloc_symmetric(8, 8)?);
    ///     sc.atomic(add, at, 2.5)?; // every rank adds 2.5 at rank 0
    ///     sc.barrier()?;
    ///     Ok(sc.read(at)?)
    /// })
    /// .unwrap();
    /// assert!(out.into_iter().all(|v| v == 7.5));
    /// ```
    pub fn atomic<T: Word, X: Arg, R: Args>(
        &self,
        proc: Call<(u64, X), R>,
        at: GlobalPtr<T>,
        x: X,
    ) -> Result<R, SplitCError> {
        let offset = at.offset() as u64;
        Ok(self.am().call(at.rank(), proc, (offset, x))?.wait()?)
    }

    /// Waits until every rank has called it, serving others' requests meanwhile.
    ///
    /// ```
    /// use amrq::splitc::SplitCError;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     sc.barrier()?; // also completes this rank's split-phase operations first
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn barrier(&self) -> Result<(), SplitCError> {
        Ok(self.am().barrier()?)
    }

    /// Collective: a spread array of `len` elements laid out by `layout`, its local part
    /// at the same offset on every rank (Split-C's `all_spread_malloc`). Every rank
    /// calls it with the same arguments, in the same order as its other symmetric
    /// allocations. The part starts on a 128-byte boundary and has its lines to
    /// itself: a peer writing into one array never contends for a line with this
    /// rank's other arrays or its store counters.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let a = sc.all_spread_malloc::<f32>(10, Layout::BlockCyclic(5))?; // one block each
    ///     assert_eq!((a.owner(4), a.owner(5)), (0, 1));
    ///     Ok(sc.all_spread_free(a)?)
    /// })
    /// .unwrap();
    /// ```
    pub fn all_spread_malloc<T: Word>(
        &self,
        len: usize,
        layout: Layout,
    ) -> Result<SpreadArray<T>, SplitCError> {
        let shape = SpreadArray::<T>::new(0, len, layout, self.procs);
        let bytes = shape.local_bytes().max(1);
        let base = self
            .rma()
            .alloc_symmetric(bytes.next_multiple_of(LINE_PAIR), LINE_PAIR)?;
        Ok(SpreadArray::new(base, len, layout, self.procs))
    }

    /// Collective: frees a spread array of [`SplitC::all_spread_malloc`] on every rank.
    ///
    /// ```
    /// use amrq::splitc::{Layout, SplitCError};
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let sc = job.splitc();
    ///     let free = sc.rma().am().segment_allocator().borrow().free_bytes();
    ///     let a = sc.all_spread_malloc::<u64>(1000, Layout::Cyclic)?;
    ///     sc.all_spread_free(a)?; // collective, as the allocation was
    ///     assert_eq!(sc.rma().am().segment_allocator().borrow().free_bytes(), free);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn all_spread_free<T: Word>(&self, a: SpreadArray<T>) -> Result<(), SplitCError> {
        self.barrier()?; // nobody still reads or writes it
        Ok(self.rma().free(a.base())?)
    }

    /// Word `i` of this rank's counters: 0 the store count, 1 + r what rank r said it
    /// stored here.
    fn own_counter(&self, i: usize) -> &AtomicU64 {
        let at = self.counters + 8 * i;
        debug_assert!(i <= self.procs && at + 8 <= self.segment.1);
        // SAFETY: the counters were allocated 8-aligned in this rank's segment, which
        // lives as long as the job, with room for `procs + 1` words; every rank accesses
        // them atomically only (RMA atomics, puts of whole words before a barrier).
        unsafe { &*self.segment.0.as_ptr().add(at).cast::<AtomicU64>() }
    }

    /// Copies `bytes` to `offset` of this rank's segment.
    fn copy_in(&self, offset: usize, bytes: &[u8]) -> Result<(), SplitCError> {
        let to = self.local(offset, bytes.len())?;
        // SAFETY: as in `bulk_read`, the other way.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), to.as_ptr(), bytes.len()) };
        Ok(())
    }

    /// `len` bytes at `offset` of this rank's segment, checked to lie inside it.
    fn local(&self, offset: usize, len: usize) -> Result<NonNull<u8>, SplitCError> {
        let (base, bytes) = self.segment;
        if offset.checked_add(len).is_none_or(|end| end > bytes) {
            return Err(crate::rma::RmaError::OutOfSegment {
                rank: self.me,
                offset,
                len,
                segment_bytes: bytes,
            }
            .into());
        }
        // SAFETY: `offset + len <= bytes`: inside the segment.
        Ok(unsafe { base.add(offset) })
    }
}

/// In an atomic procedure ([`SplitC::atomic`]) at the element's owner: replaces the `T`
/// at byte `offset` of this rank's segment (the procedure's first arg) by `f` of it, and returns
/// the element before. An offset outside the segment is the caller's fault
/// ([`AmError::BadRuntimeMessage`], recorded against it).
///
/// ```
/// use amrq::prelude::*;
/// use amrq::splitc::{update_local, GlobalPtr};
/// let out = amrq::Config::new().threads(3, |setup| {
///     let mut t = HandlerTable::<()>::new();
///     // An atomic procedure: the max of the element and the arg, run at the element's owner.
///     let max = t.call("max", |_, ctx, (at, v): (u64, u64)| update_local(&ctx, at, |x: u64| x.max(v)));
///     let job = setup.start(t, ())?;
///     let sc = job.splitc();
///     let at = GlobalPtr::<u64>::new(0, sc.rma().alloc_symmetric(8, 8)?);
///     sc.barrier()?;
///     sc.atomic(max, at, 10 * sc.my_proc() as u64)?;
///     sc.barrier()?;
///     Ok(sc.read(at)?)
/// })
/// .unwrap();
/// assert!(out.into_iter().all(|v| v == 20));
/// ```
pub fn update_local<T: Word, S, C: Conduit>(
    ctx: &ReqCtx<'_, S, C>,
    offset: u64,
    f: impl FnOnce(T) -> T,
) -> Result<T, AmError> {
    let (base, bytes) = ctx.segment();
    let size = std::mem::size_of::<T>();
    let inside = usize::try_from(offset)
        .ok()
        .filter(|&o| o.checked_add(size).is_some_and(|end| end <= bytes));
    let Some(off) = inside else {
        return Err(AmError::BadRuntimeMessage {
            source_rank: ctx.source(),
            what: "an atomic procedure's element is outside this rank's segment",
        });
    };
    // SAFETY: `off + size` lies in this rank's segment (checked), which lives as long as
    // the job; unaligned accesses, since a spread array's element need not be aligned
    // for `T`. Handlers run one at a time, so no other handler touches it meanwhile.
    unsafe {
        let p = base.as_ptr().add(off).cast::<T>();
        let old = p.read_unaligned();
        p.write_unaligned(f(old));
        Ok(old)
    }
}
