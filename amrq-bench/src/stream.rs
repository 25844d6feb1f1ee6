//! Begel et al. §6.1's one-way time and streaming, per message size, and amrq's side of
//! the peers table measured as the peers measure it.
//!
//! - *one-way time*: a Long request of x bytes reflected by a Long reply of the same
//!   bytes; half the round trip.
//! - *streaming*: Long requests of x bytes sent back to back (the ring's flow control
//!   paces them), the last acknowledged, after one untimed message that brings the
//!   landing bytes back to the sender's cache; bytes per second. Its 64 KiB and 1 MiB
//!   points are the peers table's bandwidths (`mpi_bench.c`'s windows of `MPI_Isend`,
//!   `ucx_perftest`'s `ucp_am_bw`).
//! - *reading a Long payload*: Long requests of x bytes streamed as above to a handler
//!   that sums the payload's bytes, read three ways in turn: lent in place (`unsafe`),
//!   copied out by `m.payload()`, copied by `copy_to` into a buffer kept across
//!   messages. Each message lands at its own offset, one of more than a ring's worth,
//!   so that no later message is written into bytes a handler still reads.
//! - the 2-rank barrier.
//!
//! The round trip and the message rate of the peers table come from *round-trip* and
//! *one-to-one*.

use crate::array::{sizes, sweep};
use crate::fixture::{bench_error, require_ranks, BenchAm, Read};
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::conduit::Conduit;
use amrq::prelude::*;

/// Where arrays land (rank 1) and where reflections land (rank 0).
const LANDING: usize = 0;

/// Messages per batch: about 16 MiB streamed (2 MiB with `quick`), between 16 and
/// 4096 messages.
fn messages(p: &Params, x: usize) -> u64 {
    let bytes = if p.quick { 2 << 20 } else { 16 << 20 };
    (bytes / x).clamp(16, 4096) as u64
}

/// One batch of `n` reflected arrays (combination 0) or `n` streamed ones (1): ns on
/// rank 0 (half the round trip for reflections), `None` on rank 1.
fn batch(
    b: &BenchAm,
    p: &Params,
    streaming: bool,
    data: &[u8],
    n: u64,
    expect: &mut u64,
) -> amrq::Result<Option<f64>> {
    b.am.barrier()?;
    *expect += n + u64::from(streaming);
    if b.rank() != 0 {
        b.wait_count(*expect)?;
        return Ok(None);
    }
    if streaming {
        // One untimed message first: the reflections just before left the landing
        // bytes in the receiver's cache, and a stream's sender has them in its own.
        // Without it, batches of sixteen 1 MiB messages ran at 40 GB/s, their first
        // copy fetching every line back; with it 54-57 GB/s, as batches of 256 did
        // (2 ranks, AMD EPYC, ~550 ns placement; GASNet-EX's flood of 2000: 56 GB/s).
        b.am.request_long(1, b.land, &[0], data, LANDING)?;
    }
    let t = p.clock.start();
    if streaming {
        let acks = b.am.state().acks.get();
        for i in 1..=n {
            b.am.request_long(1, b.land, &[u64::from(i == n)], data, LANDING)?;
        }
        b.wait_acks(acks + 1)?;
        return Ok(Some(p.clock.since(t)));
    }
    for _ in 0..n {
        let back = b.am.state().fetched.get();
        b.am.request_long(1, b.echo, &[LANDING as u64], data, LANDING)?;
        b.am.wait_until(|s| s.fetched.get() > back)?;
    }
    Ok(Some(p.clock.since(t) / 2.0))
}

/// The read modes, in the order of their series.
const READS: [Read; 3] = [Read::InPlace, Read::Copied, Read::CopiedTo];

/// Landing places for `read` batches: one more than the messages a ring holds. The
/// sender writes a message's bytes only once its frame has a slot, and a slot is free
/// only once the handler of the frame before it there returned, so a place is written
/// again only after its handler ended.
fn read_places(b: &BenchAm) -> usize {
    let caps = b.am.rq().conduit().caps();
    caps.channels[QueueId::AM_REQUEST.index()].slots as usize + 1
}

/// One batch of `n` streamed `read` requests of `data` in mode `read`, landing in turn
/// at `places` places: ns on rank 0, `None` on rank 1.
fn read_batch(
    b: &BenchAm,
    p: &Params,
    read: Read,
    data: &[u8],
    n: u64,
    places: usize,
) -> amrq::Result<Option<f64>> {
    b.am.barrier()?;
    if b.rank() != 0 {
        return Ok(None);
    }
    let acks = b.am.state().acks.get();
    let t = p.clock.start();
    for i in 1..=n {
        let at = (i as usize % places) * data.len();
        b.am.request_long(1, b.read, &[u64::from(i == n), read as u64], data, at)?;
    }
    b.wait_acks(acks + 1)?;
    Ok(Some(p.clock.since(t)))
}

