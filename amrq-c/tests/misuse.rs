//! What a C program that misuses the interface gets: a status and a message saying
//! what was wrong, never a crash (called from Rust here, as C would, on a job of one
//! rank).

use amrq_c::job::*;
use amrq_c::rma::*;
use amrq_c::{amrq_last_error, AmrqStatus};
use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

fn last_error() -> String {
    // SAFETY: amrq_last_error returns a NUL-terminated string valid until the next
    // failing call on this thread.
    unsafe { CStr::from_ptr(amrq_last_error()) }
        .to_string_lossy()
        .into_owned()
}

unsafe extern "C" fn nothing(_: *mut c_void, _: *mut AmrqToken<'static>, _: *const AmrqMsg) {}

#[test]
fn bad_arguments_get_a_status_and_a_message() {
    let t = amrq_table_new();
    let mut id = -1;
    // SAFETY: a table from amrq_table_new, a NUL-terminated name, a writable id.
    let st = unsafe { amrq_table_request(t, c"nothing".as_ptr(), nothing, null_mut(), &mut id) };
    assert_eq!((st, id), (AmrqStatus::Ok, 0));
    let mut am = null_mut();
    // SAFETY: the table, given once; a writable out pointer.
    let st = unsafe { amrq_init(t, 1, &mut am) };
    assert_eq!(st, AmrqStatus::Ok, "{}", last_error());
    // SAFETY: every call below: `am` came from amrq_init and is finalized last; the
    // pointers are null or point to what they say.
    unsafe {
        assert_eq!((amrq_rank(am), amrq_size(am)), (0, 1));
        assert_eq!(amrq_rank(null()), -1);
        assert_eq!(amrq_request(am, 0, 7, null(), 0), AmrqStatus::Argument);
        assert!(
            last_error().contains("no request handler 7"),
            "{}",
            last_error()
        );
        assert_eq!(amrq_request(am, 0, id, null(), 3), AmrqStatus::Argument);
        assert!(last_error().contains("null pointer"), "{}", last_error());
        let nine = [0u64; 9];
        assert_eq!(amrq_request(am, 0, id, nine.as_ptr(), 9), AmrqStatus::Am);
        assert_eq!(
            amrq_request(am, 5, id, null(), 0),
            AmrqStatus::Am,
            "{}",
            last_error()
        );
        assert_eq!(amrq_request(am, -1, id, null(), 0), AmrqStatus::Argument);
        assert_eq!(amrq_poll(null(), null_mut()), AmrqStatus::Argument);
        assert!(last_error().contains("null amrq_t"));
        let word = [1u8; 8];
        let far = usize::MAX / 2;
        assert_eq!(
            amrq_put(am, 0, far, word.as_ptr().cast(), 8),
            AmrqStatus::Rma,
            "{}",
            last_error()
        );
        assert_eq!(amrq_reply(null_mut(), 0, null(), 0), AmrqStatus::Argument);
        let mut at = 0;
        assert_eq!(amrq_alloc_symmetric(am, 64, 64, &mut at), AmrqStatus::Ok);
        assert_eq!(
            amrq_raw_rtt_ns(am, at + 1, 0, 1, null_mut()),
            AmrqStatus::Argument
        );
        let mut v = [3u64];
        assert_eq!(
            amrq_allreduce_u64(am, v.as_mut_ptr(), 1, AmrqOp::Sum),
            AmrqStatus::Ok
        );
        assert_eq!(v[0], 3);
        assert_eq!(amrq_finalize(am), AmrqStatus::Ok);
    }
}
