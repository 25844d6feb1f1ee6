//! The transpose ladder (Remote Queues §4, Figure 12): an all-to-all exchange of blocks
//! (4 KiB by default) done as a sequence of permutations separated by barriers, as the
//! paper does it. At step i (1 ≤ i < P) each rank sends its block for rank me + i and
//! receives the one from rank me − i, in chunks, then all meet in a barrier; its own
//! block is a local copy. Five variants, the rungs of the paper's ladder and its
//! control:
//!
//! | variant | sending | receiving |
//! |---|---|---|
//! | `am` | an AM Medium request per chunk | its handler copies the chunk into place, in any poll |
//! | `dequeue` | an RQ enqueue per chunk, the bytes alone | a tight loop of `poll_queue`, the copy inlined, each chunk landing where the receiver's hint for its source points |
//! | `matched` | as `dequeue`, at most one chunk per receive gap (bandwidth matching) | as `dequeue` |
//! | `alternate` | as `matched` | exactly one dequeue between injections |
//! | `limited` (control) | as `dequeue`, unpaced | exactly one dequeue between injections |
//!
//! The `am` rung's chunks carry their place, which the handler turns into an address
//! (the offset in the receive buffer). The dequeue rungs' carry nothing but their bytes:
//! the receiver keeps, per source, a pointer to where that source's next chunk lands
//! (the paper's address hint), as chunks from one source arrive in order.
//!
//! A dequeue between injections fails when no chunk is there; the chunks still due
//! are taken after the last injection. The outcome gives the fraction that failed
//! (the paper: bandwidth matching removes most of them).
//!
//! The gap of bandwidth matching is the bottleneck's time per chunk, measured in the
//! same run: at first every rank streams chunks to the next while taking in the
//! previous one's (the slowest rank's time per chunk), then, batch after batch, the
//! time per chunk the `dequeue` variant took.
//!
//! Each batch runs every variant once, in an order that rotates from batch to batch.
//! Each run is `reps` transposes, timed on rank 0: every transpose ends in a barrier,
//! so its time covers every rank's. Bandwidth is the bytes that crossed between ranks,
//! P·(P−1)·block per transpose, over that time. The reference is the same bytes
//! rearranged by one core in its own memory, timed in the same batch. The first batch
//! is a warm-up, and its results are checked on every rank (with `check`, every
//! batch's).

use crate::profile::{messages, waits};
use crate::AppError;
use amrq::am::{Am, HandlerTable, RequestHandler};
use amrq::conduit::ReceivedFrame;
use amrq::rq::{Kind, QueueId};
use amrq::util::Backoff;
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use std::cell::{Cell, RefCell};
use std::time::Instant;

/// The rungs of the ladder and the control, in the paper's order.
pub const VARIANTS: [Variant; 5] = [
    Variant::Am,
    Variant::Dequeue,
    Variant::Matched,
    Variant::Alternate,
    Variant::Limited,
];

/// One way to do the transpose (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Block transfer through AM handlers.
    Am,
    /// Tight-loop dequeue with the receiver's address hint.
    Dequeue,
    /// Dequeue plus bandwidth matching.
    Matched,
    /// Bandwidth matching plus exactly one dequeue between injections.
    Alternate,
    /// Exactly one dequeue between injections without bandwidth matching.
    Limited,
}

impl Variant {
    /// Its name in figures and tables.
    ///
    /// ```
    /// assert_eq!(amrq_apps::transpose::Variant::Matched.name(), "matched");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Variant::Am => "am",
            Variant::Dequeue => "dequeue",
            Variant::Matched => "matched",
            Variant::Alternate => "alternate",
            Variant::Limited => "limited",
        }
    }

    fn paced(self) -> bool {
        matches!(self, Variant::Matched | Variant::Alternate)
    }

    fn alternates(self) -> bool {
        matches!(self, Variant::Alternate | Variant::Limited)
    }
}

