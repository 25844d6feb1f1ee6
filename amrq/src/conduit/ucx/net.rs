//! One rank's UCX objects: the context, its worker, and per peer an endpoint and the
//! peer's segment key, made at the first message to that peer. Made in two steps
//! around the exchange of worker addresses ([`Net::open`], then [`Net::connect`], which
//! keeps the peers' cards); destroyed in the reverse order.
//!
//! A rank that never talks to a peer never connects to it: a job's start-up costs a
//! rank its own objects, not one connection (a socket on tcp) per rank of the job. The
//! one connection it makes at start-up is to itself, so that its first message to a
//! peer finds UCX's tcp transport ready ([`Net::loopback`]).

use super::auth::Auth;
use super::datagram::{Datagrams, Reached};
use super::sys::{self, StatusPtr, Ucp};
use crate::conduit::{ConduitError, Rank};
use std::ffi::{c_void, CString};
use std::net::SocketAddr;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a rank publishes for its peers: its worker's address, its segment's packed
/// remote key, the segment's address in its process, and the port of its datagrams.
///
/// ```
/// use amrq::conduit::ucx::Card;
/// let c = Card { address: vec![1, 2], rkey: vec![3], base: 4096, datagrams: "10.0.0.7:40000".parse().ok() };
/// assert_eq!(Card::from_bytes(&c.to_bytes()), Some(c));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// `ucp_worker_get_address`.
    pub address: Vec<u8>,
    /// `ucp_rkey_pack` of the segment.
    pub rkey: Vec<u8>,
    /// Where the segment starts in its process.
    pub base: u64,
    /// The UDP address of its first messages from a peer (`None`: it takes none; a
    /// peer connects at its first message). An unspecified IP: the address it joined
    /// the job from.
    pub datagrams: Option<SocketAddr>,
}

impl Card {
    /// The card as bytes: four length-prefixed fields.
    ///
    /// ```
    /// use amrq::conduit::ucx::Card;
    /// let c = Card { address: vec![9; 3], rkey: vec![], base: 0, datagrams: None };
    /// assert_eq!(c.to_bytes().len(), 4 * 8 + 3 + 8); // four length-prefixed fields
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for f in [
            &self.address[..],
            &self.rkey[..],
            &self.base.to_le_bytes()[..],
            self.datagrams
                .map(|a| a.to_string())
                .unwrap_or_default()
                .as_bytes(),
        ] {
            b.extend_from_slice(&(f.len() as u64).to_le_bytes());
            b.extend_from_slice(f);
        }
        b
    }

    /// Reads [`Card::to_bytes`]; `None` if malformed.
    ///
    /// ```
    /// use amrq::conduit::ucx::Card;
    /// assert_eq!(Card::from_bytes(&[1, 2, 3]), None); // malformed: refused, not trusted
    /// ```
    pub fn from_bytes(mut b: &[u8]) -> Option<Self> {
        let mut field = || -> Option<Vec<u8>> {
            let n = u64::from_le_bytes(b.get(..8)?.try_into().ok()?) as usize;
            let f = b.get(8..8usize.checked_add(n)?)?.to_vec();
            b = &b[8 + n..];
            Some(f)
        };
        let (address, rkey, base, port) = (field()?, field()?, field()?, field()?);
        Some(Card {
            address,
            rkey,
            base: u64::from_le_bytes(base.try_into().ok()?),
            datagrams: match &port[..] {
                [] => None,
                a => Some(std::str::from_utf8(a).ok()?.parse().ok()?),
            },
        })
    }
}

/// A UCX failure as a conduit error.
pub fn failed(ucp: &Ucp, call: &str, status: sys::ucs_status_t) -> ConduitError {
    ConduitError::Setup(format!("UCX {call} failed: {}", ucp.status(status)))
}

fn check(ucp: &Ucp, call: &str, status: sys::ucs_status_t) -> Result<(), ConduitError> {
    if status == sys::UCS_OK {
        Ok(())
    } else {
        Err(failed(ucp, call, status))
    }
}

/// What an endpoint's error callback is given: the argument [`Net::connect`] was
/// given, and the peer (so the callback needs no search).
pub(super) struct ErrorArg {
    /// As given to [`Net::connect`].
    pub(super) arg: *mut c_void,
    /// The endpoint's peer.
    pub(super) peer: Rank,
}

