//! `amrq-apps all`'s report: `summary.md` (tables shaped like the papers' figures, and
//! whether each figure's shape holds here), `results.json`, `results.csv` and the plots
//! (SVG), from the outcomes of every application run. The sections are in
//! `rq` (Remote Queues' applications), `splitc` (Split-C's) and `tam` (the
//! message-driven search); the speed-up curves of them all are here.

mod rq;
mod splitc;
mod sweep;
mod tam;

use crate::transpose::VARIANTS;
use amrq_bench::plots::Chart;
use amrq_bench::report::{Outcome, Point};
use std::fmt::Write;
use std::path::Path;

/// A figure for a table: "–" when there is none.
fn show(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or("–".into(), |v| {
        if v.abs() >= 100.0 || v == v.round() {
            format!("{v:.0}")
        } else if v.abs() >= 0.01 {
            format!("{v:.3}")
        } else {
            format!("{v:.1e}") // two significant digits, not "0.000"
        }
    })
}

/// The factor a solve ran on, as its note names it (the text before the first colon).
fn factor(o: &Outcome) -> &str {
    o.notes
        .iter()
        .find(|n| !n.starts_with("failed") && !n.contains("outnumber"))
        .and_then(|n| n.split(": ").next())
        .unwrap_or("?")
}

/// A rank count for a table, marked when the ranks outnumber the cores.
fn ranks_cell(ranks: usize) -> String {
    match crate::oversubscribed(ranks) {
        true => format!("{ranks} (oversubscribed)"),
        false => ranks.to_string(),
    }
}

/// A table cell: the time `key`, and in brackets the speed-up `speedup`.
fn timed(o: &Outcome, key: &str, speedup: &str) -> String {
    format!("{} ({}×)", show(fig(o, key)), show(fig(o, speedup)))
}

fn fig(o: &Outcome, key: &str) -> Option<f64> {
    o.get(key).map(|f| f.median)
}

/// A bar chart's curves: per run, a bar for each of `names` (at x = its index), the
/// figure `{name}_{unit}`; each curve labelled by `label`.
fn bars(
    runs: &[&Outcome],
    names: &[&str],
    unit: &str,
    label: impl Fn(&Outcome) -> String,
) -> Vec<(String, Vec<Point>)> {
    runs.iter()
        .map(|o| {
            let pts = names
                .iter()
                .enumerate()
                .filter_map(|(i, n)| Some(Point::at(i as f64, o.get(&format!("{n}_{unit}"))?)))
                .collect();
            (label(o), pts)
        })
        .collect()
}

/// The rank counts of the speed-up curves.
const CURVE_RANKS: [usize; 3] = [1, 2, 4];

/// Where a speed-up curve's points come from: its label, then the figure (third) of
/// the runs of an application (second) that a test (fourth) keeps.
type Curve = (
    &'static str,
    &'static str,
    &'static str,
    fn(&Outcome) -> bool,
);

/// Each application's speed-up curve: its label and, per rank count, the speed-up
/// (the median over batches).
fn speedups(outcomes: &[Outcome]) -> Vec<(String, Vec<Point>)> {
    let queens_default = |o: &Outcome| fig(o, "depth") == Some(crate::queens::DEPTH.into());
    let first_factor = |o: &Outcome| factor(o).starts_with(crate::matrix::PAPER[0].0);
    let every = |_: &Outcome| true;
    let curves: [Curve; 11] = [
        ("3-D FFT, direct", "fft", "direct_speedup", every),
        ("3-D FFT, frames", "fft", "frames_speedup", every),
        ("CG, direct", "cg", "direct_speedup", every),
        ("CG, frames", "cg", "frames_speedup", every),
        (
            "EM3D by stores, direct",
            "em3d",
            "direct_store_speedup",
            every,
        ),
        (
            "EM3D by stores, frames",
            "em3d",
            "frames_store_speedup",
            every,
        ),
        (
            "N-Queens, message-driven",
            "queens",
            "speedup",
            queens_default,
        ),
        (
            "triangular solve, handlers",
            "trisolve",
            "handlers_speedup",
            first_factor,
        ),
        ("radix sort, inlined", "radix", "inlined_speedup", every),
        ("ray tracer, direct", "raytrace", "direct_speedup", every),
        ("Cholesky, direct", "cholesky", "direct_speedup", every),
    ];
    curves
        .iter()
        .map(|(label, app, key, keep)| {
            let pts = CURVE_RANKS
                .iter()
                .filter_map(|&r| {
                    let o = outcomes
                        .iter()
                        .find(|o| o.name == *app && o.ranks == r && keep(o))?;
                    Some(Point::at(r as f64, o.get(key)?))
                })
                .collect();
            (label.to_string(), pts)
        })
        .collect()
}

/// The speed-up section: every application's speed-up over its sequential code on 1,
/// 2 and 4 ranks.
fn speedup_section(s: &mut String, curves: &[(String, Vec<Point>)]) {
    *s += "\n## Speed-up on 1, 2 and 4 ranks\n\n\
Each application's time against its optimised sequential code, both timed in the same \
run, the sequential one on rank 0 between the parallel runs (median of the per-batch \
ratios). This machine has 2 cores: 4 ranks share them, and their waits spin a \
bounded time, then sleep. The per-application sections say which of the papers' shapes \
hold.\n\n";
    let heads: Vec<String> = CURVE_RANKS.iter().map(|&r| ranks_cell(r)).collect();
    let _ = writeln!(
        s,
        "| application | {} |\n|---|{}",
        heads.join(" | "),
        "---|".repeat(heads.len())
    );
    for (label, pts) in curves {
        let cells: Vec<String> = CURVE_RANKS
            .iter()
            .map(|&r| show(pts.iter().find(|p| p.x == r as f64).map(|p| p.median)))
            .collect();
        let _ = writeln!(s, "| {label} | {} |", cells.join(" | "));
    }
}