/// How big a transpose, and how much to measure.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// PayloadView per block (one rank's data for one other rank).
    pub block: usize,
    /// PayloadView per chunk (one message).
    pub chunk: usize,
    /// PayloadView between ranks per timed run (transposes of P·(P−1)·block bytes, at
    /// least one).
    pub run_bytes: usize,
    /// Timed batches (one more runs first, as a warm-up, and is checked).
    pub batches: usize,
    /// Check every batch's result, not only the warm-up's.
    pub check: bool,
}

/// A pacing wait longer than this yields the core between looks.
const YIELD_AFTER: std::time::Duration = std::time::Duration::from_micros(5);

/// Slots of the transpose's queue, per sender: room for 64 chunks of 256 bytes.
pub const QUEUE_SLOTS: u64 = 512;

/// What the AM handler needs: where chunks land, and how many did.
struct Landing {
    recv: RefCell<Vec<u8>>,
    /// The address hint of the dequeue rungs: per source, the offset in `recv` where
    /// its next chunk lands.
    next: RefCell<Vec<usize>>,
    got: Cell<usize>,
    /// Chunks that named a place outside the buffer (a peer's fault), dropped.
    bad: Cell<u64>,
    /// Dequeues between injections that found no chunk (the alternating variants).
    failed: Cell<u64>,
}

/// Copies `bytes` to `at` of `buf`; false (nothing copied) if it does not fit.
fn land(buf: &mut [u8], at: u64, bytes: amrq::conduit::PayloadView<'_>) -> bool {
    let at = usize::try_from(at).unwrap_or(usize::MAX);
    match at
        .checked_add(bytes.len())
        .and_then(|end| buf.get_mut(at..end))
    {
        Some(d) => {
            bytes.copy_to(d);
            true
        }
        None => false,
    }
}

/// The byte at `k` of the block rank `src` sends rank `dst`: different for every
/// pair and place, so that a chunk in the wrong place is seen.
fn pattern(src: usize, dst: usize, k: usize) -> u8 {
    (src * 31 + dst * 7 + k + k / 251) as u8
}

/// One rank's transpose: its data, the queue and the handler.
struct Rank<'a> {
    am: &'a Am<Landing>,
    q: QueueId,
    land_h: RequestHandler,
    shape: Shape,
    me: usize,
    p: usize,
    /// Block d is for rank d.
    send: Vec<u8>,
    /// Receive-gap of bandwidth matching, ns.
    gap_ns: f64,
}

