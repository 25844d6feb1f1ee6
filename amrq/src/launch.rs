//! Starting jobs whose ranks are processes of this host: the runner behind `amrun`, and
//! self-launch for programs started on their own.
//!
//! - [`Launcher`] starts N ranks of a program with their rank, size and job key in the
//!   environment, pins them one per core when they fit, labels their output if asked,
//!   and watches them: when one fails (non-zero exit, signal, panic) the others get
//!   SIGTERM, then SIGKILL one second later, so the job ends within 2 s; every rank dies
//!   with the launcher too (`PR_SET_PDEATHSIG`). The job's memory has no name (see
//!   [`crate::bootstrap::shm`]), so there is nothing to clean up after any of them.
//! - [`Hosts`] spreads the ranks over several hosts (`amrun --hosts`): each rank runs
//!   through a command template (`ssh {host}`, `ip netns exec {host}`) and joins the job
//!   at rank 0's TCP rendezvous; the key travels on the rank's standard input, never in
//!   a command line.
//!
//! A program started on its own starts its ranks through a [`Launcher`] too
//! ([`Config::run`](crate::Config::run)).

use crate::bootstrap::env::{
    ENV_HOST, ENV_ID, ENV_KEY, ENV_RANK, ENV_RENDEZVOUS, ENV_SIZE, KEY_ON_STDIN,
};
use crate::bootstrap::fault;
use crate::bootstrap::liveness::signal_name;
use crate::bootstrap::{BootError, JobKey};
use crate::conduit::ConduitError;
use crate::util::affinity::allowed_cores;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Why a job could not be started or joined.
///
/// ```
/// use amrq::launch::{Hosts, LaunchError};
/// let e = Hosts::new("h0:two", "ssh {host}", None).unwrap_err(); // not a count
/// assert!(matches!(e, LaunchError::Config(_)), "{e}");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A rank's process could not be started.
    #[error("cannot start rank {rank} ({program})")]
    Spawn {
        /// The rank.
        rank: usize,
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The launcher's environment, or meeting the other ranks, failed.
    #[error(transparent)]
    Boot(#[from] BootError),
    /// The conduit could not be set up.
    #[error(transparent)]
    Conduit(#[from] ConduitError),
    /// A bad setting.
    #[error("{0}")]
    Config(String),
}

/// How ranks are bound to cores.
///
/// ```
/// use amrq::launch::{Bind, Launcher};
/// let mut l = Launcher::new(64);
/// assert!(!l.pins() || l.bind == Bind::Cores); // more ranks than cores: never pinned
/// l.bind = Bind::None;
/// assert!(!l.pins());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// Rank i on core i when the ranks fit the cores (the default); unbound otherwise.
    Cores,
    /// Never bound.
    None,
}

/// The first rank that failed, and how.
///
/// ```
/// use amrq::launch::Launcher;
/// let mut l = Launcher::new(2);
/// l.quiet = true;
/// let out = l.run("false".as_ref(), &[]).unwrap();
/// let f = out.failure.expect("a failed rank");
/// assert!(f.rank.is_some() && !f.cause.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The rank (`None`: the job timed out).
    pub rank: Option<usize>,
    /// What happened, in words.
    pub cause: String,
}

/// How a job ended.
///
/// ```
/// use amrq::launch::Launcher;
/// let out = Launcher::new(2).run("true".as_ref(), &[]).unwrap();
/// assert_eq!((out.code, out.failure), (0, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The job's exit status: 0, the first failing rank's exit code, 128 + its signal,
    /// or 124 for a timeout.
    pub code: i32,
    /// The first failure, if any.
    pub failure: Option<Failure>,
    /// True if the ranks were pinned one per core.
    pub pinned: bool,
}

