//! A model of amrq at scales this machine cannot run: a discrete-event simulation
//! ([`sim`]) of the protocols a job runs ([`phases`]: the launch, the rendezvous tree,
//! the job's set-up collectives, a dissemination barrier, the job's end, an
//! all-to-all), fed with costs measured on this machine ([`Costs`]: the LogP
//! figures of `amrq-bench signature` inside a host and across hosts, a connection's
//! core time from `amrq-bench startup`'s connection job, a wake-up from its
//! collectives' job, the launch from the floor's runs, a rank's own start from its
//! CPU time at 2 ranks). Checked against
//! the measured start-up, barrier and all-to-all up to 256 ranks, then run at 1 000 and
//! 10 000 ([`report`]).
//!
//! ```
//! use amrq_bench::model::{phases, Costs, Layout};
//! let costs = Costs::example();
//! // 64 ranks over 4 hosts of 16 cores, a rank per core.
//! let layout = Layout::cluster(64, 16);
//! let b = phases::barrier(&layout, &costs);
//! assert!(b > 0.0 && b < 1e-3, "{b}");
//! ```

pub mod measured;
pub mod phases;
pub mod report;
pub mod sim;

use serde::{Deserialize, Serialize};

/// LogP's costs of one kind of link, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Send overhead.
    pub o_s: f64,
    /// Receive overhead.
    pub o_r: f64,
    /// Gap per 64-byte frame of a sender's stream.
    pub g: f64,
    /// Latency.
    pub l: f64,
}

impl Link {
    /// From `amrq_bench::analysis::LogP` (nanoseconds); a negative figure (a latency
    /// that the overheads overlap, a fit's noise) counts as none.
    ///
    /// ```
    /// use amrq_bench::analysis::LogP;
    /// let l = amrq_bench::model::Link::from_logp(&LogP { l: -5.0, o_s: 50.0, o_r: 60.0, g: 150.0 });
    /// assert!(l.l == 0.0 && (l.o_s - 50e-9).abs() < 1e-18);
    /// ```
    pub fn from_logp(p: &crate::analysis::LogP) -> Self {
        let s = |ns: f64| ns.max(0.0) * 1e-9;
        Self {
            o_s: s(p.o_s),
            o_r: s(p.o_r),
            g: s(p.g),
            l: s(p.l),
        }
    }
}

/// What the model charges, seconds unless named otherwise; measured on this machine by
/// `amrq-bench startup` but for the spins, the quantum and the table entry's bytes
/// (`measured::DERIVATION` says how each was had).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    /// Ranks of one host (shared memory).
    pub shm: Link,
    /// Ranks of two hosts (UCX), and the rendezvous's TCP links.
    pub net: Link,
    /// Core time of each end of a new connection across hosts (UCX's wire-up).
    pub connect_s: f64,
    /// What a rank's first connection costs its core beyond that.
    pub connect_first_s: f64,
    /// What a new connection adds to its first message's latency.
    pub connect_delay_s: f64,
    /// Core time of a rank woken from sleep by a message.
    pub wake_s: f64,
    /// How long a wait spins on its core before it sleeps, on a host with no more
    /// ranks than cores.
    pub spin_s: f64,
    /// The same on a host with more ranks than cores.
    pub spin_crowded_s: f64,
    /// A host's launcher: the time to start one more process (serial per host).
    pub spawn_s: f64,
    /// The launcher's fixed cost (its own start and end, reaping).
    pub launch_fixed_s: f64,
    /// Core time of a rank until it has joined (at 2 ranks): loading, UCX's context
    /// and worker, the shared memory attached, its part of the rendezvous.
    pub init_s: f64,
    /// Core time of rank 0 to admit one joiner (accept, key proof, placement), and of
    /// a tree parent to accept a child.
    pub admit_s: f64,
    /// Bytes per rank of the rendezvous table.
    pub entry_bytes: u32,
    /// Bytes per rank of a card.
    pub card_bytes: u32,
    /// The scheduler's quantum: a rank that computed this long gives its core to one
    /// waiting for it.
    pub quantum_s: f64,
}

