//! How ranks on different hosts join one job: rank 0 listens on a TCP address that
//! every host can reach (`AMRQ_RENDEZVOUS`), each other rank connects, both prove they
//! hold the job's key (the exchange of [`super::rendezvous`], without the descriptor),
//! and the joiner hands over its *entry* (its host's name and the bytes its conduit
//! publishes) and the port it listens on. Rank 0 answers with the joiner's place in
//! the job's set-up tree, a heap of fan-out 8 over the order of admission: the joiner
//! connects to its parent there, proving the key again, and rank 0 keeps only its own
//! children's connections. Once every rank has joined, the table of all entries, with
//! the address rank 0 saw each one connect from, goes down the tree.
//!
//! ```text
//!   joiner                                       rank 0 (listening on AMRQ_RENDEZVOUS)
//!   Hello, Proof                          ──▶    (the same MACs as on one host)
//!                                         ◀──    Challenge, Verdict
//!   Entry { host, blob, port, MAC(nonce_s) } ──▶
//!                                         ◀──    Place { k, parent, its address, MAC(nonce_j) }
//!   joiner ⇄ its parent (unless rank 0): Tree { rank, k, nonce_c }, nonce_p and both MACs
//!   Table { [host, address, blob]… } down the tree, each message under its edge's MAC
//! ```
//!
//! Every message carries a MAC under the job key bound to its connection's nonces, so
//! a process without the key can neither put itself in the table nor change it. The
//! edges stay open after the job forms: the set-up collectives ([`NetJob::allgather`])
//! go up and down them, so a rank holds at most nine connections whatever the job's
//! size, and a closed one shows a dead rank. Set-up only: nothing here is on a
//! message's path.

use super::key::random_bytes;
use super::rendezvous::{
    hello, proof, read_verdict, Terms, Wire, CHALLENGE, CHALLENGE_BYTES, VERDICT_BYTES,
};
use super::BootError;
use admit::admit_all;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tree::{Edges, Link, Placement};

mod admit;
mod tree;

/// The largest entry or table accepted (a UCX worker address over tcp is ~100 bytes).
const MAX_BLOB: usize = 1 << 20;

/// One rank as the job's table has it.
///
/// ```
/// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
/// # use std::time::Duration;
/// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
/// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
/// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
/// let e = &job.entries()[0];
/// assert_eq!((e.host.as_str(), e.blob.as_slice()), ("h0", &b"card"[..]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The host it runs on, as its launcher named it.
    pub host: String,
    /// The address rank 0 saw it connect from (rank 0: its rendezvous address).
    pub address: String,
    /// What its conduit published.
    pub blob: Vec<u8>,
}

/// A rank's membership in a job across hosts (see the module doc).
///
/// ```no_run
/// use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
/// use std::time::Duration;
/// let terms = Terms { id: "job-1".into(), key: JobKey::random()?, size: 2, digest: 0, bytes: 0 , agreement: String::new() };
/// // Rank 1, on host "h1": rank 0 runs the same with rank 0, on the host of 10.0.0.1.
/// let job = NetJob::form(1, "h1", "10.0.0.1:7000", &terms, b"my card".to_vec(), Duration::from_secs(60))?;
/// println!("rank 0 runs on {}", job.entries()[0].host);
/// assert_eq!(job.allgather(5)?.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct NetJob {
    rank: usize,
    size: usize,
    id: String,
    entries: Vec<Entry>,
    /// Its edges in the set-up tree.
    edges: Mutex<Edges>,
    /// How long a collective waits for a peer.
    patience: Duration,
    /// This rank's own failure, once recorded.
    failed: Mutex<Option<String>>,
}

/// Writes `bytes` with its length in front.
fn send_blob(s: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
    s.write_all(&(bytes.len() as u32).to_le_bytes())?;
    s.write_all(bytes)
}

/// Reads what [`send_blob`] wrote; a length over [`MAX_BLOB`] is an error.
fn read_blob(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut n = [0u8; 4];
    s.read_exact(&mut n)?;
    let n = u32::from_le_bytes(n) as usize;
    if n > MAX_BLOB {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "oversized"));
    }
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn read_wire<const N: usize>(s: &mut TcpStream) -> io::Result<Wire<N>> {
    let mut b = [0u8; N];
    s.read_exact(&mut b)?;
    Ok(Wire::from(b))
}

