//! What a handler sees: the message, and for a request, the one reply it may send.

use super::payload::Payload;
use super::{Am, AmError, ReplyHandler};
use crate::conduit::{Conduit, PayloadView, Rank};
use crate::rq::QueueId;
use std::borrow::Cow;
use std::marker::PhantomData;

/// An arriving message, borrowed in place from the queue.
///
/// What a handler may assume about the payload depends on where it lies:
///
/// - **Medium**: in this rank's own queue, where no peer writes it until the handler
///   returns. [`Msg::payload`] lends it in place, at no cost.
/// - **Long**: in this rank's registered segment, at the offset the sender chose. It
///   was complete when the handler started, but any rank may `put` into those bytes or
///   send another Long there meanwhile, so it is never lent as a `&[u8]`:
///   [`Msg::payload`] copies it out, and [`Msg::payload_in_place`] reads it without an
///   allocation (into a buffer of the handler's, or in place under `unsafe` for a
///   protocol that rules such writes out).
///
/// Laid out as C's `amrq_msg_t` (`#[repr(C)]`: the args' address, the payload's, their
/// lengths, the sender, whether the payload is in the segment; see [`Msg::C_LAYOUT`]),
/// so that the C interface hands a handler the message the poll built, not a copy.
///
/// ```
/// # use amrq::am::Msg;
/// fn sum(m: &Msg<'_>) -> u64 { m.args().iter().sum::<u64>() + m.payload_len() as u64 }
/// ```
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Msg<'a> {
    args: *const u64,
    payload: *const u8,
    nargs: usize,
    len: usize,
    source: Rank,
    in_segment: usize,
    borrows: PhantomData<(&'a [u64], PayloadView<'a>)>,
}

/// Where [`Msg`]'s fields lie: what C's `amrq_msg_t` mirrors (asserted where it is
/// defined).
///
/// ```
/// let l = amrq::am::Msg::C_LAYOUT;
/// assert_eq!((l.args, l.payload, l.nargs, l.len, l.source, l.in_segment), (0, 8, 16, 24, 32, 40));
/// assert_eq!(l.size, 48);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgLayout {
    /// Offset of the args' address (`*const u64`).
    pub args: usize,
    /// Offset of the payload's address (`*const u8`).
    pub payload: usize,
    /// Offset of the number of args (`usize`).
    pub nargs: usize,
    /// Offset of the payload's length in bytes (`usize`).
    pub len: usize,
    /// Offset of the sender's rank (`usize`).
    pub source: usize,
    /// Offset of the in-segment mark (`usize`: 1 for a Long payload of at least one
    /// byte, else 0).
    pub in_segment: usize,
    /// Size of the whole.
    pub size: usize,
}

