//! How a rank joins a job on its host: it connects to rank 0's rendezvous socket,
//! both prove they hold the job's key, and rank 0 hands it the job's memory as a
//! descriptor. Every exchange is a fixed-size message; every read has a deadline.
//!
//! ```text
//!   joiner                                        rank 0 (checks the peer's uid first)
//!   Hello { rank, size, nonce_j }           ──▶
//!                                           ◀──   Challenge { nonce_s }
//!   Proof { mac_j, digest, bytes }          ──▶   mac_j = MAC(key, "joiner", id, nonce_j, nonce_s, rank, size)
//!                                           ◀──   Verdict { code, mac_0, reason } (+ the memory's fd if admitted)
//!   checks mac_0 = MAC(key, "rank 0", id, nonce_s, nonce_j, code) before using the fd
//! ```
//!
//! A joiner with the wrong key, a rank that already joined, or any rank once the job
//! has formed is refused with the reason and rank 0 carries on: a refused process
//! cannot harm the job. A rank that proves the key but disagrees on the job's shape
//! (ranks, configuration) is refused and ends rank 0's start too: that job cannot form.

use super::key::{random_bytes, same_mac};
use super::liveness::how_it_ended;
use super::socket::{self, my_uid};
use super::{fault, BootError, JobKey};
use crate::util::shm::SharedFile;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

pub(super) const HELLO: u64 = u64::from_le_bytes(*b"amrqHEL1");
pub(super) const CHALLENGE: u64 = u64::from_le_bytes(*b"amrqCHL1");
pub(super) const PROOF: u64 = u64::from_le_bytes(*b"amrqPRF1");
const VERDICT: u64 = u64::from_le_bytes(*b"amrqVRD1");

pub(super) const HELLO_BYTES: usize = 40;
pub(super) const CHALLENGE_BYTES: usize = 24;
/// Bytes of the settings text a Proof carries (a longer text is cut at a line; the
/// digest still covers all of it).
const AGREEMENT_BYTES: usize = 1024;
pub(super) const PROOF_BYTES: usize = 56 + AGREEMENT_BYTES;
const REASON_BYTES: usize = 512;
pub(super) const VERDICT_BYTES: usize = 48 + REASON_BYTES;

/// How long rank 0 gives one connection to say its part: a silent process cannot
/// hold the door for longer.
pub(super) const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// A verdict's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(super) enum Code {
    Admitted = 0,
    WrongKey = 1,
    Formed = 2,
    Disagrees = 3,
    Duplicate = 4,
}

/// What every member of the job agrees on.
///
/// ```
/// # use amrq::bootstrap::{key::rendezvous_name, rendezvous::{self, Door, Terms}, JobKey};
/// # use amrq::util::shm::SharedFile;
/// # use std::time::{Duration, Instant};
/// # let id = format!("doc-{}-{}", std::process::id(), line!());
/// # let terms = Terms { id: id.clone(), key: JobKey::random().unwrap(), size: 2, digest: 0, bytes: 4096 , agreement: String::new() };
/// # let name = rendezvous_name(&id);
/// // Rank 0 opens the door and admits rank 1, which proves the key and agrees on the terms.
/// let door = Door::open(&name, &id).unwrap();
/// let memory = SharedFile::create("doc", 4096).unwrap();
/// let deadline = Instant::now() + Duration::from_secs(10);
/// std::thread::scope(|s| {
///     let joiner = s.spawn(|| rendezvous::join(&name, &terms, 1, deadline));
///     door.admit_all(&terms, memory.fd(), deadline, || Ok(())).unwrap();
///     assert_eq!(joiner.join().unwrap().unwrap().size().unwrap(), 4096); // the job's memory
/// });
/// ```
#[derive(Debug, Clone)]
pub struct Terms {
    /// The job's public id.
    pub id: String,
    /// The job's secret key.
    pub key: JobKey,
    /// Ranks in the job.
    pub size: usize,
    /// Digest of the configuration.
    pub digest: u64,
    /// What every rank must agree on, one `name=value` per line (its digest is
    /// `digest`): a rank that disagrees is told the first line that differs.
    pub agreement: String,
    /// Bytes of the job's memory.
    pub bytes: u64,
}

/// Fixed-size little-endian message building and reading.
pub(super) struct Wire<const N: usize> {
    pub(super) b: [u8; N],
    at: usize,
}

