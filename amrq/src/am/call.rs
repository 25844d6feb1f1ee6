//! Calls: a handler run at the target whose answer comes back to the caller (Split-C's
//! atomic functions; an RPC on Active Messages). A call is a Short request to the call
//! handler's own tag whose first word names the call in the caller's table
//! ([`Pending`]); the handler runs as any request handler does, atomically with respect
//! to the target's other handlers, and its answer goes back as a runtime reply, or its
//! error as a failure notice naming the call.
//!
//! | request (args) | at the target | reply (args) |
//! |---|---|---|
//! | the handler's tag (call, args…) | decodes the args, runs the handler | `CALL_DONE` (call, answer…), or `FAILED` naming the call |

use super::args::{after_first, Args};
use super::error::Stop;
use super::handlers::{Captures, Mark, FIRST_USER_TAG};
use super::pending::{CallId, Pending};
use super::{Am, AmError, HandlerTable, ReqCtx};
use crate::conduit::ring::MAX_ARGS;
use crate::conduit::{Conduit, Rank};
use crate::rq::QueueId;
use std::marker::PhantomData;

pub(super) const TAG_CALL_DONE: u16 = 11;
const _: () = assert!(TAG_CALL_DONE < FIRST_USER_TAG);

/// Words a call's args, and its answer, may take: one of a Short frame's eight names
/// the call.
///
/// ```
/// assert_eq!(amrq::am::CALL_ARGS, 7);
/// ```
pub const CALL_ARGS: usize = MAX_ARGS - 1;

/// A call handler of a table: [`Am::call`] runs it at a target with args of type `A`
/// and returns a [`Pending`] answer of type `R`.
///
/// ```
/// use amrq::am::{Call, HandlerTable};
/// let mut t: HandlerTable<()> = HandlerTable::new();
/// let square: Call<u64, u64> = t.call("square", |_s, _ctx, x: u64| Ok(x * x));
/// let again = square;
/// assert_eq!(again.id(), square.id());
/// ```
pub struct Call<A, R> {
    tag: u16,
    types: PhantomData<fn(A) -> R>,
}

impl<A, R> Call<A, R> {
    /// The handler's id: the tag its requests carry (the same on every rank).
    ///
    /// ```
    /// let mut t: amrq::am::HandlerTable<()> = amrq::am::HandlerTable::new();
    /// let a = t.call("a", |_s, _ctx, (): ()| Ok(1u8));
    /// let b = t.call("b", |_s, _ctx, (): ()| Ok(2u8));
    /// assert_eq!(b.id(), a.id() + 1);
    /// ```
    pub fn id(self) -> u16 {
        self.tag
    }
}

impl<A, R> Clone for Call<A, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, R> Copy for Call<A, R> {}
impl<A, R> PartialEq for Call<A, R> {
    fn eq(&self, other: &Self) -> bool {
        self.tag == other.tag
    }
}
impl<A, R> Eq for Call<A, R> {}
impl<A, R> std::fmt::Debug for Call<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, r) = (std::any::type_name::<A>(), std::any::type_name::<R>());
        write!(f, "Call({}: {a} -> {r})", self.tag)
    }
}

/// The [`RawRequest`](super::handlers::RawRequest) of call handler `F`: runs it on the
/// args after the call's word and answers the caller.
///
/// # Safety
/// `tag`'s captures are an `F`'s.
#[inline(always)]
unsafe fn serve_call<'a, S, C: Conduit, A: Args, R: Args, F>(
    am: &'a Am<S, C>,
    tag: u16,
    source: Rank,
    args: &'a [u64],
    _payload: *const u8,
    _len: usize,
) -> Result<(), Stop>
where
    F: for<'b> Fn(&'b S, ReqCtx<'b, S, C>, A) -> Result<R, AmError> + 'static,
{
    // SAFETY: the caller's contract (`HandlerTable::call`).
    let f: &F = unsafe { Captures::handler(&am.table, tag) };
    let Some(&call) = args.first() else {
        // Not a call: nobody to answer, so a request failure.
        let e = AmError::MissingArg {
            source_rank: source,
            index: 0,
            nargs: 0,
        };
        return Err(Stop::of_request(e, source, tag));
    };
    let answered = after_first::<A>(args)
        .map_err(|e| e.of(source, args.len()))
        .and_then(|a| f(&am.state, ReqCtx { am, source }, a));
    match answered {
        Ok(r) => {
            let mut words = [0u64; MAX_ARGS];
            words[0] = call;
            let n = r.to_words(&mut words[1..]);
            am.send_short(source, QueueId::AM_REPLY, TAG_CALL_DONE, &words[..1 + n])
                .map_err(|e| Stop::of_request(e, source, tag))
        }
        Err(e) => am.call_failed(source, tag, call, e),
    }
}

