//! Sparse triangular solve (Remote Queues §3.2.5, Figure 9): forward substitution
//! L·x = b with L's rows dealt cyclically over the ranks, message-driven as Chong et
//! al. do it.
//!
//! Each rank keeps, for each of its rows, the partial sum `b_j − Σ L[j][k]·x_k` over
//! the x_k it knows, and how many are still missing. When a row's last one arrives,
//! the rank solves that row. It sends x_j as one Express message (j and the value's
//! bits) to every rank that owns a row needing it, and applies it to its own rows. It
//! receives them three ways:
//!
//! | mode | receiving |
//! |---|---|
//! | `interrupts` | an Interrupt queue: the progress thread applies each value as it arrives, and hands the rows it solved to the rank's thread, which sends them on (the progress thread cannot send: the conduit's send side is the rank thread's) |
//! | `engine` | an AM request per value, applied by its handler on the rank's progress engine; the rank's thread waits outside sections for rows to send, and sends them in a section |
//! | `handlers` | an AM request per value, applied by its handler in the rank's polls |
//! | `inlined` | an RQ queue drained by `poll_queue`, the update written in the loop |
//!
//! Each batch times `reps` solves per mode, the modes in an order that rotates from
//! batch to batch; rank 0's time (each solve ends in a barrier). The reference is the
//! optimised sequential solve ([`Lower::solve`]) timed in the same batch. The warm-up
//! batch checks every rank's x against it (with `check`, every batch).

use crate::matrix::Lower;
use crate::profile::{messages, waits};
use crate::AppError;
use amrq::am::{Am, Handler, SendHandlerTable};
use amrq::conduit::ReceivedFrame;
use amrq::rq::{Kind, QueueId};
use amrq::util::Backoff;
use amrq::{EngineJob, Setup};
use amrq_bench::report::{Figure, Outcome};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The ways of receiving, in the paper's order, the engine beside interrupts.
pub const MODES: [Mode; 4] = [
    Mode::Interrupts,
    Mode::Engine,
    Mode::Handlers,
    Mode::Inlined,
];

/// How a rank receives the values it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Interrupt queue and the progress thread.
    Interrupts,
    /// An AM handler per value, run by the progress engine.
    Engine,
    /// Polling, an AM handler per value.
    Handlers,
    /// Polling with the handler inlined (`poll_queue`).
    Inlined,
}

impl Mode {
    /// Its name in figures and tables.
    ///
    /// ```
    /// assert_eq!(amrq_apps::trisolve::Mode::Inlined.name(), "inlined");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Mode::Interrupts => "interrupts",
            Mode::Engine => "engine",
            Mode::Handlers => "handlers",
            Mode::Inlined => "inlined",
        }
    }
}

/// The queues a solve job needs (configured on every rank).
#[derive(Debug, Clone, Copy)]
pub struct Queues {
    /// Polled, for `inlined`.
    pub poll: QueueId,
    /// Interrupt delivery, for `interrupts`.
    pub interrupt: QueueId,
}

/// Slots per sender of each queue.
pub const QUEUE_SLOTS: u64 = 256;

/// One rank's fixed view of the matrix: its rows and who needs what.
struct Plan {
    me: usize,
    p: usize,
    /// For every column k, the entries of this rank's rows in it: (local row, value).
    col: Vec<Vec<(u32, f64)>>,
    /// For each local row: the other ranks owning a row that needs its x.
    dests: Vec<Vec<u32>>,
    diag: Vec<f64>,
    b: Vec<f64>,
    deps: Vec<u32>,
}

impl Plan {
    fn new(l: &Lower, b: &[f64], me: usize, p: usize) -> Self {
        let n = l.n();
        let mine = |i: usize| i % p == me;
        let local = |i: usize| i / p;
        let rows = (n + p - 1 - me) / p;
        let mut col = vec![Vec::new(); n];
        let mut dests: Vec<Vec<u32>> = vec![Vec::new(); rows];
        let mut deps = vec![0u32; rows];
        for (i, row) in l.rows.iter().enumerate() {
            for &(k, v) in row {
                if mine(i) {
                    col[k].push((local(i) as u32, v));
                    deps[local(i)] += 1;
                }
                let owner = (i % p) as u32;
                if mine(k) && owner as usize != me && !dests[local(k)].contains(&owner) {
                    dests[local(k)].push(owner);
                }
            }
        }
        let pick = |v: &[f64]| (0..rows).map(|r| v[r * p + me]).collect();
        Plan {
            me,
            p,
            col,
            dests,
            diag: pick(&l.diag),
            b: pick(b),
            deps,
        }
    }