/// The callback of a failed endpoint (`ucp_err_handler_cb_t`); its argument is an
/// [`ErrorArg`].
pub(super) type OnError = unsafe extern "C" fn(*mut c_void, sys::ucp_ep_h, sys::ucs_status_t);

/// A rank's UCX context, worker, endpoints and keys.
pub struct Net {
    pub(super) ucp: &'static Ucp,
    context: sys::ucp_context_h,
    pub(super) worker: sys::ucp_worker_h,
    memh: sys::ucp_mem_h,
    /// Per peer: its endpoint, null until the first message to it (always for this
    /// rank).
    eps: Box<[AtomicPtr<c_void>]>,
    /// Per peer: its segment's key, unpacked before its endpoint is published.
    rkeys: Box<[AtomicPtr<c_void>]>,
    /// Per peer: its card, to connect to it, and where its segment starts.
    cards: Vec<Card>,
    me: Rank,
    on_error: Option<OnError>,
    /// Per peer: its endpoint's error callback argument (boxed: UCX keeps the address).
    error_args: Box<[ErrorArg]>,
    /// Held while an endpoint is made: the progress thread may want one too.
    making: Mutex<()>,
    /// Left to the process's exit: the worker and context are not destroyed
    /// ([`Net::leave_to_exit`]).
    left_to_exit: std::sync::atomic::AtomicBool,
    /// The worker's wake-up descriptor.
    pub(super) efd: i32,
    /// The worker's endpoint to itself ([`Net::loopback`]), or null.
    loopback: sys::ucp_ep_h,
    /// The first messages to a peer not connected to (`datagram`), if sent so.
    datagrams: Option<Datagrams>,
}

// SAFETY: the handles are used by one thread at a time (UCS_THREAD_MODE_SERIALIZED), or
// by several when the worker was made in UCS_THREAD_MODE_MULTI (the conduit does so when a progress thread will
// share it: `Net::open`'s `shared`).
unsafe impl Send for Net {}
// SAFETY: as above.
unsafe impl Sync for Net {}

