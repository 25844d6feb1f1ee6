//! The Remote Queues applications' sections: the transpose ladder (Figure 12), the
//! sparse triangular solve (Figure 9) and the radix sort (§3.2.3).

use super::{factor, fig, ranks_cell, show, timed};
use crate::transpose::VARIANTS;
use amrq_bench::report::Outcome;
use std::fmt::Write;

/// The transpose section: bandwidth per variant and rank count, the gain of each rung
/// over the one before, and the paper's shape.
pub(super) fn transpose_section(s: &mut String, runs: &[&Outcome]) {
    *s += "\n## Transpose ladder (Remote Queues §4, Figure 12)\n\n\
All-to-all exchange of blocks as barrier-separated permutations; MB/s of bytes between \
ranks (median over batches); in brackets the rung's gain over the one before, from the \
per-batch ratios to `am`. The paper (CM-5, 64 nodes): dequeue +13 %, bandwidth \
matching +13 %, strict alternation +11 %, 42 % in all; limiting reception without \
bandwidth matching halved bandwidth.\n\n";
    *s += "| ranks | am | dequeue | matched | alternate | limited (control) | one core, sequential |\n|---|---|---|---|---|---|---|\n";
    for o in runs {
        let over = |v: &str| {
            if v == "am" {
                Some(1.0)
            } else {
                fig(o, &format!("{v}_over_am"))
            }
        };
        let mut cells = Vec::new();
        for (i, v) in VARIANTS.iter().enumerate() {
            let bw = show(fig(o, &format!("{}_mb_s", v.name())));
            // Each rung against the one before it; the control against `dequeue`.
            let before = match i {
                0 => None,
                4 => Some("dequeue"),
                _ => Some(VARIANTS[i - 1].name()),
            };
            cells.push(
                match before.and_then(|b| Some(over(v.name())? / over(b)?)) {
                    Some(g) => format!("{bw} ({:+.0} %)", (g - 1.0) * 100.0),
                    None => bw,
                },
            );
        }
        let marked = ranks_cell(o.ranks);
        let _ = writeln!(
            s,
            "| {marked} | {} | {} |",
            cells.join(" | "),
            show(fig(o, "sequential_mb_s"))
        );
    }
    for o in runs {
        let total = fig(o, "alternate_over_am");
        let control = fig(o, "limited_over_am")
            .zip(fig(o, "dequeue_over_am"))
            .map(|(l, d)| l / d);
        let _ = writeln!(
            s,
            "\n- {} ranks: the whole ladder (`alternate` against `am`) {}, {}; the control {}× `dequeue`, {}; dequeues between injections that found nothing: {} (`alternate`), {} (`limited`); gap {} ns per chunk.",
            o.ranks,
            total.map_or("–".into(), |t| format!("{:+.0} %", (t - 1.0) * 100.0)),
            match total {
                Some(t) if t > 1.0 => "the paper's direction",
                Some(_) => "not the paper's direction",
                None => "not measured",
            },
            show(control),
            match control {
                Some(c) if c < 0.75 => "the paper's congestion",
                Some(_) => "no collapse",
                None => "not measured",
            },
            show(fig(o, "alternate_failed_dequeues")),
            show(fig(o, "limited_failed_dequeues")),
            show(fig(o, "gap_ns")),
        );
    }
    *s += "\nWhy the shape differs here: on one host each pair of ranks has its own ring, \
so there is no shared network for a flood of packets to congest and nothing for bandwidth \
matching to relieve. Its pacing reads the clock once per chunk and can only hold a sender \
back, and limiting reception cannot back up anyone's traffic but the sender's own. \
What RQ does buy here is the first rung: dequeuing in a tight loop with the copy inlined \
skips the AM dispatch per chunk. With more ranks than cores the ranks also take turns \
on the cores, and barriers and waits that sleep dominate.\n";
    if let Some(o) = runs.first() {
        for n in o.notes.iter().filter(|n| !n.contains("outnumber")) {
            let _ = writeln!(s, "\n{n}.");
        }
    }
}