impl<'a> Msg<'a> {
    /// Where the fields lie (see [`MsgLayout`]).
    pub const C_LAYOUT: MsgLayout = MsgLayout {
        args: std::mem::offset_of!(Msg<'static>, args),
        payload: std::mem::offset_of!(Msg<'static>, payload),
        nargs: std::mem::offset_of!(Msg<'static>, nargs),
        len: std::mem::offset_of!(Msg<'static>, len),
        source: std::mem::offset_of!(Msg<'static>, source),
        in_segment: std::mem::offset_of!(Msg<'static>, in_segment),
        size: std::mem::size_of::<Msg<'static>>(),
    };

    /// The message `source` sent, with `args` and `payload`.
    #[inline(always)]
    pub(crate) fn new(source: Rank, args: &'a [u64], payload: PayloadView<'a>) -> Self {
        Self {
            args: args.as_ptr(),
            payload: payload.as_ptr(),
            nargs: args.len(),
            len: payload.len(),
            source,
            // An empty payload is nowhere: never in the segment.
            in_segment: usize::from(payload.is_shared() && !payload.is_empty()),
            borrows: PhantomData,
        }
    }

    /// The message `source` sent, with `args` and the payload of `len` bytes at
    /// `payload`, as a poll hands it to a handler (as words, no frame). A payload that
    /// lies in the frame right after the args (a Medium one, inline in the ring) is
    /// held; any other is treated as shared. What makes that sound is the converse,
    /// which every frame keeps: a shared payload never starts right after its args (a
    /// Long frame's args are followed by its (offset, length) pair in the ring, and its
    /// payload is in the segment, apart from the ring). Costs nothing unless the
    /// handler reads the payload.
    ///
    /// # Safety
    /// `payload` is valid for reads of `len` bytes for `'a`, and unwritten for `'a`
    /// if it is right after `args`.
    #[inline(always)]
    pub(crate) unsafe fn of_words(
        source: Rank,
        args: &'a [u64],
        payload: *const u8,
        len: usize,
    ) -> Self {
        let held = len == 0 || std::ptr::eq(payload, args.as_ptr_range().end.cast());
        // SAFETY: the caller's contract, and a held payload is unwritten for `'a`.
        Self::new(source, args, unsafe {
            PayloadView::from_raw(payload, len, !held)
        })
    }

    /// The sender.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let from = t.request("from", |s: &Cell<Option<Rank>>, _ctx, m| { s.set(Some(m.source())); Ok(()) });
    ///     let am = setup.start(t, Cell::new(None))?;
    ///     if am.rank() == 1 {
    ///         am.request(0, from, &[])?;
    ///     } else {
    ///         am.wait_until(|s| s.get() == Some(1))?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn source(&self) -> Rank {
        self.source
    }

    /// The args (0–8).
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let n = t.request("n", |s: &Cell<usize>, _ctx, m| { s.set(m.args().len()); Ok(()) });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     am.request(0, n, &[1, 2, 3, 4, 5, 6, 7, 8])?;
    ///     Ok(am.wait_until(|s| s.get() == 8)?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn args(&self) -> &'a [u64] {
        // SAFETY: `new` took the address and length from a `&'a [u64]`.
        unsafe { std::slice::from_raw_parts(self.args, self.nargs) }
    }

    /// Arg `i`; [`AmError::MissingArg`] if the message carries fewer. A handler that
    /// returns that error (`m.arg(i)?`) has the message dropped and recorded as its
    /// sender's fault ([`Am::faults`](super::Am::faults)); the poll goes on.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// let out = amrq::Config::new().threads(1, |setup| -> amrq::Result<u64> {
    ///     let mut t = HandlerTable::new();
    ///     let add = t.request("add", |sum: &Cell<u64>, _ctx, m| {
    ///         sum.set(sum.get() + m.arg(0)? * m.arg(1)?);
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     am.request(0, add, &[3, 4])?;
    ///     am.request(0, add, &[5])?; // one arg short: the sender's fault
    ///     am.wait_until(|_| am.faults().total() == 1)?;
    ///     Ok(am.state().get())
    /// })
    /// .unwrap();
    /// assert_eq!(out, [12]);
    /// ```
    #[inline(always)]
    pub fn arg(&self, i: usize) -> Result<u64, AmError> {
        match self.args().get(i) {
            Some(&a) => Ok(a),
            None => Err(self.missing(i)),
        }
    }

    #[cold]
    fn missing(&self, index: usize) -> AmError {
        AmError::MissingArg {
            source_rank: self.source,
            index,
            nargs: self.nargs,
        }
    }

    /// The payload: borrowed in place for Medium (empty for Short), copied out of this
    /// rank's segment for Long (see [`Msg`]; [`Msg::payload_in_place`] reads a Long
    /// payload without allocating, and [`Msg::payload_len`] gives the length without a
    /// copy).
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let sum = t.request("sum", |s: &Cell<u64>, _ctx, m| {
    ///         s.set(m.payload().iter().map(|&b| u64::from(b)).sum());
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     am.request_medium(0, sum, &[], &[1u8; 100])?; // lent in place
    ///     am.wait_until(|s| s.get() == 100)?;
    ///     am.request_long(0, sum, &[], &[2u8; 4096], 0)?; // copied out of the segment
    ///     Ok(am.wait_until(|s| s.get() == 8192)?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn payload(&self) -> Cow<'a, [u8]> {
        self.payload_in_place().to_cow()
    }

    /// The payload where it lies, not copied: held in the queue for Medium, shared in
    /// this rank's segment for Long (see [`PayloadView`]).
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // Reads the first 8 bytes of a Long payload without an allocation.
    ///     let head = t.request("head", |s: &Cell<u64>, _ctx, m| {
    ///         let p = m.payload_in_place();
    ///         let mut word = [0u8; 8];
    ///         if p.is_shared() && p.copy_to(&mut word) == 8 {
    ///             s.set(u64::from_le_bytes(word));
    ///         }
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     am.request_long(0, head, &[], &7u64.to_le_bytes(), 64)?;
    ///     Ok(am.wait_until(|s| s.get() == 7)?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn payload_in_place(&self) -> PayloadView<'a> {
        // SAFETY: `new` took the address, length and kind from a `PayloadView<'a>`.
        unsafe { PayloadView::from_raw(self.payload, self.len, self.in_segment != 0) }
    }

    /// The payload as plain-data values (`T: bytemuck::Pod`, every bit pattern valid):
    /// lent in place when it is held (Medium) and aligned for `T`, else copied (Long,
    /// which peers may write, or misaligned). [`AmError::BadPayload`], the sender's
    /// fault, if its length is not a whole number of `T`s. Send one with
    /// `bytemuck::cast_slice`; [`Msg::payload_into`] reads one without allocating.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let sum = t.request("sum", |s: &Cell<f64>, _ctx, m| {
    ///         s.set(m.payload_as::<f64>()?.iter().sum());
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0.0))?;
    ///     let xs = [1.5f64, 2.5, 3.0];
    ///     am.request_medium(0, sum, &[], bytemuck::cast_slice(&xs))?; // lent in place
    ///     am.wait_until(|s| s.get() == 7.0)?;
    ///     am.request_medium(0, sum, &[], &[0u8; 5])?; // 5 bytes: not whole f64s
    ///     let Err(AmError::RequestFailed(f)) = am.wait_until(|_| false) else { unreachable!() };
    ///     assert!(f.to_string().contains("5 bytes"), "{f}");
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn payload_as<T: bytemuck::Pod>(&self) -> Result<Cow<'a, [T]>, AmError> {
        let p = self.payload_in_place();
        let n = self.whole::<T>()?;
        if let Some(held) = p.held() {
            if let Ok(values) = bytemuck::try_cast_slice(held) {
                return Ok(Cow::Borrowed(values));
            }
        }
        let mut values = vec![T::zeroed(); n];
        p.copy_to(bytemuck::cast_slice_mut(&mut values));
        Ok(Cow::Owned(values))
    }

    /// Copies the payload's first values into `dst`, as plain-data values; returns how
    /// many (the fewer of the payload's and `dst`'s). No allocation. As
    /// [`Msg::payload_as`] for a length that is not a whole number of `T`s.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let head = t.request("head", |s: &Cell<u32>, _ctx, m| {
    ///         let mut two = [0u32; 2];
    ///         let n = m.payload_into(&mut two)?; // copied out of the segment
    ///         s.set(two[..n].iter().sum());
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(0))?;
    ///     am.request_long(0, head, &[], bytemuck::cast_slice(&[4u32, 5, 6]), 0)?;
    ///     Ok(am.wait_until(|s| s.get() == 9)?)
    /// })
    /// .unwrap();
    /// ```
    pub fn payload_into<T: bytemuck::Pod>(&self, dst: &mut [T]) -> Result<usize, AmError> {
        let n = self.whole::<T>()?.min(dst.len());
        let bytes = n * size_of::<T>();
        self.payload_in_place()
            .copy_to(&mut bytemuck::cast_slice_mut(dst)[..bytes]);
        Ok(n)
    }

