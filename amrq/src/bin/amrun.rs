//! `amrun`: start N ranks of a program on this host, or on several hosts, like `mpirun`.
//!
//! ```text
//! amrun -n N [--bind cores|none] [--timeout SECS] [--label] [--print-config] PROGRAM ARGS…
//! amrun [-n N] --hosts h0:2,h1:2 [--exec 'ssh {host}'] [--rendezvous ADDR[:PORT]] PROGRAM ARGS…
//! ```
//! Each rank gets `AMRQ_RANK`, `AMRQ_SIZE`, a fresh `AMRQ_JOB_ID` and a fresh random
//! `AMRQ_JOB_KEY`. Ranks are
//! pinned one per core when they fit. When a rank fails, the others are ended within
//! 2 s and amrun exits with that rank's status (128 + signal if it was killed). Programs
//! that do not use amrq can be launched too. With `--hosts`, each rank runs through the
//! `--exec` template on its host and joins at rank 0's TCP rendezvous
//! (see `amrq::launch::Hosts`).

fn main() {
    // Under `--cfg amrq_loom` the library holds only the ring (for the loom models).
    #[cfg(not(amrq_loom))]
    cli::main();
}

#[cfg(not(amrq_loom))]
mod cli {
    use amrq::launch::{Bind, Hosts, LaunchError, Launcher};
    use clap::{Parser, ValueEnum};
    use std::ffi::OsString;
    use std::time::Duration;

    #[derive(Debug, Clone, Copy, ValueEnum)]
    enum BindArg {
        /// Rank i on core i when the ranks fit the cores.
        Cores,
        /// No binding.
        None,
    }