/// The triangular-solve section: time per solve and speed-up per mode, the gain of
/// polling over interrupts and of inlining over handlers, and the paper's shape.
pub(super) fn trisolve_section(s: &mut String, runs: &[&Outcome]) {
    *s += "\n## Sparse triangular solve (Remote Queues §3.2.5, Figure 9)\n\n\
Forward substitution, rows dealt cyclically, every value an Express message to the ranks \
that need it; µs per solve (median over batches) and, in brackets, the speed-up over the \
optimised sequential solve of the same run; the last three columns say how many times \
faster one mode was than another. `interrupts` runs RQ handlers on the progress thread \
of an Interrupt queue; `engine` runs the AM handler on the rank's progress engine while \
the rank's thread waits outside sections for rows to send. The paper (Alewife): polling \
beats interrupts by up to 30 %, inlining the handler adds up to 6 %. The factors are synthetic, with the \
sizes of the Harwell–Boeing ones (`amrq_apps::matrix`).\n\n";
    *s += "| factor | ranks | interrupts | engine | handlers | inlined | sequential | polling (handlers) vs interrupts | polling (handlers) vs engine | inlined vs handlers |\n|---|---|---|---|---|---|---|---|---|---|\n";
    for o in runs {
        let cell = |m: &str| timed(o, &format!("{m}_us"), &format!("{m}_speedup"));
        // How many times faster `a` is than `b`, from the medians.
        let faster = |a: &str, b: &str| {
            fig(o, &format!("{b}_us"))
                .zip(fig(o, &format!("{a}_us")))
                .map_or("–".into(), |(b, a)| format!("{:.2}×", b / a))
        };
        let name = factor(o);
        let marked = ranks_cell(o.ranks);
        let _ = writeln!(
            s,
            "| {name} | {marked} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell("interrupts"),
            cell("engine"),
            cell("handlers"),
            cell("inlined"),
            show(fig(o, "sequential_us")),
            faster("handlers", "interrupts"),
            faster("handlers", "engine"),
            faster("inlined", "handlers"),
        );
    }
    *s += "\nPolling beats interrupts here by far more than the paper's 30 %. An Interrupt \
frame wakes a progress thread that slept on a futex (a system call, and a `membarrier` \
before each batch of handlers), and the rows it solves go back to the rank's thread, \
which sleeps until there are some, since only it may send. With 2 cores and 2 ranks the \
two progress threads share the cores with the ranks, so every wake-up is also a switch. \
Alewife took an interrupt in tens of cycles on the same processor. The progress engine \
pays the same wake-up per batch of values, but runs the AM handler itself and lets the \
rank's thread send from a section. Inlining the update \
against an AM handler per value changes little: the dispatch it saves is a few ns \
against a cross-core transfer per value. The speed-ups stay below 1 for the same \
reason: these factors have a few thousand rows, and each dependency that crosses \
ranks costs a message between cores (hundreds of ns at this host's placement), \
against a few ns of arithmetic per row.\n";
    for o in runs {
        for n in o.notes.iter().filter(|n| n.starts_with("failed")) {
            let _ = writeln!(s, "\n{} ranks: {n}.", o.ranks);
        }
    }
}

/// The radix-sort section: ms per sort by mode, the inlined loop's and the paper's
/// dequeue's gain over handlers, and the paper's shape.
pub(super) fn radix_section(s: &mut String, runs: &[&Outcome]) {
    *s += "\n## Radix sort (Remote Queues §3.2.3, Strata's on the CM-5)\n\n\
32-bit keys, four passes of 8 bits; each pass redistributes every key to its place in \
the global order, up to 10 keys per Express message. ms per sort (median over batches), \
in brackets the speed-up over one core's radix sort of every rank's keys, timed in the \
same batch; the last two columns, how much faster each mode was than handlers \
(per-batch ratios of handlers' time to the mode's). The paper: moving the keys in a tight dequeue loop was 13 % faster than an \
Active Message handler per message.\n\n";
    *s += "| ranks | keys | handlers | inlined | dequeue | sequential | inlined vs handlers | dequeue vs handlers |\n|---|---|---|---|---|---|---|---|\n";
    for o in runs {
        let cell = |m: &str| timed(o, &format!("{m}_ms"), &format!("{m}_speedup"));
        let gain = |m: &str| {
            fig(o, &format!("{m}_over_handlers"))
                .map_or("–".into(), |g| format!("{:+.0} %", (g - 1.0) * 100.0))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            ranks_cell(o.ranks),
            show(fig(o, "keys")),
            cell("handlers"),
            cell("inlined"),
            cell("dequeue"),
            show(fig(o, "sequential_ms")),
            gain("inlined"),
            gain("dequeue"),
        );
    }
    let two = runs.iter().find(|o| o.ranks == 2);
    let g = two.and_then(|o| fig(o, "inlined_over_handlers"));
    let best = two.and_then(|o| {
        ["handlers", "inlined", "dequeue"]
            .iter()
            .filter_map(|m| fig(o, &format!("{m}_speedup")))
            .reduce(f64::max)
    });
    let _ = writeln!(
        s,
        "\nOn 2 ranks the inlined loop is {} handlers (the paper: +13 %): {}. A handler here \
costs a few ns of dispatch, against a cache line crossing between cores per message. \
The best mode's speed-up over one core on 2 ranks is {}×: {}",
        g.map_or("–".into(), |g| format!(
            "{:+.0} % against",
            (g - 1.0) * 100.0
        )),
        match g {
            Some(g) if g > 1.0 => "the paper's direction",
            Some(_) => "not the paper's direction",
            None => "not measured",
        },
        show(best),
        match best {
            Some(b) if b < 1.0 =>
                "one core moves a key in about a nanosecond per pass, \
while a message carries ten keys across cores.",
            Some(_) => "the ranks beat one core.",
            None => "not measured.",
        },
    );
}
