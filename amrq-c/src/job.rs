//! Handlers, start-up and shutdown, Active Messages, polling and the barrier.
//!
//! A C handler is a function pointer and a `void *` state. amrq's handler table holds
//! Rust functions, so each C handler is reached through a trampoline of its own: the
//! `K`-th request handler registered is `request_trampoline::<K>`, which calls the
//! `K`-th C function with its state (at most [`MAX_HANDLERS`] of each kind).

use crate::ids::{AmrqReplyHandler, AmrqRequestHandler, AMRQ_REPLY_IDS, AMRQ_REQUEST_IDS};
use crate::lane::{AmrqFast, AmrqLane, AmrqTokenFast, Lanes};
use crate::msg::{c_msg, AmrqMsg};
use crate::{guard, put_out, slice, AmrqStatus, Failure};
use amrq::am::{Am, AmError, HandlerTable, Msg, ReplyHandler, ReqCtx, RequestHandler};
use amrq::conduit::mem::MemConduit;
use amrq::conduit::Conduit;
use amrq::rma::Rma;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};

/// Request handlers, and reply handlers, a program may register.
pub const MAX_HANDLERS: usize = 64;

/// What a request handler replies through (valid during the handler only).
#[repr(C)]
pub struct AmrqToken<'a> {
    /// What the header's inline `amrq_reply` reads and writes: the first member.
    fast: AmrqTokenFast,
    ctx: Option<ReqCtx<'a, Handlers, MemConduit>>,
    replies: &'a [ReplyHandler],
    error: Option<AmError>,
}

/// A request handler: `state` is what it was registered with.
pub type AmrqRequestFn =
    unsafe extern "C" fn(state: *mut c_void, token: *mut AmrqToken<'static>, msg: *const AmrqMsg);

/// A reply handler.
pub type AmrqReplyFn = unsafe extern "C" fn(state: *mut c_void, msg: *const AmrqMsg);

/// The C handlers (the `Am`'s state).
pub struct Handlers {
    requests: Vec<(AmrqRequestFn, *mut c_void)>,
    /// Call handlers, and their ids in the table.
    pub(crate) calls: Vec<(crate::call::AmrqCallFn, *mut c_void)>,
    pub(crate) call_ids: Vec<amrq::am::Call<amrq::am::Words, u64>>,
    replies: Vec<(AmrqReplyFn, *mut c_void)>,
    reply_ids: Vec<ReplyHandler>,
    /// The reply lanes (one per rank), the reply handlers' tags and their count, which
    /// each token hands the inline `amrq_reply`: set by `amrq_init` once the job's
    /// `Lanes` exist (null and 0 before: the replies go to the library).
    reply_lanes: Cell<(*const AmrqLane, *const u16, usize)>,
}

/// A handler table being filled, before `amrq_init`.
pub struct AmrqTable {
    pub(crate) table: HandlerTable<Handlers>,
    pub(crate) handlers: Handlers,
    request_ids: Vec<RequestHandler>,
    queues: Vec<amrq::config::QueueSpec>,
}

impl AmrqTable {
    /// Declares a queue (added to the job's configuration by `amrq_init`): its id.
    pub(crate) fn add_queue(&mut self, spec: amrq::config::QueueSpec) -> c_int {
        self.queues.push(spec);
        self.queues.len() as c_int - 1
    }
}

/// A rank of a running job.
#[repr(C)]
pub struct Amrq {
    /// What the header's inline `amrq_request` reads: the first member.
    fast: AmrqFast,
    /// What `fast` and the tokens point into.
    lanes: Lanes,
    /// Boxed: the lanes and the handlers' state point into it.
    job: Box<amrq::Job<Handlers>>,
    request_ids: Vec<RequestHandler>,
    /// The queues the table declared, by their C id.
    pub(crate) queues: Vec<amrq::rq::QueueId>,
    /// The frame `amrq_read_queue` shows of each queue (by C id), kept in place until
    /// `amrq_delete_queue` removes it.
    pub(crate) held: std::cell::RefCell<Vec<Option<amrq::conduit::mem::MemFrame<'static>>>>,
}

impl Drop for Amrq {
    fn drop(&mut self) {
        self.held.get_mut().clear(); // frames borrow the job's memory: gone before it
    }
}

impl Amrq {
    /// The job's Active Messages.
    pub(crate) fn am(&self) -> &Am<Handlers> {
        self.job.am()
    }

    /// Its one-sided operations.
    pub(crate) fn rma(&self) -> &Rma<Handlers> {
        self.job.rma()
    }

    /// Its collectives.
    pub(crate) fn coll(&self) -> &amrq::coll::Coll<Handlers> {
        self.job.coll()
    }

    /// The job, for what C keeps across calls (a non-blocking operation's handle, a
    /// frame held in place).
    ///
    /// # Safety
    /// What borrows it is gone before `amrq_finalize` frees this `Amrq`.
    pub(crate) unsafe fn kept(&self) -> &'static amrq::Job<Handlers> {
        // SAFETY: boxed, the job stays where it is until this `Amrq` drops; the
        // caller's guarantee covers the rest.
        unsafe { &*std::ptr::from_ref(&*self.job) }
    }

    /// Records this rank as failed in its job (after a panic).
    pub(crate) fn fail_job(&self, why: &str) {
        let c = self.am().rq().conduit();
        c.boot().mark_failed(c.rank(), why.to_string());
    }
}