/// How a call's answer lands at the caller (the table's entry for `CALL_DONE`).
///
/// # Safety
/// None beyond the entry's type: it reads only `args`.
pub(super) unsafe fn land_answer<'a, S, C: Conduit>(
    am: &'a Am<S, C>,
    _tag: u16,
    source: Rank,
    args: &'a [u64],
    _payload: *const u8,
    _len: usize,
) -> Result<(), Stop> {
    use super::pending::Answered;
    let answered = match args.first() {
        Some(word) if word & super::thread_calls::THREAD_CALL != 0 => {
            match am.thread_calls.answer(source, args) {
                true => Answered::Here,
                false => Answered::No,
            }
        }
        _ => am.calls.with(|c| c.answer(source, args)),
    };
    match answered {
        Answered::Here => Ok(()),
        Answered::Elsewhere => {
            am.calls.land_taken();
            Ok(())
        }
        Answered::No => Err(no_call(source)),
    }
}

/// An answer for no call in flight: the sender's fault.
#[cold]
#[inline(never)]
fn no_call(source: Rank) -> Stop {
    Stop::from(AmError::BadRuntimeMessage {
        source_rank: source,
        what: "an answer for no call in flight to it",
    })
}

impl<S, C: Conduit> HandlerTable<S, C> {
    /// Registers a call handler: a closure (or function) that gets the state, a context
    /// (the caller's rank, this rank's segment) and its args decoded as an `A`, and
    /// returns the answer, an `R`, or an error. Both fit [`CALL_ARGS`] words. Its
    /// caller gets the answer from the [`Pending`] of [`Am::call`], or the error as
    /// [`AmError::RequestFailed`] naming this rank, this handler and the reason. The
    /// context may also reply, as a request handler's does: that reply goes to its
    /// reply handler, and the answer still comes.
    ///
    /// # Panics
    /// If the table already holds 65535 handlers.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // Adds to this rank's counter; answers the value before.
    ///     let fetch_add = t.call("fetch_add", |n: &Cell<u64>, _ctx, k: u64| Ok(n.replace(n.get() + k)));
    ///     let divide = t.call("divide", |_s, _ctx, (a, b): (i64, i64)| {
    ///         a.checked_div(b).ok_or_else(|| AmError::from("division by zero"))
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     let before = am.call(0, fetch_add, 5)?.wait()?; // both ranks add 5 at rank 0
    ///     assert!(before == 0 || before == 5);
    ///     assert_eq!(am.call(1, divide, (-9, 3))?.wait()?, -3);
    ///     let Err(AmError::RequestFailed(f)) = am.call(1, divide, (1, 0))?.wait() else {
    ///         unreachable!()
    ///     };
    ///     assert_eq!(f.to_string(), "rank 1 could not run request handler `divide`: the handler returned an error: division by zero");
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    ///
    /// An answer that does not fit does not compile:
    ///
    /// ```compile_fail
    /// let mut t: amrq::am::HandlerTable<()> = amrq::am::HandlerTable::new();
    /// t.call("eight", |_s, _ctx, (): ()| Ok((0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64)));
    /// ```
    pub fn call<A: Args, R: Args, F>(
        &mut self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        f: F,
    ) -> Call<A, R>
    where
        F: for<'a> Fn(&'a S, ReqCtx<'a, S, C>, A) -> Result<R, AmError> + 'static,
    {
        const {
            assert!(
                A::WORDS <= CALL_ARGS && R::WORDS <= CALL_ARGS,
                "a call's args and its answer each fit 7 words (the eighth names the call)"
            )
        };
        Call {
            // SAFETY: `serve_call::<.., F>` reads its captures as an `F`.
            tag: unsafe { self.add_request(name, f, Mark::Call, serve_call::<S, C, A, R, F>) },
            types: PhantomData,
        }
    }
}

