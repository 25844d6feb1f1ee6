//! Making a rank's UCX endpoint, in two steps around the exchange of cards (worker
//! address, segment key and address) that the job's bootstrap carries: [`open`], then
//! [`Opened::connect`] with every rank's card. The callbacks are registered in the
//! first step, so frames that arrive before this rank has connected are kept.
//!
//! [`threads`] makes a job of threads (cards passed in memory); [`join`] makes a rank
//! of a job across hosts, its cards exchanged over the rendezvous's set-up tree
//! ([`crate::bootstrap::network`]). A rank connects to a peer at its first message
//! there.

use super::auth::Auth;
use super::conduit::UcxConduit;
use super::net::{Card, ErrorArg, Net};
use super::outbox::Outbox;
use super::rx::Shared;
use super::sys::{self, ucs_status_t};
use super::waker::FdWaker;
use super::wire;
use crate::bootstrap::env::Place;
use crate::bootstrap::rendezvous::Terms;
use crate::bootstrap::{Boot, JobKey, NetJob, ShmJob, ThreadsBoot};
use crate::conduit::doorbell::DoorbellFence;
use crate::conduit::mem::{HeapRegion, MemConduit, Parts, RegionLayout, RegionOwner};
use crate::conduit::{Conduit, ConduitError, ConduitSpec, Delivery, Rank};
use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

/// A rank's endpoint before it has connected: its card for the others.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// let opened = ucx::open(0, 1, &spec, &settings, &amrq::bootstrap::JobKey::random().unwrap()).unwrap();
/// assert!(!opened.card.address.is_empty()); // published to the others, then connect
/// ```
pub struct Opened {
    rank: Rank,
    size: usize,
    net: Net,
    shared: Arc<Shared>,
    me: MemConduit,
    segment: SegmentMemory,
    segment_bytes: usize,
    tag_on_buffers: u64,
    coalescing: crate::conduit::Coalescing,
    /// The transports asked for, for errors: `UCX_TLS=…, UCX_NET_DEVICES=…`.
    transports: String,
    /// What to publish.
    pub card: Card,
}

/// The memory a rank registers with UCX as its segment.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// use amrq::conduit::mem::HeapRegion;
/// use std::sync::Arc;
/// let mem = ucx::SegmentMemory::Heap(Arc::new(HeapRegion::new(spec.segment_bytes).unwrap()));
/// let opened = ucx::open_on(0, 1, &spec, &settings, mem, &amrq::bootstrap::JobKey::random().unwrap()).unwrap();
/// # let _ = opened;
/// ```
#[derive(Debug)]
pub enum SegmentMemory {
    /// Its own, on the heap.
    Heap(Arc<HeapRegion>),
    /// Its segment in its host's shared mapping (a job across hosts, where the ranks of
    /// a host share memory): registered as it is, so that a Long message or a put lands
    /// in the same bytes over the network as over shared memory.
    Shared {
        /// Where the segment starts in this process.
        base: NonNull<u8>,
        /// Its length.
        bytes: usize,
        /// Keeps the mapping alive.
        job: Arc<ShmJob>,
    },
}

// SAFETY: the pointer is into a mapping the `ShmJob` keeps alive; the enum only hands
// it out, the conduit that owns it decides who writes there.
unsafe impl Send for SegmentMemory {}

impl SegmentMemory {
    pub(super) fn base(&self) -> NonNull<u8> {
        match self {
            Self::Heap(h) => h.base(),
            Self::Shared { base, .. } => *base,
        }
    }
}

/// Opens rank `rank` of a job of `size` with `spec`'s channels: the UCX context and
/// worker (`settings` are UCX settings without the `UCX_` prefix, applied after the
/// environment's), the registered segment (fresh memory of `spec.segment_bytes`), and
/// the local queues; every message it sends or takes is sealed with keys derived from
/// the job's `key`, which all its ranks share.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// let opened = ucx::open(0, 1, &spec, &settings, &amrq::bootstrap::JobKey::random().unwrap()).unwrap();
/// let card = opened.card.clone();
/// let c = opened.connect(&[card], amrq::bootstrap::Boot::Threads(std::sync::Arc::new(amrq::bootstrap::ThreadsBoot::new(1)))).unwrap();
/// assert_eq!(c.size(), 1);
/// ```
pub fn open(
    rank: Rank,
    size: usize,
    spec: &ConduitSpec,
    settings: &[(String, String)],
    key: &JobKey,
) -> Result<Opened, ConduitError> {
    let segment = SegmentMemory::Heap(Arc::new(HeapRegion::new(spec.segment_bytes)?));
    open_on(rank, size, spec, settings, segment, key)
}

