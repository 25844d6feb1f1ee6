//! A rank's first messages to a peer it has no endpoint to travel as UDP datagrams:
//! UCX's connection set-up costs some sixty round trips over tcp (a blocking connect,
//! UCX's own request and reply, an endpoint made at each end), a datagram one trip. A
//! pair that goes on talking connects; one that exchanges a few messages never does.
//!
//! ```text
//!   datagram  "aD" | kind | acknowledged | 0 | source u32 | number u64
//!     [an acknowledgement, if acknowledged = 1]
//!     message (kind 0)  id u32 | header bytes u32 | header (sealed as over UCX) | data
//!   acknowledgement     w0 = source, w1 = the next number it takes | its MAC (Auth::seal_ack)
//!                       (kind 1: alone)
//! ```
//!
//! The receiver takes a source's messages in the order of their numbers (the next
//! one only) and acknowledges what it holds: in its next datagram to that source, or
//! alone once it has owed it [`ACK_DELAY`] (so that a stream of datagrams gets one
//! acknowledgement in that time, not one each, and each wakes its sleeping sender
//! less often), or when it leaves; the sender keeps each message until it is
//! acknowledged. It connects when one waits past [`ACK_WITHIN`], when the pair's
//! [`FIRST_MESSAGES`] are spent, when a message does not fit one datagram
//! ([`MAX_BYTES`]) or when something needs the endpoint (a put, a flush): it then
//! sends the messages not yet acknowledged again over the endpoint (AM id 6, with
//! their numbers: the receiver takes those it had not), before anything else. A lost
//! datagram is a connection made sooner, never a message lost, and a peer that
//! cannot be reached is that connection's error.

use super::conduit::UcxConduit;
use super::net::Net;
use super::rx::{fault, Shared};
use super::wire;
use crate::conduit::{FaultKind, Rank};
use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Messages a rank sends a peer as datagrams before it connects to it.
///
/// ```
/// // A barrier's or an all-to-all's few messages per pair make no connection.
/// assert!(amrq::conduit::ucx::FIRST_MESSAGES >= 16);
/// ```
pub const FIRST_MESSAGES: u64 = 64;
/// The largest message (header and data) that goes as a datagram: one that fits an
/// IPv6 minimum MTU, so that no datagram is cut into fragments, any of which lost
/// loses it (a batch of more goes over a connection: a pair that streams connects).
///
/// ```
/// // A Short message goes as one datagram; a full batch of small ones does not.
/// use amrq::conduit::ucx::MAX_BYTES;
/// assert!(MAX_BYTES >= 256 && MAX_BYTES < 8 << 10);
/// ```
pub const MAX_BYTES: usize = 1200;
/// How long a datagram may wait for its acknowledgement before it is sent again
/// (twice as long each time after): longer than a rank waits for a core on a crowded
/// host, so that what is sent again was lost, not waiting for its receiver to run.
pub const ACK_WITHIN: Duration = Duration::from_millis(200);
/// Times the datagrams to a peer are sent again before their sender connects to it
/// instead, as long again after the last (3 s in all: a receiver that computes that
/// long without looking gets a connection, over which UCX delivers without it).
pub const TRIES: u32 = 3;
/// How long an acknowledgement waits for a datagram to go with before it goes alone
/// (a sender that flushes waits as long).
pub const ACK_DELAY: Duration = Duration::from_millis(1);
/// Progress looks at the socket once every this many calls, or at each while an
/// acknowledgement is awaited or a sleep saw it readable: a look is a system call.
const LOOK_EVERY: u32 = 8;

const MAGIC: [u8; 2] = *b"aD";
const PREFIX: usize = 16;
const MESSAGE: u8 = 0;
const ACK: u8 = 1;
/// Bytes of a sealed acknowledgement.
const ACK_BYTES: usize = 16 + super::auth::TRAILER;
/// The largest datagram.
const MAX_DATAGRAM: usize = PREFIX + ACK_BYTES + 8 + MAX_BYTES;

/// What a rank sent a peer as datagrams.
#[derive(Default)]
struct Tx {
    /// The next message's number.
    next: u64,
    /// Sent, not yet acknowledged: number, body (id, header length, header, data),
    /// when sent.
    unacked: VecDeque<(u64, Vec<u8>, Instant)>,
    /// Times they were sent again since the last acknowledgement.
    tries: u32,
    /// No more datagrams: it connects, or has.
    done: bool,
}

