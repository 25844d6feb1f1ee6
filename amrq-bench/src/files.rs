//! The files of a report (`amrq-bench all --out DIR`): `results.json` (everything),
//! `results.csv` (every figure and data point, one per row), `summary.md` (tables
//! shaped like the paper's) and `plots/*.svg`.

use crate::peers::table::row;
use crate::peers::{Status, METRICS};
use crate::plots::Chart;
use crate::report::{Outcome, Point};
use crate::results::Results;
use crate::summary::plain;
use std::fmt::Write as _;
use std::path::Path;

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes every file of the report into `out`.
pub fn write_report(r: &Results, out: &Path) -> Result<(), String> {
    let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    write(&out.join("results.json"), &json)?;
    write(&out.join("results.csv"), &csv(r))?;
    write(&out.join("summary.md"), &markdown(r))?;
    for chart in charts(r) {
        chart.write(&out.join("plots"))?;
    }
    Ok(())
}

/// One row per figure and per data point:
/// `benchmark,series,key_or_x,median,min,max`.
pub fn csv(r: &Results) -> String {
    csv_of(r.outcomes.iter().chain([&r.table]))
}

/// [`csv`] of any outcomes (`amrq-apps` writes its report with it too).
///
/// ```
/// use amrq_bench::report::{Figure, Outcome};
/// let mut o = Outcome::new("transpose", 2, 0.0);
/// o.figures.push(Figure::single("am_mb_s", 1.5));
/// let text = amrq_bench::files::csv_of([&o]);
/// assert!(text.lines().nth(1) == Some("transpose,,am_mb_s,1.5,1.5,1.5"));
/// ```
pub fn csv_of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> String {
    let mut s = String::from("benchmark,series,key_or_x,median,min,max\n");
    let quote = |t: &str| format!("\"{}\"", t.replace('"', "\"\""));
    for o in outcomes {
        for f in &o.figures {
            let _ = writeln!(s, "{},,{},{},{},{}", o.name, f.key, f.median, f.min, f.max);
        }
        for se in &o.series {
            for p in &se.points {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{}",
                    o.name,
                    quote(&se.name),
                    p.x,
                    p.median,
                    p.min,
                    p.max
                );
            }
        }
    }
    s
}

/// A figure for a table: "–" when there is none (or it is not a number).
pub(crate) fn show(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or("–".into(), |v| {
        if v.abs() >= 100.0 {
            format!("{v:.0}")
        } else {
            plain(v)
        }
    })
}

/// What `amrq-bench all` prints last, for a person at a terminal: amrq against its
/// floors and each peer's speed-ups (a missing peer's reason is above it), each on one
/// line.
pub fn headline(r: &Results) -> String {
    let mut s = String::from(
        "amrq on this host (medians; each floor is the fastest raw design of the same run):\n",
    );
    let floor_of = |name: &str| {
        r.outcome(name)?
            .notes
            .iter()
            .find_map(|n| n.strip_prefix("raw floor: "))
            .and_then(|n| n.split(' ').next())
    };
    let num = |v: Option<f64>, scale: f64| v.map_or("–".into(), |v| format!("{:.1}", v / scale));
    let rows = [
        (
            "Short AM round trip",
            "round-trip",
            "round_trip_ns",
            "raw_rtt_ns",
            1.0,
            "ns",
        ),
        (
            "messages/s one-to-one",
            "one-to-one",
            "msgs_per_s",
            "raw_msgs_per_s",
            1e6,
            "M",
        ),
    ];
    for (label, name, key, raw, scale, unit) in rows {
        let _ = writeln!(
            s,
            "  {label:<22} {:>6} {unit:<2}  floor {:>6} {unit:<2} ({}): ratio {}",
            num(r.figure(name, key), scale),
            num(r.figure(name, raw), scale),
            floor_of(name).unwrap_or("none"),
            show(r.figure(name, "ratio"))
        );
    }
    let _ = writeln!(
        s,
        "  calls against the same exchange by hand: round trip ratio {}, 64 in flight ratio {}",
        show(r.figure("calls", "rtt_ratio")),
        show(r.figure("calls", "window_ratio"))
    );
    let short = |key: &str| match key {
        "rtt_ns" => "round trip",
        "msgs_per_s" => "msgs/s",
        "bw_64k_mb_s" => "64 KiB bw",
        "bw_1m_mb_s" => "1 MiB bw",
        "put_64k_mb_s" => "64 KiB put",
        _ => "barrier",
    };
    for c in &r.peers.comparisons {
        let text = match &c.status {
            Status::Missing(_) => "missing (said above)".to_string(),
            Status::Failed { round, .. } => format!("FAILED in round {round} (said above)"),
            Status::Ran => METRICS
                .iter()
                .filter_map(|(k, _, _)| {
                    let v = row(c, k)?;
                    Some(format!("{} {:.1}×", short(k), v.speedup.median))
                })
                .collect::<Vec<_>>()
                .join(", "),
        };
        let _ = writeln!(s, "  speed-up over {:<9} {text}", c.name);
    }
    let _ = writeln!(s, "  {}", crate::shapes::line(&crate::shapes::shapes(r)));
    s
}

