//! amrq's C interface: `libamrq_c.so` / `libamrq_c.a` and the header `amrq.h`
//! (generated from this crate by cbindgen, committed as `amrq-c/include/amrq.h`).
//!
//! | C | what | module |
//! |---|---|---|
//! | `amrq_table_*`, `amrq_init`, `amrq_finalize`, `amrq_rank`, `amrq_size` | handler registration, start-up (under `amrun`, `mpirun`, `srun`, or self-launched) and shutdown | [`job`] |
//! | `amrq_request*`, `amrq_reply*`, `amrq_poll`, `amrq_wait_until`, `amrq_wait_u64`, `amrq_barrier*` | Active Messages, Short, Medium and Long; polling; the split-phase barrier | [`job`] |
//! | `amrq_request`, `amrq_reply` (inline in `amrq.h`), `amrq_lane_notify` | Short sends written into the ring in the caller | [`lane`] |
//! | `amrq_table_queue`, `amrq_enqueue`, `amrq_dequeue`, `amrq_read_queue`, `amrq_delete_queue`, `amrq_poll_set_new`, `amrq_one_poll` | Remote Queues: named queues, enqueue (accepted or full), dequeue, read in place, One-poll | [`rq`] |
//! | `amrq_alloc_symmetric`, `amrq_segment`, `amrq_peer_segment`, `amrq_put*`, `amrq_get*` (blocking, with handles: `amrq_test`, `amrq_wait`; implicit: `amrq_sync_nbi`), `amrq_fetch_add`, `amrq_atomic` | one-sided operations, remote atomics | [`rma`] |
//! | `amrq_broadcast`, `amrq_reduce_*`, `amrq_allreduce_*`, `amrq_scan_*`, `amrq_gather`, `amrq_allgather`, `amrq_exchange` | collectives | [`coll`] |
//!
//! Every function returns an [`AmrqStatus`]; on an error, [`amrq_last_error`] says what
//! went wrong, in words. Nothing unwinds into C: a Rust panic becomes
//! `AMRQ_STATUS_PANIC`, and the rank is recorded as failed in its job, so that the
//! other ranks learn of it instead of waiting. C handlers are plain function pointers
//! with a `void *` state, called from `amrq_poll` (and every call that waits).
//!
//! Bytes a call reads (a payload to send, data to put) must not be written by any rank
//! during the call: a caller that sends from its own segment orders the peers' puts
//! there before or after it, as with any one-sided operation.
//!
//! A C program:
//!
//! ```c
//! static void ping(void *state, amrq_token_t *t, const amrq_msg_t *m) {
//!     uint64_t v = m->args[0] + 1;
//!     amrq_reply(t, PONG, &v, 1);
//! }
//! ...
//! amrq_table_t *t = amrq_table_new();
//! amrq_table_request(t, "ping", ping, NULL, &PING);
//! amrq_table_reply(t, "pong", pong, &got, &PONG);
//! amrq_t *am;
//! if (amrq_init(t, 2, &am) != AMRQ_STATUS_OK) { fprintf(stderr, "%s\n", amrq_last_error()); return 1; }
//! ```
//!
//! The examples in `amrq-c/c/` (`pingpong.c`, `ring.c`, `getput.c`, `queues.c`,
//! `collectives.c`, and `sends.c`, which checks the header's inline sends against the
//! library's) are built by its Makefile and run by `tests/c_examples.rs` and CI.

pub mod call;
pub mod coll;
pub mod ids;
pub mod job;
pub mod lane;
pub mod msg;
pub mod rma;
pub mod rq;

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call of the C interface returns.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmrqStatus {
    /// It worked.
    Ok = 0,
    /// An argument was wrong: a null pointer, a handler id never set or of the other
    /// kind, more than 8 args, a rank below 0.
    Argument = 1,
    /// The job could not be started or joined (also: this program's `amrq.h` is not of
    /// the library's `AMRQ_ABI`).
    Job = 2,
    /// An Active Message operation failed (a dead peer, a full queue that never
    /// drained, …).
    Am = 3,
    /// A one-sided operation failed (an address outside the segment, …).
    Rma = 4,
    /// amrq panicked (a bug in amrq): the rank is recorded as failed in its job.
    Panic = 5,
    /// A Remote Queues operation failed (a frame larger than the room given, a dead
    /// peer, …).
    Rq = 6,
}

/// An error of a call, boxed so that a call's `Result<(), Failure>` is one word,
/// returned in a register on the fast path.
pub(crate) struct Failure(Box<Reason>);

/// What a failed call returns, and the message `amrq_last_error` gives.
struct Reason {
    status: AmrqStatus,
    message: String,
}

impl Failure {
    #[cold]
    pub(crate) fn new(status: AmrqStatus, message: impl Into<String>) -> Self {
        Failure(Box::new(Reason {
            status,
            message: message.into(),
        }))
    }

    #[cold]
    pub(crate) fn argument(message: impl Into<String>) -> Self {
        Failure::new(AmrqStatus::Argument, message)
    }

    #[cold]
    pub(crate) fn rq(message: impl Into<String>) -> Self {
        Failure::new(AmrqStatus::Rq, message)
    }
}

