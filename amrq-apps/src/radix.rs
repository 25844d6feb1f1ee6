//! Radix sort (Remote Queues §3.2.3, citing Strata's on the CM-5): 32-bit keys, 8 bits
//! per pass, least significant digit first. Each pass counts the digits of the rank's
//! keys, learns every rank's counts (an allgather), and so where each of its keys goes
//! in the global order: digit by digit, rank by rank, stable. Then it redistributes the
//! keys: runs of up to [`PER_MESSAGE`] keys bound for consecutive places of one rank
//! travel as one Express message (the first place and the count, then two keys a word),
//! and the receiver moves them to their places. Every rank ends each pass with as many
//! keys as it began with, the run of the global order its place in the ranks gives it.
//!
//! The redistribution is received three ways, the paper's comparison:
//!
//! | mode | receiving |
//! |---|---|
//! | `handlers` | an Active Message per run, its handler moving the keys, in any poll |
//! | `inlined` | RQ frames, a tight loop of `poll_queue` moving the keys in place |
//! | `dequeue` | RQ frames taken by the paper's `dequeue`: the header read first (`read_queue_prefix`), then as many words as it names (`dequeue_prefix`) |
//!
//! The paper: dequeuing in a tight loop and moving the keys to their place was 13 %
//! faster than an Active Message handler per message. Each batch sorts the same keys
//! by every mode, in an order that rotates from batch to batch, and by one core (the
//! same passes over all ranks' keys, timed on rank 0 while the others wait); every timed
//! sort's result is checked: the ranks' runs end to end, gathered on rank 0, are the
//! keys one core sorted, key for key.

use crate::profile::{messages, waits};
use crate::AppError;
use amrq::am::{Am, HandlerTable, RequestHandler};
use amrq::coll::Coll;
use amrq::conduit::{PollSet, ReceivedFrame};
use amrq::rq::{Kind, QueueId};
use amrq::util::Backoff;
use amrq::Setup;
use amrq_bench::report::{Figure, Outcome};
use std::cell::{Cell, RefCell};
use std::time::Instant;

/// Bits of a digit.
const BITS: u32 = 8;
/// Digits of a key.
const DIGITS: usize = 1 << BITS;
/// Passes over 32-bit keys.
const PASSES: u32 = 32 / BITS;
/// Keys per message at most: two a word, after the header word, in one Express slot.
pub const PER_MESSAGE: usize = 10;
/// Slots of the redistribution's queue, per sender (a One-poll queue, which a waiting
/// rank can sleep on).
pub const QUEUE_SLOTS: u64 = 256;

/// The ways of receiving keys, in the paper's order.
pub const MODES: [Mode; 3] = [Mode::Handlers, Mode::Inlined, Mode::Dequeue];

/// How the redistribution's messages are received (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// An Active Message handler per message.
    Handlers,
    /// A tight `poll_queue` loop, the move inlined.
    Inlined,
    /// The paper's `dequeue`, header first.
    Dequeue,
}

impl Mode {
    /// Its name in figures and tables.
    ///
    /// ```
    /// assert_eq!(amrq_apps::radix::Mode::Inlined.name(), "inlined");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Mode::Handlers => "handlers",
            Mode::Inlined => "inlined",
            Mode::Dequeue => "dequeue",
        }
    }
}

/// The size of a run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Keys per rank.
    pub keys: usize,
    /// Timed batches (one more runs first, as a warm-up).
    pub batches: usize,
}

/// Where the keys of a pass land on this rank, and how many have.
struct Landing {
    /// The rank's run of the global order: places `base ..` of it.
    into: RefCell<Vec<u32>>,
    base: Cell<usize>,
    got: Cell<usize>,
    /// Messages that named places outside the rank's run, or more keys than they carry
    /// (a peer's fault), dropped.
    bad: Cell<u64>,
}

/// The words of a message: the header (first place, then the count in the top 16
/// bits), then the keys two a word.
fn pack(place: usize, keys: &[u32]) -> ([u64; 6], usize) {
    let mut w = [0u64; 6];
    w[0] = place as u64 | (keys.len() as u64) << 48;
    for (i, pair) in keys.chunks(2).enumerate() {
        w[1 + i] = u64::from(pair[0]) | pair.get(1).map_or(0, |&k| u64::from(k) << 32);
    }
    (w, 1 + keys.len().div_ceil(2))
}

/// The words a message with header `h` has: the header, and a word per two keys.
fn words_of(h: u64) -> usize {
    1 + ((h >> 48) as usize).div_ceil(2)
}

