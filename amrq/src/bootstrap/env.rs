//! Who am I, read from the launcher's environment.
//!
//! | launcher | rank | size | job |
//! |---|---|---|---|
//! | `amrun`, `amrq::launch` | `AMRQ_RANK` | `AMRQ_SIZE` | `AMRQ_JOB_ID`, `AMRQ_JOB_KEY` (32 hex digits) |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE` | `OMPI_MCA_ess_base_jobid` or `PMIX_NAMESPACE` |
//! | PMI launchers (MPICH, Hydra) | `PMI_RANK` | `PMI_SIZE` | `PMI_KVS_NAME`, `PMIX_NAMESPACE` |
//! | Slurm `srun` | `SLURM_PROCID` | `SLURM_NTASKS` | `SLURM_JOB_ID`.`SLURM_STEP_ID` |
//!
//! (`amrun` also sets `AMRQ_PINNED` to `core N` or `none`, for reports.)
//!
//! Ranks on several hosts also need `AMRQ_RENDEZVOUS`, rank 0's `HOST:PORT` where the
//! others join, or `file:PATH` on a file system every host shares, where rank 0 writes
//! its address (see [`super::network`]); they may say their host's name in `AMRQ_HOST`
//! (default: the launcher's name for it, else the kernel's host name). `amrun --hosts` sets both, and hands over the key
//! on the rank's standard input (`AMRQ_JOB_KEY=-`), since a remote shell would show it
//! to every user of that host in the command line.
//!
//! A job has a public id (where its ranks meet) and a secret key (how they know each
//! other; see [`super::key`]). `amrun` hands out a fresh id and a fresh random key.
//! Under the other launchers the id is the launcher's job id, and the key is derived
//! from it and this user's secret file ([`super::secret`]), so that no other user can
//! compute it; `AMRQ_JOB_KEY`, when set, is used instead.

use super::{BootError, JobKey};

/// Rank variable set by `amrun` and `amrq::launch`.
///
/// ```
/// use amrq::bootstrap::env::{ENV_RANK, ENV_SIZE};
/// // What amrun sets in each rank's environment.
/// assert_eq!((ENV_RANK, ENV_SIZE), ("AMRQ_RANK", "AMRQ_SIZE"));
/// ```
pub const ENV_RANK: &str = "AMRQ_RANK";
/// Size variable set by `amrun` and `amrq::launch`.
///
/// ```
/// assert_eq!(amrq::bootstrap::env::ENV_SIZE, "AMRQ_SIZE");
/// ```
pub const ENV_SIZE: &str = "AMRQ_SIZE";
/// Job key variable set by `amrun` and `amrq::launch` (secret).
///
/// ```
/// assert_eq!(amrq::bootstrap::env::ENV_KEY, "AMRQ_JOB_KEY");
/// ```
pub const ENV_KEY: &str = "AMRQ_JOB_KEY";
/// Job id variable set by `amrun` and `amrq::launch` (public).
///
/// ```
/// assert_eq!(amrq::bootstrap::env::ENV_ID, "AMRQ_JOB_ID");
/// ```
pub const ENV_ID: &str = "AMRQ_JOB_ID";
/// Rank 0's rendezvous `HOST:PORT` for ranks on several hosts.
///
/// ```
/// assert_eq!(amrq::bootstrap::env::ENV_RENDEZVOUS, "AMRQ_RENDEZVOUS");
/// ```
pub const ENV_RENDEZVOUS: &str = "AMRQ_RENDEZVOUS";
/// The name of this rank's host, as the launcher calls it.
///
/// ```
/// assert_eq!(amrq::bootstrap::env::ENV_HOST, "AMRQ_HOST");
/// ```
pub const ENV_HOST: &str = "AMRQ_HOST";
/// The [`ENV_KEY`] value that says: read the key from the first line of standard input.
///
/// ```
/// // AMRQ_JOB_KEY=- : the key is the first line of standard input (not in the environment).
/// assert_eq!(amrq::bootstrap::env::KEY_ON_STDIN, "-");
/// ```
pub const KEY_ON_STDIN: &str = "-";

