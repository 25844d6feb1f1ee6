//! StarT-Voyager's message mechanisms (Ang et al. §5: Figures 5, 7 and 8) on amrq's
//! Remote Queues, 2 ranks, each mechanism as amrq provides it:
//!
//! - Express: one u64 arg, one ring slot published by one store;
//! - Basic: the arg and a payload in consecutive slots;
//! - Tag-On: the arg in one slot naming a block of the receiver's Tag-On pool, where
//!   the payload is;
//! - DMA: a put into the receiver's segment, then an Express completion frame
//!   (`Rma::put_with`): the processor copies, there is no engine.
//!
//! Per mechanism, in batches that alternate them: the processor overhead (Figure 5) of
//! sending a burst into an empty queue and of taking in a burst that has arrived
//! (reading Basic and Tag-On payloads byte by byte); the one-way latency (Figure 7),
//! half a ping-pong of that mechanism; the bandwidth of a stream of each size
//! (Figure 8). Remote Queues' Figure 4 (an Active Message's one-way latency on top of
//! the queues against the queues' own) takes the Short AM ping-pong of the same
//! batches; its Table 2 (`am_store_async`'s send and receive overheads, here a 64-byte
//! put with completion) takes the put alone beside the DMA figures.

use crate::fixture::{bench_error, require_ranks, BenchAm};
use crate::reference::median;
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::conduit::{Conduit, ReceivedFrame};
use amrq::prelude::*;
use amrq::rma::Completion;
use amrq::rq::{Kind, QueueId};

/// Payload bytes of a Basic, Tag-On or DMA message in the overhead and latency figures
/// (Remote Queues' Table 2 transfers 64 bytes).
const SMALL: usize = 64;

/// Messages per burst of the overhead figures: the queue holds them all.
const BURST: u64 = 128;

/// The queue's capacity in slots.
pub const QUEUE_SLOTS: u64 = 2048;

/// The Tag-On blocks a sender may hold: a burst's.
const TAG_ON_BUFFERS: usize = 256;

/// The queue this job needs, with room for a burst of every mechanism.
pub fn configure(cfg: &mut Config) -> QueueId {
    cfg.tag_on_buffers
        .set(cfg.tag_on_buffers.get().max(TAG_ON_BUFFERS));
    cfg.add_queue(QUEUE_SLOTS)
}

/// StarT-Voyager's four mechanisms.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mechanism {
    Express,
    Basic,
    TagOn,
    Dma,
}

impl Mechanism {
    const ALL: [Mechanism; 4] = [
        Mechanism::Express,
        Mechanism::Basic,
        Mechanism::TagOn,
        Mechanism::Dma,
    ];

    fn key(self) -> &'static str {
        match self {
            Mechanism::Express => "express",
            Mechanism::Basic => "basic",
            Mechanism::TagOn => "tag_on",
            Mechanism::Dma => "dma",
        }
    }

    /// Payload sizes of the bandwidth series (Express carries its 8-byte arg).
    fn sizes(self, quick: bool) -> Vec<usize> {
        match self {
            Mechanism::Express => vec![8],
            Mechanism::Basic | Mechanism::TagOn => vec![SMALL, 1024],
            Mechanism::Dma => vec![SMALL, 1024, if quick { 16 << 10 } else { 64 << 10 }],
        }
    }
}

/// What each rank holds.
struct Bench<'a> {
    b: &'a BenchAm,
    q: QueueId,
    /// Where DMA puts land in each segment: four places of the largest size.
    landing: usize,
    data: Vec<u8>,
}

