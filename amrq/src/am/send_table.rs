//! A handler table for a rank whose handlers a progress engine may run on its own thread:
//! the same registrations as [`HandlerTable`]'s, each bounded `Send`, so that a handler
//! that captures something one thread owns (an `Rc`, a `MutexGuard`) does not compile.

use super::{
    AmError, Args, Call, Handler, HandlerTable, Msg, ReplyHandler, ReqCtx, RequestHandler,
};
use crate::conduit::mem::MemConduit;
use crate::conduit::Conduit;
use std::borrow::Cow;

/// The handlers of a job whose handlers a progress engine runs while the program
/// computes (the job layer's `start_engine`): a [`HandlerTable`] whose handlers, and
/// everything they capture, are `Send`. The state
/// must be `Send` too; it need not be `Sync` (the engine and the program never touch it
/// at once), so `Cell`s work as in any handler.
///
/// ```
/// use amrq::am::SendHandlerTable;
/// use std::cell::Cell;
/// let mut t: SendHandlerTable<Cell<u64>> = SendHandlerTable::new();
/// let step = 3; // captured: `Send`
/// let add = t.request("add", move |n, _ctx, m| { n.set(n.get() + m.arg(0)? * step); Ok(()) });
/// assert_eq!(t.len(), 1);
/// # let _ = add;
/// ```
///
/// A handler that captures what only one thread may use does not compile:
///
/// ```compile_fail
/// use amrq::am::SendHandlerTable;
/// let mut t: SendHandlerTable<()> = SendHandlerTable::new();
/// let shared = std::rc::Rc::new(std::cell::Cell::new(0u64));
/// t.request("count", move |_s, _ctx, _m| { shared.set(shared.get() + 1); Ok(()) }); // error: `Rc` is not `Send`
/// ```
pub struct SendHandlerTable<S, C: Conduit = MemConduit>(HandlerTable<S, C>);

impl<S, C: Conduit> Default for SendHandlerTable<S, C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S, C: Conduit> std::fmt::Debug for SendHandlerTable<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<S, C: Conduit> SendHandlerTable<S, C> {
    /// An empty table.
    ///
    /// ```
    /// let t: amrq::am::SendHandlerTable<()> = amrq::am::SendHandlerTable::new();
    /// assert!(t.is_empty());
    /// ```
    pub fn new() -> Self {
        Self(HandlerTable::new())
    }

    /// Handlers registered.
    ///
    /// ```
    /// let mut t: amrq::am::SendHandlerTable<()> = amrq::am::SendHandlerTable::new();
    /// t.reply("done", |_s, _m| Ok(()));
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if no handler is registered.
    ///
    /// ```
    /// assert!(amrq::am::SendHandlerTable::<()>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// [`HandlerTable::request`], for a handler that is `Send`.
    ///
    /// ```
    /// let mut t: amrq::am::SendHandlerTable<std::cell::Cell<u64>> = Default::default();
    /// let hit = t.request("hit", |n, _ctx, _m| { n.set(n.get() + 1); Ok(()) });
    /// # let _ = hit;
    /// ```
    pub fn request<F>(&mut self, name: impl Into<Cow<'static, str>>, f: F) -> RequestHandler
    where
        F: for<'a> Fn(&'a S, ReqCtx<'a, S, C>, Msg<'a>) -> Result<(), AmError> + Send + 'static,
    {
        self.0.request(name, f)
    }

    /// [`HandlerTable::reply`], for a handler that is `Send`.
    ///
    /// ```
    /// let mut t: amrq::am::SendHandlerTable<std::cell::Cell<u64>> = Default::default();
    /// let got = t.reply("got", |n, m| { n.set(m.arg(0)?); Ok(()) });
    /// # let _ = got;
    /// ```
    pub fn reply<F>(&mut self, name: impl Into<Cow<'static, str>>, f: F) -> ReplyHandler
    where
        F: for<'a> Fn(&'a S, Msg<'a>) -> Result<(), AmError> + Send + 'static,
    {
        self.0.reply(name, f)
    }

    /// [`HandlerTable::handler`], for a handler that is `Send`.
    ///
    /// ```
    /// let mut t: amrq::am::SendHandlerTable<std::cell::Cell<f64>> = Default::default();
    /// let add = t.handler("add", |s, _ctx, x: f64| { s.set(s.get() + x); Ok(()) });
    /// # let _ = add;
    /// ```
    pub fn handler<A: Args, F>(&mut self, name: impl Into<Cow<'static, str>>, f: F) -> Handler<A>
    where
        F: for<'a> Fn(&'a S, ReqCtx<'a, S, C>, A) -> Result<(), AmError> + Send + 'static,
    {
        self.0.handler(name, f)
    }

    /// [`HandlerTable::call`], for a handler that is `Send`.
    ///
    /// ```
    /// let mut t: amrq::am::SendHandlerTable<()> = Default::default();
    /// let square = t.call("square", |_s, _ctx, x: u64| Ok(x * x));
    /// # let _ = square;
    /// ```
    pub fn call<A: Args, R: Args, F>(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        f: F,
    ) -> Call<A, R>
    where
        F: for<'a> Fn(&'a S, ReqCtx<'a, S, C>, A) -> Result<R, AmError> + Send + 'static,
    {
        self.0.call(name, f)
    }

    /// The table, every handler of which is `Send`.
    pub(crate) fn into_table(self) -> HandlerTable<S, C> {
        self.0
    }
}
