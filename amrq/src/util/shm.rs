//! Shared memory without a name: an anonymous memory file (`memfd_create`) that one
//! process creates and hands to others as a descriptor, mapped shared by all. Nothing
//! appears in /dev/shm or anywhere else in the file system, so nothing can be left
//! behind: the kernel frees the memory when the last process holding the descriptor or
//! a mapping ends, however it ends.
//!
//! The pages are ordinary shared memory (shmem) charged to the creating process's
//! memory cgroup, so [`check_room`] compares a job's size with the memory available
//! (`MemAvailable`, and the cgroup's limit when there is one) before creating it.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// Why shared memory could not be had.
///
/// ```
/// use amrq::util::shm::{check_room, ShmError};
/// match check_room(u64::MAX / 2, "lower AMRQ_SEGMENT_SIZE") {
///     Err(ShmError::NoRoom { needed, remedy, .. }) => {
///         assert_eq!(needed, u64::MAX / 2);
///         assert!(remedy.contains("AMRQ_SEGMENT_SIZE")); // says what to change
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// The host (or this cgroup) lacks memory for the object.
    #[error("not enough memory for the job's shared memory: it needs {needed} bytes ({needed_mib} MiB) but {free} bytes ({free_mib} MiB) are available ({whence}); {remedy}")]
    NoRoom {
        /// Bytes the object needs.
        needed: u64,
        /// The same in MiB.
        needed_mib: u64,
        /// Bytes available.
        free: u64,
        /// The same in MiB.
        free_mib: u64,
        /// Which limit that is (`MemAvailable` or the cgroup's `memory.max`).
        whence: &'static str,
        /// What to change.
        remedy: String,
    },
    /// A system call failed.
    #[error("{call}: {source}")]
    Os {
        /// The call.
        call: &'static str,
        /// The error.
        source: io::Error,
    },
}

fn os_err(call: &'static str) -> ShmError {
    ShmError::Os {
        call,
        source: io::Error::last_os_error(),
    }
}

/// Bytes of memory a new shared object can use, and which limit says so: the smaller
/// of the host's `MemAvailable` and what this process's cgroup (v2) has left.
///
/// ```
/// let (bytes, limit) = amrq::util::shm::memory_available().unwrap();
/// assert!(bytes > 0);
/// println!("{} MiB available ({limit})", bytes >> 20);
/// ```
pub fn memory_available() -> io::Result<(u64, &'static str)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    let host = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
        .ok_or_else(|| io::Error::other("/proc/meminfo has no MemAvailable"))?;
    Ok(match cgroup_room() {
        Some(room) if room < host => (room, "left under this cgroup's memory.max"),
        _ => (host, "MemAvailable"),
    })
}

/// `memory.max - memory.current` of this process's cgroup v2, if it has a limit.
fn cgroup_room() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = format!("/sys/fs/cgroup{}", path.trim());
    let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
    let max = read("memory.max")?.trim().parse::<u64>().ok()?; // "max": no limit
    let current = read("memory.current")?.trim().parse::<u64>().ok()?;
    Some(max.saturating_sub(current))
}

/// Fails with [`ShmError::NoRoom`] if fewer than `needed` bytes of memory are available.
///
/// ```
/// use amrq::util::shm::check_room;
/// assert!(check_room(4096, "nothing to change").is_ok());
/// let e = check_room(u64::MAX, "lower --segment-size").unwrap_err();
/// println!("{e}"); // how much is needed, how much is free, and the remedy
/// ```
pub fn check_room(needed: u64, remedy: &str) -> Result<(), ShmError> {
    let (free, whence) = memory_available().map_err(|source| ShmError::Os {
        call: "reading /proc/meminfo",
        source,
    })?;
    if free < needed {
        return Err(ShmError::NoRoom {
            needed,
            needed_mib: needed.div_ceil(1 << 20),
            free,
            free_mib: free >> 20,
            whence,
            remedy: remedy.to_string(),
        });
    }
    Ok(())
}

/// An anonymous shared memory file (its descriptor), closed on drop.
///
/// ```
/// use amrq::util::shm::SharedFile;
/// let f = SharedFile::create("amrq-doc", 4096).unwrap();
/// // The descriptor goes to another process (over a Unix socket); it maps the same bytes.
/// let dup = f.fd().try_clone().unwrap();
/// let other = SharedFile::from_fd(dup);
/// assert_eq!(other.size().unwrap(), 4096);
/// ```
#[derive(Debug)]
pub struct SharedFile {
    fd: OwnedFd,
}

