//! How the ranks of one host meet: rank 0 creates the job's memory as an anonymous
//! file and hands it to every other rank over a Unix socket; its first pages hold this
//! bootstrap block.
//!
//! # Why nothing can be left behind
//!
//! The job's memory never has a name. Rank 0 makes it with `memfd_create`, and a rank
//! gets it only as a descriptor passed over rank 0's rendezvous socket (`SCM_RIGHTS`)
//! after proving it holds the job's key (see [`super::rendezvous`]). The socket has an
//! abstract name (no file), which the kernel removes when rank 0's process ends. So
//! whichever process dies at whatever moment (rank 0 before anyone joined, a joiner
//! mid-handshake, the launcher), the kernel frees what it held: nothing in /dev/shm,
//! nothing to unlink, nothing for a later job to reap. A name in /dev/shm cannot meet
//! that: between its creation and its unlinking a crash leaves it, and a process that
//! could open it by name could also unlink it. fault points ([`super::fault`]) let the
//! tests kill a rank or the launcher at each step and check.
//!
//! # Protocol
//!
//! 1. Every rank knows `(rank, size, id, key)` from its launcher (see [`super::env`]).
//!    The rendezvous name comes from the public id and the user id; the key is secret.
//! 2. Rank 0 opens the rendezvous (failing at once if another process holds it), checks
//!    that the host has memory for the job (the error says how much is needed, how much
//!    is free and which option lowers it), creates the memory, writes the header, lets
//!    the conduit initialise its rings, stores `ready` (Release), publishes its pid, and
//!    admits the others one by one until all have joined or the attach timeout passes.
//! 3. Every other rank connects (retrying until the attach timeout), proves the key,
//!    receives the memory, checks `ready` (Acquire) and the header, maps it and
//!    publishes its pid. A start barrier follows.
//! 4. Rank 0 keeps the rendezvous open for the life of the job, on a thread that tells
//!    any later joiner why it cannot join (wrong key, job formed) at once.
//!
//! Barrier and all-gather use a generation word and a counter in the header; waiters
//! spin briefly, then sleep on a shared futex, and check on every wake-up that no peer
//! process has died. A rank's slot holds its pid and its state (running, left cleanly,
//! failed); the first failure anyone sees is recorded in the header with its cause, so
//! every survivor blames the same rank.
//!
//! ```text
//!     0 ┌ JobHeader ───────────────────────────────────────┐
//!       │ ready, ranks, total, digest, failure               │ line pair 0
//!   128 │ barrier generation (futex), barrier count          │ line pair 1
//!   256 │ the first failure's cause (length, UTF-8 text)     │
//!  4096 ├ slots: [pid | state << 32; ranks] ───────────────── │
//!       ├ gather slots: [u64; ranks] ─────────────────────── │ padded to 4 KiB
//!     H ├ the conduit's part (rings, segments) ────────────── │
//!       └─────────────────────────────────────────────────────┘
//! ```

use super::key::rendezvous_name;
use super::liveness::Watch;
use super::rendezvous::{self, Door, Keeper, Terms};
use super::{fault, BootError, JobKey};
use crate::util::futex;
use crate::util::shm::{check_room, Mapping, SharedFile};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "amrqJOB2" once rank 0 has initialised everything.
const READY: u64 = u64::from_le_bytes(*b"amrqJOB2");
const HEADER_BYTES: usize = 4096;
const CAUSE_OFFSET: usize = 256;
const CAUSE_BYTES: usize = 254;

/// A rank's state, in the high half of its slot.
const RUNNING: u64 = 0;
/// Left the job cleanly: its process may be gone without anything having failed.
const LEFT: u64 = 1;
/// Failed: it recorded why before ending.
const FAILED: u64 = 2;

/// The failure word while its cause is being written.
const CLAIMING: u64 = u64::MAX;

#[repr(C, align(128))]
struct JobHeader {
    ready: AtomicU64,
    ranks: u64,
    total_bytes: u64,
    digest: u64,
    /// 0: no failure; rank + 1 of the first failed rank once its cause is written.
    failure: AtomicU64,
    _pad: [u8; 88],
    barrier_gen: AtomicU32,
    barrier_count: AtomicU32,
}

