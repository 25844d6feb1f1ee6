//! What `amrq-bench startup` measured, kept as `startup.json` beside its report, and
//! the model's [`Costs`] derived from it: every cost but the spins, the quantum and
//! the table entry's size from a measurement of its own (2 ranks, the floor's runs,
//! the LogP signature, rank 0's core time in start-ups of up to 16 ranks), none
//! fitted to the start-up, barrier or all-to-all times the model is checked against.

use super::{Costs, Link};
use crate::analysis::{least_squares, LogP};
use crate::reference::median;
use crate::{collectives, contact, startup};
use serde::{Deserialize, Serialize};

/// Everything `amrq-bench startup` measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Measured {
    /// The two hosts, the command reaching them, rank 0's address.
    pub placement: String,
    /// Cores of the machine the hosts share.
    pub cores: usize,
    /// Start-up and its floor, per number of ranks.
    pub startup: Vec<startup::Sample>,
    /// The first round trip to a new peer and the steady one, per round.
    pub contacts: Vec<contact::Contact>,
    /// Barrier and all-to-all, per number of ranks.
    pub collectives: Vec<collectives::Sample>,
    /// The LogP signature of two ranks of one host, and of two hosts.
    pub logp: Option<(LogP, LogP)>,
}

/// The rendezvous table's bytes per rank beside the card: host name, address, port
/// (not measured: a few dozen bytes, small beside the card).
const ENTRY_BYTES: u32 = 64;

/// The scheduler's quantum the model gives a rank that computes while others wait
/// (not measured: Linux's default slices are a few milliseconds).
const QUANTUM_S: f64 = 3e-3;

/// A wait's spin before it sleeps, on a host with no more ranks than cores and on a
/// crowded one (not measured: `amrq::util::Backoff`'s budgets, 2 048 polls, each a
/// system call when it progresses the network, and 32 polls).
const SPIN_S: f64 = 1e-3;
const SPIN_CROWDED_S: f64 = 1e-6;

/// How each cost was derived, for the report.
pub const DERIVATION: &[(&str, &str)] = &[
    ("shm, net", "`amrq-bench signature` (LogP: bursts, round trip, receive overhead) with its two ranks on one host, then one on each host"),
    ("connect_s", "rank 0's core time for a first round trip to a peer on another host with datagrams off (a connection made on the way), less that of as many polls with nothing to take (every rank pausing 20 µs between empty polls), its second to fifth peers: median over peers, then rounds; each end is charged it"),
    ("connect_first_s", "the same for its first peer, less connect_s: what a rank's first connection costs beyond later ones, charged to each rank's first connection"),
    ("connect_delay_s", "first round trip − steady round trip to a new peer across hosts with datagrams off (both ranks' first connection) − both ends' core time, median over rounds; 0 when that is negative (the report says by how much)"),
    ("wake_s", "a round trip after rank 1 slept 2 ms in its barrier minus one at once (2 ranks, one a host), median over rounds"),
    ("spawn_s, launch_fixed_s", "least squares of the floor (`amrun` of `/bin/true`) against the ranks per host: slope and intercept"),
    ("init_s", "a rank's core time when joined (since exec: loading, UCX, shared memory) at 2 ranks, median over ranks and rounds"),
    ("admit_s", "least squares of rank 0's core time when joined against the ranks, up to 16 ranks: its slope"),
    ("card_bytes", "rank 0's card in the first-contact job (UCX worker address and segment key)"),
    ("spin_s, spin_crowded_s", "not measured: the budgets of the code's waits (2 048 polls, a system call each when they progress the network; 32 on a host with more ranks than cores)"),
    ("entry_bytes, quantum_s", "not measured: 64 B, 3 ms"),
];