impl Net {
    /// A context and worker with `settings` (UCX configuration names without the
    /// `UCX_` prefix, like `("TLS", "tcp")`; the environment's `UCX_*` apply first),
    /// and `segment` registered. `shared`: a progress thread will use the worker too;
    /// `datagrams`: the first messages to a peer go as datagrams (`datagram`), to
    /// each peer until it is among those `reached` this rank over a connection, their
    /// numbers sealed by this rank's `Auth`.
    pub fn open(
        settings: &[(String, String)],
        segment: (*mut u8, usize),
        shared: bool,
        datagrams: Option<(Reached, Arc<Auth>)>,
    ) -> Result<Self, ConduitError> {
        let ucp = Ucp::get().map_err(|e| ConduitError::NoUcx(e.to_string()))?;
        let mut config = null_mut();
        // SAFETY: NULL prefix and file: the environment's UCX_ settings.
        check(ucp, "ucp_config_read", unsafe {
            (ucp.ucp_config_read)(std::ptr::null(), std::ptr::null(), &mut config)
        })?;
        let modified = settings.iter().try_for_each(|(k, v)| {
            let (ck, cv) = (cstring(k)?, cstring(v)?);
            // SAFETY: a live config and two NUL-terminated strings.
            let st = unsafe { (ucp.ucp_config_modify)(config, ck.as_ptr(), cv.as_ptr()) };
            if st == sys::UCS_OK {
                Ok(())
            } else {
                Err(ConduitError::Setup(format!(
                    "UCX setting UCX_{k}={v}: {}",
                    ucp.status(st)
                )))
            }
        });
        // SAFETY: all fields zero (valid for integers and pointers), then set.
        let mut params: sys::ucp_params_t = unsafe { std::mem::zeroed() };
        params.field_mask = sys::UCP_PARAM_FIELD_FEATURES | sys::UCP_PARAM_FIELD_NAME;
        params.features = sys::UCP_FEATURE_AM
            | sys::UCP_FEATURE_RMA
            | sys::UCP_FEATURE_AMO64
            | sys::UCP_FEATURE_WAKEUP;
        params.name = c"amrq".as_ptr();
        let mut context = null_mut();
        let init = modified.and_then(|()| {
            // SAFETY: valid params and config; the out-pointer is written on success.
            check(ucp, "ucp_init", unsafe {
                (ucp.ucp_init_version)(
                    sys::API_MAJOR,
                    sys::API_MINOR,
                    &params,
                    config,
                    &mut context,
                )
            })
        });
        // SAFETY: the config from ucp_config_read, released once.
        unsafe { (ucp.ucp_config_release)(config) };
        init?;
        let mut net = Net {
            ucp,
            context,
            worker: null_mut(),
            memh: null_mut(),
            eps: Box::new([]),
            rkeys: Box::new([]),
            cards: Vec::new(),
            me: 0,
            on_error: None,
            error_args: Box::new([]),
            making: Mutex::new(()),
            left_to_exit: std::sync::atomic::AtomicBool::new(false),
            efd: -1,
            loopback: null_mut(),
            datagrams: None,
        };
        if let Some((reached, auth)) = datagrams {
            let d = Datagrams::open(settings, reached, auth)
                .map_err(|e| ConduitError::Setup(format!("cannot open a UDP socket: {e}")))?;
            net.datagrams = Some(d);
        }
        // SAFETY: zeroed params, then the thread mode set.
        let mut wp: sys::ucp_worker_params_t = unsafe { std::mem::zeroed() };
        wp.field_mask = sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = if shared {
            sys::UCS_THREAD_MODE_MULTI
        } else {
            sys::UCS_THREAD_MODE_SERIALIZED
        };
        // SAFETY: a live context; the worker is written on success.
        check(ucp, "ucp_worker_create", unsafe {
            (ucp.ucp_worker_create)(net.context, &wp, &mut net.worker)
        })?;
        // SAFETY: zeroed params, then address and length set.
        let mut mp: sys::ucp_mem_map_params_t = unsafe { std::mem::zeroed() };
        mp.field_mask = sys::UCP_MEM_MAP_PARAM_FIELD_ADDRESS | sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = segment.0.cast();
        mp.length = segment.1.max(1);
        // SAFETY: the segment is mapped memory of that length, alive as long as `net`
        // (the conduit keeps it); the handle is written on success.
        check(ucp, "ucp_mem_map", unsafe {
            (ucp.ucp_mem_map)(net.context, &mp, &mut net.memh)
        })?;
        // SAFETY: a worker made with UCP_FEATURE_WAKEUP; the fd is written on success.
        check(ucp, "ucp_worker_get_efd", unsafe {
            (ucp.ucp_worker_get_efd)(net.worker, &mut net.efd)
        })?;
        net.loopback = net.loopback();
        Ok(net)
    }

    /// An endpoint from the worker to itself, connected and kept open. UCX readies a
    /// transport of the worker at its first endpoint over it (over tcp, twenty-odd
    /// queries of the network device) and unreadies it when the last one closes, and
    /// grows its buffer pools at the first messages: a rank's first message to a peer
    /// would pay all of it at both ends (about a millisecond over tcp). This pays it at
    /// start-up where the worker reaches itself over the transport its peers use
    /// (`UCX_TLS=tcp`); with UCX's `self` or shared-memory transports enabled it
    /// reaches itself over those, and the first connection still pays. Null if UCX
    /// cannot connect the worker to itself.
    fn loopback(&self) -> sys::ucp_ep_h {
        /// Nothing travels on it: its failure needs no action.
        unsafe extern "C" fn ignore(_: *mut c_void, _: sys::ucp_ep_h, _: sys::ucs_status_t) {}
        let Ok(address) = self.address() else {
            return null_mut();
        };
        let on_error = sys::ucp_err_handler_t {
            cb: Some(ignore),
            arg: null_mut(),
        };
        // SAFETY: the handler takes no argument.
        let Ok(ep) = (unsafe { self.create_ep(&address, on_error) }) else {
            return null_mut();
        };
        // The connection set-up's messages to itself grow the pools. Its other end is
        // UCX's connection thread, which may need this core: sleep between looks.
        let p = sys::ucp_request_param_t::empty();
        // SAFETY: a live worker.
        let req = unsafe { (self.ucp.ucp_worker_flush_nbx)(self.worker, &p) };
        let nap = || self.sleep(Duration::from_millis(1));
        match self.wait_with(req, Duration::from_secs(1), nap) {
            Ok(()) => ep,
            Err(_) => {
                self.close(ep);
                null_mut()
            }
        }
    }