    fn global(&self, local: usize) -> usize {
        local * self.p + self.me
    }
}

/// One solve's changing state on a rank.
struct Solver {
    sum: Vec<f64>,
    missing: Vec<u32>,
    x: Vec<f64>,
    solved: usize,
    /// Rows solved whose x is still to be sent and applied here.
    ready: Vec<usize>,
    /// Values that named no column (a peer's fault), dropped.
    bad: u64,
}

impl Solver {
    fn new(plan: &Plan) -> Self {
        let mut s = Solver {
            sum: plan.b.clone(),
            missing: plan.deps.clone(),
            x: vec![0.0; plan.b.len()],
            solved: 0,
            ready: Vec::new(),
            bad: 0,
        };
        for r in 0..plan.b.len() {
            if s.missing[r] == 0 {
                s.finish(plan, r);
            }
        }
        s
    }

    fn finish(&mut self, plan: &Plan, r: usize) {
        self.x[r] = self.sum[r] / plan.diag[r];
        self.solved += 1;
        self.ready.push(r);
    }

    /// x_k is known: update this rank's rows that need it.
    fn apply(&mut self, plan: &Plan, k: u64, xk: f64) {
        let Some(entries) = usize::try_from(k).ok().and_then(|k| plan.col.get(k)) else {
            self.bad += 1;
            return;
        };
        for &(r, v) in entries {
            let r = r as usize;
            self.sum[r] -= v * xk;
            self.missing[r] -= 1;
            if self.missing[r] == 0 {
                self.finish(plan, r);
            }
        }
    }

    fn done(&self) -> bool {
        self.solved == self.x.len() && self.ready.is_empty()
    }
}

/// What the handlers see: the plan and the solve in progress, and (seen without a
/// section) whether the engine's handlers left rows to send.
struct State {
    plan: RefCell<Option<Arc<Plan>>>,
    solver: RefCell<Option<Solver>>,
    rows_ready: Arc<AtomicBool>,
}

/// What the progress thread and the rank's thread share in `interrupts` mode.
#[derive(Default)]
struct Shared {
    job: Mutex<Option<(Arc<Plan>, Solver)>>,
    woken: Condvar,
}

/// One solve in `engine` mode: the rank's thread waits outside sections until the
/// engine's handlers have left rows to send (or its own sends did), then sends them in
/// a section. Returns ns between the two barriers, and this rank's x.
fn solve_engine(
    job: &mut EngineJob<State>,
    parts: (Queues, Handler<(u64, f64)>, &Arc<Shared>, &AtomicBool),
    plan: &Arc<Plan>,
) -> Result<(f64, Vec<f64>, u64), AppError> {
    let (q, h, shared, rows_ready) = parts;
    {
        let held = job.hold();
        let st = held.state();
        *st.plan.borrow_mut() = Some(plan.clone());
        *st.solver.borrow_mut() = Some(Solver::new(plan));
        st.rows_ready.store(true, Ordering::Relaxed); // rows without dependencies
        held.barrier()?;
    }
    let t = Instant::now();
    loop {
        let done = {
            let held = job.hold();
            let r = Rank {
                am: held.am(),
                q,
                h,
                shared: shared.clone(),
            };
            r.send_ready(plan)?
        };
        if done {
            break;
        }
        // Outside a section: the engine applies what arrives meanwhile.
        let mut backoff = Backoff::new();
        // ORDERING: Acquire pairs with the handler's Release store.
        while !rows_ready.load(Ordering::Acquire) {
            if !job.engine_runs() {
                job.hold().poll()?; // no engine (AMRQ_ENGINE=0): serve in sections
            }
            backoff.snooze();
        }
    }
    let held = job.hold();
    held.barrier()?;
    let ns = t.elapsed().as_secs_f64() * 1e9;
    let s = held.state().solver.borrow();
    let (x, bad) = s.as_ref().map(|s| (s.x.clone(), s.bad)).unwrap_or_default();
    Ok((ns, x, bad))
}

