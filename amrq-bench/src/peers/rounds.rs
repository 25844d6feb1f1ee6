//! Rounds: amrq, then a peer, then amrq, then the next peer, …, repeated. A peer's
//! round is made of parts (a test run each: GASNet-EX's `testam` round trip, UCX's
//! `ucp_am_bw` at 64 KiB, …), and amrq measures the same metrics just before each
//! part: on this VM the cores' placement can change within seconds, and a second
//! between the two sides of a ratio is far less likely to straddle a change than the
//! length of a whole round.

use super::gasnet::Gasnet;
use super::open_mpi::OpenMpi;
use super::placement::raw_round_trip_ns;
use super::ucx::Ucx;
use super::{Failure, Measured, Raw};
use std::path::PathBuf;

/// What a peer's comparison came to.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It ran in every round and gave every figure it has a test for.
    Ran,
    /// It is not there (not installed, not given): why, and what to do.
    Missing(String),
    /// It ran but gave no figure (or failed as a process) in round `round`.
    Failed {
        /// The round, from 1.
        round: usize,
        /// What went wrong.
        why: String,
        /// The lines it printed that could not be read.
        unread: Vec<String>,
    },
}

/// One round of a comparison: amrq's figures, then the peer's.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Round {
    /// amrq's figures, measured just before the peer's.
    pub amrq: Vec<(String, f64)>,
    /// The peer's figures.
    pub peer: Vec<(String, f64)>,
    /// The peer's raw output, relative to the report directory.
    pub files: Vec<String>,
    /// Per metric, the raw cache-line round trip (ns) probed just before amrq's
    /// measurement and just after the peer's ([`super::placement`]).
    pub placements: Vec<(String, f64, f64)>,
}

/// amrq against one peer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Comparison {
    /// The peer (`Open MPI`, `UCX`, `GASNet-EX`).
    pub name: String,
    /// Whether it ran.
    pub status: Status,
    /// How it was run.
    pub how: String,
    /// What the reader should know (its version; a rank that was not pinned).
    pub notes: Vec<String>,
    /// The metrics it has a test for.
    pub expects: Vec<String>,
    /// Its rounds.
    pub rounds: Vec<Round>,
    /// Raw output of the round that failed, if one did.
    pub failed_files: Vec<String>,
}

/// What `peers` measured: every amrq run, and each peer's comparison.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Peers {
    /// Rounds asked for.
    pub rounds: usize,
    /// amrq's figures of every run, in order.
    pub amrq: Vec<Vec<(String, f64)>>,
    /// One per peer, in the order they ran.
    pub comparisons: Vec<Comparison>,
}

/// How to run the peers.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Fewer iterations.
    pub quick: bool,
    /// Rounds (each: amrq before every peer).
    pub rounds: usize,
    /// A directory with GASNet-EX's tests, if given.
    pub gasnet: Option<PathBuf>,
    /// Where peers are built (removed by the caller).
    pub work: PathBuf,
    /// Where raw output goes (`<report>/peers`), if anywhere.
    pub raw: Option<PathBuf>,
}

/// A peer ready to run.
enum Contender {
    OpenMpi(OpenMpi),
    Ucx(Ucx),
    Gasnet(Gasnet),
}

impl Contender {
    /// The metrics of each part of a round.
    fn parts(&self) -> &'static [&'static [&'static str]] {
        match self {
            Contender::OpenMpi(_) => &super::open_mpi::PARTS,
            Contender::Ucx(_) => &super::ucx::PARTS,
            Contender::Gasnet(_) => &super::gasnet::PARTS,
        }
    }

    fn run(&self, part: usize, quick: bool, raw: &Raw) -> Result<Measured, Failure> {
        match self {
            Contender::OpenMpi(p) => p.run(part, quick, raw),
            Contender::Ucx(p) => p.run(part, quick, raw),
            Contender::Gasnet(p) => p.run(part, quick, raw),
        }
    }
}

