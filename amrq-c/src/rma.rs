//! One-sided operations on the ranks' registered segments, and remote atomics.
//!
//! Addresses are byte offsets into a rank's segment; `amrq_alloc_symmetric` gives one
//! that is the same on every rank, `amrq_segment` the local address of this rank's, and
//! `amrq_peer_segment` that of a rank of the same host.

use crate::job::{on_job, rank_of, Amrq, Handlers};
use crate::{guard, put_out, slice, slice_mut, AmrqStatus, Failure};
use amrq::rma::{Rma, RmaError};
use std::ffi::{c_int, c_void};

/// Collective: `len` bytes at the same offset of every rank's segment, aligned to
/// `align` (a power of two); the offset goes to `*offset`. Every rank calls it with
/// the same arguments, in the same order as its other symmetric allocations.
///
/// # Safety
/// `am` came from `amrq_init`; `offset` is writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_alloc_symmetric(
    am: *const Amrq,
    len: usize,
    align: usize,
    offset: *mut usize,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        put_out(offset, j.rma().alloc_symmetric(len, align)?);
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// This rank's segment: its first byte to `*base`, its length to `*len`. C code reads
/// and writes its own part of symmetric allocations through it.
///
/// # Safety
/// `am` came from `amrq_init`; `base` and `len` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_segment(
    am: *const Amrq,
    base: *mut *mut c_void,
    len: *mut usize,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let (p, n) = j.am().segment();
        put_out(base, p.as_ptr().cast());
        put_out(len, n);
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// `rank`'s segment as this process maps it: its first byte to `*base` and its length
/// to `*len`, or null and 0 where it is not mapped (`rank` runs on another host: reach
/// it with `amrq_put` and `amrq_get`). Ranks of one host map each other's segments, so
/// C code may load and store there directly, with C11 atomics where another rank reads
/// or writes the same bytes meanwhile.
///
/// # Safety
/// `am` came from `amrq_init`; `base` and `len` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_peer_segment(
    am: *const Amrq,
    rank: c_int,
    base: *mut *mut c_void,
    len: *mut usize,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let r = rank_of(rank)?;
        if r >= j.am().size() {
            return Err(Failure::argument(format!(
                "rank {r} does not exist: the job has ranks 0..{}",
                j.am().size()
            )));
        }
        let (p, n) = j
            .am()
            .rq()
            .conduit()
            .mapped_segment(r)
            .map_or((std::ptr::null_mut(), 0), |(p, n)| (p.as_ptr().cast(), n));
        put_out(base, p);
        put_out(len, n);
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Copies `len` bytes from `src` to `offset` in `rank`'s segment; complete on return.
///
/// # Safety
/// `am` came from `amrq_init`; `src` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn amrq_put(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee (above).
    unsafe { put_by(am, (rank, offset), src, len, Rma::put) }
}

/// Copies `len` bytes at `offset` in `rank`'s segment into `dst`; complete on return.
///
/// # Safety
/// `am` came from `amrq_init`; `dst` points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn amrq_get(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    dst: *mut c_void,
    len: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee (above).
    unsafe { get_by(am, (rank, offset), dst, len, Rma::get) }
}

/// `amrq_put` with implicit completion: `src` may be reused on return, and the data
/// is in place at the target after `amrq_sync_nbi`.
///
/// # Safety
/// As `amrq_put`.
#[no_mangle]
pub unsafe extern "C" fn amrq_put_nbi(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    src: *const c_void,
    len: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee (above).
    unsafe { put_by(am, (rank, offset), src, len, Rma::put_nbi) }
}

/// `amrq_get` with implicit completion: `dst` holds the data after `amrq_sync_nbi`,
/// and must stay valid until then.
///
/// # Safety
/// As `amrq_get`; `dst` stays valid and untouched until `amrq_sync_nbi` returns.
#[no_mangle]
pub unsafe extern "C" fn amrq_get_nbi(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    dst: *mut c_void,
    len: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee (above).
    unsafe { get_by(am, (rank, offset), dst, len, Rma::get_nbi) }
}

/// A blocking or implicit put: `Rma::put` or `Rma::put_nbi`.
type PutOp = fn(&Rma<Handlers>, usize, usize, &[u8]) -> Result<(), RmaError>;

/// A blocking or implicit get: `Rma::get` or `Rma::get_nbi`.
type GetOp = fn(&Rma<Handlers>, usize, usize, &mut [u8]) -> Result<(), RmaError>;