impl Measured {
    /// The model's costs, or what is missing.
    pub fn costs(&self) -> Result<Costs, String> {
        let (shm, net) = self.logp.ok_or("no LogP signature measured")?;
        let first = self.first_extra_s()?;
        let mut wake: Vec<f64> = self
            .collectives
            .iter()
            .flat_map(|s| s.trip_s.iter().map(|(hot, slept)| (slept - hot).max(0.0)))
            .collect();
        if wake.is_empty() {
            return Err("no wake-up measured (the collectives at 2 ranks)".into());
        }
        let floor: Vec<(f64, f64)> = self
            .startup
            .iter()
            .map(|s| (s.ranks.div_ceil(2) as f64, median(&mut s.floor_s.clone())))
            .collect();
        if floor.len() < 2 {
            return Err("the floor at fewer than two numbers of ranks".into());
        }
        let (launch_fixed_s, spawn_s) = least_squares(&floor);
        let smallest = self
            .startup
            .iter()
            .min_by_key(|s| s.ranks)
            .ok_or("no start-up measured")?;
        let mut joined: Vec<f64> = smallest.cpu_s.iter().flatten().map(|c| c[1]).collect();
        if joined.is_empty() {
            return Err("no core times of ranks measured".into());
        }
        let mut later: Vec<f64> = self.contacts.iter().map(|c| c.connect_later_s).collect();
        let connect_s = median(&mut later).max(0.0);
        let mut whole: Vec<f64> = self.contacts.iter().map(|c| c.connect_cpu_s).collect();
        let connect_first_s = (median(&mut whole) - connect_s).max(0.0);
        let admit: Vec<(f64, f64)> = self
            .startup
            .iter()
            .filter(|s| s.ranks <= 16)
            .flat_map(|s| {
                let x = s.ranks as f64;
                s.cpu_s
                    .iter()
                    .filter_map(move |round| Some((x, round.first()?[1])))
            })
            .collect();
        let card = self
            .contacts
            .iter()
            .map(|c| c.card_bytes)
            .max()
            .unwrap_or(0);
        let costs = Costs {
            shm: Link::from_logp(&shm),
            net: Link::from_logp(&net),
            connect_s,
            connect_first_s,
            connect_delay_s: (first - 2.0 * (connect_s + connect_first_s)).max(0.0),
            wake_s: median(&mut wake),
            spin_s: SPIN_S,
            spin_crowded_s: SPIN_CROWDED_S,
            spawn_s,
            launch_fixed_s: launch_fixed_s.max(0.0),
            init_s: median(&mut joined),
            admit_s: least_squares(&admit).1.max(0.0),
            entry_bytes: ENTRY_BYTES,
            card_bytes: card as u32,
            quantum_s: QUANTUM_S,
        };
        costs.check()?;
        Ok(costs)
    }

    /// What the first round trip over a new connection lacks, beyond a steady one, to
    /// cover both ends' core time for their first connection in `costs` (made from
    /// these measurements), seconds (positive: `connect_delay_s` was counted as 0).
    pub fn delay_shortfall(&self, costs: &Costs) -> Result<f64, String> {
        Ok(2.0 * (costs.connect_s + costs.connect_first_s) - self.first_extra_s()?)
    }

    /// The first round trip to a new peer with datagrams off (over the connection it
    /// makes) less a steady one, seconds: the median over rounds.
    fn first_extra_s(&self) -> Result<f64, String> {
        let mut first: Vec<f64> = self
            .contacts
            .iter()
            .map(|c| (c.connect_first_ns - c.connect_steady_ns) * 1e-9)
            .collect();
        if first.is_empty() {
            return Err("no first contact measured".into());
        }
        Ok(median(&mut first))
    }
}

/// The LogP of a `amrq-bench --json signature` run, from its output.
pub fn logp_of(out: &str) -> Result<LogP, String> {
    let o: crate::report::Outcome = out
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("no signature in:\n{out}"))?;
    let get = |k: &str| {
        o.figures
            .iter()
            .find(|f| f.key == k)
            .map(|f| f.median)
            .ok_or_else(|| format!("the signature has no {k}"))
    };
    Ok(LogP {
        o_s: get("o_s_ns")?,
        o_r: get("o_r_ns")?,
        g: get("g_ns")?,
        l: get("l_ns")?,
    })
}
