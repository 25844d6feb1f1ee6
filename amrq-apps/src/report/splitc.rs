//! The Split-C applications' sections (Begel et al. Figure 6-5): EM3D, CG and the
//! 3-D FFT.

use super::{fig, ranks_cell, show, timed};
use amrq_bench::report::Outcome;
use std::fmt::Write;

/// The EM3D section: µs per iteration per version and path, and the paper's point.
pub(super) fn em3d_section(s: &mut String, runs: &[&Outcome]) {
    *s += "\n## EM3D (Begel et al. §6, Figure 6-5)\n\n\
500 E and 500 H nodes per rank, 5 edges each, 30 % of them remote; µs per iteration \
(median over batches) and, in brackets, the speed-up over the sequential EM3D of the \
whole graph timed before each batch. `read`: a blocking read per edge; `get`: split-phase gets of the \
distinct remote neighbours, one sync; `store`: the owners fill the ghosts with one bulk \
store per rank, then `all_store_sync`. Begel et al. credit Split-C's edge on EM3D to its \
stores.\n\n";
    *s += "| ranks | path | read | get | store | read / store | sequential (whole graph) |\n|---|---|---|---|---|---|---|\n";
    for o in runs {
        for path in ["direct", "frames"] {
            let at = |v: &str| fig(o, &format!("{path}_{v}_us_per_iter"));
            let cell = |v: &str| {
                let key = |unit: &str| format!("{path}_{v}_{unit}");
                timed(o, &key("us_per_iter"), &key("speedup"))
            };
            let _ = writeln!(
                s,
                "| {} | {path} | {} | {} | {} | {} | {} |",
                ranks_cell(o.ranks),
                cell("read"),
                cell("get"),
                cell("store"),
                at("read")
                    .zip(at("store"))
                    .map_or("–".into(), |(r, st)| format!("{:.2}×", r / st)),
                show(fig(o, "sequential_us_per_iter")),
            );
        }
    }
    *s += "\nOn the message path a blocking read pays a round trip per remote edge, a get \
pays a request and a reply per distinct neighbour but overlaps them, and a bulk store \
moves each rank's ghosts in one message with no reply: the paper's order. On the direct \
path every access is a copy, and the versions differ by their barriers and bookkeeping. \
With more ranks than cores a blocking read waits for its owner to be scheduled.\n";
    let best = runs
        .iter()
        .filter(|o| o.ranks > 1)
        .flat_map(|o| ["direct", "frames"].map(|p| fig(o, &format!("{p}_store_speedup"))))
        .flatten()
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let _ = writeln!(
        s,
        "\nThe paper's shape: EM3D scales poorly, and is abysmal against the one-processor \
time (which Begel et al. leave out of their graph). Here the best speed-up on more than \
one rank (by stores) is {}×: {}. A 500-node half-step is a few µs of arithmetic \
against two barriers and a store synchronisation per half-step.",
        show(best),
        match best {
            Some(b) if b < 1.0 => "the paper's shape holds",
            Some(_) => "better than the paper's",
            None => "not measured",
        }
    );
}

