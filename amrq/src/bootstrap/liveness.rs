//! Is a peer process still there, and if not, how did it end?
//!
//! Each peer is watched through a pidfd (`pidfd_open`), which becomes readable the
//! moment the process ends: a zombie not yet reaped counts as ended (`kill(pid, 0)`
//! would still say alive), and a pid the kernel hands to a new process later is never
//! confused with it. How it ended is read from `/proc/PID/stat` while it is a zombie
//! (the wait status is its 52nd field); once reaped, only its launcher knows.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

/// The pidfds of a job's peers, opened on first look.
///
/// ```
/// use amrq::bootstrap::liveness::{Seen, Watch};
/// let w = Watch::new(2);
/// assert!(matches!(w.look(0, std::process::id()), Seen::Alive)); // this process
/// ```
#[derive(Debug)]
pub struct Watch {
    fds: Mutex<Vec<Option<Watched>>>,
    /// An epoll set of every pidfd opened, keyed by rank (none where epoll fails: each
    /// is then polled on its own).
    ended: Option<OwnedFd>,
}

/// A peer's process, watched.
#[derive(Debug)]
struct Watched {
    pid: u32,
    fd: OwnedFd,
    /// In the epoll set (false where the kernel refused it: it is polled on its own).
    in_set: bool,
}

/// What a look at a peer found.
///
/// ```
/// use amrq::bootstrap::liveness::{Seen, Watch};
/// let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
/// let (w, pid) = (Watch::new(1), child.id());
/// assert!(matches!(w.look(0, pid), Seen::Alive));
/// child.kill().unwrap();
/// while matches!(w.look(0, pid), Seen::Alive) {} // a zombie counts as ended
/// assert!(matches!(w.look(0, pid), Seen::Ended(how) if how.contains("SIGKILL")));
/// child.wait().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Running (or not yet known).
    Alive,
    /// Its process has ended: how, in words.
    Ended(String),
}

impl Watch {
    /// Watches nothing yet, for a job of `ranks` ranks.
    ///
    /// ```
    /// let w = amrq::bootstrap::liveness::Watch::new(4);
    /// # let _ = w;
    /// ```
    pub fn new(ranks: usize) -> Self {
        // SAFETY: epoll_create1 takes flags and returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        Self {
            fds: Mutex::new((0..ranks).map(|_| None).collect()),
            // SAFETY: a new descriptor owned by nothing else.
            ended: (ep >= 0).then(|| unsafe { OwnedFd::from_raw_fd(ep) }),
        }
    }

    /// The first of `peers` (rank, pid) whose process has ended, and how, in one
    /// `epoll_wait` over their pidfds (each opened at its first look): a check of L
    /// peers is one system call, not L. An ended rank for which `left` is true left
    /// the job cleanly first: it is forgotten, not reported.
    ///
    /// ```
    /// use amrq::bootstrap::liveness::Watch;
    /// let mut child = std::process::Command::new("sh").args(["-c", "exit 4"]).spawn().unwrap();
    /// let (w, pid) = (Watch::new(3), child.id());
    /// let me = (0, std::process::id());
    /// let seen = loop {
    ///     match w.first_ended([me, (2, pid)].into_iter(), |_| false) {
    ///         None => std::thread::sleep(std::time::Duration::from_millis(5)),
    ///         Some(ended) => break ended,
    ///     }
    /// };
    /// assert!(seen.0 == 2 && seen.1.contains('4'), "{seen:?}");
    /// child.wait().unwrap();
    /// ```
    pub fn first_ended(
        &self,
        peers: impl Iterator<Item = (usize, u32)>,
        left: impl Fn(usize) -> bool,
    ) -> Option<(usize, String)> {
        let Some(ep) = &self.ended else {
            let mut peers = peers;
            return peers.find_map(|(r, pid)| match self.look(r, pid) {
                Seen::Ended(how) if !left(r) => Some((r, how)),
                _ => None,
            });
        };
        let Ok(mut fds) = self.fds.lock() else {
            return None; // a panic elsewhere: the next look will tell
        };
        for (r, pid) in peers {
            let Some(slot) = fds.get_mut(r) else { continue };
            match self.watch(slot, pid) {
                Ok(()) => {}
                Err(Seen::Ended(how)) if !left(r) => return Some((r, how)),
                Err(_) => continue,
            }
            let Some(w) = slot.as_mut().filter(|w| !w.in_set) else {
                continue;
            };
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: r as u64,
            };
            // SAFETY: adding a live descriptor to a live epoll set.
            w.in_set = unsafe {
                libc::epoll_ctl(
                    ep.as_raw_fd(),
                    libc::EPOLL_CTL_ADD,
                    w.fd.as_raw_fd(),
                    &mut ev,
                )
            } == 0;
            if !w.in_set && ended(&w.fd) && !left(r) {
                return Some((r, how_it_ended(pid)));
            }
        }
        let mut ready = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: a live epoll set and room for `ready.len()` events; timeout 0.
        let n =
            unsafe { libc::epoll_wait(ep.as_raw_fd(), ready.as_mut_ptr(), ready.len() as i32, 0) };
        for ev in ready.iter().take(n.max(0) as usize) {
            let r = ev.u64 as usize;
            let Some(w) = fds.get_mut(r).and_then(Option::take) else {
                continue;
            };
            if !left(r) {
                let how = how_it_ended(w.pid);
                fds[r] = Some(w);
                return Some((r, how));
            }
            remove(ep, &w.fd); // before it closes
        }
        None
    }

    /// Looks at rank `rank`, whose process is `pid`.
    ///
    /// ```
    /// use amrq::bootstrap::liveness::{Seen, Watch};
    /// let mut child = std::process::Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
    /// let w = Watch::new(1);
    /// let pid = child.id();
    /// loop {
    ///     match w.look(0, pid) {
    ///         Seen::Alive => std::thread::sleep(std::time::Duration::from_millis(5)),
    ///         Seen::Ended(how) => { assert!(how.contains('3'), "{how}"); break; }
    ///     }
    /// }
    /// child.wait().unwrap();
    /// ```
    pub fn look(&self, rank: usize, pid: u32) -> Seen {
        let Ok(mut fds) = self.fds.lock() else {
            return Seen::Alive; // a panic elsewhere: the next look will tell
        };
        let Some(slot) = fds.get_mut(rank) else {
            return Seen::Alive;
        };
        if let Err(seen) = self.watch(slot, pid) {
            return seen;
        }
        match slot.as_ref() {
            Some(w) if ended(&w.fd) => Seen::Ended(how_it_ended(pid)),
            _ => Seen::Alive,
        }
    }
}

