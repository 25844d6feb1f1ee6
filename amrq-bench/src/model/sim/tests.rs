use super::*;
use crate::model::Link;

/// A program given as one list of steps per rank.
struct Lists(Vec<Vec<Step>>);

impl Program for Lists {
    fn step(&self, rank: Rank, pc: usize) -> Option<Step> {
        self.0[rank].get(pc).copied()
    }
}

fn costs() -> Costs {
    let link = |x: f64| Link {
        o_s: x,
        o_r: 2.0 * x,
        g: 3.0 * x,
        l: 10.0 * x,
    };
    Costs {
        shm: link(1e-9),
        net: link(1e-6),
        connect_s: 1e-3,
        connect_first_s: 0.0,
        connect_delay_s: 2e-3,
        wake_s: 5e-6,
        spin_s: 0.0,
        spin_crowded_s: 0.0,
        quantum_s: 1e-3,
        ..Costs::example()
    }
}

fn send(to: Rank, tag: u32) -> Step {
    Step::Send {
        to,
        tag,
        bytes: 64,
        tcp: false,
    }
}

fn recv(tag: u32) -> Step {
    Step::Recv { tag, count: 1 }
}

/// Two hosts, each its own machine of one core.
fn apart() -> Layout {
    Layout::new(&[1, 1], &[0, 1], 1)
}

#[test]
fn a_round_trip_costs_both_overheads_latency_and_one_wake_up_each_way() {
    let c = costs();
    let p = Lists(vec![
        vec![send(1, 1), recv(2), Step::Mark(0)],
        vec![recv(1), send(0, 2)],
    ]);
    let run = run(&apart(), &c, &p, &[0.0, 0.0], true);
    let n = &c.net;
    let want = 2.0 * (n.o_s + n.l + n.o_r + c.wake_s);
    assert!(
        (run.marks[0][0] - want).abs() < 1e-12,
        "{} vs {want}",
        run.marks[0][0]
    );
}

#[test]
fn a_burst_leaves_at_the_gap() {
    let c = costs();
    let k = 100;
    let mut sends = vec![send(1, 1); k];
    sends.push(recv(2));
    let p = Lists(vec![
        sends,
        vec![
            Step::Recv {
                tag: 1,
                count: k as u32,
            },
            send(0, 2),
        ],
    ]);
    let run = run(&apart(), &c, &p, &[0.0, 0.0], true);
    let n = &c.net;
    // The last message leaves (k − 1) gaps after the first (g > o_s); rank 1 takes
    // what is there each time it wakes, the last alone, and answers.
    let last = n.o_s + (k - 1) as f64 * n.g + n.l;
    let want = last + c.wake_s + n.o_r + n.o_s;
    assert!(
        (run.ended[1] - want).abs() < 1e-12,
        "{} vs {want}",
        run.ended[1]
    );
    // It woke more than once, fewer times than messages came (it takes them in batches).
    let wakes = (run.cpu[1] - k as f64 * n.o_r - n.o_s) / c.wake_s;
    assert!(wakes > 1.5 && wakes < k as f64, "{wakes}");
}

#[test]
fn ranks_that_share_a_core_take_turns() {
    let c = costs();
    let work = vec![Step::Cpu(10e-3)];
    let p = Lists(vec![work.clone(), work.clone(), work]);
    let one_core = Layout::new(&[3], &[0], 1);
    let run = run(&one_core, &c, &p, &[0.0; 3], true);
    assert!((run.makespan() - 30e-3).abs() < 1e-9, "{}", run.makespan());
    // In quanta: none ends before the others have had most of their turns.
    let first = run.ended.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(first > 25e-3, "{:?}", run.ended);
    let two_cores = Layout::new(&[3], &[0], 2);
    let run = super::run(&two_cores, &c, &p, &[0.0; 3], true);
    assert!(run.makespan() < 21e-3, "{}", run.makespan());
}

#[test]
fn a_message_that_is_there_wakes_nobody() {
    let c = costs();
    // Rank 1 computes long enough for the message to be there when it looks.
    let p = Lists(vec![vec![send(1, 1)], vec![Step::Cpu(1e-3), recv(1)]]);
    let run = run(&apart(), &c, &p, &[0.0, 0.0], true);
    assert!(
        (run.cpu[1] - (1e-3 + c.net.o_r)).abs() < 1e-12,
        "{:?}",
        run.cpu
    );
}

#[test]
fn a_wait_that_ends_within_its_spin_wakes_nobody_and_costs_its_core_time() {
    let c = Costs {
        spin_s: 1e-3,
        ..costs()
    };
    let p = Lists(vec![
        vec![send(1, 1), recv(2), Step::Mark(0)],
        vec![recv(1), send(0, 2)],
    ]);
    let run = run(&apart(), &c, &p, &[0.0, 0.0], true);
    let n = &c.net;
    let want = 2.0 * (n.o_s + n.l + n.o_r);
    assert!(
        (run.marks[0][0] - want).abs() < 1e-12,
        "{}",
        run.marks[0][0]
    );
    // Rank 1 spun from its start until the message came.
    assert!(
        (run.cpu[1] - (n.o_s + n.l + n.o_r + n.o_s)).abs() < 1e-12,
        "{:?}",
        run.cpu
    );
}

