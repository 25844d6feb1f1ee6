//! The shapes the papers claim, each checked against the run's own figures: the paper's
//! figure, the shape it shows, what this run measured, whether the shape holds and,
//! where it does not, why. The report prints them as one table.

use crate::files::show;
use crate::report::Point;
use crate::results::Results;
use std::fmt::Write;

/// One shape a paper claims, checked against a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// The paper and its figure or table.
    pub source: &'static str,
    /// The shape the paper shows, with its own figures.
    pub claim: &'static str,
    /// This run's figures the verdict rests on.
    pub measured: String,
    /// `Some(true)`: holds; `Some(false)`: does not hold; `None`: undecided (a figure
    /// is missing, or lies beyond the range measured).
    pub holds: Option<bool>,
    /// Why it does not hold (empty where it holds).
    pub why: String,
}

impl Shape {
    /// The verdict's words.
    pub fn verdict(&self) -> &'static str {
        match self.holds {
            Some(true) => "holds",
            Some(false) => "does not hold",
            None => "undecided",
        }
    }
}

/// A shape whose verdict is `holds` (`None` when a figure is missing) and whose reason,
/// where it does not hold, is `why`.
fn shape(
    (source, claim): (&'static str, &'static str),
    measured: String,
    holds: Option<bool>,
    why: impl Into<String>,
) -> Shape {
    let why = if holds == Some(false) {
        why.into()
    } else {
        String::new()
    };
    Shape {
        source,
        claim,
        measured,
        holds,
        why,
    }
}

/// The reason given where a shape fails for a cause this run's figures do not show.
const UNEXPLAINED: &str =
    "not established: the figures this verdict rests on do not show the cause";

/// "n ns" for a figure, "–" when missing.
fn ns(v: Option<f64>) -> String {
    format!("{} ns", show(v))
}

/// Every shape of the papers this suite measures, in the report's order.
pub fn shapes(r: &Results) -> Vec<Shape> {
    let mut v = liu_culler(r);
    v.extend(voyager(r));
    v.extend(remote_queues(r));
    v.extend(begel(r));
    v.extend(matmul(r));
    v
}

/// The note a benchmark whose ranks outnumber the cores gets as its reason.
fn oversubscribed(r: &Results, job: &str) -> Option<String> {
    let o = r.outcome(job).filter(|o| o.ranks > o.cores)?;
    Some(format!(
        "{job} runs {} ranks on {} cores: a rank shares its core with another, so the time includes the scheduler's",
        o.ranks, o.cores
    ))
}