    /// How many `T`s the payload holds; the sender's fault if not a whole number.
    fn whole<T>(&self) -> Result<usize, AmError> {
        let size = size_of::<T>().max(1);
        match self.len % size {
            0 => Ok(self.len / size),
            _ => Err(AmError::BadPayload {
                source_rank: self.source,
                len: self.len,
                size,
            }),
        }
    }

    /// The payload's length in bytes (0 for Short), read without touching it.
    ///
    /// ```
    /// # use amrq::am::Msg;
    /// fn is_short(m: &Msg<'_>) -> bool { m.payload_len() == 0 }
    /// ```
    #[inline(always)]
    pub fn payload_len(&self) -> usize {
        self.len
    }
}

impl std::fmt::Debug for Msg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Msg")
            .field("source", &self.source)
            .field("args", &self.args())
            .field("payload", &self.payload_in_place())
            .finish()
    }
}

const _: () = assert!(std::mem::size_of::<Msg<'static>>() == 6 * std::mem::size_of::<usize>());

// SAFETY: a `Msg` is a shared borrow (`&'a [u64]`) and a `PayloadView<'a>` in raw parts, and
// those are `Send` and `Sync`: so is the `Msg` made of them.
unsafe impl Send for Msg<'_> {}
// SAFETY: as above.
unsafe impl Sync for Msg<'_> {}

/// A request handler's right to reply: once (the methods consume it), to the requester
/// only. It cannot leave the handler (it borrows the runtime for the handler's duration),
/// and only the runtime makes one, so there is no reply outside a request handler.
///
/// ```
/// use amrq::prelude::*;
/// struct S { done: ReplyHandler }
/// let mut t: HandlerTable<S> = HandlerTable::new();
/// let done = t.reply("done", |_s, _m| Ok(()));
/// t.request("work", |s, ctx, m| ctx.reply(s.done, &[m.arg(0)?]));
/// ```
///
/// Replying twice does not compile:
///
/// ```compile_fail
/// use amrq::prelude::*;
/// struct S { done: ReplyHandler }
/// let mut t: HandlerTable<S> = HandlerTable::new();
/// t.request("twice", |s, ctx, _m| {
///     ctx.reply(s.done, &[])?;
///     Ok(ctx.reply(s.done, &[])?) // error: use of moved value `ctx`
/// });
/// ```
///
/// Nor does keeping the right to reply past the handler:
///
/// ```compile_fail
/// use amrq::prelude::*;
/// use std::cell::RefCell;
/// struct S<'a> { kept: RefCell<Option<ReqCtx<'a, S<'a>, amrq::conduit::mem::MemConduit>>> }
/// let mut t: HandlerTable<S> = HandlerTable::new();
/// t.request("keep", |s, ctx, _m| { *s.kept.borrow_mut() = Some(ctx); Ok(()) });
/// ```
pub struct ReqCtx<'a, S, C: Conduit> {
    pub(crate) am: &'a Am<S, C>,
    pub(crate) source: Rank,
}

