//! What a C program that misuses the interface gets: a status and a message saying
//! what was wrong, never a crash (called from Rust here, as C would, on a job of one
//! rank).

use amrq_c::coll::*;
use amrq_c::ids::{AmrqReplyHandler, AmrqRequestHandler, AMRQ_REPLY_IDS, AMRQ_REQUEST_IDS};
use amrq_c::job::*;
use amrq_c::lane::AMRQ_ABI;
use amrq_c::msg::AmrqMsg;
use amrq_c::rma::*;
use amrq_c::rq::*;
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
    let mut id = AmrqRequestHandler { id: 0 };
    // SAFETY: a table from amrq_table_new, a NUL-terminated name, a writable id.
    let st = unsafe { amrq_table_request(t, c"nothing".as_ptr(), nothing, null_mut(), &mut id) };
    assert_eq!((st, id.id), (AmrqStatus::Ok, AMRQ_REQUEST_IDS));
    let mut q = -1;
    // SAFETY: the table, a NUL-terminated name, a writable id.
    let st = unsafe { amrq_table_queue(t, c"work".as_ptr(), 8, 0, &mut q) };
    assert_eq!((st, q), (AmrqStatus::Ok, 0));
    // SAFETY: as above; 12 is not a power of two.
    let st = unsafe { amrq_table_queue(t, c"odd".as_ptr(), 12, 0, null_mut()) };
    assert_eq!(st, AmrqStatus::Argument);
    let mut am = null_mut();
    // SAFETY: the table, given once; a writable out pointer.
    let st = unsafe { amrq_init_abi(t, 1, &mut am, AMRQ_ABI) };
    assert_eq!(st, AmrqStatus::Ok, "{}", last_error());
    // SAFETY: every call below: `am` came from amrq_init and is finalized last; the
    // pointers are null or point to what they say.
    unsafe {
        assert_eq!((amrq_rank(am), amrq_size(am)), (0, 1));
        assert_eq!(amrq_rank(null()), -1);
        let seventh = AmrqRequestHandler {
            id: AMRQ_REQUEST_IDS + 7,
        };
        assert_eq!(
            amrq_request_call(am, 0, seventh, null(), 0),
            AmrqStatus::Argument
        );
        assert!(
            last_error().contains("no request handler has id 0x52510007"),
            "{}",
            last_error()
        );
        let as_reply = AmrqRequestHandler { id: AMRQ_REPLY_IDS };
        assert_eq!(
            amrq_request_call(am, 0, as_reply, null(), 0),
            AmrqStatus::Argument
        );
        assert!(
            last_error().contains("a reply handler's id"),
            "{}",
            last_error()
        );
        assert_eq!(
            amrq_request_call(am, 0, id, null(), 3),
            AmrqStatus::Argument
        );
        assert!(last_error().contains("null pointer"), "{}", last_error());
        let nine = [0u64; 9];
        assert_eq!(
            amrq_request_call(am, 0, id, nine.as_ptr(), 9),
            AmrqStatus::Argument
        );
        assert_eq!(
            amrq_request_call(am, 5, id, null(), 0),
            AmrqStatus::Am,
            "{}",
            last_error()
        );
        assert_eq!(
            amrq_request_call(am, -1, id, null(), 0),
            AmrqStatus::Argument
        );
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
        assert_eq!(
            amrq_reply_call(
                null_mut(),
                AmrqReplyHandler { id: AMRQ_REPLY_IDS },
                null(),
                0
            ),
            AmrqStatus::Argument
        );
        assert_eq!(amrq_wait(null_mut()), AmrqStatus::Argument);
        assert_eq!(amrq_wait_u64(am, null(), 0, 1), AmrqStatus::Argument);
        let word = 5u64;
        assert_eq!(amrq_wait_u64(am, &word, 6, 5), AmrqStatus::Argument);
        assert!(last_error().contains("no comparison 6"), "{}", last_error());
        for (cmp, value) in [(0, 5), (1, 4), (2, 4), (3, 5), (4, 6), (5, 5)] {
            // Each holds at once: the wait returns without a message.
            assert_eq!(amrq_wait_u64(am, &word, cmp, value), AmrqStatus::Ok);
        }
        assert_eq!(amrq_test(null(), null_mut()), AmrqStatus::Argument);
        let (mut h, mut sink) = (null_mut(), [0u8; 8]);
        let st = amrq_get_nb(am, 0, far, sink.as_mut_ptr().cast(), 8, &mut h);
        assert_eq!((st, h.is_null()), (AmrqStatus::Rma, true));
        let mut at = 0;
        assert_eq!(amrq_alloc_symmetric(am, 64, 64, &mut at), AmrqStatus::Ok);
        let (mut mine, mut theirs, mut len) = (null_mut(), null_mut(), 0);
        assert_eq!(amrq_segment(am, &mut mine, &mut len), AmrqStatus::Ok);
        assert_eq!(
            amrq_peer_segment(am, 0, &mut theirs, &mut len),
            AmrqStatus::Ok
        );
        assert!(!theirs.is_null() && theirs == mine && len > 0);
        assert_eq!(
            amrq_peer_segment(am, 5, &mut theirs, &mut len),
            AmrqStatus::Argument
        );
        assert!(
            last_error().contains("rank 5 does not exist"),
            "{}",
            last_error()
        );
        let mut v = [3u64];
        assert_eq!(
            amrq_allreduce_u64(am, v.as_mut_ptr(), 1, AmrqOp::Sum as i32),
            AmrqStatus::Ok
        );
        assert_eq!(v[0], 3);
        assert_eq!(
            amrq_allreduce_u64(am, v.as_mut_ptr(), 1, 3),
            AmrqStatus::Argument
        );
        assert!(last_error().contains("no reduction operation 3"));
        let mut old = 0;
        assert_eq!(
            amrq_atomic(am, 0, at, AmrqAtomic::FetchOr as i32, 6, 0, &mut old),
            AmrqStatus::Ok
        );
        assert_eq!(
            amrq_atomic(am, 0, at, AmrqAtomic::CompareSwap as i32, 9, 6, &mut old),
            AmrqStatus::Ok
        );
        assert_eq!(old, 6, "compare-and-swap returns the word before");
        assert_eq!(
            amrq_atomic(am, 0, at, -1, 0, 0, null_mut()),
            AmrqStatus::Argument
        );
        assert!(last_error().contains("no atomic operation -1"));
        assert_eq!(
            amrq_atomic(am, 0, at + 3, AmrqAtomic::Load as i32, 0, 0, &mut old),
            AmrqStatus::Rma,
            "an unaligned word"
        );
        // A queue to itself: an unknown id, a frame larger than the room (left in
        // place), then the frame itself.
        let (args, payload) = ([7u64, 8], [9u8; 24]);
        let mut accepted = 0;
        let (a, p) = (args.as_ptr(), payload.as_ptr().cast());
        assert_eq!(
            amrq_enqueue(am, 0, 3, a, 2, p, 24, &mut accepted),
            AmrqStatus::Argument
        );
        assert_eq!(
            amrq_enqueue(am, 0, q, a, 2, p, 24, &mut accepted),
            AmrqStatus::Ok
        );
        assert_eq!(accepted, 1);
        let (mut got_args, mut got) = ([0u64; 8], [0u8; 64]);
        let (mut d, mut took) = (std::mem::zeroed::<AmrqDequeued>(), 0);
        let (ga, gp) = (got_args.as_mut_ptr(), got.as_mut_ptr().cast());
        assert_eq!(
            amrq_dequeue(am, q, ga, 8, gp, 8, &mut d, &mut took),
            AmrqStatus::Rq
        );
        assert!(last_error().contains("24"), "{}", last_error());
        assert_eq!(
            amrq_dequeue(am, q, ga, 8, gp, 64, &mut d, &mut took),
            AmrqStatus::Ok
        );
        assert_eq!(
            (took, d.nargs, d.len, got_args[1], got[23]),
            (1, 2, 24, 8, 9)
        );
        assert_eq!(
            amrq_dequeue(am, q, ga, 8, gp, 64, &mut d, &mut took),
            AmrqStatus::Ok
        );
        assert_eq!(took, 0);
        // A frame read in place: the same one at every call, the queue refused to
        // dequeue until it is deleted; one left held is dropped at finalize.
        let mut frame = std::mem::zeroed::<AmrqFrame>();
        assert_eq!(
            amrq_read_queue(am, 9, &mut frame, &mut took),
            AmrqStatus::Argument
        );
        assert_eq!(
            amrq_read_queue(am, q, &mut frame, &mut took),
            AmrqStatus::Ok
        );
        assert_eq!(took, 0, "an empty queue");
        for _ in 0..2 {
            assert_eq!(
                amrq_enqueue(am, 0, q, a, 2, p, 24, &mut accepted),
                AmrqStatus::Ok
            );
        }
        assert_eq!(
            amrq_read_queue(am, q, &mut frame, &mut took),
            AmrqStatus::Ok
        );
        let mut again = std::mem::zeroed::<AmrqFrame>();
        assert_eq!(
            amrq_read_queue(am, q, &mut again, &mut took),
            AmrqStatus::Ok
        );
        assert_eq!(
            (took, frame.nargs, frame.len, *frame.args.add(1)),
            (1, 2, 24, 8)
        );
        assert_eq!((again.args, again.payload), (frame.args, frame.payload));
        assert_eq!(
            amrq_dequeue(am, q, ga, 8, gp, 64, &mut d, &mut took),
            AmrqStatus::Rq
        );
        assert!(
            last_error().contains("amrq_delete_queue"),
            "{}",
            last_error()
        );
        let mut set = null_mut();
        assert_eq!(amrq_poll_set_new(am, &q, 1, &mut set), AmrqStatus::Ok);
        let mut which = 0;
        assert_eq!(
            amrq_one_poll(am, set, ga, 8, gp, 64, &mut d, &mut which),
            AmrqStatus::Rq
        );
        amrq_poll_set_free(set);
        let mut removed = 0;
        assert_eq!(amrq_delete_queue(am, q, &mut removed), AmrqStatus::Ok);
        assert_eq!(removed, 1);
        assert_eq!(
            amrq_read_queue(am, q, &mut frame, &mut took),
            AmrqStatus::Ok
        );
        assert_eq!(took, 1, "the second frame, held at finalize");
        assert_eq!(amrq_finalize(am), AmrqStatus::Ok);
    }
}

