//! Liu & Culler §5.1.1, the unloaded network: two ranks, Short Active Messages whose
//! handler increments a counter, received by polling.
//!
//! - *round-trip*: a request and its reply, one at a time (`T = 2L + 4o` in LogP),
//!   beside the raw cache-line round trip of the same two ranks, measured in
//!   alternating batches.
//! - *one-to-one*: rank 0 pipelines 1024 requests to rank 1, then waits for a reply
//!   that acknowledges all of them (one ring per pair is FIFO: when rank 1 handles the
//!   last request, it has handled the 1024); the time per message.

use crate::report::Figure;
use amrq::conduit::mem::MemConduit;
use amrq::prelude::*;
use amrq::reference::{RawPingPong, RAW_PINGPONG_BYTES};
use std::cell::Cell;
use std::time::Instant;

/// Messages per one-to-one burst (the paper's 1024).
pub const BURST: u64 = 1024;

/// How much to measure.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Batches (each a median sample).
    pub batches: usize,
    /// Round trips per batch, or bursts per batch for one-to-one.
    pub iters: u64,
}

struct State {
    count: Cell<u64>,
    acked: Cell<u64>,
    ack: ReplyHandler,
}

fn am_of(c: MemConduit) -> Result<(Am<State>, RequestHandler, RequestHandler), AmError> {
    let mut table = HandlerTable::new();
    let ack = table.reply("ack", |s: &State, m| {
        s.acked.set(m.arg(0));
        Ok(())
    });
    let bump = table.request("bump", |s: &State, _ctx, _m| {
        s.count.set(s.count.get() + 1);
        Ok(())
    });
    let ping = table.request("ping", |s: &State, ctx, _m| {
        s.count.set(s.count.get() + 1);
        ctx.reply(s.ack, &[s.count.get()])
    });
    let state = State {
        count: Cell::new(0),
        acked: Cell::new(0),
        ack,
    };
    Ok((Am::new(c, table, state)?, bump, ping))
}

fn two_ranks(c: &MemConduit) -> Result<(), AmError> {
    match c.size() {
        2 => Ok(()),
        n => Err(AmError::Rq(RqError::Conduit(
            amrq::conduit::ConduitError::Setup(format!(
                "the unloaded benchmarks run on 2 ranks, not {n}"
            )),
        ))),
    }
}

/// *round-trip*: figures `round_trip_ns`, `raw_rtt_ns` and `ratio` on rank 0 (`None`
/// elsewhere).
pub fn round_trip(c: MemConduit, p: Params) -> Result<Option<Vec<Figure>>, AmError> {
    two_ranks(&c)?;
    let (seg, len) = c.mapped_segment(0).expect("rank 0 exists");
    assert!(
        len >= RAW_PINGPONG_BYTES,
        "segment too small for the raw reference"
    );
    // SAFETY: rank 0's segment is mapped by both ranks and zeroed at creation; this
    // benchmark uses its first bytes only for the raw reference.
    let raw = unsafe { RawPingPong::in_memory(seg) };
    let (am, _, ping) = am_of(c)?;
    let (mut am_ns, mut raw_ns, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..=p.batches as u64 {
        let base = b * p.iters;
        if am.rank() == 0 {
            let r = raw.initiate(base, p.iters);
            let t = Instant::now();
            for i in base + 1..=base + p.iters {
                am.request(1, ping, &[])?;
                am.wait_until(|s| s.acked.get() >= i)?;
            }
            let a = t.elapsed().as_nanos() as f64 / p.iters as f64;
            if b > 0 {
                am_ns.push(a);
                raw_ns.push(r);
                ratio.push(a / r);
            }
        } else {
            raw.respond(base, p.iters);
            am.wait_until(|s| s.count.get() >= base + p.iters)?;
        }
    }
    am.barrier()?;
    Ok((am.rank() == 0).then(|| {
        vec![
            Figure::of("round_trip_ns", &mut am_ns),
            Figure::of("raw_rtt_ns", &mut raw_ns),
            Figure::of("ratio", &mut ratio),
        ]
    }))
}

/// *one-to-one*: figures `ns_per_msg` and `msgs_per_s` on rank 0 (`None` elsewhere).
pub fn one_to_one(c: MemConduit, p: Params) -> Result<Option<Vec<Figure>>, AmError> {
    two_ranks(&c)?;
    let (am, bump, ping) = am_of(c)?;
    let (mut per_msg, mut rate) = (Vec::new(), Vec::new());
    let mut sent = 0u64;
    for b in 0..=p.batches {
        am.barrier()?;
        if am.rank() == 0 {
            let t = Instant::now();
            for _ in 0..p.iters {
                for _ in 0..BURST - 1 {
                    am.request(1, bump, &[])?;
                }
                am.request(1, ping, &[])?; // the last of the burst asks for the ack
                sent += BURST;
                am.wait_until(|s| s.acked.get() >= sent)?;
            }
            let ns = t.elapsed().as_nanos() as f64 / (p.iters * BURST) as f64;
            if b > 0 {
                per_msg.push(ns);
                rate.push(1e9 / ns);
            }
        } else {
            sent += p.iters * BURST;
            am.wait_until(|s| s.count.get() >= sent)?;
        }
    }
    am.barrier()?;
    Ok((am.rank() == 0).then(|| {
        vec![
            Figure::of("ns_per_msg", &mut per_msg),
            Figure::of("msgs_per_s", &mut rate),
        ]
    }))
}