const _: () = {
    assert!(std::mem::offset_of!(JobHeader, barrier_gen) == 128);
    assert!(std::mem::size_of::<JobHeader>() <= CAUSE_OFFSET);
    assert!(CAUSE_OFFSET + 2 + CAUSE_BYTES <= HEADER_BYTES);
};

/// Bytes the bootstrap block takes for `ranks` ranks (a multiple of 4 KiB).
///
/// ```
/// use amrq::bootstrap::shm::block_bytes;
/// assert_eq!(block_bytes(4) % 4096, 0);
/// assert!(block_bytes(64) >= block_bytes(2));
/// ```
pub fn block_bytes(ranks: usize) -> usize {
    HEADER_BYTES + (16 * ranks).div_ceil(4096) * 4096
}

/// One rank's view of a job that lives in shared memory.
///
/// ```
/// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
/// # use std::time::Duration;
/// # let spec = JobSpec {
/// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
/// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
/// # };
/// let job = ShmJob::start(&spec, |_| {}).unwrap();
/// job.barrier().unwrap();
/// assert_eq!(job.allgather(9).unwrap(), [9]);
/// ```
#[derive(Debug)]
pub struct ShmJob {
    map: Mapping,
    rank: usize,
    size: usize,
    timeout: Duration,
    watch: Watch,
    /// Rank 0: the thread that answers late joiners, stopped on drop.
    _door: Option<Keeper>,
}

/// What a rank brings to the meeting.
///
/// ```
/// use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
/// use std::time::Duration;
/// let spec = JobSpec {
///     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
///     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
/// };
/// let job = ShmJob::start(&spec, |_conduit_part| {}).unwrap();
/// assert_eq!(job.rank(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// This rank.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
    /// The job's public id (where its ranks meet).
    pub id: String,
    /// The job's secret key (how they know each other).
    pub key: JobKey,
    /// Bytes the conduit needs after the bootstrap block.
    pub user_bytes: usize,
    /// A digest of the configuration; every rank must bring the same.
    pub digest: u64,
    /// What the digest is of, one `name=value` per line: named when a rank disagrees.
    pub agreement: String,
    /// How long to wait for the others (the attach timeout).
    pub timeout: Duration,
    /// Said in the out-of-memory error: which option lowers the job's size.
    pub remedy: String,
}

impl ShmJob {
    /// Creates (rank 0) or joins (others) the job's memory, following the protocol in
    /// the module doc. `init` runs on rank 0 only, on the conduit's part, before anyone
    /// else can see it.
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// // Rank 0 creates the memory and initialises the conduit's part before anyone joins.
    /// let job = ShmJob::start(&spec, |part| {
    ///     // SAFETY: the conduit's part: 4096 bytes nobody else sees yet.
    ///     unsafe { part.as_ptr().write(1) }
    /// }).unwrap();
    /// // SAFETY: inside the conduit's part of the mapped job.
    /// assert_eq!(unsafe { job.user_base().as_ptr().read() }, 1);
    /// ```
    pub fn start(spec: &JobSpec, init: impl FnOnce(NonNull<u8>)) -> Result<Self, BootError> {
        crate::util::backoff::crowd(spec.size);
        let total = block_bytes(spec.size)
            .checked_add(spec.user_bytes)
            .ok_or_else(|| BootError::Shm("the job's size overflows".into()))?;
        let deadline = Instant::now() + spec.timeout;
        let name = rendezvous_name(&spec.id);
        let terms = Terms {
            id: spec.id.clone(),
            key: spec.key,
            size: spec.size,
            digest: spec.digest,
            bytes: total as u64,
            agreement: spec.agreement.clone(),
        };
        let job = if spec.rank == 0 {
            let door = match spec.size {
                1 => None,
                _ => Some(Door::open(&name, &spec.id)?),
            };
            fault::point("listening", 0);
            check_room(total as u64, &spec.remedy).map_err(|e| BootError::Shm(e.to_string()))?;
            let file = SharedFile::create("amrq-job", total as u64)
                .map_err(|e| BootError::Shm(e.to_string()))?;
            let map = file.map(total).map_err(|e| BootError::Shm(e.to_string()))?;
            fault::point("created", 0);
            // SAFETY: nobody else has seen the memory yet: we are its only user.
            unsafe {
                let hp = map.base().as_ptr().cast::<JobHeader>();
                std::ptr::addr_of_mut!((*hp).ranks).write(spec.size as u64);
                std::ptr::addr_of_mut!((*hp).total_bytes).write(total as u64);
                std::ptr::addr_of_mut!((*hp).digest).write(spec.digest);
            }
            // SAFETY: the conduit's part starts after the block, inside the mapping.
            init(unsafe { map.base().add(block_bytes(spec.size)) });
            // ORDERING: Release publishes the header and the conduit's initialisation;
            // pairs with the Acquire load of `ready` by the joining ranks below.
            header(&map).ready.store(READY, Ordering::Release);
            fault::point("initialised", 0);
            let mut job = Self::new(map, spec);
            job.publish_pid();
            if let Some(door) = door {
                door.admit_all(&terms, file.fd(), deadline, || job.check_peers())?;
                job._door = Some(door.keep(terms));
            }
            job
        } else {
            let file = rendezvous::join(&name, &terms, spec.rank, deadline)?;
            let job = Self::new(attach(&file, spec, total)?, spec);
            job.publish_pid();
            job
        };
        fault::point("attached", spec.rank);
        job.barrier()?;
        fault::point("started", spec.rank);
        Ok(job)
    }