    /// Start N ranks of PROGRAM on this host, or on several hosts.
    #[derive(Debug, Parser)]
    #[command(name = "amrun", version, about)]
    struct Args {
        /// Number of ranks (with --hosts: may be left out; must equal the hosts' sum).
        #[arg(short = 'n', long = "np", value_name = "N")]
        ranks: Option<usize>,
        /// Run the ranks on these hosts, in rank order: a comma-separated list of
        /// NAME:RANKS, or NAME for one rank. Ranks join at rank 0's TCP rendezvous, over
        /// UCX.
        #[arg(long, value_name = "LIST")]
        hosts: Option<String>,
        /// The command that runs a command on a host; {host} is replaced by the host's
        /// name ('ip netns exec {host}' for network-namespace hosts).
        #[arg(
            long,
            value_name = "TEMPLATE",
            default_value = "ssh {host}",
            requires = "hosts"
        )]
        exec: String,
        /// Rank 0's rendezvous, ADDR:PORT or ADDR (then a random port), reachable over
        /// TCP from every host (default: the first host's name and a random port).
        #[arg(long, value_name = "ADDR:PORT", requires = "hosts")]
        rendezvous: Option<String>,
        /// How ranks are bound to cores.
        #[arg(long, value_enum, default_value = "cores")]
        bind: BindArg,
        /// End the job (exit status 124) after this many seconds.
        #[arg(long, value_name = "SECS")]
        timeout: Option<f64>,
        /// Prefix each output line with the rank that printed it.
        #[arg(long)]
        label: bool,
        /// Print how amrun would start the job and, for PROGRAM (run once to ask it) or
        /// else for a program that sets nothing itself, each setting, where it came
        /// from and the shared memory the job maps; then exit.
        #[arg(long)]
        print_config: bool,
        /// The program and its arguments.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "PROGRAM ARGS"
        )]
        command: Vec<OsString>,
    }

    pub fn main() {
        let args = Args::parse();
        let fail = |e: String| -> ! {
            amrq::util::say(&format!("amrun: {e}"));
            std::process::exit(2)
        };
        let hosts = match &args.hosts {
            Some(list) => Some(
                Hosts::new(list, &args.exec, args.rendezvous.as_deref())
                    .unwrap_or_else(|e| fail(e.to_string())),
            ),
            None => None,
        };
        // A count that disagrees with the hosts' sum is refused by the launcher.
        let ranks = match (args.ranks, &hosts) {
            (Some(n), _) => n,
            (None, Some(h)) => h.ranks(),
            (None, None) => {
                fail("give the number of ranks (-n N) or the hosts (--hosts LIST)".into())
            }
        };
        let mut launcher = Launcher::new(ranks);
        launcher.hosts = hosts;
        launcher.bind = match args.bind {
            BindArg::Cores => Bind::Cores,
            BindArg::None => Bind::None,
        };
        launcher.label = args.label;
        if let Some(t) = args.timeout {
            if !(t > 0.0 && t.is_finite()) {
                amrq::util::say(&format!(
                    "amrun: --timeout {t}: give a positive number of seconds"
                ));
                std::process::exit(2);
            }
            launcher.timeout = Some(Duration::from_secs_f64(t));
        }
        if args.print_config {
            print_config(&args, &launcher);
            return;
        }
        let Some((program, rest)) = args.command.split_first() else {
            amrq::util::say("amrun: no PROGRAM given (amrun -n N PROGRAM ARGS…)");
            std::process::exit(2);
        };
        match launcher.run(program, rest) {
            Ok(out) => std::process::exit(out.code),
            Err(e @ LaunchError::Config(_)) => fail(e.to_string()),
            Err(e) => {
                amrq::util::say(&format!("amrun: {e}"));
                std::process::exit(1);
            }
        }
    }

    fn print_config(args: &Args, l: &Launcher) {
        let cores = amrq::util::affinity::allowed_cores().len();
        let flag = |given: bool| if given { "flag" } else { "default" };
        println!("amrun configuration:");
        let from = if args.ranks.is_some() {
            "flag -n"
        } else {
            "the hosts' sum"
        };
        println!("  ranks          {:<12} ({from})", l.ranks);
        let bind = match l.bind {
            _ if l.hosts.is_some() => {
                "not pinned (amrun cannot pin a rank another host runs)".into()
            }
            Bind::Cores if l.pins() => format!(
                "cores ({} ranks on {cores} cores: rank i on core i)",
                l.ranks
            ),
            Bind::Cores => format!(
                "cores, but {} ranks > {cores} cores: oversubscribed, not pinned",
                l.ranks
            ),
            Bind::None => "none".into(),
        };
        println!(
            "  bind           {bind} ({})",
            flag(std::env::args().any(|a| a.starts_with("--bind")))
        );
        match l.timeout {
            Some(t) => println!("  timeout        {t:?} (flag)"),
            None => println!("  timeout        none (default)"),
        }
        println!("  label          {} ({})", l.label, flag(args.label));
        if let Some(h) = &l.hosts {
            let list: Vec<String> = h.hosts.iter().map(|(n, c)| format!("{n}:{c}")).collect();
            println!("  hosts          {} (flag --hosts)", list.join(","));
            println!("  exec           {} (--exec)", h.exec.join(" "));
            println!("  rendezvous     {} (TCP, rank 0's host)", h.rendezvous);
        }
        println!(
            "  job id         {} (fresh; the key is fresh random and secret)",
            l.id
        );
        // Shared memory is per host: the most ranks one host runs size it.
        let on_one_host = l.hosts.as_ref().map_or(l.ranks, |h| {
            h.hosts.iter().map(|&(_, c)| c).max().unwrap_or(l.ranks)
        });
        match args.command.split_first() {
            // The program says what it will use: the settings it sets win over the
            // environment's.
            Some((program, rest)) => {
                let out = std::process::Command::new(program)
                    .args(rest)
                    .env(amrq::config::ENV_PRINT_CONFIG, on_one_host.to_string())
                    .status();
                if !matches!(out, Ok(s) if s.success()) {
                    amrq::util::say(&format!(
                        "amrun: {} did not print its settings ({out:?}): is it an amrq program?",
                        program.to_string_lossy()
                    ));
                    std::process::exit(2);
                }
            }
            None => match amrq::Config::from_env() {
                Ok(cfg) => print!("{}", cfg.described(on_one_host)),
                Err(e) => {
                    amrq::util::say(&format!("amrun: {e}"));
                    std::process::exit(2);
                }
            },
        }
        if l.hosts.is_some() {
            println!("  across hosts           shared memory inside each host, UCX between hosts");
        }
        match amrq::util::shm::memory_available() {
            Ok((free, whence)) => println!(
                "  memory free            {:.1} MiB ({whence})",
                free as f64 / f64::from(1 << 20)
            ),
            Err(e) => println!("  memory free            unknown ({e})"),
        }
    }
}
