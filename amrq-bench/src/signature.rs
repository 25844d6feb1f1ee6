//! The LogP microbenchmark signature (Culler et al.; Begel et al. §6.1): rank 0 issues
//! bursts of k Short requests with Δ ns of computation between sends and times the
//! burst (the clock stops when the last send returns; the acknowledgement is awaited
//! outside the timed part). A short burst costs its send overheads; a long one, once
//! the ring to rank 1 is full, settles at the gap. With the round trip and the
//! receive overhead (rank 0 handling requests that have all arrived) measured in the
//! same run, [`crate::analysis::derive_logp`] gives o_s, o_r, g and L.

use crate::analysis::derive_logp;
use crate::clock::{work, work_per_ns};
use crate::fixture::{require_ranks, BenchAm};
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::conduit::Conduit;
use amrq::prelude::*;

/// Δ between sends, ns.
const DELTAS: [f64; 4] = [0.0, 50.0, 200.0, 1000.0];

/// The ring to each peer, in slots (the job sets it): a burst longer than this fills
/// it, so the bursts of at least twice this length give the gap.
pub const RING_SLOTS: u64 = 256;

/// The longest burst that gives the send overhead (the ring always has room).
const SHORT: usize = 16;

/// Requests rank 1 leaves in rank 0's ring for the receive overhead (fit in the ring).
const ARRIVED: u64 = RING_SLOTS / 2;

/// *signature*: the burst series per Δ, `rtt_ns`, and `o_s_ns`, `o_r_ns`, `g_ns`, `l_ns`.
pub fn signature(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "signature", 2, false)?;
    let b = BenchAm::new(setup)?;
    let me = b.rank();
    let barrier = || b.am.rq().conduit().barrier().map_err(RqError::from);
    let max_k = 1u64 << p.pick(10, 12);
    let per_ns = work_per_ns();
    let mut x = 1u64;
    let mut expect = 0;
    let mut o = Outcome::new("signature", 2, p.clock.overhead_ns());
    for &delta in &DELTAS {
        let steps = (delta * per_ns) as u64;
        let mut points = Vec::new();
        let mut k = 1;
        while k <= max_k {
            // Enough bursts that a batch moves ≥ 4096 messages.
            let bursts = (4096 / k).max(2);
            let mut v = Vec::new();
            for batch in 0..=p.batches {
                b.am.barrier()?;
                expect += bursts * k;
                if me == 1 {
                    b.wait_count(expect)?;
                    continue;
                }
                let mut ns = 0.0;
                for _ in 0..bursts {
                    let acks = b.am.state().acks.get();
                    let t = p.clock.start();
                    for _ in 1..k {
                        b.am.request(1, b.bump, &[])?;
                        work(steps, &mut x);
                    }
                    b.am.request(1, b.ping, &[])?;
                    ns += p.clock.since(t);
                    b.wait_acks(acks + 1)?;
                }
                if batch > 0 {
                    v.push(ns / (bursts * k) as f64);
                }
            }
            if me == 0 {
                points.push(Point::of(k as f64, &mut v));
            }
            k *= 2;
        }
        o.series.push(Series {
            name: format!("burst, Δ = {delta} ns"),
            x: "burst length k".into(),
            y: "ns per message".into(),
            points,
        });
    }
    // Receive overhead: requests that have all arrived, handled by polling.
    let mut o_r = Vec::new();
    for _ in 0..p.batches {
        barrier()?;
        if me == 1 {
            for _ in 0..ARRIVED {
                b.am.request(0, b.bump, &[])?;
            }
        }
        barrier()?;
        if me == 0 {
            let target = b.am.state().count.get() + ARRIVED;
            let t = p.clock.start();
            b.wait_count(target)?;
            o_r.push(p.clock.since(t) / ARRIVED as f64);
        }
    }
    // Round trip.
    let iters = p.pick(2_000, 20_000);
    let mut rtt = Vec::new();
    for _ in 0..p.batches {
        b.am.barrier()?;
        if me == 0 {
            rtt.push(crate::unloaded::round_trips(&b, p, 1, iters)?);
        } else {
            expect += iters;
            b.wait_count(expect)?;
        }
    }
    b.am.barrier()?;
    if me != 0 {
        return Ok(None);
    }
    let rtt = Figure::of("rtt_ns", &mut rtt);
    let o_r = Figure::of("o_r_ns", &mut o_r);
    let burst: Vec<(usize, f64)> = o.series[0]
        .points
        .iter()
        .map(|p| (p.x as usize, p.median))
        .collect();
    let long = 2 * RING_SLOTS as usize;
    if let Some(logp) = derive_logp(&burst, SHORT, long, rtt.median, o_r.median) {
        o.figures.push(Figure::single("o_s_ns", logp.o_s));
        o.figures.push(o_r);
        o.figures.push(Figure::single("g_ns", logp.g));
        o.figures.push(Figure::single("l_ns", logp.l));
        let negative: Vec<&str> = [("o_s", logp.o_s), ("g", logp.g), ("L", logp.l)]
            .iter()
            .filter(|p| p.1 < 0.0)
            .map(|p| p.0)
            .collect();
        if !negative.is_empty() {
            o.notes.push(format!(
                "the LogP model does not fit this run: {} came out negative (the overheads overlapped the transfer, or the VM changed placement between the bursts and the round trip)",
                negative.join(", ")
            ));
        }
    }
    o.figures.push(rtt);
    o.notes.push(format!(
        "o_s: slope of the burst time over bursts of k ≤ {SHORT} at Δ = 0; g: its slope over k ≥ {long} (the {RING_SLOTS}-slot ring full); o_r: requests that have all arrived, handled; L = rtt/2 − o_s − o_r. The clock is read once per timed interval and its cost subtracted once; a burst's fixed start cost falls into the fit's intercept"
    ));
    Ok(Some(o))
}
