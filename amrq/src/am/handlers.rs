//! The handler table: names, kinds and the calls of the handlers, indexed by a 16-bit id
//! that is the same on every rank because every rank registers in the same order. Each
//! call is made for its handler's type, so that a poll passes the message's words in
//! registers and gets the result back in one (callgrind: 10 instructions fewer per
//! one-word AM, 18 per self round trip, than a function pointer called with a `Msg` in
//! memory and an `AmError` result written back).

use super::error::Stop;
use super::{Am, AmError, Msg, ReqCtx};
use crate::conduit::mem::MemConduit;
use crate::conduit::{Conduit, Rank};

/// A request handler: runs at the destination; may reply once through its [`ReqCtx`].
///
/// ```
/// use amrq::am::{HandlerTable, RequestFn};
/// use amrq::conduit::mem::MemConduit;
/// // A named function works as well as a closure.
/// fn echo(_s: &(), _ctx: amrq::am::ReqCtx<'_, (), MemConduit>, m: amrq::am::Msg<'_>) -> Result<(), amrq::am::AmError> {
///     m.arg(0).map(drop)
/// }
/// let f: RequestFn<(), MemConduit> = echo;
/// let mut t = HandlerTable::new();
/// t.request("echo", f);
/// ```
pub type RequestFn<S, C> = for<'a> fn(&'a S, ReqCtx<'a, S, C>, Msg<'a>) -> Result<(), AmError>;
/// A reply handler: runs at the requester; cannot send.
///
/// ```
/// use amrq::am::{HandlerTable, ReplyFn};
/// fn done(count: &std::cell::Cell<u32>, _m: amrq::am::Msg<'_>) -> Result<(), amrq::am::AmError> {
///     count.set(count.get() + 1);
///     Ok(())
/// }
/// let f: ReplyFn<std::cell::Cell<u32>> = done;
/// let mut t: HandlerTable<std::cell::Cell<u32>> = HandlerTable::new();
/// t.reply("done", f);
/// ```
pub type ReplyFn<S> = for<'a> fn(&'a S, Msg<'a>) -> Result<(), AmError>;

/// Tags below this carry the runtime's own messages (the barrier).
/// Tags below are the runtime's: the barrier, and the one-sided operations' frames.
pub(crate) const FIRST_USER_TAG: u16 = 16;

/// Names a request handler of a table.
///
/// ```
/// use amrq::am::{HandlerTable, RequestHandler};
/// let mut t: HandlerTable<()> = HandlerTable::new();
/// let work: RequestHandler = t.request("work", |_s, _ctx, _m| Ok(()));
/// // Copy it into the state, or pass it along: it is just the handler's tag.
/// let again = work;
/// assert_eq!(again, work);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHandler(pub(crate) u16);

/// Names a reply handler of a table.
///
/// ```
/// use amrq::am::{HandlerTable, ReplyHandler};
/// let mut t: HandlerTable<()> = HandlerTable::new();
/// let done: ReplyHandler = t.reply("done", |_s, _m| Ok(()));
/// // Request handlers reply with it: it goes in the state they share.
/// struct S { done: ReplyHandler }
/// let s = S { done };
/// assert_eq!(s.done.id(), done.id());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplyHandler(pub(crate) u16);

impl RequestHandler {
    /// The handler's id: the tag its messages carry (the same on every rank).
    ///
    /// ```
    /// use amrq::am::HandlerTable;
    /// let mut t: HandlerTable<()> = HandlerTable::new();
    /// let a = t.request("a", |_s, _ctx, _m| Ok(()));
    /// let b = t.request("b", |_s, _ctx, _m| Ok(()));
    /// assert_eq!(b.id(), a.id() + 1); // registration order: the same on every rank
    /// ```
    pub fn id(self) -> u16 {
        self.0
    }
}

impl ReplyHandler {
    /// The handler's id: the tag its messages carry (the same on every rank).
    ///
    /// ```
    /// use amrq::am::HandlerTable;
    /// let mut t: HandlerTable<()> = HandlerTable::new();
    /// let q = t.request("q", |_s, _ctx, _m| Ok(()));
    /// let p = t.reply("p", |_s, _m| Ok(()));
    /// assert_ne!(p.id(), q.id()); // one tag space for both kinds
    /// ```
    pub fn id(self) -> u16 {
        self.0
    }
}

/// What kind of handler a name was registered as, for the fingerprint: ranks that
/// register one name as different kinds (a call here, a plain request there) have
/// different tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    Request = b'Q' as isize,
    Reply = b'P' as isize,
    Typed = b'T' as isize,
    Call = b'C' as isize,
}

