//! The size sweep: every application's speed-up on 2 ranks against its problem size,
//! and the profile of each run ([`crate::profile`]) that says where the time went when
//! two ranks lose.

use super::{fig, show};
use amrq_bench::report::{Outcome, Point};
use std::fmt::Write;

/// An application in the sweep.
struct App {
    /// Its name in the outcomes.
    name: &'static str,
    /// Its label in the table and the plot (the variant whose speed-up is shown).
    label: &'static str,
    /// What its size counts.
    unit: &'static str,
    /// The size of the paper's run, or of the default run where the paper gives none.
    reference: f64,
    /// Whether `reference` is the paper's.
    papers: bool,
    /// Its speed-up over one core.
    speedup: fn(&Outcome) -> Option<f64>,
}

const APPS: [App; 9] = [
    App {
        name: "transpose",
        label: "transpose, am",
        unit: "bytes per block",
        reference: 4096.0,
        papers: false,
        // Against one core rearranging the same bytes in its own memory.
        speedup: |o| Some(fig(o, "am_mb_s")? / fig(o, "sequential_mb_s")?),
    },
    App {
        name: "trisolve",
        label: "triangular solve, handlers",
        unit: "rows",
        reference: crate::matrix::PAPER[0].1 as f64,
        papers: true,
        speedup: |o| fig(o, "handlers_speedup"),
    },
    App {
        name: "em3d",
        label: "EM3D by stores, direct",
        unit: "nodes per rank",
        reference: 500.0,
        papers: true,
        speedup: |o| fig(o, "direct_store_speedup"),
    },
    App {
        name: "cg",
        label: "CG, direct",
        unit: "grid side",
        reference: 64.0,
        papers: true,
        speedup: |o| fig(o, "direct_speedup"),
    },
    App {
        name: "fft",
        label: "3-D FFT, direct",
        unit: "cube side",
        reference: 128.0,
        papers: true,
        speedup: |o| fig(o, "direct_speedup"),
    },
    App {
        name: "queens",
        label: "N-Queens, message-driven",
        unit: "queens",
        reference: 13.0,
        papers: false,
        speedup: |o| fig(o, "speedup"),
    },
    App {
        name: "radix",
        label: "radix sort, inlined",
        unit: "keys per rank",
        reference: 1_048_576.0,
        papers: false,
        speedup: |o| fig(o, "inlined_speedup"),
    },
    App {
        name: "raytrace",
        label: "ray tracer, direct",
        unit: "pixels",
        reference: 480.0 * 360.0,
        papers: false,
        speedup: |o| fig(o, "direct_speedup"),
    },
    App {
        name: "cholesky",
        label: "Cholesky, direct",
        unit: "rows",
        reference: 1536.0,
        papers: true,
        speedup: |o| fig(o, "direct_speedup"),
    },
];

/// `app`'s runs on 2 ranks, by size: the regular runs' (N-Queens' at its default grain)
/// and the sweep's, one per size.
fn runs<'a>(app: &App, outcomes: &'a [Outcome], sweep: &'a [Outcome]) -> Vec<&'a Outcome> {
    let grain =
        |o: &Outcome| o.name != "queens" || fig(o, "depth") == Some(crate::queens::DEPTH.into());
    let mut runs: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.ranks == 2 && grain(o))
        .chain(sweep)
        .filter(|o| o.name == app.name && !o.failed() && fig(o, "size").is_some())
        .collect();
    runs.sort_by(|a, b| {
        fig(a, "size")
            .partial_cmp(&fig(b, "size"))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    runs.dedup_by(|a, b| fig(a, "size") == fig(b, "size"));
    runs
}

/// The shares of a run's time: computing, in messages, in waits (rank 0's profiled run;
/// N-Queens': every rank's timed searches).
fn shares(o: &Outcome) -> [Option<f64>; 3] {
    match o.name.as_str() {
        "queens" => ["compute_fraction", "comm_fraction", "idle_fraction"],
        _ => ["compute_share", "messages_share", "waits_share"],
    }
    .map(|k| fig(o, k))
}

fn percent(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.0} %", v * 100.0))
}

