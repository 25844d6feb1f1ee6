//! Message-driven N-Queens (the AM paper §3.3, TAM): a search tree whose every node
//! above a cut-off depth is an activation frame on some rank, spawned there by an
//! Active Message, and whose every result goes back to its parent's frame by an Active
//! Message to the rank that owns it.
//!
//! | message | its handler (TAM's inlet) | args |
//! |---|---|---|
//! | `spawn` | queues a task: a board with queens on its first rows | the parent frame (rank and slot), the row, the three attack masks |
//! | `result` | adds a count to a frame; when the frame's last child has answered, queues the frame's own result | the slot, the count |
//! | `done` | ends the search | the total |
//!
//! Handlers only move messages into the computation (a stack of tasks, a list of
//! finished frames); the rank's loop runs the tasks and sends, as TAM's threads do. A
//! task at the cut-off row counts its subtree sequentially (a leaf). Above it, a task
//! allocates a frame that waits for one result per free column of its row, and spawns a
//! child per column, each on the next rank in turn. Rank 0 starts the root; when the
//! root's frame completes, it tells every rank the total.
//!
//! A peer's args are checked before they are used: a spawn with a board that cannot
//! be, or a result for a frame that is not waiting, is counted as a fault, and a run
//! with a fault fails.

use crate::AppError;
use amrq::am::{Am, Args, Handler, HandlerTable};
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use std::cell::{Cell, RefCell};
use std::time::Instant;

/// The size of the problem and of the measurement.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Queens, and rows and columns of the board.
    pub n: u32,
    /// The row at which a task counts its subtree itself instead of spawning.
    pub depth: u32,
    /// Timed batches (one more first, as a warm-up).
    pub batches: usize,
}

/// The default cut-off row.
pub const DEPTH: u32 = 4;

/// The parent of the root's frame.
const ROOT: u64 = u64::MAX;

/// A board with queens on rows `0..row`: the columns taken, and the squares of `row`
/// attacked along each diagonal.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Board {
    row: u32,
    cols: u32,
    left: u32,
    right: u32,
}

impl Board {
    /// The board with a queen added at column bit `bit` of its row (`all`: the columns).
    fn place(self, bit: u32, all: u32) -> Self {
        Board {
            row: self.row + 1,
            cols: self.cols | bit,
            left: ((self.left | bit) << 1) & all,
            right: (self.right | bit) >> 1,
        }
    }

    /// The columns of its row free to place a queen in.
    fn free(self, all: u32) -> u32 {
        all & !(self.cols | self.left | self.right)
    }
}

/// The solutions that complete `b` on an n-board whose columns are `all`: the
/// optimised sequential count (bit masks, no allocation).
fn count(b: Board, all: u32) -> u64 {
    if b.cols == all {
        return 1;
    }
    let (mut free, mut sum) = (b.free(all), 0);
    while free != 0 {
        let bit = free & free.wrapping_neg();
        free ^= bit;
        sum += count(b.place(bit, all), all);
    }
    sum
}

/// A task: a board to search and the frame its result goes to.
#[derive(Debug, Clone, Copy)]
struct Task {
    board: Board,
    parent: u64,
}

/// An activation frame: whose child it is, how many results it still waits for and
/// their sum so far.
#[derive(Debug)]
struct Frame {
    parent: u64,
    pending: u32,
    count: u64,
}

/// A rank's search state, which the handlers and the loop share.
#[derive(Default)]
struct State {
    n: Cell<u32>,
    ranks: Cell<u64>,
    tasks: RefCell<Vec<Task>>,
    frames: RefCell<Vec<Frame>>,
    free_slots: RefCell<Vec<u32>>,
    /// Frames complete and freed: their parent and count, to be sent.
    finished: RefCell<Vec<(u64, u64)>>,
    done: Cell<Option<u64>>,
    faults: Cell<u64>,
}

impl State {
    /// The state of a search for `n` queens over `ranks` ranks.
    fn new(n: u32, ranks: usize) -> Self {
        let s = State::default();
        s.n.set(n);
        s.ranks.set(ranks as u64);
        s
    }

    fn has_work(&self) -> bool {
        !self.tasks.borrow().is_empty()
            || !self.finished.borrow().is_empty()
            || self.done.get().is_some()
    }