/// The CG section: µs per iteration and speed-up per path.
pub(super) fn cg_section(s: &mut String, runs: &[&Outcome]) {
    *s += "\n## Conjugate gradient (Begel et al. §6, Figure 6-5)\n\n\
5-point Laplacian of a 64×64 grid (4,096 unknowns, Begel's size), rows in blocks over \
the ranks; each iteration stores the search direction's boundary rows into the \
neighbours' ghost rows (`bulk_store`, `all_store_sync`) and takes two dot products \
(`all_reduce`); µs per iteration and, in brackets, the speed-up over the sequential CG \
of the same run.\n\n";
    *s += "| ranks | direct | frames | sequential |\n|---|---|---|---|\n";
    for o in runs {
        let cell = |p: &str| timed(o, &format!("{p}_us_per_iter"), &format!("{p}_speedup"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            ranks_cell(o.ranks),
            cell("direct"),
            cell("frames"),
            show(fig(o, "sequential_us_per_iter"))
        );
    }
    *s += "\nA 64×64 CG iteration is some 15 µs of arithmetic on one core. Split over two \
ranks on the direct path, the halves take about half that, plus a store \
synchronisation and two all-reductions of a few cross-core round trips each. On the \
message path the stores and reductions are messages the owners serve, and they eat \
the gain. With more ranks than cores every synchronisation waits for the scheduler.\n";
    let two = runs.iter().find(|o| o.ranks == 2);
    let up = |p: &str| two.and_then(|o| fig(o, &format!("{p}_speedup")));
    let _ = writeln!(
        s,
        "\nThe paper's shape: CG scales very poorly, and Split-C's stores are what help it. \
Here on 2 ranks the speed-up is {}× on the direct path and {}× on the message path: {}.",
        show(up("direct")),
        show(up("frames")),
        match up("direct") {
            Some(u) if u < 1.5 => "poor scaling, as in the paper",
            Some(_) => "better than the paper's on the direct path, where a store is a copy",
            None => "not measured",
        }
    );
}

/// The 3-D FFT section: ms per FFT and speed-up per path, the transpose's share and
/// bandwidth, and the paper's shape.
pub(super) fn fft_section(s: &mut String, runs: &[&Outcome]) {
    *s += "\n## 3-D FFT (Begel et al. §6, Figure 6-5)\n\n\
A 128³ complex FFT in slabs of planes: local 2-D FFTs (`rustfft`), the transpose as an \
all-to-all of bulk stores (one per plane and rank, then `all_store_sync`), local FFTs \
along z; ms per FFT and, in brackets, the speed-up over the sequential 3-D FFT timed \
before each run; the transpose's share of the time and its bandwidth (bytes each rank \
stores into the others, over the transpose's time).\n\n";
    *s += "| ranks | direct | frames | transpose share (direct / frames) | transpose MB/s per rank (direct / frames) | sequential |\n|---|---|---|---|---|---|\n";
    for o in runs {
        let cell = |p: &str| timed(o, &format!("{p}_ms"), &format!("{p}_speedup"));
        let pair = |k: &str| {
            let at = |p: &str| show(fig(o, &format!("{p}_{k}")));
            format!("{} / {}", at("direct"), at("frames"))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            ranks_cell(o.ranks),
            cell("direct"),
            cell("frames"),
            pair("transpose_fraction"),
            pair("transpose_mb_s"),
            show(fig(o, "sequential_ms"))
        );
    }
    let at = |ranks: usize, k: &str| {
        runs.iter()
            .find(|o| o.ranks == ranks)
            .and_then(|o| fig(o, k))
    };
    let (up2, share2, share4) = (
        at(2, "direct_speedup"),
        at(2, "direct_transpose_fraction"),
        at(4, "direct_transpose_fraction"),
    );
    let _ = writeln!(
        s,
        "\nThe paper's shape: the FFT scales until the all-to-all transpose runs out of \
bandwidth (on the NOW, past 8 processors). Here, on 2 ranks of 2 cores, the speed-up is \
{}×, {}; the transpose's share of the time goes from {} on 2 ranks to {} on 4 \
(oversubscribed), {}. One rank pays for a transpose too (a copy of its own rows), \
which is why the parallel code on one rank is slower than the sequential one. The \
1-D FFTs are bound by memory bandwidth, which the two cores share, so two ranks \
cannot halve their time.",
        show(up2),
        match up2 {
            Some(u) if u > 1.0 => "so it scales to the cores there are",
            Some(_) => "so it does not scale even to the cores there are",
            None => "not measured",
        },
        show(share2),
        show(share4),
        match share2.zip(share4) {
            Some((a, b)) if b > a =>
                "growing with the ranks as the paper's bandwidth argument says",
            Some(_) => "not growing",
            None => "not measured",
        },
    );
}

/// The ray-tracer section: ms per image on both paths, the speed-up and the load
/// balance, and the paper's shape (the best scaling of its applications).
pub(super) fn raytrace_section(s: &mut String, runs: &[&Outcome], others: &[&Outcome]) {
    *s += "\n## Ray tracer (Begel et al. §6, Figure 6-5, after pico-Ray)\n\n\
Generated spheres on a ground sphere, shadows and up to 3 mirror reflections; the ranks \
take blocks of 4 rows from a counter on rank 0 (a fetch-and-add) and store the pixels \
into rank 0's image with bulk stores. ms per image (median over batches), in brackets \
the speed-up over one core's render timed in the same batch (every image checked pixel \
by pixel against it); balance: the most rows one rank rendered over the mean.\n\n";
    *s += "| ranks | direct | frames | balance (direct / frames) |\n|---|---|---|---|\n";
    for o in runs {
        let cell = |p: &str| timed(o, &format!("{p}_ms"), &format!("{p}_speedup"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} / {} |",
            ranks_cell(o.ranks),
            cell("direct"),
            cell("frames"),
            show(fig(o, "direct_balance")),
            show(fig(o, "frames_balance")),
        );
    }
    // The best 2-rank speed-up of the other applications, on the direct path.
    let mine = runs
        .iter()
        .find(|o| o.ranks == 2)
        .and_then(|o| fig(o, "direct_speedup"));
    // Each application's best speed-up on the direct path (EM3D has one per version).
    let best_other = others
        .iter()
        .filter(|o| o.ranks == 2)
        .flat_map(|o| &o.figures)
        .filter(|f| f.key.starts_with("direct") && f.key.ends_with("_speedup"))
        .map(|f| f.median)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let _ = writeln!(
        s,
        "\nThe paper's shape: the ray tracer scales best of the applications. Here on 2 \
ranks its speed-up over one core is {}×, against {}× for the best of EM3D, CG and the \
FFT on the direct path: {}. A pixel is one word stored after thousands of \
floating-point operations, and a block of rows one fetch-and-add, so almost nothing \
crosses between the ranks. Through frames the fetch-and-add waits until rank 0 next \
calls amrq, which it does between its own blocks.",
        show(mine),
        show(best_other),
        match (mine, best_other) {
            (Some(m), Some(b)) if m >= b => "holds",
            (Some(_), Some(_)) => "does not hold",
            _ => "not measured",
        },
    );
}

/// The Cholesky section: ms per factorisation on both paths with the speed-up, and the
/// paper's shape (linear on two processes of shared memory).
pub(super) fn cholesky_section(s: &mut String, runs: &[&Outcome]) {
    *s += "\n## Cholesky factorisation (Begel et al. §6, Figure 6-5)\n\n\
A dense SPD matrix factored right-looking in column blocks of 32 dealt cyclically; the \
owner of a block factors its panel and bulk-stores it into every other rank's panel \
buffer, and every rank updates its own blocks with it, the next panel's owner that \
panel's block first, so that it factors the next panel while the others update \
(look-ahead). ms per factorisation (the longest rank's, median over batches), in \
brackets the speed-up over one core's blocked factorisation timed in the same batch (L \
checked against it every timed run).\n\n";
    *s += "| ranks | direct | frames |\n|---|---|---|\n";
    for o in runs {
        let cell = |p: &str| timed(o, &format!("{p}_ms"), &format!("{p}_speedup"));
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            ranks_cell(o.ranks),
            cell("direct"),
            cell("frames")
        );
    }
    let up2 = runs
        .iter()
        .find(|o| o.ranks == 2)
        .and_then(|o| fig(o, "direct_speedup"));
    let _ = writeln!(
        s,
        "\nThe paper's shape: shared-memory Split-C scales linearly on two processes. Here \
the speed-up on 2 ranks is {}× on the direct path: {}. Every step begins with a \
synchronisation, so it lasts as long as its busiest rank: the next panel's owner has \
that panel to factor besides its updates, and the blocks dealt cyclically leave the \
last steps' updates to fewer ranks (the size section shows the waits).",
        show(up2),
        match up2 {
            Some(u) if u >= 1.8 => "near linear, holds",
            Some(_) => "below linear, does not hold",
            None => "not measured",
        },
    );
}
