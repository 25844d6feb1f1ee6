//! The discrete-event engine: ranks that run programs of steps (compute, send, receive)
//! on the cores of their machine, and messages that cross links with LogP's costs.
//!
//! A rank holds a core while it computes or pays an overhead, and while it waits a
//! while for a message that is not there (it spins); then it sleeps, giving the core
//! up, and the next message that comes for it wakes it (a wake-up's cost on its core).
//! Any message ends a wait: the rank handles it and looks again for what it waits
//! for. A rank that has run a scheduling quantum while others wait for a core gives
//! it up too. A machine's ready ranks take its free cores first come, first served. A
//! message costs its sender `o_s` (and, when a pair across hosts has spent its first
//! messages, sent as datagrams at a message's costs, a connection's set-up at each
//! end), leaves the sender's link no sooner than `g` per
//! 64-byte frame after its last one, arrives `L` later, and costs its receiver `o_r`
//! when the receiver takes it.

use super::{Costs, Layout};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A rank of the model.
pub type Rank = usize;

/// One step of a rank's program.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Computes this many seconds on a core.
    Cpu(f64),
    /// Sends `bytes` with `tag` to `to`; `tcp`: over the rendezvous's TCP links (the
    /// network's costs whatever the hosts, and no connection set-up: the program pays
    /// for its links itself).
    Send {
        /// The receiver.
        to: Rank,
        /// What the receiver's [`Step::Recv`] waits for.
        tag: u32,
        /// Its size.
        bytes: u32,
        /// Over the rendezvous's TCP links.
        tcp: bool,
    },
    /// Sends `bytes` with `tag` over TCP to the sender of the message last taken.
    Answer {
        /// What the receiver waits for.
        tag: u32,
        /// Its size.
        bytes: u32,
    },
    /// Takes `count` messages of `tag` (from anyone), waiting for them.
    Recv {
        /// What it takes.
        tag: u32,
        /// How many.
        count: u32,
    },
    /// Notes the time at which the rank passes here (mark `n` of the rank).
    Mark(u8),
}

/// A rank's program, step by step: steps are made when reached, so that a program of
/// P sends per rank needs no P² memory.
pub trait Program {
    /// Step `pc` of `rank`, `None` once it is done.
    fn step(&self, rank: Rank, pc: usize) -> Option<Step>;
}

/// What a run gives: when each rank passed each mark, when each ended, and the CPU
/// time each used.
#[derive(Debug, Clone)]
pub struct Run {
    /// Per rank, the time of each mark it passed (index: the mark's number).
    pub marks: Vec<Vec<f64>>,
    /// Per rank, when its program ended.
    pub ended: Vec<f64>,
    /// Per rank, seconds of core time it used.
    pub cpu: Vec<f64>,
    /// Events the engine scheduled.
    pub events: u64,
}

impl Run {
    /// The time the last rank passed mark `n` (`NaN` if one never did).
    pub fn last_mark(&self, n: u8) -> f64 {
        let at = |m: &Vec<f64>| m.get(usize::from(n)).copied().unwrap_or(f64::NAN);
        let later = |a: f64, b: f64| {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        };
        self.marks.iter().map(at).fold(0.0, later)
    }

    /// The time the last rank ended.
    pub fn makespan(&self) -> f64 {
        self.ended.iter().copied().fold(0.0, f64::max)
    }
}

#[derive(Debug, Clone, Copy)]
enum Event {
    /// A rank's compute slice ended: it goes on (or yields its core).
    Slice(Rank),
    /// A rank's spin may have run out: it sleeps if it has (one such event at a time
    /// per rank; a message handled meanwhile put the end later).
    SpinEnd(Rank),
    /// The first message in flight of a rank's outbox (`delayed`: of those behind a
    /// connection's set-up) arrives, if the outbox's head is still the one this event
    /// was made for (`version`).
    Deliver {
        from: Rank,
        delayed: bool,
        version: u32,
    },
}

/// A message in flight.
#[derive(Debug, Clone, Copy)]
struct Flight {
    at: f64,
    to: u32,
    tag: u32,
    /// It crossed the network (costs the network's `o_r`).
    net: bool,
    /// It carries the receiver's half of a new connection.
    connect: bool,
}

/// A rank's messages in flight, in order of arrival: the queue holds one event per
/// outbox (its head), not one per message, so that it stays as small as the job.
#[derive(Debug, Default)]
struct Outbox {
    flights: VecDeque<Flight>,
    version: u32,
}