/// What kind of handler a tag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Request,
    Reply,
}

/// The handlers of a job. Register the same handlers in the same order on every rank
/// (the natural result of running the same code); [`Am::new`](super::Am::new) checks it.
///
/// ```
/// use amrq::am::HandlerTable;
/// struct S;
/// let mut t: HandlerTable<S> = HandlerTable::new();
/// let done = t.reply("done", |_s, _m| Ok(()));
/// let work = t.request("work", |_s, _ctx, _m| Ok(()));
/// assert_eq!(t.len(), 2);
/// assert_ne!(HandlerTable::<S>::new().fingerprint(), t.fingerprint());
/// # let _ = (done, work);
/// ```
pub struct HandlerTable<S, C: Conduit = MemConduit> {
    names: Vec<std::borrow::Cow<'static, str>>,
    /// Each handler's kind as the fingerprint hashes it ([`Mark`]).
    marks: Vec<Mark>,
    /// Request handlers indexed by tag (the runtime's tags, reply handlers' and unused
    /// tags are `None`): one entry per possible tag, so dispatch is one load and no
    /// bounds check, whatever a peer sent. (The 512 KiB are allocated zeroed: only the
    /// pages of registered tags are ever touched.)
    requests: Box<[Option<RawRequest<S, C>>; TAGS]>,
    /// Reply handlers indexed by tag, likewise.
    replies: Box<[Option<RawReply<S, C>>; TAGS]>,
    /// What each handler captures, by tag from [`FIRST_USER_TAG`] (read only for
    /// handlers that capture something).
    captures: Vec<Captures>,
}

/// Tags a frame header can carry.
const TAGS: usize = 1 << u16::BITS;

/// How a poll calls a request handler: the message's words in registers (no [`Msg`] in
/// memory) and its error boxed, so that the result comes back in one register. One
/// instance per handler type, with the handler's body inlined in it; `tag` finds what
/// the handler captures, if anything.
/// The payload goes as its address and length, never as a `&[u8]`: a Long one lies in
/// the segment, where peers may write ([`Msg::of_words`] tells it apart).
pub(crate) type RawRequest<S, C> =
    for<'a> unsafe fn(&'a Am<S, C>, u16, Rank, &'a [u64], *const u8, usize) -> Result<(), Stop>;
/// How a poll calls a reply handler (see [`RawRequest`]).
pub(crate) type RawReply<S, C> = RawRequest<S, C>;

/// What a handler captures, owned by the table: a closure that captures nothing (the
/// usual handler) is zero-sized, and its call reads nothing here; any other is boxed
/// once, at registration, and its call reads it through the box's pointer. Handlers run
/// by another thread would need `Send + Sync` on the registered closure and on this
/// box's `dyn Any`, and on the state: bounds, not a new layout.
pub(crate) struct Captures(Box<dyn std::any::Any>);

impl Captures {
    fn of<F: 'static>(f: F) -> Self {
        Self(Box::new(f)) // no allocation for a zero-sized `F`
    }

    /// The handler of `tag` in `table`, which is of type `F`.
    ///
    /// # Safety
    /// `tag`'s entry in `table` was made by `Captures::of::<F>`.
    #[inline(always)]
    pub(super) unsafe fn handler<F: 'static, S, C: Conduit>(
        table: &HandlerTable<S, C>,
        tag: u16,
    ) -> &F {
        if size_of::<F>() == 0 {
            // SAFETY: a zero-sized `F` has no bytes to read: any aligned, non-null
            // pointer is a valid `&F` (no load on the hot path).
            return unsafe { std::ptr::NonNull::<F>::dangling().as_ref() };
        }
        let boxed: &dyn std::any::Any = &*table.captures[usize::from(tag - FIRST_USER_TAG)].0;
        debug_assert!(boxed.is::<F>(), "a handler's captures read as another type");
        // SAFETY: the caller says the box holds an `F` (made by `of`), which the
        // table owns as long as it is borrowed.
        unsafe { &*std::ptr::from_ref(boxed).cast::<F>() }
    }
}