/// Liu & Culler: Tables 1, 5, 9 and 10, Figures 3, 4, 6 and 7.
fn liu_culler(r: &Results) -> Vec<Shape> {
    let f = |job: &str, key: &str| r.figure(job, key);
    let mut v = Vec::new();
    let o2o = f("one-to-one", "ns_per_msg");
    let live = f("two-to-one", "receive_live_ns");
    v.push(shape(
        ("Liu & Culler, Table 1", "one-to-one about equals two-to-one: the receiver paces the sender (CMAM 1.57 and 1.60 µs)"),
        format!("one-to-one {}, two-to-one (receiver timed while both send) {}", ns(o2o), ns(live)),
        o2o.zip(live).map(|(a, b)| (a / b) > 2.0 / 3.0 && (a / b) < 1.5),
        oversubscribed(r, "two-to-one").unwrap_or_else(|| UNEXPLAINED.into()),
    ));
    let send = f("one-to-two", "send_ns");
    v.push(shape(
        ("Liu & Culler, Table 1", "one-to-two's send overhead below one-to-one's time per message: without the receiver's pace (1.49 against 1.57 µs)"),
        format!("one-to-two {}, one-to-one {}", ns(send), ns(o2o)),
        send.zip(o2o).map(|(s, o)| s < o),
        oversubscribed(r, "one-to-two").unwrap_or_else(|| UNEXPLAINED.into()),
    ));
    let reply = f("two-to-one", "reply_send_ns");
    let o_s = f("signature", "o_s_ns");
    v.push(shape(
        ("Liu & Culler, Table 1", "a reply's send overhead below a request's: sending a reply polls only the reply network (CMAML 1.28 against 1.96 µs)"),
        format!("reply sent by a handler {} (a drain with replies less one without), request o_s {}", ns(reply), ns(o_s)),
        reply.zip(o_s).map(|(a, b)| a < b),
        format!(
            "a reply and a request are written by the same ring code, and neither polls while its ring has room (a reply waiting for room polls only replies, as the CM-5's did); the reply's figure is taken inside a drain, its replies alternating between two rings and interleaved with reading the requests, where o_s is the slope of short bursts into one ring{}",
            oversubscribed(r, "two-to-one").map_or(String::new(), |w| format!("; and {w}"))
        ),
    ));
    let pair = f("one-to-one", "pair_ns_per_msg");
    let rtt = f("round-trip", "round_trip_ns");
    v.push(shape(
        ("Liu & Culler, Table 1", "request-reply pairs pipelined cost a fraction of a round trip, which is mostly latency (T = 2L + 4o; CMAM: about 1.6 against 11.4 µs)"),
        format!("a request-reply pair in bursts of 1024 {}, round trip {}", ns(pair), ns(rtt)),
        pair.zip(rtt).map(|(p, t)| p < 0.5 * t),
        UNEXPLAINED,
    ));
    let self_step = f("traverse", "self_ns_per_msg");
    let pair_step = f("traverse", "pair_ns_per_msg");
    let o_r = f("signature", "o_r_ns");
    let sum = o_s.zip(o_r).map(|(a, b)| a + b);
    v.push(shape(
        ("Liu & Culler, Figure 3", "traverse: while the network is not congested, a message costs about a send plus a receive overhead (CMAM_4: about 3.2 µs)"),
        format!("a step with a partner {} per message, o_s + o_r {}; step 0 (each rank with itself) {}", ns(pair_step), ns(sum), ns(self_step)),
        pair_step.zip(sum).map(|(p, s)| p >= 0.5 * s && p <= 2.0 * s),
        match pair_step.zip(sum) {
            Some((p, s)) if p < 0.5 * s => "the two ranks' sends and receives overlap each other, so a message costs less than the overheads measured with the other side idle",
            _ => "both ranks send and receive at once, so every ring slot and credit line crosses between the cores in both directions; o_s and o_r are each taken with the other side idle",
        },
    ));
    let polled = f("traverse", "pair_polled_ns_per_msg");
    let am_poll = f("polling", "am_poll_ns");
    let extra = polled.zip(pair_step).map(|(a, b)| a - b);
    let self_extra = f("traverse", "self_polled_ns_per_msg")
        .zip(self_step)
        .map(|(a, b)| a - b);
    v.push(shape(
        ("Liu & Culler, Figure 4", "traverse with a poll after each send: about one unsuccessful poll more per message where the network is not congested (0.8 µs on the CM-5)"),
        format!("a step with a partner {} per message with the poll, {} more than without; step 0 {} more; an unsuccessful poll {}", ns(polled), ns(extra), ns(self_extra), ns(am_poll)),
        extra.zip(am_poll).map(|(e, p)| e <= 3.0 * p.max(1.0)),
        "the poll after each send is not an unsuccessful one here: a message is already there (at step 0, where a rank's own message always is, the poll adds more than an empty poll costs), so messages are taken in one at a time; across the cores each such poll also reads a ring line the partner is still filling, which moves the line back and forth, where the wait at the end reads whole lines once",
    ));
    v.push(successful_poll(r));
    v.push(poll_curves(r));
    let toggle = f("interrupts", "hold_ns");
    let pipeline = f("interrupts", "hold_alone_ns");
    let release = f("interrupts", "release_alone_ns");
    v.push(shape(
        ("Liu & Culler, Table 10", "turning interrupts off and on again costs far more than two calls that leave them as they are: a system call each (8.37 µs against 2 × 0.42; here: more than 2×)"),
        format!("a section entered and left {}; `hold` on an open section {} (the instructions of entering one: it does not read its flag), leaving {} (the pair less that)", ns(toggle), ns(pipeline), ns(release)),
        toggle.zip(pipeline).map(|(t, p)| t > 2.0 * 2.0 * p),
        "by design: a section is a flag store and a compiler fence; the progress thread pays a membarrier instead, so no system call is on the owner's side",
    ));
    v.push(interrupt_plateau(r));
    let nonblocking = f("array", "nonblocking_double-word_startup_ns");
    let blocking = f("array", "blocking_double-word_startup_ns");
    v.push(shape(
        ("Liu & Culler, Table 5", "a non-blocking array transfer starts far sooner than a blocking one, which waits for its acknowledgement"),
        format!("start-up c: non-blocking {}, blocking {}", ns(nonblocking), ns(blocking)),
        nonblocking.zip(blocking).map(|(n, b)| n < 0.5 * b),
        "the blocking transfer's wait is shorter than its copy",
    ));
    v
}