/// Starts and watches the ranks of one job.
///
/// ```no_run
/// use amrq::launch::Launcher;
/// let out = Launcher::new(2).run("/bin/true".as_ref(), &[]).unwrap();
/// assert_eq!(out.code, 0);
/// ```
#[derive(Debug, Clone)]
pub struct Launcher {
    /// Ranks to start.
    pub ranks: usize,
    /// Core binding.
    pub bind: Bind,
    /// End the job after this long.
    pub timeout: Option<Duration>,
    /// Prefix every output line with `[rank] `.
    pub label: bool,
    /// The job's public id handed to the ranks (where they meet).
    pub id: String,
    /// The job's secret key handed to the ranks.
    pub key: JobKey,
    /// Say on stderr what happens (oversubscription, failures).
    pub verbose: bool,
    /// Discard the ranks' stdout and stderr (tests of failing jobs).
    pub quiet: bool,
    /// More environment for every rank.
    pub env: Vec<(String, String)>,
    /// Ranks on several hosts; `None`: every rank on this host.
    pub hosts: Option<Hosts>,
    /// The name its messages start with (`amrun`; `amrq` for a program that starts
    /// its own ranks).
    pub name: String,
}

/// Where the ranks of a job across hosts run, and how to start a command on a host.
///
/// ```
/// use amrq::launch::Hosts;
/// let h = Hosts::new("h0:2,h1:2", "ip netns exec {host}", Some("169.254.7.1:4000")).unwrap();
/// assert_eq!(h.ranks(), 4);
/// assert_eq!(h.host_of(2), "h1");
/// assert_eq!(h.rendezvous, "169.254.7.1:4000");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    /// Each host's name and its number of ranks, in rank order (ranks fill a host,
    /// then the next).
    pub hosts: Vec<(String, usize)>,
    /// The words of the command that runs a command on a host, `{host}` in them
    /// replaced by the host's name. The rank's command follows as separate words: a
    /// template that goes through a remote shell (ssh) sees them joined by spaces.
    pub exec: Vec<String>,
    /// Rank 0's rendezvous, `HOST:PORT`, which every host must reach over TCP.
    pub rendezvous: String,
}

/// The kernel's ephemeral port range (`/proc/sys/net/ipv4/ip_local_port_range`), if
/// this host says.
fn local_port_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut w = text.split_whitespace().map(|w| w.parse::<u16>().ok());
    Some((w.next()??, w.next()??))
}

/// A rendezvous port picked with `r` (random) where no connection's own port can be:
/// above the kernel's ephemeral range `ephemeral` (61000–65535 with Linux's default
/// 32768–60999), where only a program that asks for that very port can hold it;
/// without a range, or with one that leaves fewer than 256 ports above it, the IANA
/// dynamic range 49152–65535. (Picked in that range, the port collided with a recent
/// job's connections lingering in TIME_WAIT: `Address already in use` for rank 0 in
/// 9 of 40 jobs launched back to back between two namespace hosts.)
///
/// ```
/// use amrq::launch::free_port;
/// assert!((61000..=65535).contains(&free_port(Some((32768, 60999)), 12345)));
/// assert!((49152..=65535).contains(&free_port(None, 12345)));
/// assert!((49152..=65535).contains(&free_port(Some((1024, 65535)), 12345)));
/// ```
pub fn free_port(ephemeral: Option<(u16, u16)>, r: u16) -> u16 {
    let first = match ephemeral {
        Some((_, hi)) if hi <= 65535 - 256 => hi + 1,
        _ => 49152,
    };
    first + r % (65535 - first + 1)
}