/// The Markdown summary.
pub fn markdown(r: &Results) -> String {
    let m = &r.machine;
    let mut s = String::new();
    let _ = writeln!(s, "# amrq-bench report\n");
    let run = if r.quick { "quick (`--quick`)" } else { "full" };
    let _ = writeln!(s, "{}\n", m.line(run));
    s += "Every figure is the median of repeated timed batches (spread in `results.json` and \
`results.csv`), with the cost of reading the clock subtracted. Ranks are processes of this host \
on shared memory, pinned one per core when they fit; a benchmark with more ranks than cores says \
so in its notes. Times are ns, bandwidths MB/s (10⁶ B/s).\n\n";

    s += "## Headline\n\n| figure | amrq | reference | ratio |\n|---|---|---|---|\n";
    let _ = writeln!(
        s,
        "| Short AM round trip / raw cache-line round trip, the fastest design (ns) | {} | {} | {} |",
        show(r.figure("round-trip", "round_trip_ns")),
        show(r.figure("round-trip", "raw_rtt_ns")),
        show(r.figure("round-trip", "ratio"))
    );
    let _ = writeln!(
        s,
        "| messages/s one-to-one / raw one-way stream, the faster design (SPSC ring, no handler) | {} | {} | {} |",
        show(r.figure("one-to-one", "msgs_per_s")),
        show(r.figure("one-to-one", "raw_msgs_per_s")),
        show(r.figure("one-to-one", "ratio"))
    );
    let big = |name: &str| -> Option<f64> {
        let p = r
            .series("array", name)?
            .iter()
            .rfind(|p| p.x <= 1048576.0)?;
        Some(p.x * 1e3 / p.median)
    };
    let _ = writeln!(
        s,
        "| put bandwidth / memcpy, ≥ 64 KiB (MB/s at the largest size) | {} | {} | {} |",
        show(big("put, double-word")),
        show(big("memcpy (reference)")),
        show(r.figure("array", "put_vs_memcpy"))
    );
    for c in &r.peers.comparisons {
        let ups: Vec<String> = METRICS
            .iter()
            .filter_map(|(k, label, _)| {
                let v = row(c, k)?;
                Some(format!("{label}: {}×", plain(v.speedup.median)))
            })
            .collect();
        let text = match &c.status {
            Status::Missing(why) => format!("missing ({why})"),
            Status::Failed { round, why, .. } => format!("**failed** in round {round}: {why}"),
            Status::Ran => ups.join("; "),
        };
        let _ = writeln!(s, "| amrq speed-up over {} | | | {text} |", c.name);
    }

    // Which raw design was the floor, and every design's median, under the table.
    if let Some(o) = r.outcome("round-trip") {
        let designs: Vec<String> = crate::reference::Design::ALL
            .iter()
            .filter_map(|d| {
                let v = r.figure("round-trip", &format!("raw_{}_ns", d.key()))?;
                Some(format!("{} {} ns", d.key(), plain(v)))
            })
            .collect();
        if !designs.is_empty() {
            let _ = writeln!(
                s,
                "\nThe raw round trip's designs, median each: {}.",
                designs.join(", ")
            );
        }
        for n in o.notes.iter().filter(|n| n.starts_with("raw floor")) {
            let _ = writeln!(s, "The round trip's {n}.");
        }
    }
    for n in r.outcome("one-to-one").map_or(&[][..], |o| &o.notes[..]) {
        if n.starts_with("raw floor") {
            let _ = writeln!(s, "The stream's {n}.");
        }
    }
    s += &crate::shapes::markdown(&crate::shapes::shapes(r));

    s += "\n## amrq and its peers (same machine, same run, alternating)\n\n";
    s += &crate::peers::markdown(&r.peers);

    s += "\n## Unloaded network (Liu & Culler §5.1.1, Table 1)\n\n| benchmark | ns per message |\n|---|---|\n";
    for (name, key, what) in [
        ("one-to-one", "ns_per_msg", "one-to-one"),
        ("one-to-two", "send_ns", "one-to-two (send overhead)"),
        (
            "two-to-one",
            "receive_ns",
            "two-to-one (receive overhead, rings filled first)",
        ),
        (
            "two-to-one",
            "receive_live_ns",
            "two-to-one (receiver timed while both send)",
        ),
        (
            "two-to-one",
            "reply_send_ns",
            "reply, send overhead (a drain whose handlers reply, less one whose do not)",
        ),
        (
            "one-to-one",
            "pair_ns_per_msg",
            "request-reply pairs in bursts of 1024 (per pair)",
        ),
        ("round-trip", "round_trip_ns", "round-trip"),
    ] {
        // A benchmark whose ranks outnumber the cores times time-sharing as much as
        // messaging: its label says so.
        let shared = r
            .outcome(name)
            .filter(|o| o.ranks > o.cores)
            .map_or(String::new(), |o| {
                format!("; {} ranks on {} cores: oversubscribed", o.ranks, o.cores)
            });
        let what = match what.strip_suffix(')') {
            Some(open) if !shared.is_empty() => format!("{open}{shared})"),
            _ if !shared.is_empty() => format!("{what} ({})", &shared[2..]),
            _ => what.to_string(),
        };
        let _ = writeln!(s, "| {what} | {} |", show(r.figure(name, key)));
    }
    if let Some(o) = r.outcome("round-trip-ranks") {
        s += "\nRound trip from rank 0 per destination: ";
        let pts: Vec<String> = o
            .series
            .iter()
            .flat_map(|se| &se.points)
            .map(|p| format!("rank {} {} ns", p.x, show(Some(p.median))))
            .collect();
        s += &pts.join(", ");
        s += "\n";
    }

    s += "\n## Loaded network (§5.1.2, §5.2.2, Figures 3 and 4)\n\n| benchmark | ns per message | with a poll after each send (Figure 4) | array bandwidth (MB/s) |\n|---|---|---|---|\n";
    let _ = writeln!(
        s,
        "| ring | {} | | {} |",
        show(r.figure("ring", "ns_per_msg")),
        show(r.figure("ring", "bandwidth_mb_s"))
    );
    for (at, what) in [
        ("self", "traverse, step 0 (each rank with itself)"),
        ("pair", "traverse, steps with a partner (median over them)"),
    ] {
        let _ = writeln!(
            s,
            "| {what} | {} | {} | {} |",
            show(r.figure("traverse", &format!("{at}_ns_per_msg"))),
            show(r.figure("traverse", &format!("{at}_polled_ns_per_msg"))),
            show(r.figure("traverse", &format!("{at}_bandwidth_mb_s")))
        );
    }

    s += "\n## Array transfer (§5.2.1, Table 5)\n\nLong Active Messages (put: one-sided; memcpy: one core, the reference); `T = c + x/B` fitted by least squares over 2 B … 64 KiB as in the paper; larger sizes are in the plots and `results.csv`.\n\n";
    s += "| benchmark | alignment | 4 words (ns) | start-up c (ns) | bandwidth B (MB/s) |\n|---|---|---|---|---|\n";
    for name in ["array", "array-two-to-one"] {
        let Some(o) = r.outcome(name) else { continue };
        for se in &o.series {
            let (bench, align) = se.name.rsplit_once(", ").unwrap_or((&se.name, ""));
            let (four, c, mb_s) = crate::array::table5_row(&se.points);
            let _ = writeln!(
                s,
                "| {bench} | {align} | {} | {} | {} |",
                show(Some(four)),
                show(Some(c)),
                show(Some(mb_s))
            );
        }
    }

    s += "\n## Polling (§6.1, Table 9)\n\n| poll | ns per unsuccessful poll |\n|---|---|\n";
    if let Some(o) = r.outcome("polling") {
        for f in o.figures.iter().filter(|f| f.key != "successful_poll_ns") {
            let _ = writeln!(
                s,
                "| `{}` | {} |",
                f.key.trim_end_matches("_ns"),
                show(Some(f.median))
            );
        }
        let _ = writeln!(
            s,
            "\nSuccessful poll (Figure 6: where the time per message meets the time per poll, one message per poll; it includes the wait for each message to cross between the cores): {} ns",
            show(o.get("successful_poll_ns").map(|f| f.median))
        );
    }

    s += "\n## Interrupts (§6.2, Table 10 and Figure 7)\n\n| figure | ns |\n|---|---|\n";
    for (key, what) in [
        ("hold_ns", "hold + release (interrupts off and on again)"),
        (
            "hold_alone_ns",
            "hold on an open section (the instructions of entering one: `hold` does not read its flag)",
        ),
        (
            "release_alone_ns",
            "release alone (interrupts on: the pair less hold alone)",
        ),
        (
            "deferred_handler_ns",
            "release → end of the handler it deferred",
        ),
        (
            "interrupt_overhead_ns",
            "receive overhead per message, Interrupt mode, shortest interval",
        ),
        (
            "poll_overhead_ns",
            "receive overhead per message, Poll mode, shortest interval",
        ),
        (
            "interrupt_plateau_ns",
            "one interrupt's cost: the plateau (intervals ≥ 50 µs), Figure 7's model min(interval, this)",
        ),
    ] {
        let _ = writeln!(s, "| {what} | {} |", show(r.figure("interrupts", key)));
    }

    s += "\n## Message mechanisms (StarT-Voyager §5, Figures 5, 7 and 8)\n\n| mechanism | send overhead (ns) | receive overhead (ns) | one-way (ns) | bandwidth (MB/s at payload bytes) |\n|---|---|---|---|---|\n";
    for (key, what) in [
        ("express", "Express (one word)"),
        ("basic", "Basic (64 B in ring slots)"),
        ("tag_on", "Tag-On (64 B in a pool block)"),
        ("dma", "DMA (a 64 B put, then a completion frame)"),
    ] {
        let at = |what: &str| show(r.figure("mechanisms", &format!("{key}_{what}_ns")));
        let bw: Vec<String> = r
            .series("mechanisms", &format!("{key} stream"))
            .unwrap_or_default()
            .iter()
            .map(|p| format!("{} at {}", show(Some(p.median)), plain(p.x)))
            .collect();
        let _ = writeln!(
            s,
            "| {what} | {} | {} | {} | {} |",
            at("send"),
            at("receive"),
            at("one_way"),
            bw.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "\nShort Active Message one-way, same batches (Remote Queues Figure 4): {} ns; a 64-byte put alone (Table 2's send part without its completion): {} ns.",
        show(r.figure("mechanisms", "am_one_way_ns")),
        show(r.figure("mechanisms", "put_ns"))
    );

    s += "\n## Calls against the same exchange by hand (`amrq-bench calls`)\n\nA call's pending answer (`am.call(1, count, ()).wait()`) against a request whose reply handler stores the answer in a window array the program reads; both deliver every answer. Ratios per batch, the call over the hand-written exchange of the same batch.\n\n| timed | call (ns) | by hand (ns) | ratio |\n|---|---|---|---|\n";
    for (what, call, hand, ratio) in [
        (
            "round trip, one at a time",
            "call_rtt_ns",
            "handwritten_rtt_ns",
            "rtt_ratio",
        ),
        (
            "per exchange, 64 in flight",
            "call_window_ns_per_msg",
            "handwritten_window_ns_per_msg",
            "window_ratio",
        ),
    ] {
        let f = |key: &str| show(r.figure("calls", key));
        let _ = writeln!(s, "| {what} | {} | {} | {} |", f(call), f(hand), f(ratio));
    }

    s += "\n## Threads of one rank sending (`amrq-bench sending-threads`)\n\nT threads of rank 1 sending one-word requests to rank 0 through their `Sender`s, against T single-threaded ranks sending the same from their own threads; the rate is timed at rank 0, the per-send time by each sender over its own sends. Ratios per batch.\n\n| senders | threads (requests/s) | ranks (requests/s) | threads / ranks | thread's ns per send | rank's ns per send |\n|---|---|---|---|---|---|\n";
    if let Some(o) = r.outcome("sending-threads") {
        let ts = o
            .series
            .first()
            .map(|c| c.points.iter().map(|p| p.x as usize).collect::<Vec<_>>());
        for t in ts.unwrap_or_default() {
            let f = |key: String| show(r.figure("sending-threads", &key));
            let _ = writeln!(
                s,
                "| {t} | {} | {} | {} | {} | {} |",
                f(format!("threads_{t}_msgs_per_s")),
                f(format!("ranks_{t}_msgs_per_s")),
                f(format!("threads_over_ranks_{t}")),
                f(format!("threads_{t}_ns_per_send")),
                f(format!("ranks_{t}_ns_per_send")),
            );
        }
        let _ = writeln!(
            s,
            "\nA second sending thread's per-send time over the first's (same batch): {}.",
            show(r.figure("sending-threads", "second_thread_cost_ratio"))
        );
    }

    s += "\n## LogP signature (Begel et al. §6.1)\n\n| o_s | o_r | g | L | round trip |\n|---|---|---|---|---|\n";
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} | {} |",
        show(r.figure("signature", "o_s_ns")),
        show(r.figure("signature", "o_r_ns")),
        show(r.figure("signature", "g_ns")),
        show(r.figure("signature", "l_ns")),
        show(r.figure("signature", "rtt_ns"))
    );
    // How the parameters were derived, and whether the model fits, as the job said.
    for n in r.outcome("signature").map_or(&[][..], |o| &o.notes[..]) {
        let _ = writeln!(s, "\n{n}.");
    }

    s += "\n## One-way time and streaming (Begel et al. §6.1, Figure 6-1)\n\n| bytes | one-way (ns) | streaming (MB/s) |\n|---|---|---|\n";
    if let Some(o) = r.outcome("stream") {
        let series = |i: usize| o.series.get(i).map(|s| s.points.as_slice()).unwrap_or(&[]);
        for p in series(0) {
            let bw = series(1).iter().find(|q| q.x == p.x).map(|q| q.median);
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                plain(p.x),
                show(Some(p.median)),
                show(bw)
            );
        }
    }

    s += "\n## Split-C micro-benchmarks (Begel et al. Figure 6-3; 4-byte int)\n\n\
ns per operation, 2 ranks; direct path: copies into mapped segments; message path: AM \
frames served by the owner. get and put are issued back to back and completed by one \
`sync`; stores are counted by the target. Two-way: both ranks at once.\n\n";
    s += "| operation | direct, one-way | direct, two-way | frames, one-way | frames, two-way |\n|---|---|---|---|---|\n";
    for op in ["read", "write", "get", "put", "store"] {
        let at =
            |path: &str, way: &str| show(r.figure("splitc", &format!("{path}_{op}_{way}_way_ns")));
        let _ = writeln!(
            s,
            "| {op} | {} | {} | {} | {} |",
            at("direct", "one"),
            at("direct", "two"),
            at("frames", "one"),
            at("frames", "two")
        );
    }
    let _ = writeln!(
        s,
        "\nMessage path, one-way: store / put = {} (the paper: about 0.5, no reply); bulk forms from 4 B to 4 KiB in the plots.",
        show(r.figure("splitc", "store_over_put"))
    );
    let _ = writeln!(
        s,
        "Direct path: a read of an int its owner has just written (a ping-pong of reads) {} ns, against the raw cache-line round trip {} ns of the same run: {}× (goal ≤ 1.2×); 10,000 stores then `all_store_sync`: {} stores/s (goal ≥ 50 M).",
        show(r.figure("splitc", "read_rtt_ns")),
        show(r.figure("splitc", "raw_rtt_ns")),
        show(r.figure("splitc", "read_rtt_ratio")),
        show(r.figure("splitc", "stores_10k_per_s"))
    );

    matmul_section(&mut s, r);

    s += "\n## Plots\n\n";
    for c in charts(r) {
        let _ = writeln!(s, "- {}: [SVG](plots/{f}.svg)", c.title, f = c.file);
    }

    s += "\n## Every figure\n\n";
    for o in &r.outcomes {
        let _ = writeln!(
            s,
            "**{}** ({} ranks, timer {} ns): {}",
            o.name,
            o.ranks,
            plain(o.timer_ns),
            o.figures
                .iter()
                .map(|f| format!(
                    "`{}` {} [{} … {}]",
                    f.key,
                    plain(f.median),
                    plain(f.min),
                    plain(f.max)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for n in &o.notes {
            let _ = writeln!(s, "- note: {n}");
        }
        s += "\n";
    }
    s
}

/// Short names of [`METRICS`], for the peers chart.
const PEER_LABELS: [&str; 6] = [
    "round trip",
    "msgs/s",
    "bw 64 KiB",
    "bw 1 MiB",
    "put 64 KiB",
    "barrier",
];
const _: () = assert!(PEER_LABELS.len() == METRICS.len());

/// The matrix multiply's section: efficiency per m on both paths, measured and
/// modelled, the column costs the model took, and the crossovers.
fn matmul_section(s: &mut String, r: &Results) {
    *s += "\n## Matrix multiply (AM paper §2.3, Figures 4–6)\n\n\
C = A·B, N = 128, m columns of B and C per rank, R·m constant, 2 ranks; efficiency: the \
kernel alone's time over the multiply's, per batch (split-phase gets overlapping the \
DAXPYs, or a blocking read per column); model: `analysis::matmul_model` fed with the \
column get's costs measured in the same run.\n\n";
    *s += "| m | direct | direct, blocking | direct, model | frames | frames, blocking | frames, model | frames network use (model) |\n|---|---|---|---|---|---|---|---|\n";
    let Some(o) = r.outcome("matmul") else {
        return;
    };
    let curve = |name: &str| o.series.iter().find(|c| c.name == name);
    let at = |name: &str, x: f64| {
        curve(name).and_then(|c| c.points.iter().find(|p| p.x == x).map(|p| p.median))
    };
    let ms = curve("efficiency, split-phase, direct path").map_or(&[][..], |c| &c.points[..]);
    for x in ms.iter().map(|p| p.x) {
        let row: Vec<String> = [
            "efficiency, split-phase, direct path",
            "efficiency, blocking, direct path",
            "model, split-phase, direct path",
            "efficiency, split-phase, frames path",
            "efficiency, blocking, frames path",
            "model, split-phase, frames path",
        ]
        .iter()
        .map(|n| show(at(n, x)))
        .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} ({}) |",
            plain(x),
            row.join(" | "),
            show(at("network use, frames path", x)),
            show(at("network use, model, frames path", x))
        );
    }
    let f = |k: &str| show(o.get(k).map(|f| f.median));
    for path in ["direct", "frames"] {
        let _ = writeln!(
            s,
            "\n{path} path: a column get (1 KiB) takes {} ns unloaded, {} ns with both ranks getting; gap {} ns, processor overhead {} ns per column. Crossover (efficiency ≥ 0.9): m = {} measured, m = {} modelled.",
            f(&format!("{path}_column_unloaded_latency_ns")),
            f(&format!("{path}_column_latency_ns")),
            f(&format!("{path}_column_gap_ns")),
            f(&format!("{path}_column_overhead_ns")),
            f(&format!("{path}_crossover_m")),
            f(&format!("{path}_model_crossover_m")),
        );
    }
}