/// Liu & Culler §6.1.3.2: the successful poll by intersection, against the unsuccessful
/// poll and the receive overhead of a burst.
fn successful_poll(r: &Results) -> Shape {
    let ok = r.figure("polling", "successful_poll_ns");
    let empty = r.figure("polling", "am_poll_ns");
    let drain = r.figure("two-to-one", "receive_ns");
    shape(
        ("Liu & Culler, Figure 6", "a successful poll (one message per poll, the curves' intersection) costs more than an unsuccessful poll and than the receive overhead of a burst (2.85 against 0.85 and 1.60 µs)"),
        format!(
            "successful poll {} (it includes the message's crossing between the cores: at the intersection each poll waits for its message), unsuccessful {}, receive overhead of a drained burst {}",
            ns(ok),
            ns(empty),
            ns(drain)
        ),
        ok.zip(empty).zip(drain).map(|((s, e), d)| s > e && s > d),
        UNEXPLAINED,
    )
}

/// The first pair of neighbouring points of `pts` where the medians move against `dir`
/// (+1 rising, −1 falling) by more than `slack` of the larger value.
fn turns_back(pts: &[Point], dir: f64, slack: f64) -> Option<(&Point, &Point)> {
    pts.windows(2).map(|w| (&w[0], &w[1])).find(|(a, b)| {
        let step = (b.median - a.median) * dir;
        step < -slack * a.median.abs().max(b.median.abs())
    })
}

/// Liu & Culler Figure 6's two curves.
fn poll_curves(r: &Results) -> Shape {
    let per_msg = r.series("polling", "successful polls: time per message");
    let per_poll = r.series("polling", "successful polls: time per poll");
    let ends = |p: Option<&[Point]>| {
        p.and_then(|p| Some((p.first()?.median, p.last()?.median)))
            .map_or("–".into(), |(a, b)| {
                format!("{} → {} ns", show(Some(a)), show(Some(b)))
            })
    };
    let back = per_msg.zip(per_poll).map(|(m, p)| {
        turns_back(m, 1.0, 0.1)
            .map(|w| ("per message", w))
            .or(turns_back(p, -1.0, 0.1).map(|w| ("per poll", w)))
    });
    // About linear: at the longest interval a message costs about the interval (the
    // polls wait for it), within a quarter.
    let last = per_msg.and_then(|m| m.last());
    let slope = last.map(|p| p.median / p.x);
    let linear = slope.map(|k| (0.8..=1.25).contains(&k));
    let why = back.flatten().map_or(UNEXPLAINED.to_string(), |(curve, (a, b))| {
        format!(
            "the time {curve} turns back between intervals of {} and {} ns ({} then {} ns): at intervals shorter than a message's crossing between the cores, how many messages a poll finds depends on how the two loops fall into step, not on the interval alone",
            show(Some(a.x)),
            show(Some(b.x)),
            show(Some(a.median)),
            show(Some(b.median))
        )
    });
    shape(
        ("Liu & Culler, Figure 6", "as the interval between sends grows, the time per poll falls monotonically and the time per message rises about linearly"),
        format!(
            "per message {}, per poll {}, over the intervals measured; at the longest a message costs {}× its interval",
            ends(per_msg),
            ends(per_poll),
            show(slope)
        ),
        back.zip(linear).map(|(b, l)| b.is_none() && l),
        why,
    )
}