/// `fields`, each length-prefixed, one after the other (read back by [`split`]).
fn join_fields<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut b = Vec::new();
    for f in fields {
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

/// The table as bytes: per rank its host, address and blob (see [`join_fields`]).
fn encode(entries: &[Entry]) -> Vec<u8> {
    join_fields(
        entries
            .iter()
            .flat_map(|e| [e.host.as_bytes(), e.address.as_bytes(), &e.blob]),
    )
}

/// Every field of `b` as [`join_fields`] wrote them; `None` if malformed.
fn fields(mut b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut all = Vec::new();
    while !b.is_empty() {
        let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        all.push(b.get(4..4usize.checked_add(len)?)?.to_vec());
        b = &b[4 + len..];
    }
    Some(all)
}

/// The (rank, bytes) pairs of a subtree's part of an all-gather, every rank below
/// `size`; `None` if malformed.
fn pairs(b: &[u8], size: usize) -> Option<Vec<(usize, Vec<u8>)>> {
    let f = fields(b)?;
    (f.len() % 2 == 0).then_some(())?;
    f.chunks(2)
        .map(|p| {
            let r = u64::from_le_bytes(<[u8; 8]>::try_from(p[0].as_slice()).ok()?);
            let r = usize::try_from(r).ok().filter(|&r| r < size)?;
            Some((r, p[1].clone()))
        })
        .collect()
}

/// Exactly `n` fields of `b` as [`join_fields`] wrote them; `None` if malformed.
fn split(b: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    fields(b).filter(|f| f.len() == n)
}

/// Reads [`encode`]'s table of `size` entries; `None` if malformed.
fn decode(b: &[u8], size: usize) -> Option<Vec<Entry>> {
    let text = |f: Vec<u8>| String::from_utf8(f).ok();
    let mut fields = split(b, size.checked_mul(3)?)?.into_iter();
    (0..size)
        .map(|_| {
            Some(Entry {
                host: text(fields.next()?)?,
                address: text(fields.next()?)?,
                blob: fields.next()?,
            })
        })
        .collect()
}

fn resolve(rendezvous: &str) -> Result<SocketAddr, BootError> {
    rendezvous
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            BootError::Env(format!(
                "the rendezvous address {rendezvous:?} is not HOST:PORT with a HOST this host can \
                 resolve (AMRQ_RENDEZVOUS, or amrun --rendezvous, sets it)"
            ))
        })
}

impl NetJob {
    /// Joins job `terms` as `rank` from host `host`, publishing `blob`: rank 0 listens
    /// on `rendezvous` (HOST:PORT) and waits for the others, the others connect to it;
    /// everyone waits at most `timeout`. Returns once every rank is in the table.
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// assert_eq!(job.rank(), 0); // a job of one rank, formed at its own rendezvous
    /// ```
    pub fn form(
        rank: usize,
        host: &str,
        rendezvous: &str,
        terms: &Terms,
        blob: Vec<u8>,
        timeout: Duration,
    ) -> Result<Self, BootError> {
        let deadline = Instant::now() + timeout;
        let mut mine = Entry {
            host: host.to_string(),
            address: String::new(),
            blob,
        };
        let (entries, edges) = match (rank, rendezvous.strip_prefix(FILE_PREFIX)) {
            (0, file) => {
                let (listener, shown) = listen(rendezvous, file, terms)?;
                mine.address = shown.clone();
                let formed = admit_all(&listener, &shown, terms, mine, deadline);
                if let Some(path) = file {
                    let _ = std::fs::remove_file(path);
                }
                formed?
            }
            (_, Some(path)) => {
                let addrs = read_rendezvous_file(Path::new(path), terms, rank, deadline)?;
                join(&addrs, terms, rank, mine, deadline)?
            }
            (_, None) => join(&[resolve(rendezvous)?], terms, rank, mine, deadline)?,
        };
        // A collective waits for a silent peer as long as start-up did, no longer.
        edges.set_patience(timeout);
        Ok(Self {
            rank,
            size: terms.size,
            id: terms.id.clone(),
            entries,
            edges: Mutex::new(edges),
            patience: timeout,
            failed: Mutex::new(None),
        })
    }

