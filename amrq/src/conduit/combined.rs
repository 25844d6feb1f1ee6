//! A conduit made of two: per destination, the `local` one for ranks of this host
//! (shared memory) and the `remote` one for the others (a network), like GASNet-EX's
//! PSHM beside its network conduit. Built only as far as its shape needs showing; the
//! UCX issues put `shm` and UCX in it.
//!
//! - **Routing without `dyn`**: `Combined<L, R>` is generic over both halves; each call
//!   matches the destination's [`Route`] (an enum, one branch) and calls that half.
//! - **Ranks**: the remote half spans the whole job in the job's numbering; the local
//!   half spans this host's ranks in its own (`local_ranks[i]` is the job rank of its
//!   rank `i`), and frames from it are reported with the job rank of their sender.
//! - **Receiving**: a channel's frames come from both halves; `peek` and `drain` take
//!   them alternately, so neither half starves the other. `drain` takes one frame at a
//!   time through `peek` (each half's own `drain` hands out a frame it keeps, which
//!   cannot be wrapped without `dyn` or a copy).
//! - **Sleeping on both**: each half arms its wake-up and gives its futex word
//!   ([`Conduit::arm_arrival`]); the wait sleeps on both words at once with
//!   `futex_waitv`. A network half whose wake-up is a file descriptor gives a word that
//!   a helper thread bumps when the descriptor becomes readable (a futex cannot be
//!   polled with a descriptor; the helper only runs while its rank sleeps).
//! - **Memory**: a rank has one registered segment, registered with both halves (the
//!   shared mapping, also registered with the network), so a Long message or a put
//!   lands in the same bytes whichever half carried it. The symmetric allocator and
//!   completion events (`Completion`) live in the RMA layer
//!   and do not see the halves.
//! - **One-sided operations** go through the destination's half; a token names its
//!   half in its top bit. `put_get` and `atomics` are offered when both halves offer
//!   them.

use super::{
    Armed, Arming, AtomicOp, Caps, Channel, Conduit, ConduitError, Fault, Faults, InterruptAlarm,
    InterruptChannels, Message, OpToken, PayloadView, PollSet, Rank, ReceivedFrame, Started,
    TagOnData,
};
use std::cell::Cell;

/// Which half carries frames to a rank, and its rank there.
///
/// ```
/// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// # let segs = threads::segments(4, &spec).unwrap();
/// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
/// # let mut hosts = [
/// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
/// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
/// # ];
/// # let mut ranks = Vec::new();
/// # for (r, remote) in remote.into_iter().enumerate() {
/// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
/// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
/// # }
/// let routes: Vec<_> = (0..4).map(|r| ranks[1].route(r).unwrap()).collect();
/// assert_eq!(routes, [Route::Local(0), Route::Local(1), Route::Remote(2), Route::Remote(3)]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The local half, as its rank `.0`.
    Local(Rank),
    /// The remote half, as its rank `.0` (the job rank).
    Remote(Rank),
}

/// Bit of an [`OpToken`] that names the local half.
const LOCAL_TOKEN: u64 = 1 << 63;

/// A conduit made of a local and a remote one (see the module doc).
///
/// ```
/// use amrq::conduit::{combined::Combined, threads, ChannelSpec, Conduit, ConduitSpec, Message};
/// // Two "hosts" of two ranks: local halves {0, 1} and {2, 3}, one remote half for all.
/// let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true)]);
/// let segs = threads::segments(4, &spec).unwrap();
/// let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
/// let mut hosts = [
///     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
///     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
/// ];
/// let mut ranks = Vec::new();
/// for (r, remote) in remote.into_iter().enumerate() {
///     let (host, local) = (r / 2, hosts[r / 2].remove(0));
///     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
/// }
/// let m = Message { tag: 1, args: &[7], ..Message::default() };
/// ranks[0].try_send(1, 0, &m).unwrap(); // same host: the local half
/// ranks[0].try_send(3, 0, &m).unwrap(); // another host: the remote half
/// use amrq::conduit::ReceivedFrame;
/// let f = ranks[3].peek(0).unwrap().unwrap();
/// assert_eq!((f.source(), f.args()), (0, &[7u64][..]));
/// ```
pub struct Combined<L, R> {
    local: L,
    remote: R,
    /// Per job rank.
    routes: Vec<Route>,
    /// The job rank of each rank of the local half.
    local_ranks: Vec<Rank>,
    caps: Caps,
    /// Which half `peek` looks at first next time.
    remote_first: Cell<bool>,
}