impl Hosts {
    /// Reads a host list (`name[:ranks],…`, one rank if the count is left out), a
    /// command template with `{host}` in it, and rank 0's rendezvous (`ADDR:PORT`, or
    /// `ADDR` and a random port above the kernel's ephemeral ports (see [`free_port`]);
    /// default: the first host's name).
    ///
    /// ```
    /// use amrq::launch::Hosts;
    /// let h = Hosts::new("n1:2,n2:2", "ssh {host}", None).unwrap();
    /// assert_eq!(h.exec, ["ssh", "{host}"]);
    /// assert!(h.rendezvous.starts_with("n1:")); // the first host, a random port
    /// ```
    pub fn new(list: &str, exec: &str, rendezvous: Option<&str>) -> Result<Self, LaunchError> {
        let bad = |why: String| LaunchError::Config(why);
        let hosts = list
            .split(',')
            .map(|item| {
                let (name, count) = match item.rsplit_once(':') {
                    Some((n, c)) => (n, c.parse::<usize>().ok().filter(|&c| c > 0)),
                    None => (item, Some(1)),
                };
                match (name.trim(), count) {
                    ("", _) | (_, None) => Err(bad(format!(
                        "--hosts {list}: {item:?} is not NAME or NAME:RANKS (RANKS at least 1)"
                    ))),
                    (n, Some(c)) => Ok((n.to_string(), c)),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !exec.contains("{host}") {
            return Err(bad(format!(
                "--exec {exec:?} has no {{host}} in it: give the command that runs a command on \
                 a host, such as 'ssh {{host}}' or 'ip netns exec {{host}}'"
            )));
        }
        let port = || {
            let r = crate::bootstrap::key::random_bytes::<2>().unwrap_or([7, 7]);
            free_port(local_port_range(), u16::from_le_bytes(r))
        };
        let rendezvous = match rendezvous {
            Some(r) if r.parse::<std::net::SocketAddr>().is_ok() => r.to_string(),
            Some(r) if r.contains(':') && !r.contains("::") => r.to_string(),
            Some(r) => format!("{r}:{}", port()),
            None => format!("{}:{}", hosts[0].0, port()),
        };
        Ok(Self {
            hosts,
            exec: exec.split_whitespace().map(String::from).collect(),
            rendezvous,
        })
    }

    /// Ranks in all.
    ///
    /// ```
    /// use amrq::launch::Hosts;
    /// assert_eq!(Hosts::new("a:3,b", "ssh {host}", None).unwrap().ranks(), 4);
    /// ```
    pub fn ranks(&self) -> usize {
        self.hosts.iter().map(|(_, n)| n).sum()
    }

    /// The host of `rank`.
    ///
    /// # Panics
    /// If `rank` is not below [`Hosts::ranks`].
    ///
    /// ```
    /// use amrq::launch::Hosts;
    /// let h = Hosts::new("a:1,b:2", "ssh {host}", None).unwrap();
    /// assert_eq!([h.host_of(0), h.host_of(1), h.host_of(2)], ["a", "b", "b"]);
    /// ```
    pub fn host_of(&self, rank: usize) -> &str {
        let mut first = 0;
        for (name, n) in &self.hosts {
            if rank < first + n {
                return name;
            }
            first += n;
        }
        panic!("rank {rank} is not one of {} ranks", self.ranks())
    }
}

impl Launcher {
    /// A job of `ranks` ranks with a fresh id and a fresh random key, bound to cores,
    /// no timeout.
    ///
    /// # Panics
    /// If the kernel's random source fails (a job without a secret key would be open
    /// to any process of this user that guessed it).
    ///
    /// ```
    /// use amrq::launch::Launcher;
    /// let l = Launcher::new(4);
    /// assert_eq!((l.ranks, l.timeout, l.hosts.is_none()), (4, None, true));
    /// ```
    pub fn new(ranks: usize) -> Self {
        let key = JobKey::random().expect("getrandom: no random key for the job");
        Self {
            ranks,
            bind: Bind::Cores,
            timeout: None,
            label: false,
            id: format!(
                "amrun-{}-{:08x}",
                std::process::id(),
                key.0[0] as u32 ^ (key.0[1] >> 32) as u32
            ),
            key,
            verbose: true,
            quiet: false,
            env: Vec::new(),
            hosts: None,
            name: "amrun".into(),
        }
    }

    /// True if the ranks will be pinned one per core (never across hosts: amrun cannot
    /// pin a process another host runs).
    ///
    /// ```
    /// use amrq::launch::Launcher;
    /// let cores = amrq::util::affinity::allowed_cores().len();
    /// assert_eq!(Launcher::new(1).pins(), cores >= 1);
    /// assert!(!Launcher::new(cores + 1).pins()); // oversubscribed: not pinned
    /// ```
    pub fn pins(&self) -> bool {
        self.bind == Bind::Cores && self.hosts.is_none() && self.ranks <= allowed_cores().len()
    }

    /// Runs `program args…` as every rank and waits for the job to end.
    ///
    /// ```
    /// use amrq::launch::Launcher;
    /// use std::time::Duration;
    /// let mut l = Launcher::new(2);
    /// l.timeout = Some(Duration::from_secs(60));
    /// l.quiet = true;
    /// // Every rank runs `sh -c 'exit $AMRQ_RANK'`: rank 1 fails with 1, which ends the job.
    /// let out = l.run("sh".as_ref(), &["-c".into(), "exit $AMRQ_RANK".into()]).unwrap();
    /// assert_eq!(out.code, 1);
    /// assert_eq!(out.failure.and_then(|f| f.rank), Some(1));
    /// ```
    pub fn run(&self, program: &OsStr, args: &[OsString]) -> Result<Outcome, LaunchError> {
        if self.ranks == 0 {
            return Err(LaunchError::Config(
                "a job needs at least one rank (-n 1 or more)".into(),
            ));
        }
        if let Some(h) = &self.hosts {
            if h.ranks() != self.ranks {
                return Err(LaunchError::Config(format!(
                    "-n {} disagrees with the hosts' {} ranks ({}): leave -n out, or make them agree",
                    self.ranks,
                    h.ranks(),
                    h.hosts
                        .iter()
                        .map(|(n, c)| format!("{n}:{c}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )));
            }
        }
        let cores = allowed_cores();
        let pinned = self.pins();
        if self.verbose && self.bind == Bind::Cores && !pinned && self.hosts.is_none() {
            crate::util::say(&format!(
                "{}: {} ranks on {} cores: oversubscribed, ranks are not pinned (waits spin briefly, then sleep)",
                self.name,
                self.ranks,
                cores.len()
            ));
        }
        let mut children: Vec<Option<Child>> = Vec::with_capacity(self.ranks);
        let mut readers = Vec::new();
        let mut group = 0; // the job's process group: rank 0's pid once it exists
        for rank in 0..self.ranks {
            let cpu = if pinned {
                cores.get(rank).copied()
            } else {
                None
            };
            match self.spawn(rank, cpu, group, program, args) {
                Ok(mut child) => {
                    if rank == 0 {
                        group = child.id() as libc::pid_t;
                    }
                    if self.label {
                        readers.extend(label_output(rank, &mut child));
                    }
                    children.push(Some(child));
                    fault::point("spawned", rank);
                }
                Err(source) => {
                    end_all(&mut children, group, libc::SIGKILL);
                    return Err(LaunchError::Spawn {
                        rank,
                        program: program.to_string_lossy().into_owned(),
                        source,
                    });
                }
            }
        }
        let outcome = self.watch(&mut children, group, pinned);
        for r in readers {
            let _ = r.join();
        }
        Ok(outcome)
    }

    fn spawn(
        &self,
        rank: usize,
        cpu: Option<usize>,
        group: libc::pid_t,
        program: &OsStr,
        args: &[OsString],
    ) -> std::io::Result<Child> {
        if let Some(hosts) = &self.hosts {
            return self.spawn_on(hosts, rank, group, program, args);
        }
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, self.ranks.to_string())
            .env(ENV_ID, &self.id)
            .env(ENV_KEY, self.key.to_string())
            .env(
                "AMRQ_PINNED",
                cpu.map_or("none".to_string(), |c| format!("core {c}")),
            );
        self.start(cmd, cpu, group)
    }

    /// Starts rank `rank` on its host: `TEMPLATE env VARS… PROGRAM ARGS…`, where VARS
    /// are the rank's place, the launcher's extra environment and this process's
    /// `UCX_*` and `AMRQ_*` settings (a remote shell does not pass the environment on),
    /// and the key is written to the rank's standard input.
    fn spawn_on(
        &self,
        hosts: &Hosts,
        rank: usize,
        group: libc::pid_t,
        program: &OsStr,
        args: &[OsString],
    ) -> std::io::Result<Child> {
        let host = hosts.host_of(rank);
        let words: Vec<String> = hosts
            .exec
            .iter()
            .map(|w| w.replace("{host}", host))
            .collect();
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]).arg("env");
        let fixed = [
            (ENV_RANK, rank.to_string()),
            (ENV_SIZE, self.ranks.to_string()),
            (ENV_ID, self.id.clone()),
            (ENV_KEY, KEY_ON_STDIN.to_string()),
            (ENV_HOST, host.to_string()),
            (ENV_RENDEZVOUS, hosts.rendezvous.clone()),
            ("AMRQ_PINNED", "none".to_string()),
        ];
        let settings = std::env::vars()
            .filter(|(k, _)| k.starts_with("UCX_") || k.starts_with("AMRQ_"))
            .filter(|(k, _)| !fixed.iter().any(|(f, _)| f == k));
        for (k, v) in settings.chain(self.env.iter().cloned()) {
            cmd.arg(format!("{k}={v}"));
        }
        for (k, v) in fixed {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.arg(program).args(args).stdin(Stdio::piped());
        let mut child = self.start(cmd, None, group)?;
        if let Some(mut stdin) = child.stdin.take() {
            // A rank that is gone already shows as failed in `watch`.
            let _ = writeln!(stdin, "{}", self.key);
        }
        Ok(child)
    }

    /// Spawns `cmd` in the job's process group, dying with the launcher, pinned to
    /// `cpu` if given.
    fn start(
        &self,
        mut cmd: Command,
        cpu: Option<usize>,
        group: libc::pid_t,
    ) -> std::io::Result<Child> {
        if self.quiet {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        } else if self.label {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        // SAFETY: getpid cannot fail.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the child between fork and exec and only makes
        // async-signal-safe system calls (setpgid, prctl, getppid, sched_setaffinity,
        // _exit) on stack data; it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                // One process group per job, so that ending the job ends whatever the
                // ranks started too. (If rank 0 is already gone this fails harmlessly.)
                libc::setpgid(0, group);
                // Die with the launcher, even if it is killed with SIGKILL.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(1); // the launcher died before the prctl
                }
                if let Some(cpu) = cpu {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                Ok(())
            });
        }
        cmd.spawn()
    }

    fn watch(&self, children: &mut [Option<Child>], group: libc::pid_t, pinned: bool) -> Outcome {
        let start = Instant::now();
        forward_signals();
        let mut failure: Option<(Failure, i32)> = None;
        let mut ending_since: Option<Instant> = None;
        loop {
            let mut running = 0;
            for (rank, slot) in children.iter_mut().enumerate() {
                let Some(child) = slot else { continue };
                match child.try_wait() {
                    Ok(Some(status)) => {
                        *slot = None;
                        if let Some((cause, code)) = failed(status) {
                            // Of ranks seen failing in one pass, blame the likeliest
                            // first cause: a survivor that saw a peer die exits with 1
                            // within microseconds of that death.
                            let worse = failure
                                .as_ref()
                                .is_none_or(|(_, c)| severity(code) > severity(*c));
                            if ending_since.is_none() && worse {
                                let cause = match &self.hosts {
                                    Some(h) => format!("{cause} on host {}", h.host_of(rank)),
                                    None => cause,
                                };
                                failure = Some((
                                    Failure {
                                        rank: Some(rank),
                                        cause,
                                    },
                                    code,
                                ));
                            }
                        }
                    }
                    Ok(None) => running += 1,
                    Err(_) => *slot = None,
                }
            }
            if running == 0 {
                break;
            }
            let sig = INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed);
            if failure.is_none() && sig != 0 {
                failure = Some((
                    Failure {
                        rank: None,
                        cause: format!("was interrupted by signal {sig} ({})", signal_name(sig)),
                    },
                    128 + sig,
                ));
            }
            if failure.is_none() && self.timeout.is_some_and(|t| start.elapsed() > t) {
                let t = self.timeout.unwrap_or_default();
                failure = Some((
                    Failure {
                        rank: None,
                        cause: format!("timed out after {t:?}"),
                    },
                    124,
                ));
            }
            match (ending_since, &failure) {
                (None, Some((f, _))) => {
                    if self.verbose {
                        match f.rank {
                            Some(r) => crate::util::say(&format!(
                                "{}: rank {r} {}; ending the other ranks",
                                self.name, f.cause
                            )),
                            None => crate::util::say(&format!(
                                "{}: the job {}; ending every rank",
                                self.name, f.cause
                            )),
                        }
                    }
                    end_all(children, group, libc::SIGTERM);
                    ending_since = Some(Instant::now());
                }
                (Some(t), _) if t.elapsed() > Duration::from_secs(1) => {
                    end_all(children, group, libc::SIGKILL)
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        // Whatever the ranks started and left behind goes too.
        if group > 0 {
            // SAFETY: signalling the job's own process group.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let (failure, code) = match failure {
            Some((f, c)) => (Some(f), c),
            None => (None, 0),
        };
        Outcome {
            code,
            failure,
            pinned,
        }
    }
}

/// How strongly an exit status points at the rank that failed first: a signal, then a
/// panic, then any status but 1, then 1 (what a rank exits with when it reports that
/// another failed).
fn severity(code: i32) -> u8 {
    match code {
        c if c > 128 => 3,
        101 => 2,
        1 => 0,
        _ => 1,
    }
}

/// `Some((cause, exit code))` for a failed rank.
fn failed(status: ExitStatus) -> Option<(String, i32)> {
    if let Some(sig) = status.signal() {
        return Some((
            format!("was killed by signal {sig} ({})", signal_name(sig)),
            128 + sig,
        ));
    }
    match status.code() {
        Some(0) => None,
        Some(101) => Some(("panicked (exit status 101)".into(), 101)),
        Some(c) => Some((format!("exited with status {c}"), c)),
        None => Some(("ended in an unknown way".into(), 1)),
    }
}

fn end_all(children: &mut [Option<Child>], group: libc::pid_t, sig: i32) {
    if group > 0 {
        // SAFETY: signalling the job's process group (ranks and what they started).
        unsafe { libc::kill(-group, sig) };
    }
    for child in children.iter().flatten() {
        // SAFETY: signalling our own child, which has not been reaped (its slot is Some).
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    }
}

/// The signal that interrupted the launcher (0: none yet).
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    INTERRUPTED.store(sig, std::sync::atomic::Ordering::Relaxed);
}

/// The ranks are in their own process group, out of reach of the terminal's Ctrl-C:
/// SIGINT, SIGTERM and SIGHUP to the launcher end the job the orderly way instead.
fn forward_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
}

/// Copies a rank's stdout and stderr line by line, each line prefixed with `[rank] `
/// and written whole.
fn label_output(rank: usize, child: &mut Child) -> Vec<std::thread::JoinHandle<()>> {
    fn copy(
        rank: usize,
        from: impl std::io::Read + Send + 'static,
        to_err: bool,
    ) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let mut r = std::io::BufReader::new(from);
            let prefix = format!("[{rank}] ");
            let mut line = prefix.clone().into_bytes();
            // The label and the line in one buffer, written in one `write(2)`: lines of
            // ranks never interleave mid-line.
            while matches!(r.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                let _ = match to_err {
                    true => std::io::stderr().lock().write_all(&line),
                    false => std::io::stdout().lock().write_all(&line),
                };
                line.truncate(prefix.len());
            }
        })
    }
    let mut v = Vec::new();
    if let Some(o) = child.stdout.take() {
        v.push(copy(rank, o, false));
    }
    if let Some(e) = child.stderr.take() {
        v.push(copy(rank, e, true));
    }
    v
}
