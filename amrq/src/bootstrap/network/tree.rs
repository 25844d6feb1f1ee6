//! The job's set-up tree across hosts. Rank 0 admits every rank (the key proof of the
//! parent module) and places the `k`-th one it admits at position `k` of a heap of
//! fan-out [`FANOUT`](crate::util::heap_tree::FANOUT) over the order of admission, so that a rank's parent has always
//! joined before it: rank 0 tells it its parent's rank and address, and keeps the
//! joining connection only to its own children. The job's table and every set-up
//! all-gather then go up and down this tree: a rank holds at most `FANOUT + 1`
//! connections and sends at most `FANOUT + 1` copies of a table, whatever the job's
//! size.
//!
//! ```text
//!   child (at position k)                                   its parent
//!   Tree { rank, k, nonce_c }                        ──▶    (expects positions FANOUT·p+1 …)
//!                                                    ◀──    nonce_p, MAC("tree parent", nonce_c, nonce_p, k, rank)
//!   MAC("tree child", nonce_p, nonce_c, k, rank)     ──▶
//!   then every message, either way: length, bytes, MAC(the nonces, its direction, its number, bytes)
//! ```

use super::super::key::{random_bytes, same_mac};
use super::super::rendezvous::{Terms, Wire, ANSWER_WITHIN};
use super::super::{BootError, JobKey};
use super::{read_blob, read_wire};
use crate::util::heap_tree::{children_of, parent_of};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const TREE: u64 = u64::from_le_bytes(*b"amrqTRE1");
const TREE_HELLO_BYTES: usize = 40;

/// One edge of the tree: every message carries a MAC under the job key bound to both
/// ends' nonces, its direction and its number, so that a process without the key can
/// neither inject a message nor replay or reorder one.
#[derive(Debug)]
pub(super) struct Link {
    stream: TcpStream,
    /// The rank at the other end.
    pub(super) peer: usize,
    key: JobKey,
    /// The job's id, the parent's nonce and the child's.
    seal: Vec<u8>,
    /// True at the child's end: its messages go up.
    child_end: bool,
    sent: u64,
    got: u64,
}

impl Link {
    /// The edge over `stream` to `peer`, proven by both nonces.
    pub(super) fn new(
        stream: TcpStream,
        peer: usize,
        t: &Terms,
        nonces: (&[u8; 16], &[u8; 16]),
        child_end: bool,
    ) -> Self {
        let _ = stream.set_nodelay(true);
        let seal = [t.id.as_bytes(), nonces.0, nonces.1].concat();
        Self {
            stream,
            peer,
            key: t.key,
            seal,
            child_end,
            sent: 0,
            got: 0,
        }
    }

    fn mac(&self, up: bool, n: u64, bytes: &[u8]) -> [u8; 32] {
        let way: &[u8] = if up { b"up" } else { b"down" };
        self.key
            .mac("tree", &[&self.seal, way, &n.to_le_bytes(), bytes])
    }

    /// Sends `bytes`, with their length and MAC, in one write.
    pub(super) fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "oversized"))?;
        let mac = self.mac(self.child_end, self.sent, bytes);
        self.sent += 1;
        let all = [&len.to_le_bytes()[..], bytes, &mac].concat();
        self.stream.write_all(&all)
    }

    /// The next message from the other end; one without the right MAC is an
    /// [`io::ErrorKind::InvalidData`] error.
    pub(super) fn read(&mut self) -> io::Result<Vec<u8>> {
        let b = read_blob(&mut self.stream)?;
        let mut mac = [0u8; 32];
        self.stream.read_exact(&mut mac)?;
        if !same_mac(&mac, &self.mac(!self.child_end, self.got, &b)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a message without the job key's MAC",
            ));
        }
        self.got += 1;
        Ok(b)
    }

    /// Ends the edge both ways: the other end's next read ends at once.
    pub(super) fn hang_up(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    /// How long a read waits for the other end.
    pub(super) fn set_patience(&self, wait: Duration) {
        let _ = self.stream.set_read_timeout(Some(wait));
    }
}

/// Where rank 0 placed a joiner: its position, and its parent's rank and tree address
/// (empty when the parent is rank 0, which keeps the joining connection as the edge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placement {
    pub(super) k: usize,
    pub(super) parent: usize,
    pub(super) at: String,
}

impl Placement {
    /// The placement of the `k`-th rank admitted, `order` holding the ranks admitted
    /// so far by position and `tree_at` every admitted rank's tree address.
    pub(super) fn of(k: usize, order: &[usize], tree_at: &[String]) -> Self {
        let p = parent_of(k).unwrap_or(0);
        let parent = order[p];
        let at = if p == 0 {
            String::new()
        } else {
            tree_at[parent].clone()
        };
        Self { k, parent, at }
    }