impl<L, R> std::fmt::Debug for Combined<L, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Combined")
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl<L: Conduit, R: Conduit> Combined<L, R> {
    /// This rank's conduit from its `local` half (this host's ranks; its rank `i` is
    /// job rank `local_ranks[i]`) and its `remote` half (the whole job). The remote
    /// half is built from the job's [`ConduitSpec`](super::ConduitSpec), the local one
    /// from [`ConduitSpec::restricted_to`](super::ConduitSpec::restricted_to)`(local_ranks)`.
    ///
    /// ```
    /// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// # let segs = threads::segments(4, &spec).unwrap();
    /// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
    /// # let mut hosts = [
    /// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
    /// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
    /// # ];
    /// # let mut ranks = Vec::new();
    /// # for (r, remote) in remote.into_iter().enumerate() {
    /// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
    /// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
    /// # }
    /// // Rank 2 of the job is rank 0 of its host's half: a local_ranks that does not say so
    /// // is refused.
    /// let spec1 = ConduitSpec::new(vec![ChannelSpec::new(16)]);
    /// let (mut l, mut r) = (threads::endpoints(2, &[16]).unwrap(), threads::endpoints(4, &[16]).unwrap());
    /// assert!(Combined::new(l.remove(0), r.remove(2), vec![0, 1]).is_err());
    /// # let _ = spec1;
    /// ```
    pub fn new(local: L, remote: R, local_ranks: Vec<Rank>) -> Result<Self, ConduitError> {
        let setup = |why: String| Err(ConduitError::Setup(why));
        let (lc, rc) = (local.caps(), remote.caps());
        if local_ranks.len() != local.size()
            || local_ranks.get(local.rank()) != Some(&remote.rank())
        {
            return setup(format!(
                "the local half's {} ranks are job ranks {local_ranks:?}, and its rank {} must be this rank, {}",
                local.size(),
                local.rank(),
                remote.rank()
            ));
        }
        if local_ranks.iter().any(|&r| r >= remote.size()) {
            return setup(format!(
                "job ranks {local_ranks:?} in a job of {}",
                remote.size()
            ));
        }
        if lc.channels.len() != rc.channels.len()
            || lc.segment_bytes != rc.segment_bytes
            || lc.interrupt_channel != rc.interrupt_channel
        {
            return setup("the halves were built from different specs".into());
        }
        let mut routes: Vec<Route> = (0..remote.size()).map(Route::Remote).collect();
        for (i, &r) in local_ranks.iter().enumerate() {
            routes[r] = Route::Local(i);
        }
        let mut caps = rc.clone();
        caps.tag_on_bytes = lc.tag_on_bytes.min(rc.tag_on_bytes);
        caps.max_args = lc.max_args.min(rc.max_args);
        for (c, l) in caps.channels.iter_mut().zip(&lc.channels) {
            c.max_payload = c.max_payload.min(l.max_payload);
            c.max_args = c.max_args.min(l.max_args);
        }
        caps.flags.put_get &= lc.flags.put_get;
        caps.flags.atomics &= lc.flags.atomics;
        caps.flags.peer_memory_mapped = false;
        Ok(Self {
            local,
            remote,
            routes,
            local_ranks,
            caps,
            remote_first: Cell::new(false),
        })
    }

    /// The half that carries frames to `rank`, and its rank there.
    ///
    /// ```
    /// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// # let segs = threads::segments(4, &spec).unwrap();
    /// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
    /// # let mut hosts = [
    /// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
    /// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
    /// # ];
    /// # let mut ranks = Vec::new();
    /// # for (r, remote) in remote.into_iter().enumerate() {
    /// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
    /// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
    /// # }
    /// assert_eq!(ranks[0].route(1).unwrap(), Route::Local(1)); // same host
    /// assert_eq!(ranks[0].route(3).unwrap(), Route::Remote(3)); // over the network half
    /// assert!(ranks[0].route(4).is_err());
    /// ```
    pub fn route(&self, rank: Rank) -> Result<Route, ConduitError> {
        self.routes
            .get(rank)
            .copied()
            .ok_or(ConduitError::NoSuchRank {
                rank,
                size: self.routes.len(),
            })
    }

    /// The job ranks the local half reaches, in its numbering (index = its rank).
    ///
    /// ```
    /// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// # let segs = threads::segments(4, &spec).unwrap();
    /// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
    /// # let mut hosts = [
    /// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
    /// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
    /// # ];
    /// # let mut ranks = Vec::new();
    /// # for (r, remote) in remote.into_iter().enumerate() {
    /// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
    /// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
    /// # }
    /// assert_eq!(ranks[3].local_ranks(), [2, 3]);
    /// ```
    pub fn local_ranks(&self) -> &[Rank] {
        &self.local_ranks
    }

    /// The local half.
    ///
    /// ```
    /// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// # let segs = threads::segments(4, &spec).unwrap();
    /// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
    /// # let mut hosts = [
    /// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
    /// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
    /// # ];
    /// # let mut ranks = Vec::new();
    /// # for (r, remote) in remote.into_iter().enumerate() {
    /// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
    /// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
    /// # }
    /// assert_eq!((ranks[3].local().rank(), ranks[3].local().size()), (1, 2));
    /// ```
    pub fn local(&self) -> &L {
        &self.local
    }

    /// Both halves, to change (a front endpoint takes over their receive side).
    pub(crate) fn halves_mut(&mut self) -> (&mut L, &mut R) {
        (&mut self.local, &mut self.remote)
    }

    /// The remote half.
    ///
    /// ```
    /// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
    /// # let segs = threads::segments(4, &spec).unwrap();
    /// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
    /// # let mut hosts = [
    /// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
    /// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
    /// # ];
    /// # let mut ranks = Vec::new();
    /// # for (r, remote) in remote.into_iter().enumerate() {
    /// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
    /// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
    /// # }
    /// assert_eq!((ranks[3].remote().rank(), ranks[3].remote().size()), (3, 4));
    /// ```
    pub fn remote(&self) -> &R {
        &self.remote
    }
}