/// Each status `amrq.h` documents, from a call that must return it, with a message
/// naming the cause. `AMRQ_STATUS_PANIC` is a bug in amrq: no input produces it, and
/// none of these calls does.
#[test]
fn every_documented_status_comes_from_the_call_the_header_says() {
    // A program compiled against another header: the job is not started.
    let mut am = null_mut();
    // SAFETY: a fresh table, given once; a writable out pointer.
    let st = unsafe { amrq_init_abi(amrq_table_new(), 1, &mut am, AMRQ_ABI + 1) };
    assert_eq!((st, am.is_null()), (AmrqStatus::Job, true));
    assert!(
        last_error().contains("pkg-config --cflags amrq"),
        "{}",
        last_error()
    );

    let t = amrq_table_new();
    let (mut id, mut q) = (AmrqRequestHandler { id: 0 }, -1);
    // SAFETY: the table, NUL-terminated names, writable ids; then given once to init.
    unsafe {
        assert_eq!(
            amrq_table_request(t, c"nothing".as_ptr(), nothing, null_mut(), &mut id),
            AmrqStatus::Ok
        );
        assert_eq!(
            amrq_table_queue(t, c"q".as_ptr(), 8, 0, &mut q),
            AmrqStatus::Ok
        );
        assert_eq!(amrq_init_abi(t, 1, &mut am, AMRQ_ABI), AmrqStatus::Ok);
    }
    let (word, far) = ([1u8; 8], usize::MAX / 2);
    let payload = [9u8; 24];
    // SAFETY: every call: `am` came from amrq_init_abi (finalized last); the pointers
    // are null or point to what they say.
    let table: [(AmrqStatus, &str, &dyn Fn() -> AmrqStatus); 6] = unsafe {
        [
            (AmrqStatus::Ok, "", &|| amrq_poll(am, null_mut())),
            (AmrqStatus::Argument, "null amrq_t", &|| {
                amrq_poll(null(), null_mut())
            }),
            (AmrqStatus::Am, "rank 5 does not exist", &|| {
                amrq_request_call(am, 5, id, null(), 0)
            }),
            (AmrqStatus::Rma, "outside", &|| {
                amrq_put(am, 0, far, word.as_ptr().cast(), 8)
            }),
            (AmrqStatus::Rq, "24", &|| {
                let mut accepted = 0;
                let p = payload.as_ptr().cast();
                let sent = amrq_enqueue(am, 0, q, null(), 0, p, 24, &mut accepted);
                assert_eq!(sent, AmrqStatus::Ok);
                let (mut args, mut buf) = ([0u64; 8], [0u8; 8]);
                let (mut d, mut took) = (std::mem::zeroed::<AmrqDequeued>(), 0);
                let (a, b) = (args.as_mut_ptr(), buf.as_mut_ptr().cast());
                amrq_dequeue(am, q, a, 8, b, 8, &mut d, &mut took) // 24 bytes, room for 8
            }),
            (AmrqStatus::Argument, "9 args", &|| {
                let nine = [0u64; 9];
                amrq_request_call(am, 0, id, nine.as_ptr(), 9)
            }),
        ]
    };
    for (want, says, call) in table {
        let got = call();
        assert_eq!(got, want, "{}", last_error());
        if want != AmrqStatus::Ok {
            assert!(last_error().contains(says), "{want:?}: {}", last_error());
        }
    }
    // SAFETY: `am` came from amrq_init_abi and is not used after.
    assert_eq!(unsafe { amrq_finalize(am) }, AmrqStatus::Ok);
}

