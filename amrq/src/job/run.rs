//! The three ways to start a job: [`Config::run`] (a rank's main, run wherever the
//! job's placement puts it), [`Config::join`] (this process's rank, for a main that
//! stays in control: C) and [`Config::threads`] (ranks as threads of this process,
//! their results returned: tests). The first two find the job's placement: the
//! launcher that started this process (amrun, mpirun, srun; across hosts with a
//! rendezvous), else they start the ranks themselves.

use super::end::run_main;
use super::Setup;
use crate::bootstrap::env::{detect, Place};
use crate::bootstrap::Boot;
use crate::conduit::mem::MemConduit;
use crate::conduit::{cluster, shm, Conduit, Rank};
use crate::config::{Source, ENV_PRINT_CONFIG};
use crate::launch::Launcher;
use crate::util::affinity::{allowed_cores, pin_to_core};
use crate::{Config, Error};

impl Config {
    /// Runs `rank_main` as every rank of a job with these settings (each one the
    /// program did not set is read from its `AMRQ_*` variable), and exits with the
    /// job's status: 0 when every rank returned `Ok`.
    ///
    /// Started by a launcher (`amrun`, `mpirun`, `srun`; across hosts when
    /// `AMRQ_RENDEZVOUS` is set, as `amrun --hosts` sets it), this process is one rank
    /// of that job, of the launcher's size (one line on standard error says so if the
    /// program asked for another with [`Config::ranks`]). Started on its own, it starts
    /// [`Config::ranks`] ranks: processes of itself on this host, or threads of this
    /// process with [`Config::threads`] set. A rank whose main returns an error
    /// records it as the job's failure (the others' waits end naming it), prints it,
    /// and exits with 1; a panic, with 101.
    ///
    /// ```no_run
    /// use amrq::prelude::*;
    /// let mut cfg = amrq::Config::new();
    /// cfg.ranks.set(4);
    /// let work = cfg.add_queue(64);
    /// cfg.run(|setup| {
    ///     let job = setup.start(HandlerTable::new(), ())?;
    ///     job.rq().enqueue((job.rank() + 1) % job.size(), work, &[job.rank() as u64], &[])?;
    ///     job.barrier()
    /// })
    /// ```
    pub fn run<F>(mut self, rank_main: F) -> !
    where
        F: Fn(Setup) -> crate::Result<()> + Sync,
    {
        if let Err(e) = self.resolve() {
            fail(None, &e);
        }
        self.print_if_asked();
        match detect() {
            Err(e) => fail(None, &e.into()),
            Ok(Some(place)) => self.run_as_rank(&place, &rank_main),
            Ok(None) if self.threads.get() => {
                let ranks = self.ranks.get();
                let out = self.threads(ranks, &rank_main);
                std::process::exit(threads_status(out))
            }
            Ok(None) => self.launch_processes(),
        }
    }

    /// This process's rank of a job with these settings, for a program that cannot
    /// hand its rank's main to [`Config::run`] (a C program's `main`, a runtime that
    /// owns its own): the same placements, without the exit at the end.
    ///
    /// Started by a launcher, it joins the launcher's job. Started on its own with
    /// [`Config::ranks`] above 1, it starts that many processes of this program (the
    /// same arguments) and exits with their status: the call does not return here.
    /// With one rank, it returns a job of this process alone. Ranks as threads need a
    /// main per rank: with [`Config::threads`] set, it is an error.
    ///
    /// ```
    /// use amrq::prelude::*;
    /// let mut cfg = amrq::Config::new();
    /// cfg.ranks.set(1); // on its own: a job of this process alone
    /// let job = cfg.join().unwrap().start(HandlerTable::new(), ())?;
    /// assert_eq!((job.rank(), job.size()), (0, 1));
    /// # Ok::<(), amrq::Error>(())
    /// ```
    pub fn join(mut self) -> crate::Result<Setup> {
        self.resolve()?;
        self.print_if_asked();
        match detect()? {
            Some(place) => {
                self.take_launcher_count(&place);
                Ok(Setup::new(join(&place, &self)?, self))
            }
            None if self.threads.get() => Err(match self.threads.source() {
                Source::Env => Error::Setting {
                    name: "AMRQ_THREADS",
                    value: std::env::var("AMRQ_THREADS").unwrap_or_default(),
                    expected: "0 here: ranks as threads need a main each, which Config::join does not have (Config::run has)".into(),
                },
                _ => crate::launch::LaunchError::Config(
                    "Config::threads is set, and ranks as threads need a main each: start them with Config::run".into(),
                )
                .into(),
            }),
            None if self.ranks.get() > 1 => self.launch_processes(),
            None => {
                let mut eps = crate::conduit::threads::endpoints_for(1, &self.conduit_spec())?;
                Ok(Setup::new(eps.swap_remove(0), self))
            }
        }
    }

    /// With `AMRQ_PRINT_CONFIG=<ranks>` (what `amrun --print-config PROGRAM` sets):
    /// prints [`Config::described`] and exits.
    fn print_if_asked(&self) {
        if let Some(ranks) = std::env::var_os(ENV_PRINT_CONFIG) {
            let ranks = ranks.to_string_lossy().parse().unwrap_or(self.ranks.get());
            print!("{}", self.described(ranks));
            std::process::exit(0);
        }
    }

