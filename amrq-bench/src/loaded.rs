//! Liu & Culler §5.1.2 and §5.2.2, the loaded network: every rank sends and receives
//! at once.
//!
//! - *ring*: rank i sends 1024 Short requests to rank i+1 while receiving 1024 from
//!   rank i−1; the time per message (g + o in LogP). With arrays, each rank sends
//!   Long arrays of each size to its right neighbour, and `T = c + x/B` is fitted.
//! - *traverse*: step i (0 ≤ i < P, P rounded up to a power of two) pairs rank j with
//!   rank j XOR i (itself at step 0; idle if that rank does not exist); the pairs
//!   exchange 1024 messages, then one array per step; per step, the time per message
//!   and the array bandwidth.
//!
//! Each rank takes the median over its batches; a figure is the median over the ranks,
//! with the spread across ranks.

use crate::array::{fit_row, sizes};
use crate::fixture::{require_ranks, BenchAm};
use crate::report::{Figure, Outcome, Point, Series};
use crate::unloaded::BURST;
use crate::Params;
use amrq::prelude::*;

/// Where ring and traverse arrays land in each segment.
const LANDING: usize = 0;

/// Sends `count` messages (Short, or Long arrays of `bytes` if non-zero) to `dest`
/// while taking in `count` from `src`; ns per message. `expect` is the running count
/// of requests this rank has handled.
fn exchange(
    b: &BenchAm,
    p: &Params,
    dest: Rank,
    count: u64,
    bytes: &[u8],
    expect: &mut u64,
) -> amrq::Result<f64> {
    let t = p.clock.start();
    for _ in 0..count {
        if bytes.is_empty() {
            b.am.request(dest, b.bump, &[])?;
        } else {
            b.am.request_long(dest, b.land, &[0], bytes, LANDING)?;
        }
    }
    *expect += count;
    b.wait_count(*expect)?;
    Ok(p.clock.since(t) / count as f64)
}

/// Every rank's `mine` (NaN: idle, left out), on rank 0.
fn over_ranks(b: &BenchAm, mine: f64) -> amrq::Result<Option<Vec<f64>>> {
    Ok(b.gather(mine)?
        .map(|all| all.into_iter().filter(|v| v.is_finite()).collect()))
}

/// *ring*: `ns_per_msg` (Short), and the array fit `startup_ns`, `bandwidth_mb_s`.
pub fn ring(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "ring", 2, true)?;
    let b = BenchAm::new(setup)?;
    let n = b.am.size();
    let right = (b.rank() + 1) % n;
    let mut expect = 0;
    let mut msgs = Vec::new();
    for _ in 0..=p.batches {
        b.am.barrier()?;
        msgs.push(exchange(&b, p, right, BURST, &[], &mut expect)?);
    }
    msgs.remove(0); // warm-up
    let per_msg = over_ranks(&b, crate::reference::median(&mut msgs))?;
    let mut points = Vec::new();
    for &x in &sizes(p.quick, false) {
        let data = vec![7u8; x];
        let count = p.pick(8, 64);
        let mut v = Vec::new();
        for _ in 0..=p.batches {
            b.am.barrier()?;
            v.push(exchange(&b, p, right, count, &data, &mut expect)?);
        }
        v.remove(0);
        let mine = crate::reference::median(&mut v);
        if let Some(mut all) = over_ranks(&b, mine)? {
            points.push(Point::of(x as f64, &mut all));
        }
    }
    b.am.barrier()?;
    Ok(per_msg.map(|mut per_msg| {
        let mut o = Outcome::new("ring", n, p.clock.overhead_ns());
        o.figures.push(Figure::of("ns_per_msg", &mut per_msg));
        let (startup, mb_s) = fit_row(&points);
        o.figures.push(Figure::single("startup_ns", startup));
        o.figures.push(Figure::single("bandwidth_mb_s", mb_s));
        o.series.push(Series {
            name: "ring, array per rank".into(),
            x: "bytes".into(),
            y: "ns".into(),
            points,
        });
        o
    }))
}

/// *traverse*: per step, ns per message and the bandwidth of arrays of 64 KiB (16 KiB
/// with `--quick`); figures are the medians over steps.
pub fn traverse(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "traverse", 2, true)?;
    let b = BenchAm::new(setup)?;
    let n = b.am.size();
    let steps = n.next_power_of_two();
    let x = if p.quick { 16 << 10 } else { 64 << 10 };
    let data = vec![3u8; x];
    let arrays = p.pick(8, 32);
    let mut expect = 0;
    let (mut msg_pts, mut bw_pts) = (Vec::new(), Vec::new());
    for step in 0..steps {
        let partner = b.rank() ^ step;
        let (mut msgs, mut arr) = (Vec::new(), Vec::new());
        for _ in 0..=p.batches {
            b.am.barrier()?;
            if partner < n {
                msgs.push(exchange(&b, p, partner, BURST, &[], &mut expect)?);
                arr.push(exchange(&b, p, partner, arrays, &data, &mut expect)?);
            }
        }
        // Idle ranks report NaN and are left out.
        let (m, a) = if partner < n {
            msgs.remove(0);
            arr.remove(0);
            (
                crate::reference::median(&mut msgs),
                crate::reference::median(&mut arr),
            )
        } else {
            (f64::NAN, f64::NAN)
        };
        let ms = over_ranks(&b, m)?;
        let bs = over_ranks(&b, a)?;
        if let (Some(mut ms), Some(bs)) = (ms, bs) {
            let mut mb_s: Vec<f64> = bs.iter().map(|ns| x as f64 * 1e3 / ns).collect();
            msg_pts.push(Point::of(step as f64, &mut ms));
            bw_pts.push(Point::of(step as f64, &mut mb_s));
        }
    }
    b.am.barrier()?;
    Ok((b.rank() == 0).then(|| {
        let mut o = Outcome::new("traverse", n, p.clock.overhead_ns());
        let mut m: Vec<f64> = msg_pts.iter().map(|p| p.median).collect();
        let mut w: Vec<f64> = bw_pts.iter().map(|p| p.median).collect();
        o.figures.push(Figure::of("ns_per_msg", &mut m));
        o.figures.push(Figure::of("bandwidth_mb_s", &mut w));
        o.series.push(Series {
            name: "traverse, Short messages".into(),
            x: "step".into(),
            y: "ns per message".into(),
            points: msg_pts,
        });
        o.series.push(Series {
            name: format!("traverse, {} KiB arrays", x >> 10),
            x: "step".into(),
            y: "MB/s".into(),
            points: bw_pts,
        });
        o
    }))
}
