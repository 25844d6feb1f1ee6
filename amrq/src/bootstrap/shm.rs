//! How the ranks of one host meet: one shared memory object per job, named from the
//! job key, whose first pages hold this bootstrap block.
//!
//! # Protocol
//!
//! 1. Every rank knows `(rank, size, key)` from its launcher (see [`super::env`]); the
//!    key is 128 random bits. The object's name is `/amrq-<first 64 key bits in hex>`.
//! 2. Rank 0 checks that /dev/shm has room for the whole job (the error says how much is
//!    needed, how much is free and which option lowers it), creates the object with
//!    `O_EXCL` and mode 0600, maps it, writes the header (key, ranks, sizes, a digest of
//!    the configuration), lets the conduit initialise its rings, writes its pid, and
//!    then stores `ready` last (Release).
//! 3. Every other rank opens the name (retrying until the deadline), waits for `ready`
//!    (Acquire), checks the **full** 128-bit key (a job never uses another job's object,
//!    whatever the name) and the configuration digest, maps the object and writes its pid.
//! 4. Each rank adds one to `attached`; the rank that brings it to `size` unlinks the
//!    name at once, so from then on no other process can open the job's memory, and
//!    nothing is left in /dev/shm whatever happens later. A barrier follows.
//!
//! Barrier and all-gather use a generation word and a counter in the header; waiters
//! spin briefly, then sleep on a shared futex, and check on every wake-up that no peer
//! process has died.
//!
//! ```text
//!     0 ┌ JobHeader ───────────────────────────────────────┐
//!       │ ready, key[2], ranks, total, digest, attached     │ line pair 0
//!   128 │ barrier generation (futex), barrier count         │ line pair 1
//!  4096 ├ pids: [u64; ranks] ─────────────────────────────── │
//!       ├ gather slots: [u64; ranks] ─────────────────────── │ padded to 4 KiB
//!     H ├ the conduit's part (rings, segments) ────────────── │
//!       └─────────────────────────────────────────────────────┘
//! ```

use super::BootError;
use crate::util::futex;
use crate::util::shm::{check_room, unlink, Mapping, ShmObject};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "amrqJOB1" once rank 0 has initialised everything.
const READY: u64 = u64::from_le_bytes(*b"amrqJOB1");
/// A rank's pid slot once it has left the job cleanly: its process may be gone without
/// anything having failed (it finished first).
const LEFT: u64 = u64::MAX;
const HEADER_BYTES: usize = 4096;

/// A job's 128-bit key.
///
/// ```
/// use amrq::bootstrap::JobKey;
/// let k = JobKey::random().unwrap();
/// assert_eq!(JobKey::parse(&k.to_string()), Some(k));
/// assert!(k.object_name().starts_with("/amrq-"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobKey(pub [u64; 2]);

impl JobKey {
    /// 128 bits from the kernel's random source.
    pub fn random() -> std::io::Result<Self> {
        let mut b = [0u8; 16];
        // SAFETY: `b` is writable for 16 bytes.
        let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 16, 0) };
        if n != 16 {
            return Err(std::io::Error::last_os_error());
        }
        let lo = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
        let hi = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
        Ok(Self([lo, hi]))
    }

    /// The key from its 32 hex digits.
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() != 32 {
            return None;
        }
        let lo = u64::from_str_radix(&s[..16], 16).ok()?;
        let hi = u64::from_str_radix(&s[16..], 16).ok()?;
        Some(Self([lo, hi]))
    }

    /// The name of the job's shared memory object.
    pub fn object_name(&self) -> String {
        format!("/amrq-{:016x}", self.0[0])
    }
}

impl std::fmt::Display for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}{:016x}", self.0[0], self.0[1])
    }
}

#[repr(C, align(128))]
struct JobHeader {
    ready: AtomicU64,
    key: [u64; 2],
    ranks: u64,
    total_bytes: u64,
    digest: u64,
    attached: AtomicU64,
    _pad: [u8; 72],
    barrier_gen: AtomicU32,
    barrier_count: AtomicU32,
}

