//! Collectives from C: broadcast, reduce, allreduce and scan (sum, min or max of u64 or
//! double words), gather, allgather and the all-to-all exchange (bytes). Every rank of
//! the job calls each one, in the same order, with the same lengths.

use crate::job::{on_job, rank_of, Amrq};
use crate::{slice, slice_mut, AmrqStatus, Failure};
use amrq::rma::Word;
use std::ffi::{c_int, c_void};

/// A reduction's operation (`op` of the reductions and the scan).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmrqOp {
    /// The sum.
    Sum = 0,
    /// The least.
    Min = 1,
    /// The greatest.
    Max = 2,
}

/// A word the reductions combine, with the identity of each operation (what an
/// exclusive scan gives rank 0).
trait Reduced: Word + PartialOrd + std::ops::Add<Output = Self> {
    const ZERO: Self;
    const LEAST: Self;
    const GREATEST: Self;
}

impl Reduced for u64 {
    const ZERO: Self = 0;
    const LEAST: Self = u64::MIN;
    const GREATEST: Self = u64::MAX;
}

impl Reduced for f64 {
    const ZERO: Self = 0.0;
    const LEAST: Self = f64::NEG_INFINITY;
    const GREATEST: Self = f64::INFINITY;
}

/// A reduction's combining function.
type Combine<T> = fn(T, T) -> T;

/// `op` (an `amrq_op` from C) as a function, and its identity.
fn operation<T: Reduced>(op: c_int) -> Result<(Combine<T>, T), Failure> {
    match op {
        0 => Ok((amrq::coll::sum::<T>, T::ZERO)),
        1 => Ok((amrq::coll::min::<T>, T::GREATEST)),
        2 => Ok((amrq::coll::max::<T>, T::LEAST)),
        _ => Err(Failure::argument(format!("no reduction operation {op}"))),
    }
}