/// What a rank waits for, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wait {
    /// Spinning on its core since this time.
    Spinning(f64),
    /// Asleep: the message that ends the wait wakes it.
    Asleep,
}

#[derive(Debug, Default)]
struct RankState {
    pc: usize,
    /// Messages arrived and not yet taken: per tag (few at a time), the senders in
    /// order, the top bit set for those that crossed the network.
    inbox: Vec<(u32, VecDeque<u32>)>,
    /// The sender of the message last taken.
    last_from: Rank,
    /// Core time owed before its next step (a wake-up, a connection's receiving half).
    debt: f64,
    /// Waiting for a message of a tag, and how.
    waiting: Option<(u32, Wait)>,
    /// Messages the current receive has taken so far.
    taken: u32,
    /// When its spin runs out, if it spins.
    spin_until: f64,
    /// A `SpinEnd` of its is queued.
    spin_queued: bool,
    /// Core time since it took its core.
    ran: f64,
    /// When its link is free for its next message.
    link_free: f64,
    /// Per peer across hosts: the datagrams it sent there, or [`CONNECTED`].
    sent: Vec<u8>,
    /// It has made or taken a connection across hosts (the first costs more).
    connected_once: bool,
    /// Connections still being set up: the peer, when the first message gets through
    /// (later ones queue behind it), and when it arrives (none arrives before it).
    wiring: Vec<(Rank, f64, f64)>,
    /// Messages in flight: sent at once, and delayed by a connection's set-up.
    outbox: [Outbox; 2],
    marks: Vec<f64>,
    ended: f64,
    cpu: f64,
    /// Its program is over.
    done: bool,
}

/// The top bit of an inbox entry: the message crossed the network.
const NET: u32 = 1 << 31;

/// Sends made in one slice at most: a rank's long burst is simulated as time passes,
/// not all scheduled at once (P² arrivals in the queue of an all-to-all).
const SENDS_PER_SLICE: usize = 64;

/// A pair's first messages, sent as datagrams before it connects.
const FIRST_MESSAGES: u64 = amrq::conduit::ucx::FIRST_MESSAGES;
/// [`RankState::sent`] of a pair that connected.
const CONNECTED: u8 = u8::MAX;
const _: () = assert!(FIRST_MESSAGES < CONNECTED as u64);

/// A queued event: by time, then first come first served.
#[derive(Debug)]
struct Queued {
    at: f64,
    seq: u64,
    event: Event,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.at.total_cmp(&o.at).then(self.seq.cmp(&o.seq))
    }
}

/// Runs `program` on every rank of `layout`, each starting at `start[rank]` seconds,
/// with `costs`; `connected`: pairs across hosts are connected already.
///
/// ```
/// use amrq_bench::model::sim::{run, Program, Rank, Step};
/// use amrq_bench::model::{Costs, Layout};
/// /// Rank 0 computes a millisecond, then tells rank 1.
/// struct Tell;
/// impl Program for Tell {
///     fn step(&self, rank: Rank, pc: usize) -> Option<Step> {
///         let send = Step::Send { to: 1, tag: 1, bytes: 8, tcp: false };
///         match (rank, pc) {
///             (0, 0) => Some(Step::Cpu(1e-3)),
///             (0, 1) => Some(send),
///             (1, 0) => Some(Step::Recv { tag: 1, count: 1 }),
///             _ => None,
///         }
///     }
/// }
/// let r = run(&Layout::cluster(2, 2), &Costs::example(), &Tell, &[0.0, 0.0], true);
/// assert!(r.ended[1] > 1e-3 && r.makespan() == r.ended[1]);
/// ```
pub fn run(
    layout: &Layout,
    costs: &Costs,
    program: &dyn Program,
    start: &[f64],
    connected: bool,
) -> Run {
    let mut e = Engine::new(layout, costs, program, connected);
    for (r, &t) in start.iter().enumerate() {
        e.push(t, Event::Slice(r));
        e.ranks[r].ran = f64::INFINITY; // not on a core yet: the first slice asks for one
    }
    e.go();
    if let Some(r) = e.ranks.iter().position(|st| !st.done) {
        // A program bug (a receive whose messages never come), not a prediction.
        panic!(
            "rank {r} of the model never ended: it waits for {:?}",
            e.ranks[r].waiting
        );
    }
    Run {
        marks: e.ranks.iter().map(|r| r.marks.clone()).collect(),
        ended: e.ranks.iter().map(|r| r.ended).collect(),
        cpu: e.ranks.iter().map(|r| r.cpu).collect(),
        events: e.seq,
    }
}