    fn fault(&self) {
        self.faults.set(self.faults.get() + 1);
    }

    /// The `spawn` inlet: queues the task if its board can be.
    fn spawned(&self, (parent, row, c, l, r): Spawn) -> Result<(), amrq::am::AmError> {
        let masks = [c, l, r];
        let (n, all) = (self.n.get(), (1u64 << self.n.get()) - 1);
        let parent_ok = parent == ROOT || parent >> 32 < self.ranks.get();
        if row > u64::from(n) || masks.iter().any(|&m| m & !all != 0) || !parent_ok {
            self.fault();
            return Ok(());
        }
        let [cols, left, right] = masks.map(|m| m as u32);
        let board = Board {
            row: row as u32,
            cols,
            left,
            right,
        };
        self.tasks.borrow_mut().push(Task { board, parent });
        Ok(())
    }

    /// The `result` inlet: adds the count to its frame, and when that was the frame's
    /// last child, frees the frame and queues its own result.
    fn answered(&self, (slot, count): (u64, u64)) -> Result<(), amrq::am::AmError> {
        let mut frames = self.frames.borrow_mut();
        let Some(f) = frames.get_mut(slot as usize).filter(|f| f.pending > 0) else {
            self.fault();
            return Ok(());
        };
        f.count += count;
        f.pending -= 1;
        if f.pending == 0 {
            self.finished.borrow_mut().push((f.parent, f.count));
            self.free_slots.borrow_mut().push(slot as u32);
        }
        Ok(())
    }

    /// A frame waiting for `pending` results for `parent`: its slot.
    fn frame(&self, parent: u64, pending: u32) -> u32 {
        let f = Frame {
            parent,
            pending,
            count: 0,
        };
        let mut frames = self.frames.borrow_mut();
        match self.free_slots.borrow_mut().pop() {
            Some(slot) => {
                frames[slot as usize] = f;
                slot
            }
            None => {
                frames.push(f);
                frames.len() as u32 - 1
            }
        }
    }
}

/// A spawn: the parent frame, the row, and the board's column and diagonal masks.
type Spawn = (u64, u64, u64, u64, u64);

/// The three handlers.
#[derive(Clone, Copy)]
struct Inlets {
    spawn: Handler<Spawn>,
    result: Handler<(u64, u64)>, // (frame slot, count)
    done: Handler<u64>,          // the total
}

/// The handler table of a search, and its handlers.
fn table() -> (HandlerTable<State>, Inlets) {
    let mut t = HandlerTable::<State>::new();
    let inlets = Inlets {
        spawn: t.handler("queens_spawn", |st, _ctx, spawn| st.spawned(spawn)),
        result: t.handler("queens_result", |st, _ctx, answer| st.answered(answer)),
        done: t.handler("queens_done", |st, _ctx, total| {
            st.done.set(Some(total));
            Ok(())
        }),
    };
    (t, inlets)
}

/// What one search cost one rank, in ns, and what it did.
#[derive(Debug, Default, Clone, Copy)]
struct Work {
    wall: f64,
    leaves: f64,
    idle: f64,
    sent: u64,
    /// Messages sent by type, in [`MESSAGE_TYPES`]' order.
    by_type: [u64; 3],
    tasks: u64,
}

/// The search's message types in TAM's terms (the AM paper's Table 3), with the data
/// values each carries besides the frame it is addressed to: a spawn (frame to new
/// frame: its parent frame, the row and the three attack masks), a result (frame to its
/// parent frame: a count) and the total (to every rank).
pub const MESSAGE_TYPES: [(&str, u32); 3] = [
    ("spawn (frame to new frame)", 5),
    ("result (frame to parent frame)", 1),
    ("total (to every rank)", 1),
];

/// One rank's part in the search.
struct Searcher<'a> {
    am: &'a Am<State>,
    inlets: Inlets,
    depth: u32,
    /// The rank the next spawn goes to.
    next: Cell<usize>,
    work: Cell<Work>,
}