    fn new(map: Mapping, spec: &JobSpec) -> Self {
        Self {
            map,
            rank: spec.rank,
            size: spec.size,
            timeout: spec.timeout,
            watch: Watch::new(spec.size),
            _door: None,
        }
    }

    /// This rank.
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// assert_eq!(ShmJob::start(&spec, |_| {}).unwrap().rank(), 0);
    /// ```
    pub fn rank(&self) -> usize {
        self.rank
    }

    fn publish_pid(&self) {
        // ORDERING: Release pairs with the Acquire loads in `check_peers`.
        self.slot(self.rank).store(
            u64::from(std::process::id()) | RUNNING << 32,
            Ordering::Release,
        );
    }

    fn header(&self) -> &JobHeader {
        header(&self.map)
    }

    fn word(&self, index: usize) -> &AtomicU64 {
        assert!(index < 2 * self.size, "bootstrap word {index} out of range");
        // SAFETY: the slot and gather arrays follow the header inside the block
        // (`block_bytes`), 8-byte aligned, and are only accessed atomically.
        unsafe {
            &*self
                .map
                .base()
                .as_ptr()
                .add(HEADER_BYTES)
                .cast::<AtomicU64>()
                .add(index)
        }
    }

    fn slot(&self, rank: usize) -> &AtomicU64 {
        self.word(rank)
    }

    /// The conduit's part of the object: `user_bytes` bytes after the block.
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// let job = ShmJob::start(&spec, |_| {}).unwrap();
    /// assert_eq!(job.user_base().as_ptr() as usize % 4096, 0);
    /// ```
    pub fn user_base(&self) -> NonNull<u8> {
        // SAFETY: the block is inside the mapping (its size was checked on attach).
        unsafe { self.map.base().add(block_bytes(self.size)) }
    }

