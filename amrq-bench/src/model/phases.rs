//! The protocols a job runs, as the model's rank programs, each as amrq runs it:
//! - the rendezvous: rank 0 admits each joiner in turn; each joiner then links to its
//!   parent in a fan-out-8 heap (the parent accepts its children in turn), the table
//!   of P entries goes down the tree, the cards go up and back down it (TCP);
//! - the job's set-up collectives (`Setup::start`): `Am::new`'s all-gather of the
//!   handler tables up and down the same heap over the conduit, then the one symmetric
//!   allocation of Split-C's counters and the collectives' mailbox (a barrier, an
//!   all-gather of its offset, a barrier);
//! - the program's barrier: a dissemination barrier, ⌈log2 P⌉ rounds;
//! - the job's end: two counts up and down the heap, and `RETURNED` to ⌈log2 P⌉ ranks;
//! - an all-to-all: a message from every rank to every other, sent in turn from the
//!   next rank on.
//!
//! Rank 0 admits joiners in the order they come, but the model's rendezvous tree is a
//! heap over ranks, where the real one is a heap over the order of admission: here a
//! child admitted before its parent waits for it.

use super::sim::{self, Program, Rank, Step};
use super::{Costs, Layout};
use amrq::util::heap_tree::{children_of, parent_of};

/// The marks a start-up program passes, in order.
pub const MARKS: [&str; 5] = ["ready to join", "joined", "started", "barrier", "ended"];

/// One phase of a program: how many steps it has for a rank, and each step.
struct Phase<'a> {
    len: Box<dyn Fn(Rank) -> usize + 'a>,
    step: Box<dyn Fn(Rank, usize) -> Step + 'a>,
}

/// Phases run one after another.
struct Seq<'a>(Vec<Phase<'a>>);

impl Program for Seq<'_> {
    fn step(&self, rank: Rank, mut pc: usize) -> Option<Step> {
        for p in &self.0 {
            let n = (p.len)(rank);
            if pc < n {
                return Some((p.step)(rank, pc));
            }
            pc -= n;
        }
        None
    }
}

fn fixed<'a>(steps: Vec<Step>) -> Phase<'a> {
    let n = steps.len();
    Phase {
        len: Box::new(move |_| n),
        step: Box::new(move |_, i| steps[i]),
    }
}

/// Ranks in `r`'s part of the heap (itself included).
fn subtree(r: Rank, n: usize) -> usize {
    let (mut first, mut width, mut count) = (r, 1usize, 0);
    while first < n {
        count += (first + width).min(n) - first;
        first = first * 8 + 1;
        width *= 8;
    }
    count
}

fn send(to: Rank, tag: u32, bytes: u32, tcp: bool) -> Step {
    Step::Send {
        to,
        tag,
        bytes,
        tcp,
    }
}

/// Rank 0 admits every other rank in turn; each sends its hello and waits.
fn admission<'a>(n: usize, costs: &'a Costs, tag: u32) -> Phase<'a> {
    Phase {
        len: Box::new(move |r| if r == 0 { 3 * (n - 1) } else { 2 }),
        step: Box::new(move |r, i| match (r, i % 3, i) {
            (0, 0, _) => Step::Recv { tag, count: 1 },
            (0, 1, _) => Step::Cpu(costs.admit_s),
            (0, _, _) => Step::Answer {
                tag: tag + 1,
                bytes: 128,
            },
            (_, _, 0) => send(0, tag, 128, true),
            _ => Step::Recv {
                tag: tag + 1,
                count: 1,
            },
        }),
    }
}

/// Each rank links to its parent, then accepts its children in turn.
fn tree_links<'a>(n: usize, costs: &'a Costs, tag: u32) -> Phase<'a> {
    let up = |r: Rank| if r == 0 { 0 } else { 2 };
    Phase {
        len: Box::new(move |r| up(r) + 3 * children_of(r, n).count()),
        step: Box::new(move |r, i| {
            if i < up(r) {
                return match i {
                    0 => send(parent_of(r).unwrap_or(0), tag, 128, true),
                    _ => Step::Recv {
                        tag: tag + 1,
                        count: 1,
                    },
                };
            }
            match (i - up(r)) % 3 {
                0 => Step::Recv { tag, count: 1 },
                1 => Step::Cpu(costs.admit_s),
                _ => Step::Answer {
                    tag: tag + 1,
                    bytes: 128,
                },
            }
        }),
    }
}

/// `bytes` from the root down the heap: each rank takes it from its parent and sends
/// it to its children.
fn down<'a>(n: usize, tag: u32, bytes: u32, tcp: bool) -> Phase<'a> {
    let first = |r: Rank| usize::from(r != 0);
    Phase {
        len: Box::new(move |r| first(r) + children_of(r, n).count()),
        step: Box::new(move |r, i| match i.checked_sub(first(r)) {
            None => Step::Recv { tag, count: 1 },
            Some(k) => {
                let child = children_of(r, n).nth(k).expect("k < the children's count");
                send(child, tag, bytes, tcp)
            }
        }),
    }
}