/// A frame from either half (of a channel, or of the Interrupt channels), with its
/// sender's job rank.
///
/// ```
/// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// # let segs = threads::segments(4, &spec).unwrap();
/// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
/// # let mut hosts = [
/// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
/// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
/// # ];
/// # let mut ranks = Vec::new();
/// # for (r, remote) in remote.into_iter().enumerate() {
/// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
/// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
/// # }
/// use amrq::conduit::combined::HalfFrame;
/// ranks[2].try_send(3, 0, &Message { tag: 0, flags: 0, args: &[1], payload: &[] }).unwrap();
/// let f = ranks[3].peek(0).unwrap().unwrap();
/// assert!(matches!(f, HalfFrame::Local(..))); // it came over shared memory
/// assert_eq!(f.source(), 2); // as a job rank
/// f.release();
/// ```
pub enum HalfFrame<A, B> {
    /// From the local half, sent by this job rank.
    Local(A, Rank),
    /// From the remote half.
    Remote(B),
}

macro_rules! either {
    ($f:expr, $x:ident => $e:expr) => {
        match $f {
            HalfFrame::Local($x, _) => $e,
            HalfFrame::Remote($x) => $e,
        }
    };
}

impl<'a, A: ReceivedFrame<'a>, B: ReceivedFrame<'a>> ReceivedFrame<'a> for HalfFrame<A, B> {
    fn source(&self) -> Rank {
        match self {
            HalfFrame::Local(_, source) => *source,
            HalfFrame::Remote(f) => f.source(),
        }
    }
    fn tag(&self) -> u16 {
        either!(self, f => f.tag())
    }
    fn flags(&self) -> u8 {
        either!(self, f => f.flags())
    }
    fn is_long(&self) -> bool {
        either!(self, f => f.is_long())
    }
    fn args(&self) -> &[u64] {
        either!(self, f => f.args())
    }
    fn payload(&self) -> PayloadView<'_> {
        either!(self, f => f.payload())
    }
    fn is_tag_on(&self) -> bool {
        either!(self, f => f.is_tag_on())
    }
    fn release(self) {
        either!(self, f => f.release())
    }
    fn keep(self) -> Option<TagOnData<'a>> {
        either!(self, f => f.keep())
    }
}