/// A peer's comparison before its rounds: (how it runs, notes, the peer) if it can
/// run, or why it is missing.
fn entry<P>(
    name: &str,
    parts: &[&[&str]],
    prepared: Result<(String, Vec<String>, P), String>,
    wrap: fn(P) -> Contender,
) -> (Comparison, Option<Contender>) {
    let mut c = Comparison {
        name: name.into(),
        status: Status::Ran,
        how: String::new(),
        notes: Vec::new(),
        expects: parts.concat().iter().map(|s| s.to_string()).collect(),
        rounds: Vec::new(),
        failed_files: Vec::new(),
    };
    match prepared {
        Ok((how, notes, p)) => {
            c.how = how;
            c.notes = notes;
            (c, Some(wrap(p)))
        }
        Err(why) => {
            c.status = Status::Missing(why);
            (c, None)
        }
    }
}

/// Prepares every peer (building what needs building), then runs the rounds: before
/// each part of a peer's round, `amrq(metrics)` measures amrq's figures of the same
/// metrics. `progress` hears what runs next. If no peer can run, amrq is measured
/// once (every metric), for its own column.
pub fn measure(
    s: &Setup,
    mut amrq: impl FnMut(&[&str]) -> Result<Vec<(String, f64)>, String>,
    mut progress: impl FnMut(&str),
) -> Result<Peers, String> {
    let q = s.quick;
    let mut list = vec![
        entry(
            "Open MPI",
            &super::open_mpi::PARTS,
            OpenMpi::prepare(&s.work).map(|p| (p.how(q), vec![p.version.clone()], p)),
            Contender::OpenMpi,
        ),
        entry(
            "UCX",
            &super::ucx::PARTS,
            Ucx::prepare().map(|p| (p.how(q), Vec::new(), p)),
            Contender::Ucx,
        ),
        entry(
            "GASNet-EX",
            &super::gasnet::PARTS,
            Gasnet::prepare(s.gasnet.as_deref(), &s.work).map(|(p, notes)| (p.how(q), notes, p)),
            Contender::Gasnet,
        ),
    ];

    let rounds = s.rounds.max(1);
    let mut runs = Vec::new();
    for round in 1..=rounds {
        for (cmp, contender) in &mut list {
            let Some(peer) = contender else { continue };
            if cmp.status != Status::Ran {
                continue;
            }
            let raw = Raw::new(s.raw.clone(), &cmp.name, round);
            let mut r = Round {
                amrq: Vec::new(),
                peer: Vec::new(),
                files: Vec::new(),
                placements: Vec::new(),
            };
            for (part, metrics) in peer.parts().iter().enumerate() {
                let what = metrics.join(", ");
                progress(&format!(
                    "round {round}/{rounds}: amrq, {}: {what}",
                    cmp.name
                ));
                let before = raw_round_trip_ns();
                r.amrq.extend(amrq(metrics)?);
                let ran = peer.run(part, s.quick, &raw);
                let after = raw_round_trip_ns();
                r.placements
                    .extend(metrics.iter().map(|m| (m.to_string(), before, after)));
                match ran {
                    Ok(m) => {
                        r.peer.extend(m.values);
                        r.files.extend(m.files);
                        for n in m.notes {
                            if !cmp.notes.contains(&n) {
                                cmp.notes.push(n);
                            }
                        }
                    }
                    Err(f) => {
                        cmp.status = Status::Failed {
                            round,
                            why: f.why,
                            unread: f.unread,
                        };
                        cmp.failed_files = r.files.iter().chain(&f.files).cloned().collect();
                        break;
                    }
                }
            }
            if cmp.status == Status::Ran {
                runs.push(r.amrq.clone());
                cmp.rounds.push(r);
            }
        }
    }
    if runs.is_empty() {
        progress("amrq");
        let all: Vec<&str> = super::METRICS.iter().map(|m| m.0).collect();
        runs.push(amrq(&all)?);
    }
    Ok(Peers {
        rounds,
        amrq: runs,
        comparisons: list.into_iter().map(|(c, _)| c).collect(),
    })
}