impl Bench<'_> {
    /// Sends message `i` of `m` with `len` payload bytes to `dest`; false if the queue
    /// has no room (a DMA waits for room for its completion frame).
    fn send(&self, m: Mechanism, dest: Rank, i: u64, len: usize) -> amrq::Result<bool> {
        let rq = self.b.am.rq();
        let data = &self.data[..len];
        Ok(match m {
            Mechanism::Express => rq.enqueue_as(dest, self.q, Kind::Express, 0, &[i], &[])?,
            Mechanism::Basic => rq.enqueue_as(dest, self.q, Kind::Basic, 0, &[i], data)?,
            Mechanism::TagOn => rq.enqueue_as(dest, self.q, Kind::TagOn, 0, &[i], data)?,
            Mechanism::Dma => {
                let at = self.landing + (i as usize % 4) * len;
                let done = Completion {
                    notify: Some((self.q, &[i])),
                    ..Default::default()
                };
                self.b.am.rma().put_with(dest, at, data, done)?;
                true
            }
        })
    }

    /// Sends, polling while the queue is full (its credits come back as the receiver
    /// takes frames in).
    fn send_waiting(&self, m: Mechanism, dest: Rank, i: u64, len: usize) -> amrq::Result<()> {
        while !self.send(m, dest, i, len)? {
            self.b.am.poll()?;
        }
        Ok(())
    }

    /// Takes in up to `n` frames of the queue, reading each payload byte by byte (a
    /// DMA's data stays where it landed, as the paper's does): how many it took.
    fn take(&self, n: u64) -> amrq::Result<u64> {
        let mut sum = 0u64;
        let got = self
            .b
            .am
            .rq()
            .poll_queue(self.q, n as usize, |f| -> Result<(), RqError> {
                sum += f.args()[0];
                sum += f
                    .payload()
                    .to_cow()
                    .iter()
                    .map(|&x| u64::from(x))
                    .sum::<u64>();
                Ok(())
            })?;
        std::hint::black_box(sum);
        Ok(got as u64)
    }

    /// Takes in exactly `n` frames.
    fn take_all(&self, n: u64) -> amrq::Result<()> {
        let mut left = n;
        while left > 0 {
            left -= self.take(left)?;
        }
        Ok(())
    }

    /// Conduit barrier: neither rank polls its queue outside the timed parts.
    fn barrier(&self) -> amrq::Result<()> {
        Ok(self.b.am.rq().conduit().barrier().map_err(RqError::from)?)
    }
}

/// Per mechanism: send overhead, receive overhead, one-way latency (ns, per batch).
type Samples = [Vec<f64>; 3];