/// One rank of a solve job.
struct Rank<'a> {
    am: &'a Am<State>,
    q: Queues,
    /// x of a global row: (row, x).
    h: Handler<(u64, f64)>,
    shared: Arc<Shared>,
}

impl Rank<'_> {
    /// Sends x of global row `j` to `dest` by `mode`'s means, serving meanwhile.
    fn send(&self, mode: Mode, dest: usize, j: usize, x: f64) -> Result<(), AppError> {
        if matches!(mode, Mode::Handlers | Mode::Engine) {
            return Ok(self.am.send(dest, self.h, (j as u64, x))?);
        }
        let args = [j as u64, x.to_bits()];
        let q = match mode {
            Mode::Inlined => self.q.poll,
            _ => self.q.interrupt,
        };
        let mut backoff = Backoff::new();
        while !self
            .am
            .rq()
            .enqueue_as(dest, q, Kind::Express, 0, &args, &[])?
        {
            // Full: the receiver drains it (in its polls, or its progress thread).
            if mode == Mode::Inlined {
                self.receive_inlined()?;
            }
            backoff.snooze();
        }
        Ok(())
    }

    fn receive_inlined(&self) -> Result<usize, AppError> {
        let st = self.am.state();
        let plan = st.plan.borrow();
        let plan = plan.as_ref().ok_or("no plan")?;
        let mut solver = st.solver.borrow_mut();
        let solver = solver.as_mut().ok_or("no solve")?;
        Ok(self.am.rq().poll_queue(self.q.poll, 64, |f| {
            let a = f.args();
            match a {
                [k, bits, ..] => solver.apply(plan, *k, f64::from_bits(*bits)),
                _ => solver.bad += 1,
            }
            Ok::<_, amrq::conduit::ConduitError>(())
        })?)
    }

    /// One solve in `handlers` or `inlined` mode (the state set up).
    fn solve_polling(&self, mode: Mode) -> Result<(), AppError> {
        let st = self.am.state();
        let plan = st.plan.borrow().clone().ok_or("no plan")?;
        let mut backoff = Backoff::new();
        loop {
            let Some(ready) = self.take_ready()? else {
                return Ok(());
            };
            self.send_rows(mode, &plan, &ready)?;
            let receive = || match mode {
                Mode::Handlers => Ok(self.am.poll()?),
                _ => self.receive_inlined(),
            };
            // With no row of its own to send, the rank is waiting for others' values.
            let took = match ready.is_empty() {
                true => waits(receive)?,
                false => messages(0, receive)?,
            };
            if took == 0 && ready.is_empty() {
                backoff.snooze();
            } else {
                backoff.reset();
            }
        }
    }

    /// One solve in `interrupts` mode: the progress thread applies what arrives; this
    /// thread sends what becomes solved, sleeping until there is some.
    fn solve_interrupts(&self) -> Result<(), AppError> {
        let sh = &self.shared;
        loop {
            let (plan, ready) = {
                let mut job = sh.job.lock().map_err(|_| "a handler panicked")?;
                loop {
                    let (_, s) = job.as_mut().ok_or("no solve")?;
                    if s.done() {
                        return Ok(());
                    }
                    if !s.ready.is_empty() {
                        break;
                    }
                    job = sh
                        .woken
                        .wait_timeout(job, Duration::from_millis(1))
                        .map_err(|_| "a handler panicked")?
                        .0;
                }
                let (plan, s) = job.as_mut().ok_or("no solve")?;
                let ready: Vec<(usize, f64)> = s.ready.drain(..).map(|r| (r, s.x[r])).collect();
                (plan.clone(), ready)
            };
            for &(r, x) in &ready {
                for &d in &plan.dests[r] {
                    self.send(Mode::Interrupts, d as usize, plan.global(r), x)?;
                }
            }
            let mut job = sh.job.lock().map_err(|_| "a handler panicked")?;
            if let Some((plan, s)) = job.as_mut() {
                for &(r, x) in &ready {
                    s.apply(plan, plan.global(r) as u64, x);
                }
            }
        }
    }

    /// The rows solved whose x is still to be sent, taken; `None` once the solve is
    /// done.
    fn take_ready(&self) -> Result<Option<Vec<usize>>, AppError> {
        let mut s = self.am.state().solver.borrow_mut();
        let s = s.as_mut().ok_or("no solve")?;
        Ok((!s.done()).then(|| std::mem::take(&mut s.ready)))
    }

    /// Sends x of each row of `ready` to the ranks that need it, by `mode`'s means,
    /// and applies it to this rank's rows.
    fn send_rows(&self, mode: Mode, plan: &Plan, ready: &[usize]) -> Result<(), AppError> {
        let st = self.am.state();
        for &r in ready {
            let x = st.solver.borrow().as_ref().map_or(0.0, |s| s.x[r]);
            for &d in &plan.dests[r] {
                messages(16, || self.send(mode, d as usize, plan.global(r), x))?;
            }
            if let Some(s) = st.solver.borrow_mut().as_mut() {
                s.apply(plan, plan.global(r) as u64, x);
            }
        }
        Ok(())
    }

    /// In a section of `engine` mode: sends the rows solved so far and applies them
    /// here. True when the solve is done.
    fn send_ready(&self, plan: &Plan) -> Result<bool, AppError> {
        let st = self.am.state();
        st.rows_ready.store(false, Ordering::Relaxed);
        let Some(ready) = self.take_ready()? else {
            return Ok(true);
        };
        self.send_rows(Mode::Engine, plan, &ready)?;
        let s = st.solver.borrow();
        let s = s.as_ref().ok_or("no solve")?;
        if !s.ready.is_empty() {
            st.rows_ready.store(true, Ordering::Relaxed); // our own made more
        }
        Ok(s.done())
    }

    /// `reps` solves by `mode`, each ending in a barrier: ns (the longest rank's), and x of
    /// the last (this rank's rows).
    fn run(&self, mode: Mode, plan: &Arc<Plan>, reps: usize) -> Result<(f64, Vec<f64>), AppError> {
        let st = self.am.state();
        *st.plan.borrow_mut() = Some(plan.clone());
        let mut x = Vec::new();
        let mut ns = 0.0;
        for _ in 0..reps {
            // Set up before the barrier: a peer out of it sends at once.
            match mode {
                Mode::Interrupts => {
                    *self.shared.job.lock().map_err(|_| "a handler panicked")? =
                        Some((plan.clone(), Solver::new(plan)));
                }
                _ => *st.solver.borrow_mut() = Some(Solver::new(plan)),
            }
            self.am.barrier()?;
            let t = Instant::now();
            match mode {
                Mode::Interrupts => self.solve_interrupts()?,
                _ => self.solve_polling(mode)?,
            }
            waits(|| self.am.barrier())?;
            ns += crate::profile::longest(t, |mine| crate::all_max(self.am, mine))?;
            let (got, bad) = match mode {
                Mode::Interrupts => {
                    let job = self.shared.job.lock().map_err(|_| "a handler panicked")?;
                    job.as_ref()
                        .map(|(_, s)| (s.x.clone(), s.bad))
                        .unwrap_or_default()
                }
                _ => st
                    .solver
                    .borrow()
                    .as_ref()
                    .map(|s| (s.x.clone(), s.bad))
                    .unwrap_or_default(),
            };
            if bad > 0 {
                return Err(format!("{bad} values named no column").into());
            }
            x = got;
        }
        Ok((ns, x))
    }
}