/// The `Amrq` behind `am`, or an argument error.
///
/// # Safety
/// `am` is null or came from `amrq_init` and was not finalized.
pub(crate) unsafe fn job<'a>(am: *const Amrq) -> Result<&'a Amrq, Failure> {
    // SAFETY: the caller's guarantee.
    unsafe { am.as_ref() }.ok_or_else(|| Failure::argument("a null amrq_t"))
}

/// [`guard`] for a call on `am`: a panic marks the rank failed in its job.
///
/// # Safety
/// As [`job`].
pub(crate) unsafe fn on_job(
    am: *const Amrq,
    body: impl FnOnce(&Amrq) -> Result<(), Failure>,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    let j = unsafe { am.as_ref() };
    guard(
        move |why| {
            if let Some(j) = j {
                j.fail_job(why);
            }
        },
        move || body(j.ok_or_else(|| Failure::argument("a null amrq_t"))?),
    )
}

fn request_trampoline<'a, const K: usize>(
    s: &'a Handlers,
    ctx: ReqCtx<'a, Handlers, MemConduit>,
    m: Msg<'a>,
) -> Result<(), AmError> {
    let (f, state) = s.requests[K];
    let (lanes, reply_tags, nreplies) = s.reply_lanes.get();
    let mut token = AmrqToken {
        fast: AmrqTokenFast {
            // Not read while `nreplies` is 0 (before `amrq_init` set the lanes).
            lane: lanes.wrapping_add(ctx.source()),
            nreplies,
            reply_tags,
            replied: 0,
        },
        ctx: Some(ctx),
        replies: &s.reply_ids,
        error: None,
    };
    let t: *mut AmrqToken<'_> = &mut token;
    // SAFETY: `f` is the C function registered as this handler, called with its
    // state, a token and a message that live until it returns (the token's lifetime
    // is erased: it is used through `amrq_reply` during the call only).
    unsafe { f(state, t.cast(), c_msg(&m)) };
    token.error.map_or(Ok(()), Err)
}

fn reply_trampoline<'a, const K: usize>(s: &'a Handlers, m: Msg<'a>) -> Result<(), AmError> {
    let (f, state) = s.replies[K];
    // SAFETY: `f` is the C function registered as this handler, called with its
    // state and a message that lives until it returns.
    unsafe { f(state, c_msg(&m)) };
    Ok(())
}