/// [`open`] with `segment` as the registered segment (its length is
/// `spec.segment_bytes`).
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// use amrq::conduit::mem::HeapRegion;
/// use std::sync::Arc;
/// let seg = ucx::SegmentMemory::Heap(Arc::new(HeapRegion::new(spec.segment_bytes).unwrap()));
/// assert!(ucx::open_on(3, 2, &spec, &settings, seg, &amrq::bootstrap::JobKey::random().unwrap()).is_err()); // rank 3 of 2
/// ```
pub fn open_on(
    rank: Rank,
    size: usize,
    spec: &ConduitSpec,
    settings: &[(String, String)],
    segment: SegmentMemory,
    key: &JobKey,
) -> Result<Opened, ConduitError> {
    if rank >= size {
        return Err(ConduitError::NoSuchRank { rank, size });
    }
    if let SegmentMemory::Shared { bytes, .. } = &segment {
        if *bytes != spec.segment_bytes {
            return Err(ConduitError::Setup(format!(
                "a shared segment of {bytes} bytes for a spec of {}",
                spec.segment_bytes
            )));
        }
    }
    // The local queues are filled by the network's callbacks on this rank's own thread
    // (or its progress thread): a fence per frame pushed costs less than a
    // `membarrier`, an interrupt to every core, each time the rank goes to sleep.
    let spec = &ConduitSpec {
        doorbell_fence: DoorbellFence::Symmetric,
        ..spec.clone()
    };
    // This rank's queues alone: a ring from each sender (a shared channel's, one), its
    // doorbell and a Tag-On pool per sender, all growing as the job's ranks.
    let layout = RegionLayout::receiver(size, rank, spec)?;
    let region = Arc::new(HeapRegion::new(layout.total_bytes())?);
    // SAFETY: the region is fresh, zeroed, page-aligned and of the layout's size.
    unsafe { layout.init(region.base()) };
    let segments: Arc<[HeapRegion]> = Arc::new([]);
    let local_boot = Boot::Threads(Arc::new(ThreadsBoot::new(size)));
    let parts = || Parts {
        rank,
        ranks: size,
        spec,
        layout: &layout,
        rings: region.base(),
        // Every rank's "segment" here is this rank's own: the inlet writes Long
        // frames' data into it only.
        segments: vec![segment.base(); size],
        segment_bytes: spec.segment_bytes,
        owner: RegionOwner::Heap(region.clone(), segments.clone()),
        boot: local_boot.clone(),
    };
    // SAFETY: the region is initialised; the segment is `segment_bytes` long and kept
    // by the conduit, the region by the owner handles; this rank gets one receiver and
    // one inlet, through which the network's frames go in (`rx::through`).
    let (mut me, inlet) = unsafe { (MemConduit::receiver(parts()), MemConduit::inlet(parts())) };
    me.publish_heads_at_once();
    let shared = Arc::new(Shared::new(
        rank,
        layout,
        region.base(),
        inlet,
        me.fault_log(),
        Auth::new(key, rank, size),
    ));
    let progress_thread = spec
        .channels
        .iter()
        .any(|c| c.delivery == Delivery::Interrupt);
    let net = Net::open(
        settings,
        (segment.base().as_ptr(), spec.segment_bytes),
        progress_thread,
        spec.datagrams
            .then(|| (shared.reached.clone(), shared.auth.clone())),
    )?;
    for (id, cb) in [
        (
            wire::AM_FRAME,
            on_data::<{ wire::AM_FRAME }> as sys::ucp_am_recv_callback_t,
        ),
        (wire::AM_BATCH, on_data::<{ wire::AM_BATCH }>),
        (wire::AM_CREDIT, on_header::<{ wire::AM_CREDIT }>),
        (wire::AM_COLL, on_data::<{ wire::AM_COLL }>),
        (wire::AM_BYE, on_header::<{ wire::AM_BYE }>),
        (wire::AM_WANT, on_header::<{ wire::AM_WANT }>),
        (wire::AM_RESENT, on_data::<{ wire::AM_RESENT }>),
    ] {
        let p = sys::ucp_am_handler_param_t {
            field_mask: sys::UCP_AM_HANDLER_PARAM_FIELD_ID
                | sys::UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                | sys::UCP_AM_HANDLER_PARAM_FIELD_CB
                | sys::UCP_AM_HANDLER_PARAM_FIELD_ARG,
            id,
            flags: sys::UCP_AM_FLAG_WHOLE_MSG,
            cb: Some(cb),
            arg: Arc::as_ptr(&shared).cast_mut().cast(),
        };
        // SAFETY: a live worker; `arg` points to `shared`, which outlives the worker
        // (the conduit and the interrupt view drop their `Net` before their `Shared`).
        let st = unsafe { (net.ucp.ucp_worker_set_am_recv_handler)(net.worker, &p) };
        if st != sys::UCS_OK {
            return Err(super::net::failed(
                net.ucp,
                "ucp_worker_set_am_recv_handler",
                st,
            ));
        }
    }
    let card = net.card(segment.base().as_ptr() as u64)?;
    Ok(Opened {
        rank,
        size,
        net,
        shared,
        me,
        segment,
        segment_bytes: spec.segment_bytes,
        tag_on_buffers: spec.tag_on_buffers as u64,
        coalescing: spec.coalescing,
        transports: transports(settings),
        card,
    })
}