    /// This rank.
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// assert_eq!(job.rank(), 0);
    /// ```
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Every rank's entry (index = rank).
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// assert_eq!(job.entries().len(), 1);
    /// ```
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// All-gather of one word per rank over the set-up tree (see [`NetJob::exchange`]).
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// assert_eq!(job.allgather(42).unwrap(), [42]);
    /// ```
    pub fn allgather(&self, mine: u64) -> Result<Vec<u64>, BootError> {
        let all = self.exchange(&mine.to_le_bytes())?;
        all.iter()
            .enumerate()
            .map(|(rank, w)| {
                w.as_slice()
                    .try_into()
                    .map(u64::from_le_bytes)
                    .map_err(|_| BootError::PeerDead {
                        rank,
                        cause: format!("it sent {} bytes for a word", w.len()),
                    })
            })
            .collect()
    }

    /// All-gather of some bytes per rank over the set-up tree (index = rank): each rank
    /// sends its subtree's up to its parent, rank 0 sends the whole down. A rank whose
    /// connection closed is [`BootError::PeerDead`]; one that says nothing for the
    /// attach timeout is a [`BootError::Timeout`].
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// assert_eq!(job.exchange(b"blob").unwrap(), [b"blob".to_vec()]);
    /// ```
    pub fn exchange(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootError> {
        self.check_peers()?;
        let mut edges = self.edges.lock().map_err(|_| BootError::Poisoned)?;
        let all = self.exchange_over(&mut edges, mine);
        if all.is_err() {
            // Its neighbours learn at once that this collective will not complete.
            edges.hang_up();
        }
        all
    }

    fn exchange_over(&self, edges: &mut Edges, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootError> {
        let lost = |rank: usize, e: io::Error| self.lost(rank, e);
        let malformed = |rank: usize| BootError::PeerDead {
            rank,
            cause: "it sent a malformed all-gather".into(),
        };
        // Up: this rank's subtree, as (rank, bytes) pairs, each child's checked.
        let mut up = join_fields([&(self.rank as u64).to_le_bytes()[..], mine]);
        let mut parts = vec![(self.rank, pairs(&up, self.size).unwrap_or_default())];
        for c in &mut edges.children {
            let part = c.read().map_err(|e| lost(c.peer, e))?;
            parts.push((
                c.peer,
                pairs(&part, self.size).ok_or_else(|| malformed(c.peer))?,
            ));
            up.extend(part);
        }
        let all = match &mut edges.parent {
            Some(p) => {
                p.send(&up).map_err(|e| lost(p.peer, e))?;
                p.read().map_err(|e| lost(p.peer, e))?
            }
            None => {
                let mut all: Vec<Option<Vec<u8>>> = vec![None; self.size];
                for (from, pairs) in parts {
                    for (r, b) in pairs {
                        match &mut all[r] {
                            slot @ None => *slot = Some(b),
                            Some(_) => return Err(malformed(from)),
                        }
                    }
                }
                if let Some(r) = all.iter().position(Option::is_none) {
                    return Err(BootError::PeerDead {
                        rank: r,
                        cause: "its part of a set-up all-gather never came up the tree".into(),
                    });
                }
                join_fields(all.iter().flatten().map(Vec::as_slice))
            }
        };
        for c in &mut edges.children {
            c.send(&all).map_err(|e| lost(c.peer, e))?;
        }
        let parent = edges.parent.as_ref().map_or(0, |p| p.peer);
        split(&all, self.size).ok_or_else(|| malformed(parent))
    }

    /// What a failed read or write on the edge to `rank` means.
    fn lost(&self, rank: usize, e: io::Error) -> BootError {
        if matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            return BootError::Timeout(format!(
                "rank {} waited {:?} for rank {rank} at a setup collective of job {}",
                self.rank, self.patience, self.id
            ));
        }
        let (host, address) = self
            .entries
            .get(rank)
            .map_or(("?", "?"), |p| (p.host.as_str(), p.address.as_str()));
        BootError::PeerDead {
            rank,
            cause: format!(
                "its connection in the set-up tree (host {host}, {address}) closed: {e}"
            ),
        }
    }

    /// Barrier over all ranks (an all-gather of nothing).
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// job.barrier().unwrap();
    /// ```
    pub fn barrier(&self) -> Result<(), BootError> {
        self.allgather(0).map(drop)
    }

    /// [`BootError::PeerDead`] for this rank's own recorded failure. (Peers' deaths
    /// are seen by the conduit, and by [`NetJob::allgather`].)
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// assert!(job.check_peers().is_ok());
    /// ```
    pub fn check_peers(&self) -> Result<(), BootError> {
        match self.failed.lock().map_err(|_| BootError::Poisoned)?.clone() {
            Some(cause) => Err(BootError::PeerDead {
                rank: self.rank,
                cause,
            }),
            None => Ok(()),
        }
    }

    /// Records this rank's failure.
    ///
    /// ```
    /// # use amrq::bootstrap::{rendezvous::Terms, JobKey, NetJob};
    /// # use std::time::Duration;
    /// # let terms = Terms { id: "doc".into(), key: JobKey::random().unwrap(), size: 1, digest: 0, bytes: 0 , agreement: String::new() };
    /// # let at = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    /// # let job = NetJob::form(0, "h0", &at, &terms, b"card".to_vec(), Duration::from_secs(10)).unwrap();
    /// job.mark_failed("gave up");
    /// assert!(job.barrier().is_err()); // a failed rank's collectives end
    /// ```
    pub fn mark_failed(&self, cause: &str) {
        if let Ok(mut f) = self.failed.lock() {
            f.get_or_insert_with(|| cause.to_string());
        }
    }
}

type Formed = (Vec<Entry>, Edges);

/// The prefix of a rendezvous setting that names a file on a file system every host
/// shares: rank 0 listens on a port the kernel picks and writes its addresses there.
///
/// ```
/// // AMRQ_RENDEZVOUS=file:/shared/job.addr: rank 0 writes where it listens, the others read it.
/// assert_eq!(amrq::bootstrap::network::FILE_PREFIX, "file:");
/// ```
pub const FILE_PREFIX: &str = "file:";

/// Rank 0's listening socket for `rendezvous`, and the address it shows in errors and
/// in its entry. Given a file (`file:PATH`), it listens on every interface at a port
/// the kernel picks and writes the job id and this host's addresses there, atomically
/// (a joiner never reads half a file, nor an older job's).
fn listen(
    rendezvous: &str,
    file: Option<&str>,
    t: &Terms,
) -> Result<(TcpListener, String), BootError> {
    let addr = match file {
        Some(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        None => resolve(rendezvous)?,
    };
    let listener = TcpListener::bind(addr).map_err(|e| {
        let why = match e.kind() {
            io::ErrorKind::AddrInUse => {
                "the port is in use on this host: choose another (amrun --rendezvous ADDR:PORT)"
            }
            io::ErrorKind::AddrNotAvailable => {
                "the address is not one of this host's: give an address of rank 0's host"
            }
            _ => "",
        };
        BootError::Env(format!(
            "rank 0 of job {} cannot listen on its rendezvous {addr} (TCP): {e}; {why}",
            t.id
        ))
    })?;
    let Some(path) = file else {
        return Ok((listener, addr.ip().to_string()));
    };
    let port = listener
        .local_addr()
        .map_err(|e| BootError::Env(format!("the rendezvous socket has no address: {e}")))?
        .port();
    let ips = host_addresses();
    let mut text = format!("{}\n", t.id);
    for ip in &ips {
        text.push_str(&format!("{ip}:{port}\n"));
    }
    let tmp = format!("{path}.{}.tmp", std::process::id());
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            BootError::Env(format!(
                "rank 0 of job {} cannot write its rendezvous address to {path}: {e} (the \
                 setting {FILE_PREFIX}PATH needs a directory every host shares and can write)",
                t.id
            ))
        })?;
    Ok((listener, ips[0].to_string()))
}