impl Costs {
    /// `Err` naming the first cost that is not a finite number ≥ 0.
    ///
    /// ```
    /// let mut c = amrq_bench::model::Costs::example();
    /// assert!(c.check().is_ok());
    /// c.spawn_s = f64::NAN;
    /// assert!(c.check().unwrap_err().contains("spawn_s"));
    /// ```
    pub fn check(&self) -> Result<(), String> {
        let all = [
            ("shm.o_s", self.shm.o_s),
            ("shm.o_r", self.shm.o_r),
            ("shm.g", self.shm.g),
            ("shm.l", self.shm.l),
            ("net.o_s", self.net.o_s),
            ("net.o_r", self.net.o_r),
            ("net.g", self.net.g),
            ("net.l", self.net.l),
            ("connect_s", self.connect_s),
            ("connect_first_s", self.connect_first_s),
            ("connect_delay_s", self.connect_delay_s),
            ("wake_s", self.wake_s),
            ("spin_s", self.spin_s),
            ("spin_crowded_s", self.spin_crowded_s),
            ("spawn_s", self.spawn_s),
            ("launch_fixed_s", self.launch_fixed_s),
            ("init_s", self.init_s),
            ("admit_s", self.admit_s),
            ("quantum_s", self.quantum_s),
        ];
        match all.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            Some((name, v)) => Err(format!(
                "the model's cost {name} came out {v}: measure again (amrq-bench startup, more sizes or rounds)"
            )),
            None => Ok(()),
        }
    }

    /// Plausible figures, for examples and tests (not measured).
    ///
    /// ```
    /// assert!(amrq_bench::model::Costs::example().check().is_ok());
    /// ```
    pub fn example() -> Self {
        Self {
            shm: Link {
                o_s: 20e-9,
                o_r: 30e-9,
                g: 10e-9,
                l: 100e-9,
            },
            net: Link {
                o_s: 200e-9,
                o_r: 300e-9,
                g: 100e-9,
                l: 4e-6,
            },
            connect_s: 1e-3,
            connect_first_s: 0.0,
            connect_delay_s: 1e-3,
            wake_s: 5e-6,
            spin_s: 50e-6,
            spin_crowded_s: 1e-6,
            spawn_s: 1e-3,
            launch_fixed_s: 5e-3,
            init_s: 10e-3,
            admit_s: 100e-6,
            entry_bytes: 150,
            card_bytes: 200,
            quantum_s: 3e-3,
        }
    }
}

/// Where the ranks are: consecutive ranks on a host (as `amrun --hosts` places them),
/// hosts on machines whose cores they share.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Ranks in all.
    pub ranks: usize,
    /// Cores per machine.
    pub cores: usize,
    /// Per rank, its host.
    host: Vec<u32>,
    /// Per host, its machine.
    machine: Vec<u32>,
    /// Per rank, its place among its host's ranks (the launcher starts them in order).
    nth: Vec<u32>,
}

impl Layout {
    /// `per_host[h]` ranks on host h, host h on machine `machine[h]` of `cores` cores.
    ///
    /// ```
    /// use amrq_bench::model::Layout;
    /// // Two hosts of 3 and 2 ranks sharing one machine of 2 cores.
    /// let l = Layout::new(&[3, 2], &[0, 0], 2);
    /// assert_eq!((l.ranks, l.hosts(), l.machines()), (5, 2, 1));
    /// assert_eq!((l.host_of(3), l.nth_on_host(3), l.machine_of(4)), (1, 0, 0));
    /// ```
    pub fn new(per_host: &[usize], machine: &[usize], cores: usize) -> Self {
        let mut host = Vec::new();
        let mut nth = Vec::new();
        for (h, &n) in per_host.iter().enumerate() {
            host.extend(std::iter::repeat_n(h as u32, n));
            nth.extend(0..n as u32);
        }
        Self {
            ranks: host.len(),
            cores,
            host,
            machine: machine.iter().map(|&m| m as u32).collect(),
            nth,
        }
    }

    /// This machine's runs: `ranks` split over two hosts (an odd one more on the
    /// first) that share one machine of `cores` cores.
    ///
    /// ```
    /// let l = amrq_bench::model::Layout::two_hosts_one_machine(5, 2);
    /// assert_eq!((l.host_of(2), l.host_of(3), l.machines()), (0, 1, 1));
    /// ```
    pub fn two_hosts_one_machine(ranks: usize, cores: usize) -> Self {
        let first = ranks.div_ceil(2);
        Self::new(&[first, ranks - first], &[0, 0], cores)
    }

    /// A cluster: a rank per core, `cores` per host, each host its own machine.
    ///
    /// ```
    /// let l = amrq_bench::model::Layout::cluster(1000, 64);
    /// assert_eq!((l.hosts(), l.machines(), l.host_of(999)), (16, 16, 15));
    /// ```
    pub fn cluster(ranks: usize, cores: usize) -> Self {
        let hosts = ranks.div_ceil(cores);
        let per: Vec<usize> = (0..hosts).map(|h| cores.min(ranks - h * cores)).collect();
        let machines: Vec<usize> = (0..hosts).collect();
        Self::new(&per, &machines, cores)
    }

    /// Rank `r`'s host.
    pub fn host_of(&self, r: usize) -> usize {
        self.host[r] as usize
    }

    /// Rank `r`'s machine.
    pub fn machine_of(&self, r: usize) -> usize {
        self.machine[self.host_of(r)] as usize
    }

    /// Hosts in all.
    pub fn hosts(&self) -> usize {
        self.machine.len()
    }

    /// Machines in all.
    pub fn machines(&self) -> usize {
        self.machine
            .iter()
            .map(|&m| m as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// Rank `r`'s place among its host's ranks.
    pub fn nth_on_host(&self, r: usize) -> usize {
        self.nth[r] as usize
    }
}