/// The charts of a report.
pub fn charts(r: &Results) -> Vec<Chart<'static>> {
    let curves = |name: &str,
                  filter: &dyn Fn(&str) -> bool,
                  f: &dyn Fn(f64, f64) -> f64|
     -> Vec<(String, Vec<Point>)> {
        r.outcome(name)
            .map(|o| {
                o.series
                    .iter()
                    .filter(|s| filter(&s.name))
                    .map(|s| (s.name.clone(), s.points.iter().map(|p| p.map(f)).collect()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let id = |_: f64, y: f64| y;
    let dw = |n: &str| n.ends_with("double-word") || n.starts_with("memcpy");
    let mut array = curves("array", &dw, &id);
    array.extend(curves("array-two-to-one", &dw, &id));
    let mut bw = curves("array", &dw, &|x, y| x * 1e3 / y);
    bw.extend(curves("array-two-to-one", &dw, &|x, y| x * 1e3 / y));
    let mut steps = curves("traverse", &|n| n.contains("Short"), &id);
    if let Some(ring) = r.outcome("ring").and_then(|o| o.get("ns_per_msg")) {
        let xs: Vec<f64> = steps
            .first()
            .map(|(_, p)| p.iter().map(|p| p.x).collect())
            .unwrap_or_default();
        let at = |x| Point {
            x,
            median: ring.median,
            min: ring.min,
            max: ring.max,
        };
        steps.push(("ring".into(), xs.into_iter().map(at).collect()));
    }
    let peers: Vec<(String, Vec<Point>)> = r
        .peers
        .comparisons
        .iter()
        .filter(|c| c.status == Status::Ran)
        .map(|c| {
            let pts = METRICS
                .iter()
                .enumerate()
                .filter_map(|(i, (k, _, _))| Some(Point::at(i as f64, &row(c, k)?.speedup)))
                .collect();
            (format!("speed-up over {}", c.name), pts)
        })
        .collect();
    let chart = |file, title, x_label, y_label, log_x, log_y, curves| Chart {
        file,
        title,
        x_label,
        y_label,
        log_x,
        log_y,
        curves,
        categories: &[],
        parity: false,
    };
    let mut v = vec![
        chart(
            "logp_signature",
            "LogP signature: bursts of k sends, Δ between sends",
            "burst length k",
            "ns per message",
            true,
            false,
            curves("signature", &|_| true, &id),
        ),
        chart(
            "array_time",
            "Array transfer time (double-word aligned)",
            "bytes",
            "ns per array",
            true,
            true,
            array,
        ),
        chart(
            "array_bandwidth",
            "Array transfer bandwidth (double-word aligned)",
            "bytes",
            "MB/s",
            true,
            false,
            bw,
        ),
        chart(
            "one_way_time",
            "One-way time: half a reflected Long round trip",
            "bytes",
            "ns",
            true,
            true,
            curves("stream", &|n| n.starts_with("one-way"), &id),
        ),
        chart(
            "streaming_bandwidth",
            "Streaming Long requests, back to back",
            "bytes",
            "MB/s",
            true,
            false,
            curves("stream", &|n| n == "streaming Long requests", &id),
        ),
        chart(
            "long_payload_reads",
            "A handler that sums its Long payload: read in place or copied out",
            "bytes",
            "MB/s",
            true,
            false,
            curves("stream", &|n| n.contains("sums the payload"), &id),
        ),
        chart(
            "sending_threads",
            "Requests handled per second at one rank, against its senders",
            "senders (threads of one rank, or ranks)",
            "requests/s",
            false,
            false,
            curves("sending-threads", &|_| true, &id),
        ),
        chart(
            "poll_intersection",
            "Successful poll: per message vs per poll",
            "Δ between sends (ns)",
            "ns",
            false,
            false,
            curves("polling", &|_| true, &id),
        ),
        chart(
            "interrupt_overhead",
            "Receive overhead vs arrival interval",
            "arrival interval (µs)",
            "ns per message",
            true,
            false,
            curves("interrupts", &|_| true, &id),
        ),
        chart(
            "mechanism_bandwidth",
            "Message mechanisms: streaming bandwidth (StarT-Voyager Figure 8)",
            "payload bytes",
            "MB/s",
            true,
            true,
            curves("mechanisms", &|_| true, &id),
        ),
        chart(
            "traverse_steps",
            "Ring and traverse: time per message per step",
            "step",
            "ns per message",
            false,
            false,
            steps,
        ),
        chart(
            "traverse_bandwidth",
            "Traverse: array bandwidth per step",
            "step",
            "MB/s",
            false,
            false,
            curves("traverse", &|n| n.contains("arrays"), &id),
        ),
        chart(
            "splitc_bulk_direct",
            "Split-C bulk operations, direct path (Begel et al. Figure 6-4)",
            "bytes",
            "ns per operation",
            true,
            true,
            curves("splitc", &|n| n.ends_with("direct path"), &id),
        ),
        chart(
            "splitc_bulk_frames",
            "Split-C bulk operations, message path (Begel et al. Figure 6-4)",
            "bytes",
            "ns per operation",
            true,
            true,
            curves("splitc", &|n| n.ends_with("frames path"), &id),
        ),
        chart(
            "matmul_direct",
            "Matrix multiply, direct path: flop rate / the kernel alone's (AM paper Figure 5)",
            "m (columns of C per rank)",
            "efficiency",
            true,
            false,
            curves(
                "matmul",
                &|n| n.ends_with("direct path") && !n.starts_with("network"),
                &id,
            ),
        ),
        chart(
            "matmul_frames",
            "Matrix multiply, message path: flop rate / the kernel alone's (AM paper Figure 5)",
            "m (columns of C per rank)",
            "efficiency",
            true,
            false,
            curves(
                "matmul",
                &|n| n.ends_with("frames path") && !n.starts_with("network"),
                &id,
            ),
        ),
        chart(
            "matmul_network",
            "Matrix multiply: network use, measured and modelled",
            "m (columns of C per rank)",
            "fraction of the column rate",
            true,
            false,
            curves("matmul", &|n| n.starts_with("network"), &id),
        ),
        Chart {
            categories: &PEER_LABELS,
            parity: true,
            ..chart(
                "peers",
                "amrq's speed-up over its peers (same run; above 1: amrq faster)",
                "metric",
                "speed-up (×)",
                false,
                false,
                peers,
            )
        },
    ];
    v.retain(|c| c.curves.iter().any(|(_, p)| !p.is_empty()));
    v
}