    /// Takes the launcher's rank count, with one line on standard error when the
    /// program asked for another (rank 0 says it).
    fn take_launcher_count(&mut self, place: &Place) {
        if place.rank == 0
            && self.ranks.source() != Source::Default
            && self.ranks.get() != place.size
        {
            let asked = match self.ranks.source() {
                Source::Env => format!("AMRQ_RANKS={}", self.ranks.get()),
                _ => format!("{} (Config::ranks)", self.ranks.get()),
            };
            crate::util::say(&format!(
                "amrq: {} started {} ranks and the program asked for {asked}: the job has {}",
                place.launcher, place.size, place.size
            ));
        }
        self.ranks.launched(place.size);
    }

    /// Runs `rank_main` on `ranks` ranks, each a thread of this process with its own
    /// endpoint (pinned one per core when they fit), with these settings and the
    /// `AMRQ_*` variables; returns the ranks' results in rank order once all have
    /// returned. A rank whose main returns an error is recorded as failed, so that the
    /// others' waits end naming it rather than waiting; then the first error is
    /// returned (one a rank met itself, before those of ranks that only saw it fail). A
    /// panic is [`Error::RankPanicked`].
    ///
    /// ```
    /// let out = amrq::Config::new().threads(3, |setup| Ok(setup.rank() * 10)).unwrap();
    /// assert_eq!(out, [0, 10, 20]);
    /// ```
    pub fn threads<R, F>(mut self, ranks: usize, rank_main: F) -> crate::Result<Vec<R>>
    where
        R: Send,
        F: Fn(Setup) -> crate::Result<R> + Sync,
    {
        self.resolve()?;
        let eps = crate::conduit::threads::endpoints_for(ranks, &self.conduit_spec())?;
        let pin = ranks <= allowed_cores().len();
        let (config, rank_main) = (&self, &rank_main);
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = eps
                .into_iter()
                .enumerate()
                .map(|(rank, ep)| {
                    std::thread::Builder::new()
                        .name(format!("rank-{rank}"))
                        .spawn_scoped(s, move || {
                            if pin {
                                // Pinning is a performance hint; a refusal is not fatal.
                                let _ = pin_to_core(rank);
                            }
                            let boots = ep.boots();
                            let setup = Setup::new(ep, config.clone());
                            let out = run_main(
                                || rank_main(setup),
                                |out| match out {
                                    Ok(Err(e)) => failed(&boots, &e.chain()),
                                    Err(p) => failed(&boots, &panic_message(p.as_ref())),
                                    Ok(Ok(_)) => {}
                                },
                            );
                            if let Ok(Ok(_)) = &out {
                                boots.iter().for_each(|(b, r)| b.mark_left(*r));
                            }
                            out
                        })
                })
                .collect();
            handles.into_iter().map(|h| h.map(|h| h.join())).collect()
        });
        let mut results = Vec::with_capacity(ranks);
        for (rank, o) in outcomes.into_iter().enumerate() {
            match o {
                Ok(Ok(Ok(r))) => results.push(r),
                Ok(Ok(Err(p))) | Ok(Err(p)) => {
                    return Err(Error::RankPanicked {
                        rank,
                        message: panic_message(p.as_ref()),
                    })
                }
                Err(e) => {
                    return Err(crate::launch::LaunchError::Config(format!(
                        "cannot start the thread of rank {rank}: {e}; run fewer ranks as threads, or as processes (AMRQ_THREADS=0)"
                    ))
                    .into())
                }
            }
        }
        first_error(results)
    }

    /// This process is rank `place.rank` of a launcher's job: joins it, runs the rank's
    /// main and exits.
    fn run_as_rank<F>(mut self, place: &Place, rank_main: &F) -> !
    where
        F: Fn(Setup) -> crate::Result<()> + Sync,
    {
        self.take_launcher_count(place);
        let conduit = match join(place, &self) {
            Ok(c) => c,
            Err(e) => fail(Some(place.rank), &e),
        };
        let rank = conduit.rank();
        // Kept past the main, so that a failure is recorded before the job's memory
        // says this rank left.
        let boots = conduit.boots();
        crate::conduit::ucx::exit_follows_job(); // this process exits below
        let setup = Setup::new(conduit, self);
        let out = run_main(
            || rank_main(setup),
            |out| match out {
                Ok(Err(e)) => failed(&boots, &e.chain()),
                Err(p) => failed(&boots, &format!("panicked: {}", panic_message(p.as_ref()))),
                Ok(Ok(())) => {}
            },
        );
        match out {
            Ok(Ok(())) => {
                drop(boots);
                std::process::exit(0)
            }
            Ok(Err(e)) => fail(Some(rank), &e),
            Err(_) => std::process::exit(101),
        }
    }

    /// Started on its own: starts this program's ranks as processes (the same
    /// arguments) and exits with the job's status.
    fn launch_processes(self) -> ! {
        let exe = match std::env::current_exe() {
            Ok(p) => p,
            Err(e) => fail(
                None,
                &crate::launch::LaunchError::Config(format!(
                    "cannot find this program to start its ranks: {e}"
                ))
                .into(),
            ),
        };
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let mut launcher = Launcher::new(self.ranks.get());
        launcher.name = "amrq".into();
        match launcher.run(exe.as_os_str(), &args) {
            Ok(out) => std::process::exit(out.code),
            Err(e) => fail(None, &e.into()),
        }
    }

    /// What `amrun --print-config PROGRAM` shows of a program: each setting, its value
    /// and where it came from, and the shared memory a job of `ranks` ranks on one host
    /// maps with them.
    ///
    /// ```
    /// let text = amrq::Config::new().described(2);
    /// assert!(text.contains("AMRQ_SEGMENT_SIZE"));
    /// assert!(text.contains("shared memory"));
    /// ```
    pub fn described(&self, ranks: usize) -> String {
        let mut text =
            String::from("settings (AMRQ_* variables; the program's own win over them):\n");
        for s in self.listing() {
            let from = match s.source {
                Source::Default => "default".to_string(),
                Source::Env => format!("environment {}", std::env::var(s.name).unwrap_or_default()),
                Source::Program => "set by the program".to_string(),
            };
            let agreed = if s.agreed {
                ", the same on every rank"
            } else {
                ""
            };
            text.push_str(&format!("  {:<22} {} ({from}{agreed})\n", s.name, s.value));
        }
        for (i, q) in self.queues.iter().enumerate() {
            text.push_str(&format!(
                "  queue {:<16} {} slots{} (set by the program)\n",
                crate::rq::QueueId::FIRST_USER + i,
                q.slots,
                if q.shared { ", shared" } else { "" }
            ));
        }
        match shm::job_bytes(ranks, &self.conduit_spec()) {
            Ok((total, block, rings, segs)) => {
                let mib = |b: usize| b as f64 / f64::from(1 << 20);
                text.push_str(&format!(
                    "  shared memory          {:.1} MiB for {ranks} ranks on one host: bootstrap {:.2} MiB + rings {:.2} MiB + segments {:.1} MiB (one anonymous object: nothing in /dev/shm)\n",
                    mib(total),
                    mib(block),
                    mib(rings),
                    mib(segs)
                ));
            }
            Err(e) => text.push_str(&format!(
                "  shared memory          cannot be computed: {e}\n"
            )),
        }
        text
    }
}

