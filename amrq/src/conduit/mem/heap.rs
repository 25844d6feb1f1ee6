//! Zeroed, page-aligned private memory: the region of the `threads` conduit and of the
//! UCX conduit's local queues.

use crate::conduit::ConduitError;
use std::ptr::NonNull;

/// Zeroed, page-aligned private memory holding a region (the `threads` conduit): an
/// anonymous mapping, so pages are zeroed by the kernel when first touched (a 64 MiB
/// segment that is never written costs nothing; `alloc_zeroed` with page alignment
/// would `memset` all of it).
///
/// ```
/// use amrq::conduit::mem::HeapRegion;
/// let r = HeapRegion::new(64 << 20).unwrap(); // 64 MiB that cost nothing until touched
/// assert_eq!(r.base().as_ptr() as usize % 4096, 0);
/// ```
#[derive(Debug)]
pub struct HeapRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain bytes; which thread touches which bytes is decided by
// the ring protocol, as for memory shared with another process.
unsafe impl Send for HeapRegion {}
// SAFETY: as above; &HeapRegion only hands out the base address.
unsafe impl Sync for HeapRegion {}

impl HeapRegion {
    /// Maps `bytes` zeroed bytes.
    ///
    /// ```
    /// use amrq::conduit::mem::HeapRegion;
    /// let r = HeapRegion::new(4096).unwrap();
    /// // SAFETY: inside the fresh region.
    /// assert_eq!(unsafe { r.base().as_ptr().read() }, 0);
    /// ```
    pub fn new(bytes: usize) -> Result<Self, ConduitError> {
        let len = bytes.max(1);
        // SAFETY: a fresh private anonymous mapping; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ConduitError::Setup(format!(
                "cannot map a {bytes}-byte region: {} (lower the ring or segment size)",
                std::io::Error::last_os_error()
            )));
        }
        let ptr = NonNull::new(p.cast())
            .ok_or_else(|| ConduitError::Setup("mmap returned null".into()))?;
        Ok(Self { ptr, len })
    }

    /// The region's first byte.
    ///
    /// ```
    /// use amrq::conduit::mem::HeapRegion;
    /// let r = HeapRegion::new(8192).unwrap();
    /// // SAFETY: inside the region, which nobody else uses.
    /// unsafe { r.base().as_ptr().add(8191).write(1) };
    /// ```
    pub fn base(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for HeapRegion {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