/// Moves the keys of message `w` to their places; false (nothing moved) if they do not
/// fit the rank's run or the message is short of its count.
fn land(st: &Landing, w: &[u64]) -> bool {
    let Some(&h) = w.first() else { return false };
    let (place, n) = ((h & ((1 << 48) - 1)) as usize, (h >> 48) as usize);
    let mut into = st.into.borrow_mut();
    let at = place.wrapping_sub(st.base.get());
    if w.len() < words_of(h) || n > PER_MESSAGE || at.checked_add(n).is_none_or(|e| e > into.len())
    {
        st.bad.set(st.bad.get() + 1);
        return false;
    }
    for (i, slot) in into[at..at + n].iter_mut().enumerate() {
        *slot = (w[1 + i / 2] >> (32 * (i % 2))) as u32;
    }
    st.got.set(st.got.get() + n);
    true
}

/// The digit of `k` in pass `pass`.
fn digit(k: u32, pass: u32) -> usize {
    ((k >> (pass * BITS)) as usize) & (DIGITS - 1)
}

/// One rank's sort.
struct Sorter<'a> {
    am: &'a Am<Landing>,
    coll: &'a Coll<Landing>,
    q: QueueId,
    /// The queue, to sleep on.
    set: PollSet,
    land_h: RequestHandler,
    me: usize,
    p: usize,
}

/// The longest sleep of a rank waiting for keys, between looks at its peers.
const NAP: std::time::Duration = std::time::Duration::from_millis(1);