/// A rank's datagram socket and what it sent through it.
pub struct Datagrams {
    sock: UdpSocket,
    me: u32,
    /// Per peer: where its socket is (`None`: it has none; connect at once).
    peers: Vec<Option<SocketAddr>>,
    tx: Mutex<Sent>,
    /// Messages sent and not acknowledged, all peers.
    waiting: AtomicUsize,
    looks: AtomicU32,
    /// A sleep found the socket readable: look at the next progress.
    readable: Arc<AtomicBool>,
    /// Acknowledgements owed, each to go with the next datagram to its peer or
    /// alone at the next look.
    owed: Mutex<Vec<(Rank, [u8; ACK_BYTES], Instant)>>,
    /// Per peer: it sent here over a connection; this rank connects to it too, so
    /// that both ends of a pair's connection are set up while both use it.
    reached: Reached,
    /// `owed` is not empty.
    owing: AtomicBool,
    /// What a look reads into.
    buf: Mutex<Vec<u8>>,
}

/// Per peer: it sent here over a connection (set by the UCX callbacks, read by the
/// sends).
pub type Reached = Arc<[AtomicBool]>;

/// Per source, the numbered messages this rank took from it: each one's MAC nonce,
/// by number (so the next number is their count). A message that comes again under
/// its number is known by its nonce; a message played again under another number is
/// not.
#[derive(Default)]
pub struct Numbered(Mutex<Vec<Vec<u64>>>);

impl Numbered {
    /// For a job of `size` ranks.
    pub fn new(size: usize) -> Self {
        Self(Mutex::new(vec![Vec::new(); size]))
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Vec<u64>>> {
        lock(&self.0)
    }
}

impl Datagrams {
    /// A socket on the address of the one network device UCX was told to use
    /// (`UCX_NET_DEVICES` in `settings` or the environment), so that datagrams go where
    /// UCX would; else on every address of this host. Any port.
    pub fn open(settings: &[(String, String)], reached: Reached) -> io::Result<Self> {
        let devices = super::start::ucx_setting(settings, "NET_DEVICES").unwrap_or_default();
        let one = (!devices.contains(',')).then(|| devices.split(':').next().unwrap_or(""));
        let ip = crate::bootstrap::network::ipv4_interfaces()
            .into_iter()
            .find(|(name, _)| Some(name.as_str()) == one)
            .map_or(Ipv4Addr::UNSPECIFIED, |(_, ip)| ip);
        let sock = UdpSocket::bind((ip, 0))?;
        sock.set_nonblocking(true)?;
        Ok(Self {
            sock,
            me: 0,
            peers: Vec::new(),
            tx: Mutex::new(Sent::default()),
            waiting: AtomicUsize::new(0),
            looks: AtomicU32::new(0),
            readable: Arc::new(AtomicBool::new(false)),
            owed: Mutex::new(Vec::new()),
            owing: AtomicBool::new(false),
            reached,
            buf: Mutex::new(Vec::new()),
        })
    }

    /// Where peers send to.
    pub fn address(&self) -> Option<SocketAddr> {
        self.sock.local_addr().ok()
    }

    /// The socket's descriptor, for a sleep to watch, and the flag a sleep sets when
    /// it is readable.
    pub fn watch(&self) -> (i32, Arc<AtomicBool>) {
        (self.sock.as_raw_fd(), self.readable.clone())
    }

    /// Rank `me`'s peers' sockets (index = rank).
    pub fn connect(&mut self, me: Rank, peers: Vec<Option<SocketAddr>>) {
        self.me = me as u32;
        self.tx.get_mut().unwrap_or_else(|e| e.into_inner()).peers =
            peers.iter().map(|_| Tx::default()).collect();
        self.peers = peers;
    }

    fn tx(&self) -> MutexGuard<'_, Sent> {
        lock(&self.tx)
    }