    /// Waits until every rank has called `barrier` once more.
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// ShmJob::start(&spec, |_| {}).unwrap().barrier().unwrap();
    /// ```
    pub fn barrier(&self) -> Result<(), BootError> {
        let h = self.header();
        // ORDERING: Acquire pairs with the Release increment of the generation below.
        let gen = h.barrier_gen.load(Ordering::Acquire);
        // ORDERING: AcqRel: the last arriver sees every rank's writes before its arrival.
        if h.barrier_count.fetch_add(1, Ordering::AcqRel) + 1 == self.size as u32 {
            h.barrier_count.store(0, Ordering::Relaxed);
            // ORDERING: Release publishes the reset count and every arrival's writes
            // (carried by the AcqRel above); pairs with the Acquire loads of waiters.
            h.barrier_gen.fetch_add(1, Ordering::Release);
            futex::wake_all(&h.barrier_gen);
            return Ok(());
        }
        let start = Instant::now();
        let mut spins = 0u32;
        // ORDERING: Acquire pairs with the Release increment by the last arriver.
        while h.barrier_gen.load(Ordering::Acquire) == gen {
            if spins < 1000 {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            futex::wait(&h.barrier_gen, gen, Duration::from_millis(20));
            self.check_peers()?;
            if start.elapsed() > self.timeout {
                return Err(BootError::Timeout(format!(
                    "rank {} waited {:?} at a barrier for the other ranks",
                    self.rank, self.timeout
                )));
            }
        }
        Ok(())
    }

    /// Every rank contributes `mine`; all get the words in rank order.
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// assert_eq!(ShmJob::start(&spec, |_| {}).unwrap().allgather(4).unwrap(), [4]);
    /// ```
    pub fn allgather(&self, mine: u64) -> Result<Vec<u64>, BootError> {
        self.word(self.size + self.rank)
            .store(mine, Ordering::Relaxed);
        self.barrier()?;
        let all = (0..self.size)
            .map(|r| self.word(self.size + r).load(Ordering::Relaxed))
            .collect();
        // A second barrier, so no rank overwrites its slot before all have read it.
        self.barrier()?;
        Ok(all)
    }

    /// True once rank `r` has left the job cleanly (its job handle dropped without a
    /// failure recorded).
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// let job = ShmJob::start(&spec, |_| {}).unwrap();
    /// assert!(!job.has_left(0)); // this rank is still in
    /// ```
    pub fn has_left(&self, r: usize) -> bool {
        // ORDERING: Acquire pairs with the Release store of LEFT in `drop`: the frames
        // the rank published before it left are visible after this.
        r < self.size && self.slot(r).load(Ordering::Acquire) >> 32 == LEFT
    }

    /// [`BootError::PeerDead`] if a rank has failed: the first failure anyone recorded
    /// (so every survivor blames the same rank), or else a rank whose process has ended
    /// without leaving the job cleanly (a crash, a signal, an exit from inside the job).
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// assert!(ShmJob::start(&spec, |_| {}).unwrap().check_peers().is_ok());
    /// ```
    pub fn check_peers(&self) -> Result<(), BootError> {
        if let Some((rank, cause)) = self.recorded_failure() {
            if rank != self.rank {
                return Err(BootError::PeerDead { rank, cause });
            }
        }
        let peers = (0..self.size).filter(|&r| r != self.rank).filter_map(|r| {
            // ORDERING: Acquire pairs with the Release stores of a rank's slot, so a
            // rank that left is never taken for dead (its exit follows that store).
            let w = self.slot(r).load(Ordering::Acquire);
            (w as u32 != 0 && w >> 32 != LEFT).then_some((r, w as u32))
        });
        // A rank seen ended may have left cleanly, and exited, after the load above (a
        // poller preempted between the two: CI saw it with 3 ranks on 2 cores). Its
        // LEFT store precedes its exit, which the watch has seen: load again.
        match self.watch.first_ended(peers, |r| self.has_left(r)) {
            Some((r, how)) => {
                let (rank, cause) = self.record_failure(r, &how);
                Err(BootError::PeerDead { rank, cause })
            }
            None => Ok(()),
        }
    }

    /// Records that this rank is failing, with `cause` (the first failure recorded in
    /// the job is the one every survivor reports).
    ///
    /// ```
    /// # use amrq::bootstrap::{shm::JobSpec, JobKey, ShmJob};
    /// # use std::time::Duration;
    /// # let spec = JobSpec {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()), key: JobKey::random().unwrap(),
    /// #     user_bytes: 4096, digest: 0, agreement: String::new(), timeout: Duration::from_secs(5), remedy: "nothing".into(),
    /// # };
    /// let job = ShmJob::start(&spec, |_| {}).unwrap();
    /// job.mark_failed("gave up"); // the others' check_peers now name this rank and why
    /// ```
    pub fn mark_failed(&self, cause: &str) {
        let w = u64::from(std::process::id()) | FAILED << 32;
        // ORDERING: Release pairs with the Acquire loads in `check_peers`.
        self.slot(self.rank).store(w, Ordering::Release);
        self.record_failure(self.rank, cause);
    }

    /// The first failure recorded in the job, if any.
    fn recorded_failure(&self) -> Option<(usize, String)> {
        // ORDERING: Acquire pairs with the Release store in `record_failure`: the cause
        // text written before it is visible.
        match self.header().failure.load(Ordering::Acquire) {
            0 | CLAIMING => None,
            r => Some(((r - 1) as usize, self.read_cause())),
        }
    }

    /// Records `(rank, cause)` as the job's failure unless one is recorded already;
    /// returns the one that stands.
    fn record_failure(&self, rank: usize, cause: &str) -> (usize, String) {
        let h = self.header();
        // ORDERING: Acquire on failure pairs with the claimer's Release store, to read
        // its text; on success nothing is read.
        match h
            .failure
            .compare_exchange(0, CLAIMING, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => {
                let bytes = cause.as_bytes();
                let n = bytes.len().min(CAUSE_BYTES);
                // SAFETY: the cause area lies inside the header page; only the claimer
                // writes it, before the Release store below, and readers read it only
                // after the Acquire load that sees that store.
                unsafe {
                    let p = self.map.base().as_ptr().add(CAUSE_OFFSET);
                    p.cast::<[u8; 2]>().write((n as u16).to_le_bytes());
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(2), n);
                }
                // ORDERING: Release publishes the cause text; pairs with the Acquire
                // loads in `recorded_failure`.
                h.failure.store(rank as u64 + 1, Ordering::Release);
                (rank, cause.to_string())
            }
            Err(_) => {
                let until = Instant::now() + Duration::from_millis(10);
                loop {
                    if let Some(first) = self.recorded_failure() {
                        return first;
                    }
                    if Instant::now() > until {
                        // The claimer died while writing: what we saw stands.
                        return (rank, cause.to_string());
                    }
                    std::hint::spin_loop();
                }
            }
        }
    }