impl<const N: usize> Wire<N> {
    pub(super) fn new(magic: u64) -> Self {
        let mut w = Self { b: [0; N], at: 0 };
        w.put(&magic.to_le_bytes());
        w
    }
    pub(super) fn from(b: [u8; N]) -> Self {
        Self { b, at: 0 }
    }
    pub(super) fn put(&mut self, bytes: &[u8]) {
        let end = (self.at + bytes.len()).min(N);
        self.b[self.at..end].copy_from_slice(&bytes[..end - self.at]);
        self.at = end;
    }
    pub(super) fn take<const M: usize>(&mut self) -> [u8; M] {
        let mut out = [0u8; M];
        let end = (self.at + M).min(N);
        out[..end - self.at].copy_from_slice(&self.b[self.at..end]);
        self.at = end;
        out
    }
    pub(super) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

pub(super) fn joiner_mac(
    t: &Terms,
    nonce_j: &[u8; 16],
    nonce_s: &[u8; 16],
    rank: u64,
    size: u64,
) -> [u8; 32] {
    t.key.mac(
        "joiner",
        &[
            t.id.as_bytes(),
            nonce_j,
            nonce_s,
            &rank.to_le_bytes(),
            &size.to_le_bytes(),
        ],
    )
}

fn rank0_mac(t: &Terms, nonce_s: &[u8; 16], nonce_j: &[u8; 16], code: u64) -> [u8; 32] {
    t.key.mac(
        "rank 0",
        &[t.id.as_bytes(), nonce_s, nonce_j, &code.to_le_bytes()],
    )
}

/// A joiner's Hello: its rank, the job's size, its nonce.
pub(super) fn hello(t: &Terms, rank: usize, nonce_j: &[u8; 16]) -> Wire<HELLO_BYTES> {
    let mut w = Wire::new(HELLO);
    w.put(&(rank as u64).to_le_bytes());
    w.put(&(t.size as u64).to_le_bytes());
    w.put(nonce_j);
    w
}

/// A joiner's Proof: its MAC over both nonces, the configuration digest, the bytes of
/// memory it expects.
pub(super) fn proof(
    t: &Terms,
    rank: usize,
    nonce_j: &[u8; 16],
    nonce_s: &[u8; 16],
) -> Wire<PROOF_BYTES> {
    let mut w = Wire::new(PROOF);
    w.put(&joiner_mac(t, nonce_j, nonce_s, rank as u64, t.size as u64));
    w.put(&t.digest.to_le_bytes());
    w.put(&t.bytes.to_le_bytes());
    let text = t.agreement.as_bytes();
    let mut cut = text.len().min(AGREEMENT_BYTES);
    if cut < text.len() {
        cut = text[..cut]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
    }
    w.put(&text[..cut]);
    w
}

/// The settings text of a Proof (what follows its digest and bytes).
pub(super) fn proof_agreement<const N: usize>(proof: &mut Wire<N>) -> String {
    let text = proof.take::<AGREEMENT_BYTES>();
    String::from_utf8_lossy(&text)
        .trim_end_matches('\0')
        .to_string()
}

/// Why rank `rank` (`size` ranks, settings `theirs`, digest `digest`) may not join
/// rank 0's job `t`: the first setting they disagree on with both values, and what to
/// do about it.
pub(super) fn disagreement(t: &Terms, rank: u64, size: u64, theirs: &str, digest: u64) -> String {
    if size != t.size as u64 {
        return format!(
            "it was started as one of {size} ranks and rank 0 as one of {}; start every rank with the same count (the launcher's, or AMRQ_SIZE)",
            t.size
        );
    }
    let value = |text: &str, name: &str| {
        text.lines().find_map(|l| {
            l.split_once('=')
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    };
    // Only the lines both texts carry: a long text is cut at a line.
    let differs = t.agreement.lines().find_map(|l| {
        let (name, mine) = l.split_once('=')?;
        let other = value(theirs, name)?;
        (other != mine).then(|| {
            format!("{name} is {other} on rank {rank} and {mine} on rank 0; give every rank the same settings")
        })
    });
    differs.unwrap_or_else(|| {
        format!(
            "their queues or settings differ past what the rendezvous lists (digest {digest:#x} on rank {rank}, {:#x} on rank 0); give every rank the same settings, and add the same queues in the same order",
            t.digest
        )
    })
}

/// Rank 0's Verdict: the code, rank 0's MAC over it, the reason in words.
pub(super) fn verdict(
    t: &Terms,
    nonce_s: &[u8; 16],
    nonce_j: &[u8; 16],
    code: Code,
    reason: &str,
) -> Wire<VERDICT_BYTES> {
    let mut w = Wire::new(VERDICT);
    w.put(&(code as u64).to_le_bytes());
    w.put(&rank0_mac(t, nonce_s, nonce_j, code as u64));
    w.put(reason.as_bytes());
    w
}

/// A Verdict as the joiner reads it: `(admitted, genuine, reason)`, where `genuine`
/// says rank 0 proved it holds the key; `None` if it is no Verdict.
pub(super) fn read_verdict(
    mut v: Wire<VERDICT_BYTES>,
    t: &Terms,
    nonce_s: &[u8; 16],
    nonce_j: &[u8; 16],
) -> Option<(bool, bool, String)> {
    if v.u64() != VERDICT {
        return None;
    }
    let code = v.u64();
    let genuine = same_mac(&v.take::<32>(), &rank0_mac(t, nonce_s, nonce_j, code));
    let reason = v.take::<REASON_BYTES>();
    let reason = String::from_utf8_lossy(&reason);
    let reason = reason.trim_end_matches('\0').to_string();
    Some((code == Code::Admitted as u64, genuine, reason))
}

fn read<const N: usize>(s: &UnixStream) -> io::Result<(Wire<N>, Option<OwnedFd>)> {
    let mut b = [0u8; N];
    let fd = socket::receive(s, &mut b)?;
    Ok((Wire::from(b), fd))
}

// ---------------------------------------------------------------- rank 0

/// Rank 0's side: the listening socket, from before the job's memory exists until the
/// job ends (late or wrong joiners are told why, at once).
///
/// ```
/// # use amrq::bootstrap::{key::rendezvous_name, rendezvous::{self, Door, Terms}, JobKey};
/// # use amrq::util::shm::SharedFile;
/// # use std::time::{Duration, Instant};
/// # let id = format!("doc-{}-{}", std::process::id(), line!());
/// # let terms = Terms { id: id.clone(), key: JobKey::random().unwrap(), size: 2, digest: 0, bytes: 4096 , agreement: String::new() };
/// # let name = rendezvous_name(&id);
/// let door = Door::open(&name, &id).unwrap();
/// let keeper = door.keep(terms.clone()); // the job formed: later joiners are refused
/// let late = rendezvous::join(&name, &terms, 1, Instant::now() + Duration::from_secs(5));
/// assert!(late.is_err());
/// drop(keeper);
/// ```
#[derive(Debug)]
pub struct Door {
    listener: UnixListener,
}

/// What answering one connection came to.
enum Answer {
    /// Rank `r` has the job's memory now.
    Admitted(usize),
    /// Refused or ignored; the job goes on.
    Refused,
}

impl Door {
    /// Opens the job's rendezvous, `name` (see [`super::key::rendezvous_name`]).
    ///
    /// ```
    /// # use amrq::bootstrap::{key::rendezvous_name, rendezvous::{self, Door, Terms}, JobKey};
    /// # use amrq::util::shm::SharedFile;
    /// # use std::time::{Duration, Instant};
    /// # let id = format!("doc-{}-{}", std::process::id(), line!());
    /// # let terms = Terms { id: id.clone(), key: JobKey::random().unwrap(), size: 2, digest: 0, bytes: 4096 , agreement: String::new() };
    /// # let name = rendezvous_name(&id);
    /// let door = Door::open(&name, &id).unwrap();
    /// assert!(Door::open(&name, &id).is_err()); // one door per job
    /// drop(door);
    /// ```
    pub fn open(name: &str, id: &str) -> Result<Self, BootError> {
        let listener = socket::listen(name)
            .map_err(|e| BootError::Shm(format!("cannot open the rendezvous of job {id}: {e}")))?
            .ok_or_else(|| {
                BootError::Shm(format!(
                    "job {id}'s rendezvous (@{name}) is already open: another rank 0 of this job, \
                     or another job started with the same AMRQ_JOB_ID, is running"
                ))
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| BootError::Shm(format!("rendezvous: {e}")))?;
        Ok(Self { listener })
    }

    /// Admits every other rank of the job (each proves the key and agrees on the terms)
    /// and hands it `memory`; between connections, `check` may end the wait (a rank
    /// that joined and died).
    ///
    /// ```
    /// # use amrq::bootstrap::{key::rendezvous_name, rendezvous::{self, Door, Terms}, JobKey};
    /// # use amrq::util::shm::SharedFile;
    /// # use std::time::{Duration, Instant};
    /// # let id = format!("doc-{}-{}", std::process::id(), line!());
    /// # let terms = Terms { id: id.clone(), key: JobKey::random().unwrap(), size: 2, digest: 0, bytes: 4096 , agreement: String::new() };
    /// # let name = rendezvous_name(&id);
    /// let door = Door::open(&name, &id).unwrap();
    /// let memory = SharedFile::create("doc", 4096).unwrap();
    /// let deadline = Instant::now() + Duration::from_millis(200);
    /// // Nobody comes: the wait ends at the deadline, with an error that says so.
    /// assert!(door.admit_all(&terms, memory.fd(), deadline, || Ok(())).is_err());
    /// ```
    pub fn admit_all(
        &self,
        terms: &Terms,
        memory: &OwnedFd,
        deadline: Instant,
        mut check: impl FnMut() -> Result<(), BootError>,
    ) -> Result<(), BootError> {
        let mut joined = vec![false; terms.size];
        joined[0] = true;
        while joined.iter().any(|j| !j) {
            check()?;
            let now = Instant::now();
            if now > deadline {
                let missing: Vec<usize> = (0..terms.size).filter(|&r| !joined[r]).collect();
                return Err(BootError::Timeout(format!(
                    "rank 0 of job {} waited for ranks {missing:?} to join until the attach timeout \
                     (AMRQ_ATTACH_TIMEOUT sets it); did they start, with the same AMRQ_JOB_ID?",
                    terms.id
                )));
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            let Some(stream) = self.accept(wait)? else {
                continue;
            };
            if let Answer::Admitted(r) = answer(&stream, terms, Some((&mut joined, memory)))? {
                joined[r] = true;
                fault::point("admitted", 0);
            }
        }
        Ok(())
    }

    /// Waits up to `wait` for a connection.
    fn accept(&self, wait: Duration) -> Result<Option<UnixStream>, BootError> {
        if !readable(self.listener.as_raw_fd(), None, wait) {
            return Ok(None);
        }
        match self.listener.accept() {
            Ok((s, _)) => {
                fault::point("admitting", 0);
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(ANSWER_WITHIN));
                let _ = s.set_write_timeout(Some(ANSWER_WITHIN));
                Ok(Some(s))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(BootError::Shm(format!("rendezvous accept: {e}"))),
        }
    }

    /// Once the job has formed: a thread keeps the door and refuses every later
    /// joiner with the reason, until the returned guard drops.
    ///
    /// ```
    /// # use amrq::bootstrap::{key::rendezvous_name, rendezvous::{self, Door, Terms}, JobKey};
    /// # use amrq::util::shm::SharedFile;
    /// # use std::time::{Duration, Instant};
    /// # let id = format!("doc-{}-{}", std::process::id(), line!());
    /// # let terms = Terms { id: id.clone(), key: JobKey::random().unwrap(), size: 2, digest: 0, bytes: 4096 , agreement: String::new() };
    /// # let name = rendezvous_name(&id);
    /// let keeper = Door::open(&name, &id).unwrap().keep(terms.clone());
    /// let wrong = Terms { key: JobKey::random().unwrap(), ..terms.clone() };
    /// assert!(rendezvous::join(&name, &wrong, 1, Instant::now() + Duration::from_secs(5)).is_err());
    /// drop(keeper); // the door closes
    /// ```
    pub fn keep(self, terms: Terms) -> Keeper {
        // SAFETY: eventfd takes an initial value and flags, returns a new descriptor.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Keeper { stop: None }; // no thread: late joiners wait and time out
        }
        // SAFETY: `raw` is a new descriptor owned by nothing else.
        let stop = unsafe { OwnedFd::from_raw_fd(raw) };
        let Ok(watch) = stop.try_clone() else {
            return Keeper { stop: None };
        };
        let spawned = std::thread::Builder::new()
            .name("amrq-door".into())
            .spawn(move || loop {
                if !readable(
                    self.listener.as_raw_fd(),
                    Some(watch.as_raw_fd()),
                    Duration::MAX,
                ) {
                    return; // stopped (or poll failed): the socket closes with the thread
                }
                if let Ok(Some(s)) = self.accept(Duration::ZERO) {
                    let _ = answer(&s, &terms, None);
                }
            });
        Keeper {
            stop: spawned.is_ok().then_some(stop),
        }
    }
}

/// Stops the door's thread when dropped (the socket closes with it).
///
/// ```
/// # use amrq::bootstrap::{key::rendezvous_name, rendezvous::{self, Door, Terms}, JobKey};
/// # use amrq::util::shm::SharedFile;
/// # use std::time::{Duration, Instant};
/// # let id = format!("doc-{}-{}", std::process::id(), line!());
/// # let terms = Terms { id: id.clone(), key: JobKey::random().unwrap(), size: 2, digest: 0, bytes: 4096 , agreement: String::new() };
/// # let name = rendezvous_name(&id);
/// let keeper: rendezvous::Keeper = Door::open(&name, &id).unwrap().keep(terms);
/// drop(keeper);
/// ```
#[derive(Debug)]
pub struct Keeper {
    stop: Option<OwnedFd>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(fd) = &self.stop {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writing 8 bytes to our eventfd.
            unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
    }
}

/// True if `fd` became readable within `wait` (false if `stop` did, or on error).
pub(super) fn readable(fd: i32, stop: Option<i32>, wait: Duration) -> bool {
    let mut fds = [
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = if wait == Duration::MAX {
        -1
    } else {
        i32::try_from(wait.as_millis()).unwrap_or(i32::MAX)
    };
    loop {
        // SAFETY: two valid pollfds (a negative fd is ignored by poll).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return n > 0 && fds[1].revents == 0 && fds[0].revents & libc::POLLIN != 0;
    }
}

/// Answers one connection. `open`: the ranks joined so far and the memory to hand
/// out while the job forms; `None` once it has formed.
fn answer(
    s: &UnixStream,
    t: &Terms,
    open: Option<(&mut Vec<bool>, &OwnedFd)>,
) -> Result<Answer, BootError> {
    // Another user's process learns nothing, not even a refusal.
    if !matches!(socket::peer(s), Ok((_, uid)) if uid == my_uid()) {
        return Ok(Answer::Refused);
    }
    let Ok((mut hello, _)) = read::<HELLO_BYTES>(s) else {
        return Ok(Answer::Refused);
    };
    if hello.u64() != HELLO {
        return Ok(Answer::Refused);
    }
    let (rank, size, nonce_j) = (hello.u64(), hello.u64(), hello.take::<16>());
    let Ok(nonce_s) = random_bytes::<16>() else {
        return Ok(Answer::Refused);
    };
    let mut ch = Wire::<CHALLENGE_BYTES>::new(CHALLENGE);
    ch.put(&nonce_s);
    if socket::send(s, &ch.b, None).is_err() {
        return Ok(Answer::Refused);
    }
    let Ok((mut proof, _)) = read::<PROOF_BYTES>(s) else {
        return Ok(Answer::Refused);
    };
    if proof.u64() != PROOF {
        return Ok(Answer::Refused);
    }
    let (mac, digest, bytes) = (proof.take::<32>(), proof.u64(), proof.u64());
    let theirs = proof_agreement(&mut proof);
    let judge =
        |code: Code, reason: String| (verdict(t, &nonce_s, &nonce_j, code, &reason), reason);
    let refuse = |code: Code, reason: String| {
        let (v, _) = judge(code, reason);
        let _ = socket::send(s, &v.b, None);
        Ok(Answer::Refused)
    };
    if !same_mac(&mac, &joiner_mac(t, &nonce_j, &nonce_s, rank, size)) {
        return refuse(
            Code::WrongKey,
            format!(
                "its key is not job {}'s key (AMRQ_JOB_KEY, or the per-user secret, differs)",
                t.id
            ),
        );
    }
    let Some((joined, memory)) = open else {
        return refuse(
            Code::Formed,
            format!(
                "job {} has formed: all {} ranks joined; a rank cannot join twice or late",
                t.id, t.size
            ),
        );
    };
    if size != t.size as u64 || digest != t.digest || bytes != t.bytes {
        let (v, why) = judge(
            Code::Disagrees,
            disagreement(t, rank, size, &theirs, digest),
        );
        let _ = socket::send(s, &v.b, None);
        return Err(BootError::Shm(format!(
            "rank {rank} cannot join job {}: {why}",
            t.id
        )));
    }
    match usize::try_from(rank)
        .ok()
        .and_then(|r| joined.get(r).copied())
    {
        Some(false) => {}
        _ => {
            return refuse(
                Code::Duplicate,
                format!(
                    "rank {rank} has already joined job {} (or is not one of its {} ranks)",
                    t.id, t.size
                ),
            )
        }
    }
    let (v, _) = judge(Code::Admitted, String::new());
    match socket::send(s, &v.b, Some(memory)) {
        Ok(()) => Ok(Answer::Admitted(rank as usize)),
        Err(_) => Ok(Answer::Refused), // it went away: it may come back
    }
}

// ---------------------------------------------------------------- joiner

/// A joiner's side: connects to rank 0 of job `t` at `name` (retrying until
/// `deadline`), proves the key, and returns the job's memory.
///
/// ```
/// # use amrq::bootstrap::{key::rendezvous_name, rendezvous::{self, Door, Terms}, JobKey};
/// # use amrq::util::shm::SharedFile;
/// # use std::time::{Duration, Instant};
/// # let id = format!("doc-{}-{}", std::process::id(), line!());
/// # let terms = Terms { id: id.clone(), key: JobKey::random().unwrap(), size: 2, digest: 0, bytes: 4096 , agreement: String::new() };
/// # let name = rendezvous_name(&id);
/// // No rank 0 at this name: the joiner gives up at its deadline, saying what to check.
/// let e = rendezvous::join(&name, &terms, 1, Instant::now() + Duration::from_millis(100)).unwrap_err();
/// assert!(e.to_string().contains("AMRQ_ATTACH_TIMEOUT"), "{e}");
/// ```
pub fn join(
    name: &str,
    t: &Terms,
    rank: usize,
    deadline: Instant,
) -> Result<SharedFile, BootError> {
    let waited = |what: &str| {
        BootError::Timeout(format!(
            "rank {rank} waited for rank 0 of job {} to {what} until the attach timeout \
             (AMRQ_ATTACH_TIMEOUT sets it); did rank 0 start, with the same AMRQ_JOB_ID?",
            t.id
        ))
    };
    let stream = loop {
        match socket::connect(name) {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(BootError::Shm(format!("rendezvous of job {}: {e}", t.id))),
        }
        if Instant::now() > deadline {
            return Err(waited("open its rendezvous"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    fault::point("connected", rank);
    let (pid, uid) =
        socket::peer(&stream).map_err(|e| BootError::Shm(format!("rendezvous: {e}")))?;
    if uid != my_uid() {
        return Err(BootError::Shm(format!(
            "job {}'s rendezvous is held by process {pid} of user {uid}, not of this user: refusing it",
            t.id
        )));
    }
    let lost = |e: io::Error| {
        if matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            return waited("answer");
        }
        BootError::Shm(format!(
            "rank 0 of job {} (process {pid}) went away before admitting rank {rank}: {}",
            t.id,
            how_it_ended(pid)
        ))
    };
    let remaining = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let _ = stream.set_read_timeout(Some(remaining));
    let nonce_j = random_bytes::<16>().map_err(|e| BootError::Shm(format!("getrandom: {e}")))?;
    socket::send(&stream, &hello(t, rank, &nonce_j).b, None).map_err(lost)?;
    let (mut ch, _) = read::<CHALLENGE_BYTES>(&stream).map_err(lost)?;
    if ch.u64() != CHALLENGE {
        return Err(BootError::Shm(format!(
            "job {}'s rendezvous spoke another protocol",
            t.id
        )));
    }
    let nonce_s = ch.take::<16>();
    socket::send(&stream, &proof(t, rank, &nonce_j, &nonce_s).b, None).map_err(lost)?;
    fault::point("proved", rank);
    let (v, fd) = read::<VERDICT_BYTES>(&stream).map_err(lost)?;
    let Some((admitted, genuine, reason)) = read_verdict(v, t, &nonce_s, &nonce_j) else {
        return Err(BootError::Shm(format!(
            "job {}'s rendezvous spoke another protocol",
            t.id
        )));
    };
    match (admitted, genuine, fd) {
        (true, true, Some(fd)) => {
            fault::point("received", rank);
            Ok(SharedFile::from_fd(fd))
        }
        (true, _, _) => Err(BootError::Refused(format!(
            "the process admitting rank {rank} to job {} (pid {pid}) did not prove it holds the job's key: refusing its memory",
            t.id
        ))),
        (false, _, _) => Err(BootError::Refused(format!(
            "rank 0 of job {} (pid {pid}) refused rank {rank}: {reason}{}",
            t.id,
            if genuine { "" } else { " (and could not prove it holds this rank's key)" }
        ))),
    }
}