/// Collective: rank `root`'s `len` bytes at `data` into every rank's `data`.
///
/// # Safety
/// `am` came from `amrq_init`; `data` points to `len` writable bytes, the same `len`
/// on every rank.
#[no_mangle]
pub unsafe extern "C" fn amrq_broadcast(
    am: *const Amrq,
    root: c_int,
    data: *mut c_void,
    len: usize,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `data` points to `len` writable bytes.
        let bytes = unsafe { slice_mut(data.cast::<u8>(), len) }?;
        Ok(j.coll().broadcast(rank_of(root)?, bytes)?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// How a reduction's result is spread.
#[derive(Clone, Copy)]
enum Reduction {
    /// To rank `root` (the others keep partial results).
    To(c_int),
    /// To every rank.
    All,
    /// Rank r gets ranks 0 … r combined (inclusive) or 0 … r − 1 (exclusive; rank 0
    /// gets the operation's identity).
    Scan { inclusive: bool },
}

fn reduce<T: Reduced>(j: &Amrq, data: &mut [T], op: c_int, how: Reduction) -> Result<(), Failure> {
    let coll = j.coll();
    let (f, identity) = operation::<T>(op)?;
    match how {
        Reduction::To(root) => coll.reduce(rank_of(root)?, data, f)?,
        Reduction::All => coll.allreduce(data, f)?,
        Reduction::Scan { inclusive } => coll.scan(data, inclusive, identity, f)?,
    }
    Ok(())
}

/// A reduction of `n` words at `data` through `reduce`, from C.
///
/// # Safety
/// `am` came from `amrq_init`; `data` points to `n` writable words.
unsafe fn reduce_words<T: Reduced>(
    am: *const Amrq,
    data: *mut T,
    n: usize,
    op: c_int,
    how: Reduction,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee: `data` points to `n` words.
    let body = |j: &Amrq| reduce(j, unsafe { slice_mut(data, n) }?, op, how);
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Collective: every rank's `data[i]` combined by `op` (an `amrq_op`) into rank
/// `root`'s `data[i]`; the other ranks' `data` is left with partial results.
///
/// # Safety
/// `am` came from `amrq_init`; `data` points to `n` words, the same `n` on every rank.
#[no_mangle]
pub unsafe extern "C" fn amrq_reduce_u64(
    am: *const Amrq,
    root: c_int,
    data: *mut u64,
    n: usize,
    op: c_int,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    unsafe { reduce_words(am, data, n, op, Reduction::To(root)) }
}

/// `amrq_reduce_u64` on doubles.
///
/// # Safety
/// As `amrq_reduce_u64`.
#[no_mangle]
pub unsafe extern "C" fn amrq_reduce_f64(
    am: *const Amrq,
    root: c_int,
    data: *mut f64,
    n: usize,
    op: c_int,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    unsafe { reduce_words(am, data, n, op, Reduction::To(root)) }
}

/// Collective: every rank's `data[i]` combined by `op` (an `amrq_op`), on every rank,
/// in place.
///
/// # Safety
/// `am` came from `amrq_init`; `data` points to `n` words, the same `n` on every rank.
#[no_mangle]
pub unsafe extern "C" fn amrq_allreduce_u64(
    am: *const Amrq,
    data: *mut u64,
    n: usize,
    op: c_int,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    unsafe { reduce_words(am, data, n, op, Reduction::All) }
}

/// `amrq_allreduce_u64` on doubles.
///
/// # Safety
/// As `amrq_allreduce_u64`.
#[no_mangle]
pub unsafe extern "C" fn amrq_allreduce_f64(
    am: *const Amrq,
    data: *mut f64,
    n: usize,
    op: c_int,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    unsafe { reduce_words(am, data, n, op, Reduction::All) }
}

/// Collective prefix reduction: rank r's `data[i]` becomes ranks 0 … r's `data[i]`
/// combined by `op` (an `amrq_op`) if `inclusive` is non-zero, else ranks 0 … r − 1's
/// (rank 0 gets the operation's identity: 0, the largest or the smallest value).
///
/// # Safety
/// `am` came from `amrq_init`; `data` points to `n` words, the same `n` on every rank.
#[no_mangle]
pub unsafe extern "C" fn amrq_scan_u64(
    am: *const Amrq,
    data: *mut u64,
    n: usize,
    op: c_int,
    inclusive: c_int,
) -> AmrqStatus {
    let how = Reduction::Scan {
        inclusive: inclusive != 0,
    };
    // SAFETY: the caller's guarantee.
    unsafe { reduce_words(am, data, n, op, how) }
}

/// `amrq_scan_u64` on doubles (identities 0, +∞ and −∞).
///
/// # Safety
/// As `amrq_scan_u64`.
#[no_mangle]
pub unsafe extern "C" fn amrq_scan_f64(
    am: *const Amrq,
    data: *mut f64,
    n: usize,
    op: c_int,
    inclusive: c_int,
) -> AmrqStatus {
    let how = Reduction::Scan {
        inclusive: inclusive != 0,
    };
    // SAFETY: the caller's guarantee.
    unsafe { reduce_words(am, data, n, op, how) }
}

/// Collective: every rank's `len` bytes at `mine` into rank `root`'s `out`, in rank
/// order (`out` holds `size · len` bytes at the root; it is ignored, and may be null,
/// elsewhere).
///
/// # Safety
/// `am` came from `amrq_init`; `mine` points to `len` bytes, the same `len` on every
/// rank; at the root `out` points to `size · len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn amrq_gather(
    am: *const Amrq,
    root: c_int,
    mine: *const c_void,
    len: usize,
    out: *mut c_void,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let root = rank_of(root)?;
        let room = if j.am().rank() == root {
            total(j, len)?
        } else {
            0
        };
        // SAFETY: the caller's guarantee: `mine` points to `len` bytes, and at the root
        // `out` to `size · len` writable bytes.
        let (mine, out) = unsafe { (slice(mine.cast::<u8>(), len)?, slice_mut(out.cast(), room)?) };
        Ok(j.coll().gather(root, mine, out)?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Collective: every rank's `len` bytes at `mine` into every rank's `out`
/// (`size · len` bytes), in rank order.
///
/// # Safety
/// `am` came from `amrq_init`; `mine` points to `len` bytes, the same `len` on every
/// rank; `out` to `size · len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn amrq_allgather(
    am: *const Amrq,
    mine: *const c_void,
    len: usize,
    out: *mut c_void,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let room = total(j, len)?;
        // SAFETY: the caller's guarantee: `mine` points to `len` bytes, `out` to
        // `size · len` writable bytes.
        let (mine, out) = unsafe { (slice(mine.cast::<u8>(), len)?, slice_mut(out.cast(), room)?) };
        Ok(j.coll().allgather(mine, out)?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Collective all-to-all: block j of `send` (`len` bytes at `send + j·len`) goes to
/// rank j, and block i of `recv` comes from rank i. Both hold `size · len` bytes. The
/// sends are bandwidth-matched, not all at one rank at once.
///
/// # Safety
/// `am` came from `amrq_init`; `send` points to `size · len` bytes and `recv` to
/// `size · len` writable bytes, the same `len` on every rank.
#[no_mangle]
pub unsafe extern "C" fn amrq_exchange(
    am: *const Amrq,
    send: *const c_void,
    len: usize,
    recv: *mut c_void,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let room = total(j, len)?;
        // SAFETY: the caller's guarantee: `size · len` bytes at `send`, as many
        // writable at `recv`.
        let (send, recv) = unsafe {
            (
                slice(send.cast::<u8>(), room)?,
                slice_mut(recv.cast(), room)?,
            )
        };
        Ok(j.coll().exchange(send, recv)?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// `size · len` bytes: one block per rank.
fn total(j: &Amrq, len: usize) -> Result<usize, Failure> {
    len.checked_mul(j.am().size())
        .ok_or_else(|| Failure::argument(format!("{len} bytes per rank overflow")))
}