impl<L: Conduit + 'static, R: Conduit + 'static> Conduit for Combined<L, R> {
    type Frame<'a> = HalfFrame<L::Frame<'a>, R::Frame<'a>>;
    type Interrupts = CombinedInterrupts<L::Interrupts, R::Interrupts>;

    fn rank(&self) -> Rank {
        self.remote.rank()
    }
    fn size(&self) -> usize {
        self.remote.size()
    }
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn take_interrupts(&mut self) -> Option<Self::Interrupts> {
        let (local, remote) = (self.local.take_interrupts(), self.remote.take_interrupts());
        if local.is_none() && remote.is_none() {
            return None;
        }
        let mut channels: Vec<Channel> = local.iter().flat_map(|l| l.channels().to_vec()).collect();
        channels.extend(remote.iter().flat_map(|r| r.channels().to_vec()));
        channels.sort_unstable();
        channels.dedup();
        Some(CombinedInterrupts {
            local,
            remote,
            channels,
            local_ranks: self.local_ranks.clone(),
            rank: self.rank(),
        })
    }

    #[inline]
    fn try_send(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> Result<(), ConduitError> {
        match self.route(dest)? {
            Route::Local(r) => self.local.try_send(r, ch, msg),
            Route::Remote(r) => self.remote.try_send(r, ch, msg),
        }
    }

    #[inline(always)]
    fn try_send_quick(&self, dest: Rank, ch: Channel, tag: u16, args: &[u64]) -> bool {
        match self.route(dest) {
            Ok(Route::Local(r)) => self.local.try_send_quick(r, ch, tag, args),
            Ok(Route::Remote(r)) => self.remote.try_send_quick(r, ch, tag, args),
            Err(_) => false, // `try_send` reports it
        }
    }

    fn try_send_long(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        offset: usize,
    ) -> Result<(), ConduitError> {
        match self.route(dest)? {
            Route::Local(r) => self.local.try_send_long(r, ch, msg, offset),
            Route::Remote(r) => self.remote.try_send_long(r, ch, msg, offset),
        }
    }

    fn try_send_tag_on(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        match self.route(dest)? {
            Route::Local(r) => self.local.try_send_tag_on(r, ch, msg),
            Route::Remote(r) => self.remote.try_send_tag_on(r, ch, msg),
        }
    }

    fn segment(&self) -> (std::ptr::NonNull<u8>, usize) {
        self.local.segment()
    }

    fn peek(&self, ch: Channel) -> Result<Option<Self::Frame<'_>>, ConduitError> {
        let remote_first = self.remote_first.get();
        self.remote_first.set(!remote_first);
        let local = || -> Result<Option<Self::Frame<'_>>, ConduitError> {
            Ok(self.local.peek(ch)?.map(|f| {
                let source = self.local_ranks[f.source()];
                HalfFrame::Local(f, source)
            }))
        };
        let remote = || -> Result<Option<Self::Frame<'_>>, ConduitError> {
            Ok(self.remote.peek(ch)?.map(HalfFrame::Remote))
        };
        if remote_first {
            return match remote()? {
                Some(f) => Ok(Some(f)),
                None => local(),
            };
        }
        match local()? {
            Some(f) => Ok(Some(f)),
            None => remote(),
        }
    }

    fn quiet(&self, ch: Channel) -> bool {
        self.local.quiet(ch) && self.remote.quiet(ch)
    }

    fn drain<E, F>(&self, ch: Channel, budget: usize, mut f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&Self::Frame<'_>) -> Result<(), E>,
    {
        super::api::drain_taken(budget, || self.peek(ch), &mut f, ReceivedFrame::release)
    }

    fn wait_for_arrival(
        &self,
        set: &PollSet,
        timeout: std::time::Duration,
    ) -> Result<(), ConduitError> {
        let local = self.local.arm_arrival(set)?;
        let remote = match self.remote.arm_arrival(set) {
            Ok(a) => a,
            Err(e) => {
                if let Arming::Armed(a) = local {
                    self.local.disarm_arrival(set, a);
                }
                return Err(e);
            }
        };
        match (local, remote) {
            (Arming::Armed(l), Arming::Armed(r)) => {
                crate::util::futex::wait_any(&[(l.word, l.seen), (r.word, r.seen)], timeout);
                self.local.disarm_arrival(set, l);
                self.remote.disarm_arrival(set, r);
            }
            (l, r) => {
                let sleepless =
                    matches!(l, Arming::CannotSleep) || matches!(r, Arming::CannotSleep);
                if let Arming::Armed(l) = l {
                    self.local.disarm_arrival(set, l);
                }
                if let Arming::Armed(r) = r {
                    self.remote.disarm_arrival(set, r);
                }
                if sleepless {
                    std::thread::yield_now();
                }
            }
        }
        Ok(())
    }

    fn put_nb(&self, dest: Rank, offset: usize, data: &[u8]) -> Result<Started, ConduitError> {
        match self.route(dest)? {
            Route::Local(r) => self.local.put_nb(r, offset, data).map(local_token),
            Route::Remote(r) => self.remote.put_nb(r, offset, data),
        }
    }

    unsafe fn put_nb_borrowed(
        &self,
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        // SAFETY: the caller's promise about `data` is passed on unchanged.
        unsafe {
            match self.route(dest)? {
                Route::Local(r) => self
                    .local
                    .put_nb_borrowed(r, offset, data, len)
                    .map(local_token),
                Route::Remote(r) => self.remote.put_nb_borrowed(r, offset, data, len),
            }
        }
    }

    unsafe fn get_nb(
        &self,
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        // SAFETY: the caller's promise about `buf` is passed on unchanged.
        unsafe {
            match self.route(src)? {
                Route::Local(r) => self.local.get_nb(r, offset, buf, len).map(local_token),
                Route::Remote(r) => self.remote.get_nb(r, offset, buf, len),
            }
        }
    }

    fn atomic_nb(&self, dest: Rank, offset: usize, op: AtomicOp) -> Result<Started, ConduitError> {
        match self.route(dest)? {
            Route::Local(r) => self.local.atomic_nb(r, offset, op).map(local_token),
            Route::Remote(r) => self.remote.atomic_nb(r, offset, op),
        }
    }

    fn op_test(&self, op: OpToken) -> Result<Option<u64>, ConduitError> {
        match op.0 & LOCAL_TOKEN {
            0 => self.remote.op_test(op),
            _ => self.local.op_test(OpToken(op.0 & !LOCAL_TOKEN)),
        }
    }

    fn flush(&self) -> Result<(), ConduitError> {
        self.local.flush()?;
        self.remote.flush()
    }

    fn poll_set(&self, channels: &[Channel]) -> Result<PollSet, ConduitError> {
        let (l, r) = (
            self.local.poll_set(channels)?,
            self.remote.poll_set(channels)?,
        );
        if l != r {
            return Err(ConduitError::Setup(format!(
                "the halves describe channels {channels:?} differently ({l:?}, {r:?})"
            )));
        }
        Ok(l)
    }

    fn one_poll(&self, set: &PollSet) -> Result<Option<(Channel, Self::Frame<'_>)>, ConduitError> {
        // Each half's first frame in priority order; the better one wins, the other
        // stays at the head of its queue (a frame dropped unreleased is not taken).
        let l = self.local.one_poll(set)?;
        let r = self.remote.one_poll(set)?;
        let rank_of = |ch: Channel| set.channels.iter().position(|&c| c == ch);
        Ok(match (l, r) {
            (Some(l), Some(r)) if rank_of(r.0) < rank_of(l.0) => {
                Some((r.0, HalfFrame::Remote(r.1)))
            }
            (Some((ch, f)), _) => {
                let source = self.local_ranks[f.source()];
                Some((ch, HalfFrame::Local(f, source)))
            }
            (None, Some(r)) => Some((r.0, HalfFrame::Remote(r.1))),
            (None, None) => None,
        })
    }

    fn dropped(&self, ch: Channel) -> u64 {
        self.local.dropped(ch) + self.remote.dropped(ch)
    }

    fn faults(&self) -> Faults {
        let mut all = self.remote.faults();
        all.merge(self.local.faults(), |r| self.local_ranks[r]);
        all
    }

    fn record_fault(&self, fault: Fault) {
        match fault.source.and_then(|r| self.routes.get(r)) {
            Some(Route::Local(r)) => self.local.record_fault(Fault {
                source: Some(*r),
                ..fault
            }),
            _ => self.remote.record_fault(fault),
        }
    }

    fn allgather(&self, mine: u64) -> Result<Vec<u64>, ConduitError> {
        self.remote.allgather(mine)
    }

    fn barrier(&self) -> Result<(), ConduitError> {
        self.remote.barrier()
    }

    fn check_peers(&self) -> Result<(), ConduitError> {
        self.local.check_peers()?;
        self.remote.check_peers()
    }

    fn peer_left(&self, rank: Rank) -> bool {
        match self.routes.get(rank) {
            Some(Route::Local(r)) => {
                // While it is still here the network half is asked too, for its
                // progress: a neighbour leaving waits until its last messages over the
                // network are through, which a loop over this call alone would
                // otherwise never let happen.
                self.local.peer_left(*r) || {
                    let _ = self.remote.peer_left(rank);
                    false
                }
            }
            Some(Route::Remote(r)) => self.remote.peer_left(*r),
            None => false,
        }
    }

    fn contacted(&self, peer: Rank) -> bool {
        match self.routes.get(peer) {
            Some(Route::Local(r)) => self.local.contacted(*r),
            Some(Route::Remote(r)) => self.remote.contacted(*r),
            None => false,
        }
    }

    fn quiescent(&self) {
        self.local.quiescent();
        self.remote.quiescent();
    }
}