impl Opened {
    /// Makes the endpoint with every rank's card (index = rank), to connect to a rank
    /// at the first message there; `boot` is the job's bootstrap (failed peers,
    /// leaving).
    ///
    /// ```
    /// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
    /// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
    /// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// use amrq::bootstrap::{Boot, ThreadsBoot};
    /// use std::sync::Arc;
    /// let key = amrq::bootstrap::JobKey::random().unwrap(); // the job's: every rank's
    /// let opened: Vec<_> = (0..2).map(|r| ucx::open(r, 2, &spec, &settings, &key).unwrap()).collect();
    /// let cards: Vec<_> = opened.iter().map(|o| o.card.clone()).collect(); // exchanged by the bootstrap
    /// let boot = Boot::Threads(Arc::new(ThreadsBoot::new(2)));
    /// let eps: Vec<_> = opened.into_iter().map(|o| o.connect(&cards, boot.clone()).unwrap()).collect();
    /// assert_eq!(eps[1].rank(), 1);
    /// ```
    pub fn connect(mut self, cards: &[Card], boot: Boot) -> Result<UcxConduit, ConduitError> {
        if cards.len() != self.size {
            return Err(ConduitError::Setup(format!(
                "{} cards for a job of {} ranks",
                cards.len(),
                self.size
            )));
        }
        let arg = Arc::as_ptr(&self.shared).cast_mut().cast();
        let hosts = datagram_hosts(&boot, cards.len());
        // A socket on every address of its host is reached where the rank joined from.
        let to = cards
            .iter()
            .zip(hosts)
            .map(|(c, joined_from)| match c.datagrams? {
                a if a.ip().is_unspecified() => Some(SocketAddr::new(joined_from?, a.port())),
                a => Some(a),
            })
            .collect();
        self.net.connect(self.rank, cards, on_error, arg, to);
        let _ = self
            .shared
            .reach
            .set((boot.clone(), self.transports.clone()));
        let also = self.net.datagrams().map(|d| d.watch());
        // SAFETY: the word is in the local queues' region, which `me` keeps alive, and
        // the conduit drops the waker before `me`.
        let waker = unsafe { FdWaker::new(self.net.efd, also, self.me.wake_word()) }
            .map_err(|e| ConduitError::Setup(format!("cannot start the UCX waker thread: {e}")))?;
        let n = self.me.caps().channels.len() * self.size;
        Ok(UcxConduit {
            rank: self.rank,
            size: self.size,
            waker,
            me: self.me,
            net: Arc::new(self.net),
            shared: self.shared,
            tx: (0..n).map(|_| Cell::new(0)).collect(),
            asked: (0..n).map(|_| Cell::new(u64::MAX)).collect(),
            tag_on_sent: (0..self.size).map(|_| Cell::new(0)).collect(),
            tag_on_asked: (0..self.size).map(|_| Cell::new(u64::MAX)).collect(),
            tag_on_buffers: self.tag_on_buffers,
            pending: RefCell::new(Vec::new()),
            ops: RefCell::new(Default::default()),
            epoch: Cell::new(0),
            boot,
            segment: self.segment,
            segment_bytes: self.segment_bytes,
            outbox: Outbox::new(self.size, self.coalescing),
            card: self.card,
            quiet: Cell::new(false),
        })
    }
}

/// Per rank, the address its datagrams are sent to: where it joined the rendezvous
/// from, or this host for a job of one host.
fn datagram_hosts(boot: &Boot, size: usize) -> Vec<Option<IpAddr>> {
    match boot {
        Boot::Net(job) => job
            .entries()
            .iter()
            .map(|e| {
                let a = e.address.parse::<SocketAddr>().map(|a| a.ip());
                a.or_else(|_| e.address.parse::<IpAddr>()).ok()
            })
            .collect(),
        _ => vec![Some(IpAddr::V4(Ipv4Addr::LOCALHOST)); size],
    }
}