const _: () = {
    assert!(std::mem::offset_of!(JobHeader, barrier_gen) == 128);
    assert!(std::mem::size_of::<JobHeader>() <= HEADER_BYTES);
};

/// Bytes the bootstrap block takes for `ranks` ranks (a multiple of 4 KiB).
pub fn block_bytes(ranks: usize) -> usize {
    HEADER_BYTES + (16 * ranks).div_ceil(4096) * 4096
}

/// One rank's view of a job that lives in shared memory.
#[derive(Debug)]
pub struct ShmJob {
    map: Mapping,
    rank: usize,
    size: usize,
    timeout: Duration,
}

/// What a rank brings to the meeting.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// This rank.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
    /// The job key.
    pub key: JobKey,
    /// Bytes the conduit needs after the bootstrap block.
    pub user_bytes: usize,
    /// A digest of the configuration; every rank must bring the same.
    pub digest: u64,
    /// How long to wait for the others.
    pub timeout: Duration,
    /// Said in the /dev/shm error: which option lowers the job's size.
    pub remedy: String,
}

impl ShmJob {
    /// Creates (rank 0) or attaches to (others) the job's object, following the protocol
    /// in the module doc. `init` runs on rank 0 only, on the conduit's part, before
    /// anyone else can see it.
    pub fn start(spec: &JobSpec, init: impl FnOnce(NonNull<u8>)) -> Result<Self, BootError> {
        let total = block_bytes(spec.size) + spec.user_bytes;
        let name = spec.key.object_name();
        let deadline = Instant::now() + spec.timeout;
        let map = if spec.rank == 0 {
            check_room(total as u64, &spec.remedy).map_err(|e| BootError::Shm(e.to_string()))?;
            let obj = ShmObject::create(&name, total as u64)
                .map_err(|e| BootError::Shm(e.to_string()))?;
            let map = obj.map(total).map_err(|e| {
                unlink(&name);
                BootError::Shm(e.to_string())
            })?;
            let h = header(&map);
            // SAFETY: nobody else has seen the object yet: we are its only user.
            unsafe {
                let hp = map.base().as_ptr().cast::<JobHeader>();
                std::ptr::addr_of_mut!((*hp).key).write(spec.key.0);
                std::ptr::addr_of_mut!((*hp).ranks).write(spec.size as u64);
                std::ptr::addr_of_mut!((*hp).total_bytes).write(total as u64);
                std::ptr::addr_of_mut!((*hp).digest).write(spec.digest);
            }
            // SAFETY: the conduit's part starts after the block, inside the mapping.
            init(unsafe { map.base().add(block_bytes(spec.size)) });
            // ORDERING: Release publishes the header and the conduit's initialisation;
            // pairs with the Acquire load of `ready` by the attaching ranks below.
            h.ready.store(READY, Ordering::Release);
            map
        } else {
            attach(spec, &name, total, deadline).inspect_err(|e| {
                // A job whose ranks disagree will not start: leave nothing behind.
                if matches!(e, BootError::Shm(_)) {
                    unlink(&name);
                }
            })?
        };
        let job = Self {
            map,
            rank: spec.rank,
            size: spec.size,
            timeout: spec.timeout,
        };
        job.pid(spec.rank)
            .store(u64::from(std::process::id()), Ordering::Relaxed);
        // ORDERING: AcqRel: the unlinking rank has seen every rank attach (each added
        // after mapping); pairs with the other ranks' fetch_add.
        if job.header().attached.fetch_add(1, Ordering::AcqRel) + 1 == spec.size as u64 {
            unlink(&name);
        }
        job.barrier()?;
        Ok(job)
    }

    fn header(&self) -> &JobHeader {
        header(&self.map)
    }