/// *mechanisms*: figures `{express,basic,tag_on,dma}_{send,receive,one_way}_ns`,
/// `am_one_way_ns`, `put_ns`; one bandwidth series per mechanism.
pub fn mechanisms(setup: Setup, p: &Params, q: QueueId) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "mechanisms", 2, false)?;
    let b = BenchAm::new(setup)?;
    let largest = Mechanism::Dma
        .sizes(p.quick)
        .into_iter()
        .max()
        .unwrap_or(SMALL);
    let bench = Bench {
        b: &b,
        q,
        landing: b.am.rma().alloc_symmetric(4 * largest, 64)?,
        data: (0..largest).map(|i| i as u8).collect(),
    };
    let me = b.rank();
    let pings = p.pick(2_000, 20_000);
    let mut samples: Vec<Samples> = Mechanism::ALL.iter().map(|_| Samples::default()).collect();
    let (mut am_one_way, mut put) = (Vec::new(), Vec::new());
    for batch in 0..=p.batches {
        for (m, s) in Mechanism::ALL.iter().zip(&mut samples) {
            let len = if *m == Mechanism::Express { 0 } else { SMALL };
            // Figure 5: a burst sent into an empty queue, then taken in.
            bench.barrier()?;
            let t = p.clock.start();
            if me == 0 {
                for i in 0..BURST {
                    if !bench.send(*m, 1, i, len)? {
                        return Err(
                            bench_error("mechanisms: the queue is full within a burst").into()
                        );
                    }
                }
            }
            let sent = p.clock.since(t) / BURST as f64;
            bench.barrier()?;
            let t = p.clock.start();
            if me == 1 {
                bench.take_all(BURST)?;
            }
            let taken = p.clock.since(t) / BURST as f64;
            // Figure 7: half a ping-pong.
            bench.barrier()?;
            let t = p.clock.start();
            for i in 0..pings {
                if me == 0 {
                    bench.send_waiting(*m, 1, i, len)?;
                    bench.take_all(1)?;
                } else {
                    bench.take_all(1)?;
                    bench.send_waiting(*m, 0, i, len)?;
                }
            }
            let one_way = p.clock.since(t) / (2 * pings) as f64;
            if batch > 0 {
                let mine = if me == 0 { sent } else { taken };
                s[usize::from(me == 1)].push(mine);
                s[2].push(one_way);
            }
        }
        // Remote Queues' Figure 4: the Short AM ping-pong, in the same batch.
        b.am.barrier()?;
        if me == 0 {
            let ns = crate::unloaded::round_trips(&b, p, 1, pings)? / 2.0;
            // Table 2: the 64-byte put alone.
            let t = p.clock.start();
            for i in 0..BURST as usize {
                b.am.rma()
                    .put(1, bench.landing + (i % 4) * SMALL, &bench.data[..SMALL])?;
            }
            let put_ns = p.clock.since(t) / BURST as f64;
            if batch > 0 {
                am_one_way.push(ns);
                put.push(put_ns);
            }
        } else {
            b.wait_count((batch as u64 + 1) * pings)?;
        }
    }
    // Figure 8: streams of each size.
    let streamed = p.pick(2_000u64, 20_000);
    let mut series = Vec::new();
    for m in Mechanism::ALL {
        let mut points = Vec::new();
        for len in m.sizes(p.quick) {
            let n = if len > 4096 { streamed / 16 } else { streamed };
            let mut v = Vec::new();
            for batch in 0..=p.batches.min(11) {
                bench.barrier()?;
                let t = p.clock.start();
                if me == 0 {
                    let payload = if m == Mechanism::Express { 0 } else { len };
                    for i in 0..n {
                        bench.send_waiting(m, 1, i, payload)?;
                    }
                    bench.take_all(1)?; // the receiver's word that it has all
                } else {
                    bench.take_all(n)?;
                    bench.send_waiting(Mechanism::Express, 0, 0, 0)?;
                }
                let ns = p.clock.since(t);
                if batch > 0 {
                    v.push((n * len as u64) as f64 * 1e3 / ns);
                }
            }
            if me == 0 {
                points.push(Point::of(len as f64, &mut v));
            }
        }
        series.push(Series {
            name: format!("{} stream", m.key()),
            x: "payload bytes".into(),
            y: "MB/s".into(),
            points,
        });
    }
    // Rank 1's receive overheads (median, least, most), to rank 0.
    let mut told = Vec::new();
    for s in &mut samples {
        let v = &mut s[1];
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                (l.min(x), h.max(x))
            });
        let mut stats = Vec::new();
        for x in [median(v), lo, hi] {
            stats.push(b.gather(x)?.and_then(|all| all.get(1).copied()));
        }
        told.push(stats);
    }
    b.am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    let mut o = Outcome::new("mechanisms", 2, p.clock.overhead_ns());
    for ((m, s), all) in Mechanism::ALL.iter().zip(&mut samples).zip(told) {
        let key = m.key();
        o.figures
            .push(Figure::of(format!("{key}_send_ns"), &mut s[0]));
        if let [Some(median), Some(min), Some(max)] = all[..] {
            o.figures.push(Figure {
                key: format!("{key}_receive_ns"),
                median,
                min,
                max,
            });
        }
        o.figures
            .push(Figure::of(format!("{key}_one_way_ns"), &mut s[2]));
    }
    o.figures.push(Figure::of("am_one_way_ns", &mut am_one_way));
    o.figures.push(Figure::of("put_ns", &mut put));
    o.series = series;
    o.notes.push(format!(
        "send and receive: a burst of {BURST} into an empty queue, per message; Basic, Tag-On and DMA carry {SMALL} bytes; Basic and Tag-On payloads read byte by byte on receipt, a DMA's left where it landed; one-way: half a ping-pong"
    ));
    o.notes.push(
        "DMA is a put into the receiver's segment (the sending processor copies) followed by an Express completion frame (`Rma::put_with`)".into(),
    );
    Ok(Some(o))
}