impl Sorter<'_> {
    /// Sorts `keys` (this rank's) by `mode`: the rank's run of the sorted whole, and
    /// ns (the longest rank's, from a barrier; every pass ends in one).
    fn sort(&self, mode: Mode, mut keys: Vec<u32>) -> Result<(Vec<u32>, f64), AppError> {
        self.am.barrier()?;
        let t = Instant::now();
        for pass in 0..PASSES {
            keys = self.pass(mode, &keys, pass)?;
        }
        let ns = crate::profile::longest(t, |mine| {
            let mut ns = [mine];
            self.coll
                .allreduce(&mut ns, amrq::coll::max)
                .map(|()| ns[0])
        })?;
        Ok((keys, ns))
    }

    /// One pass: every key to its place in the order of digit `pass`.
    fn pass(&self, mode: Mode, keys: &[u32], pass: u32) -> Result<Vec<u32>, AppError> {
        let (n, st) = (keys.len(), self.am.state());
        let mut counts = vec![0u64; DIGITS];
        for &k in keys {
            counts[digit(k, pass)] += 1;
        }
        let mut all = vec![0u64; self.p * DIGITS];
        waits(|| self.coll.allgather(&counts, &mut all))?;
        // Where this rank's keys of each digit start in the global order: after every
        // key of a lower digit, then after lower ranks' keys of the same digit.
        let mut start = vec![0usize; DIGITS];
        let mut before = 0u64;
        for (d, s) in start.iter_mut().enumerate() {
            let of = |r: usize| all[r * DIGITS + d];
            *s = (before + (0..self.me).map(of).sum::<u64>()) as usize;
            before += (0..self.p).map(of).sum::<u64>();
        }
        // The keys in digit order (a local counting sort), then sent in runs.
        let mut local = vec![0u32; n];
        let mut at: Vec<usize> = counts
            .iter()
            .scan(0, |sum, &c| {
                let s = *sum;
                *sum += c as usize;
                Some(s)
            })
            .collect();
        for &k in keys {
            let d = digit(k, pass);
            local[at[d]] = k;
            at[d] += 1;
        }
        *st.into.borrow_mut() = vec![0; n];
        st.base.set(self.me * n);
        st.got.set(0);
        waits(|| self.am.barrier())?; // every rank ready for the keys of this pass
        let mut from = 0;
        for d in 0..DIGITS {
            let mut place = start[d];
            let end = from + counts[d] as usize;
            while from < end {
                // A run stops at the message's size and at the end of a rank's places.
                let room = n - place % n;
                let take = PER_MESSAGE.min(end - from).min(room);
                let (run, to) = (&local[from..from + take], place / n);
                match to == self.me {
                    true => self.send(mode, to, place, run)?, // to itself: no other rank
                    false => messages(size_of_val(run), || self.send(mode, to, place, run))?,
                }
                (place, from) = (place + take, from + take);
            }
        }
        waits(|| self.receive_all(mode, n))?;
        waits(|| self.am.barrier())?; // no key of this pass still in flight to anyone
        Ok(std::mem::take(&mut *st.into.borrow_mut()))
    }

    /// Takes messages until `n` keys have landed: spinning a bounded time between
    /// looks, then sleeping until a message comes (ranks may share cores).
    fn receive_all(&self, mode: Mode, n: usize) -> Result<(), AppError> {
        let st = self.am.state();
        if mode == Mode::Handlers {
            self.am
                .wait_until(|st| st.got.get() >= n || st.bad.get() > 0)?;
        }
        let mut backoff = Backoff::new();
        while st.got.get() < n && st.bad.get() == 0 {
            match self.receive(mode)? {
                0 if backoff.is_yielding() => match self.am.rq().wait(&self.set, Some(NAP)) {
                    Ok(_) | Err(amrq::rq::RqError::Timeout { .. }) => {} // left queued
                    Err(e) => return Err(e.into()),
                },
                0 => backoff.snooze(),
                _ => backoff.reset(),
            }
        }
        match st.bad.get() {
            0 => Ok(()),
            bad => Err(format!("radix sort `{}`: {bad} malformed messages", mode.name()).into()),
        }
    }

    /// Sends `keys` bound for places `place ..` of rank `to`, receiving meanwhile
    /// while the destination's queue is full.
    fn send(&self, mode: Mode, to: usize, place: usize, keys: &[u32]) -> Result<(), AppError> {
        let (w, words) = pack(place, keys);
        if mode == Mode::Handlers {
            self.am.request(to, self.land_h, &w[..words])?;
        } else {
            let mut backoff = Backoff::new();
            while !self
                .am
                .rq()
                .enqueue_as(to, self.q, Kind::Express, 0, &w[..words], &[])?
            {
                match self.receive(mode)? + self.am.poll()? {
                    0 => backoff.snooze(),
                    _ => backoff.reset(),
                }
            }
        }
        self.receive(mode)?; // attentive: a look after each message
        Ok(())
    }

    /// Takes the messages that have arrived, by `mode`'s means: how many.
    fn receive(&self, mode: Mode) -> Result<usize, AppError> {
        let st = self.am.state();
        match mode {
            Mode::Handlers => Ok(self.am.poll()?),
            Mode::Inlined => Ok(self.am.rq().poll_queue(self.q, usize::MAX, |f| {
                land(st, f.args());
                Ok::<_, amrq::conduit::ConduitError>(())
            })?),
            Mode::Dequeue => {
                let (rq, mut w) = (self.am.rq(), [0u64; 6]);
                let mut took = 0;
                while rq
                    .read_queue_prefix(self.q, &mut w[..1], &mut [])?
                    .is_some()
                {
                    // The header says how many words follow: dequeue that many.
                    let words = words_of(w[0]).min(w.len());
                    if rq
                        .dequeue_prefix(self.q, &mut w[..words], &mut [])?
                        .is_none()
                    {
                        rq.delete_queue(self.q)?; // shorter than its header says
                        st.bad.set(st.bad.get() + 1);
                        continue;
                    }
                    land(st, &w[..words]);
                    took += 1;
                }
                Ok(took)
            }
        }
    }

    /// Whether the ranks' runs `sorted`, end to end, are `want` (rank 0's: every
    /// rank's keys sorted by one core), key for key.
    fn check(&self, sorted: &[u32], want: &[u32]) -> Result<bool, AppError> {
        let mut all = vec![
            0u32;
            if self.me == 0 {
                sorted.len() * self.p
            } else {
                0
            }
        ];
        self.coll.gather(0, sorted, &mut all)?;
        let mut ok = [u64::from(self.me != 0 || all == want)];
        self.coll.broadcast(0, &mut ok)?;
        Ok(ok[0] == 1)
    }
}

/// The keys of rank `r` of `p` (the same on every run).
fn keys_of(r: usize, n: usize) -> Vec<u32> {
    let mut x = 0x5eed_0000 + r as u64;
    (0..n).map(|_| crate::next(&mut x) as u32).collect()
}

