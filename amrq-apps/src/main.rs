//! `amrq-apps`: the papers' applications on amrq, one subcommand each, and `all`.

use amrq::config::{Delivery, QueueSpec};
use amrq_apps::matrix::{Lower, PAPER};
use amrq_apps::{cg, cholesky, em3d, fft, queens, radix, raytrace, transpose, trisolve, Common};
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
    /// Remote Queues §3.2.5: sparse triangular solve (interrupts, engine, handlers, inlined).
    Trisolve {
        #[command(flatten)]
        common: Common,
        /// The paper's factor to imitate (synthetic, same size): bcsprw05, bcsprw06 or
        /// bcsprw10.
        #[arg(long, default_value = "bcsprw05")]
        matrix: String,
        /// A Matrix Market file to solve instead (its lower triangle).
        #[arg(long)]
        file: Option<PathBuf>,
        /// A synthetic factor of this many rows (bcsprw10's non-zeros per row) instead.
        #[arg(long, conflicts_with_all = ["file", "matrix"])]
        rows: Option<usize>,
    },
    /// Begel et al.'s EM3D on the Split-C layer (read, get, store; direct and message path).
    Em3d {
        #[command(flatten)]
        common: Common,
        /// E nodes (and H nodes) per rank.
        #[arg(long, default_value_t = 500)]
        nodes: usize,
        /// Fraction of edges to another rank's nodes.
        #[arg(long, default_value_t = 0.3)]
        remote: f64,
    },
    /// Begel et al.'s conjugate gradient on the Split-C layer (direct and message path).
    Cg {
        #[command(flatten)]
        common: Common,
        /// Points per side of the grid.
        #[arg(long, default_value_t = 64)]
        grid: usize,
    },
    /// Begel et al.'s 3-D FFT on the Split-C layer: slabs, the transpose by bulk stores.
    Fft {
        #[command(flatten)]
        common: Common,
        /// Points per side of the cube.
        #[arg(long, default_value_t = 128)]
        size: usize,
    },
    /// The AM paper's message-driven execution (TAM): N-Queens, a frame per node of the
    /// search tree, every spawn and result an Active Message.
    Queens {
        #[command(flatten)]
        common: Common,
        /// Queens (rows and columns of the board).
        #[arg(long, default_value_t = 13)]
        board: u32,
        /// The row from which a task counts its subtree itself instead of spawning.
        #[arg(long, default_value_t = queens::DEPTH)]
        depth: u32,
    },
    /// Remote Queues §3.2.3: radix sort, the keys redistributed to handlers, an inlined
    /// dequeue loop, or the paper's dequeue.
    Radix {
        #[command(flatten)]
        common: Common,
        /// Keys per rank (default 65536 with --quick, 1048576 otherwise).
        #[arg(long)]
        keys: Option<usize>,
    },
    /// Begel et al.'s Cholesky factorisation on the Split-C layer: column blocks dealt
    /// cyclically, panels bulk-stored to every rank (direct and message path).
    Cholesky {
        #[command(flatten)]
        common: Common,
        /// Rows of the matrix, a multiple of 32 (default 256 with --quick, 768
        /// otherwise).
        #[arg(long)]
        size: Option<usize>,
    },
    /// Begel et al.'s ray tracer on the Split-C layer: rows self-scheduled, pixels
    /// stored into rank 0's image (direct and message path).
    Raytrace {
        #[command(flatten)]
        common: Common,
        /// Image width, pixels (default 160 with --quick, 480 otherwise).
        #[arg(long)]
        width: Option<usize>,
        /// Image height, pixels (default: three quarters of the width).
        #[arg(long)]
        height: Option<usize>,
        /// Spheres per side of the grid of spheres.
        #[arg(long, default_value_t = 4)]
        spheres: usize,
    },
    /// Every application at 1, 2 and 4 ranks (the transpose at 2, 4 and 8), then on 2
    /// ranks at more sizes, then the report.
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
            let mut cfg = amrq::Config::new();
            let q = cfg.add_queue(transpose::QUEUE_SLOTS);
            let shape = transpose::Shape {
                block,
                chunk,
                // About 1 MiB (quick) or 8 MiB between ranks per run.
                run_bytes: if common.quick { 1 } else { 8 } << 20,
                batches: if common.quick { 5 } else { 21 },
                check: common.check,
            };
            amrq_apps::run_job(&common, cfg, |s| transpose::rank_main(s, q, shape))
        }
        App::Trisolve {
            common,
            matrix,
            file,
            rows,
        } => {
            let (name, l) = match rows {
                Some(n) => synthetic(n),
                None => load(&matrix, file.as_deref()),
            };
            let mut cfg = amrq::Config::new();
            let queues = trisolve::Queues {
                poll: cfg.add_queue(trisolve::QUEUE_SLOTS),
                interrupt: cfg.add(
                    QueueSpec::new("trisolve_interrupts", trisolve::QUEUE_SLOTS)
                        .delivery(Delivery::Interrupt),
                ),
            };
            let shape = trisolve::Shape {
                reps: if common.quick { 4 } else { 32 },
                batches: if common.quick { 5 } else { 21 },
                check: common.check,
            };
            amrq_apps::run_job(&common, cfg, |c| {
                trisolve::rank_main(c, queues, (&name, &l), shape)
            })
        }
        App::Em3d {
            common,
            nodes,
            remote,
        } => {
            let cfg = amrq::Config::new();
            if !(0.0..=1.0).contains(&remote) {
                amrq_apps::fail(&format!("--remote {remote}: a fraction from 0 to 1"));
            }
            let shape = em3d::Shape {
                nodes,
                remote,
                iters: if common.quick { 5 } else { 20 },
                batches: if common.quick { 3 } else { 11 },
            };
            amrq_apps::run_job(&common, cfg, |c| em3d::rank_main(c, shape))
        }
        App::Cg { common, grid } => {
            let cfg = amrq::Config::new();
            let shape = cg::Shape {
                grid,
                iters: if common.quick { 20 } else { 100 },
                batches: if common.quick { 3 } else { 11 },
            };
            amrq_apps::run_job(&common, cfg, |c| cg::rank_main(c, shape))
        }
        App::Fft { common, size } => {
            let mut cfg = amrq::Config::new();
            // One rank's slab buffer, on one rank the whole cube of complex values.
            let cube = 16 * size.pow(3);
            cfg.segment_bytes
                .set_default(cfg.segment_bytes.get().max(cube + (1 << 20)));
            let shape = fft::Shape {
                n: size,
                batches: if common.quick { 3 } else { 11 },
            };
            amrq_apps::run_job(&common, cfg, |c| fft::rank_main(c, shape))
        }
        App::Queens {
            common,
            board,
            depth,
        } => {
            let cfg = amrq::Config::new();
            let shape = queens::Shape {
                n: board,
                depth,
                batches: if common.quick { 3 } else { 11 },
            };
            amrq_apps::run_job(&common, cfg, |c| queens::rank_main(c, shape))
        }
        App::Radix { common, keys } => {
            let mut cfg = amrq::Config::new();
            let q = cfg.add(QueueSpec::new("radix", radix::QUEUE_SLOTS).one_poll());
            let shape = radix::Shape {
                keys: keys.unwrap_or(if common.quick { 1 << 16 } else { 1 << 20 }),
                batches: if common.quick { 3 } else { 11 },
            };
            amrq_apps::run_job(&common, cfg, |s| radix::rank_main(s, q, shape))
        }
        App::Cholesky { common, size } => {
            let shape = cholesky::Shape {
                n: size.unwrap_or(if common.quick { 256 } else { 768 }),
                batches: if common.quick { 3 } else { 11 },
            };
            let cfg = amrq::Config::new();
            amrq_apps::run_job(&common, cfg, |c| cholesky::rank_main(c, shape))
        }
        App::Raytrace {
            common,
            width,
            height,
            spheres,
        } => {
            let width = width.unwrap_or(if common.quick { 160 } else { 480 });
            let shape = raytrace::Shape {
                width,
                height: height.unwrap_or(width * 3 / 4),
                grid: spheres,
                batches: if common.quick { 3 } else { 11 },
            };
            let cfg = amrq::Config::new();
            amrq_apps::run_job(&common, cfg, |c| raytrace::rank_main(c, shape))
        }
        App::All { quick, out } => all(quick, &out),
    }
}