/// A put of the `len` bytes at `src` by `op` (blocking or implicit).
///
/// # Safety
/// `am` came from `amrq_init`; `src` points to `len` bytes.
unsafe fn put_by(
    am: *const Amrq,
    (rank, offset): (c_int, usize),
    src: *const c_void,
    len: usize,
    op: PutOp,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `src` points to `len` bytes.
        let src = unsafe { slice(src.cast(), len) }?;
        Ok(op(j.rma(), rank_of(rank)?, offset, src)?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// A get into the `len` bytes at `dst` by `op` (blocking or implicit).
///
/// # Safety
/// `am` came from `amrq_init`; `dst` points to `len` writable bytes (valid until
/// `amrq_sync_nbi` for an implicit get).
unsafe fn get_by(
    am: *const Amrq,
    (rank, offset): (c_int, usize),
    dst: *mut c_void,
    len: usize,
    op: GetOp,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `dst` points to `len` writable bytes.
        let dst = unsafe { slice_mut(dst.cast(), len) }?;
        Ok(op(j.rma(), rank_of(rank)?, offset, dst)?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Waits until every implicit put and get of this rank is complete; how many were
/// goes to `*done` (if not null).
///
/// # Safety
/// `am` came from `amrq_init`; `done` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_sync_nbi(am: *const Amrq, done: *mut u64) -> AmrqStatus {
    let body = |j: &Amrq| {
        put_out(done, j.rma().sync_nbi()?);
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Atomically adds `v` to the 8-byte word at `offset` (8-aligned) in `rank`'s segment;
/// the word before goes to `*old` (if not null).
///
/// # Safety
/// `am` came from `amrq_init`; `old` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_fetch_add(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    v: u64,
    old: *mut u64,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        put_out(old, j.rma().fetch_add(rank_of(rank)?, offset, v)?);
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// A remote atomic's operation (`amrq_atomic`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmrqAtomic {
    /// Adds the operand (wrapping).
    FetchAdd = 0,
    /// Stores the operand.
    Swap = 1,
    /// Stores the operand if the word equals `compare`.
    CompareSwap = 2,
    /// Bitwise and with the operand.
    FetchAnd = 3,
    /// Bitwise or with the operand.
    FetchOr = 4,
    /// Bitwise xor with the operand.
    FetchXor = 5,
    /// Reads the word.
    Load = 6,
    /// Writes the operand (the word before is not returned: 0).
    Store = 7,
}

/// Applies atomic `op` (an `amrq_atomic_op`) with `operand` to the 8-byte word at `offset`
/// (8-aligned) of `rank`'s segment; `compare` is the value `AMRQ_ATOMIC_OP_COMPARE_SWAP`
/// expects (the others ignore it). The word before goes to `*old` (if not null). Like
/// every amrq atomic it orders as a lock operation: what this rank wrote before is
/// visible to whoever reads the new value.
///
/// # Safety
/// `am` came from `amrq_init`; `old` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_atomic(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    op: c_int,
    operand: u64,
    compare: u64,
    old: *mut u64,
) -> AmrqStatus {
    use amrq::conduit::AtomicOp;
    let body = |j: &Amrq| {
        let op = match op {
            0 => AtomicOp::FetchAdd(operand),
            1 => AtomicOp::Swap(operand),
            2 => AtomicOp::CompareSwap {
                current: compare,
                new: operand,
            },
            3 => AtomicOp::FetchAnd(operand),
            4 => AtomicOp::FetchOr(operand),
            5 => AtomicOp::FetchXor(operand),
            6 => AtomicOp::Load,
            7 => AtomicOp::Store(operand),
            _ => return Err(Failure::argument(format!("no atomic operation {op}"))),
        };
        put_out(old, j.rma().atomic(rank_of(rank)?, offset, op)?);
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// A put or get in flight (`amrq_put_nb`, `amrq_get_nb`), finished by `amrq_wait`.
pub struct AmrqHandle {
    handle: amrq::rma::Handle<'static, Handlers>,
}

/// `amrq_put` that returns at once with a handle in `*h`: `src` may be reused on
/// return; the data is in place at the target when `amrq_wait(*h)` returns (or
/// `amrq_test` says 1).
///
/// # Safety
/// As `amrq_put`; `h` is writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_put_nb(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    src: *const c_void,
    len: usize,
    h: *mut *mut AmrqHandle,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `src` points to `len` bytes.
        let src = unsafe { slice(src.cast(), len) }?;
        // SAFETY: the C contract: a handle is waited on before `amrq_finalize`.
        let rma = unsafe { j.kept() }.rma();
        let handle = rma.put_nb(rank_of(rank)?, offset, src)?;
        put_out(h, Box::into_raw(Box::new(AmrqHandle { handle })));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// `amrq_get` that returns at once with a handle in `*h`: `dst` holds the data when
/// `amrq_wait(*h)` returns.
///
/// # Safety
/// As `amrq_get`; `dst` stays valid and untouched until `amrq_wait(*h)` returns; `h`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_get_nb(
    am: *const Amrq,
    rank: c_int,
    offset: usize,
    dst: *mut c_void,
    len: usize,
    h: *mut *mut AmrqHandle,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `dst` points to `len` writable bytes that
        // stay valid until the handle is waited on (the handle may hold them so long).
        let dst: &'static mut [u8] = unsafe { slice_mut(dst.cast(), len) }?;
        // SAFETY: the C contract: a handle is waited on before `amrq_finalize`.
        let rma = unsafe { j.kept() }.rma();
        let handle = rma.get_nb(rank_of(rank)?, offset, dst)?;
        put_out(h, Box::into_raw(Box::new(AmrqHandle { handle })));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Whether the operation of `h` is complete: `*done` 1 or 0 (`h` stays valid).
///
/// # Safety
/// `h` came from `amrq_put_nb` or `amrq_get_nb` and was not waited on; `done` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_test(h: *const AmrqHandle, done: *mut c_int) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee.
            let h = unsafe { h.as_ref() }.ok_or_else(|| Failure::argument("a null handle"))?;
            put_out(done, c_int::from(h.handle.test()));
            Ok(())
        },
    )
}

/// Waits until the operation of `h` is complete, and frees `h`.
///
/// # Safety
/// `h` came from `amrq_put_nb` or `amrq_get_nb` and was not waited on; it is not used
/// after.
#[no_mangle]
pub unsafe extern "C" fn amrq_wait(h: *mut AmrqHandle) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee: a handle from a box, waited on once.
            let h = unsafe { crate::take_box(h, "handle") }?;
            Ok(h.handle.wait()?)
        },
    )
}