/// The header of an arrived Active Message.
///
/// # Safety
/// `header` is valid for `len` bytes (UCX's callback contract).
unsafe fn bytes<'a>(header: *const c_void, len: usize) -> &'a [u8] {
    if header.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(header.cast(), len) }
}

/// The [`Shared`] an Active Message callback was registered with.
///
/// # Safety
/// `arg` is the pointer registered in [`open`], whose `Shared` outlives the worker.
unsafe fn shared<'a>(arg: *mut c_void) -> &'a Shared {
    // SAFETY: the caller's contract.
    unsafe { &*arg.cast::<Shared>() }
}

/// The callback of messages with data: a frame (AM id 0), a batch of them (AM id 5), a
/// round of a setup collective (AM id 2), or a message first sent as a datagram
/// (AM id 6).
unsafe extern "C" fn on_data<const ID: u32>(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const sys::ucp_am_recv_param_t,
) -> ucs_status_t {
    // SAFETY: UCX calls this with the arg registered in `open` and a valid header, data
    // (whole message, not rendezvous: checked) and parameters.
    unsafe {
        let rndv = !param.is_null() && (*param).recv_attr & sys::UCP_AM_RECV_ATTR_FLAG_RNDV != 0;
        let data = if rndv { &[][..] } else { bytes(data, length) };
        let (s, header) = (shared(arg), bytes(header, header_length));
        match ID {
            wire::AM_RESENT => s.on_resent(header, data, rndv),
            _ => s.reached_from(s.deliver(ID, header, data, rndv)),
        }
    }
    sys::UCS_OK
}

/// The callback of the conduit's own messages (AM id `ID`: credits, goodbyes, requests
/// for credits), whose header is all they carry.
unsafe extern "C" fn on_header<const ID: u32>(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    _: *mut c_void,
    _: usize,
    _: *const sys::ucp_am_recv_param_t,
) -> ucs_status_t {
    // SAFETY: as in `on_data`.
    let (s, header) = unsafe { (shared(arg), bytes(header, header_length)) };
    s.reached_from(s.deliver(ID, header, &[], false));
    sys::UCS_OK
}

unsafe extern "C" fn on_error(arg: *mut c_void, _: sys::ucp_ep_h, status: ucs_status_t) {
    // SAFETY: an `ErrorArg` of the `Net` that owns the endpoint, whose `arg` is the one
    // given in `Opened::connect`: the `Shared` outlives the worker.
    let (s, peer) = unsafe {
        let e = &*arg.cast::<ErrorArg>();
        (shared(e.arg), e.peer)
    };
    // A peer that never sent here and closed its connection owes this rank nothing:
    // after a quiescent end it says goodbye only to the peers it sent to. Whether it
    // left or crashed is the bootstrap's to say; nothing is recorded here.
    if status == sys::UCS_ERR_CONNECTION_RESET && !s.auth.heard_from(peer) {
        return;
    }
    if let Ok(ucp) = sys::Ucp::get() {
        s.on_error(peer, s.lost(peer, &ucp.status(status)));
    }
}

/// The endpoints of a job of `ranks` ranks as threads of this process, connected
/// through UCX (`settings` as in [`open`]; for instance `TLS=tcp` and `NET_DEVICES=lo`
/// to test the network path inside one host). Move each to its own thread.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// use amrq::conduit::{Message, ReceivedFrame};
/// let eps = ucx::threads(2, &spec, &settings).unwrap();
/// eps[0].try_send(1, 0, &Message { tag: 0, flags: 0, args: &[5], payload: &[] }).unwrap();
/// let f = loop {
///     assert!(eps[0].peek(0).unwrap().is_none()); // progresses the sender's worker too
///     if let Some(f) = eps[1].peek(0).unwrap() { break f; } // over tcp on the loopback
/// };
/// assert_eq!(f.args(), [5]);
/// f.release();
/// ```
pub fn threads(
    ranks: usize,
    spec: &ConduitSpec,
    settings: &[(String, String)],
) -> Result<Vec<UcxConduit>, ConduitError> {
    let boot = Boot::Threads(Arc::new(ThreadsBoot::new(ranks)));
    let key =
        JobKey::random().map_err(|e| ConduitError::Setup(format!("no random job key: {e}")))?;
    let opened = (0..ranks)
        .map(|r| open(r, ranks, spec, settings, &key))
        .collect::<Result<Vec<_>, _>>()?;
    let cards: Vec<Card> = opened.iter().map(|o| o.card.clone()).collect();
    opened
        .into_iter()
        .map(|o| o.connect(&cards, boot.clone()))
        .collect()
}