/// Registers `name` as the `k`-th request (or reply) handler: the trampoline of `k`, a
/// function item, so that the table's call for it has no captures to read and inlines
/// the trampoline (a closure capturing `k` instead: 16 instructions more per C self
/// round trip under callgrind).
macro_rules! trampolines {
    ($($k:literal)*) => {
        fn add_request(t: &mut HandlerTable<Handlers>, name: String, k: usize) -> RequestHandler {
            match k {
                $($k => t.request(name, request_trampoline::<$k>),)*
                _ => unreachable!("at most MAX_HANDLERS request handlers (checked by `register`)"),
            }
        }

        pub(crate) fn add_call(
            t: &mut HandlerTable<Handlers>,
            name: String,
            k: usize,
        ) -> amrq::am::Call<amrq::am::Words, u64> {
            match k {
                $($k => t.call(name, crate::call::call_trampoline::<$k>),)*
                _ => unreachable!("at most MAX_HANDLERS call handlers (checked by `register`)"),
            }
        }

        fn add_reply(t: &mut HandlerTable<Handlers>, name: String, k: usize) -> ReplyHandler {
            match k {
                $($k => t.reply(name, reply_trampoline::<$k>),)*
                _ => unreachable!("at most MAX_HANDLERS reply handlers (checked by `register`)"),
            }
        }
    };
}

trampolines!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
    61 62 63
);
const _: () = assert!(MAX_HANDLERS == 64, "one trampoline per handler");

/// A new, empty handler table; `amrq_init` takes it (or `amrq_table_free` frees it).
#[no_mangle]
pub extern "C" fn amrq_table_new() -> *mut AmrqTable {
    Box::into_raw(Box::new(AmrqTable {
        table: HandlerTable::new(),
        handlers: Handlers {
            requests: Vec::new(),
            calls: Vec::new(),
            call_ids: Vec::new(),
            replies: Vec::new(),
            reply_ids: Vec::new(),
            reply_lanes: Cell::new((std::ptr::null(), std::ptr::null(), 0)),
        },
        request_ids: Vec::new(),
        queues: Vec::new(),
    }))
}

/// Frees a table that was not given to `amrq_init`.
///
/// # Safety
/// `t` is null or came from `amrq_table_new` and was neither freed nor given to
/// `amrq_init`.
#[no_mangle]
pub unsafe extern "C" fn amrq_table_free(t: *mut AmrqTable) {
    if !t.is_null() {
        // SAFETY: the caller's guarantee.
        drop(unsafe { Box::from_raw(t) });
    }
}

/// The name of a handler, copied (the table owns it).
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn name_of(name: *const c_char) -> Result<String, Failure> {
    if name.is_null() {
        return Err(Failure::argument("a null handler name"));
    }
    // SAFETY: the caller's guarantee.
    Ok(unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned())
}

/// Registers handler number `count(t)` of a kind as `name` through `add`; its number
/// goes to `*id`.
///
/// # Safety
/// `t` came from `amrq_table_new`; `name` is a NUL-terminated string; `id` is null or
/// writable.
pub(crate) unsafe fn register<Id>(
    t: *mut AmrqTable,
    name: *const c_char,
    id: (*mut Id, fn(usize) -> Id),
    (kind, count): (&str, fn(&AmrqTable) -> usize),
    add: impl FnOnce(&mut AmrqTable, String, usize),
) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee.
            let t = unsafe { t.as_mut() }.ok_or_else(|| Failure::argument("a null table"))?;
            let k = count(t);
            if k == MAX_HANDLERS {
                let why = format!("more than {MAX_HANDLERS} {kind} handlers");
                return Err(Failure::argument(why));
            }
            // SAFETY: the caller's guarantee.
            add(t, unsafe { name_of(name) }?, k);
            put_out(id.0, id.1(k));
            Ok(())
        },
    )
}