/// Liu & Culler Figure 7: the interrupt overhead against its model.
fn interrupt_plateau(r: &Results) -> Shape {
    let measured = r.series("interrupts", "receive overhead per message, Interrupt mode");
    let model = r.series(
        "interrupts",
        "receive overhead per message, Interrupt mode, model: min(interval, one interrupt)",
    );
    let plateau = r.figure("interrupts", "interrupt_plateau_ns");
    let pairs: Option<Vec<(f64, f64, f64)>> = measured.zip(model).map(|(m, d)| {
        m.iter()
            .zip(d)
            .map(|(a, b)| (a.x, a.median, b.median))
            .collect()
    });
    let worst = pairs.as_ref().and_then(|p| {
        p.iter()
            .map(|&(_, a, b)| {
                if a > 0.0 && b > 0.0 {
                    (a / b).max(b / a)
                } else {
                    f64::INFINITY
                }
            })
            .max_by(f64::total_cmp)
    });
    // A plateau, not a line: every interval of at least 50 µs within a quarter of it,
    // and the shortest interval below half of it.
    let flat = pairs.as_ref().zip(plateau).map(|(p, top)| {
        p.iter()
            .filter(|q| q.0 >= 50.0)
            .all(|q| (q.1 / top - 1.0).abs() <= 0.25)
    });
    let rises = pairs
        .as_ref()
        .zip(plateau)
        .and_then(|(p, top)| Some(p.first()?.1 < 0.5 * top));
    let why = match (worst.map(|w| w <= 2.0), flat, rises) {
        (Some(false), ..) => "the measured curve leaves the model by more than 2× at some interval",
        (_, Some(false), _) => "the overhead at intervals of 50 µs and more is not flat: the curve has no plateau",
        (_, _, Some(false)) => "the overhead at the shortest interval is already near one interrupt's: messages do not batch",
        _ => UNEXPLAINED,
    };
    shape(
        ("Liu & Culler, Figure 7", "the interrupt overhead per message rises with the interval until it equals one interrupt's cost, then stays flat: a plateau (19 µs on the CM-5), as the model min(interval, one interrupt) draws it"),
        format!(
            "one interrupt (the plateau, intervals ≥ 50 µs) {}; measured against the model at every interval within {}× (per interval in the plot)",
            ns(plateau),
            show(worst)
        ),
        worst
            .zip(flat)
            .zip(rises)
            .map(|((w, f), r)| w <= 2.0 && f && r),
        why,
    )
}