/// The factor to solve: a Matrix Market file, or a synthetic one of a paper's sizes.
fn load(matrix: &str, file: Option<&std::path::Path>) -> (String, Lower) {
    if let Some(f) = file {
        let text = std::fs::read_to_string(f)
            .unwrap_or_else(|e| amrq_apps::fail(&format!("{}: {e}", f.display())));
        let l = Lower::from_matrix_market(&text)
            .unwrap_or_else(|e| amrq_apps::fail(&format!("{}: {e}", f.display())));
        return (f.display().to_string(), l);
    }
    let Some(&(name, n, nnz)) = PAPER.iter().find(|m| m.0 == matrix) else {
        let names: Vec<&str> = PAPER.iter().map(|m| m.0).collect();
        amrq_apps::fail(&format!("--matrix {matrix}: one of {}", names.join(", ")))
    };
    (
        format!("{name} (synthetic)"),
        Lower::power_grid_like(n, nnz, n as u64),
    )
}

/// A synthetic factor of `n` rows with bcsprw10's non-zeros per row.
fn synthetic(n: usize) -> (String, Lower) {
    let (_, rows, nnz) = PAPER[PAPER.len() - 1];
    if n == 0 {
        amrq_apps::fail("--rows 0: at least one row");
    }
    let l = Lower::power_grid_like(n, (n * nnz / rows).max(n), n as u64);
    (format!("{n} rows (synthetic)"), l)
}