/// Registers request handler `f` (called with `state`) as `name`; its id goes to
/// `*id`. Every rank registers the same handlers in the same order.
///
/// # Safety
/// `t` came from `amrq_table_new`; `name` is a NUL-terminated string; `id` is null or
/// writable; `f` may be called with `state` from any amrq call that polls.
#[no_mangle]
pub unsafe extern "C" fn amrq_table_request(
    t: *mut AmrqTable,
    name: *const c_char,
    f: AmrqRequestFn,
    state: *mut c_void,
    id: *mut AmrqRequestHandler,
) -> AmrqStatus {
    let add = |t: &mut AmrqTable, name, k: usize| {
        t.request_ids.push(add_request(&mut t.table, name, k));
        t.handlers.requests.push((f, state));
    };
    let tagged: fn(usize) -> AmrqRequestHandler = |k| AmrqRequestHandler {
        id: AMRQ_REQUEST_IDS + k as u32,
    };
    let id = (id, tagged);
    // SAFETY: the caller's guarantee.
    unsafe { register(t, name, id, ("request", |t| t.handlers.requests.len()), add) }
}

/// Registers reply handler `f` (called with `state`) as `name`; its id goes to `*id`.
///
/// # Safety
/// As `amrq_table_request`.
#[no_mangle]
pub unsafe extern "C" fn amrq_table_reply(
    t: *mut AmrqTable,
    name: *const c_char,
    f: AmrqReplyFn,
    state: *mut c_void,
    id: *mut AmrqReplyHandler,
) -> AmrqStatus {
    let add = |t: &mut AmrqTable, name, k: usize| {
        t.handlers.reply_ids.push(add_reply(&mut t.table, name, k));
        t.handlers.replies.push((f, state));
    };
    let tagged: fn(usize) -> AmrqReplyHandler = |k| AmrqReplyHandler {
        id: AMRQ_REPLY_IDS + k as u32,
    };
    let id = (id, tagged);
    // SAFETY: the caller's guarantee.
    unsafe { register(t, name, id, ("reply", |t| t.handlers.replies.len()), add) }
}

/// Starts this rank: joins the job a launcher (`amrun`, `mpirun`, `srun`; across hosts
/// with `amrun --hosts`) placed it in and meets the other ranks; `*out` is the rank's
/// handle. Started on its own, the program runs itself as `ranks_if_alone` ranks
/// (`AMRQ_RANKS` overrides it; the same arguments) and exits with the job's status,
/// never returning here — or, with one rank, is a job of one rank. The settings are
/// the `AMRQ_*` variables' (`amrun --print-config PROGRAM` lists them). Takes `t`
/// (freed, whatever the outcome).
///
/// The header's `amrq_init` calls this with the version of its inline code
/// (`AMRQ_ABI`); another language's FFI passes the `AMRQ_ABI` of the header it
/// mirrors. A version other than the library's is refused (`AMRQ_STATUS_JOB`), the
/// table freed.
///
/// # Safety
/// `t` came from `amrq_table_new` and was neither freed nor given to `amrq_init`;
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_init_abi(
    t: *mut AmrqTable,
    ranks_if_alone: c_int,
    out: *mut *mut Amrq,
    abi: u32,
) -> AmrqStatus {
    guard(
        |_| {},
        || {
            if t.is_null() || out.is_null() {
                return Err(Failure::argument("a null table or out pointer"));
            }
            // SAFETY: the caller's guarantee.
            let t = unsafe { Box::from_raw(t) };
            if abi != crate::lane::AMRQ_ABI {
                return Err(Failure::new(
                    AmrqStatus::Job,
                    format!(
                        "this program was compiled with an amrq.h of ABI {abi} and is linked with a libamrq_c of ABI {}: compile it with the amrq.h installed beside this library (pkg-config --cflags amrq)",
                        crate::lane::AMRQ_ABI
                    ),
                ));
            }
            let mut cfg = amrq::Config::new();
            cfg.ranks
                .set_default(usize::try_from(ranks_if_alone).unwrap_or(1).max(1));
            let queues: Vec<_> = t.queues.iter().map(|q| cfg.add(q.clone())).collect();
            let setup = cfg.join()?;
            let AmrqTable {
                table,
                handlers,
                request_ids,
                ..
            } = *t;
            let job = Box::new(setup.start(table, handlers)?);
            let lanes = Lanes::of(
                job.rq().conduit(),
                job.size(),
                request_ids.iter().map(|h| h.id()).collect(),
                job.state().reply_ids.iter().map(|h| h.id()).collect(),
            );
            job.state().reply_lanes.set(lanes.for_replies());
            let job = Box::new(Amrq {
                fast: lanes.fast(),
                lanes,
                job,
                request_ids,
                held: std::cell::RefCell::new(queues.iter().map(|_| None).collect()),
                queues,
            });
            put_out(out, Box::into_raw(job));
            Ok(())
        },
    )
}

