//! Remote Queues from C: named queues declared with the handler table, `enqueue`
//! (accepted or full), `dequeue` (copied out), `delete_queue`, and One-poll over a set
//! of queues.

use crate::job::{on_job, rank_of, Amrq, AmrqTable};
use crate::{guard, put_out, slice, slice_mut, AmrqStatus, Failure};
use amrq::conduit::ConduitError;
use amrq::conduit::{PollSet, ReceivedFrame};
use amrq::config::QueueSpec;
use amrq::rq::{Dequeued, QueueId, RqError};
use std::ffi::{c_char, c_int, c_void, CStr};

/// What `amrq_dequeue` and `amrq_one_poll` copied out of a frame.
#[repr(C)]
pub struct AmrqDequeued {
    /// The sender's rank.
    pub source: u32,
    /// The frame's tag.
    pub tag: u16,
    /// Args copied.
    pub nargs: usize,
    /// Payload bytes copied.
    pub len: usize,
}

impl From<Dequeued> for AmrqDequeued {
    fn from(d: Dequeued) -> Self {
        AmrqDequeued {
            source: d.source as u32,
            tag: d.tag,
            nargs: d.nargs,
            len: d.len,
        }
    }
}

/// A frame `amrq_read_queue` shows in place: its args and payload stay in the queue's
/// memory, valid until `amrq_delete_queue` removes it (or `amrq_finalize`).
#[repr(C)]
pub struct AmrqFrame {
    /// The sender's rank.
    pub source: u32,
    /// The frame's tag.
    pub tag: u16,
    /// The args, in place.
    pub args: *const u64,
    /// How many.
    pub nargs: usize,
    /// The payload, in place: in the queue's memory, where no peer writes it; or for a
    /// Long frame (`in_segment` 1) in this rank's segment, where any rank may `put`
    /// meanwhile (copy it out, or read it as the program's protocol allows).
    pub payload: *const c_void,
    /// Its length in bytes.
    pub len: usize,
    /// 1 for a Long payload of at least one byte (in this rank's segment), else 0.
    pub in_segment: usize,
}

impl AmrqFrame {
    fn of<'a>(f: &impl ReceivedFrame<'a>) -> Self {
        AmrqFrame {
            source: f.source() as u32,
            tag: f.tag(),
            args: f.args().as_ptr(),
            nargs: f.args().len(),
            payload: f.payload().as_ptr().cast(),
            len: f.payload().len(),
            in_segment: usize::from(f.payload().is_shared() && !f.payload().is_empty()),
        }
    }
}

/// A set of queues for `amrq_one_poll`, highest priority first.
pub struct AmrqPollSet {
    set: PollSet,
}

/// Declares queue `name` of `slots` slots per sender (a power of two), armed for
/// One-poll if `one_poll` is non-zero; its id goes to `*id`. Every rank declares the
/// same queues in the same order.
///
/// # Safety
/// `t` came from `amrq_table_new`; `name` is a NUL-terminated string; `id` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_table_queue(
    t: *mut AmrqTable,
    name: *const c_char,
    slots: u64,
    one_poll: c_int,
    id: *mut c_int,
) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee.
            let t = unsafe { t.as_mut() }.ok_or_else(|| Failure::argument("a null table"))?;
            if name.is_null() || !slots.is_power_of_two() {
                return Err(Failure::argument(
                    "a queue needs a name and a power-of-two size",
                ));
            }
            // SAFETY: the caller's guarantee: a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            let spec = QueueSpec::new(name, slots);
            put_out(
                id,
                t.add_queue(if one_poll != 0 { spec.one_poll() } else { spec }),
            );
            Ok(())
        },
    )
}

impl Amrq {
    fn queue(&self, q: c_int) -> Result<QueueId, Failure> {
        usize::try_from(q)
            .ok()
            .and_then(|k| self.queues.get(k).copied())
            .ok_or_else(|| Failure::argument(format!("no queue {q}")))
    }

    /// `e`, in this interface's words where the reason is a frame `amrq_read_queue`
    /// holds: the conduit takes no other frame from a queue while one is out.
    #[cold]
    fn refused(&self, e: RqError) -> Failure {
        match e {
            RqError::Conduit(ConduitError::FrameOutstanding { channel }) => {
                let q = self.queues.iter().position(|id| id.index() == channel);
                Failure::rq(format!(
                    "queue {}'s head frame is held by amrq_read_queue: amrq_delete_queue removes it",
                    q.map_or(-1, |k| k as c_int)
                ))
            }
            e => e.into(),
        }
    }
}