/// The local half's answer, its token marked as the local half's.
fn local_token(s: Started) -> Started {
    match s {
        Started::InFlight(t) => Started::InFlight(OpToken(t.0 | LOCAL_TOKEN)),
        done => done,
    }
}

/// Both halves' Interrupt channels, for one progress thread.
///
/// ```
/// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// # let segs = threads::segments(4, &spec).unwrap();
/// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
/// # let mut hosts = [
/// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
/// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
/// # ];
/// # let mut ranks = Vec::new();
/// # for (r, remote) in remote.into_iter().enumerate() {
/// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
/// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
/// # }
/// use amrq::conduit::InterruptChannels;
/// let rx = ranks[0].take_interrupts().unwrap(); // both halves' Interrupt channels
/// ranks[3].try_send(0, 1, &Message { tag: 0, flags: 0, args: &[9], payload: &[] }).unwrap();
/// let (ch, f) = rx.take().unwrap().unwrap();
/// assert_eq!((ch, f.source(), f.args()), (1, 3, &[9][..]));
/// f.release();
/// ```
pub struct CombinedInterrupts<A, B> {
    local: Option<A>,
    remote: Option<B>,
    channels: Vec<Channel>,
    local_ranks: Vec<Rank>,
    rank: Rank,
}

impl<A: InterruptChannels, B: InterruptChannels> InterruptChannels for CombinedInterrupts<A, B> {
    type Frame<'a> = HalfFrame<A::Frame<'a>, B::Frame<'a>>;
    type Alarm = CombinedAlarm<A::Alarm, B::Alarm>;