impl From<amrq::Error> for Failure {
    #[cold]
    fn from(e: amrq::Error) -> Self {
        use amrq::Error as E;
        let status = match &e {
            E::Conduit(_) | E::Am(_) => AmrqStatus::Am,
            E::Rma(_) | E::SplitC(_) => AmrqStatus::Rma,
            E::Rq(_) => AmrqStatus::Rq,
            _ => AmrqStatus::Job,
        };
        Failure::new(status, e.chain())
    }
}

impl From<amrq::am::AmError> for Failure {
    #[cold]
    fn from(e: amrq::am::AmError) -> Self {
        Failure::new(AmrqStatus::Am, e.to_string())
    }
}

impl From<amrq::rma::RmaError> for Failure {
    #[cold]
    fn from(e: amrq::rma::RmaError) -> Self {
        Failure::new(AmrqStatus::Rma, e.to_string())
    }
}

impl From<amrq::rq::RqError> for Failure {
    #[cold]
    fn from(e: amrq::rq::RqError) -> Self {
        Failure::new(AmrqStatus::Rq, e.to_string())
    }
}

thread_local! {
    /// The message of this thread's last failed call.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
}

/// What the last call of this thread that failed said, as a NUL-terminated string
/// (empty if none failed). It stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn amrq_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// Runs the body of a C function: its status, with the message of a failure kept for
/// [`amrq_last_error`]; a panic caught (and `on_panic` told, to record the rank's
/// failure in its job).
pub(crate) fn guard(
    on_panic: impl FnOnce(&str),
    body: impl FnOnce() -> Result<(), Failure>,
) -> AmrqStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => AmrqStatus::Ok,
        other => failed(other, on_panic),
    }
}

/// [`guard`] of a call that failed or panicked, out of line: the call that succeeds
/// keeps no registers for it.
#[cold]
#[inline(never)]
fn failed(
    out: std::thread::Result<Result<(), Failure>>,
    on_panic: impl FnOnce(&str),
) -> AmrqStatus {
    match out {
        Ok(Ok(())) => AmrqStatus::Ok, // `guard` answers this one inline
        Ok(Err(Failure(f))) => {
            set_last_error(&f.message);
            f.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let message = format!("amrq panicked (a bug in amrq): {what}");
            set_last_error(&message);
            on_panic(&message);
            AmrqStatus::Panic
        }
    }
}

/// `*p = v` if `p` is not null.
pub(crate) fn put_out<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the caller passed `p` as a place for the result (documented for each
        // function), and it is not null.
        unsafe { p.write(v) };
    }
}

/// The box of a handle C gives back for good (`amrq_wait`, `amrq_call_wait`, …), or
/// an argument error naming `what` for a null one.
///
/// # Safety
/// `p` is null or came from `Box::into_raw` and is not used after.
pub(crate) unsafe fn take_box<T>(p: *mut T, what: &str) -> Result<Box<T>, Failure> {
    if p.is_null() {
        return Err(Failure::argument(format!("a null {what}")));
    }
    // SAFETY: the caller's guarantee: a box's pointer, given back once.
    Ok(unsafe { Box::from_raw(p) })
}

/// The slice of `n` items at `p` (empty if `n` is 0, whatever `p` is).
///
/// # Safety
/// If `n > 0`, `p` points to `n` readable items that stay valid and unchanged for `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: usize) -> Result<&'a [T], Failure> {
    match (n, p.is_null()) {
        (0, _) => Ok(&[]),
        (_, true) => Err(Failure::argument("a null pointer for a non-empty array")),
        // SAFETY: the caller's guarantee.
        _ => Ok(unsafe { std::slice::from_raw_parts(p, n) }),
    }
}

/// The mutable slice of `n` items at `p`.
///
/// # Safety
/// If `n > 0`, `p` points to `n` writable items that nothing else reaches for `'a`.
pub(crate) unsafe fn slice_mut<'a, T>(p: *mut T, n: usize) -> Result<&'a mut [T], Failure> {
    match (n, p.is_null()) {
        (0, _) => Ok(&mut []),
        (_, true) => Err(Failure::argument("a null pointer for a non-empty array")),
        // SAFETY: the caller's guarantee.
        _ => Ok(unsafe { std::slice::from_raw_parts_mut(p, n) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: `amrq_last_error` returns a NUL-terminated string valid until the next
        // failing call on this thread.
        unsafe { CStr::from_ptr(amrq_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    /// `guard` turns a body's success, failure and panic into a status, keeps the
    /// failure's message for `amrq_last_error`, and tells `on_panic` only of a panic.
    #[test]
    fn guard_gives_each_outcome_its_status_and_message() {
        let told = RefCell::new(Vec::<String>::new());
        let on_panic = |why: &str| told.borrow_mut().push(why.to_string());
        assert_eq!(guard(on_panic, || Ok(())), AmrqStatus::Ok);
        let failed = guard(on_panic, || Err(Failure::argument("no such handler")));
        assert_eq!(failed, AmrqStatus::Argument);
        assert_eq!(last_error(), "no such handler");
        assert!(told.borrow().is_empty(), "a failure is not a panic");
        let panicked = guard(on_panic, || panic!("ring state lost"));
        assert_eq!(panicked, AmrqStatus::Panic);
        assert!(last_error().contains("ring state lost"), "{}", last_error());
        assert_eq!(told.borrow().len(), 1);
        assert!(told.borrow()[0].contains("a bug in amrq"));
    }
}