    fn word(&self, index: usize) -> &AtomicU64 {
        debug_assert!(index < 2 * self.size);
        // SAFETY: the pid and gather arrays follow the header inside the block
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

    fn pid(&self, rank: usize) -> &AtomicU64 {
        self.word(rank)
    }

    /// The conduit's part of the object: `user_bytes` bytes after the block.
    pub fn user_base(&self) -> NonNull<u8> {
        // SAFETY: the block is inside the mapping (its size was checked on attach).
        unsafe { self.map.base().add(block_bytes(self.size)) }
    }

    /// Waits until every rank has called `barrier` once more.
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

    /// True once rank `r` has left the job cleanly (its job handle dropped).
    pub fn has_left(&self, r: usize) -> bool {
        // ORDERING: Acquire pairs with the Release store of LEFT in `drop`: the frames
        // the rank published before it left are visible after this.
        r < self.size && self.pid(r).load(Ordering::Acquire) == LEFT
    }

    /// [`BootError::PeerDead`] if a rank's process no longer exists although it did not
    /// leave the job cleanly (a crash, a signal, an exit from inside the job).
    pub fn check_peers(&self) -> Result<(), BootError> {
        for r in 0..self.size {
            // ORDERING: Acquire pairs with the Release store of LEFT in `drop`, so a rank
            // that left is never taken for dead (its exit follows that store).
            let pid = self.pid(r).load(Ordering::Acquire);
            if pid == 0 || pid == LEFT || r == self.rank {
                continue;
            }
            // SAFETY: signal 0 only checks that the process exists.
            if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            {
                return Err(BootError::PeerDead {
                    rank: r,
                    cause: format!("its process {pid} has exited"),
                });
            }
        }
        Ok(())
    }
}

impl Drop for ShmJob {
    fn drop(&mut self) {
        // Leaving normally (not unwinding from a panic): say so, so that peers still
        // finishing do not take this rank's exit for a failure.
        if !std::thread::panicking() {
            // ORDERING: Release pairs with the Acquire load in `check_peers`.
            self.pid(self.rank).store(LEFT, Ordering::Release);
        }
    }
}

fn header(map: &Mapping) -> &JobHeader {
    // SAFETY: every mapping of a job starts with its header (≥ HEADER_BYTES mapped).
    unsafe { &*map.base().as_ptr().cast::<JobHeader>() }
}

fn attach(
    spec: &JobSpec,
    name: &str,
    total: usize,
    deadline: Instant,
) -> Result<Mapping, BootError> {
    let shm = |e: crate::util::shm::ShmError| BootError::Shm(e.to_string());
    let late = |what: &str| {
        BootError::Timeout(format!(
            "rank {} waited {:?} for rank 0 to {what} the job's shared memory {name}; did rank 0 start?",
            spec.rank, spec.timeout
        ))
    };
    let obj = loop {
        if let Some(o) = ShmObject::open(name).map_err(shm)? {
            break o;
        }
        if Instant::now() > deadline {
            return Err(late("create"));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    while obj.size().map_err(shm)? < total as u64 {
        if Instant::now() > deadline {
            return Err(late("size"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let map = obj.map(total).map_err(shm)?;
    let h = header(&map);
    // ORDERING: Acquire pairs with rank 0's Release store of `ready`.
    while h.ready.load(Ordering::Acquire) != READY {
        if Instant::now() > deadline {
            return Err(late("initialise"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if h.key != spec.key.0 {
        return Err(BootError::Shm(format!(
            "{name} belongs to another job (its key differs): refusing to attach"
        )));
    }
    if h.ranks != spec.size as u64 || h.total_bytes != total as u64 || h.digest != spec.digest {
        return Err(BootError::Shm(format!(
            "rank {} and rank 0 disagree on the job: {} vs {} ranks, {} vs {} bytes, configuration digest {:#x} vs {:#x}; give every rank the same settings",
            spec.rank, spec.size, h.ranks, total, h.total_bytes, spec.digest, h.digest
        )));
    }
    Ok(map)
}