    /// Sends message `id` (its sealed `header` and `data`) to `dest` as a datagram if
    /// the pair has not connected and it fits; false: connect and send it over the
    /// endpoint.
    pub fn send(&self, dest: Rank, id: u32, header: &[u8], data: &[u8]) -> bool {
        let Some(Some(to)) = self.peers.get(dest) else {
            return false;
        };
        if header.len() + data.len() > MAX_BYTES {
            return false;
        }
        let mut sent = self.tx();
        let t = &mut sent.peers[dest];
        // ORDERING: Relaxed: a hint; a datagram sent after the peer connected is
        // taken in its order all the same.
        if t.done || t.next >= FIRST_MESSAGES || self.reached[dest].load(Ordering::Relaxed) {
            return false;
        }
        let mut body = Vec::with_capacity(8 + header.len() + data.len());
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(&(header.len() as u32).to_le_bytes());
        body.extend_from_slice(header);
        body.extend_from_slice(data);
        let ack = self.take_owed(dest);
        let p = prefix(MESSAGE, ack.is_some(), self.me, t.next);
        let d = [&p[..], ack.as_ref().map_or(&[][..], |a| &a[..]), &body].concat();
        // A full socket buffer, or a host the kernel knows it cannot reach: connect,
        // which waits for room or says why.
        if self.sock.send_to(&d, to).is_err() {
            return false;
        }
        if t.unacked.is_empty() {
            sent.waiting_on.push(dest);
        }
        let t = &mut sent.peers[dest];
        t.unacked.push_back((t.next, body, Instant::now()));
        t.next += 1;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The acknowledgement owed to `peer`, taken.
    fn take_owed(&self, peer: Rank) -> Option<[u8; ACK_BYTES]> {
        let mut owed = lock(&self.owed);
        let at = owed.iter().position(|o| o.0 == peer)?;
        let ack = owed.swap_remove(at).1;
        self.owing.store(!owed.is_empty(), Ordering::Relaxed);
        Some(ack)
    }

    /// Owes `peer` acknowledgement `ack`, in place of an older one.
    fn owe(&self, peer: Rank, ack: [u8; ACK_BYTES]) {
        let mut owed = lock(&self.owed);
        match owed.iter_mut().find(|o| o.0 == peer) {
            Some(o) => o.1 = ack,
            None => owed.push((peer, ack, Instant::now())),
        }
        self.owing.store(true, Ordering::Relaxed);
    }

    /// Sends each acknowledgement owed for [`ACK_DELAY`] (`all`: every one), alone.
    pub fn acknowledge(&self, all: bool) {
        if !self.owing() {
            return;
        }
        let due = {
            let mut owed = lock(&self.owed);
            let (due, kept) = std::mem::take(&mut *owed)
                .into_iter()
                .partition(|o| all || o.2.elapsed() >= ACK_DELAY);
            *owed = kept;
            self.owing.store(!owed.is_empty(), Ordering::Relaxed);
            due
        };
        for (peer, ack, _) in due {
            if let Some(Some(to)) = self.peers.get(peer) {
                let a = [&prefix(ACK, false, self.me, 0)[..], &ack].concat();
                // A lost acknowledgement makes the sender connect: nothing to do.
                let _ = self.sock.send_to(&a, to);
            }
        }
    }

    /// True once this rank sent `peer` a datagram.
    pub fn sent_to(&self, peer: Rank) -> bool {
        self.tx().peers.get(peer).is_some_and(|t| t.next > 0)
    }

    /// True if messages wait for their acknowledgement.
    pub fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    /// True if acknowledgements are owed.
    pub fn owing(&self) -> bool {
        self.owing.load(Ordering::Relaxed)
    }

    /// True if this progress call should look at the socket.
    #[inline]
    pub fn due(&self) -> bool {
        self.waiting()
            || self.owing()
            || (self.readable.load(Ordering::Relaxed)
                && self.readable.swap(false, Ordering::Relaxed))
            || self
                .looks
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(LOOK_EVERY)
    }

    /// The messages to `peer` not acknowledged, in order, to send again over the
    /// endpoint being made; no datagram goes to it after this.
    pub fn connecting(&self, peer: Rank) -> Vec<(u64, Vec<u8>)> {
        let mut sent = self.tx();
        let Some(t) = sent.peers.get_mut(peer) else {
            return Vec::new();
        };
        t.done = true;
        self.waiting.fetch_sub(t.unacked.len(), Ordering::Relaxed);
        let unacked = t.unacked.drain(..).map(|(n, b, _)| (n, b)).collect();
        sent.waiting_on.retain(|&p| p != peer);
        unacked
    }

    /// Sends again the datagrams that waited too long for their acknowledgement;
    /// returns the peers that have not acknowledged after [`TRIES`] times: connect.
    fn late(&self) -> Vec<Rank> {
        let mut sent = self.tx();
        let Sent { peers, waiting_on } = &mut *sent;
        let mut connect = Vec::new();
        for &p in waiting_on.iter() {
            let (t, Some(Some(to))) = (&mut peers[p], self.peers.get(p)) else {
                continue;
            };
            let patience = ACK_WITHIN * (1 << t.tries.min(TRIES));
            if t.unacked.front().is_none_or(|m| m.2.elapsed() < patience) {
                continue;
            }
            if t.tries == TRIES {
                connect.push(p);
                continue;
            }
            t.tries += 1;
            for (number, body, at) in t.unacked.iter_mut() {
                let d = [&prefix(MESSAGE, false, self.me, *number)[..], body].concat();
                // Lost again: sent again later, or over a connection.
                let _ = self.sock.send_to(&d, to);
                *at = Instant::now();
            }
        }
        connect
    }

    /// `peer` has taken every message numbered below `next`.
    fn acked(&self, peer: Rank, next: u64) {
        let mut sent = self.tx();
        let Some(t) = sent.peers.get_mut(peer) else {
            return;
        };
        let before = t.unacked.len();
        while t.unacked.front().is_some_and(|m| m.0 < next) {
            t.unacked.pop_front();
        }
        if t.unacked.len() < before {
            t.tries = 0;
            self.waiting
                .fetch_sub(before - t.unacked.len(), Ordering::Relaxed);
        }
        if t.unacked.is_empty() {
            sent.waiting_on.retain(|&p| p != peer);
        }
    }
}

/// What a rank sent as datagrams, per peer, and the peers whose acknowledgement it
/// waits for.
#[derive(Default)]
struct Sent {
    peers: Vec<Tx>,
    waiting_on: Vec<Rank>,
}

/// A lock whose holder never leaves its data half-changed.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn prefix(kind: u8, acknowledged: bool, source: u32, number: u64) -> [u8; PREFIX] {
    let mut p = [0u8; PREFIX];
    p[..2].copy_from_slice(&MAGIC);
    p[2] = kind;
    p[3] = acknowledged as u8;
    p[4..8].copy_from_slice(&source.to_le_bytes());
    p[8..].copy_from_slice(&number.to_le_bytes());
    p
}