    /// The worker's address, as a peer connects to it.
    fn address(&self) -> Result<Vec<u8>, ConduitError> {
        let ucp = self.ucp;
        let (mut addr, mut alen) = (null_mut(), 0usize);
        // SAFETY: a live worker; the address is released below.
        check(ucp, "ucp_worker_get_address", unsafe {
            (ucp.ucp_worker_get_address)(self.worker, &mut addr, &mut alen)
        })?;
        // SAFETY: UCX gave `alen` bytes at `addr`.
        let address = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), alen) }.to_vec();
        // SAFETY: the address from ucp_worker_get_address, released once.
        unsafe { (ucp.ucp_worker_release_address)(self.worker, addr) };
        Ok(address)
    }

    /// An endpoint to the worker at `address`, its failure reported to `on_error`, in
    /// the one configuration every endpoint of this worker has (peer failures
    /// reported), so that they share what UCX made ready for the first.
    ///
    /// # Safety
    ///
    /// `on_error.arg` stays valid for what `on_error.cb` does with it while the
    /// endpoint lives.
    unsafe fn create_ep(
        &self,
        address: &[u8],
        on_error: sys::ucp_err_handler_t,
    ) -> Result<sys::ucp_ep_h, sys::ucs_status_t> {
        // SAFETY: zeroed params, then the fields named in the mask set.
        let mut params: sys::ucp_ep_params_t = unsafe { std::mem::zeroed() };
        params.field_mask = sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
            | sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
            | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.address = address.as_ptr().cast();
        params.err_mode = sys::UCP_ERR_HANDLING_MODE_PEER;
        params.err_handler = on_error;
        let mut ep = null_mut();
        // SAFETY: a live worker and a worker address; written on success. The error
        // argument outlives the endpoint (the caller's promise).
        match unsafe { (self.ucp.ucp_ep_create)(self.worker, &params, &mut ep) } {
            sys::UCS_OK => Ok(ep),
            st => Err(st),
        }
    }

    /// This rank's card for its peers.
    pub fn card(&self, base: u64) -> Result<Card, ConduitError> {
        let ucp = self.ucp;
        let address = self.address()?;
        let (mut rk, mut rlen) = (null_mut(), 0usize);
        // SAFETY: a live context and memory handle; the buffer is released below.
        check(ucp, "ucp_rkey_pack", unsafe {
            (ucp.ucp_rkey_pack)(self.context, self.memh, &mut rk, &mut rlen)
        })?;
        // SAFETY: UCX gave `rlen` bytes at `rk`.
        let rkey = unsafe { std::slice::from_raw_parts(rk.cast::<u8>(), rlen) }.to_vec();
        // SAFETY: the buffer from ucp_rkey_pack, released once.
        unsafe { (ucp.ucp_rkey_buffer_release)(rk) };
        Ok(Card {
            address,
            rkey,
            base,
            datagrams: self.datagrams.as_ref().and_then(|d| d.address()),
        })
    }

    /// Keeps every rank's card (index = rank; `me` is this rank) to connect to it at
    /// the first message; a failed endpoint calls `on_error` with an [`ErrorArg`] of
    /// `arg` and the peer.
    pub fn connect(
        &mut self,
        me: Rank,
        cards: &[Card],
        on_error: OnError,
        arg: *mut c_void,
        datagrams_to: Vec<Option<SocketAddr>>,
    ) {
        if let Some(d) = &mut self.datagrams {
            d.connect(me, datagrams_to);
        }
        self.me = me;
        self.cards = cards.to_vec();
        self.eps = cards.iter().map(|_| AtomicPtr::new(null_mut())).collect();
        self.rkeys = cards.iter().map(|_| AtomicPtr::new(null_mut())).collect();
        self.error_args = (0..cards.len())
            .map(|peer| ErrorArg { arg, peer })
            .collect();
        self.on_error = Some(on_error);
    }

    /// The endpoint to `peer` if it was made.
    #[inline]
    pub fn made(&self, peer: Rank) -> Option<sys::ucp_ep_h> {
        // ORDERING: Acquire pairs with the Release store in `make`: the endpoint and
        // its key are complete.
        let ep = self.eps[peer].load(Ordering::Acquire);
        (!ep.is_null()).then_some(ep)
    }

    /// Sends message `id` to `peer`, not connected to, as a datagram if it may go so
    /// (see `datagram`); false: connect.
    #[cold]
    pub fn datagram(&self, peer: Rank, id: u32, header: &[u8], data: &[u8]) -> bool {
        self.datagrams
            .as_ref()
            .is_some_and(|d| d.send(peer, id, header, data))
    }

    /// The datagram socket, if the first messages go so.
    pub fn datagrams(&self) -> Option<&Datagrams> {
        self.datagrams.as_ref()
    }

    /// True once this rank has sent `peer` anything: over an endpoint, or as datagrams.
    pub fn contacted(&self, peer: Rank) -> bool {
        self.connected(peer) || self.datagrams.as_ref().is_some_and(|d| d.sent_to(peer))
    }

    /// The endpoint to `peer`, made at the first call for it; why UCX could not make
    /// it otherwise. `peer` is a rank of the job.
    #[inline]
    pub fn ep(&self, peer: Rank) -> Result<sys::ucp_ep_h, sys::ucs_status_t> {
        // ORDERING: Acquire pairs with the Release store in `make`: the endpoint and
        // its key are complete.
        let ep = self.eps[peer].load(Ordering::Acquire);
        if !ep.is_null() {
            return Ok(ep);
        }
        self.make(peer)
    }

    /// Where `peer`'s segment starts in its process (`peer` is a rank of the job).
    pub fn base(&self, peer: Rank) -> u64 {
        self.cards[peer].base
    }

    /// The endpoint to `peer` and its segment's key, as [`Net::ep`].
    pub fn ep_and_key(
        &self,
        peer: Rank,
    ) -> Result<(sys::ucp_ep_h, sys::ucp_rkey_h), sys::ucs_status_t> {
        let ep = self.ep(peer)?;
        // Relaxed: stored before the endpoint's Release store, which `ep` acquired.
        Ok((ep, self.rkeys[peer].load(Ordering::Relaxed)))
    }

    /// True once this rank has an endpoint to `peer`: it may have sent to it.
    pub fn connected(&self, peer: Rank) -> bool {
        // Relaxed: a hint for the goodbye, read by the thread that sends.
        self.eps
            .get(peer)
            .is_some_and(|e| !e.load(Ordering::Relaxed).is_null())
    }

    /// Makes the endpoint to `peer` and unpacks its key, once (see [`Net::ep`]).
    #[cold]
    fn make(&self, peer: Rank) -> Result<sys::ucp_ep_h, sys::ucs_status_t> {
        let _one = self.making.lock().unwrap_or_else(|e| e.into_inner());
        // ORDERING: Acquire, as in `ep`: another thread may have made it meanwhile.
        let made = self.eps[peer].load(Ordering::Acquire);
        if !made.is_null() {
            return Ok(made);
        }
        let (Some(on_error), Some(card)) = (self.on_error, self.cards.get(peer)) else {
            return Err(sys::UCS_ERR_NOT_CONNECTED);
        };
        if peer == self.me {
            // This rank's own messages never travel through UCX.
            return Err(sys::UCS_ERR_INVALID_PARAM);
        }
        let on_error = sys::ucp_err_handler_t {
            cb: Some(on_error),
            arg: (&self.error_args[peer] as *const ErrorArg)
                .cast_mut()
                .cast(),
        };
        // SAFETY: the error argument lives in `self`, which outlives the endpoint.
        let ep = unsafe { self.create_ep(&card.address, on_error) }?;
        let mut rkey = null_mut();
        // SAFETY: a live endpoint and the peer's packed key; written on success.
        let st = unsafe { (self.ucp.ucp_ep_rkey_unpack)(ep, card.rkey.as_ptr().cast(), &mut rkey) };
        if st != sys::UCS_OK {
            self.close(ep);
            return Err(st);
        }
        self.rkeys[peer].store(rkey, Ordering::Relaxed);
        if let Err(st) = self.resend(peer, ep) {
            self.close(ep);
            return Err(st);
        }
        // ORDERING: Release pairs with the Acquire loads in `ep` and `make`: the key
        // above is in place before the endpoint is seen.
        self.eps[peer].store(ep, Ordering::Release);
        Ok(ep)
    }

    /// Sends over `ep`, before anything else, the messages to `peer` that went as
    /// datagrams and were not acknowledged (the receiver takes those it had not). Does
    /// not wait for the peer: each message's bytes go with its request, freed when
    /// UCX is done with it.
    fn resend(&self, peer: Rank, ep: sys::ucp_ep_h) -> Result<(), sys::ucs_status_t> {
        /// A resent message's bytes: header (its sealed number), then the message.
        type Resent = (Vec<u8>, Vec<u8>);
        unsafe extern "C" fn done(request: *mut c_void, _: sys::ucs_status_t, bytes: *mut c_void) {
            // SAFETY: `bytes` is the box given with this request, freed once, here;
            // the request is UCX's, done with.
            unsafe {
                drop(Box::from_raw(bytes.cast::<Resent>()));
                // Loaded: this worker runs on it.
                if let Ok(ucp) = Ucp::get() {
                    (ucp.ucp_request_free)(request);
                }
            }
        }
        let Some(d) = &self.datagrams else {
            return Ok(());
        };
        for (header, body) in d.connecting(peer) {
            let bytes = Box::into_raw(Box::new((header, body)));
            let mut p = sys::ucp_request_param_t::empty();
            p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS
                | sys::UCP_OP_ATTR_FIELD_CALLBACK
                | sys::UCP_OP_ATTR_FIELD_USER_DATA;
            p.flags = sys::UCP_AM_SEND_FLAG_EAGER;
            p.cb = done as sys::ucp_send_nbx_callback_t as *mut c_void;
            p.user_data = bytes.cast();
            // SAFETY: a live endpoint; the bytes live until `done` frees them, or
            // below if UCX finished (or refused) at once and will not call it.
            let sent = unsafe {
                let (h, b) = &*bytes;
                StatusPtr::of((self.ucp.ucp_am_send_nbx)(
                    ep,
                    super::wire::AM_RESENT,
                    h.as_ptr().cast(),
                    h.len(),
                    b.as_ptr().cast(),
                    b.len(),
                    &p,
                ))
            };
            match sent {
                StatusPtr::Request(_) => {}
                // SAFETY: not handed to UCX: freed once, here.
                StatusPtr::Done => drop(unsafe { Box::from_raw(bytes) }),
                StatusPtr::Err(e) => {
                    // SAFETY: as above.
                    drop(unsafe { Box::from_raw(bytes) });
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Leaves the worker and the context to the process's exit: dropping this closes
    /// the endpoints this rank made but does not destroy the worker. For the end of a
    /// job whose process exits next: UCX 1.13 (`ucp_ep_purge_lanes`) asserts when it
    /// destroys a worker that still owes a peer a connection set-up reply on an
    /// endpoint it made for that peer, as a worker can at the end of a job that
    /// connects on first use; the exit frees it all the same.
    pub fn leave_to_exit(&self) {
        self.left_to_exit.store(true, Ordering::Relaxed);
    }

    /// True once [`Net::leave_to_exit`] was called.
    pub fn is_left_to_exit(&self) -> bool {
        self.left_to_exit.load(Ordering::Relaxed)
    }

    /// Closes `ep` at once (its pending operations are dropped), waiting a little.
    fn close(&self, ep: sys::ucp_ep_h) {
        let mut p = sys::ucp_request_param_t::empty();
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = sys::UCP_EP_CLOSE_FLAG_FORCE;
        // SAFETY: a live endpoint, closed once.
        let req = unsafe { (self.ucp.ucp_ep_close_nbx)(ep, &p) };
        let _ = self.wait(req, Duration::from_secs(2));
    }

    /// Progresses the worker once; true if something happened.
    pub fn progress(&self) -> bool {
        // SAFETY: a live worker (thread mode as in the `Send` impl).
        unsafe { (self.ucp.ucp_worker_progress)(self.worker) != 0 }
    }

    /// Sleeps until the worker has something to progress, or for `patience`: arms its
    /// event descriptor (`ucp_worker_arm`) and polls it. Returns at once if events are
    /// already waiting.
    pub fn sleep(&self, patience: Duration) {
        // SAFETY: a live worker made with UCP_FEATURE_WAKEUP.
        if unsafe { (self.ucp.ucp_worker_arm)(self.worker) } != sys::UCS_OK {
            return;
        }
        let fd = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let datagrams = self.datagrams.as_ref().map(|d| d.watch());
        let mut p = [fd(self.efd), fd(datagrams.as_ref().map_or(-1, |w| w.0))];
        let ms = patience.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: two valid pollfds (a negative descriptor is skipped).
        unsafe { libc::poll(p.as_mut_ptr(), 2, ms) };
        if let (Some(w), true) = (datagrams, p[1].revents != 0) {
            w.1.store(true, Ordering::Relaxed);
        }
    }

    /// Tests a request of this worker: `Ok(true)` once it completed (it is then freed:
    /// forget it), `Err` if it failed (freed too). A null request is done.
    pub fn done(&self, req: *mut c_void) -> Result<bool, sys::ucs_status_t> {
        if req.is_null() {
            return Ok(true);
        }
        // SAFETY: a request of this worker, not yet freed (the caller's).
        match unsafe { (self.ucp.ucp_request_check_status)(req) } {
            sys::UCS_INPROGRESS => Ok(false),
            st => {
                // SAFETY: complete; freed once (the caller forgets it).
                unsafe { (self.ucp.ucp_request_free)(req) };
                if st == sys::UCS_OK {
                    Ok(true)
                } else {
                    Err(st)
                }
            }
        }
    }

    /// Waits for `req` (a status pointer) to complete, progressing the worker, for at
    /// most `patience`.
    pub fn wait(
        &self,
        req: sys::ucs_status_ptr_t,
        patience: Duration,
    ) -> Result<(), sys::ucs_status_t> {
        self.wait_with(req, patience, || {})
    }

    /// [`Net::wait`], calling `between` after each look that found `req` not done.
    pub(super) fn wait_with(
        &self,
        req: sys::ucs_status_ptr_t,
        patience: Duration,
        between: impl Fn(),
    ) -> Result<(), sys::ucs_status_t> {
        let req = match StatusPtr::of(req) {
            StatusPtr::Done => return Ok(()),
            StatusPtr::Err(e) => return Err(e),
            StatusPtr::Request(r) => r,
        };
        let since = Instant::now();
        loop {
            self.progress();
            if self.done(req)? {
                return Ok(());
            }
            if since.elapsed() > patience {
                // SAFETY: freed once; UCX completes it internally.
                unsafe { (self.ucp.ucp_request_free)(req) };
                return Err(sys::UCS_ERR_BUSY);
            }
            between();
        }
    }

    /// What UCX says about the endpoint to `peer` (`ucp_ep_print_info`): its lanes and
    /// their transports and devices. Makes the endpoint if there is none yet.
    pub fn endpoint_info(&self, peer: Rank) -> Option<String> {
        let ep = (peer < self.eps.len())
            .then(|| self.ep(peer).ok())
            .flatten()?;
        let (mut buf, mut len) = (null_mut(), 0usize);
        // SAFETY: out-pointers for a memory stream, closed below.
        let f = unsafe { libc::open_memstream(&mut buf, &mut len) };
        if f.is_null() {
            return None;
        }
        // SAFETY: a live endpoint and stream.
        unsafe { (self.ucp.ucp_ep_print_info)(ep, f) };
        // SAFETY: closing flushes into `buf`, which we then own.
        unsafe { libc::fclose(f) };
        // SAFETY: `len` bytes at `buf`, then freed once (malloc'd by the stream).
        let text = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
        let s = String::from_utf8_lossy(text).into_owned();
        // SAFETY: as above.
        unsafe { libc::free(buf.cast()) };
        Some(s)
    }
}

fn cstring(s: &str) -> Result<CString, ConduitError> {
    CString::new(s).map_err(|_| ConduitError::Setup(format!("UCX setting {s:?} has a NUL byte")))
}

impl Drop for Net {
    fn drop(&mut self) {
        let ucp = self.ucp;
        for rkey in self.rkeys.iter().map(|k| k.load(Ordering::Relaxed)) {
            if !rkey.is_null() {
                // SAFETY: unpacked once, destroyed once, before its endpoint closes.
                unsafe { (ucp.ucp_rkey_destroy)(rkey) };
            }
        }
        let eps = self.eps.iter().map(|e| e.load(Ordering::Relaxed));
        for ep in eps.chain([self.loopback]).filter(|ep| !ep.is_null()) {
            self.close(ep);
        }
        if self.is_left_to_exit() {
            return;
        }
        if !self.memh.is_null() {
            // SAFETY: mapped once in `open`, unmapped once.
            unsafe { (ucp.ucp_mem_unmap)(self.context, self.memh) };
        }
        if !self.worker.is_null() {
            // SAFETY: made in `open`, destroyed once after its endpoints.
            unsafe { (ucp.ucp_worker_destroy)(self.worker) };
        }
        // SAFETY: made in `open`, cleaned up once, last.
        unsafe { (ucp.ucp_cleanup)(self.context) };
    }
}