impl Rank<'_> {
    /// Drains up to `budget` chunks of the queue into the receive buffer.
    fn drain(&self, budget: usize) -> Result<usize, AppError> {
        let (s, b) = (self.am.state(), self.shape.block);
        let (mut recv, mut next) = (s.recv.borrow_mut(), s.next.borrow_mut());
        let took = self.am.rq().poll_queue(self.q, budget, |f| {
            let (src, len) = (f.source(), f.payload().len());
            let at = next[src];
            if land(&mut recv, at as u64, f.payload()) {
                // The block from `src` ends at (src + 1)·b: the next one starts over.
                next[src] = if at + len >= (src + 1) * b {
                    src * b
                } else {
                    at + len
                };
                s.got.set(s.got.get() + 1);
            } else {
                s.bad.set(s.bad.get() + 1);
            }
            Ok::<_, amrq::conduit::ConduitError>(())
        })?;
        Ok(took)
    }

    /// Every source's hint back at the start of its block, and the count of chunks
    /// landed back at 0 (at a run's start, when nothing is in flight).
    fn restart(&self) {
        let (s, b) = (self.am.state(), self.shape.block);
        for (src, at) in s.next.borrow_mut().iter_mut().enumerate() {
            *at = src * b;
        }
        s.got.set(0);
    }

    /// Sends chunk `k` of the block for `dest` by `v`'s means; the receive side keeps
    /// draining while the queue is full.
    fn inject(&self, v: Variant, dest: usize, k: usize) -> Result<(), AppError> {
        let (b, c) = (self.shape.block, self.shape.chunk);
        let at = k * c;
        let bytes = &self.send[dest * b + at..dest * b + (at + c).min(b)];
        if v == Variant::Am {
            let place = (self.me * b + at) as u64; // where it lands at `dest`
            return Ok(self.am.request_medium(dest, self.land_h, &[place], bytes)?);
        }
        let mut backoff = Backoff::new();
        while !self
            .am
            .rq()
            .enqueue_as(dest, self.q, Kind::Basic, 0, &[], bytes)?
        {
            if self.drain(usize::MAX)? == 0 {
                backoff.snooze();
            }
        }
        Ok(())
    }

    /// Waits until `want` chunks have landed, taking them by `v`'s means.
    fn receive_all(&self, v: Variant, want: usize) -> Result<(), AppError> {
        let s = self.am.state();
        if v == Variant::Am {
            return Ok(self.am.wait_until(|s| s.got.get() >= want)?);
        }
        let mut backoff = Backoff::new();
        while s.got.get() < want {
            if self.drain(usize::MAX)? == 0 {
                backoff.snooze();
            } else {
                backoff.reset();
            }
        }
        Ok(())
    }

    /// One step: the block for `dest` out, and chunks in until `want` have landed
    /// since the run began.
    fn step(&self, v: Variant, dest: usize, want: usize) -> Result<(), AppError> {
        let chunks = self.shape.block.div_ceil(self.shape.chunk);
        let s = self.am.state();
        let mut next = Instant::now();
        let gap = std::time::Duration::from_nanos(self.gap_ns as u64);
        for k in 0..chunks {
            if v.paced() {
                // Bandwidth matching: no faster than the receiver takes chunks in. A
                // long wait gives the core away (ranks may outnumber cores).
                loop {
                    let now = Instant::now();
                    if now >= next {
                        break;
                    }
                    if self.drain(usize::MAX)? == 0 && next - now > YIELD_AFTER {
                        std::thread::yield_now();
                    }
                }
                next += gap;
            }
            let bytes = self
                .shape
                .chunk
                .min(self.shape.block - k * self.shape.chunk);
            messages(bytes, || self.inject(v, dest, k))?;
            if v.alternates() && s.got.get() < want {
                // Exactly one dequeue between injections: it fails when no chunk is
                // there (the rest are taken after the last injection).
                if self.drain(1)? == 0 {
                    s.failed.set(s.failed.get() + 1);
                }
            }
        }
        waits(|| self.receive_all(v, want))
    }

    /// `reps` transposes by `v`: ns (the longest rank's; each ends in a barrier).
    fn run(&self, v: Variant, reps: usize) -> Result<f64, AppError> {
        let (b, p, me) = (self.shape.block, self.p, self.me);
        let chunks = b.div_ceil(self.shape.chunk);
        let s = self.am.state();
        // Counted from here to the end of the run, and reset before the barrier: a
        // peer out of a barrier sends at once, and this rank's handlers may take its
        // chunks while it still waits in that barrier.
        self.restart();
        self.am.barrier()?;
        let t = Instant::now();
        for rep in 0..reps {
            let own = &self.send[me * b..(me + 1) * b];
            s.recv.borrow_mut()[me * b..(me + 1) * b].copy_from_slice(own);
            for i in 1..p {
                self.step(v, (me + i) % p, (rep * (p - 1) + i) * chunks)?;
                waits(|| self.am.barrier())?;
            }
        }
        crate::profile::longest(t, |mine| crate::all_max(self.am, mine))
    }

    /// Wrong bytes in the receive buffer (and chunks dropped as misplaced).
    fn wrong(&self) -> u64 {
        let (b, me) = (self.shape.block, self.me);
        let s = self.am.state();
        let recv = s.recv.borrow();
        let wrong = (0..self.p * b)
            .filter(|&k| recv[k] != pattern(k / b, me, k % b))
            .count();
        wrong as u64 + s.bad.get()
    }

    /// The gap of bandwidth matching, the bottleneck's time per chunk: every rank
    /// streams chunks to the next while taking in the previous one's, as fast as they
    /// go (more than its queue holds, so the rate is the steady one); the slowest
    /// rank's ns per chunk, the median of three.
    fn measure_gap(&self) -> Result<f64, AppError> {
        let chunks = self.shape.block.div_ceil(self.shape.chunk);
        let n = 4 * QUEUE_SLOTS as usize;
        let right = (self.me + 1) % self.p;
        let mut gaps = Vec::new();
        for _ in 0..3 {
            self.restart();
            self.am.barrier()?;
            let t = Instant::now();
            for k in 0..n {
                self.inject(Variant::Dequeue, right, k % chunks)?;
                self.drain(usize::MAX)?;
            }
            self.receive_all(Variant::Dequeue, n)?;
            let ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
            gaps.push(crate::all_max(self.am, ns)?);
        }
        gaps.sort_by(f64::total_cmp);
        Ok(gaps[1])
    }
}