/// Joins the job `place` across hosts over UCX: forms the job at rank 0's rendezvous
/// (`place.rendezvous`), opens this rank's endpoint and exchanges the cards. It
/// connects to a peer at its first message there; a peer it cannot reach is an error
/// then, naming it, its host and address.
///
/// ```
/// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec};
/// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
/// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
/// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
/// # use amrq::bootstrap::{env::Place, JobKey};
/// # let place = Place {
/// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()),
/// #     key: JobKey::random().unwrap(), launcher: "doc", host: "localhost".into(), rendezvous: Some(format!("127.0.0.1:{}", 40000 + std::process::id() % 20000)),
/// # };
/// use std::time::Duration;
/// // A job of one rank across "hosts": it forms the job at its own rendezvous.
/// let c = ucx::join(&place, &spec, &settings, Duration::from_secs(10)).unwrap();
/// assert_eq!(c.size(), 1);
/// ```
pub fn join(
    place: &Place,
    spec: &ConduitSpec,
    settings: &[(String, String)],
    timeout: Duration,
) -> Result<UcxConduit, ConduitError> {
    let job = form(place, spec, timeout)?;
    let opened = open(place.rank, place.size, spec, settings, &place.key)?;
    wire_up(opened, job)
}

/// Forms the job `place` at rank 0's rendezvous: every rank's host, and the links
/// that carry the set-up collectives.
pub(crate) fn form(
    place: &Place,
    spec: &ConduitSpec,
    timeout: Duration,
) -> Result<NetJob, ConduitError> {
    let rendezvous = place.rendezvous.as_deref().ok_or_else(|| {
        ConduitError::Setup(format!(
            "rank {} has no rendezvous to join at: set {} to rank 0's HOST:PORT",
            place.rank,
            crate::bootstrap::env::ENV_RENDEZVOUS
        ))
    })?;
    let terms = Terms {
        id: place.id.clone(),
        key: place.key,
        size: place.size,
        digest: crate::conduit::shm::digest(spec, spec.segment_bytes),
        bytes: 0,
        agreement: spec.agreement(),
    };
    Ok(NetJob::form(
        place.rank,
        &place.host,
        rendezvous,
        &terms,
        Vec::new(),
        timeout,
    )?)
}

/// Exchanges cards through `job` and makes the endpoint: it connects to a peer at
/// its first message there, so a peer this rank cannot reach is an error then, naming
/// it, its host and address, and the transports tried.
pub(crate) fn wire_up(opened: Opened, job: NetJob) -> Result<UcxConduit, ConduitError> {
    let cards = job
        .exchange(&opened.card.to_bytes())?
        .iter()
        .enumerate()
        .map(|(r, b)| {
            Card::from_bytes(b).ok_or_else(|| {
                ConduitError::Setup(format!("rank {r}'s card from the rendezvous is malformed"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    opened.connect(&cards, Boot::Net(Arc::new(job)))
}

/// `UCX_TLS=…, UCX_NET_DEVICES=…` as `settings`, else the environment, set them.
fn transports(settings: &[(String, String)]) -> String {
    let one = |k: &str| {
        ucx_setting(settings, k).map_or(format!("UCX_{k} unset (all)"), |v| format!("UCX_{k}={v}"))
    };
    format!("{}, {}", one("TLS"), one("NET_DEVICES"))
}

/// UCX setting `k` (without the `UCX_` prefix): from `settings`, else the environment.
pub(super) fn ucx_setting(settings: &[(String, String)], k: &str) -> Option<String> {
    settings
        .iter()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(format!("UCX_{k}")).ok())
}

/// Why `me` cannot reach `peer` over UCX: both ranks, their hosts and addresses where
/// the job's bootstrap knows them, and the transports asked for.
pub(super) fn unreachable(
    boot: &Boot,
    me: Rank,
    peer: Rank,
    transports: &str,
    why: &str,
) -> String {
    let who = |r: Rank| match boot {
        Boot::Net(job) => job.entries().get(r).map_or(format!("rank {r}"), |e| {
            format!("rank {r} on host {} ({})", e.host, e.address)
        }),
        _ => format!("rank {r}"),
    };
    format!(
        "{} cannot reach {} over UCX ({transports}): {why}. A worker address lists the \
         interfaces UCX_NET_DEVICES chose on its host: they must be reachable from the others.",
        who(me),
        who(peer)
    )
}