struct Engine<'a> {
    layout: &'a Layout,
    costs: &'a Costs,
    program: &'a dyn Program,
    ranks: Vec<RankState>,
    /// Per machine: free cores and the ranks waiting for one.
    free: Vec<usize>,
    ready: Vec<VecDeque<Rank>>,
    /// Per host: its ranks outnumber its machine's cores (waits spin briefly).
    crowded: Vec<bool>,
    queue: BinaryHeap<Reverse<Queued>>,
    now: f64,
    seq: u64,
}

impl<'a> Engine<'a> {
    fn new(layout: &'a Layout, costs: &'a Costs, program: &'a dyn Program, all: bool) -> Self {
        let ranks = (0..layout.ranks)
            .map(|_| RankState {
                sent: vec![if all { CONNECTED } else { 0 }; layout.ranks],
                ..RankState::default()
            })
            .collect();
        let mut per_host = vec![0usize; layout.hosts()];
        (0..layout.ranks).for_each(|r| per_host[layout.host_of(r)] += 1);
        Self {
            layout,
            costs,
            program,
            ranks,
            free: vec![layout.cores; layout.machines()],
            ready: (0..layout.machines()).map(|_| VecDeque::new()).collect(),
            crowded: per_host.iter().map(|&n| n > layout.cores).collect(),
            queue: BinaryHeap::new(),
            now: 0.0,
            seq: 0,
        }
    }

    fn push(&mut self, at: f64, event: Event) {
        self.seq += 1;
        let seq = self.seq;
        self.queue.push(Reverse(Queued { at, seq, event }));
    }

    fn go(&mut self) {
        while let Some(Reverse(q)) = self.queue.pop() {
            self.now = q.at;
            match q.event {
                Event::Slice(r) => self.slice_ended(r),
                Event::SpinEnd(r) => self.spin_ended(r),
                Event::Deliver {
                    from,
                    delayed,
                    version,
                } => self.deliver(from, delayed, version),
            }
        }
    }

    /// A rank's slice ended (or it starts): it goes on if it holds a core and has not
    /// used up its quantum while others wait; otherwise it asks for a core.
    fn slice_ended(&mut self, r: Rank) {
        let m = self.layout.machine_of(r);
        let on_core = self.ranks[r].ran.is_finite();
        if self.ranks[r].done {
            // Its last compute is over: the core is free.
            self.ranks[r].ran = f64::INFINITY;
            return self.release(m);
        }
        if on_core && (self.ranks[r].ran < self.costs.quantum_s || self.ready[m].is_empty()) {
            if self.ranks[r].ran >= self.costs.quantum_s {
                self.ranks[r].ran = 0.0;
            }
            self.advance(r);
            return;
        }
        if on_core {
            self.release(m);
        }
        self.ranks[r].ran = f64::INFINITY;
        self.ready[m].push_back(r);
        self.dispatch(m);
    }

    /// Gives a core of machine `m` back and hands it on.
    fn release(&mut self, m: usize) {
        self.free[m] += 1;
        self.dispatch(m);
    }

    /// Ready ranks of machine `m` take its free cores.
    fn dispatch(&mut self, m: usize) {
        while self.free[m] > 0 {
            let Some(r) = self.ready[m].pop_front() else {
                return;
            };
            self.free[m] -= 1;
            self.ranks[r].ran = 0.0;
            self.advance(r);
        }
    }