/// This process's place in a job, as its launcher said.
///
/// ```
/// use amrq::bootstrap::{env::Place, JobKey};
/// let p = Place {
///     rank: 0, size: 1, id: "doc".into(), key: JobKey::random().unwrap(),
///     launcher: "doc", host: "localhost".into(), rendezvous: None,
/// };
/// assert!(p.rendezvous.is_none()); // one host: ranks meet in shared memory
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// This rank.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
    /// The job's public id.
    pub id: String,
    /// The job's secret key.
    pub key: JobKey,
    /// Which launcher said so.
    pub launcher: &'static str,
    /// This rank's host: [`ENV_HOST`], else the launcher's name for it (`PMIX_HOSTNAME`
    /// and the node's daemon under Open MPI, `SLURMD_NODENAME` under Slurm), else the
    /// kernel's host name.
    /// Ranks with the same host share memory in a job across hosts, so it must come
    /// from the launcher: network namespaces share the kernel's host name.
    pub host: String,
    /// Rank 0's rendezvous across hosts ([`ENV_RENDEZVOUS`]), if any.
    pub rendezvous: Option<String>,
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn number(k: &str, v: &str) -> Result<usize, BootError> {
    v.trim()
        .parse()
        .map_err(|_| BootError::Env(format!("{k}={v} is not a number")))
}

/// The key of a job that a launcher (not `amrun`) started: `AMRQ_JOB_KEY` if set,
/// else derived from the job id and this user's secret.
fn launcher_key(id: &str) -> Result<JobKey, BootError> {
    if let Some(k) = var(ENV_KEY) {
        return JobKey::parse(&k)
            .ok_or_else(|| BootError::Env(format!("{ENV_KEY}: expected 32 hex digits")));
    }
    Ok(JobKey::derive(&super::secret::load_or_create()?, id))
}

/// Reads the environment: `Ok(None)` if no launcher placed this process in a job.
///
/// ```
/// // A process started on its own is in no job.
/// if std::env::var_os("AMRQ_RANK").is_none() && std::env::var_os("OMPI_COMM_WORLD_RANK").is_none()
///     && std::env::var_os("PMI_RANK").is_none() && std::env::var_os("SLURM_PROCID").is_none()
/// {
///     assert!(amrq::bootstrap::env::detect().unwrap().is_none());
/// }
/// ```
pub fn detect() -> Result<Option<Place>, BootError> {
    if let Some(r) = var(ENV_RANK) {
        let size = var(ENV_SIZE)
            .ok_or_else(|| BootError::Env(format!("{ENV_RANK} is set but {ENV_SIZE} is not")))?;
        let key = var(ENV_KEY)
            .ok_or_else(|| BootError::Env(format!("{ENV_RANK} is set but {ENV_KEY} is not")))?;
        let key = if key == KEY_ON_STDIN {
            key_from_stdin()?
        } else {
            JobKey::parse(&key)
                .ok_or_else(|| BootError::Env(format!("{ENV_KEY}: expected 32 hex digits")))?
        };
        let id = var(ENV_ID)
            .ok_or_else(|| BootError::Env(format!("{ENV_RANK} is set but {ENV_ID} is not")))?;
        return place(
            number(ENV_RANK, &r)?,
            number(ENV_SIZE, &size)?,
            id,
            key,
            "amrun",
        );
    }
    let launchers: [(&str, &str, &str, &[&str]); 3] = [
        (
            "mpirun",
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            &["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"],
        ),
        (
            "pmi",
            "PMI_RANK",
            "PMI_SIZE",
            &["PMI_KVS_NAME", "PMIX_NAMESPACE", "PMI_JOBID"],
        ),
        ("srun", "SLURM_PROCID", "SLURM_NTASKS", &["SLURM_JOB_ID"]),
    ];
    for (name, rk, sk, ids) in launchers {
        let (Some(r), Some(s)) = (var(rk), var(sk)) else {
            continue;
        };
        let Some(mut id) = ids.iter().find_map(|k| var(k)) else {
            return Err(BootError::Env(format!(
                "{rk} and {sk} are set but no job id ({}) is: cannot tell this job from another",
                ids.join(", ")
            )));
        };
        if name == "srun" {
            id = format!("{id}.{}", var("SLURM_STEP_ID").unwrap_or_default());
        }
        let (rank, size) = (number(rk, &r)?, number(sk, &s)?);
        let id = format!("{name}:{id}");
        let key = launcher_key(&id)?;
        return place(rank, size, id, key, name);
    }
    Ok(None)
}

