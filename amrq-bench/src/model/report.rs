//! The model's report: the costs it was fed, its figures beside the measured ones up
//! to the largest job measured (this machine's placement: two hosts sharing its cores),
//! and its predictions at 1 000 and 10 000 ranks, on this placement and on a cluster of
//! hosts with a rank per core; the plots draw measured points and model lines together.

use super::measured::{Measured, DERIVATION};
use super::{phases, Costs, Layout};
use crate::plots::Chart;
use crate::reference::median;
use crate::report::{Figure, Point};

/// Cores per host of the predicted cluster.
pub const CLUSTER_CORES: usize = 64;

/// The sizes predicted beyond what was measured.
pub const PREDICTED: [usize; 2] = [1_000, 10_000];

/// What the model gives at one size and placement, seconds.
#[derive(Debug, Clone)]
pub struct Predicted {
    /// Ranks.
    pub ranks: usize,
    /// The start-up.
    pub startup: phases::Startup,
    /// A barrier.
    pub barrier_s: f64,
    /// The first all-to-all and the next one (`None`: not simulated, too many events).
    pub all_to_all_s: Option<(f64, f64)>,
}

/// Runs the model at `ranks` on `layout`; the all-to-all only up to `a2a_up_to` ranks.
pub fn predict(layout: &Layout, costs: &Costs, a2a_up_to: usize) -> Predicted {
    Predicted {
        ranks: layout.ranks,
        startup: phases::startup(layout, costs),
        barrier_s: phases::barrier(layout, costs),
        all_to_all_s: (layout.ranks <= a2a_up_to).then(|| {
            (
                phases::all_to_all(layout, costs, false),
                phases::all_to_all(layout, costs, true),
            )
        }),
    }
}

fn med(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    median(&mut v.to_vec())
}

/// Seconds, in the unit that reads best.
fn time(s: f64) -> String {
    match s {
        s if s.is_nan() => "—".into(),
        s if s >= 1.0 => format!("{s:.2} s"),
        s if s >= 1e-3 => format!("{:.2} ms", s * 1e3),
        s if s >= 1e-6 => format!("{:.1} µs", s * 1e6),
        s => format!("{:.1} ns", s * 1e9),
    }
}

/// "measured / model (ratio)".
fn beside(measured: f64, model: f64) -> String {
    format!(
        "{} / {} ({:.2})",
        time(measured),
        time(model),
        model / measured
    )
}

/// The report and its charts, from what was measured.
pub fn report(m: &Measured) -> Result<(String, Vec<Chart<'static>>), String> {
    let costs = m.costs()?;
    let cores = m.cores.max(1);
    let mut t = String::from("# A model of amrq at 1 000 and 10 000 ranks\n\n");
    t += &format!(
        "A discrete-event simulation (`amrq-bench model`, `amrq-bench/src/model/`) of the \
         protocols a job runs: the launch, the rendezvous tree, the job's set-up \
         collectives, a dissemination barrier, the job's end, an all-to-all. Ranks run \
         on the cores of their machine: a rank that waits spins a while on its core, \
         then sleeps, and each message that comes for it wakes it; one that computes \
         gives its core to a waiting one after a quantum. Messages cost LogP's \
         overheads, gap and latency; a pair across hosts sends its first {} messages \
         as datagrams, at a message's costs, and its next opens a connection, which \
         costs both ends core time (a rank's first connection more). Measured on {}, {cores} cores. The costs come from \
         measurements of their own (2 ranks, the floor's runs, rank 0's core time in \
         start-ups of up to 16 ranks), not from the times the model is checked \
         against.\n\n",
        amrq::conduit::ucx::FIRST_MESSAGES,
        m.placement
    );
    t += "## What it was fed\n\n| cost | value | from |\n|---|---|---|\n";
    let link = |l: &super::Link| {
        format!(
            "o_s {}, o_r {}, g {} per 64 B, L {}",
            time(l.o_s),
            time(l.o_r),
            time(l.g),
            time(l.l)
        )
    };
    let values = [
        format!(
            "one host: {}; two hosts: {}",
            link(&costs.shm),
            link(&costs.net)
        ),
        time(costs.connect_s),
        time(costs.connect_first_s),
        time(costs.connect_delay_s),
        time(costs.wake_s),
        format!(
            "{} per process, {} fixed",
            time(costs.spawn_s),
            time(costs.launch_fixed_s)
        ),
        time(costs.init_s),
        time(costs.admit_s),
        format!("{} B", costs.card_bytes),
        format!("{}, {}", time(costs.spin_s), time(costs.spin_crowded_s)),
        format!("{} B, {}", costs.entry_bytes, time(costs.quantum_s)),
    ];
    for ((name, from), value) in DERIVATION.iter().zip(&values) {
        t += &format!("| {name} | {value} | {from} |\n");
    }
    let shortfall = m.delay_shortfall(&costs)?;
    if shortfall > 0.0 {
        t += &format!(
            "\nThe first round trip over a new connection (datagrams off) takes {} less \
             than both ends' core time for their first connection: the model's is that \
             much longer than measured.\n",
            time(shortfall)
        );
    }
    t += "\n## Checked against the runs (two hosts sharing this machine's cores)\n\n\
          Each cell: measured (median over rounds) / model (model ÷ measured). Core \
          time per rank: the mean over ranks, measured after their barrier (last \
          round), the model's to the end of its program (the job's end \
          included).\n\n\
          | ranks | start-up | core time per rank | barrier | first all-to-all | all-to-all |\n\
          |---:|---|---|---|---|---|\n";
    let mut checked = Vec::new();
    for s in &m.startup {
        let layout = Layout::two_hosts_one_machine(s.ranks, cores);
        let p = predict(&layout, &costs, usize::MAX);
        let cpu: Vec<f64> = s
            .cpu_s
            .last()
            .map_or(Vec::new(), |r| r.iter().map(|c| c[3]).collect());
        let cpu_mean = cpu.iter().sum::<f64>() / cpu.len().max(1) as f64;
        let col = m.collectives.iter().find(|c| c.ranks == s.ranks);
        let pick =
            |f: fn(&crate::collectives::Sample) -> &Vec<f64>| col.map_or(f64::NAN, |c| med(f(c)));
        let (first, steady) = p.all_to_all_s.unwrap_or((f64::NAN, f64::NAN));
        t += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            s.ranks,
            beside(med(&s.job_s), p.startup.wall_s),
            beside(cpu_mean, p.startup.cpu_per_rank_s),
            beside(pick(|c| &c.barrier_s), p.barrier_s),
            beside(pick(|c| &c.first_all_to_all_s), first),
            beside(pick(|c| &c.all_to_all_s), steady),
        );
        checked.push(p);
    }
    let here: Vec<Predicted> = PREDICTED
        .iter()
        .map(|&n| predict(&Layout::two_hosts_one_machine(n, cores), &costs, 1_000))
        .collect();
    let cluster: Vec<Predicted> = PREDICTED
        .iter()
        .map(|&n| predict(&Layout::cluster(n, CLUSTER_CORES), &costs, 10_000))
        .collect();
    t += &format!(
        "\n## Predicted\n\nOn this machine's placement (two hosts sharing its {cores} \
         cores), and on a cluster of hosts of {CLUSTER_CORES} cores, a rank per core \
         (each host its own launcher), with the same costs. Start-up: `amrun`'s wall \
         time; joined, started: when the last rank had joined (rendezvous) and finished \
         its start (`Setup::start`).\n\n\
         | placement | ranks | start-up | joined | started | barrier | first all-to-all | all-to-all | events |\n\
         |---|---:|---|---|---|---|---|---|---:|\n"
    );
    for (name, set) in [("this machine", &here), ("cluster", &cluster)] {
        for p in set.iter() {
            let (first, steady) = p.all_to_all_s.unwrap_or((f64::NAN, f64::NAN));
            t += &format!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                p.ranks,
                time(p.startup.wall_s),
                time(p.startup.marks_s[1]),
                time(p.startup.marks_s[2]),
                time(p.barrier_s),
                time(first),
                time(steady),
                p.startup.events
            );
        }
    }
    Ok((t, charts(m, &checked, &here, &cluster)))
}