    /// Runs rank `r`'s steps on its core from now: sends go at once (their arrivals
    /// scheduled), compute is added up; a receive, or a quantum's worth of compute,
    /// ends the slice, to be looked at again at the slice's end.
    fn advance(&mut self, r: Rank) {
        let mut spent = std::mem::take(&mut self.ranks[r].debt);
        let mut sends = 0;
        loop {
            let long = self.ranks[r].ran + spent >= self.costs.quantum_s;
            if spent > 0.0 && (long || sends == SENDS_PER_SLICE) {
                return self.spend(r, spent);
            }
            let Some(step) = self.program.step(r, self.ranks[r].pc) else {
                return self.end(r, spent);
            };
            match step {
                Step::Cpu(s) => spent += s,
                Step::Mark(n) => {
                    let marks = &mut self.ranks[r].marks;
                    let n = usize::from(n);
                    if marks.len() <= n {
                        marks.resize(n + 1, f64::NAN);
                    }
                    marks[n] = self.now + spent;
                }
                Step::Send {
                    to,
                    tag,
                    bytes,
                    tcp,
                } => {
                    spent += self.send(r, to, (tag, bytes, tcp), spent);
                    sends += 1;
                }
                Step::Answer { tag, bytes } => {
                    let to = self.ranks[r].last_from;
                    spent += self.send(r, to, (tag, bytes, true), spent);
                }
                Step::Recv { tag, count } => {
                    if spent > 0.0 {
                        // Looked at when the compute before it is done.
                        return self.spend(r, spent);
                    }
                    // What is there is handled at once, as a poll does.
                    let (k, cost) = self.take(r, tag, count - self.ranks[r].taken);
                    self.ranks[r].taken += k;
                    if self.ranks[r].taken < count {
                        return match cost > 0.0 {
                            true => self.spend(r, cost),
                            false => self.wait(r, tag),
                        };
                    }
                    self.ranks[r].taken = 0;
                    spent += cost;
                }
            }
            self.ranks[r].pc += 1;
        }
    }

    /// Rank `r`'s program ended after `spent` more seconds of compute.
    fn end(&mut self, r: Rank, spent: f64) {
        let st = &mut self.ranks[r];
        if !st.done {
            (st.done, st.ended) = (true, self.now + spent);
        }
        if spent > 0.0 {
            // The core is free once the last compute is done: the next slice ends it.
            return self.spend(r, spent);
        }
        st.ran = f64::INFINITY;
        self.release(self.layout.machine_of(r));
    }

    /// Rank `r` waits for a message of `tag`: it spins on its core a while (briefly
    /// on a crowded host), then sleeps.
    fn wait(&mut self, r: Rank, tag: u32) {
        let crowded = self.crowded[self.layout.host_of(r)];
        let spin = match crowded {
            true => self.costs.spin_crowded_s,
            false => self.costs.spin_s,
        };
        let st = &mut self.ranks[r];
        if spin > 0.0 {
            st.waiting = Some((tag, Wait::Spinning(self.now)));
            st.spin_until = self.now + spin;
            if !std::mem::replace(&mut st.spin_queued, true) {
                self.push(self.now + spin, Event::SpinEnd(r));
            }
        } else {
            self.sleep(r, tag);
        }
    }

    /// Rank `r` sleeps until a message of `tag` comes, its core free.
    fn sleep(&mut self, r: Rank, tag: u32) {
        let st = &mut self.ranks[r];
        st.waiting = Some((tag, Wait::Asleep));
        st.ran = f64::INFINITY;
        self.release(self.layout.machine_of(r));
    }

    fn spin_ended(&mut self, r: Rank) {
        let st = &mut self.ranks[r];
        st.spin_queued = false;
        let Some((tag, Wait::Spinning(since))) = st.waiting else {
            return;
        };
        if st.spin_until > self.now {
            st.spin_queued = true;
            let at = st.spin_until;
            return self.push(at, Event::SpinEnd(r));
        }
        st.cpu += self.now - since;
        self.sleep(r, tag);
    }

    /// Rank `r` computes `s` seconds from now, then its slice ends.
    fn spend(&mut self, r: Rank, s: f64) {
        let st = &mut self.ranks[r];
        st.cpu += s;
        st.ran += s;
        self.push(self.now + s, Event::Slice(r));
    }

    /// Sends a message `(tag, bytes, tcp)` from `r` after `spent` seconds of its slice;
    /// returns the core time it costs `r`.
    fn send(&mut self, r: Rank, to: Rank, (tag, bytes, tcp): (u32, u32, bool), spent: f64) -> f64 {
        let net = tcp || self.layout.host_of(r) != self.layout.host_of(to);
        let link = if net {
            &self.costs.net
        } else {
            &self.costs.shm
        };
        let sent = &mut self.ranks[r].sent[to];
        let new = net && !tcp && u64::from(*sent) == FIRST_MESSAGES;
        if net && !tcp && u64::from(*sent) < FIRST_MESSAGES {
            *sent += 1;
        }
        if new {
            // Both ends: a rank reached over a connection connects back.
            self.ranks[r].sent[to] = CONNECTED;
            self.ranks[to].sent[r] = CONNECTED;
        }
        let cost = link.o_s + if new { self.connection(r) } else { 0.0 };
        let frames = f64::from(bytes.div_ceil(64).max(1));
        let now = self.now;
        let st = &mut self.ranks[r];
        let mut leaves = (now + spent + cost).max(st.link_free);
        st.link_free = leaves + link.g * frames;
        let mut delayed = new;
        let at = |leaves: f64| leaves + link.l + link.g * (frames - 1.0);
        let arrives = if new {
            st.wiring.retain(|w| w.2 > now);
            leaves += self.costs.connect_delay_s;
            st.wiring.push((to, leaves, at(leaves)));
            at(leaves)
        } else if let Some(&(_, up, first)) = st.wiring.iter().find(|w| w.0 == to) {
            delayed = up > leaves;
            at(leaves.max(up)).max(first) // behind the connection's first message
        } else {
            at(leaves)
        };
        let flight = Flight {
            at: arrives,
            to: to as u32,
            tag,
            net,
            connect: new,
        };
        self.fly(r, delayed, flight);
        cost
    }