/// `bytes_per_rank` of every rank up the heap: each rank takes its children's parts
/// and sends its part's to its parent.
fn up<'a>(n: usize, tag: u32, bytes_per_rank: u32, tcp: bool) -> Phase<'a> {
    let has_kids = move |r: Rank| usize::from(children_of(r, n).next().is_some());
    Phase {
        len: Box::new(move |r| has_kids(r) + usize::from(r != 0)),
        step: Box::new(move |r, i| {
            if i < has_kids(r) {
                let count = children_of(r, n).count() as u32;
                return Step::Recv { tag, count };
            }
            let bytes = (subtree(r, n) as u32).saturating_mul(bytes_per_rank);
            send(parent_of(r).unwrap_or(0), tag, bytes, tcp)
        }),
    }
}

/// ⌈log2 n⌉.
fn rounds(n: usize) -> usize {
    n.next_power_of_two().trailing_zeros() as usize
}

/// A dissemination barrier: in round k, a message to r + 2^k and one from r − 2^k.
fn dissemination<'a>(n: usize, tag: u32) -> Phase<'a> {
    Phase {
        len: Box::new(move |_| 2 * rounds(n)),
        step: Box::new(move |r, i| {
            let k = (i / 2) as u32;
            match i % 2 {
                0 => send((r + (1 << k)) % n, tag + k, 64, false),
                _ => Step::Recv {
                    tag: tag + k,
                    count: 1,
                },
            }
        }),
    }
}

/// The end's `RETURNED`s to the ranks whose barrier waits on this one.
fn returned<'a>(n: usize, tag: u32) -> Phase<'a> {
    Phase {
        len: Box::new(move |_| rounds(n)),
        step: Box::new(move |r, k| send((r + (1 << k)) % n, tag, 64, false)),
    }
}

/// A message from every rank to every other, then every one taken.
fn all_to_all_phase<'a>(n: usize, tag: u32) -> Phase<'a> {
    Phase {
        len: Box::new(move |_| n),
        step: Box::new(move |r, i| match i {
            i if i + 1 < n => send((r + 1 + i) % n, tag, 64, false),
            _ => Step::Recv {
                tag,
                count: n as u32 - 1,
            },
        }),
    }
}

/// The predicted start-up of ranks that join, make one barrier and return.
#[derive(Debug, Clone)]
pub struct Startup {
    /// `amrun`'s wall time: the launcher's fixed cost and the last rank's end.
    pub wall_s: f64,
    /// When the last rank passed each of [`MARKS`].
    pub marks_s: Vec<f64>,
    /// Core seconds per rank, the mean.
    pub cpu_per_rank_s: f64,
    /// Events the simulation handled.
    pub events: u64,
}

/// The start-up of a job that joins, makes one barrier and returns.
///
/// ```
/// use amrq_bench::model::{phases, Costs, Layout};
/// let s = phases::startup(&Layout::cluster(128, 64), &Costs::example());
/// assert_eq!(s.marks_s.len(), phases::MARKS.len());
/// assert!(s.marks_s[1] < s.wall_s); // joined before the end
/// ```
pub fn startup(layout: &Layout, costs: &Costs) -> Startup {
    let n = layout.ranks;
    let (entry, card) = (costs.entry_bytes, costs.card_bytes);
    let table = (n as u32).saturating_mul(entry);
    let cards = (n as u32).saturating_mul(card);
    let mut phases = vec![
        fixed(vec![Step::Cpu(costs.init_s), Step::Mark(0)]),
        admission(n, costs, 10),
        tree_links(n, costs, 20),
        down(n, 30, table, true),
        up(n, 40, card, true),
        down(n, 50, cards, true),
        fixed(vec![Step::Mark(1)]),
    ];
    phases.extend(set_up(n, 60));
    phases.push(fixed(vec![Step::Mark(2)]));
    phases.push(dissemination(n, 100));
    phases.push(fixed(vec![Step::Mark(3)]));
    for k in 0..2 {
        phases.push(up(n, 200 + 2 * k, 64, false));
        phases.push(down(n, 201 + 2 * k, 64, false));
    }
    phases.push(returned(n, 210));
    phases.push(fixed(vec![Step::Mark(4)]));
    let start: Vec<f64> = (0..n)
        .map(|r| layout.nth_on_host(r) as f64 * costs.spawn_s)
        .collect();
    let run = sim::run(layout, costs, &Seq(phases), &start, false);
    Startup {
        wall_s: costs.launch_fixed_s + run.makespan(),
        marks_s: (0..MARKS.len() as u8).map(|m| run.last_mark(m)).collect(),
        cpu_per_rank_s: run.cpu.iter().sum::<f64>() / n as f64,
        events: run.events,
    }
}

/// Barriers per timing, as many as the measured job times: the mean is what the
/// model gives.
const BARRIERS: u32 = crate::collectives::BARRIERS as u32;