impl Searcher<'_> {
    fn note(&self, f: impl FnOnce(&mut Work)) {
        let mut w = self.work.get();
        f(&mut w);
        self.work.set(w);
    }

    /// Sends a message of type `kind` (an index of [`MESSAGE_TYPES`]).
    fn send<A: Args>(
        &self,
        to: usize,
        (h, kind): (Handler<A>, usize),
        args: A,
    ) -> Result<(), AppError> {
        self.am.send(to, h, args)?;
        self.note(|w| {
            w.sent += 1;
            w.by_type[kind] += 1;
        });
        Ok(())
    }

    /// Sends `count` to frame `parent`; the root's total to every rank.
    fn answer(&self, parent: u64, count: u64) -> Result<(), AppError> {
        if parent != ROOT {
            let (rank, slot) = ((parent >> 32) as usize, parent & u64::from(u32::MAX));
            return self.send(rank, (self.inlets.result, 1), (slot, count));
        }
        for rank in 0..self.am.size() {
            self.send(rank, (self.inlets.done, 2), count)?;
        }
        Ok(())
    }

    /// Runs a task: a leaf counts its subtree; above the cut-off, a frame and a spawn
    /// per free column.
    fn run(&self, t: Task) -> Result<(), AppError> {
        self.note(|w| w.tasks += 1);
        let all = (1u32 << self.am.state().n.get()) - 1;
        if t.board.row >= self.depth {
            let start = Instant::now();
            let c = count(t.board, all);
            self.note(|w| w.leaves += start.elapsed().as_secs_f64() * 1e9);
            return self.answer(t.parent, c);
        }
        let mut free = t.board.free(all);
        if free == 0 {
            return self.answer(t.parent, 0);
        }
        let slot = self.am.state().frame(t.parent, free.count_ones());
        let me = ((self.am.rank() as u64) << 32) | u64::from(slot);
        while free != 0 {
            let bit = free & free.wrapping_neg();
            free ^= bit;
            let b = t.board.place(bit, all);
            let to = self.next.get();
            self.next.set((to + 1) % self.am.size());
            let spawn = (
                me,
                b.row.into(),
                b.cols.into(),
                b.left.into(),
                b.right.into(),
            );
            self.send(to, (self.inlets.spawn, 0), spawn)?;
        }
        Ok(())
    }

    /// One search, from the root on rank 0 to the `done` message: the total.
    fn search(&self) -> Result<u64, AppError> {
        let st = self.am.state();
        self.am.barrier()?;
        let start = Instant::now();
        if self.am.rank() == 0 {
            let board = Board {
                row: 0,
                cols: 0,
                left: 0,
                right: 0,
            };
            st.tasks.borrow_mut().push(Task {
                board,
                parent: ROOT,
            });
        }
        let total = loop {
            let finished = st.finished.borrow_mut().pop();
            if let Some((parent, count)) = finished {
                self.answer(parent, count)?;
                continue;
            }
            if let Some(total) = st.done.get() {
                break total;
            }
            let task = st.tasks.borrow_mut().pop();
            match task {
                Some(t) => self.run(t)?,
                None => {
                    let idle = Instant::now();
                    self.am.wait_until(State::has_work)?;
                    self.note(|w| w.idle += idle.elapsed().as_secs_f64() * 1e9);
                }
            }
            self.am.poll()?;
        };
        self.note(|w| w.wall = start.elapsed().as_secs_f64() * 1e9);
        Ok(total)
    }

    /// Clears what a search left (a `done`, the counters) before the next.
    fn reset(&self) -> Result<(), AppError> {
        self.am.barrier()?; // every rank has its `done` before any starts again
        let st = self.am.state();
        st.done.set(None);
        self.work.set(Work::default());
        Ok(())
    }
}