    fn mac(&self, t: &Terms, nonce_j: &[u8; 16]) -> [u8; 32] {
        t.key.mac(
            "place",
            &[
                t.id.as_bytes(),
                nonce_j,
                &(self.k as u64).to_le_bytes(),
                &(self.parent as u64).to_le_bytes(),
                self.at.as_bytes(),
            ],
        )
    }

    /// Rank 0 tells a joiner (whose nonce is `nonce_j`) where it is.
    pub(super) fn send(&self, s: &mut TcpStream, t: &Terms, nonce_j: &[u8; 16]) -> io::Result<()> {
        let b = [
            &(self.k as u64).to_le_bytes()[..],
            &(self.parent as u64).to_le_bytes(),
            self.at.as_bytes(),
            &self.mac(t, nonce_j),
        ]
        .concat();
        super::send_blob(s, &b)
    }

    /// A joiner reads where rank 0 placed it; `None` if it does not carry the job
    /// key's MAC or is malformed.
    pub(super) fn read(
        s: &mut TcpStream,
        t: &Terms,
        nonce_j: &[u8; 16],
    ) -> io::Result<Option<Self>> {
        let b = read_blob(s)?;
        if b.len() < 48 {
            return Ok(None);
        }
        let word = |i: usize| {
            let w: [u8; 8] = b[i..i + 8].try_into().unwrap_or_default();
            u64::from_le_bytes(w) as usize
        };
        let (at, mac) = b[16..].split_at(b.len() - 48);
        let Ok(at) = String::from_utf8(at.to_vec()) else {
            return Ok(None);
        };
        let p = Self {
            k: word(0),
            parent: word(8),
            at,
        };
        let mac: [u8; 32] = mac.try_into().unwrap_or_default();
        Ok(same_mac(&mac, &p.mac(t, nonce_j)).then_some(p))
    }
}

/// A child at position `k`: connects to its parent at `p.at`, proves the key, and has
/// the parent prove it; retries a connection that does not complete until `deadline`,
/// but not a refused one (the parent listened before it joined: it has ended).
pub(super) fn connect_parent(
    p: &Placement,
    t: &Terms,
    rank: usize,
    deadline: Instant,
) -> Result<Link, BootError> {
    let addr: SocketAddr = p.at.parse().map_err(|_| {
        BootError::Refused(format!(
            "rank 0 of job {} gave rank {rank} a parent address {:?} that is not IP:PORT",
            t.id, p.at
        ))
    })?;
    let failed = |why: String| {
        BootError::Timeout(format!(
            "rank {rank} of job {} could not join its parent in the set-up tree, rank {} at \
             {addr}, until the attach timeout (AMRQ_ATTACH_TIMEOUT sets it): {why}. Can this \
             host reach that one over TCP?",
            t.id, p.parent
        ))
    };
    let nonce_c = random_bytes::<16>().map_err(|e| BootError::Env(format!("getrandom: {e}")))?;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let tried =
            TcpStream::connect_timeout(&addr, left.clamp(Duration::from_millis(1), ANSWER_WITHIN))
                .and_then(|mut s| {
                    s.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
                    let mut hello = Wire::<TREE_HELLO_BYTES>::new(TREE);
                    hello.put(&(rank as u64).to_le_bytes());
                    hello.put(&(p.k as u64).to_le_bytes());
                    hello.put(&nonce_c);
                    s.write_all(&hello.b)?;
                    let mut answer = read_wire::<48>(&mut s)?;
                    let nonce_p = answer.take::<16>();
                    let mac_p = answer.take::<32>();
                    Ok((s, nonce_p, mac_p))
                });
        match tried {
            Ok((mut s, nonce_p, mac_p)) => {
                if !same_mac(
                    &mac_p,
                    &edge_mac(t, "tree parent", &nonce_c, &nonce_p, p.k, rank),
                ) {
                    return Err(BootError::Refused(format!(
                        "the process at {addr} answering as rank {rank}'s parent in job {}'s \
                         set-up tree did not prove it holds the job's key: refusing it",
                        t.id
                    )));
                }
                let mac_c = edge_mac(t, "tree child", &nonce_p, &nonce_c, p.k, rank);
                s.write_all(&mac_c).map_err(|e| failed(e.to_string()))?;
                return Ok(Link::new(s, p.parent, t, (&nonce_p, &nonce_c), true));
            }
            // The parent listened before it joined: a refusal means it is gone.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return Err(BootError::Refused(format!(
                    "rank {rank} of job {} found no parent in the set-up tree at {addr} (rank \
                     {}): {e}; that rank has ended (its own error says why)",
                    t.id, p.parent
                )))
            }
            Err(e) if left.is_zero() => return Err(failed(e.to_string())),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The MAC an end of an edge proves the key with: `label` names the end, `first` is