    fn rank(&self) -> Rank {
        self.rank
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn any_ready(&self) -> bool {
        self.local.as_ref().is_some_and(|l| l.any_ready())
            || self.remote.as_ref().is_some_and(|r| r.any_ready())
    }
    fn take(&self) -> Result<Option<(Channel, Self::Frame<'_>)>, ConduitError> {
        if let Some(l) = &self.local {
            if let Some((ch, f)) = l.take()? {
                let source = self.local_ranks[f.source()];
                return Ok(Some((ch, HalfFrame::Local(f, source))));
            }
        }
        match &self.remote {
            Some(r) => Ok(r.take()?.map(|(ch, f)| (ch, HalfFrame::Remote(f)))),
            None => Ok(None),
        }
    }
    fn alarm(&self) -> Self::Alarm {
        CombinedAlarm {
            local: self.local.as_ref().map(|l| l.alarm()),
            remote: self.remote.as_ref().map(|r| r.alarm()),
        }
    }
}

/// Both halves' interrupt alarms: armed together, slept on together.
///
/// ```
/// # use amrq::conduit::{combined::{Combined, Route}, threads, ChannelSpec, Conduit, ConduitSpec, Delivery, Message, ReceivedFrame};
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(16).notify(true), ChannelSpec::new(16).delivery(Delivery::Interrupt)]);
/// # let segs = threads::segments(4, &spec).unwrap();
/// # let remote = threads::endpoints_on(&spec, &segs, &[0, 1, 2, 3]).unwrap();
/// # let mut hosts = [
/// #     threads::endpoints_on(&spec.restricted_to(&[0, 1]), &segs, &[0, 1]).unwrap(),
/// #     threads::endpoints_on(&spec.restricted_to(&[2, 3]), &segs, &[2, 3]).unwrap(),
/// # ];
/// # let mut ranks = Vec::new();
/// # for (r, remote) in remote.into_iter().enumerate() {
/// #     let (host, local) = (r / 2, hosts[r / 2].remove(0));
/// #     ranks.push(Combined::new(local, remote, vec![2 * host, 2 * host + 1]).unwrap());
/// # }
/// use amrq::conduit::{InterruptAlarm, InterruptChannels};
/// let alarm = ranks[0].take_interrupts().unwrap().alarm();
/// let armed = alarm.arm(); // both halves' doorbells
/// alarm.disarm(armed);
/// ```
pub struct CombinedAlarm<A, B> {
    local: Option<A>,
    remote: Option<B>,
}