/// Registers the landing handler.
fn table() -> (HandlerTable<Landing>, RequestHandler) {
    let mut t = HandlerTable::<Landing>::new();
    let h = t.request("transpose_land", |s, _ctx, m| {
        if land(&mut s.recv.borrow_mut(), m.arg(0)?, m.payload_in_place()) {
            s.got.set(s.got.get() + 1);
        } else {
            s.bad.set(s.bad.get() + 1);
        }
        Ok(())
    });
    (t, h)
}

/// One rank of the transpose job (queue `q` configured on every rank), on one host or
/// several: the outcome on rank 0.
pub fn rank_main(setup: Setup, q: QueueId, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p) = (setup.rank(), setup.size());
    let (b, chunk) = (shape.block, shape.chunk);
    if chunk == 0 || b == 0 {
        return Err("block and chunk must be at least 1 byte".into());
    }
    let (t, land_h) = table();
    let state = Landing {
        recv: RefCell::new(vec![0; p * b]),
        next: RefCell::new((0..p).map(|src| src * b).collect()),
        got: Cell::new(0),
        bad: Cell::new(0),
        failed: Cell::new(0),
    };
    let job = setup.start(t, state)?;
    let am = job.am();
    // Transposes per timed run: about `run_bytes` between ranks whatever the count.
    let reps = (shape.run_bytes / (p * p.saturating_sub(1) * b).max(1)).max(1);
    if chunk > am.max_medium() {
        return Err(format!(
            "a chunk of {chunk} bytes does not fit one message (at most {}): lower --chunk",
            am.max_medium()
        )
        .into());
    }
    let send = (0..p * b).map(|k| pattern(me, k / b, k % b)).collect();
    let mut r = Rank {
        am,
        q,
        land_h,
        shape,
        me,
        p,
        send,
        gap_ns: 0.0,
    };
    if p > 1 {
        r.gap_ns = r.measure_gap()?;
    }
    let mut bw: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    let mut ratio: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    let mut seq_bw = Vec::new();
    let mut failed: Vec<Vec<f64>> = vec![Vec::new(); VARIANTS.len()];
    let injections = (reps * (p - 1) * b.div_ceil(chunk)).max(1) as f64;
    let bytes = (reps * p * (p - 1) * b) as f64;
    let mut gaps = Vec::new();
    for batch in 0..=shape.batches {
        let mut ns = [0.0; VARIANTS.len()];
        for k in 0..VARIANTS.len() {
            let i = (batch + k) % VARIANTS.len();
            am.state().failed.set(0);
            ns[i] = r.run(VARIANTS[i], reps)?;
            if batch > 0 {
                failed[i].push(am.state().failed.get() as f64 / injections);
            }
            if batch == 0 || shape.check {
                let wrong = r.wrong();
                let wrong = crate::all_max(am, wrong as f64)?;
                if wrong > 0.0 {
                    return Err(format!(
                        "transpose `{}`: a rank received {wrong} wrong bytes",
                        VARIANTS[i].name()
                    )
                    .into());
                }
            }
        }
        // Bandwidth matching paces to the rate the tight dequeue loop reached: the
        // bottleneck's time per chunk, as each rank sent them.
        let dequeue = VARIANTS.iter().position(|&v| v == Variant::Dequeue);
        if let Some(d) = dequeue.filter(|_| p > 1) {
            r.gap_ns = ns[d] / injections;
            gaps.push(r.gap_ns);
        }
        let seq = sequential_ns(p, b, reps);
        if batch > 0 && me == 0 && p > 1 {
            for i in 0..VARIANTS.len() {
                bw[i].push(bytes / ns[i] * 1e3); // MB/s
                ratio[i].push(ns[0] / ns[i]);
            }
            seq_bw.push(bytes / seq * 1e3);
        }
    }
    // One more run, profiled: where `am`'s time goes.
    let seq = bytes / amrq_bench::reference::median(&mut seq_bw.clone()) * 1e3;
    let profile = crate::profile::measure(am, seq, || r.run(Variant::Am, reps))?;
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    let mut o = Outcome::new("transpose", p, 0.0);
    o.figures.push(Figure::single("size", b as f64));
    if p == 1 {
        o.notes
            .push("one rank: nothing crosses; nothing to time".into());
        return Ok(Some(o));
    }
    profile.push(&mut o);
    for (i, v) in VARIANTS.iter().enumerate() {
        o.figures
            .push(Figure::of(format!("{}_mb_s", v.name()), &mut bw[i]));
        if i > 0 {
            o.figures
                .push(Figure::of(format!("{}_over_am", v.name()), &mut ratio[i]));
        }
        if v.alternates() {
            o.figures.push(Figure::of(
                format!("{}_failed_dequeues", v.name()),
                &mut failed[i],
            ));
        }
    }
    o.figures.push(Figure::of("sequential_mb_s", &mut seq_bw));
    o.figures.push(Figure::of("gap_ns", &mut gaps));
    o.notes.push(format!(
        "blocks of {b} B in chunks of {chunk} B, {} transposes per run; bandwidth: bytes between ranks / time (MB/s); *_over_am: the variant's bandwidth over am's, per batch; sequential: the same bytes rearranged by one core; gap: the bottleneck's time per chunk, which bandwidth matching paces to; *_failed_dequeues: the fraction of dequeues between injections that found nothing (rank 0)",
        reps
    ));
    Ok(Some(o))
}