    fn read_cause(&self) -> String {
        // SAFETY: the cause area lies inside the header page and was published (see
        // `record_failure`); its length is clamped, whatever a peer wrote there.
        unsafe {
            let p = self.map.base().as_ptr().add(CAUSE_OFFSET);
            let n = usize::from(u16::from_le_bytes(p.cast::<[u8; 2]>().read())).min(CAUSE_BYTES);
            String::from_utf8_lossy(std::slice::from_raw_parts(p.add(2), n)).into_owned()
        }
    }
}

impl Drop for ShmJob {
    fn drop(&mut self) {
        // Leaving normally (not unwinding from a panic, not marked failed): say so, so
        // that peers still finishing do not take this rank's exit for a failure.
        if !std::thread::panicking() {
            let running = u64::from(std::process::id()) | RUNNING << 32;
            // ORDERING: Release pairs with the Acquire loads in `check_peers`/`has_left`.
            let _ = self.slot(self.rank).compare_exchange(
                running,
                u64::from(std::process::id()) | LEFT << 32,
                Ordering::Release,
                Ordering::Relaxed,
            );
        }
    }
}

fn header(map: &Mapping) -> &JobHeader {
    // SAFETY: every mapping of a job starts with its header (≥ HEADER_BYTES mapped).
    unsafe { &*map.base().as_ptr().cast::<JobHeader>() }
}

/// A joiner maps the memory rank 0 handed it and checks it is what the terms say.
fn attach(file: &SharedFile, spec: &JobSpec, total: usize) -> Result<Mapping, BootError> {
    let shm = |e: crate::util::shm::ShmError| BootError::Shm(e.to_string());
    let have = file.size().map_err(shm)?;
    if have < total as u64 {
        return Err(BootError::Shm(format!(
            "job {}'s memory has {have} bytes, this rank needs {total}: give every rank the same settings",
            spec.id
        )));
    }
    let map = file.map(total).map_err(shm)?;
    let h = header(&map);
    // ORDERING: Acquire pairs with rank 0's Release store of `ready`.
    if h.ready.load(Ordering::Acquire) != READY
        || h.ranks != spec.size as u64
        || h.total_bytes != total as u64
        || h.digest != spec.digest
    {
        return Err(BootError::Shm(format!(
            "job {}'s memory is not laid out as this rank expects (another amrq version?)",
            spec.id
        )));
    }
    Ok(map)
}
