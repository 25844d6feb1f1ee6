//! Calls: a handler run at a target whose answer, a `u64`, comes back to the caller as
//! a pending value (`amrq_call`), waited for (`amrq_call_wait`), tested
//! (`amrq_call_test`) or given up (`amrq_call_forget`). Any number may be in flight.

use crate::ids::{AmrqCallHandler, AMRQ_CALL_IDS};
use crate::job::{add_call, on_job, rank_of, register, Amrq, AmrqTable, Handlers};
use crate::msg::AmrqMsg;
use crate::{guard, put_out, slice, take_box, AmrqStatus, Failure};
use amrq::am::{AmError, Pending, ReqCtx, Words};
use amrq::conduit::mem::MemConduit;
use std::ffi::{c_char, c_int, c_void};

/// A call handler: answers the call by writing `*answer` and returning 0; any other
/// return fails the call (its caller's wait returns `AMRQ_STATUS_AM`, and
/// `amrq_last_error` says which rank, which handler and the code).
pub type AmrqCallFn =
    unsafe extern "C" fn(state: *mut c_void, msg: *const AmrqMsg, answer: *mut u64) -> c_int;

/// A call in flight (`amrq_call`), until `amrq_call_wait` or `amrq_call_forget`.
pub struct AmrqPending {
    pending: Pending<'static, u64, Handlers>,
}

/// The `K`-th call handler's trampoline: its args as a message, its C function called
/// with its state.
pub(crate) fn call_trampoline<'a, const K: usize>(
    s: &'a Handlers,
    ctx: ReqCtx<'a, Handlers, MemConduit>,
    w: Words,
) -> Result<u64, AmError> {
    let (f, state) = s.calls[K];
    let args = w.as_slice();
    let m = AmrqMsg {
        args: args.as_ptr(),
        payload: std::ptr::null(),
        nargs: args.len(),
        len: 0,
        source: ctx.source(),
        in_segment: 0,
    };
    let mut answer = 0;
    // SAFETY: `f` is the C function registered as this handler, called with its state,
    // a message and an answer that live until it returns.
    match unsafe { f(state, &m, &mut answer) } {
        0 => Ok(answer),
        code => Err(format!("the C call handler returned {code}").into()),
    }
}

/// Registers call handler `f` (called with `state`) as `name`; its id goes to `*id`.
/// Every rank registers the same handlers in the same order.
///
/// # Safety
/// As `amrq_table_request`.
#[no_mangle]
pub unsafe extern "C" fn amrq_table_call(
    t: *mut AmrqTable,
    name: *const c_char,
    f: AmrqCallFn,
    state: *mut c_void,
    id: *mut AmrqCallHandler,
) -> AmrqStatus {
    let add = |t: &mut AmrqTable, name, k: usize| {
        let call = add_call(&mut t.table, name, k);
        t.handlers.call_ids.push(call);
        t.handlers.calls.push((f, state));
    };
    let tagged: fn(usize) -> AmrqCallHandler = |k| AmrqCallHandler {
        id: AMRQ_CALL_IDS + k as u32,
    };
    // SAFETY: the caller's guarantee.
    unsafe {
        register(
            t,
            name,
            (id, tagged),
            ("call", |t| t.handlers.calls.len()),
            add,
        )
    }
}

/// Runs call handler `h` at `rank` on `args` (`nargs` ≤ 7) and returns at once with
/// its pending answer in `*p`, for `amrq_call_wait`, `amrq_call_test` or
/// `amrq_call_forget`. Sending waits for room as `amrq_request` does.
///
/// # Safety
/// `am` came from `amrq_init` and was not finalized; `args` points to `nargs` words;
/// `p` is writable; every pending call is waited for or forgotten before
/// `amrq_finalize`.
#[no_mangle]
pub unsafe extern "C" fn amrq_call(
    am: *const Amrq,
    rank: c_int,
    h: AmrqCallHandler,
    args: *const u64,
    nargs: usize,
    p: *mut *mut AmrqPending,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the C contract: a pending call is done with before `amrq_finalize`.
        let job = unsafe { j.kept() };
        let ids = &job.state().call_ids;
        let call = ids[h.checked(ids.len())?];
        // SAFETY: the caller's guarantee: `args` points to `nargs` words.
        let args = unsafe { slice(args, nargs) }?;
        let words = Words::new(args).ok_or_else(|| {
            Failure::argument(format!(
                "{nargs} args: a call carries at most {} (one word names the call)",
                amrq::am::CALL_ARGS
            ))
        })?;
        let pending = job.am().call(rank_of(rank)?, call, words)?;
        put_out(p, Box::into_raw(Box::new(AmrqPending { pending })));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Waits for the answer of `p` (running handlers meanwhile), writes it to `*answer`,
/// and frees `p`. `AMRQ_STATUS_AM` if the target could not run the call.
///
/// # Safety
/// `p` came from `amrq_call` and was neither waited for nor forgotten; it is not used
/// after; `answer` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_call_wait(p: *mut AmrqPending, answer: *mut u64) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee: a pending call from a box, used once.
            let p = unsafe { take_box(p, "pending call") }?;
            put_out(answer, p.pending.wait()?);
            Ok(())
        },
    )
}

/// Whether the answer of `p` is in: `*ready` 1 or 0 (`p` stays valid). Does not poll.
///
/// # Safety
/// `p` came from `amrq_call` and was neither waited for nor forgotten; `ready` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_call_test(p: *const AmrqPending, ready: *mut c_int) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee.
            let p =
                unsafe { p.as_ref() }.ok_or_else(|| Failure::argument("a null pending call"))?;
            put_out(ready, c_int::from(p.pending.is_ready()));
            Ok(())
        },
    )
}

/// Gives up the answer of `p` and frees `p`: the handler still runs at the target, and
/// its answer is discarded when it arrives.
///
/// # Safety
/// As `amrq_call_wait`.
#[no_mangle]
pub unsafe extern "C" fn amrq_call_forget(p: *mut AmrqPending) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee: a pending call from a box, used once.
            drop(unsafe { take_box(p, "pending call") }?);
            Ok(())
        },
    )
}