/// How much to measure.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Solves per timed run.
    pub reps: usize,
    /// Timed batches (one more runs first, as a warm-up, and is checked).
    pub batches: usize,
    /// Check every batch's x, not only the warm-up's.
    pub check: bool,
}

/// One rank of the solve job over matrix `l` named `name` (queues `q` configured on
/// every rank): the outcome on rank 0.
pub fn rank_main(
    setup: Setup,
    q: Queues,
    (name, l): (&str, &Lower),
    shape: Shape,
) -> Result<Option<Outcome>, AppError> {
    let (me, p) = (setup.rank(), setup.size());
    let mut t = SendHandlerTable::<State>::new();
    let h = t.handler("trisolve_value", |st, _ctx, (k, x): (u64, f64)| {
        let plan = st.plan.borrow();
        if let (Some(plan), Some(s)) = (plan.as_ref(), st.solver.borrow_mut().as_mut()) {
            s.apply(plan, k, x);
            if !s.ready.is_empty() {
                // ORDERING: Release pairs with the Acquire load of `engine` mode's
                // wait (the rows themselves are read in a section).
                st.rows_ready.store(true, Ordering::Release);
            }
        }
        Ok(())
    });
    let rows_ready = Arc::new(AtomicBool::new(false));
    let state = State {
        plan: RefCell::new(None),
        solver: RefCell::new(None),
        rows_ready: rows_ready.clone(),
    };
    let mut job = setup.start_engine(t, state)?;
    let shared = Arc::new(Shared::default());
    let sh = shared.clone();
    let _progress = job
        .start_interrupts(move |_q, _src, args, _p| {
            let mut job = sh.job.lock().unwrap_or_else(|e| e.into_inner());
            if let (Some((plan, s)), [k, bits, ..]) = (job.as_mut(), args) {
                s.apply(plan, *k, f64::from_bits(*bits));
                if !s.ready.is_empty() {
                    sh.woken.notify_one();
                }
            }
        })
        .ok_or("the job has no Interrupt queue")?;
    let b: Vec<f64> = (0..l.n()).map(|i| 1.0 + (i % 7) as f64).collect();
    let want = l.solve(&b);
    let plan = Arc::new(Plan::new(l, &b, me, p));
    let mut per_mode: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut speedup: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut seq_ns = Vec::new();
    for batch in 0..=shape.batches {
        let mut ns = [0.0; MODES.len()];
        for k in 0..MODES.len() {
            let i = (batch + k) % MODES.len();
            let (t, x) = match MODES[i] {
                Mode::Engine => {
                    let (mut t, mut x) = (0.0, Vec::new());
                    for _ in 0..shape.reps {
                        let (ns, got, bad) =
                            solve_engine(&mut job, (q, h, &shared, &rows_ready), &plan)?;
                        if bad > 0 {
                            return Err(format!("{bad} values named no column").into());
                        }
                        (t, x) = (t + ns, got);
                    }
                    (t, x)
                }
                mode => {
                    let held = job.hold();
                    let r = Rank {
                        am: held.am(),
                        q,
                        h,
                        shared: shared.clone(),
                    };
                    r.run(mode, &plan, shape.reps)?
                }
            };
            ns[i] = t / shape.reps as f64;
            if batch == 0 || shape.check {
                let wrong = x
                    .iter()
                    .enumerate()
                    .filter(|&(local, v)| {
                        let w = want[plan.global(local)];
                        (v - w).abs() > 1e-9 * w.abs().max(1.0)
                    })
                    .count();
                if wrong > 0 {
                    return Err(format!(
                        "trisolve `{}` on {name}: rank {me} has {wrong} wrong values",
                        MODES[i].name()
                    )
                    .into());
                }
            }
        }
        let t0 = Instant::now();
        for _ in 0..shape.reps {
            std::hint::black_box(l.solve(std::hint::black_box(&b)));
        }
        let seq = t0.elapsed().as_secs_f64() * 1e9 / shape.reps as f64;
        if batch > 0 {
            for i in 0..MODES.len() {
                per_mode[i].push(ns[i] / 1e3);
                speedup[i].push(seq / ns[i]);
            }
            seq_ns.push(seq / 1e3);
        }
    }
    // One more run, profiled: where the handlers' time goes.
    let profile = {
        let held = job.hold();
        let r = Rank {
            am: held.am(),
            q,
            h,
            shared: shared.clone(),
        };
        let seq = amrq_bench::reference::median(&mut seq_ns.clone()) * 1e3;
        let run = || Ok(r.run(Mode::Handlers, &plan, shape.reps)?.0);
        crate::profile::measure(held.am(), seq * shape.reps as f64, run)?
    };
    job.hold().barrier()?;
    if me != 0 {
        return Ok(None);
    }
    let mut o = Outcome::new("trisolve", p, 0.0);
    profile.push(&mut o);
    o.figures.push(Figure::single("size", l.n() as f64));
    for (i, m) in MODES.iter().enumerate() {
        o.figures
            .push(Figure::of(format!("{}_us", m.name()), &mut per_mode[i]));
        o.figures
            .push(Figure::of(format!("{}_speedup", m.name()), &mut speedup[i]));
    }
    o.figures.push(Figure::of("sequential_us", &mut seq_ns));
    o.notes.push(format!(
        "{name}: {} rows, {} non-zeros, critical path {} rows; rows dealt cyclically; µs per solve (the longest rank's; each solve ends in a barrier); speed-up: the sequential solve's time over the mode's, per batch",
        l.n(),
        l.nnz(),
        l.depth()
    ));
    Ok(Some(o))
}