/// `keys` sorted by one core, by the same passes.
fn sorted_by_one_core(keys: &[u32]) -> Vec<u32> {
    let (mut a, mut b) = (keys.to_vec(), vec![0u32; keys.len()]);
    for pass in 0..PASSES {
        let mut at = [0usize; DIGITS];
        for &k in &a {
            at[digit(k, pass)] += 1;
        }
        let mut sum = 0;
        for c in at.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for &k in &a {
            let d = digit(k, pass);
            b[at[d]] = k;
            at[d] += 1;
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}

/// One rank of the radix sort (queue `q` configured on every rank): the outcome on
/// rank 0.
pub fn rank_main(setup: Setup, q: QueueId, shape: Shape) -> Result<Option<Outcome>, AppError> {
    let (me, p, n) = (setup.rank(), setup.size(), shape.keys);
    if n == 0 || n * p >= 1 << 48 {
        return Err(format!("--keys {n}: from 1 to 2^48 / ranks").into());
    }
    let mut t = HandlerTable::<Landing>::new();
    let land_h = t.request("radix_land", |st, _ctx, m| {
        land(st, m.args());
        Ok(())
    });
    let landing = Landing {
        into: RefCell::new(Vec::new()),
        base: Cell::new(0),
        got: Cell::new(0),
        bad: Cell::new(0),
    };
    let job = setup.start(t, landing)?;
    let (am, coll) = (job.am(), job.coll());
    let s = Sorter {
        am,
        coll,
        q,
        set: am.rq().poll_set(&[q])?,
        land_h,
        me,
        p,
    };
    let keys = keys_of(me, n);
    let everyone: Vec<u32> = match me {
        0 => (0..p).flat_map(|r| keys_of(r, n)).collect(),
        _ => Vec::new(),
    };
    let want = sorted_by_one_core(&everyone);
    let mut ms: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut speedup: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut over: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut seq_ms = Vec::new();
    for batch in 0..=shape.batches {
        let seq = crate::on_rank_0_alone(am, || {
            crate::ns_of(|| sorted_by_one_core(std::hint::black_box(&everyone)))
        })?;
        let mut ns = [0.0; MODES.len()];
        for k in 0..MODES.len() {
            let i = (batch + k) % MODES.len();
            let sorted;
            (sorted, ns[i]) = s.sort(MODES[i], keys.clone())?;
            if !s.check(&sorted, &want)? {
                return Err(
                    format!("radix sort `{}`: the keys are not sorted", MODES[i].name()).into(),
                );
            }
        }
        if batch > 0 {
            for i in 0..MODES.len() {
                ms[i].push(ns[i] / 1e6);
                speedup[i].push(seq / ns[i]);
                over[i].push(ns[0] / ns[i]);
            }
            seq_ms.push(seq / 1e6);
        }
    }
    // One more run, profiled: where the inlined loop's time goes.
    let seq = amrq_bench::reference::median(&mut seq_ms.clone()) * 1e6;
    let run = || Ok(s.sort(Mode::Inlined, keys.clone())?.1);
    let profile = crate::profile::measure(am, seq, run)?;
    am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    let mut o = Outcome::new("radix", p, 0.0);
    profile.push(&mut o);
    for (i, m) in MODES.iter().enumerate() {
        o.figures
            .push(Figure::of(format!("{}_ms", m.name()), &mut ms[i]));
        o.figures
            .push(Figure::of(format!("{}_speedup", m.name()), &mut speedup[i]));
        if i > 0 {
            o.figures.push(Figure::of(
                format!("{}_over_handlers", m.name()),
                &mut over[i],
            ));
        }
    }
    o.figures.push(Figure::of("sequential_ms", &mut seq_ms));
    o.figures.push(Figure::single("keys", (n * p) as f64));
    o.figures.push(Figure::single("size", n as f64));
    o.notes.push(format!(
        "{n} 32-bit keys per rank, {} passes of {BITS} bits, up to {PER_MESSAGE} keys per Express message; ms per sort (the longest rank's; every pass ends in a barrier); speed-up over one core's radix sort of every rank's keys, timed on rank 0 in the same batch; *_over_handlers: handlers' time over the mode's, per batch (above 1: the mode is faster)",
        PASSES
    ));
    Ok(Some(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_carries_its_keys_and_lands_only_inside_the_run() {
        let st = Landing {
            into: RefCell::new(vec![0; 20]),
            base: Cell::new(100),
            got: Cell::new(0),
            bad: Cell::new(0),
        };
        let keys = [7, u32::MAX, 0, 42, 5];
        let (w, words) = pack(103, &keys);
        assert_eq!((words, words_of(w[0])), (4, 4));
        assert!(land(&st, &w[..words]));
        assert_eq!(&st.into.borrow()[3..8], &keys);
        assert_eq!(st.got.get(), 5);
        assert!(!land(&st, &w[..words - 1]), "short of its count");
        assert!(!land(&st, &pack(99, &keys).0), "before the run");
        assert!(!land(&st, &pack(117, &keys).0), "past its end");
        assert_eq!((st.bad.get(), st.got.get()), (3, 5));
    }

    #[test]
    fn the_sequential_passes_sort() {
        let keys = keys_of(3, 5000);
        let mut want = keys.clone();
        want.sort_unstable();
        assert_eq!(sorted_by_one_core(&keys), want);
    }
}