#[test]
fn two_ranks_that_spin_exchange_without_waking() {
    let c = Costs {
        spin_s: 1e-3,
        ..costs()
    };
    let rounds = 4;
    let prog = |me: Rank| {
        let mut v = Vec::new();
        for k in 0..rounds {
            v.push(send(1 - me, k));
            v.push(recv(k));
        }
        v.push(Step::Mark(0));
        v
    };
    let p = Lists(vec![prog(0), prog(1)]);
    // Two hosts on one machine of two cores, as this machine's runs.
    let l = Layout::new(&[1, 1], &[0, 0], 2);
    let run = run(&l, &c, &p, &[0.0, 0.0], true);
    let n = &c.net;
    let want = f64::from(rounds) * (n.o_s + n.l + n.o_r);
    assert!(
        (run.marks[0][0] - want).abs() < 1e-9,
        "{} vs {want}",
        run.marks[0][0]
    );
}

#[test]
fn any_message_wakes_a_sleeping_rank_which_sleeps_again() {
    let c = costs();
    // Rank 1 waits for tag 2; a message of tag 1 comes first, then tag 2 later.
    let p = Lists(vec![
        vec![send(1, 1), Step::Cpu(1e-3), send(1, 2)],
        vec![recv(2), recv(1)],
    ]);
    let run = run(&apart(), &c, &p, &[0.0, 0.0], true);
    let n = &c.net;
    // Two wakes: one for each message; both taken.
    let cpu = 2.0 * c.wake_s + 2.0 * n.o_r;
    assert!((run.cpu[1] - cpu).abs() < 1e-12, "{:?}", run.cpu);
}

/// Rank 0 sends `to` its first messages, as datagrams, and waits for a reply; both
/// mark the end.
fn first_messages(to: Rank) -> (Vec<Step>, Vec<Step>) {
    let n = FIRST_MESSAGES as usize;
    let mut sender = vec![send(to, 9); n];
    sender.extend([recv(8), Step::Mark(0)]);
    let receiver = vec![
        Step::Recv {
            tag: 9,
            count: n as u32,
        },
        send(0, 8),
        Step::Mark(0),
    ];
    (sender, receiver)
}

/// `programs`, each after its part of `first_messages` (rank 0 to every other).
fn after_first_messages(programs: Vec<Vec<Step>>) -> Lists {
    let mut lists: Vec<Vec<Step>> = vec![Vec::new(); programs.len()];
    for to in 1..programs.len() {
        let (s, r) = first_messages(to);
        lists[0].extend(s.into_iter().filter(|s| !matches!(s, Step::Mark(_))));
        lists[to].extend(r);
    }
    lists[0].push(Step::Mark(0));
    for (l, p) in lists.iter_mut().zip(programs) {
        l.extend(p);
    }
    Lists(lists)
}

#[test]
fn a_pairs_first_messages_make_no_connection() {
    let c = costs();
    let p = after_first_messages(vec![vec![], vec![]]);
    let (new, known) = (
        run(&apart(), &c, &p, &[0.0, 0.0], false),
        run(&apart(), &c, &p, &[0.0, 0.0], true),
    );
    assert_eq!(new.cpu, known.cpu);
    assert_eq!(new.marks, known.marks);
}

#[test]
fn a_connection_is_paid_once_at_each_end() {
    let c = costs();
    let before = after_first_messages(vec![vec![], vec![]]);
    let p = after_first_messages(vec![
        vec![send(1, 1), send(1, 1), recv(2)],
        vec![recv(1), recv(1), send(0, 2)],
    ]);
    let at = |p: &Lists| run(&apart(), &c, p, &[0.0, 0.0], false).cpu;
    let (cpu, base) = (at(&p), at(&before));
    let n = &c.net;
    let rank0 = c.connect_s + 2.0 * n.o_s + n.o_r + c.wake_s;
    assert!((cpu[0] - base[0] - rank0).abs() < 1e-12, "{cpu:?} {base:?}");
    let rank1 = c.connect_s + 2.0 * n.o_r + n.o_s + c.wake_s;
    assert!((cpu[1] - base[1] - rank1).abs() < 1e-12, "{cpu:?} {base:?}");
}

#[test]
fn a_new_connection_delays_its_first_message() {
    let c = costs();
    let p = after_first_messages(vec![
        vec![send(1, 1), send(1, 1)],
        vec![recv(1), Step::Mark(1), recv(1)],
    ]);
    let run = run(&apart(), &c, &p, &[0.0, 0.0], false);
    let n = &c.net;
    let first = c.connect_s + n.o_s + c.connect_delay_s + n.l;
    let want = run.marks[0][0] + first + c.wake_s + c.connect_s + n.o_r;
    assert!(
        (run.marks[1][1] - want).abs() < 1e-12,
        "{} vs {want}",
        run.marks[1][1]
    );
}

#[test]
fn a_ranks_first_connection_costs_it_more_than_its_later_ones() {
    let c = Costs {
        connect_first_s: 4e-3,
        ..costs()
    };
    // Rank 0 on one host connects to ranks 1 and 2 on another.
    let l = Layout::new(&[1, 2], &[0, 1], 2);
    let at = |p: &Lists| run(&l, &c, p, &[0.0; 3], false).cpu;
    let base = at(&after_first_messages(vec![vec![], vec![], vec![]]));
    let cpu = at(&after_first_messages(vec![
        vec![send(1, 1), send(2, 1)],
        vec![recv(1)],
        vec![recv(1)],
    ]));
    let (n, both) = (&c.net, 2.0 * c.connect_s + c.connect_first_s);
    assert!(
        (cpu[0] - base[0] - (2.0 * n.o_s + both)).abs() < 1e-12,
        "{cpu:?} {base:?}"
    );
    let end = c.connect_s + c.connect_first_s + c.wake_s + n.o_r;
    assert!((cpu[1] - base[1] - end).abs() < 1e-12, "{cpu:?} {base:?}");
}