/// Leaves the job after a barrier with the other ranks, and frees `am` (also when the
/// barrier failed: its status is returned).
///
/// # Safety
/// `am` came from `amrq_init` and was not finalized; it is not used after.
#[no_mangle]
pub unsafe extern "C" fn amrq_finalize(am: *mut Amrq) -> AmrqStatus {
    let body = |j: &Amrq| Ok(j.am().barrier()?);
    // SAFETY: the caller's guarantee.
    let met = unsafe { on_job(am, body) };
    if am.is_null() {
        return met;
    }
    let free = || {
        // SAFETY: the caller's guarantee: `am` came from `amrq_init` (a box); no
        // reference to it is left, and it is not used after.
        drop(unsafe { Box::from_raw(am) });
        Ok(())
    };
    match (met, guard(|_| {}, free)) {
        (AmrqStatus::Ok, freed) => freed,
        (met, _) => met,
    }
}

/// This rank's number, from 0 (−1 for a null `am`).
///
/// # Safety
/// `am` is null or came from `amrq_init` and was not finalized.
#[no_mangle]
pub unsafe extern "C" fn amrq_rank(am: *const Amrq) -> c_int {
    // SAFETY: the caller's guarantee.
    unsafe { job(am) }.map_or(-1, |j| j.am().rank() as c_int)
}

/// The ranks in the job (−1 for a null `am`).
///
/// # Safety
/// As `amrq_rank`.
#[no_mangle]
pub unsafe extern "C" fn amrq_size(am: *const Amrq) -> c_int {
    // SAFETY: the caller's guarantee.
    unsafe { job(am) }.map_or(-1, |j| j.am().size() as c_int)
}

impl Amrq {
    fn request_id(&self, handler: AmrqRequestHandler) -> Result<RequestHandler, Failure> {
        Ok(self.request_ids[handler.checked(self.request_ids.len())?])
    }
}

/// Sends a Short request (`nargs` ≤ 8 args) to rank `dest`, waiting for room if the
/// queue is full (running handlers meanwhile): the library's `amrq_request`. The
/// header's inline `amrq_request` writes a message of at most six args into a ring
/// with room itself and calls this for anything else; callers that cannot compile the
/// header's inline functions (another language's FFI) call this.
///
/// # Safety
/// `am` came from `amrq_init`; `args` points to `nargs` words.
#[no_mangle]
pub unsafe extern "C" fn amrq_request_call(
    am: *const Amrq,
    dest: c_int,
    handler: AmrqRequestHandler,
    args: *const u64,
    nargs: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee (above).
    unsafe { request(am, dest, handler, (args, nargs), Carried::Short) }
}

/// Sends a Medium request: args and a payload of `len` bytes (at most the queue's
/// Medium size).
///
/// # Safety
/// As `amrq_request_call`; `payload` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn amrq_request_medium(
    am: *const Amrq,
    dest: c_int,
    handler: AmrqRequestHandler,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee (above).
    unsafe {
        request(
            am,
            dest,
            handler,
            (args, nargs),
            Carried::Medium(payload, len),
        )
    }
}