/// Why two ranks lost at the run `o`: where its time went, in words.
fn why(o: &Outcome) -> String {
    let [_, messages, waits] = shares(o).map(|v| v.unwrap_or(0.0));
    let who = match o.name.as_str() {
        "queens" => "the ranks spent",
        _ => "rank 0 spent",
    };
    let mut s = format!(
        "{who} {} waiting for others and {} in messages",
        percent(Some(waits)),
        percent(Some(messages))
    );
    if let Some(stretch) = fig(o, "compute_stretch").filter(|&v| v > 1.0) {
        let _ = write!(
            s,
            ", and computed {stretch:.2}× as long as half of one core's time (the ranks \
slowed each other, rank 0 had more than half of the work, or the parallel code does more)"
        );
    }
    let traffic = fig(o, "traffic_share").zip(fig(o, "copy_gb_s"));
    // Below 1 % of the run the messages' cost says nothing either way.
    if let Some((t, bw)) = traffic.filter(|_| messages >= 0.01) {
        let bound = match t >= 0.5 * messages {
            true => "the bytes account for at least half of the messages' time",
            false => {
                "the messages cost far more than their bytes: per-message overhead, not bandwidth"
            }
        };
        let _ = write!(
            s,
            "; copying the bytes it moved at {bw:.1} GB/s (this job's copy bandwidth) would take {}: {bound}",
            percent(Some(t))
        );
    }
    s
}

/// The sweep's section of the report, and its curves (speed-up against size over the
/// reference size).
pub(super) fn section(
    s: &mut String,
    outcomes: &[Outcome],
    sweep: &[Outcome],
) -> Vec<(String, Vec<Point>)> {
    *s += "\n## Speed-up against size on 2 ranks\n\n\
Each application on 2 ranks pinned one per core, at sizes around its default, against \
its sequential code timed in the same run (the transpose: its bandwidth against one \
core rearranging the same bytes; the triangular solve: the paper's three factors, then \
synthetic ones with bcsprw10's non-zeros per row). Profile: one more run of the same \
size after the timed ones, with the clock read around every call that involves another \
rank: the shares of rank 0's time computing (the rest: its own work, local copies, \
load imbalance), in messages (sending, storing, reading remote data, receiving while it \
has work of its own) and in waits (barriers, synchronisations, reductions, and polls \
with nothing else to do, with the handlers they run), and in the profiler's own clock \
reads (measured, so as not to count them as computing). N-Queens' shares are its own, \
over every rank's timed searches. Stretch: rank 0's computing time over half of one \
core's time for the whole problem. Traffic: the bytes rank 0 moved to or read from \
the other, and the share of the run a copy of them at the copy bandwidth measured in \
the same job (buffers larger than the caches) would take. In the plot, the size is \
over the paper's (or the default run's where the paper gives none).\n\n\
| application | size | × paper's (default's) | speed-up | compute / messages / waits / clock | stretch | bytes moved | at copy speed |\n\
|---|---|---|---|---|---|---|---|\n";
    let mut curves = Vec::new();
    let mut verdicts = Vec::new();
    for app in &APPS {
        let runs = runs(app, outcomes, sweep);
        let mut pts = Vec::new();
        for o in &runs {
            let (size, up) = (fig(o, "size").unwrap_or(f64::NAN), (app.speedup)(o));
            let [c, m, w] = shares(o);
            let _ = writeln!(
                s,
                "| {} | {} {} | {} | {} | {} / {} / {} / {} | {} | {} | {} |",
                app.label,
                show(Some(size)),
                app.unit,
                show(Some(size / app.reference)),
                show(up),
                percent(c),
                percent(m),
                percent(w),
                percent(fig(o, "profiler_share")),
                show(fig(o, "compute_stretch")),
                show(fig(o, "bytes_moved")),
                percent(fig(o, "traffic_share")),
            );
            if let Some(up) = up {
                pts.push(Point {
                    x: size / app.reference,
                    median: up,
                    min: up,
                    max: up,
                });
            }
        }
        // The parallel code on one rank, at the default size, against one core's.
        let alone = outcomes
            .iter()
            .filter(|o| o.name == app.name && o.ranks == 1 && !o.failed())
            .find(|o| fig(o, "size") == Some(app.reference))
            .and_then(app.speedup);
        verdicts.push(verdict(app, &runs, alone));
        curves.push((app.label.to_string(), pts));
    }
    *s += "\n";
    for v in verdicts {
        let _ = writeln!(s, "- {v}");
    }
    curves
}