/// The runs of `app`.
fn of<'a>(outcomes: &'a [Outcome], app: &str) -> Vec<&'a Outcome> {
    outcomes.iter().filter(|o| o.name == app).collect()
}

/// Writes the report of `outcomes` (the runs on 1, 2 and 4 ranks) and `sweep` (the
/// size sweep's on 2) into `out`.
pub fn write(
    outcomes: &[Outcome],
    sweep: &[Outcome],
    quick: bool,
    out: &Path,
) -> Result<(), String> {
    let w = |name: &str, text: &str| {
        std::fs::write(out.join(name), text).map_err(|e| format!("{}: {e}", out.display()))
    };
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let run = if quick { "quick (`--quick`)" } else { "full" };
    let m = amrq_bench::results::Machine::here();
    let mut s = format!("# amrq-apps report\n\n{}\n", m.line(run));
    let curves = speedups(outcomes);
    speedup_section(&mut s, &curves);
    let sizes = sweep::section(&mut s, outcomes, sweep);
    let (transposes, solves) = (of(outcomes, "transpose"), of(outcomes, "trisolve"));
    rq::transpose_section(&mut s, &transposes);
    rq::trisolve_section(&mut s, &solves);
    rq::radix_section(&mut s, &of(outcomes, "radix"));
    splitc::em3d_section(&mut s, &of(outcomes, "em3d"));
    splitc::cg_section(&mut s, &of(outcomes, "cg"));
    splitc::fft_section(&mut s, &of(outcomes, "fft"));
    let others: Vec<&Outcome> = ["em3d", "cg", "fft"]
        .iter()
        .flat_map(|app| of(outcomes, app))
        .collect();
    splitc::raytrace_section(&mut s, &of(outcomes, "raytrace"), &others);
    splitc::cholesky_section(&mut s, &of(outcomes, "cholesky"));
    let queens = of(outcomes, "queens");
    tam::queens_section(&mut s, &queens);
    let failed: Vec<&Outcome> = outcomes
        .iter()
        .chain(sweep)
        .filter(|o| o.failed())
        .collect();
    if !failed.is_empty() {
        s += "\n## Failed runs\n\n";
        for o in failed {
            let _ = writeln!(
                s,
                "- {} on {} ranks: {}",
                o.name,
                o.ranks,
                o.notes.join("; ")
            );
        }
    }
    s += "\n## Plots\n\n- speed-up of every application on 1, 2 and 4 ranks: [SVG](plots/speedup.svg)\n\
- speed-up on 2 ranks against size: [SVG](plots/sizes.svg)\n\
- transpose bandwidth per variant: [SVG](plots/transpose.svg)\n\
- triangular solve, µs per solve by mode: [SVG](plots/trisolve.svg)\n\
- message-driven N-Queens on 2 ranks by grain: [SVG](plots/queens.svg)\n";
    w("summary.md", &s)?;
    let all: Vec<Outcome> = outcomes.iter().chain(sweep).cloned().collect();
    let json = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?;
    w("results.json", &json)?;
    w("results.csv", &amrq_bench::files::csv_of(&all))?;
    let plots = out.join("plots");
    Chart {
        file: "speedup",
        title: "Speed-up over the sequential code (Begel et al. Figure 6-5's axes)",
        x_label: "ranks (2 cores: 4 share them)",
        y_label: "speed-up",
        log_x: false,
        log_y: true,
        curves,
        categories: &[],
        parity: true,
    }
    .write(&plots)?;
    Chart {
        file: "sizes",
        title: "Speed-up on 2 ranks against problem size",
        x_label: "size over the paper's run (the default run's where the paper gives none)",
        y_label: "speed-up",
        log_x: true,
        log_y: true,
        curves: sizes,
        categories: &[],
        parity: true,
    }
    .write(&plots)?;
    let modes: Vec<&str> = crate::trisolve::MODES.iter().map(|m| m.name()).collect();
    let curves = bars(&solves, &modes, "us", |o| {
        format!("{}, {} ranks", factor(o), o.ranks)
    });
    Chart {
        file: "trisolve",
        title: "Sparse triangular solve: µs per solve by mode (Remote Queues Figure 9)",
        x_label: "mode",
        y_label: "µs per solve",
        log_x: false,
        log_y: true,
        curves,
        categories: &modes,
        parity: false,
    }
    .write(&plots)?;
    let labels: Vec<&str> = VARIANTS.iter().map(|v| v.name()).collect();
    let curves = bars(&transposes, &labels, "mb_s", |o| {
        format!("{} ranks", o.ranks)
    });
    Chart {
        file: "transpose",
        title: "Transpose ladder: bandwidth per variant (Remote Queues Figure 12)",
        x_label: "variant",
        y_label: "MB/s between ranks",
        log_x: false,
        log_y: false,
        curves,
        categories: &labels,
        parity: false,
    }
    .write(&plots)?;
    Chart {
        file: "queens",
        title: "Message-driven N-Queens on 2 ranks: speed-up and messaging share by grain",
        x_label: "tasks per search (the cut-off row deeper to the right)",
        y_label: "speed-up; share of the ranks' time",
        log_x: true,
        log_y: false,
        curves: tam::grain_curves(&queens),
        categories: &[],
        parity: true,
    }
    .write(&plots)
}