/// its peer's nonce.
fn edge_mac(
    t: &Terms,
    label: &str,
    first: &[u8; 16],
    second: &[u8; 16],
    k: usize,
    rank: usize,
) -> [u8; 32] {
    t.key.mac(
        label,
        &[
            t.id.as_bytes(),
            first,
            second,
            &(k as u64).to_le_bytes(),
            &(rank as u64).to_le_bytes(),
        ],
    )
}

/// A parent at position `k` of a job of `size`: accepts its children on `listener`
/// until `deadline`, or until its own `parent` edge closes (the job cannot form: its
/// error reaches the children as their edges close). A connection that does not prove
/// the key, or claims a position that is not a child's or is taken, is closed and the
/// wait goes on.
pub(super) fn accept_children(
    listener: &TcpListener,
    parent: &Link,
    k: usize,
    t: &Terms,
    rank: usize,
    deadline: Instant,
) -> Result<Vec<Link>, BootError> {
    let mut want: Vec<usize> = children_of(k, t.size).collect();
    let mut links = Vec::with_capacity(want.len());
    let _ = listener.set_nonblocking(true);
    while !want.is_empty() {
        let now = Instant::now();
        if now > deadline {
            return Err(BootError::Timeout(format!(
                "rank {rank} of job {} waited for its children in the set-up tree (positions \
                 {want:?} in the order rank 0 admitted them) until the attach timeout \
                 (AMRQ_ATTACH_TIMEOUT sets it): did every rank start?",
                t.id
            )));
        }
        let wait = (deadline - now).min(Duration::from_millis(50));
        match knock_or_hang_up(listener, parent, wait) {
            Watch::Quiet => continue,
            Watch::Knock => {}
            Watch::HungUp => {
                return Err(BootError::Refused(format!(
                    "rank {rank} of job {} lost its parent in the set-up tree, rank {}, while \
                     its own children were joining (did that rank, or rank 0, fail?)",
                    t.id, parent.peer
                )))
            }
        }
        let Ok((mut s, _)) = listener.accept() else {
            continue;
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(ANSWER_WITHIN));
        let _ = s.set_write_timeout(Some(ANSWER_WITHIN));
        let Ok(mut hello) = read_wire::<TREE_HELLO_BYTES>(&mut s) else {
            continue;
        };
        let (magic, child, pos, nonce_c) =
            (hello.u64(), hello.u64(), hello.u64(), hello.take::<16>());
        let (child, pos) = (child as usize, pos as usize);
        let Some(i) = want
            .iter()
            .position(|&w| w == pos)
            .filter(|_| magic == TREE && child < t.size)
        else {
            continue;
        };
        let Ok(nonce_p) = random_bytes::<16>() else {
            continue;
        };
        let mac_p = edge_mac(t, "tree parent", &nonce_c, &nonce_p, pos, child);
        if s.write_all(&[&nonce_p[..], &mac_p].concat()).is_err() {
            continue;
        }
        let mut mac_c = [0u8; 32];
        if s.read_exact(&mut mac_c).is_err()
            || !same_mac(
                &mac_c,
                &edge_mac(t, "tree child", &nonce_p, &nonce_c, pos, child),
            )
        {
            continue;
        }
        let _ = s.set_write_timeout(None);
        want.swap_remove(i);
        links.push(Link::new(s, child, t, (&nonce_p, &nonce_c), false));
    }
    Ok(links)
}

/// What a parent waiting for its children saw.
enum Watch {
    Quiet,
    Knock,
    HungUp,
}

/// Waits at most `wait` for a connection at `listener` or the end of the `parent` edge
/// (which sends nothing that ends it before every child has joined, but may send the
/// table).
fn knock_or_hang_up(listener: &TcpListener, parent: &Link, wait: Duration) -> Watch {
    let poll = |fd: i32, events: i16| libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let hung = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
    let mut fds = [
        poll(listener.as_raw_fd(), libc::POLLIN),
        poll(parent.stream.as_raw_fd(), libc::POLLRDHUP),
    ];
    let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: two valid pollfds, on descriptors alive for the call.
    if unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) } <= 0 {
        return Watch::Quiet;
    }
    if fds[1].revents & hung != 0 {
        Watch::HungUp
    } else if fds[0].revents & libc::POLLIN != 0 {
        Watch::Knock
    } else {
        Watch::Quiet
    }
}

/// A rank's edges: to its parent (none at rank 0) and to its children.
#[derive(Debug, Default)]
pub(super) struct Edges {
    pub(super) parent: Option<Link>,
    pub(super) children: Vec<Link>,
}

impl Edges {
    /// Ends every edge (see [`Link::hang_up`]).
    pub(super) fn hang_up(&self) {
        self.parent
            .iter()
            .chain(&self.children)
            .for_each(Link::hang_up);
    }

    /// Every edge's reads wait at most `wait`.
    pub(super) fn set_patience(&self, wait: Duration) {
        self.parent
            .iter()
            .chain(&self.children)
            .for_each(|l| l.set_patience(wait));
    }
}
