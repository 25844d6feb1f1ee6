//! POSIX shared memory objects (`shm_open` + `mmap`): create or open one by name, check
//! that /dev/shm has room first, map it, unlink it.

use std::ffi::CString;
use std::io;
use std::ptr::NonNull;

/// Why shared memory could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// /dev/shm lacks room for the object.
    #[error("not enough room in /dev/shm: the job needs {needed} bytes ({needed_mib} MiB) but {free} bytes ({free_mib} MiB) are free; {remedy}")]
    NoRoom {
        /// Bytes the object needs.
        needed: u64,
        /// The same in MiB.
        needed_mib: u64,
        /// Bytes free.
        free: u64,
        /// The same in MiB.
        free_mib: u64,
        /// What to change.
        remedy: String,
    },
    /// A system call failed.
    #[error("{call}({name}): {source}")]
    Os {
        /// The call.
        call: &'static str,
        /// The object's name.
        name: String,
        /// The error.
        source: io::Error,
    },
}

/// Bytes free for unprivileged use in /dev/shm.
pub fn shm_free_bytes() -> io::Result<u64> {
    let path = CString::new("/dev/shm").map_err(io::Error::other)?;
    // SAFETY: statvfs is plain data; all-zero is a valid value to be overwritten.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `st` is writable.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Fails with [`ShmError::NoRoom`] if /dev/shm has fewer than `needed` bytes free.
pub fn check_room(needed: u64, remedy: &str) -> Result<(), ShmError> {
    let free = shm_free_bytes().map_err(|source| ShmError::Os {
        call: "statvfs",
        name: "/dev/shm".into(),
        source,
    })?;
    if free < needed {
        return Err(ShmError::NoRoom {
            needed,
            needed_mib: needed.div_ceil(1 << 20),
            free,
            free_mib: free >> 20,
            remedy: remedy.to_string(),
        });
    }
    Ok(())
}

/// A mapped shared memory object, unmapped on drop.
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

fn os_err(call: &'static str, name: &str) -> ShmError {
    ShmError::Os {
        call,
        name: name.to_string(),
        source: io::Error::last_os_error(),
    }
}

/// An open shared memory object (its descriptor), closed on drop.
#[derive(Debug)]
pub struct ShmObject {
    fd: libc::c_int,
    name: String,
}

impl Drop for ShmObject {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        unsafe { libc::close(self.fd) };
    }
}

impl ShmObject {
    /// Creates `name` (which must not exist) with mode 0600 and `len` bytes.
    pub fn create(name: &str, len: u64) -> Result<Self, ShmError> {
        let c = CString::new(name).map_err(|e| ShmError::Os {
            call: "shm_open",
            name: name.into(),
            source: io::Error::other(e),
        })?;
        // SAFETY: `c` is NUL-terminated; flags and mode are plain integers.
        let fd = unsafe {
            libc::shm_open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(os_err("shm_open", name));
        }
        let obj = Self {
            fd,
            name: name.into(),
        };
        // SAFETY: `fd` is open for writing.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            let e = os_err("ftruncate", name);
            unlink(name);
            return Err(e);
        }
        Ok(obj)
    }

    /// Opens the existing object `name`; `Ok(None)` if it does not exist (yet).
    pub fn open(name: &str) -> Result<Option<Self>, ShmError> {
        let c = CString::new(name).map_err(|e| ShmError::Os {
            call: "shm_open",
            name: name.into(),
            source: io::Error::other(e),
        })?;
        // SAFETY: `c` is NUL-terminated.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Ok(None);
            }
            return Err(ShmError::Os {
                call: "shm_open",
                name: name.into(),
                source: e,
            });
        }
        Ok(Some(Self {
            fd,
            name: name.into(),
        }))
    }

    /// Current size in bytes.
    pub fn size(&self) -> Result<u64, ShmError> {
        // SAFETY: plain data, overwritten by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open and `st` writable.
        if unsafe { libc::fstat(self.fd, &mut st) } != 0 {
            return Err(os_err("fstat", &self.name));
        }
        Ok(st.st_size as u64)
    }

    /// Maps the first `len` bytes, shared.
    pub fn map(&self, len: usize) -> Result<Mapping, ShmError> {
        // SAFETY: a fresh shared mapping of an open descriptor; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap", &self.name));
        }
        Ok(Mapping {
            ptr: NonNull::new(p.cast()).ok_or_else(|| os_err("mmap", &self.name))?,
            len,
        })
    }
}

/// Removes `name` from /dev/shm (mappings stay valid). Errors are ignored: it may be gone.
pub fn unlink(name: &str) {
    if let Ok(c) = CString::new(name) {
        // SAFETY: `c` is NUL-terminated.
        unsafe { libc::shm_unlink(c.as_ptr()) };
    }
}

impl Mapping {
    /// The first byte (page aligned).
    pub fn base(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty mapping (never, in practice).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `ShmObject::map` with this length, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