/// Whether and from what size two ranks win at `app`, and if never, why.
/// `alone`: the parallel code's speed-up on one rank at the reference size.
fn verdict(app: &App, runs: &[&Outcome], alone: Option<f64>) -> String {
    let size = |o: &Outcome| format!("{} {}", show(fig(o, "size")), app.unit);
    let reference = match app.papers {
        true => "the paper's size",
        false => "the default size",
    };
    let wins: Vec<&&Outcome> = runs
        .iter()
        .filter(|o| (app.speedup)(o).is_some_and(|v| v > 1.0))
        .collect();
    let (Some(first), Some(largest)) = (wins.first(), runs.last()) else {
        let Some(o) = runs.last() else {
            return format!("{}: no run.", app.label);
        };
        let mut s = format!(
            "{}: 2 ranks never win up to {}; at that size {}",
            app.label,
            size(o),
            why(o)
        );
        if let Some(a) = alone.filter(|&a| a > 0.0 && a < 1.0) {
            let _ = write!(
                s,
                "; and on one rank, at {reference} ({}), the parallel code takes {:.2}× one core's time",
                show(Some(app.reference)),
                1.0 / a
            );
        }
        return s + ".";
    };
    let at = runs
        .iter()
        .position(|o| std::ptr::eq(*o, **first))
        .unwrap_or(0);
    let from = if at == 0 && wins.len() == runs.len() {
        format!("at every size from {}", size(runs[0]))
    } else if wins.len() == runs.len() - at {
        format!("from {} on", size(first))
    } else {
        let sizes: Vec<String> = wins.iter().map(|o| size(o)).collect();
        format!("at {} only", sizes.join(", "))
    };
    let best = runs
        .iter()
        .filter_map(|o| (app.speedup)(o))
        .fold(f64::NAN, f64::max);
    format!(
        "{}: 2 ranks win {from} ({reference}: {}), {best:.2}× at best; at the largest size, {}.",
        app.label,
        show(Some(app.reference)),
        why(largest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use amrq_bench::report::Figure;

    fn cg(size: f64, speedup: f64) -> Outcome {
        let mut o = Outcome::new("cg", 2, 0.0);
        for (k, v) in [
            ("size", size),
            ("direct_speedup", speedup),
            ("compute_share", 0.3),
            ("messages_share", 0.1),
            ("waits_share", 0.6),
            ("compute_stretch", 1.5),
            ("copy_gb_s", 10.0),
            ("traffic_share", 0.01),
        ] {
            o.figures.push(Figure::single(k, v));
        }
        o
    }

    fn said(runs: &[Outcome]) -> String {
        let mut s = String::new();
        let mut alone = cg(64.0, 0.5);
        alone.ranks = 1;
        let _ = section(&mut s, &[alone], runs);
        s.lines()
            .find(|l| l.starts_with("- CG, direct:"))
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn the_verdict_says_from_what_size_two_ranks_win_and_why_they_lose() {
        let from = said(&[cg(64.0, 1.2), cg(16.0, 0.8), cg(256.0, 1.5)]);
        assert!(from.contains("win from 64 grid side on"), "{from}");
        assert!(from.contains("1.50× at best"), "{from}");
        let only = said(&[cg(16.0, 0.8), cg(64.0, 1.2), cg(256.0, 0.9)]);
        assert!(only.contains("at 64 grid side only"), "{only}");
        let never = said(&[cg(16.0, 0.8), cg(64.0, 0.9)]);
        assert!(never.contains("never win up to 64 grid side"), "{never}");
        assert!(never.contains("rank 0 spent 60 % waiting"), "{never}");
        assert!(
            never.contains("per-message overhead, not bandwidth"),
            "{never}"
        );
    }

    #[test]
    fn each_size_is_one_row_and_one_point_over_the_papers_size() {
        let mut s = String::new();
        let curves = section(&mut s, &[cg(64.0, 1.2)], &[cg(64.0, 1.3), cg(32.0, 0.9)]);
        let rows = s
            .lines()
            .filter(|l| l.starts_with("| CG, direct |"))
            .count();
        assert_eq!(rows, 2, "{s}");
        let (_, pts) = curves
            .iter()
            .find(|c| c.0 == "CG, direct")
            .expect("a curve");
        let xs: Vec<f64> = pts.iter().map(|p| p.x).collect();
        assert_eq!(xs, [0.5, 1.0], "the paper's grid is 64");
        assert_eq!(pts[1].median, 1.2, "the regular run's figure first");
    }
}