/// Where the set-up barriers' tags begin.
const SET_UP_BARRIERS: u32 = 1 << 24;

/// The job's set-up collectives (`Setup::start`): an all-gather up and down the heap
/// (`Am::new`'s), then a dissemination barrier, another all-gather and another barrier
/// (the symmetric allocation's); tags `base` to `base + 3`, and the barriers' of their
/// own, beyond every other phase's.
fn set_up<'a>(n: usize, base: u32) -> Vec<Phase<'a>> {
    vec![
        up(n, base, 64, false),
        down(n, base + 1, 64, false),
        dissemination(n, SET_UP_BARRIERS + 1000 * base),
        up(n, base + 2, 64, false),
        down(n, base + 3, 64, false),
        dissemination(n, SET_UP_BARRIERS + 1000 * base + 500),
    ]
}

/// Rank 0's mean barrier, as a program times it after its start and a first barrier:
/// as many back to back as the measured job times (`collectives::BARRIERS`).
pub fn barrier(layout: &Layout, costs: &Costs) -> f64 {
    let n = layout.ranks;
    let mut phases = set_up(n, 10);
    phases.push(dissemination(n, 100));
    phases.push(fixed(vec![Step::Mark(0)]));
    phases.extend((1..=BARRIERS).map(|b| dissemination(n, 100 * (b + 1))));
    phases.push(fixed(vec![Step::Mark(1)]));
    let run = sim::run(layout, costs, &Seq(phases), &vec![0.0; n], false);
    (run.marks[0][1] - run.marks[0][0]) / f64::from(BARRIERS)
}

/// An all-to-all as a program times it after its start and a barrier: the slowest
/// rank's time from its barrier's end to its last message taken. `again`: the
/// all-to-all after a first one. A pair sends one message each way: datagrams, no
/// connection.
///
/// ```
/// use amrq_bench::model::{phases, Costs, Layout};
/// let (c, l) = (Costs::example(), Layout::cluster(64, 16));
/// // Each rank sends 48 messages across hosts at least.
/// assert!(phases::all_to_all(&l, &c, false) > 48.0 * c.net.o_s);
/// ```
pub fn all_to_all(layout: &Layout, costs: &Costs, again: bool) -> f64 {
    all_to_all_with(layout, costs, again, false)
}

/// [`all_to_all`], every pair across hosts connected from the start if `connected`.
fn all_to_all_with(layout: &Layout, costs: &Costs, again: bool, connected: bool) -> f64 {
    let n = layout.ranks;
    let mut phases = set_up(n, 10);
    phases.push(dissemination(n, 100));
    if again {
        phases.push(all_to_all_phase(n, 1));
        phases.push(dissemination(n, 200));
    }
    phases.push(fixed(vec![Step::Mark(0)]));
    phases.push(all_to_all_phase(n, 2));
    phases.push(fixed(vec![Step::Mark(1)]));
    let run = sim::run(layout, costs, &Seq(phases), &vec![0.0; n], connected);
    run.marks.iter().map(|m| m[1] - m[0]).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtree_counts_the_heap() {
        assert_eq!(subtree(0, 100), 100);
        assert_eq!(subtree(1, 10), 2); // 1 and 9
        assert_eq!(subtree(8, 10), 1);
        let n = 1000;
        let sum: usize = children_of(0, n).map(|c| subtree(c, n)).sum();
        assert_eq!(sum, n - 1);
    }

    #[test]
    fn a_start_up_passes_every_mark_in_order_and_grows_with_the_ranks() {
        let c = Costs::example();
        let small = startup(&Layout::two_hosts_one_machine(8, 2), &c);
        let big = startup(&Layout::two_hosts_one_machine(64, 2), &c);
        for s in [&small, &big] {
            assert!(s.marks_s.windows(2).all(|w| w[0] <= w[1]), "{s:?}");
            assert!(s.wall_s > s.marks_s[4]);
        }
        assert!(big.wall_s > small.wall_s);
        // 64 ranks on 2 cores: at least their start's core time, shared by two cores.
        assert!(big.wall_s > 64.0 * c.init_s / 2.0);
    }

    #[test]
    fn an_all_to_all_makes_no_connection() {
        let c = Costs::example();
        let l = Layout::cluster(32, 8);
        // A few messages a pair: datagrams, as if every pair were connected already.
        let connected = all_to_all_with(&l, &c, false, true);
        assert_eq!(all_to_all(&l, &c, false), connected);
    }

    #[test]
    fn a_barrier_on_one_core_per_rank_is_its_rounds_of_messages() {
        let c = Costs::example();
        let l = Layout::cluster(16, 16); // one host: shared memory only
        let b = barrier(&l, &c);
        let round = c.shm.o_s + c.shm.l + c.shm.o_r;
        // Rank 0's mean over back-to-back barriers: its first rounds may find their
        // messages there already.
        assert!(b >= 3.0 * round, "{b}");
        assert!(b <= 4.0 * (round + c.wake_s) * 1.5, "{b}");
    }
}