/// A look at the socket: the acknowledgements owed for [`ACK_DELAY`] go out, every
/// datagram that came is taken, and what it brought is acknowledged (owed); datagrams
/// whose acknowledgement is late are sent again, and peers that have not acknowledged
/// after [`TRIES`] times are connected to (`connect`, which sends them over the
/// connection).
pub fn look(d: &Datagrams, shared: &Shared, connect: impl Fn(Rank) -> Result<(), String>) {
    d.acknowledge(false);
    let mut buf = lock(&d.buf);
    buf.resize(MAX_DATAGRAM, 0);
    let mut from: Vec<Rank> = Vec::new();
    while let Ok(n) = d.sock.recv(&mut buf) {
        let got = &buf[..n];
        let head = (n >= PREFIX && got[..2] == MAGIC).then(|| {
            let source = u32::from_le_bytes(got[4..8].try_into().expect("4 bytes")) as usize;
            let number = u64::from_le_bytes(got[8..16].try_into().expect("8 bytes"));
            (got[2], got[3] == 1, source, number)
        });
        let (ack, rest) = match head {
            Some((_, true, _, _)) | Some((ACK, _, _, _)) if n >= PREFIX + ACK_BYTES => {
                let (a, rest) = got[PREFIX..].split_at(ACK_BYTES);
                (Some(a), rest)
            }
            _ => (None, got.get(PREFIX..).unwrap_or(&[])),
        };
        if let Some((peer, next)) = ack.and_then(|a| shared.auth.open_ack(a)) {
            d.acked(peer, next);
        }
        match head {
            Some((MESSAGE, _, source, number)) if source < d.peers.len() => {
                shared.on_numbered(source, number, rest);
                if !from.contains(&source) {
                    from.push(source);
                }
            }
            Some((ACK, ..)) if ack.is_some() => {}
            _ => {
                let what = "a datagram amrq does not write";
                shared
                    .faults
                    .record(fault(None, 0, FaultKind::BadRuntimeMessage { what }));
            }
        }
    }
    drop(buf);
    for peer in from {
        let next = shared.numbered.lock()[peer].len() as u64;
        let words = [d.me as u64, next];
        let body = wire::as_bytes(&words);
        let mut ack = [0u8; ACK_BYTES];
        ack[..16].copy_from_slice(body.as_slice());
        ack[16..].copy_from_slice(&shared.auth.seal_ack(peer, body.as_slice()));
        d.owe(peer, ack);
    }
    for peer in d.late() {
        // A peer that said goodbye takes nothing more; one that failed is reported.
        if shared.has_left(peer) || shared.has_failed(peer) {
            d.connecting(peer);
        } else if let Err(why) = connect(peer) {
            shared.on_error(peer, why);
        }
    }
}