    /// Puts `flight` in `r`'s outbox in order of arrival; a new head gets an event.
    fn fly(&mut self, r: Rank, delayed: bool, flight: Flight) {
        let o = &mut self.ranks[r].outbox[usize::from(delayed)];
        let at = o
            .flights
            .iter()
            .rposition(|f| f.at <= flight.at)
            .map_or(0, |i| i + 1);
        o.flights.insert(at, flight);
        if at == 0 {
            o.version = o.version.wrapping_add(1);
            let version = o.version;
            self.push(
                flight.at,
                Event::Deliver {
                    from: r,
                    delayed,
                    version,
                },
            );
        }
    }

    /// The head of `from`'s outbox arrives; the next one gets an event.
    fn deliver(&mut self, from: Rank, delayed: bool, version: u32) {
        let o = &mut self.ranks[from].outbox[usize::from(delayed)];
        if o.version != version {
            return; // a message that arrives sooner took the head since
        }
        let Some(f) = o.flights.pop_front() else {
            return;
        };
        if let Some(next) = o.flights.front() {
            let at = next.at;
            self.push(
                at,
                Event::Deliver {
                    from,
                    delayed,
                    version,
                },
            );
        }
        self.arrive(from as u32, f.to as Rank, f.tag, f.net, f.connect);
    }

    /// Takes up to `most` messages of `tag` that are there: how many, and their
    /// receive overheads.
    fn take(&mut self, r: Rank, tag: u32, most: u32) -> (u32, f64) {
        let (shm, net) = (self.costs.shm.o_r, self.costs.net.o_r);
        let st = &mut self.ranks[r];
        let Some(at) = st.inbox.iter().position(|(t, _)| *t == tag) else {
            return (0, 0.0);
        };
        let queue = &mut st.inbox[at].1;
        let k = queue.len().min(most as usize);
        let mut cost = 0.0;
        for from in queue.drain(..k) {
            cost += if from & NET != 0 { net } else { shm };
            st.last_from = (from & !NET) as Rank;
        }
        if queue.is_empty() {
            st.inbox.swap_remove(at);
        }
        (k as u32, cost)
    }

    /// Core time of rank `r`'s end of a new connection.
    fn connection(&mut self, r: Rank) -> f64 {
        let first = !std::mem::replace(&mut self.ranks[r].connected_once, true);
        self.costs.connect_s
            + if first {
                self.costs.connect_first_s
            } else {
                0.0
            }
    }

    fn arrive(&mut self, from: u32, to: Rank, tag: u32, net: bool, connect: bool) {
        if connect {
            self.ranks[to].debt += self.connection(to);
        }
        let st = &mut self.ranks[to];
        let entry = from | if net { NET } else { 0 };
        match st.inbox.iter_mut().find(|(t, _)| *t == tag) {
            Some((_, q)) => q.push_back(entry),
            None => st.inbox.push((tag, VecDeque::from([entry]))),
        }
        // Any message ends a wait, as a poll that finds one does: the rank handles it
        // (a connection's receiving half too) and looks for what it waits for again.
        let Some((_, how)) = st.waiting else {
            return;
        };
        st.waiting = None;
        match how {
            Wait::Spinning(since) => {
                // It was on its core: it goes on at once, its spin spent.
                st.cpu += self.now - since;
                st.ran += self.now - since;
                self.advance(to);
            }
            Wait::Asleep => {
                st.debt += self.costs.wake_s;
                let m = self.layout.machine_of(to);
                self.ready[m].push_back(to);
                self.dispatch(m);
            }
        }
    }
}

#[cfg(test)]
mod tests;
