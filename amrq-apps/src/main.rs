//! `amrq-apps`: the papers' applications on amrq, one subcommand each, and `all`.

use amrq_apps::{transpose, Common};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[derive(clap::Parser)]
#[command(name = "amrq-apps", about = "The papers' applications on amrq")]
struct Cli {
    #[command(subcommand)]
    app: App,
}

#[derive(clap::Subcommand)]
enum App {
    /// Remote Queues §4: the transpose ladder (am, dequeue, matched, alternate; limited).
    Transpose {
        #[command(flatten)]
        common: Common,
        /// Bytes per block.
        #[arg(long, default_value_t = 4096)]
        block: usize,
        /// Bytes per chunk (one message).
        #[arg(long, default_value_t = 256)]
        chunk: usize,
    },
    /// Every application at 2, 4 and 8 ranks, then the report.
    All {
        /// A short run, as CI runs it.
        #[arg(long)]
        quick: bool,
        /// Where the report goes.
        #[arg(long, default_value = "results/apps")]
        out: PathBuf,
    },
}

fn main() {
    let cli = <Cli as clap::Parser>::parse();
    match cli.app {
        App::Transpose {
            common,
            block,
            chunk,
        } => {
            let mut cfg = amrq::Config::from_env().unwrap_or_else(|e| amrq_apps::fail(&e));
            let q = cfg.add_queue(transpose::QUEUE_SLOTS);
            let shape = transpose::Shape {
                block,
                chunk,
                // Runs of about 1 MiB (quick) or 8 MiB between ranks, whatever the count.
                reps: ((if common.quick { 1 } else { 8 } << 20)
                    / (common.ranks * common.ranks.saturating_sub(1) * block).max(1))
                .max(1),
                batches: if common.quick { 5 } else { 21 },
                check: common.check,
            };
            amrq_apps::run_job(&common, &cfg, |c| transpose::rank_main(c, q, shape))
        }
        App::All { quick, out } => all(quick, &out),
    }
}

/// Runs every application as a child job, at each rank count, and writes the report.
fn all(quick: bool, out: &std::path::Path) {
    let exe = std::env::current_exe().unwrap_or_else(|e| amrq_apps::fail(&e.to_string()));
    let mut outcomes = Vec::new();
    for ranks in [2, 4, 8] {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "transpose",
            "--json",
            "--check",
            "--ranks",
            &ranks.to_string(),
        ]);
        if quick {
            cmd.arg("--quick");
        }
        eprintln!("amrq-apps: transpose on {ranks} ranks");
        let run = amrq_bench::child::run_output(&mut cmd, Duration::from_secs(600));
        let parsed = run
            .stdout
            .lines()
            .find_map(|l| serde_json::from_str::<amrq_bench::report::Outcome>(l).ok());
        outcomes.push(match (run.failed, parsed) {
            (None, Some(o)) => o,
            (why, _) => {
                let mut o = amrq_bench::report::Outcome::new("transpose", ranks, 0.0);
                let why = why.unwrap_or_else(|| "no result printed".into());
                o.notes
                    .push(format!("failed: {why}; its stderr: {}", run.stderr.trim()));
                o
            }
        });
    }
    if let Err(e) = amrq_apps::report::write(&outcomes, quick, out) {
        amrq_apps::fail(&e);
    }
    let failed = outcomes
        .iter()
        .filter(|o| o.notes.iter().any(|n| n.starts_with("failed")))
        .count();
    println!(
        "apps: runs={} failed={failed} report={}",
        outcomes.len(),
        out.join("summary.md").display()
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
