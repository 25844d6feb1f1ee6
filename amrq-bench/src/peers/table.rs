//! The peers' figures as a table: per peer and metric, amrq's median, the peer's
//! median, and the median of the per-round ratios with their spread. The same table
//! three ways: an [`Outcome`] (the summary line and `results.json`), text for stdout,
//! and Markdown for the report.

use super::{placement, speedup, Comparison, Peers, Status, METRICS};
use crate::report::{Figure, Outcome};
use crate::summary::plain;
use std::fmt::Write;

/// The tag of a peer's figures (`Open MPI` → `open_mpi`).
///
/// ```
/// assert_eq!(amrq_bench::peers::table::tag("GASNet-EX"), "gasnet_ex");
/// ```
pub fn tag(name: &str) -> String {
    name.to_lowercase().replace([' ', '-'], "_")
}

/// One metric of one comparison, over its rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// amrq's figure over the rounds of this comparison.
    pub amrq: Figure,
    /// The peer's.
    pub peer: Figure,
    /// The per-round ratios (amrq's speed-up; above 1: amrq faster).
    pub speedup: Figure,
    /// Rounds that gave a ratio.
    pub rounds: usize,
    /// Rounds whose placement changed between amrq's side and the peer's: left out,
    /// unless every round did (then all are kept, and `mixed`).
    pub straddled: usize,
    /// Every round straddled a placement change: the ratio mixes placements.
    pub mixed: bool,
    /// The ratios per placement, when the rounds saw more than one.
    pub by_placement: Vec<Placed>,
}

/// The ratios of a metric at one placement of the cores.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    /// The raw cache-line round trips of this placement's rounds, ns (min, max).
    pub raw_rtt_ns: (f64, f64),
    /// amrq's speed-up at this placement.
    pub speedup: Figure,
    /// Rounds at this placement.
    pub rounds: usize,
}

fn value(v: &[(String, f64)], key: &str) -> Option<f64> {
    v.iter()
        .find(|(k, _)| k == key)
        .map(|&(_, x)| x)
        .filter(|x| x.is_finite())
}