/// Sends a Long request: `len` bytes of `payload` are written at byte `offset` of
/// `dest`'s segment before its handler runs, which finds them in place (its message's
/// `payload`). Which bytes of a segment a rank may write is the program's protocol.
///
/// # Safety
/// As `amrq_request_medium`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a C signature: pointers and lengths side by side
pub unsafe extern "C" fn amrq_request_long(
    am: *const Amrq,
    dest: c_int,
    handler: AmrqRequestHandler,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
    offset: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee (above).
    unsafe {
        request(
            am,
            dest,
            handler,
            (args, nargs),
            Carried::Long(payload, len, offset),
        )
    }
}

/// What a request or reply carries beside its args: nothing (Short), bytes in the
/// message (Medium), or bytes written at an offset of the target's segment (Long).
#[derive(Clone, Copy)]
enum Carried {
    Short,
    Medium(*const c_void, usize),
    Long(*const c_void, usize, usize),
}

impl Carried {
    /// The payload's bytes (none for Short).
    ///
    /// # Safety
    /// A Medium or Long payload pointer points to its length in bytes, valid while the
    /// slice is used.
    unsafe fn bytes<'a>(self) -> Result<&'a [u8], Failure> {
        match self {
            Carried::Short => Ok(&[]),
            // SAFETY: the caller's guarantee.
            Carried::Medium(p, len) | Carried::Long(p, len, _) => unsafe { slice(p.cast(), len) },
        }
    }
}

