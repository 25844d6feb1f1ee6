//! Liu & Culler §5.1.2 and §5.2.2, the loaded network: every rank sends and receives
//! at once.
//!
//! - *ring*: rank i sends 1024 Short requests to rank i+1 while receiving 1024 from
//!   rank i−1; the time per message (g + o in LogP). With arrays, each rank sends
//!   Long arrays of each size to its right neighbour, and `T = c + x/B` is fitted.
//! - *traverse*: step i (0 ≤ i < P, P rounded up to a power of two) pairs rank j with
//!   rank j XOR i (itself at step 0; idle if that rank does not exist); the pairs
//!   exchange 1024 messages, the same with a poll after each send (Liu & Culler's
//!   Figure 4), then arrays; per step, the time per message and the array bandwidth.
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

/// How a rank sends in [`exchange`].
#[derive(Clone, Copy, PartialEq)]
enum SendKind<'a> {
    /// Short requests.
    Short,
    /// Short requests, each followed by a poll (Liu & Culler's Figure 4).
    ShortPolled,
    /// Long arrays of these bytes.
    Long(&'a [u8]),
}

/// Sends `count` messages to `dest` while taking in `count` from `src`; ns per message.
/// `expect` is the running count of requests this rank has handled.
fn exchange(
    b: &BenchAm,
    p: &Params,
    dest: Rank,
    count: u64,
    send: SendKind,
    expect: &mut u64,
) -> amrq::Result<f64> {
    let t = p.clock.start();
    for _ in 0..count {
        if let SendKind::Long(bytes) = send {
            b.am.request_long(dest, b.land, &[0], bytes, LANDING)?;
        } else {
            b.am.request(dest, b.bump, &[])?;
            if send == SendKind::ShortPolled {
                b.am.poll()?;
            }
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
        msgs.push(exchange(&b, p, right, BURST, SendKind::Short, &mut expect)?);
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
            v.push(exchange(
                &b,
                p,
                right,
                count,
                SendKind::Long(&data),
                &mut expect,
            )?);
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

/// *traverse*: per step, ns per message (Short requests; the same with a poll after
/// each send, Liu & Culler's Figure 4) and the bandwidth of arrays of 64 KiB (16 KiB
/// with `--quick`). Step 0 pairs each rank with itself, so the figures keep it apart:
/// `self_*` is step 0, `pair_*` the median over the steps with a partner.
pub fn traverse(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "traverse", 2, true)?;
    let b = BenchAm::new(setup)?;
    let n = b.am.size();
    let steps = n.next_power_of_two();
    let x = if p.quick { 16 << 10 } else { 64 << 10 };
    let data = vec![3u8; x];
    let arrays = p.pick(8, 32);
    let mut expect = 0;
    // Per kind (Short, Short with a poll, arrays), one point per step.
    let mut pts: [Vec<Point>; 3] = Default::default();
    for step in 0..steps {
        let partner = b.rank() ^ step;
        let mut v: [Vec<f64>; 3] = Default::default();
        let kinds = [
            (BURST, SendKind::Short),
            (BURST, SendKind::ShortPolled),
            (arrays, SendKind::Long(&data)),
        ];
        for _ in 0..=p.batches {
            for ((count, send), v) in kinds.iter().zip(&mut v) {
                // Every rank, idle ones too: the pairs start each kind together.
                b.am.barrier()?;
                if partner < n {
                    v.push(exchange(&b, p, partner, *count, *send, &mut expect)?);
                }
            }
        }
        for (k, v) in v.iter_mut().enumerate() {
            // Idle ranks report NaN and are left out; the first batch is a warm-up.
            let mine = if partner < n {
                v.remove(0);
                crate::reference::median(v)
            } else {
                f64::NAN
            };
            if let Some(mut all) = over_ranks(&b, mine)? {
                if k == 2 {
                    all.iter_mut().for_each(|ns| *ns = x as f64 * 1e3 / *ns);
                }
                pts[k].push(Point::of(step as f64, &mut all));
            }
        }
    }
    b.am.barrier()?;
    Ok((b.rank() == 0).then(|| {
        let mut o = Outcome::new("traverse", n, p.clock.overhead_ns());
        let [short, polled, bw] = pts;
        for (key, points) in [
            ("ns_per_msg", &short),
            ("polled_ns_per_msg", &polled),
            ("bandwidth_mb_s", &bw),
        ] {
            let mut medians = points.iter().map(|p| p.median);
            if let Some(at_self) = medians.next() {
                o.figures.push(Figure::single(format!("self_{key}"), at_self));
            }
            let mut pairs: Vec<f64> = medians.collect();
            if !pairs.is_empty() {
                o.figures.push(Figure::of(format!("pair_{key}"), &mut pairs));
            }
        }
        o.notes.push(
            "self_*: step 0, each rank exchanging with itself; pair_*: the median over the steps with a partner (spread: over those steps); polled: a poll after each send (Liu & Culler's Figure 4)"
                .into(),
        );
        for (name, y, points) in [
            ("traverse, Short messages", "ns per message", short),
            ("traverse, Short messages, a poll after each send", "ns per message", polled),
            (&*format!("traverse, {} KiB arrays", x >> 10), "MB/s", bw),
        ] {
            o.series.push(Series {
                name: name.into(),
                x: "step".into(),
                y: y.into(),
                points,
            });
        }
        o
    }))
}