impl<S, C: Conduit> Am<S, C> {
    /// Runs call handler `call` at `dest` on `args` and returns its answer, pending:
    /// [`Pending::wait`] blocks for it (running handlers meanwhile), and a `Pending` is
    /// a [`Future`](std::future::Future) a single-threaded executor can await (it
    /// borrows the rank: not `Send`). Any number of calls
    /// may be in flight, to any ranks. Sending waits for room as [`Am::request`] does.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let out = amrq::Config::new().threads(2, |setup| -> amrq::Result<u64> {
    ///     let mut t = HandlerTable::new();
    ///     let square = t.call("square", |_s: &(), _ctx, x: u64| Ok(x * x));
    ///     let am = setup.start(t, ())?;
    ///     // A thousand calls in flight at once, then their answers.
    ///     let peer = 1 - am.rank();
    ///     let pending = (0..1000).map(|x| am.call(peer, square, x)).collect::<Result<Vec<_>, _>>()?;
    ///     let mut sum = 0;
    ///     for p in pending {
    ///         sum += p.wait()?;
    ///     }
    ///     am.barrier()?;
    ///     Ok(sum)
    /// })
    /// .unwrap();
    /// assert_eq!(out, [332_833_500; 2]);
    /// ```
    #[inline(always)]
    pub fn call<A: Args, R: Args>(
        &self,
        dest: Rank,
        call: Call<A, R>,
        args: A,
    ) -> Result<Pending<'_, R, S, C>, AmError> {
        let id = self.calls.with(|c| c.open(dest));
        match self.send_call(id, dest, call, args) {
            Ok(()) => Ok(Pending::new(self, id)),
            Err(e) => {
                self.calls.with(|c| c.close(id));
                Err(e)
            }
        }
    }

    /// Sends call `id`'s request: its word, then the args.
    #[inline(always)]
    fn send_call<A: Args, R: Args>(
        &self,
        id: CallId,
        dest: Rank,
        call: Call<A, R>,
        args: A,
    ) -> Result<(), AmError> {
        let mut words = [0u64; MAX_ARGS];
        words[0] = id.word();
        let n = args.to_words(&mut words[1..]);
        self.send_short(dest, QueueId::AM_REQUEST, call.tag, &words[..1 + n])
    }

    /// [`Am::call`] whose outcome goes to `landing` instead of a [`Pending`]: the
    /// progress engine's job lands it, outside the program's sections.
    pub(crate) fn call_detached<A: Args, R: Args>(
        &self,
        dest: Rank,
        call: Call<A, R>,
        args: A,
        landing: std::sync::Arc<super::Landing>,
    ) -> Result<(), AmError> {
        let id = self.calls.with(|c| c.open_detached(dest, landing));
        self.send_call(id, dest, call, args)
            .inspect_err(|_| self.calls.with(|c| c.close_detached(id)))
    }

    /// Lands an error in every detached call whose target `why` names one for (a
    /// progress engine giving up on calls no answer can come to).
    pub(crate) fn give_up_detached(&self, mut why: impl FnMut(Rank) -> Option<AmError>) {
        self.calls.with(|c| c.give_up_detached(&mut why));
        self.calls.land_taken();
    }

    /// Calls this rank has made whose answers have not been taken: waiting, answered and
    /// not yet waited for, or dropped and not yet answered (with a progress engine,
    /// also its calls whose answers the engine is to land).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let id = t.call("id", |_s: &(), _ctx, x: u32| Ok(x));
    ///     let am = setup.start(t, ())?;
    ///     let p = am.call(0, id, 7)?;
    ///     assert_eq!(am.calls_in_flight(), 1);
    ///     assert_eq!(p.wait()?, 7);
    ///     Ok(assert_eq!(am.calls_in_flight(), 0))
    /// })
    /// .unwrap();
    /// ```
    pub fn calls_in_flight(&self) -> usize {
        self.calls.with(|c| c.in_flight())
    }

    /// A call handler's error (or its args' decoding's): its caller is told, naming
    /// the call, and the fault is recorded, as for any request; `Err` if the error
    /// ends this rank's part in the job instead.
    #[cold]
    #[inline(never)]
    fn call_failed(&self, source: Rank, tag: u16, call: u64, e: AmError) -> Result<(), Stop> {
        let reason = self.request_fault(e)?;
        Ok(self.fail_request(source, tag, call, reason)?)
    }
}
