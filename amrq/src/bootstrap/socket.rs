//! The rendezvous socket's plumbing: abstract Unix stream sockets (named in the
//! network namespace, never in the file system, gone when their owner closes them),
//! the peer's credentials (`SO_PEERCRED`), and a descriptor passed with a message
//! (`SCM_RIGHTS`).

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

/// Binds the abstract name `name` and listens; `Ok(None)` if another socket holds it.
pub fn listen(name: &str) -> io::Result<Option<UnixListener>> {
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    match UnixListener::bind_addr(&addr) {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

/// Connects to the abstract name `name`; `Ok(None)` if nobody listens there (yet).
pub fn connect(name: &str) -> io::Result<Option<UnixStream>> {
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    match UnixStream::connect_addr(&addr) {
        Ok(s) => Ok(Some(s)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNREFUSED | libc::ENOENT)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The process at the other end of a connected socket: `(pid, uid)`, as the kernel
/// recorded them when the connection was made.
pub fn peer(s: &impl AsRawFd) -> io::Result<(u32, u32)> {
    // SAFETY: plain data, overwritten by getsockopt.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is writable for `len` bytes; the descriptor is open.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((cred.pid.max(0) as u32, cred.uid))
}

/// This process's user id.
pub fn my_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// Room for one descriptor's control message.
const CMSG_ROOM: usize = 64;

/// Sends all of `bytes`, with `fd` attached to the first byte if given.
pub fn send(s: &UnixStream, bytes: &[u8], fd: Option<&OwnedFd>) -> io::Result<()> {
    let mut control = [0u64; CMSG_ROOM / 8];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    // SAFETY: plain data; every field used is set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        let raw = fd.as_raw_fd();
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) } as _;
        // SAFETY: the control buffer is 8-byte aligned and large enough for one
        // descriptor's header and data (CMSG_SPACE(4) ≤ 24 < CMSG_ROOM).
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as _;
            libc::CMSG_DATA(c).cast::<i32>().write_unaligned(raw);
        }
    }
    // SAFETY: `msg` points at `iov` and `control`, both alive for the call.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    if n < bytes.len() {
        // The descriptor went with the first byte; the rest as plain data.
        use std::io::Write;
        (&*s).write_all(&bytes[n..])?;
    }
    Ok(())
}

/// Receives exactly `buf.len()` bytes, and a descriptor if one came with them.
/// End of stream before `buf` is full is `UnexpectedEof`.
pub fn receive(s: &UnixStream, buf: &mut [u8]) -> io::Result<Option<OwnedFd>> {
    let mut control = [0u64; CMSG_ROOM / 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: plain data; every field used is set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_ROOM as _;
    let n = loop {
        // SAFETY: `msg` points at `buf` and `control`, both alive and writable.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fd = None;
    // SAFETY: the kernel filled `control` up to `msg_controllen`; the CMSG macros walk
    // only inside it, and an SCM_RIGHTS message carries whole descriptors.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<i32>();
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..count {
                    // Each received descriptor is ours now: keep the first, close others.
                    let owned = OwnedFd::from_raw_fd(data.add(i).read_unaligned());
                    if fd.is_none() {
                        fd = Some(owned);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if n == 0 && !buf.is_empty() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    (&*s).read_exact(&mut buf[n..])?;
    Ok(fd)
}