/// This host's IPv4 addresses, loopback last (so that a file written on one host
/// lists first the addresses another host can reach).
fn host_addresses() -> Vec<std::net::Ipv4Addr> {
    let mut ips: Vec<_> = ipv4_interfaces().into_iter().map(|(_, ip)| ip).collect();
    ips.sort_by_key(|ip| ip.is_loopback());
    if ips.is_empty() {
        ips.push(std::net::Ipv4Addr::LOCALHOST);
    }
    ips
}

/// This host's network devices with an IPv4 address: (name, address).
pub(crate) fn ipv4_interfaces() -> Vec<(String, std::net::Ipv4Addr)> {
    let mut found = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list freed below by freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } == 0 {
        let mut at = list;
        while !at.is_null() {
            // SAFETY: `at` is a node of the list getifaddrs returned, alive until freed;
            // an AF_INET address is a sockaddr_in; the name is a C string.
            unsafe {
                let a = (*at).ifa_addr;
                if !a.is_null() && i32::from((*a).sa_family) == libc::AF_INET {
                    let sin = &*a.cast::<libc::sockaddr_in>();
                    let name = std::ffi::CStr::from_ptr((*at).ifa_name);
                    let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                    found.push((name.to_string_lossy().into_owned(), ip));
                }
                at = (*at).ifa_next;
            }
        }
        // SAFETY: the list getifaddrs returned, freed once.
        unsafe { libc::freeifaddrs(list) };
    }
    found
}