impl SharedFile {
    /// A new anonymous file of `len` zero bytes; `label` names it in `/proc/PID/fd` only.
    ///
    /// ```
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", 8192).unwrap();
    /// assert_eq!(f.size().unwrap(), 8192);
    /// let m = f.map(8192).unwrap();
    /// assert_eq!(m.len(), 8192);
    /// ```
    pub fn create(label: &str, len: u64) -> Result<Self, ShmError> {
        let c = CString::new(label).map_err(|e| ShmError::Os {
            call: "memfd_create",
            source: io::Error::other(e),
        })?;
        let len = libc::off_t::try_from(len).map_err(|e| ShmError::Os {
            call: "ftruncate",
            source: io::Error::other(e),
        })?;
        // SAFETY: `c` is NUL-terminated; the flags are plain integers.
        let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_err("memfd_create"));
        }
        let file = Self {
            // SAFETY: `fd` was just opened and is owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        };
        // SAFETY: `fd` is open for writing.
        if unsafe { libc::ftruncate(fd, len) } != 0 {
            return Err(os_err("ftruncate"));
        }
        Ok(file)
    }

    /// Takes ownership of a descriptor received from another process.
    ///
    /// ```
    /// use amrq::util::shm::SharedFile;
    /// let f = SharedFile::create("amrq-doc", 4096).unwrap();
    /// let g = SharedFile::from_fd(f.fd().try_clone().unwrap());
    /// assert_eq!(g.size().unwrap(), f.size().unwrap());
    /// ```
    pub fn from_fd(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// The descriptor (to hand to another process).
    ///
    /// ```
    /// use std::os::fd::AsRawFd;
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", 4096).unwrap();
    /// assert!(f.fd().as_raw_fd() >= 0);
    /// ```
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Current size in bytes.
    ///
    /// ```
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", 12288).unwrap();
    /// assert_eq!(f.size().unwrap(), 12288);
    /// ```
    pub fn size(&self) -> Result<u64, ShmError> {
        // SAFETY: plain data, overwritten by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open and `st` writable.
        if unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) } != 0 {
            return Err(os_err("fstat"));
        }
        Ok(u64::try_from(st.st_size).unwrap_or(0))
    }

    /// Maps the first `len` bytes, shared.
    ///
    /// ```
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", 4096).unwrap();
    /// let m = f.map(4096).unwrap();
    /// // SAFETY: inside the mapping; a fresh file is zeroed.
    /// assert_eq!(unsafe { m.base().as_ptr().add(4095).read() }, 0);
    /// ```
    pub fn map(&self, len: usize) -> Result<Mapping, ShmError> {
        // SAFETY: a fresh shared mapping of an open descriptor; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap"));
        }
        Ok(Mapping {
            ptr: NonNull::new(p.cast()).ok_or_else(|| os_err("mmap"))?,
            len,
        })
    }
}

/// A shared mapping, unmapped on drop.
///
/// ```
/// let f = amrq::util::shm::SharedFile::create("amrq-doc", 4096).unwrap();
/// let m = f.map(4096).unwrap();
/// // SAFETY: the mapping's first byte; no other user of this fresh file.
/// unsafe { m.base().as_ptr().write(7) };
/// let again = f.map(4096).unwrap(); // a second mapping sees the same bytes
/// // SAFETY: as above.
/// assert_eq!(unsafe { again.base().as_ptr().read() }, 7);
/// ```
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared bytes; who touches what is decided by the
// protocols built on it (rings, the bootstrap block), as between processes.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// The first byte (page aligned).
    ///
    /// ```
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", 8192).unwrap();
    /// let m = f.map(8192).unwrap();
    /// assert_eq!(m.base().as_ptr() as usize % 4096, 0);
    /// ```
    pub fn base(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes.
    ///
    /// ```
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", 8192).unwrap();
    /// assert_eq!(f.map(4096).unwrap().len(), 4096);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty mapping (never, in practice).
    ///
    /// ```
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", 4096).unwrap();
    /// assert!(!f.map(4096).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `SharedFile::map` with this length, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