/// Metric `key` of a comparison that ran: each side's median and the median of the
/// per-round ratios (`None` if the peer did not run or has no test for it). A round
/// whose placement probes straddle a change gives no ratio.
///
/// ```
/// use amrq_bench::peers::{table::row, Comparison, Round, Status};
/// let round = |a: f64, p: f64, before: f64, after: f64| Round {
///     amrq: vec![("rtt_ns".into(), a)],
///     peer: vec![("rtt_ns".into(), p)],
///     files: vec![],
///     placements: vec![("rtt_ns".into(), before, after)],
/// };
/// let c = Comparison {
///     name: "X".into(),
///     status: Status::Ran,
///     how: String::new(),
///     notes: vec![],
///     expects: vec!["rtt_ns".into()],
///     rounds: vec![
///         round(100.0, 300.0, 50.0, 52.0),
///         round(500.0, 1000.0, 600.0, 590.0), // both sides slower: the cores moved apart
///         round(150.0, 420.0, 50.0, 51.0),
///         round(100.0, 900.0, 50.0, 600.0), // the cores moved mid-way: left out
///     ],
///     failed_files: vec![],
/// };
/// let r = row(&c, "rtt_ns").unwrap();
/// assert_eq!((r.rounds, r.straddled), (3, 1));
/// assert_eq!((r.speedup.median, r.speedup.min, r.speedup.max), (2.8, 2.0, 3.0));
/// assert_eq!(r.by_placement.len(), 2);
/// assert_eq!(r.by_placement[0].raw_rtt_ns, (50.0, 50.0));
/// assert_eq!(r.by_placement[0].speedup.median, 2.9);
/// assert_eq!(r.by_placement[1].speedup.median, 2.0);
/// ```
pub fn row(c: &Comparison, key: &str) -> Option<Row> {
    if c.status != Status::Ran {
        return None;
    }
    // (amrq, peer, placement probed before, straddled) per round with both sides.
    let pairs: Vec<(f64, f64, f64, bool)> = c
        .rounds
        .iter()
        .filter_map(|round| {
            let x = value(&round.amrq, key)?;
            let y = value(&round.peer, key)?;
            let (before, after) = round
                .placements
                .iter()
                .find(|(k, _, _)| k == key)
                .map_or((f64::NAN, f64::NAN), |&(_, b, a)| (b, a));
            Some((x, y, before, placement::straddled(before, after)))
        })
        .collect();
    let straddled = pairs.iter().filter(|q| q.3).count();
    // If every round straddled a change, the ratio mixes placements: given, and said.
    let every = straddled == pairs.len();
    let kept = pairs.iter().filter(|q| every || !q.3);
    let (mut a, mut p, mut r, mut at) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &(x, y, before, _) in kept {
        a.push(x);
        p.push(y);
        r.push(speedup(key, x, y));
        at.push(before);
    }
    if r.is_empty() {
        return None;
    }
    let classes = placement::classes(&at);
    let by_placement = if classes.len() > 1 && !every {
        classes
            .iter()
            .map(|&(lo, hi)| {
                let mut v: Vec<f64> = r
                    .iter()
                    .zip(&at)
                    .filter(|(_, &x)| x >= lo && x <= hi)
                    .map(|(&q, _)| q)
                    .collect();
                Placed {
                    raw_rtt_ns: (lo, hi),
                    rounds: v.len(),
                    speedup: Figure::of(key, &mut v),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    Some(Row {
        rounds: r.len(),
        straddled,
        mixed: every,
        by_placement,
        amrq: Figure::of(key, &mut a),
        peer: Figure::of(key, &mut p),
        speedup: Figure::of(key, &mut r),
    })
}

/// Why a comparison that ran has no row for `key`: the peer has no test for it, or
/// (a peer that ran has every figure it has a test for) amrq gave none.
fn absent(c: &Comparison, key: &str) -> &'static str {
    if c.expects.iter().any(|k| k == key) {
        "no figure from amrq"
    } else {
        "no test"
    }
}

/// `~150 ns: 1.70× (3), ~560 ns: 1.45× (2)`, and the rounds left out.
fn placements(r: &Row) -> String {
    let mut parts: Vec<String> = r
        .by_placement
        .iter()
        .map(|p| {
            let n = (p.raw_rtt_ns.0 + p.raw_rtt_ns.1) / 2.0;
            format!("~{n:.0} ns: {}× ({})", plain(p.speedup.median), p.rounds)
        })
        .collect();
    if r.mixed {
        parts.push("every round straddled a placement change: the ratio mixes placements".into());
    } else if r.straddled > 0 {
        parts.push(format!(
            "{} straddled a placement change, left out",
            r.straddled
        ));
    }
    parts.join(", ")
}

/// amrq's figure for `key` over all its runs.
fn amrq_figure(p: &Peers, key: &str) -> Option<Figure> {
    let mut v: Vec<f64> = p.amrq.iter().filter_map(|r| value(r, key)).collect();
    (!v.is_empty()).then(|| Figure::of(format!("amrq_{key}"), &mut v))
}

/// The peers as an outcome: `amrq_<metric>` (all of amrq's runs), `<peer>_<metric>`
/// and `<peer>_<metric>_speedup` (the median of the per-round ratios, spread in
/// min/max); missing and failed peers in the notes.
pub fn table(p: &Peers, timer_ns: f64) -> Outcome {
    let mut o = Outcome::new("peers", 2, timer_ns);
    for (key, _, _) in METRICS {
        o.figures.extend(amrq_figure(p, key));
    }
    for c in &p.comparisons {
        let t = tag(&c.name);
        match &c.status {
            Status::Missing(why) => o.notes.push(format!("{}: missing: {why}", c.name)),
            Status::Failed { round, why, unread } => o.notes.push(format!(
                "{}: FAILED in round {round}: {why}; lines it could not read: {}",
                c.name,
                unread.join(" | ")
            )),
            Status::Ran => {
                for (key, _, _) in METRICS {
                    match row(c, key) {
                        Some(r) => {
                            o.figures.push(Figure {
                                key: format!("{t}_{key}"),
                                ..r.peer
                            });
                            o.figures.push(Figure {
                                key: format!("{t}_{key}_speedup"),
                                ..r.speedup
                            });
                        }
                        None => o
                            .notes
                            .push(format!("{}: {key}: {}", c.name, absent(c, key))),
                    }
                }
                o.notes
                    .push(format!("{}: {} rounds, {}", c.name, c.rounds.len(), c.how));
                o.notes
                    .extend(c.notes.iter().map(|n| format!("{}: {n}", c.name)));
            }
        }
    }
    o
}

/// `×` ratio with its spread: `2.41× [2.20 … 2.63]`.
fn ratio(f: &Figure) -> String {
    format!("{}× [{} … {}]", plain(f.median), plain(f.min), plain(f.max))
}

/// The words above every table.
fn preface(p: &Peers) -> String {
    format!(
        "amrq and its peers: {} rounds, amrq measuring the same metrics just before each test of every peer; a speed-up is the median of the per-round ratios [min … max] (peer time / amrq time, or amrq rate / peer rate; above 1: amrq faster)",
        p.rounds
    )
}

/// The table for stdout: a block per peer.
pub fn text(p: &Peers) -> String {
    let mut s = preface(p) + "\n";
    for c in &p.comparisons {
        match &c.status {
            Status::Missing(why) => {
                let _ = writeln!(s, "\n{}: missing: {why}", c.name);
            }
            Status::Failed { round, why, unread } => {
                let _ = writeln!(s, "\n{}: FAILED in round {round}: {why}", c.name);
                let _ = writeln!(s, "  lines it could not read:");
                for l in unread {
                    let _ = writeln!(s, "    {l}");
                }
                for f in &c.failed_files {
                    let _ = writeln!(s, "  raw output: {f}");
                }
            }
            Status::Ran => {
                let _ = writeln!(s, "\n{} ({} rounds)", c.name, c.rounds.len());
                let _ = writeln!(
                    s,
                    "  {:<36} {:>12} {:>12}  speed-up",
                    "metric", "amrq", c.name
                );
                for (key, label, _) in METRICS {
                    let Some(r) = row(c, key) else {
                        let _ = writeln!(s, "  {label:<36} {:>12} {:>12}", "", absent(c, key));
                        continue;
                    };
                    let _ = writeln!(
                        s,
                        "  {label:<36} {:>12} {:>12}  {}",
                        plain(r.amrq.median),
                        plain(r.peer.median),
                        ratio(&r.speedup)
                    );
                    let at = placements(&r);
                    if !at.is_empty() {
                        let _ = writeln!(s, "  {:<36} by placement (raw round trip): {at}", "");
                    }
                }
            }
        }
    }
    s
}

/// The report's section: a table per peer, how it ran, and links to its raw output.
pub fn markdown(p: &Peers) -> String {
    let mut s = preface(p)
        + ". The raw cache-line round trip between the two cores is probed before amrq's side of each pair and after the peer's: a pair whose probes differ by more than 1.5× straddled a placement change of the VM and gives no ratio; where the rounds saw more than one placement, the speed-up at each is given too (a software-bound peer's figure moves less with the placement than amrq's, so the ratio depends on it).\n";
    for c in &p.comparisons {
        let _ = writeln!(s, "\n### {}\n", c.name);
        match &c.status {
            Status::Missing(why) => {
                let _ = writeln!(s, "Missing: {why}.");
            }
            Status::Failed { round, why, unread } => {
                let _ = writeln!(
                    s,
                    "**Failed** in round {round}: {why}. Lines it could not read:\n\n```\n{}\n```",
                    unread.join("\n")
                );
                let links: Vec<String> = c
                    .failed_files
                    .iter()
                    .map(|f| format!("[{f}]({f})"))
                    .collect();
                let _ = writeln!(s, "\nRaw output: {}.", links.join(", "));
            }
            Status::Ran => {
                let _ = writeln!(
                    s,
                    "| metric | amrq | {} | speed-up (median of {} rounds) | spread (min … max) | by placement (raw cache-line round trip: speed-up, rounds) |\n|---|---|---|---|---|---|",
                    c.name,
                    c.rounds.len()
                );
                for (key, label, _) in METRICS {
                    let _ = match row(c, key) {
                        Some(r) => writeln!(
                            s,
                            "| {label} | {} | {} | {}× | {} … {} | {} |",
                            plain(r.amrq.median),
                            plain(r.peer.median),
                            plain(r.speedup.median),
                            plain(r.speedup.min),
                            plain(r.speedup.max),
                            placements(&r)
                        ),
                        None => writeln!(s, "| {label} | | {} | | | |", absent(c, key)),
                    };
                }
                let _ = writeln!(s, "\nHow it ran: {}.", c.how);
                for n in &c.notes {
                    let _ = writeln!(s, "{n}.");
                }
                let links: Vec<String> = c
                    .rounds
                    .iter()
                    .enumerate()
                    .flat_map(|(i, r)| {
                        r.files.iter().map(move |f| {
                            let name = f.rsplit('/').next().unwrap_or(f);
                            format!("[round {}: {name}]({f})", i + 1)
                        })
                    })
                    .collect();
                if !links.is_empty() {
                    let _ = writeln!(s, "\nRaw output: {}.", links.join(", "));
                }
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::Round;

    fn comparison(rounds: Vec<Round>) -> Comparison {
        Comparison {
            name: "X".into(),
            status: Status::Ran,
            how: String::new(),
            notes: vec![],
            expects: vec!["rtt_ns".into()],
            rounds,
            failed_files: vec![],
        }
    }

    fn round(a: f64, p: f64, before: f64, after: f64) -> Round {
        Round {
            amrq: vec![("rtt_ns".into(), a)],
            peer: vec![("rtt_ns".into(), p)],
            files: vec![],
            placements: vec![("rtt_ns".into(), before, after)],
        }
    }

    /// If every round straddled a placement change, the figures are still given,
    /// and the text says the ratio mixes placements.
    #[test]
    fn a_metric_whose_every_round_straddled_is_given_and_said() {
        let c = comparison(vec![
            round(100.0, 300.0, 50.0, 600.0),
            round(500.0, 600.0, 600.0, 50.0),
        ]);
        let r = row(&c, "rtt_ns").expect("a row");
        assert_eq!((r.rounds, r.straddled, r.mixed), (2, 2, true));
        assert_eq!(r.peer.median, 450.0);
        assert!(placements(&r).contains("every round straddled"));
        let t = text(&Peers {
            rounds: 2,
            amrq: vec![],
            comparisons: vec![c],
        });
        assert!(t.contains("every round straddled"), "{t}");
    }

    /// One round of two straddled: left out, and said so (not "every round").
    #[test]
    fn a_straddled_round_is_left_out_and_counted() {
        let c = comparison(vec![
            round(100.0, 300.0, 50.0, 52.0),
            round(100.0, 900.0, 50.0, 600.0),
        ]);
        let r = row(&c, "rtt_ns").expect("a row");
        assert_eq!((r.rounds, r.straddled, r.mixed), (1, 1, false));
        assert_eq!(r.speedup.median, 3.0);
        assert_eq!(placements(&r), "1 straddled a placement change, left out");
    }

    /// A failed peer has no row, even with rounds before its failure.
    #[test]
    fn a_failed_peer_has_no_row() {
        let mut c = comparison(vec![round(100.0, 300.0, 50.0, 50.0)]);
        c.status = Status::Failed {
            round: 2,
            why: "no figure".into(),
            unread: vec!["x".into()],
        };
        assert!(row(&c, "rtt_ns").is_none());
        let o = table(
            &Peers {
                rounds: 2,
                amrq: vec![],
                comparisons: vec![c],
            },
            1.0,
        );
        assert!(o.figures.is_empty());
        assert!(
            o.notes[0].contains("FAILED in round 2: no figure"),
            "{:?}",
            o.notes
        );
    }
}