/// The [`RawRequest`] of handler type `F`.
///
/// # Safety
/// As [`Msg::of_words`], for `payload` and `len`.
#[inline(always)]
unsafe fn call_request<'a, S, C: Conduit, F>(
    am: &'a Am<S, C>,
    tag: u16,
    source: Rank,
    args: &'a [u64],
    payload: *const u8,
    len: usize,
) -> Result<(), Stop>
where
    F: for<'b> Fn(&'b S, ReqCtx<'b, S, C>, Msg<'b>) -> Result<(), AmError> + 'static,
{
    // SAFETY: the table holds `call_request::<F>` for `tag` only if `tag`'s captures
    // are those of an `F` (`HandlerTable::request`).
    let f: &F = unsafe { Captures::handler(&am.table, tag) };
    // The request's sender and id go with an error, for the failure notice: kept in
    // registers across the handler (callgrind: 4 instructions per AM round trip, where
    // the handler calls out; storing them before the call cost 2 per message of a
    // stream).
    f(
        &am.state,
        ReqCtx { am, source },
        // SAFETY: the caller's contract.
        unsafe { Msg::of_words(source, args, payload, len) },
    )
    .map_err(|e| Stop::of_request(e, source, tag))
}

/// The [`RawReply`] of handler type `F`.
///
/// # Safety
/// As [`Msg::of_words`], for `payload` and `len`.
#[inline(always)]
unsafe fn call_reply<'a, S, C: Conduit, F>(
    am: &'a Am<S, C>,
    tag: u16,
    source: Rank,
    args: &'a [u64],
    payload: *const u8,
    len: usize,
) -> Result<(), Stop>
where
    F: for<'b> Fn(&'b S, Msg<'b>) -> Result<(), AmError> + 'static,
{
    // SAFETY: as in `call_request` (`HandlerTable::reply`).
    let f: &F = unsafe { Captures::handler(&am.table, tag) };
    // SAFETY: the caller's contract.
    let msg = unsafe { Msg::of_words(source, args, payload, len) };
    f(&am.state, msg).map_err(Stop::from)
}

/// A table of `TAGS` entries, all `None`.
fn empty_table<T: Copy>() -> Box<[Option<T>; TAGS]> {
    match vec![None; TAGS].into_boxed_slice().try_into() {
        Ok(table) => table,
        Err(_) => unreachable!("a vector of TAGS entries"),
    }
}

impl<S, C: Conduit> Default for HandlerTable<S, C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S, C: Conduit> std::fmt::Debug for HandlerTable<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerTable")
            .field("names", &self.names)
            .finish()
    }
}

impl<S, C: Conduit> HandlerTable<S, C> {
    /// An empty table.
    ///
    /// ```
    /// use amrq::am::HandlerTable;
    /// let t: HandlerTable<()> = HandlerTable::new();
    /// assert!(t.is_empty());
    /// ```
    pub fn new() -> Self {
        let mut replies = empty_table();
        // Calls' answers land through the table, as fast as a user's reply.
        replies[usize::from(super::call::TAG_CALL_DONE)] = Some(super::call::land_answer as _);
        Self {
            names: Vec::new(),
            marks: Vec::new(),
            requests: empty_table(),
            replies,
            captures: Vec::new(),
        }
    }

