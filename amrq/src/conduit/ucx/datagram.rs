//! A rank's first messages to a peer it has no endpoint to travel as UDP datagrams:
//! UCX's connection set-up costs some sixty round trips over tcp (a blocking connect,
//! UCX's own request and reply, an endpoint made at each end), a datagram one trip. A
//! pair that goes on talking connects; one that exchanges a few messages never does.
//!
//! ```text
//!   datagram  "aD" | kind | acknowledged
//!     [an acknowledgement, if acknowledged = 1]
//!     message (kind 0)  its number | id u32 | header bytes u32 | header (sealed as
//!                       over UCX) | data
//!   acknowledgement     [source, the next number it takes] sealed (Auth::seal_note)
//!                       (kind 1: alone)
//!   number              [source, number, the message's nonce] sealed
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

use super::auth::{nonce_of, Auth, ACK_NOTE, NUMBER_NOTE, TRAILER};
use super::conduit::UcxConduit;
use super::net::Net;
use super::rx::{fault, Shared};
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
/// The largest message (header and data) that goes as a datagram: with its prefix,
/// acknowledgement and sealed number, a datagram of at most 1 300 bytes, which an
/// IPv4 path of Ethernet's MTU or a usual tunnel's (1 400) carries uncut, so that no
/// datagram is cut into fragments, any of which lost loses it (a batch of more goes
/// over a connection: a pair that streams connects).
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
const PREFIX: usize = 4;
const MESSAGE: u8 = 0;
const ACK: u8 = 1;
/// Bytes of a sealed acknowledgement.
const ACK_BYTES: usize = 16 + TRAILER;
/// Bytes of a sealed number.
pub const NUMBER_BYTES: usize = 24 + TRAILER;
/// The largest datagram (as [`MAX_BYTES`] says).
const MAX_DATAGRAM: usize = PREFIX + ACK_BYTES + NUMBER_BYTES + 8 + MAX_BYTES;
const _: () = assert!(MAX_DATAGRAM <= 1300);

/// What a rank sent a peer as datagrams.
#[derive(Default)]
struct Tx {
    /// The next message's number.
    next: u64,
    /// Sent, not yet acknowledged, in order.
    unacked: VecDeque<Unacked>,
    /// Times they were sent again since the last acknowledgement.
    tries: u32,
    /// No more datagrams: it connects, or has.
    done: bool,
}

/// A message sent as a datagram, kept until it is acknowledged.
struct Unacked {
    number: u64,
    /// Its number, sealed.
    note: Vec<u8>,
    /// Id, header length, header, data.
    body: Vec<u8>,
    sent: Instant,
}