impl Watch {
    /// Makes `slot` watch `pid` (a pidfd opened, not yet in the set) unless it does:
    /// `Err` as [`open`] says.
    fn watch(&self, slot: &mut Option<Watched>, pid: u32) -> Result<(), Seen> {
        if slot.as_ref().is_some_and(|w| w.pid == pid) {
            return Ok(());
        }
        if let (Some(old), Some(ep)) = (slot.take().filter(|w| w.in_set), &self.ended) {
            remove(ep, &old.fd);
        }
        let fd = open(pid)?;
        *slot = Some(Watched {
            pid,
            fd,
            in_set: false,
        });
        Ok(())
    }
}

/// True once the process of pidfd `fd` has ended.
fn ended(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; timeout 0: never blocks.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & libc::POLLIN != 0
}

/// Takes `fd` out of epoll set `ep`.
fn remove(ep: &OwnedFd, fd: &OwnedFd) {
    let mut none = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: a live epoll set and a live descriptor it may hold.
    unsafe {
        libc::epoll_ctl(
            ep.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            fd.as_raw_fd(),
            &mut none,
        )
    };
}

/// A pidfd for `pid`; `Err(Ended)` if it is gone already, `Err(Alive)` where pidfds
/// do not exist (an old kernel: nobody can tell).
fn open(pid: u32) -> Result<OwnedFd, Seen> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) => Seen::Ended(how_it_ended(pid)),
            _ => Seen::Alive,
        });
    }
    // SAFETY: `fd` is a new descriptor owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// How process `pid` ended, in words: from its wait status while it is a zombie.
///
/// ```
/// let mut child = std::process::Command::new("sh").args(["-c", "kill -9 $$"]).spawn().unwrap();
/// std::thread::sleep(std::time::Duration::from_millis(200)); // a zombie now, not reaped
/// println!("{}", amrq::bootstrap::liveness::how_it_ended(child.id()));
/// child.wait().unwrap();
/// ```
pub fn how_it_ended(pid: u32) -> String {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return format!("its process {pid} has exited (already reaped: its launcher knows how)");
    };
    // The command may contain spaces and parentheses: fields start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let state = fields.first().copied().unwrap_or("?");
    let status = fields.get(49).and_then(|s| s.parse::<i32>().ok());
    match (state, status) {
        ("Z" | "X", Some(st)) => describe_status(pid, st),
        ("Z" | "X", None) => format!("its process {pid} has exited"),
        _ => format!("its process {pid} is ending"),
    }
}

/// A wait status (as `waitpid` gives it) in words.
fn describe_status(pid: u32, st: i32) -> String {
    let sig = st & 0x7f;
    if sig == 0 {
        format!("its process {pid} exited with status {}", (st >> 8) & 0xff)
    } else {
        format!(
            "its process {pid} was killed by signal {sig} ({})",
            signal_name(sig)
        )
    }
}

/// The usual name of a signal that ends processes.
///
/// ```
/// use amrq::bootstrap::liveness::signal_name;
/// assert_eq!((signal_name(9), signal_name(11)), ("SIGKILL", "SIGSEGV"));
/// ```
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGINT => "SIGINT",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGHUP => "SIGHUP",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_is_seen_ended_with_its_signal() {
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .expect("sleep");
        let w = Watch::new(2);
        let pid = child.id();
        assert_eq!(w.look(1, pid), Seen::Alive);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let t = std::time::Instant::now();
        let seen = loop {
            match w.look(1, pid) {
                Seen::Alive if t.elapsed().as_secs() < 5 => std::thread::yield_now(),
                s => break s,
            }
        };
        // Not reaped yet: a zombie, and still its signal is known.
        assert_eq!(
            seen,
            Seen::Ended(format!(
                "its process {pid} was killed by signal 9 (SIGKILL)"
            ))
        );
        let _ = child.wait();
        assert!(matches!(w.look(1, pid), Seen::Ended(_)));
    }

    #[test]
    fn exit_statuses_are_described() {
        assert_eq!(
            describe_status(7, 3 << 8),
            "its process 7 exited with status 3"
        );
        assert_eq!(
            describe_status(7, libc::SIGSEGV),
            "its process 7 was killed by signal 11 (SIGSEGV)"
        );
    }
}