/// Sends request `handler` with `args` and what `carried` says to rank `dest`.
///
/// # Safety
/// `am` came from `amrq_init`; `args` points to `nargs` words, and a Medium or Long
/// payload pointer to its length in bytes.
unsafe fn request(
    am: *const Amrq,
    dest: c_int,
    handler: AmrqRequestHandler,
    (args, nargs): (*const u64, usize),
    carried: Carried,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        let h = j.request_id(handler)?;
        // SAFETY: the caller's guarantee: `args` points to `nargs` words.
        let args = unsafe { args_of(args, nargs) }?;
        // SAFETY: the caller's guarantee: a payload pointer points to its length.
        let bytes = unsafe { carried.bytes() }?;
        let dest = rank_of(dest)?;
        let sent = match carried {
            Carried::Short => j.am().request(dest, h, args),
            Carried::Medium(..) => j.am().request_medium(dest, h, args, bytes),
            Carried::Long(_, _, offset) => j.am().request_long(dest, h, args, bytes, offset),
        };
        Ok(sent?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// A message's args from C: at most [`amrq::conduit::ring::MAX_ARGS`]
/// (`AMRQ_STATUS_ARGUMENT` beyond, as for any argument C can check).
///
/// # Safety
/// `args` points to `nargs` words (or `nargs` is 0, or above the limit).
unsafe fn args_of<'a>(args: *const u64, nargs: usize) -> Result<&'a [u64], Failure> {
    let max = amrq::conduit::ring::MAX_ARGS;
    if nargs > max {
        return Err(Failure::argument(format!(
            "{nargs} args: a message carries at most {max}"
        )));
    }
    // SAFETY: the caller's guarantee.
    unsafe { slice(args, nargs) }
}

/// A rank number from C.
pub(crate) fn rank_of(r: c_int) -> Result<usize, Failure> {
    usize::try_from(r).map_err(|_| Failure::argument(format!("rank {r}")))
}

/// The error of a second reply to one request.
#[cold]
fn replied_already() -> Failure {
    Failure::argument("this request was replied to already")
}

/// The reply of the handler `token` was given to, with `args` and, if `len` > 0, a
/// payload: at most one per request.
///
/// # Safety
/// `token` is the one the running request handler was called with; `args` points to
/// `nargs` words and `payload` to `len` bytes.
unsafe fn reply(
    token: *mut AmrqToken<'static>,
    handler: AmrqReplyHandler,
    (args, nargs): (*const u64, usize),
    carried: Carried,
) -> AmrqStatus {
    guard(
        |_| {},
        || {
            // SAFETY: the caller's guarantee.
            let t = unsafe { token.as_mut() }.ok_or_else(|| Failure::argument("a null token"))?;
            if t.fast.replied != 0 {
                return Err(replied_already()); // by the inline `amrq_reply`, or here
            }
            let h = t.replies[handler.checked(t.replies.len())?];
            let ctx = t.ctx.take().ok_or_else(replied_already)?;
            t.fast.replied = 1;
            // SAFETY: the caller's guarantee: `args` points to `nargs` words.
            let args = unsafe { args_of(args, nargs) }?;
            // SAFETY: the caller's guarantee: a payload pointer points to its length.
            let bytes = unsafe { carried.bytes() }?;
            let sent = match carried {
                Carried::Short => ctx.reply(h, args),
                Carried::Medium(..) => ctx.reply_medium(h, args, bytes),
                Carried::Long(_, _, offset) => ctx.reply_long(h, args, bytes, offset),
            };
            sent.map_err(|e| {
                let f = Failure::new(AmrqStatus::Am, e.to_string());
                t.error = Some(e); // the poll that ran the handler fails with it too
                f
            })
        },
    )
}

/// Replies to the request being handled with a Short reply: the library's
/// `amrq_reply`, which the header's inline `amrq_reply` calls for any reply it does not
/// write itself (as `amrq_request_call`).
///
/// # Safety
/// `token` is the one the running request handler was called with; `args` points to
/// `nargs` words.
#[no_mangle]
pub unsafe extern "C" fn amrq_reply_call(
    token: *mut AmrqToken<'static>,
    handler: AmrqReplyHandler,
    args: *const u64,
    nargs: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    unsafe { reply(token, handler, (args, nargs), Carried::Short) }
}

/// Replies with a Medium reply (args and `len` bytes of payload).
///
/// # Safety
/// As `amrq_reply_call`; `payload` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn amrq_reply_medium(
    token: *mut AmrqToken<'static>,
    handler: AmrqReplyHandler,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    unsafe { reply(token, handler, (args, nargs), Carried::Medium(payload, len)) }
}

/// Replies with a Long reply: `len` bytes of `payload` written at byte `offset` of the
/// requester's segment before its reply handler runs.
///
/// # Safety
/// As `amrq_reply_medium`.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a C signature: pointers and lengths side by side
pub unsafe extern "C" fn amrq_reply_long(
    token: *mut AmrqToken<'static>,
    handler: AmrqReplyHandler,
    args: *const u64,
    nargs: usize,
    payload: *const c_void,
    len: usize,
    offset: usize,
) -> AmrqStatus {
    // SAFETY: the caller's guarantee.
    unsafe {
        reply(
            token,
            handler,
            (args, nargs),
            Carried::Long(payload, len, offset),
        )
    }
}

/// Runs the handlers of the messages that have arrived; how many ran goes to `*took`
/// (if not null).
///
/// # Safety
/// `am` came from `amrq_init`; `took` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_poll(am: *const Amrq, took: *mut usize) -> AmrqStatus {
    let body = |j: &Amrq| {
        put_out(took, j.am().poll()?);
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Polls until `done(arg)` returns non-zero, spinning a bounded time between empty
/// polls, then sleeping; fails if a rank of the job fails meanwhile.
///
/// # Safety
/// `am` came from `amrq_init`; `done` may be called with `arg` many times.
#[no_mangle]
pub unsafe extern "C" fn amrq_wait_until(
    am: *const Amrq,
    done: unsafe extern "C" fn(arg: *mut c_void) -> c_int,
    arg: *mut c_void,
) -> AmrqStatus {
    let body = |j: &Amrq| {
        // SAFETY: the caller's guarantee: `done` may be called with `arg`.
        Ok(j.am().wait_until(|_| unsafe { done(arg) } != 0)?)
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// How `amrq_wait_u64` compares the word with its value (passed as an int).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmrqCmp {
    /// Equal.
    Eq = 0,
    /// Not equal.
    Ne = 1,
    /// Greater.
    Gt = 2,
    /// Greater or equal.
    Ge = 3,
    /// Less.
    Lt = 4,
    /// Less or equal.
    Le = 5,
}

/// Polls until the word at `ivar` compares with `value` as `cmp` (an `amrq_cmp`) says
/// (OpenSHMEM's `wait_until`), as `amrq_wait_until` does; the word is read between
/// polls, in the library, where a callback would be a call into C on each one. The
/// word is one this rank's handlers write.
///
/// # Safety
/// `am` came from `amrq_init`; `ivar` points to a readable, 8-aligned word for the
/// whole wait.
#[no_mangle]
pub unsafe extern "C" fn amrq_wait_u64(
    am: *const Amrq,
    ivar: *const u64,
    cmp: c_int,
    value: u64,
) -> AmrqStatus {
    let body = move |j: &Amrq| {
        if ivar.is_null() {
            return Err(Failure::argument("a null word to wait on"));
        }
        // SAFETY: the caller's guarantee: `ivar` (not null) stays readable; volatile,
        // as this rank's C handlers write the word.
        let word = || unsafe { ivar.read_volatile() };
        // One loop per comparison, each with its test inline.
        match cmp {
            0 => wait_word(j, word, |w| w == value),
            1 => wait_word(j, word, |w| w != value),
            2 => wait_word(j, word, |w| w > value),
            3 => wait_word(j, word, |w| w >= value),
            4 => wait_word(j, word, |w| w < value),
            5 => wait_word(j, word, |w| w <= value),
            _ => Err(Failure::argument(format!("no comparison {cmp}"))),
        }
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// [`amrq_wait_u64`]'s loop: polls until `holds(word())`.
fn wait_word(j: &Amrq, word: impl Fn() -> u64, holds: impl Fn(u64) -> bool) -> Result<(), Failure> {
    Ok(j.am().wait_until(|_| holds(word()))?)
}

/// Waits until every rank has called it (serving requests meanwhile).
///
/// # Safety
/// `am` came from `amrq_init`.
#[no_mangle]
pub unsafe extern "C" fn amrq_barrier(am: *const Amrq) -> AmrqStatus {
    let body = |j: &Amrq| Ok(j.am().barrier()?);
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Enters the split-phase barrier without waiting.
///
/// # Safety
/// `am` came from `amrq_init`.
#[no_mangle]
pub unsafe extern "C" fn amrq_barrier_notify(am: *const Amrq) -> AmrqStatus {
    let body = |j: &Amrq| Ok(j.am().barrier_notify()?);
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Whether every rank has entered the barrier (`*done` 1, the barrier over) or not yet
/// (0); polls once.
///
/// # Safety
/// `am` came from `amrq_init`; `done` is writable.
#[no_mangle]
pub unsafe extern "C" fn amrq_barrier_try(am: *const Amrq, done: *mut c_int) -> AmrqStatus {
    let body = |j: &Amrq| {
        put_out(done, c_int::from(j.am().barrier_try()?));
        Ok(())
    };
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}

/// Waits for the barrier `amrq_barrier_notify` entered.
///
/// # Safety
/// `am` came from `amrq_init`.
#[no_mangle]
pub unsafe extern "C" fn amrq_barrier_wait(am: *const Amrq) -> AmrqStatus {
    let body = |j: &Amrq| Ok(j.am().barrier_wait()?);
    // SAFETY: the caller's guarantee.
    unsafe { on_job(am, body) }
}
