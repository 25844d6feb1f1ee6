//! Who am I, read from the launcher's environment.
//!
//! | launcher | rank | size | job |
//! |---|---|---|---|
//! | `amrun`, `amrq::launch` | `AMRQ_RANK` | `AMRQ_SIZE` | `AMRQ_JOB_KEY` (32 hex digits) |
//!
//! (`amrun` also sets `AMRQ_PINNED` to `core N` or `none`, for reports.)
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE` | `OMPI_MCA_ess_base_jobid` or `PMIX_NAMESPACE` |
//! | PMI launchers (MPICH, Hydra) | `PMI_RANK` | `PMI_SIZE` | `PMI_KVS_NAME`, `PMIX_NAMESPACE` |
//! | Slurm `srun` | `SLURM_PROCID` | `SLURM_NTASKS` | `SLURM_JOB_ID`.`SLURM_STEP_ID` |
//!
//! `amrun` hands out a random key. Under the other launchers the ranks of a host derive
//! the rendezvous from the launcher's job id and the user id (see [`job_key_for`]): the
//! job's shared memory object is then named from it, and that object is the rendezvous.

use super::{BootError, JobKey};

/// Rank variable set by `amrun` and `amrq::launch`.
pub const ENV_RANK: &str = "AMRQ_RANK";
/// Size variable set by `amrun` and `amrq::launch`.
pub const ENV_SIZE: &str = "AMRQ_SIZE";
/// Job key variable set by `amrun` and `amrq::launch`.
pub const ENV_KEY: &str = "AMRQ_JOB_KEY";

/// This process's place in a job, as its launcher said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// This rank.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
    /// The job key.
    pub key: JobKey,
    /// Which launcher said so.
    pub launcher: &'static str,
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn number(k: &str, v: &str) -> Result<usize, BootError> {
    v.trim()
        .parse()
        .map_err(|_| BootError::Env(format!("{k}={v} is not a number")))
}

/// A job key derived from a launcher's job id and this user's id: every rank of the job
/// on this host computes the same one; another job or user gets another.
///
/// ```
/// use amrq::bootstrap::env::job_key_for;
/// assert_eq!(job_key_for("slurm", "42.0"), job_key_for("slurm", "42.0"));
/// assert_ne!(job_key_for("slurm", "42.0"), job_key_for("slurm", "43.0"));
/// ```
pub fn job_key_for(launcher: &str, job_id: &str) -> JobKey {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut h = [0xcbf2_9ce4_8422_2325u64, 0x8422_2325_cbf2_9ce4];
    for (i, b) in format!("{launcher}\0{job_id}\0{uid}").bytes().enumerate() {
        let k = i % 2;
        h[k] = (h[k] ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        h[1 - k] = h[1 - k].rotate_left(5) ^ h[k];
    }
    JobKey(h)
}

/// Reads the environment: `Ok(None)` if no launcher placed this process in a job.
pub fn detect() -> Result<Option<Place>, BootError> {
    if let Some(r) = var(ENV_RANK) {
        let size = var(ENV_SIZE)
            .ok_or_else(|| BootError::Env(format!("{ENV_RANK} is set but {ENV_SIZE} is not")))?;
        let key = var(ENV_KEY)
            .ok_or_else(|| BootError::Env(format!("{ENV_RANK} is set but {ENV_KEY} is not")))?;
        let key = JobKey::parse(&key)
            .ok_or_else(|| BootError::Env(format!("{ENV_KEY}={key}: expected 32 hex digits")))?;
        return place(
            number(ENV_RANK, &r)?,
            number(ENV_SIZE, &size)?,
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
        return place(
            number(rk, &r)?,
            number(sk, &s)?,
            job_key_for(name, &id),
            name,
        );
    }
    Ok(None)
}

fn place(
    rank: usize,
    size: usize,
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
        key,
        launcher,
    }))
}