/// The size sweep on 2 ranks: per application, the flag that sets its size, and the
/// sizes beside its runs' defaults (a quick run's, a full run's).
const SWEEP: [(&str, &str, &[usize], &[usize]); 9] = [
    ("transpose", "--block", &[512], &[256, 1024, 16384, 65536]),
    ("trisolve", "--rows", &[], &[21200, 84800]),
    ("em3d", "--nodes", &[50], &[50, 5000, 50000]),
    ("cg", "--grid", &[16], &[16, 32, 128, 256, 512]),
    ("fft", "--size", &[32], &[16, 32, 64, 256]),
    ("queens", "--board", &[9], &[8, 10, 12, 14]),
    ("radix", "--keys", &[4096], &[4096, 65536, 4194304]),
    ("raytrace", "--width", &[40], &[40, 160, 1280]),
    ("cholesky", "--size", &[64], &[64, 128, 256, 1536]),
];

/// Runs every application as a child job, at each rank count and at each size of the
/// sweep, and writes the report.
fn all(quick: bool, out: &std::path::Path) {
    let exe = std::env::current_exe().unwrap_or_else(|e| amrq_apps::fail(&e.to_string()));
    let mut outcomes = Vec::new();
    let mut runs: Vec<(&str, Vec<String>)> = Vec::new();
    for ranks in [2, 4, 8] {
        runs.push(("transpose", vec!["--ranks".into(), ranks.to_string()]));
    }
    // The speed-up curves: every application on 1, 2 and 4 ranks.
    for ranks in [1, 2, 4] {
        for app in [
            "em3d", "cg", "fft", "queens", "radix", "raytrace", "cholesky",
        ] {
            runs.push((app, vec!["--ranks".into(), ranks.to_string()]));
        }
    }
    // The grain of the message-driven search (the default depth is 4).
    for depth in [2, 6, 8] {
        let args = vec![
            "--depth".into(),
            depth.to_string(),
            "--ranks".into(),
            "2".into(),
        ];
        runs.push(("queens", args));
    }
    for (m, _, _) in PAPER {
        for ranks in [1, 2, 4] {
            let args = vec![
                "--matrix".into(),
                m.into(),
                "--ranks".into(),
                ranks.to_string(),
            ];
            runs.push(("trisolve", args));
        }
    }
    let regular = runs.len();
    for (app, flag, short, long) in SWEEP {
        for size in if quick { short } else { long } {
            let args = vec![flag.into(), size.to_string(), "--ranks".into(), "2".into()];
            runs.push((app, args));
        }
    }
    let progress = amrq_bench::progress::Progress::new(Some(runs.len()));
    for (app, args) in runs {
        progress.start(format!("{app} {}", args.join(" ")));
        let mut cmd = Command::new(&exe);
        cmd.args([app, "--json", "--check"]).args(&args);
        if quick {
            cmd.arg("--quick");
        }
        let ranks = args.last().and_then(|r| r.parse().ok()).unwrap_or(0);
        let limit = Duration::from_secs(600);
        outcomes.push(amrq_bench::suite::child_outcome(
            &mut cmd, app, ranks, limit,
        ));
    }
    progress.finish();
    let sweep = outcomes.split_off(regular);
    if let Err(e) = amrq_apps::report::write(&outcomes, &sweep, quick, out) {
        amrq_apps::fail(&e);
    }
    let failed = outcomes.iter().chain(&sweep).filter(|o| o.failed()).count();
    println!(
        "apps: runs={} failed={failed} report={}",
        outcomes.len() + sweep.len(),
        out.join("summary.md").display()
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