unsafe extern "C" fn answer_one(_: *mut c_void, _: *const AmrqMsg, answer: *mut u64) -> i32 {
    // SAFETY: the library passes a writable answer.
    unsafe { *answer = 1 };
    0
}

#[test]
fn bad_calls_get_a_status_and_a_message() {
    use amrq_c::call::*;
    use amrq_c::ids::{AmrqCallHandler, AMRQ_CALL_IDS};
    let t = amrq_table_new();
    let mut id = AmrqCallHandler { id: 0 };
    // SAFETY: a table from amrq_table_new, a NUL-terminated name, a writable id.
    let st = unsafe { amrq_table_call(t, c"one".as_ptr(), answer_one, null_mut(), &mut id) };
    assert_eq!((st, id.id), (AmrqStatus::Ok, AMRQ_CALL_IDS));
    let mut am = null_mut();
    // SAFETY: the table, given once; a writable out pointer.
    let st = unsafe { amrq_init_abi(t, 1, &mut am, AMRQ_ABI) };
    assert_eq!(st, AmrqStatus::Ok, "{}", last_error());
    // SAFETY: every call below: `am` came from amrq_init and is finalized last; the
    // pointers are null or point to what they say; each pending call is used once.
    unsafe {
        let mut p = null_mut();
        // A request handler's id where a call handler's is expected.
        let wrong = AmrqCallHandler {
            id: AMRQ_REQUEST_IDS,
        };
        assert_eq!(
            amrq_call(am, 0, wrong, null(), 0, &mut p),
            AmrqStatus::Argument
        );
        assert!(
            last_error().contains("a request handler's id"),
            "{}",
            last_error()
        );
        // Eight args: one word names the call.
        let eight = [0u64; 8];
        assert_eq!(
            amrq_call(am, 0, id, eight.as_ptr(), 8, &mut p),
            AmrqStatus::Argument
        );
        assert!(last_error().contains("at most 7"), "{}", last_error());
        assert_eq!(
            amrq_call(am, -1, id, null(), 0, &mut p),
            AmrqStatus::Argument
        );
        assert_eq!(amrq_call_wait(null_mut(), null_mut()), AmrqStatus::Argument);
        assert_eq!(amrq_call_forget(null_mut()), AmrqStatus::Argument);
        let mut ready = -1;
        assert_eq!(amrq_call_test(null(), &mut ready), AmrqStatus::Argument);
        // A good one, tested, then waited for.
        assert_eq!(amrq_call(am, 0, id, null(), 0, &mut p), AmrqStatus::Ok);
        assert_eq!(amrq_call_test(p, &mut ready), AmrqStatus::Ok);
        assert!(ready == 0 || ready == 1);
        let mut answer = 0;
        assert_eq!(amrq_call_wait(p, &mut answer), AmrqStatus::Ok);
        assert_eq!(answer, 1);
        assert_eq!(amrq_finalize(am), AmrqStatus::Ok);
    }
}
