//! Typed request handlers: a closure that takes its args as a typed value ([`Args`])
//! rather than a [`Msg`](super::Msg), and a handle that sends exactly that type.

use super::args::Args;
use super::error::Stop;
use super::handlers::{Captures, Mark};
use super::{Am, AmError, HandlerTable, ReqCtx};
use crate::conduit::{Conduit, Rank};
use crate::rq::QueueId;
use std::marker::PhantomData;

/// A typed request handler of a table: [`Am::send`] sends it args of type `A`, checked
/// when the program compiles.
///
/// ```
/// use amrq::am::{Handler, HandlerTable};
/// let mut t: HandlerTable<()> = HandlerTable::new();
/// let add: Handler<(u64, f64)> = t.handler("add", |_s, _ctx, (_n, _x): (u64, f64)| Ok(()));
/// let again = add; // a copy names the same handler
/// assert_eq!(again.id(), add.id());
/// ```
pub struct Handler<A> {
    pub(super) tag: u16,
    args: PhantomData<fn(A)>,
}

impl<A> Handler<A> {
    /// The handler's id: the tag its messages carry (the same on every rank).
    ///
    /// ```
    /// let mut t: amrq::am::HandlerTable<()> = amrq::am::HandlerTable::new();
    /// let h = t.handler("h", |_s, _ctx, _n: u64| Ok(()));
    /// assert_eq!(t.len(), 1);
    /// # let _ = h.id();
    /// ```
    pub fn id(self) -> u16 {
        self.tag
    }
}

impl<A> Clone for Handler<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Handler<A> {}
impl<A> PartialEq for Handler<A> {
    fn eq(&self, other: &Self) -> bool {
        self.tag == other.tag
    }
}
impl<A> Eq for Handler<A> {}
impl<A> std::fmt::Debug for Handler<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Handler({}: {})", self.tag, std::any::type_name::<A>())
    }
}

/// The [`RawRequest`](super::handlers::RawRequest) of typed handler `F`: decodes the
/// args (a bad word is the sender's fault) and runs it.
///
/// # Safety
/// `tag`'s captures are an `F`'s.
#[inline(always)]
unsafe fn call_typed<'a, S, C: Conduit, A: Args, F>(
    am: &'a Am<S, C>,
    tag: u16,
    source: Rank,
    args: &'a [u64],
    _payload: *const u8,
    _len: usize,
) -> Result<(), Stop>
where
    F: for<'b> Fn(&'b S, ReqCtx<'b, S, C>, A) -> Result<(), AmError> + 'static,
{
    // SAFETY: the caller's contract (`HandlerTable::handler`).
    let f: &F = unsafe { Captures::handler(&am.table, tag) };
    let a = match A::from_words(args) {
        Ok(a) => a,
        Err(e) => return Err(Stop::of_request(e.of(source, args.len()), source, tag)),
    };
    f(&am.state, ReqCtx { am, source }, a).map_err(|e| Stop::of_request(e, source, tag))
}

impl<S, C: Conduit> HandlerTable<S, C> {
    /// Registers a typed request handler: a closure (or function) that gets the state,
    /// a context to reply through, and its args decoded as an `A` ([`Args`]: a word, a
    /// tuple of up to eight, a plain-data struct). Words that do not decode as an `A`
    /// are the sender's fault: the request fails, as for a missing arg. Sent with
    /// [`Am::send`].
    ///
    /// # Panics
    /// If the table already holds 65535 handlers.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let scale = 10.0; // captured
    ///     let add = t.handler("add", move |s: &Cell<f64>, _ctx, (n, x): (u32, f64)| {
    ///         s.set(s.get() + f64::from(n) * x * scale);
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0.0))?;
    ///     am.send(0, add, (2, 0.5))?; // both ranks add 10 at rank 0
    ///     if am.rank() == 0 {
    ///         am.wait_until(|s| s.get() == 20.0)?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    ///
    /// Sending args of another type does not compile:
    ///
    /// ```compile_fail
    /// # use amrq::prelude::*;
    /// # amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    /// let mut t = HandlerTable::<()>::new();
    /// let add = t.handler("add", |_s, _ctx, (_n, _x): (u32, f64)| Ok(()));
    /// let am = setup.start(t, ())?;
    /// am.send(0, add, (2u32, "half"))?; // error: expected `(u32, f64)`
    /// # Ok(()) }).unwrap();
    /// ```
    pub fn handler<A: Args, F>(
        &mut self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        f: F,
    ) -> Handler<A>
    where
        F: for<'a> Fn(&'a S, ReqCtx<'a, S, C>, A) -> Result<(), AmError> + 'static,
    {
        const { assert!(A::WORDS <= crate::conduit::ring::MAX_ARGS) };
        Handler {
            // SAFETY: `call_typed::<.., F>` reads its captures as an `F`.
            tag: unsafe { self.add_request(name, f, Mark::Typed, call_typed::<S, C, A, F>) },
            args: PhantomData,
        }
    }
}

impl<S, C: Conduit> Am<S, C> {
    /// Sends typed request handler `handler` to `dest` with `args` (a Short request).
    /// Waits for room as [`Am::request`] does.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let set = t.handler("set", |s: &Cell<(i32, bool)>, _ctx, v: (i32, bool)| { s.set(v); Ok(()) });
    ///     let am = setup.start(t, Cell::new((0, false)))?;
    ///     am.send(0, set, (-7, true))?;
    ///     Ok(am.wait_until(|s| s.get() == (-7, true))?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn send<A: Args>(&self, dest: Rank, handler: Handler<A>, args: A) -> Result<(), AmError> {
        let mut words = [0u64; crate::conduit::ring::MAX_ARGS];
        let n = args.to_words(&mut words);
        self.send_short(dest, QueueId::AM_REQUEST, handler.tag, &words[..n])
    }
}