/// A joiner: waits until rank 0 has written job `t`'s addresses to `path`.
fn read_rendezvous_file(
    path: &Path,
    t: &Terms,
    rank: usize,
    deadline: Instant,
) -> Result<Vec<SocketAddr>, BootError> {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let mut lines = text.lines();
            if lines.next() == Some(t.id.as_str()) {
                let addrs: Vec<SocketAddr> = lines.filter_map(|l| l.parse().ok()).collect();
                if !addrs.is_empty() {
                    return Ok(addrs);
                }
            }
        }
        if Instant::now() > deadline {
            return Err(BootError::Timeout(format!(
                "rank {rank} of job {} waited for rank 0 to write its rendezvous address to {} \
                 until the attach timeout (AMRQ_ATTACH_TIMEOUT sets it): did rank 0 start, and \
                 do both hosts see the same file there?",
                t.id,
                path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A joiner: connects to rank 0 at `addr` (retrying until `deadline`), proves the key,
/// hands over its entry, takes its place in the set-up tree and receives the table from
/// its parent there.
fn join(
    addrs: &[SocketAddr],
    t: &Terms,
    rank: usize,
    mine: Entry,
    deadline: Instant,
) -> Result<Formed, BootError> {
    let mut s = connect(addrs, t, rank, deadline)?;
    let addr = s.peer_addr().unwrap_or(addrs[0]);
    let _ = s.set_nodelay(true);
    // Children in the set-up tree reach this rank where rank 0 saw it come from.
    let here = s
        .local_addr()
        .map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip());
    let listener = TcpListener::bind((here, 0)).map_err(|e| {
        BootError::Env(format!(
            "rank {rank} of job {} cannot listen for its set-up tree on {here} (TCP): {e}",
            t.id
        ))
    })?;
    let remaining = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let _ = s.set_read_timeout(Some(remaining));
    let lost = |e: io::Error| {
        if matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            return BootError::Timeout(format!(
                "rank {rank} waited for rank 0 of job {} at {addr} to admit it and every other \
                 rank until the attach timeout (AMRQ_ATTACH_TIMEOUT sets it)",
                t.id
            ));
        }
        BootError::Refused(format!(
            "rank 0 of job {} at {addr} closed the connection before rank {rank} had the job's \
             table: {e} (did rank 0 fail, or refuse another rank?)",
            t.id
        ))
    };
    let protocol = || BootError::Refused(format!("{addr} spoke another protocol than amrq's"));
    let nonce_j = random_bytes::<16>().map_err(|e| BootError::Env(format!("getrandom: {e}")))?;
    s.write_all(&hello(t, rank, &nonce_j).b).map_err(lost)?;
    let mut ch = read_wire::<CHALLENGE_BYTES>(&mut s).map_err(lost)?;
    if ch.u64() != CHALLENGE {
        return Err(protocol());
    }
    let nonce_s = ch.take::<16>();
    s.write_all(&proof(t, rank, &nonce_j, &nonce_s).b)
        .map_err(lost)?;
    let v = read_wire::<VERDICT_BYTES>(&mut s).map_err(lost)?;
    let (admitted, genuine, reason) =
        read_verdict(v, t, &nonce_s, &nonce_j).ok_or_else(protocol)?;
    if !admitted {
        return Err(BootError::Refused(format!(
            "rank 0 of job {} at {addr} refused rank {rank}: {reason}{}",
            t.id,
            if genuine {
                ""
            } else {
                " (and could not prove it holds this rank's key)"
            }
        )));
    }
    if !genuine {
        return Err(BootError::Refused(format!(
            "the process at {addr} admitting rank {rank} of job {} did not prove it holds the \
             job's key: refusing it",
            t.id
        )));
    }
    let port = listener
        .local_addr()
        .map_err(|e| BootError::Env(format!("the set-up tree's socket has no address: {e}")))?
        .port()
        .to_le_bytes();
    let mac = t.key.mac(
        "entry",
        &[
            t.id.as_bytes(),
            &nonce_s,
            mine.host.as_bytes(),
            &mine.blob,
            &port,
        ],
    );
    send_blob(&mut s, mine.host.as_bytes())
        .and_then(|()| send_blob(&mut s, &mine.blob))
        .and_then(|()| send_blob(&mut s, &port))
        .and_then(|()| s.write_all(&mac))
        .map_err(lost)?;
    let place = Placement::read(&mut s, t, &nonce_j)
        .map_err(lost)?
        .ok_or_else(protocol)?;
    let mut parent = if place.at.is_empty() {
        Link::new(s, 0, t, (&nonce_s, &nonce_j), true)
    } else {
        drop(s); // rank 0 keeps only its children's connections
        tree::connect_parent(&place, t, rank, deadline)?
    };
    let mut children = tree::accept_children(&listener, &parent, place.k, t, rank, deadline)?;
    drop(listener);
    let table = parent.read().map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidData {
            return BootError::Refused(format!(
                "the table of job {} from rank {} does not carry the job key's MAC: refusing it",
                t.id, place.parent
            ));
        }
        if place.at.is_empty()
            || matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            )
        {
            return lost(e);
        }
        BootError::Refused(format!(
            "rank {rank} of job {} lost its parent in the set-up tree, rank {} at {}, before it \
             had the job's table: {e} (did that rank, or rank 0, fail?)",
            t.id, place.parent, place.at
        ))
    })?;
    let entries = decode(&table, t.size).ok_or_else(protocol)?;
    if entries[rank].blob != mine.blob {
        return Err(protocol());
    }
    for c in &mut children {
        // A child that went away shows to its own children, and at the first collective.
        let _ = c.send(&table);
    }
    Ok((
        entries,
        Edges {
            parent: Some(parent),
            children,
        },
    ))
}

/// Connects to the first of `addrs` that answers, retrying while nobody listens there
/// yet, until `deadline`.
fn connect(
    addrs: &[SocketAddr],
    t: &Terms,
    rank: usize,
    deadline: Instant,
) -> Result<TcpStream, BootError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(
                addr,
                left.clamp(Duration::from_millis(1), Duration::from_secs(2)),
            ) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if left.is_zero() {
            let shown: Vec<String> = addrs.iter().map(ToString::to_string).collect();
            return Err(BootError::Timeout(format!(
                "rank {rank} of job {} could not reach rank 0's rendezvous at {} over TCP \
                 until the attach timeout (AMRQ_ATTACH_TIMEOUT sets it); last error: {}. Is \
                 rank 0 running on the host with this address, and can this host reach it?",
                t.id,
                shown.join(" or "),
                last.map_or_else(String::new, |e| e.to_string())
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests;