impl<S, C: Conduit> std::fmt::Debug for ReqCtx<'_, S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReqCtx")
            .field("source", &self.source)
            .finish()
    }
}

impl<S, C: Conduit> ReqCtx<'_, S, C> {
    /// The requester.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// struct S { back: ReplyHandler }
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let back = t.reply("back", |_s: &S, _m| Ok(()));
    ///     // The context knows the requester: a reply goes back to it.
    ///     let who = t.request("who", |s: &S, ctx, _m| {
    ///         let from = ctx.source() as u64;
    ///         ctx.reply(s.back, &[from])
    ///     });
    ///     let am = setup.start(t, S { back })?;
    ///     if am.rank() == 1 {
    ///         am.request(0, who, &[])?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn source(&self) -> Rank {
        self.source
    }

    /// This rank's registered segment (first byte, length), for a handler that works
    /// on it (the Split-C layer's atomic procedures, for instance).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// amrq::Config::new().threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // A handler that reads the word at offset args[0] of its own segment.
    ///     let peek = t.request("peek", |s: &Cell<u64>, ctx, m| {
    ///         let (base, len) = ctx.segment();
    ///         let off = m.arg(0)? as usize;
    ///         assert!(off + 8 <= len);
    ///         // SAFETY: inside this rank's segment, 8-aligned; nothing writes it meanwhile.
    ///         s.set(unsafe { base.as_ptr().add(off).cast::<u64>().read() });
    ///         Ok(())
    ///     });
    ///     let am = setup.start(t, Cell::new(1))?;
    ///     am.request(0, peek, &[0])?;
    ///     am.wait_until(|s| s.get() == 0)?; // a fresh segment is zeroed
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn segment(&self) -> (std::ptr::NonNull<u8>, usize) {
        self.am.segment()
    }

    /// Sends a Short reply. Waits for room if needed, running only reply handlers.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// struct S { sum: ReplyHandler, got: Cell<u64> }
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let sum = t.reply("sum", |s: &S, m| { s.got.set(m.arg(0)?); Ok(()) });
    ///     let add = t.request("add", |s: &S, ctx, m| ctx.reply(s.sum, &[m.arg(0)? + m.arg(1)?]));
    ///     let am = setup.start(t, S { sum, got: Cell::new(0) })?;
    ///     if am.rank() == 0 {
    ///         am.request(1, add, &[40, 2])?;
    ///         am.wait_until(|s| s.got.get() == 42)?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    #[inline(always)]
    pub fn reply(self, handler: ReplyHandler, args: &[u64]) -> Result<(), AmError> {
        self.am
            .send_short(self.source, QueueId::AM_REPLY, handler.0, args)
    }

    /// Sends a Medium reply (payload up to [`Am::max_medium`] bytes).
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::RefCell;
    /// struct S { name: ReplyHandler, got: RefCell<Vec<u8>> }
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let name = t.reply("name", |s: &S, m| { *s.got.borrow_mut() = m.payload().to_vec(); Ok(()) });
    ///     let ask = t.request("ask", |s: &S, ctx, _m| ctx.reply_medium(s.name, &[], b"rank one"));
    ///     let am = setup.start(t, S { name, got: RefCell::new(Vec::new()) })?;
    ///     if am.rank() == 0 {
    ///         am.request(1, ask, &[])?;
    ///         am.wait_until(|s| s.got.borrow().as_slice() == b"rank one")?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn reply_medium(
        self,
        handler: ReplyHandler,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), AmError> {
        self.am
            .send_reply(self.source, handler, args, Payload::Inline(payload))
    }

    /// Sends a Long reply: `payload` lands at byte `offset` of the requester's
    /// registered segment before its reply handler runs.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// use std::cell::Cell;
    /// struct S { landed: ReplyHandler, len: Cell<usize> }
    /// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     // The reply's payload lands at byte 0 of the requester's segment.
    ///     let landed = t.reply("landed", |s: &S, m| { s.len.set(m.payload().len()); Ok(()) });
    ///     let fetch = t.request("fetch", |s: &S, ctx, _m| ctx.reply_long(s.landed, &[], &[7u8; 512], 0));
    ///     let am = setup.start(t, S { landed, len: Cell::new(0) })?;
    ///     if am.rank() == 0 {
    ///         am.request(1, fetch, &[])?;
    ///         am.wait_until(|s| s.len.get() == 512)?;
    ///     }
    ///     Ok(am.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn reply_long(
        self,
        handler: ReplyHandler,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<(), AmError> {
        self.am
            .send_reply(self.source, handler, args, Payload::Long(payload, offset))
    }
}