/// StarT-Voyager (Ang et al. §5): Figures 5, 7 and 8, per mechanism.
fn voyager(r: &Results) -> Vec<Shape> {
    let f = |key: String| r.figure("mechanisms", &key);
    let of = |what: &str| -> Vec<(&'static str, Option<f64>)> {
        ["express", "basic", "tag_on", "dma"]
            .into_iter()
            .map(|m| (m, f(format!("{m}_{what}_ns"))))
            .collect()
    };
    let list = |v: &[(&str, Option<f64>)]| {
        v.iter()
            .map(|(m, x)| format!("{m} {}", ns(*x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Express at or below every other mechanism of `v` (within 5 %).
    let lowest = |v: &[(&str, Option<f64>)]| -> Option<bool> {
        let e = v.first()?.1?;
        let rest: Option<Vec<f64>> = v[1..].iter().map(|x| x.1).collect();
        Some(rest?.iter().all(|&x| e <= 1.05 * x))
    };
    let mut out = Vec::new();
    let send = of("send");
    out.push(shape(
        (
            "StarT-Voyager, Figure 5",
            "Express has the lowest processor overhead to send",
        ),
        format!("send overhead per message in a burst: {}", list(&send)),
        lowest(&send),
        UNEXPLAINED,
    ));
    // DMA's receive is its Express completion frame: the comparison is with the two
    // mechanisms that carry data to the receiving processor.
    let receive = of("receive");
    out.push(shape(
        ("StarT-Voyager, Figure 5", "Express has the lowest processor overhead to receive (DMA has no receive part but its completion)"),
        format!("receive overhead per message of an arrived burst: {}", list(&receive)),
        lowest(&receive[..3]),
        UNEXPLAINED,
    ));
    let (dma, express) = (f("dma_send_ns".into()), f("express_send_ns".into()));
    out.push(shape(
        ("StarT-Voyager, Figure 5", "starting a DMA costs the processor little, so DMA pays off for modest sizes (here: a 64-byte DMA within 2× of an Express send)"),
        format!("DMA of 64 bytes {}, Express {}", ns(dma), ns(express)),
        dma.zip(express).map(|(d, e)| d <= 2.0 * e),
        "amrq's DMA is the sending processor's own copy into the receiver's segment, then a completion frame: no engine takes the transfer off the processor",
    ));
    let one_way = of("one_way");
    out.push(shape(
        (
            "StarT-Voyager, Figure 7",
            "Express has the lowest one-way latency (1 µs to the nearest neighbour)",
        ),
        format!("one-way, half a ping-pong: {}", list(&one_way)),
        lowest(&one_way),
        UNEXPLAINED,
    ));
    let stream = |m: &str| r.series("mechanisms", &format!("{m} stream"));
    let first = |m: &str| stream(m).and_then(|p| p.first()).map(|p| p.median);
    let best = |m: &str| stream(m).and_then(|p| p.iter().map(|p| p.median).max_by(f64::total_cmp));
    let express_bw = first("express");
    let others: Option<Vec<f64>> = ["basic", "tag_on", "dma"]
        .iter()
        .map(|m| first(m))
        .collect();
    out.push(shape(
        (
            "StarT-Voyager, Figure 8",
            "Express delivers the least bandwidth (20 MB/s): its payload is one word (so it follows from the sizes unless a 64-byte message is 8 times slower)",
        ),
        format!(
            "Express {} MB/s; at 64 bytes Basic {}, Tag-On {}, DMA {} MB/s",
            show(express_bw),
            show(first("basic")),
            show(first("tag_on")),
            show(first("dma"))
        ),
        express_bw
            .zip(others)
            .map(|(e, o)| o.iter().all(|&x| e < x)),
        UNEXPLAINED,
    ));
    let (basic, dma) = (best("basic"), best("dma"));
    out.push(shape(
        ("StarT-Voyager, Figure 8", "the largest Basic message delivers the highest bandwidth, above DMA (over 150 MB/s; the paper says this is partly its assumption that data comes from registers)"),
        format!("largest Basic (1 KiB) {} MB/s, best DMA {} MB/s", show(basic), show(dma)),
        basic.zip(dma).map(|(b, d)| b >= d),
        "a DMA here is one copy into the receiver's segment at the speed of memcpy, while a Basic message's payload also goes through ring slots and is read by the receiver; the paper's Basic figure assumed data sent from and received into registers, as it says",
    ));
    out
}

/// Remote Queues: Figure 4 (Active Messages on top of the queues) and Table 2
/// (`am_store_async`, here a put with completion).
fn remote_queues(r: &Results) -> Vec<Shape> {
    let f = |key: &str| r.figure("mechanisms", key);
    let (am, rq) = (f("am_one_way_ns"), f("express_one_way_ns"));
    let (send, receive, put) = (f("dma_send_ns"), f("dma_receive_ns"), f("put_ns"));
    let enqueue = f("express_send_ns");
    vec![
        shape(
            ("Remote Queues, Figure 4", "Active Messages on top of the queues add a little to the queues' one-way latency (10.1 against 9.6 µs; here: at most 1.25×)"),
            format!("Short AM one-way {}, Express queue one-way {} (both half a ping-pong, same batches)", ns(am), ns(rq)),
            am.zip(rq).map(|(a, q)| a >= q && a <= 1.25 * q),
            match am.zip(rq) {
                Some((a, q)) if a < q => "amrq's Active Messages travel in queues of their own but send and take them through the conduit's quick paths, not through the calls a program makes on its queues (`enqueue_as`, `poll_queue`), and their round trip is the most tuned path: they come out faster than the queue ping-pong",
                _ => UNEXPLAINED,
            },
        ),
        shape(
            ("Remote Queues, Table 2", "for a 64-byte am_store_async (a put with completion) the send overhead exceeds the receive overhead: sending is the bottleneck"),
            format!(
                "send {} (the put alone {}, an Express completion frame alone {}), receive {} (the completion frame)",
                ns(send),
                ns(put),
                ns(enqueue),
                ns(receive)
            ),
            send.zip(receive).map(|(s, r)| s > r),
            UNEXPLAINED,
        ),
    ]
}

/// Begel et al. Figures 6-3 and 6-4.
fn begel(r: &Results) -> Vec<Shape> {
    let f = |k: &str| r.figure("splitc", k);
    let mut v = Vec::new();
    let slowest = ["read", "write", "get", "put", "store"]
        .iter()
        .filter_map(|op| Some((*op, f(&format!("direct_{op}_one_way_ns"))?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let raw = f("raw_rtt_ns");
    let crossing = f("read_rtt_ratio");
    v.push(shape(
        ("Begel et al., Figure 6-3", "on shared memory every operation is so cheap it is \"practically invisible\" (here: within 2× of the raw cache-line round trip)"),
        format!(
            "slowest one-way operation `{}` {} each, issued back to back; a read of a line its owner has just written {}× the raw round trip ({})",
            slowest.map_or("–", |o| o.0),
            ns(slowest.map(|o| o.1)),
            show(crossing),
            ns(raw)
        ),
        slowest
            .zip(raw)
            .zip(crossing)
            .map(|((o, raw), x)| o.1 <= 2.0 * raw && x <= 2.0),
        UNEXPLAINED,
    ));
    let ratio = f("store_over_put");
    v.push(shape(
        ("Begel et al., Figure 6-3", "through messages a store costs about half a put: it needs no reply (at most 0.6× here)"),
        format!("store / put, one-way: {}×", show(ratio)),
        ratio.map(|x| x <= 0.6),
        "a put's reply overlaps the next put's request, so the reply a store saves costs less than half",
    ));
    let doubling: Vec<(&str, Option<f64>)> = ["get", "put", "store"]
        .iter()
        .map(|op| {
            let one = f(&format!("frames_{op}_one_way_ns"));
            let two = f(&format!("frames_{op}_two_way_ns"));
            (*op, one.zip(two).map(|(a, b)| b / a))
        })
        .collect();
    let all: Option<Vec<f64>> = doubling.iter().map(|d| d.1).collect();
    v.push(shape(
        ("Begel et al., Figure 6-3", "through messages two-way about doubles get, put and store: each rank serves the other's requests too (here: at least 1.5×)"),
        format!(
            "two-way / one-way: {}",
            doubling
                .iter()
                .map(|(op, x)| format!("{op} {}×", show(*x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        all.map(|v| v.iter().all(|&x| x >= 1.5)),
        UNEXPLAINED,
    ));
    let way = |op: &str, two: bool| {
        let w = if two { ", two-way" } else { "" };
        r.series("splitc", &format!("bulk {op}{w}, frames path"))
    };
    let ratios = |op: &str| -> Option<(f64, f64)> {
        let (one, two) = (way(op, false)?, way(op, true)?);
        let at = |i: usize| Some(two.get(i)?.median / one.get(i)?.median);
        Some((at(0)?, at(one.len().checked_sub(1)?)?))
    };
    let get = ratios("get");
    v.push(shape(
        ("Begel et al., Figure 6-4", "through messages a two-way bulk get is about twice a one-way one for small transfers, less for large ones, where message processing overlaps the transfer"),
        get.map_or("–".into(), |(s, l)| format!("two-way / one-way bulk get: {}× at 4 B, {}× at 4 KiB", show(Some(s)), show(Some(l)))),
        get.map(|(s, l)| s >= 1.5 && l < s),
        "the processor copies every byte (no DMA engine takes the transfer off it): serving the other rank's 4 KiB get costs a copy as large as its own, so two-way doubles at large sizes, while at small ones the two directions' fixed costs partly overlap",
    ));
    let read = ratios("read");
    v.push(shape(
        ("Begel et al., Figure 6-4", "through messages a two-way bulk read takes about what a one-way one does: a blocking read leaves the other side idle while it waits"),
        read.map_or("–".into(), |(s, l)| format!("two-way / one-way bulk read: {}× at 4 B, {}× at 4 KiB", show(Some(s)), show(Some(l)))),
        read.map(|(s, l)| s.max(l) <= 1.3),
        UNEXPLAINED,
    ));
    v
}

/// The AM paper §2.3: the matrix multiply's overlap argument and its model.
fn matmul(r: &Results) -> Vec<Shape> {
    const OVERLAP: &str = "split-phase gets overlap the transfer with the DAXPYs: at every m at least as efficient as a blocking read per column (here: within 5 %)";
    const MODEL: &str = "the model predicts where the multiply becomes computation-bound (efficiency ≥ 0.9) within a factor of two in m";
    let mut v = Vec::new();
    for (path, sources, why) in [
        (
            "direct",
            ["AM paper, Figure 5 (direct path)", "AM paper, Figure 6 (direct path)"],
            "a direct get is a copy the processor makes when it issues it: there is nothing to overlap, and a split-phase get copies once, as a blocking read does, and pays for its handle and wait",
        ),
        (
            "frames",
            ["AM paper, Figure 5 (frames path)", "AM paper, Figure 6 (frames path)"],
            "at small m a column's DAXPYs (128·m multiply-adds) take a fraction of a get through frames, so there is little to overlap, and a split-phase get pays for a copy out of its buffer and a sync where a blocking read lands in place",
        ),
    ] {
        let split = r.series("matmul", &format!("efficiency, split-phase, {path} path"));
        let blocking = r.series("matmul", &format!("efficiency, blocking, {path} path"));
        let worst = split.zip(blocking).and_then(|(s, b)| {
            s.iter()
                .zip(b)
                .map(|(s, b)| (s.x, s.median / b.median))
                .min_by(|a, b| a.1.total_cmp(&b.1))
        });
        v.push(shape(
            (sources[0], OVERLAP),
            worst.map_or("–".into(), |(m, x)| {
                format!(
                    "split-phase / blocking efficiency at its lowest: {}× at m = {}",
                    show(Some(x)),
                    show(Some(m))
                )
            }),
            worst.map(|(_, x)| x >= 0.95),
            why,
        ));
        let at = r.figure("matmul", &format!("{path}_crossover_m"));
        let model = r.figure("matmul", &format!("{path}_model_crossover_m"));
        // A crossover is absent when no m measured reaches it: beyond the largest m.
        let largest = split.and_then(|s| s.last()).map(|p| p.x);
        let beyond = |m: Option<f64>| {
            m.map_or(format!("none up to m = {}", show(largest)), |m| show(Some(m)))
        };
        v.push(shape(
            (sources[1], MODEL),
            format!("crossover m = {} measured, {} modelled", beyond(at), beyond(model)),
            within_twice(at, model, largest),
            "the model takes a column get's latency, gap and overhead measured alone; in the multiply the gets contend with the other rank's and with its DAXPYs for the caches",
        ));
    }
    v
}

/// Whether two crossovers are within a factor of two of each other, where an absent one
/// lies beyond `largest` (the last m measured): both beyond agree; one beyond disagrees
/// when the other is at most half of `largest`, and is undecided otherwise.
fn within_twice(a: Option<f64>, b: Option<f64>, largest: Option<f64>) -> Option<bool> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a <= 2.0 * b && b <= 2.0 * a),
        (None, None) => Some(true),
        (Some(m), None) | (None, Some(m)) => (2.0 * m <= largest?).then_some(false),
    }
}

/// The report's section: a table of every shape, and how many hold.
pub fn markdown(shapes: &[Shape]) -> String {
    let count = |h: Option<bool>| shapes.iter().filter(|s| s.holds == h).count();
    let mut s = format!(
        "\n## The papers' shapes in this run\n\n{} hold, {} do not, {} undecided (a figure missing, or beyond the range measured). Each row: the paper's figure, the shape it shows (with its own numbers), this run's figures, and, where the shape does not hold, why.\n\n| paper | shape | this run | verdict | why not |\n|---|---|---|---|---|\n",
        count(Some(true)),
        count(Some(false)),
        count(None)
    );
    for x in shapes {
        let _ = writeln!(
            s,
            "| {} | {} | {} | **{}** | {} |",
            x.source,
            x.claim,
            x.measured,
            x.verdict(),
            x.why
        );
    }
    s
}

/// One line for the terminal: how many shapes hold.
pub fn line(shapes: &[Shape]) -> String {
    let held = shapes.iter().filter(|s| s.holds == Some(true)).count();
    let not = shapes.iter().filter(|s| s.holds == Some(false)).count();
    format!("the papers' shapes: {held} hold, {not} do not (the report says which and why)")
}

#[cfg(test)]
mod tests {
    use super::within_twice;

    #[test]
    fn an_absent_crossover_lies_beyond_the_largest_m() {
        let top = Some(512.0);
        assert_eq!(within_twice(Some(8.0), Some(16.0), top), Some(true));
        assert_eq!(within_twice(Some(8.0), Some(32.0), top), Some(false));
        assert_eq!(within_twice(None, None, top), Some(true));
        assert_eq!(within_twice(None, Some(64.0), top), Some(false));
        assert_eq!(within_twice(Some(256.0), None, top), Some(false));
        assert_eq!(within_twice(None, Some(512.0), top), None);
    }
}