/// ns for one core to do `reps` transposes of the same bytes in its own memory (block
/// (s, d) of an s-major array to a d-major one).
fn sequential_ns(p: usize, b: usize, reps: usize) -> f64 {
    let from: Vec<u8> = (0..p * p * b).map(|k| k as u8).collect();
    let mut to = vec![0u8; p * p * b];
    let t = Instant::now();
    for _ in 0..reps {
        for s in 0..p {
            for d in 0..p {
                let (src, dst) = ((s * p + d) * b, (d * p + s) * b);
                to[dst..dst + b].copy_from_slice(&from[src..src + b]);
            }
        }
        std::hint::black_box(&mut to);
    }
    // Only the P·(P−1) blocks that cross count, as in the parallel bandwidth.
    t.elapsed().as_secs_f64() * 1e9 * ((p - 1) as f64 / p as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_lands_only_where_it_fits() {
        let mut buf = vec![0u8; 8];
        assert!(land(&mut buf, 4, (&[1, 2, 3, 4][..]).into()));
        assert_eq!(buf, [0, 0, 0, 0, 1, 2, 3, 4]);
        assert!(!land(&mut buf, 5, (&[9; 4][..]).into()), "past the end");
        assert!(
            !land(&mut buf, u64::MAX, (&[9][..]).into()),
            "an overflowing place"
        );
        assert_eq!(buf, [0, 0, 0, 0, 1, 2, 3, 4], "nothing copied when refused");
    }

    #[test]
    fn every_pair_and_place_has_its_own_pattern() {
        // A block sent to the wrong rank, or a chunk landed at the wrong place, differs
        // from what the check expects somewhere in the block.
        let block = |s, d| (0..4096).map(move |k| pattern(s, d, k)).collect::<Vec<_>>();
        for s in 0..8 {
            for d in 0..8 {
                assert_ne!(block(s, d), block(s, (d + 1) % 8));
                assert_ne!(block(s, d), block((s + 1) % 8, d));
                let b = block(s, d);
                assert_ne!(b[..256], b[256..512], "two chunks of one block");
            }
        }
    }
}