/// Joins the job a launcher placed this process in: its host's shared memory, and
/// across hosts the network too.
fn join(place: &Place, config: &Config) -> crate::Result<MemConduit> {
    let spec = config.conduit_spec();
    let timeout = config.attach_timeout.get();
    Ok(match &place.rendezvous {
        Some(_) => MemConduit::across_hosts(cluster::join(place, &spec, &[], timeout)?)?,
        None => shm::attach(place, &spec, timeout)?,
    })
}

/// Records this rank's failure with `cause` in every job it is a rank of.
fn failed(boots: &[(Boot, Rank)], cause: &str) {
    for (boot, rank) in boots {
        boot.mark_failed(*rank, cause.to_string());
    }
}

/// Says why this process cannot go on, and exits with 1.
fn fail(rank: Option<Rank>, e: &Error) -> ! {
    let text = e.chain();
    match rank {
        // Labelled with the rank, unless the text already starts with it.
        Some(r) if !text.starts_with(&format!("rank {r} ")) => {
            crate::util::say(&format!("amrq: rank {r}: {text}"))
        }
        _ => crate::util::say(&format!("amrq: {text}")),
    }
    std::process::exit(1)
}

/// The ranks' results if every one is `Ok`; else the first error a rank met itself
/// (rather than one that only reports another rank's failure or departure), else the
/// first.
fn first_error<R>(results: Vec<crate::Result<R>>) -> crate::Result<Vec<R>> {
    use crate::conduit::ConduitError::{AllPeersLeft, PeerDead, PeerLeft};
    let echo = |e: &Error| {
        matches!(
            e.conduit(),
            Some(PeerDead { .. } | PeerLeft { .. } | AllPeersLeft)
        )
    };
    let first = results
        .iter()
        .position(|r| r.as_ref().is_err_and(|e| !echo(e)))
        .or_else(|| results.iter().position(Result::is_err));
    match first {
        Some(i) => match results.into_iter().nth(i) {
            Some(Err(e)) => Err(e),
            _ => unreachable!("rank {i}'s result is the error found above"),
        },
        None => Ok(results.into_iter().flatten().collect()),
    }
}

/// The exit status of a job of threads: 0, 1 after an error (printed), 101 after a
/// panic.
fn threads_status(out: crate::Result<Vec<()>>) -> i32 {
    match out {
        Ok(_) => 0,
        Err(e @ Error::RankPanicked { .. }) => {
            crate::util::say(&format!("amrq: {e}"));
            101
        }
        Err(e) => {
            crate::util::say(&format!("amrq: {}", e.chain()));
            1
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}