impl<A: InterruptAlarm, B: InterruptAlarm> InterruptAlarm for CombinedAlarm<A, B> {
    /// The local half's word (a combined alarm is slept on with
    /// [`InterruptAlarm::sleep_if`], which arms both).
    fn arm(&self) -> Armed<'_> {
        match (&self.local, &self.remote) {
            (Some(l), _) => l.arm(),
            (None, Some(r)) => r.arm(),
            (None, None) => unreachable!("a combined alarm has at least one half"),
        }
    }

    fn disarm(&self, armed: Armed<'_>) {
        match (&self.local, &self.remote) {
            (Some(l), _) => l.disarm(armed),
            (None, Some(r)) => r.disarm(armed),
            (None, None) => {}
        }
    }

    fn sleep_if(&self, still_idle: impl FnOnce() -> bool, timeout: std::time::Duration) {
        let (l, r) = match (&self.local, &self.remote) {
            (Some(l), Some(r)) => (l, r),
            (Some(l), None) => return l.sleep_if(still_idle, timeout),
            (None, Some(r)) => return r.sleep_if(still_idle, timeout),
            (None, None) => unreachable!("a combined alarm has at least one half"),
        };
        let (la, ra) = (l.arm(), r.arm());
        if still_idle() {
            crate::util::futex::wait_any(&[(la.word, la.seen), (ra.word, ra.seen)], timeout);
        }
        l.disarm(la);
        r.disarm(ra);
    }
}