/// A rank's datagram socket and what it sent through it.
pub struct Datagrams {
    sock: UdpSocket,
    me: u32,
    /// Seals numbers and acknowledgements.
    auth: Arc<Auth>,
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
/// its number is known by its nonce; one cannot come under another number, which is
/// sealed with its nonce.
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
    pub fn open(
        settings: &[(String, String)],
        reached: Reached,
        auth: Arc<Auth>,
    ) -> io::Result<Self> {
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
            auth,
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
        // The message's nonce, bound to its number.
        let nonce = nonce_of(header).unwrap_or(0);
        let note = self
            .auth
            .seal_note(dest, NUMBER_NOTE, [self.me as u64, t.next, nonce]);
        let ack = self.take_owed(dest);
        let p = prefix(MESSAGE, ack.is_some());
        let d = [
            &p[..],
            ack.as_ref().map_or(&[][..], |a| &a[..]),
            &note,
            &body,
        ]
        .concat();
        // A full socket buffer, or a host the kernel knows it cannot reach: connect,
        // which waits for room or says why.
        if self.sock.send_to(&d, to).is_err() {
            if let Some(a) = ack {
                self.owe(dest, a);
            }
            return false;
        }
        if t.unacked.is_empty() {
            sent.waiting_on.push(dest);
        }
        let t = &mut sent.peers[dest];
        t.unacked.push_back(Unacked {
            number: t.next,
            note,
            body,
            sent: Instant::now(),
        });
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
                let a = [&prefix(ACK, false)[..], &ack].concat();
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

    /// The messages to `peer` not acknowledged (each its sealed number and body), in
    /// order, to send again over the endpoint being made; no datagram goes to it
    /// after this.
    pub fn connecting(&self, peer: Rank) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut sent = self.tx();
        let Some(t) = sent.peers.get_mut(peer) else {
            return Vec::new();
        };
        t.done = true;
        self.waiting.fetch_sub(t.unacked.len(), Ordering::Relaxed);
        let unacked = t.unacked.drain(..).map(|u| (u.note, u.body)).collect();
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
            if t.unacked
                .front()
                .is_none_or(|m| m.sent.elapsed() < patience)
            {
                continue;
            }
            if t.tries == TRIES {
                connect.push(p);
                continue;
            }
            t.tries += 1;
            for u in t.unacked.iter_mut() {
                let d = [&prefix(MESSAGE, false)[..], &u.note, &u.body].concat();
                // Lost again: sent again later, or over a connection.
                let _ = self.sock.send_to(&d, to);
                u.sent = Instant::now();
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
        while t.unacked.front().is_some_and(|m| m.number < next) {
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

/// A numbered message too short for its parts, or whose sealed number names no rank.
const BAD_NUMBER: FaultKind = FaultKind::BadRuntimeMessage {
    what: "a numbered message amrq does not write",
};

/// A lock whose holder never leaves its data half-changed.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn prefix(kind: u8, acknowledged: bool) -> [u8; PREFIX] {
    [MAGIC[0], MAGIC[1], kind, acknowledged as u8]
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
        let head = (n >= PREFIX && got[..2] == MAGIC).then(|| (got[2], got[3] == 1));
        let (ack, rest) = match head {
            Some((_, true)) | Some((ACK, _)) if n >= PREFIX + ACK_BYTES => {
                let (a, rest) = got[PREFIX..].split_at(ACK_BYTES);
                (Some(a), rest)
            }
            _ => (None, got.get(PREFIX..).unwrap_or(&[])),
        };
        if let Some([peer, next]) = ack.and_then(|a| d.auth.open_note(ACK_NOTE, a)) {
            d.acked(peer as usize, next);
        }
        match head {
            Some((MESSAGE, _)) if rest.len() >= NUMBER_BYTES => {
                let (note, body) = rest.split_at(NUMBER_BYTES);
                // Acknowledged to the source its sealed number proves, whatever came.
                if let Some(source) = shared.on_numbered(note, body) {
                    if !from.contains(&source) {
                        from.push(source);
                    }
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
        let ack = d.auth.seal_note(peer, ACK_NOTE, [d.me as u64, next]);
        d.owe(peer, ack.try_into().expect("an acknowledgement's size"));
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

/// [`look_at`] by a leaving rank: what it takes is acknowledged at once (the process
/// may exit next; a sender left waiting would connect to a rank gone).
pub fn look_at_leaving(net: &Net, shared: &Shared) {
    look_at(net, shared);
    if let Some(d) = net.datagrams() {
        d.acknowledge(true);
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
    /// A numbered message came as a datagram or again over an endpoint: `note` its
    /// source, number and nonce, sealed; `body` the message (id, header length,
    /// header, data). Taken if it is the next one from its source, its note and its
    /// MAC prove that source and the note names its nonce; one taken before is
    /// dropped, as is one after a lost one (its sender sends both again); one
    /// unproven, or played again under another number, is recorded as a fault.
    /// Returns the source its note proved, whether the message was taken or not.
    pub fn on_numbered(&self, note: &[u8], body: &[u8]) -> Option<Rank> {
        let record = |source: Option<Rank>, kind| self.faults.record(fault(source, 0, kind));
        let Some([source, number, bound]) = self.auth.open_note(NUMBER_NOTE, note) else {
            let claimed = note
                .get(..8)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8")));
            let claimed = claimed.and_then(|c| usize::try_from(c).ok());
            match claimed.filter(|&c| c < self.reached.len()) {
                Some(c) => record(Some(c), FaultKind::Unproven),
                None => record(None, BAD_NUMBER),
            }
            return None;
        };
        let source = usize::try_from(source).ok()?;
        let mut numbered = self.numbered.lock();
        let taken = numbered.get_mut(source)?;
        let parsed = body.get(..8).and_then(|w| {
            let id = u32::from_le_bytes(w[..4].try_into().ok()?);
            let h = u32::from_le_bytes(w[4..].try_into().ok()?) as usize;
            let header = body.get(8..8usize.checked_add(h)?)?;
            Some((id, header, &body[8 + h..]))
        });
        let Some((id, header, data)) = parsed else {
            record(Some(source), BAD_NUMBER);
            return Some(source);
        };
        // Sealed by `source`, under the nonce its number names, or not taken: a
        // message relabelled would stall or lose the numbers of the source it names.
        let next = taken.len() as u64;
        match self.vouched(id, header, data) {
            Some(r) if r != source || nonce_of(header) != Some(bound) => {
                record(Some(source), FaultKind::Unproven);
            }
            Some(_) if number == next && self.deliver(id, header, data, false) == Some(source) => {
                taken.push(bound);
            }
            // Another message under a number taken: its source numbers wrongly.
            Some(_) if number < next && taken[number as usize] != bound => {
                record(Some(source), FaultKind::Unproven);
            }
            // Taken before (sent again), after a lost one (its sender sends both
            // again), or refused (recorded): dropped.
            _ => {}
        }
        Some(source)
    }

    /// A message sent first as a datagram came again over a connection (AM id 6):
    /// `header` is its sealed number (see [`Shared::on_numbered`]), `body` the
    /// message; `rndv`: not sent eagerly, which this conduit never does.
    pub fn on_resent(&self, header: &[u8], body: &[u8], rndv: bool) {
        if rndv || header.len() != NUMBER_BYTES {
            let what = "a UCX resent message amrq does not write";
            let f = fault(None, 0, FaultKind::BadRuntimeMessage { what });
            return self.faults.record(f);
        }
        self.reached_from(self.on_numbered(header, body));
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