fn model_curve(name: &str, ps: &[&Predicted], f: fn(&Predicted) -> f64) -> (String, Vec<Point>) {
    let pts = ps
        .iter()
        .map(|p| (p.ranks as f64, f(p)))
        .filter(|(_, y)| y.is_finite())
        .map(|(x, y)| Point::at(x, &Figure::single("", y)))
        .collect();
    (name.to_string(), pts)
}

fn charts(
    m: &Measured,
    checked: &[Predicted],
    here: &[Predicted],
    cluster: &[Predicted],
) -> Vec<Chart<'static>> {
    let this: Vec<&Predicted> = checked.iter().chain(here).collect();
    let far: Vec<&Predicted> = cluster.iter().collect();
    let measured = |runs: Vec<(usize, Vec<f64>)>| {
        runs.into_iter()
            .map(|(n, mut v)| Point::of(n as f64, &mut v))
            .collect::<Vec<_>>()
    };
    let collective = |f: fn(&crate::collectives::Sample) -> &Vec<f64>| {
        measured(
            m.collectives
                .iter()
                .map(|c| (c.ranks, f(c).clone()))
                .collect(),
        )
    };
    let chart = |file, title, curves| Chart {
        file,
        title,
        x_label: "ranks",
        y_label: "seconds",
        log_x: true,
        log_y: true,
        curves,
        categories: &[],
        parity: false,
    };
    let a2a = |p: &Predicted| p.all_to_all_s.map_or(f64::NAN, |a| a.1);
    let a2a_first = |p: &Predicted| p.all_to_all_s.map_or(f64::NAN, |a| a.0);
    vec![
        chart(
            "model_startup",
            "start-up (join, one barrier, return): measured and the model",
            vec![
                (
                    "measured (two hosts, this machine)".into(),
                    measured(
                        m.startup
                            .iter()
                            .map(|s| (s.ranks, s.job_s.clone()))
                            .collect(),
                    ),
                ),
                model_curve("model, this machine", &this, |p| p.startup.wall_s),
                model_curve("model, cluster", &far, |p| p.startup.wall_s),
            ],
        ),
        chart(
            "model_barrier",
            "a barrier: measured and the model",
            vec![
                (
                    "measured (two hosts, this machine)".into(),
                    collective(|c| &c.barrier_s),
                ),
                model_curve("model, this machine", &this, |p| p.barrier_s),
                model_curve("model, cluster", &far, |p| p.barrier_s),
            ],
        ),
        chart(
            "model_all_to_all",
            "an all-to-all (one message a pair each way: datagrams), the first and a later one",
            vec![
                (
                    "measured, first".into(),
                    collective(|c| &c.first_all_to_all_s),
                ),
                ("measured, later".into(), collective(|c| &c.all_to_all_s)),
                model_curve("model, first, this machine", &this, a2a_first),
                model_curve("model, later, this machine", &this, a2a),
                model_curve("model, first, cluster", &far, a2a_first),
                model_curve("model, later, cluster", &far, a2a),
            ],
        ),
    ]
}