/// Takes the datagrams that came and acknowledges them; connects to the peers whose
/// acknowledgement is late (see `datagram`).
pub fn look_at(net: &Net, shared: &Shared) {
    if let Some(d) = net.datagrams() {
        look(d, shared, |peer| {
            let made = net.ep(peer);
            made.map(drop)
                .map_err(|st| shared.lost(peer, &net.ucp.status(st)))
        });
    }
}

impl UcxConduit {
    /// Progresses until every message sent as a datagram was acknowledged, or sent
    /// again over an endpoint (a peer that does not acknowledge is connected to), for
    /// `patience` at most.
    pub(super) fn settle_datagrams(&self, patience: Duration) {
        if let Some(d) = self.net.datagrams() {
            d.acknowledge(true);
        }
        let since = Instant::now();
        while self.net.datagrams().is_some_and(|d| d.waiting()) && since.elapsed() < patience {
            self.progress();
        }
    }
}

impl Shared {
    /// A message numbered `number` from `source` came as a datagram or again over an
    /// endpoint (`body`: id, header length, header, data): taken if it is the next
    /// one and its MAC proves `source`; another is dropped (one taken before, or
    /// after a lost one, which its sender sends again), or recorded as a fault if its
    /// MAC is not `source`'s.
    /// Returns `source` if its MAC proved it.
    pub fn on_numbered(&self, source: Rank, number: u64, body: &[u8]) -> Option<Rank> {
        let mut numbered = self.numbered.lock();
        let taken = numbered.get_mut(source)?;
        let parsed = body.get(..8).and_then(|w| {
            let id = u32::from_le_bytes(w[..4].try_into().ok()?);
            let h = u32::from_le_bytes(w[4..].try_into().ok()?) as usize;
            let header = body.get(8..8usize.checked_add(h)?)?;
            Some((id, header, &body[8 + h..]))
        });
        let Some((id, header, data)) = parsed else {
            let what = "a datagram message amrq does not write";
            let f = fault(Some(source), 0, FaultKind::BadRuntimeMessage { what });
            self.faults.record(f);
            return None;
        };
        let nonce = header
            .len()
            .checked_sub(super::auth::TRAILER)
            .and_then(|n| Some(u64::from_le_bytes(header.get(n..n + 8)?.try_into().ok()?)));
        // Sealed by `source`, or not taken: a message relabelled would stall the
        // numbers of the source it names.
        match self.vouched(id, header, data) {
            Some(r) if r != source => {
                self.faults
                    .record(fault(Some(source), 0, FaultKind::Unproven));
                None
            }
            Some(_) if number == taken.len() as u64 => {
                let taken_now = self.deliver(id, header, data, false) == Some(source);
                if taken_now {
                    taken.push(nonce.unwrap_or(0));
                }
                taken_now.then_some(source)
            }
            // Taken before under this number: sent again. Under another: played again.
            Some(_) if number < taken.len() as u64 => {
                let again = nonce == Some(taken[number as usize]);
                if !again {
                    self.faults
                        .record(fault(Some(source), 0, FaultKind::Unproven));
                }
                again.then_some(source)
            }
            // After a lost one: its sender sends both again. Refused: recorded.
            _ => None,
        }
    }

    /// A message sent first as a datagram came again over a connection (AM id 6):
    /// `header` is its source and number, `body` the message; `rndv`: not sent
    /// eagerly, which this conduit never does.
    pub fn on_resent(&self, header: &[u8], body: &[u8], rndv: bool) {
        let w: Vec<u64> = wire::words(header).collect();
        match (rndv, &w[..]) {
            (false, &[source, number]) if header.len() == 16 => {
                let source = source.min(usize::MAX as u64) as usize;
                self.reached_from(self.on_numbered(source, number, body));
            }
            _ => {
                let what = "a UCX resent message amrq does not write";
                let f = fault(None, 0, FaultKind::BadRuntimeMessage { what });
                self.faults.record(f);
            }
        }
    }

    /// Notes that `source` (if any) sent here over a connection.
    pub fn reached_from(&self, source: Option<Rank>) {
        if let Some(r) = source.and_then(|r| self.reached.get(r)) {
            // ORDERING: Relaxed: see `Datagrams::send`.
            r.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