    /// Handlers registered.
    ///
    /// ```
    /// use amrq::am::HandlerTable;
    /// let mut t: HandlerTable<()> = HandlerTable::new();
    /// t.reply("done", |_s, _m| Ok(()));
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if no handler is registered.
    ///
    /// ```
    /// use amrq::am::HandlerTable;
    /// let mut t: HandlerTable<()> = HandlerTable::new();
    /// assert!(t.is_empty());
    /// t.request("work", |_s, _ctx, _m| Ok(()));
    /// assert!(!t.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Names the next tag `name` and gives it `f`'s captures; its call is the
    /// caller's to set.
    fn add<F: 'static>(
        &mut self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        f: F,
        mark: Mark,
    ) -> u16 {
        let tag = self.names.len() + usize::from(FIRST_USER_TAG);
        let tag = u16::try_from(tag).expect("a handler table holds at most 65535 handlers");
        self.names.push(name.into());
        self.marks.push(mark);
        self.captures.push(Captures::of(f));
        tag
    }

    /// Registers a request handler made of `f` and `raw`, the call made for it.
    ///
    /// # Safety
    /// `raw` reads its captures as an `F` ([`Captures::handler`]).
    pub(super) unsafe fn add_request<F: 'static>(
        &mut self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        f: F,
        mark: Mark,
        raw: RawRequest<S, C>,
    ) -> u16 {
        let tag = self.add(name, f, mark);
        self.requests[usize::from(tag)] = Some(raw);
        tag
    }

    /// Registers a request handler: a closure, which may capture what it needs (moved
    /// in; the table owns it for the job), or a function pointer ([`RequestFn`]). A
    /// poll calls it with the message's words in registers, through a copy of this
    /// call made for `F`, into which the closure's body is inlined; a closure that
    /// captures something is read through one pointer.
    ///
    /// # Panics
    /// If the table already holds 65535 handlers.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // A request handler gets the state, a context to reply through, and the message.
    ///     let double = t.request("double", |s: &Cell<u64>, _ctx, m| { s.set(m.arg(0)? * 2); Ok(()) });
    ///     // What a closure captures is moved into the table.
    ///     let (k, table) = (100u64, vec![1u64, 2, 3]);
    ///     let add_k = t.request("add_k", move |s: &Cell<u64>, _ctx, m| {
    ///         s.set(m.arg(0)? + k + table.iter().sum::<u64>());
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     am.request(0, double, &[21])?;
    ///     am.wait_until(|s| s.get() == 42)?;
    ///     am.request(0, add_k, &[1])?;
    ///     Ok(am.wait_until(|s| s.get() == 107)?)
    /// })
    /// .unwrap();
    /// ```
    pub fn request<F>(
        &mut self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        f: F,
    ) -> RequestHandler
    where
        F: for<'a> Fn(&'a S, ReqCtx<'a, S, C>, Msg<'a>) -> Result<(), AmError> + 'static,
    {
        let tag = self.add(name, f, Mark::Request);
        self.requests[usize::from(tag)] = Some(call_request::<S, C, F>);
        RequestHandler(tag)
    }

    /// Registers a reply handler: what [`HandlerTable::request`] takes, without the
    /// context to reply through.
    ///
    /// # Panics
    /// If the table already holds 65535 handlers.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// struct S { answer: ReplyHandler, got: Cell<u64> }
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // A reply handler gets the state and the message; it cannot send.
    ///     let answer = t.reply("answer", |s: &S, m| { s.got.set(m.arg(0)?); Ok(()) });
    ///     let ask = t.request("ask", |s: &S, ctx, _m| ctx.reply(s.answer, &[42]));
    ///     let am = setup.start(t, S { answer, got: Cell::new(0) })?;
    ///     am.request(0, ask, &[])?;
    ///     Ok(am.wait_until(|s| s.got.get() == 42)?)
    /// })
    /// .unwrap();
    /// ```
    pub fn reply<F>(
        &mut self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        f: F,
    ) -> ReplyHandler
    where
        F: for<'a> Fn(&'a S, Msg<'a>) -> Result<(), AmError> + 'static,
    {
        let tag = self.add(name, f, Mark::Reply);
        self.replies[usize::from(tag)] = Some(call_reply::<S, C, F>);
        ReplyHandler(tag)
    }

    /// A hash of the table's shape (kinds and names in order), compared across ranks.
    ///
    /// ```
    /// use amrq::am::HandlerTable;
    /// let mut a: HandlerTable<()> = HandlerTable::new();
    /// let mut b: HandlerTable<()> = HandlerTable::new();
    /// a.request("x", |_s, _ctx, _m| Ok(()));
    /// b.reply("x", |_s, _m| Ok(())); // same name, other kind: another shape
    /// assert_ne!(a.fingerprint(), b.fingerprint());
    /// ```
    pub fn fingerprint(&self) -> u64 {
        // FNV-1a: stable across builds and processes, unlike std's RandomState.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |b: u8| {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        };
        for (name, &mark) in self.names.iter().zip(&self.marks) {
            eat(mark as u8);
            name.bytes().for_each(&mut eat);
            eat(0);
        }
        h
    }

    /// The kind of handler `tag` names, if any.
    pub(crate) fn kind(&self, tag: u16) -> Option<Kind> {
        if self.request_fn(tag).is_some() {
            Some(Kind::Request)
        } else {
            self.reply_fn(tag).map(|_| Kind::Reply)
        }
    }

    /// The request handler of `tag`, if it names one.
    #[inline(always)]
    pub(crate) fn request_fn(&self, tag: u16) -> Option<RawRequest<S, C>> {
        self.requests[usize::from(tag)]
    }

    /// The reply handler of `tag`, if it names one.
    #[inline(always)]
    pub(crate) fn reply_fn(&self, tag: u16) -> Option<RawReply<S, C>> {
        self.replies[usize::from(tag)]
    }

    pub(crate) fn name(&self, tag: u16) -> &str {
        tag.checked_sub(FIRST_USER_TAG)
            .and_then(|i| self.names.get(usize::from(i)))
            .map_or("?", |n| n)
    }
}