/// Enqueues `args` and `len` bytes of payload into queue `q` of rank `dest`: `*accepted`
/// is 1 if the frame was committed (it will be delivered), 0 if the queue was full
/// (nothing was sent; try again later).
///
/// # Safety
/// `am` came from `amrq_init`; `args` points to `nargs` words, `payload` to `len`
/// bytes; `accepted` is null or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a C signature: pointers and lengths side by side
pub unsafe extern "C" fn amrq_enqueue(
    am: *const Amrq,
    dest: c_int,
    q: c_int,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
    accepted: *mut c_int,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `args` points to `nargs` words, `payload` to
        // `len` bytes.
        let (args, bytes) = unsafe { (slice(args, nargs)?, slice(payload.cast(), len)?) };
        let ok = j
            .am()
            .rq()
            .enqueue(rank_of(dest)?, j.queue(q)?, args, bytes)?;
        put_out(accepted, c_int::from(ok));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Copies the frame at the head of local queue `q` into `args` (room for `args_cap`)
/// and `buf` (room for `cap` bytes), removes it, and describes it in `*out`; `*got` is
/// 1, or 0 if the queue was empty. A frame larger than the room is left in place, with
/// `AMRQ_STATUS_RQ`.
///
/// # Safety
/// `am` came from `amrq_init`; `args` points to `args_cap` writable words and `buf` to
/// `cap` writable bytes; `out` and `got` are null or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a C signature: pointers and lengths side by side
pub unsafe extern "C" fn amrq_dequeue(
    am: *const Amrq,
    q: c_int,
    args: *mut u64,
    args_cap: usize,
    buf: *mut c_void,
    cap: usize,
    out: *mut AmrqDequeued,
    got: *mut c_int,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: writable room for the args and the payload.
        let (args, buf) = unsafe { (slice_mut(args, args_cap)?, slice_mut(buf.cast(), cap)?) };
        let d = j
            .am()
            .rq()
            .dequeue(j.queue(q)?, args, buf)
            .map_err(|e| j.refused(e))?;
        put_out(got, c_int::from(d.is_some()));
        if let Some(d) = d {
            put_out(out, d.into());
        }
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Shows the frame at the head of local queue `q` in place, without copying or
/// removing it (RQ's `read_queue`): `*got` is 1 and `*out` describes it, or `*got` is
/// 0 if the queue is empty. The frame stays at the head, the same one at every call,
/// and its args and payload stay valid, until `amrq_delete_queue(q)` removes it;
/// meanwhile `amrq_dequeue` and One-poll refuse the queue (`AMRQ_STATUS_RQ`).
///
/// # Safety
/// `am` came from `amrq_init`; `out` and `got` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_read_queue(
    am: *const Amrq,
    q: c_int,
    out: *mut AmrqFrame,
    got: *mut c_int,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let id = j.queue(q)?;
        let mut held = j.held.borrow_mut();
        let slot = &mut held[q as usize]; // `queue` checked `q`
        if slot.is_none() {
            // SAFETY: a held frame is dropped before the job (`Drop for Amrq`).
            *slot = unsafe { j.kept() }.rq().read_queue(id)?;
        }
        put_out(got, c_int::from(slot.is_some()));
        if let Some(f) = slot {
            put_out(out, AmrqFrame::of(f));
        }
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Removes the frame at the head of local queue `q` (the one `amrq_read_queue` shows,
/// if it was called): `*removed` is 1, or 0 if the queue was empty.
///
/// # Safety
/// `am` came from `amrq_init`; `removed` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_delete_queue(
    am: *const Amrq,
    q: c_int,
    removed: *mut c_int,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let id = j.queue(q)?;
        let shown = j.held.borrow_mut()[q as usize].take(); // `queue` checked `q`
        let done = match shown {
            Some(f) => {
                f.release();
                true
            }
            None => j.am().rq().delete_queue(id)?,
        };
        put_out(removed, c_int::from(done));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// A set of the `n` queues at `queues` (highest priority first) for `amrq_one_poll`;
/// `*set` is freed by `amrq_poll_set_free`.
///
/// # Safety
/// `am` came from `amrq_init`; `queues` points to `n` ids; `set` is writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_poll_set_new(
    am: *const Amrq,
    queues: *const c_int,
    n: usize,
    set: *mut *mut AmrqPollSet,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `queues` points to `n` ids.
        let ids = unsafe { slice(queues, n) }?;
        let qs = ids
            .iter()
            .map(|&q| j.queue(q))
            .collect::<Result<Vec<_>, _>>()?;
        let s = AmrqPollSet {
            set: j.am().rq().poll_set(&qs)?,
        };
        put_out(set, Box::into_raw(Box::new(s)));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Frees a set of `amrq_poll_set_new`.
///
/// # Safety
/// `set` is null or came from `amrq_poll_set_new` and was not freed.
#[no_mangle]
pub unsafe extern "C" fn amrq_poll_set_free(set: *mut AmrqPollSet) {
    if !set.is_null() {
        // SAFETY: the caller's guarantee.
        drop(unsafe { Box::from_raw(set) });
    }
}

/// One-poll: the frame at the head of the highest-priority queue of `set` that has one
/// is copied out as `amrq_dequeue` does and removed; its queue's id goes to `*which`,
/// or −1 if every queue was empty (one load when the set is armed and idle).
/// `AMRQ_STATUS_RQ` if it comes to a queue whose head frame `amrq_read_queue` holds
/// (queues before it that have a frame are served first).
///
/// # Safety
/// As `amrq_dequeue`; `set` came from `amrq_poll_set_new` on this `am`; `which` is
/// writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a C signature: pointers and lengths side by side
pub unsafe extern "C" fn amrq_one_poll(
    am: *const Amrq,
    set: *const AmrqPollSet,
    args: *mut u64,
    args_cap: usize,
    buf: *mut c_void,
    cap: usize,
    out: *mut AmrqDequeued,
    which: *mut c_int,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: a set of this job, not freed.
        let s = unsafe { set.as_ref() }.ok_or_else(|| Failure::argument("a null poll set"))?;
        // SAFETY: the caller's guarantee: writable room for the args and the payload.
        let (args, buf) = unsafe { (slice_mut(args, args_cap)?, slice_mut(buf.cast(), cap)?) };
        put_out(which, -1);
        let Some((q, f)) = j.am().rq().one_poll(&s.set).map_err(|e| j.refused(e))? else {
            return Ok(());
        };
        let d = Dequeued::take(f, args, buf)?;
        put_out(out, d.into());
        let k = j.queues.iter().position(|&id| id == q);
        put_out(which, k.map_or(-1, |k| k as c_int));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}