/// [`detect`] for a job across hosts: the place if a launcher put this process in one
/// ([`ENV_RENDEZVOUS`] is set), `Ok(None)` otherwise.
///
/// ```
/// if std::env::var_os("AMRQ_RENDEZVOUS").is_none() {
///     assert!(amrq::bootstrap::env::detect_across_hosts().unwrap().is_none());
/// }
/// ```
pub fn detect_across_hosts() -> Result<Option<Place>, BootError> {
    Ok(detect()?.filter(|p| p.rendezvous.is_some()))
}

fn place(
    rank: usize,
    size: usize,
    id: String,
    key: JobKey,
    launcher: &'static str,
) -> Result<Option<Place>, BootError> {
    if size == 0 || rank >= size {
        return Err(BootError::Env(format!(
            "{launcher}: rank {rank} of {size} ranks is impossible"
        )));
    }
    Ok(Some(Place {
        rank,
        size,
        id,
        key,
        launcher,
        host: var(ENV_HOST)
            .or_else(launcher_host)
            .unwrap_or_else(host_name),
        rendezvous: var(ENV_RENDEZVOUS),
    }))
}

/// The host a launcher other than `amrun` started this rank on. Open MPI: the node's
/// name from its PMIx server, and which of `mpirun`'s daemons (one per node) started
/// the rank, which tells apart nodes that share a name (network namespaces of one
/// machine); Slurm: its node name.
fn launcher_host() -> Option<String> {
    if let Some(name) = var("PMIX_HOSTNAME") {
        let daemon = var("OMPI_MCA_orte_local_daemon_uri")
            .and_then(|u| u.split(';').next().map(str::to_string));
        return Some(match daemon {
            Some(d) => format!("{name}/daemon-{d}"),
            None => name,
        });
    }
    var("SLURMD_NODENAME")
}

/// The kernel's name for this host.
fn host_name() -> String {
    let mut b = [0u8; 256];
    // SAFETY: gethostname writes at most `b.len()` bytes into `b`.
    let ok = unsafe { libc::gethostname(b.as_mut_ptr().cast(), b.len()) } == 0;
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    match ok {
        true => String::from_utf8_lossy(&b[..end]).into_owned(),
        false => "localhost".into(),
    }
}

/// The key `amrun --hosts` writes as the first line of a rank's standard input: read
/// once (byte by byte, so nothing after the line is taken from the program), then
/// remembered for later calls.
fn key_from_stdin() -> Result<JobKey, BootError> {
    static KEY: std::sync::OnceLock<Result<JobKey, String>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let mut line = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while line.len() < 64 && std::time::Instant::now() < deadline {
            let mut p = libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut p, 1, 100) } <= 0 {
                continue;
            }
            let mut c = 0u8;
            // SAFETY: reading one byte into `c`.
            match unsafe { libc::read(0, (&mut c as *mut u8).cast(), 1) } {
                1 if c == b'\n' => break,
                1 => line.push(c),
                _ => break, // end of input
            }
        }
        std::str::from_utf8(&line)
            .ok()
            .and_then(|l| JobKey::parse(l.trim()))
            .ok_or_else(|| {
                format!(
                    "{ENV_KEY}={KEY_ON_STDIN}, but standard input did not start with the \
                     key's 32 hex digits within 10 s"
                )
            })
    })
    .clone()
    .map_err(BootError::Env)
}