/// MB/s at each point of a series of ns per message.
fn bandwidth(points: &[Point]) -> Vec<Point> {
    points.iter().map(|p| p.map(|x, ns| x * 1e3 / ns)).collect()
}

/// *stream*: the one-way and streaming series, `one_way_8b_ns`, `bw_64k_mb_s`,
/// `bw_1m_mb_s` and `barrier_ns` on rank 0.
pub fn stream(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "stream", 2, false)?;
    let b = BenchAm::new(setup)?;
    let sizes: Vec<usize> = [8]
        .into_iter()
        .chain(sizes(p.quick, true).into_iter().filter(|&x| x > 8))
        .collect();
    let big = vec![5u8; *sizes.last().unwrap_or(&8)];
    let mut expect = 0;
    let series = sweep(p, &sizes, 2, messages, |combo, x, n| {
        batch(&b, p, combo == 1, &big[..x], n, &mut expect)
    })?;
    // The sizes whose places fit the receiver's segment (every rank's has the same size).
    let places = read_places(&b);
    let fitting: Vec<usize> = sizes
        .iter()
        .copied()
        .filter(|&x| places.checked_mul(x).is_some_and(|n| n <= b.am.segment().1))
        .collect();
    let reads = sweep(p, &fitting, READS.len(), messages, |mode, x, n| {
        read_batch(&b, p, READS[mode], &big[..x], n, places)
    })?;
    let iters = p.pick(2_000, 20_000);
    let mut v = Vec::new();
    for _ in 0..=p.batches {
        b.am.barrier()?;
        let t = p.clock.start();
        for _ in 0..iters {
            b.am.barrier()?;
        }
        v.push(p.clock.since(t) / iters as f64);
    }
    v.remove(0);
    b.am.barrier()?;
    if b.rank() != 0 {
        return Ok(None);
    }
    let [one_way, streamed]: [Vec<Point>; 2] = series
        .try_into()
        .map_err(|_| bench_error("stream: two series expected"))?;
    let streamed = bandwidth(&streamed);
    let mut o = Outcome::new("stream", 2, p.clock.overhead_ns());
    let at = |pts: &[Point], x: f64, key: &str| {
        pts.iter().find(|p| p.x == x).map(|p| Figure {
            key: key.into(),
            median: p.median,
            min: p.min,
            max: p.max,
        })
    };
    o.figures.extend(at(&one_way, 8.0, "one_way_8b_ns"));
    o.figures.extend(at(&streamed, 65536.0, "bw_64k_mb_s"));
    o.figures.extend(at(&streamed, 1048576.0, "bw_1m_mb_s"));
    o.figures.push(Figure::of("barrier_ns", &mut v));
    let reads: Vec<Vec<Point>> = reads.iter().map(|pts| bandwidth(pts)).collect();
    for (pts, key) in reads.iter().zip([
        "read_in_place_64k_mb_s",
        "read_copied_64k_mb_s",
        "read_copied_to_64k_mb_s",
    ]) {
        o.figures.extend(at(pts, 65536.0, key));
    }
    let ratio = |pts: &[Point], key: &str| {
        let base = at(&reads[0], 65536.0, key)?;
        at(pts, 65536.0, key).map(|f| Figure {
            key: key.into(),
            median: f.median / base.median,
            min: f.median / base.median,
            max: f.median / base.median,
        })
    };
    o.figures.extend(ratio(&reads[1], "read_copied_64k_ratio"));
    o.figures
        .extend(ratio(&reads[2], "read_copied_to_64k_ratio"));
    o.series.push(Series {
        name: "one-way time (half a reflected Long round trip)".into(),
        x: "bytes".into(),
        y: "ns".into(),
        points: one_way,
    });
    o.series.push(Series {
        name: "streaming Long requests".into(),
        x: "bytes".into(),
        y: "MB/s".into(),
        points: streamed,
    });
    for (pts, how) in reads.into_iter().zip([
        "lent in place (unsafe)",
        "copied out by payload()",
        "copied by copy_to into a kept buffer",
    ]) {
        o.series.push(Series {
            name: format!("streaming Long requests whose handler sums the payload, {how}"),
            x: "bytes".into(),
            y: "MB/s".into(),
            points: pts,
        });
    }
    Ok(Some(o))
}