/// One rank of the N-Queens job: the outcome on rank 0.
pub fn rank_main(setup: Setup, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p, n) = (setup.rank(), setup.size(), shape.n);
    if !(1..=20).contains(&n) {
        return Err(format!("--board {n}: from 1 to 20 queens").into());
    }
    let (t, inlets) = table();
    let job = setup.start(t, State::new(n, p))?;
    let (am, coll) = (job.am(), job.coll());
    let s = Searcher {
        am,
        inlets,
        depth: shape.depth.min(n),
        next: Cell::new((me + 1) % p),
        work: Cell::new(Work::default()),
    };
    let all = (1u32 << n) - 1;
    let root = Board {
        row: 0,
        cols: 0,
        left: 0,
        right: 0,
    };
    let want = count(root, all);
    let mut o = Outcome::new("queens", p, 0.0);
    let mut f: [Vec<f64>; 12] = Default::default();
    for batch in 0..=shape.batches {
        let seq_ns = crate::on_rank_0_alone(am, || {
            crate::ns_of(|| count(std::hint::black_box(root), all))
        })?;
        let total = s.search()?;
        let w = s.work.get();
        // Sums over the ranks, and the busiest rank's leaves.
        let faults = am.state().faults.get();
        let mut sums = [
            w.sent,
            w.tasks,
            w.leaves as u64,
            w.idle as u64,
            faults,
            w.wall as u64,
        ];
        coll.allreduce(&mut sums, amrq::coll::sum)?;
        let mut by_type = w.by_type;
        coll.allreduce(&mut by_type, amrq::coll::sum)?;
        let mut most = [w.leaves as u64];
        coll.allreduce(&mut most, amrq::coll::max)?;
        s.reset()?;
        let [sent, tasks, leaves, idle, faults, busy] = sums.map(|v| v as f64);
        if total != want || faults > 0.0 {
            return Err(format!(
                "queens: {total} solutions found, {want} expected; {faults} faulty messages"
            )
            .into());
        }
        if batch > 0 {
            for (v, x) in f.iter_mut().zip([
                w.wall / 1e3,
                seq_ns / w.wall,
                sent / w.wall * 1e9,
                most[0] as f64 / (leaves / p as f64),
                leaves / busy,
                (busy - leaves - idle) / busy,
                idle / busy,
                tasks,
                by_type[0] as f64,
                by_type[1] as f64,
                by_type[2] as f64,
                leaves / sent,
            ]) {
                v.push(x);
            }
        }
    }
    let names = [
        "us",
        "speedup",
        "msgs_per_s",
        "balance",
        "compute_fraction",
        "comm_fraction",
        "idle_fraction",
        "tasks",
        "spawn_msgs",
        "result_msgs",
        "total_msgs",
        "leaf_ns_per_msg",
    ];
    for (name, v) in names.iter().zip(f.iter_mut()) {
        o.figures.push(Figure::of(*name, v));
    }
    o.figures.push(Figure::single("depth", s.depth.into()));
    o.figures.push(Figure::single("size", n.into()));
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    o.notes.push(format!(
        "{n} queens ({want} solutions), tasks spawned down to row {}, each spawn and result an Active Message; µs per search (rank 0); the sequential count timed on rank 0 before each search",
        s.depth
    ));
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spawn whose board cannot be or whose parent names no rank, and a result for a
    /// frame that is not waiting, are counted as faults and change nothing; a good
    /// spawn is queued.
    #[test]
    fn a_peers_bad_messages_are_faults_not_work() {
        let out = amrq::Config::new()
            .threads(1, |setup| {
                let (t, inlets) = table();
                let am = setup.start(t, State::new(8, 1))?;
                let bad_spawns = [
                    (ROOT, 9, 0, 0, 0),      // row past the board
                    (ROOT, 1, 1 << 8, 0, 0), // a column off the board
                    (7 << 32, 1, 1, 2, 0),   // rank 7 of 1
                ];
                for spawn in bad_spawns {
                    am.send(0, inlets.spawn, spawn)?;
                }
                am.send(0, inlets.result, (3, 1))?; // no frame 3
                am.send(0, inlets.spawn, (ROOT, 1, 1, 2, 0))?;
                am.wait_until(|st| st.faults.get() + st.tasks.borrow().len() as u64 == 5)?;
                let st = am.state();
                let (tasks, finished) = (st.tasks.borrow().len(), st.finished.borrow().len());
                Ok((st.faults.get(), tasks, finished))
            })
            .expect("a job");
        assert_eq!(out[0], (4, 1, 0));
    }

    #[test]
    fn the_sequential_count_is_right() {
        // The known counts (OEIS A000170).
        let root = Board {
            row: 0,
            cols: 0,
            left: 0,
            right: 0,
        };
        for (n, want) in [(1, 1), (4, 2), (6, 4), (8, 92), (10, 724), (12, 14_200)] {
            assert_eq!(count(root, (1 << n) - 1), want, "{n} queens");
        }
    }
}
