//! Liu & Culler §5.1.1, the unloaded network: two or three ranks, Short Active
//! Messages whose handler increments a counter, received by polling.
//!
//! - *round-trip*: a request and its reply, one at a time (`T = 2L + 4o` in LogP),
//!   beside the raw cache-line round trip of the same two ranks, measured in
//!   alternating batches; with more ranks, *round-trip-ranks* pings each in turn.
//!   In the same batches, a request whose handler fails: the time until the sender's
//!   wait returns the failure, and that time in round trips of the same batch.
//! - *one-to-one*: rank 0 pipelines 1024 requests to rank 1, then waits for a reply
//!   that acknowledges all of them (one ring per pair is FIFO: when rank 1 handles the
//!   last request, it has handled the 1024); the time per message, beside the raw
//!   one-way stream of the same two ranks ([`RawStream`]) in alternating batches; then
//!   1024 requests whose handlers each reply, until the last reply is in: the time per
//!   request-reply pair.
//! - *one-to-two*: rank 0 sends 1024 requests to ranks 1 and 2 alternately: the send
//!   overhead, without the receiver's pace.
//! - *two-to-one*: ranks 1 and 2 send 1024 requests each to rank 0, which times
//!   handling the 2048: once after they are all in its rings (the receive overhead
//!   alone), once so with a reply from each handler (the reply's send overhead is the
//!   difference), once while both senders send (Liu & Culler's).

use crate::fixture::{require_ranks, BenchAm};
use crate::reference::{
    Design, Floor, RawPingPong, RawStream, RAW_PINGPONG_BYTES, RAW_STREAM_BYTES,
};
use crate::report::{Figure, Outcome, Point, Series};
use crate::Params;
use amrq::conduit::Conduit;
use amrq::prelude::*;

/// Messages per burst (the paper's 1024).
pub const BURST: u64 = 1024;

/// Ring slots the one-to-two and two-to-one benchmarks need, so that a burst never
/// waits for room (`Config::ring_slots`).
pub const DEEP_RING_SLOTS: u64 = 2 * BURST;

/// Adds the raw reference's samples and amrq's ratios to it, or, where none were taken
/// (the ranks share no memory: two hosts), a note that says so.
fn raw_figures(o: &mut Outcome, (key, raw): (&str, &mut [f64]), ratio: &mut [f64]) {
    if raw.is_empty() {
        o.notes
            .push("raw reference not measured: the two ranks share no memory (two hosts)".into());
    } else {
        o.figures.push(Figure::of(key, raw));
        o.figures.push(Figure::of("ratio", ratio));
    }
}

/// `iters` round trips from rank 0 to `dest`, each waiting for its acknowledgement;
/// ns per round trip.
pub(crate) fn round_trips(b: &BenchAm, p: &Params, dest: Rank, iters: u64) -> amrq::Result<f64> {
    let base = b.am.state().acks.get();
    let t = p.clock.start();
    for i in 1..=iters {
        b.am.request(dest, b.ping, &[])?;
        b.wait_acks(base + i)?;
    }
    Ok(p.clock.since(t) / iters as f64)
}

/// `iters` requests to `dest` whose handler fails, each waiting for the failure to
/// come back; ns per request.
fn failures(b: &BenchAm, p: &Params, dest: Rank, iters: u64) -> amrq::Result<f64> {
    let t = p.clock.start();
    for _ in 0..iters {
        b.am.request(dest, b.refuse, &[])?;
        match b.am.wait_until(|_| false) {
            Err(AmError::RequestFailed(_)) => {}
            Err(e) => return Err(e.into()),
            Ok(()) => unreachable!("the wait's condition never holds"),
        }
    }
    Ok(p.clock.since(t) / iters as f64)
}

/// *round-trip*: `round_trip_ns`, `failure_ns` and `failure_round_trips` on rank 0
/// (`None` elsewhere); where the two ranks share memory, every raw design's
/// `raw_{design}_ns`, the floor `raw_rtt_ns` (the design of lowest median, named in a
/// note) and `ratio` (each batch's round trip over the floor's sample of that batch).
pub fn round_trip(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "round-trip", 2, false)?;
    let b = BenchAm::new(setup)?;
    let at = b.am.rma().alloc_symmetric(RAW_PINGPONG_BYTES, 4096)?;
    let raw = b.am.rq().conduit().mapped_segment(0).map(|(seg, _)| {
        // SAFETY: `at` is a fresh page-aligned allocation of RAW_PINGPONG_BYTES in rank
        // 0's segment (zeroed at creation), mapped by both ranks and used for the raw
        // reference only.
        unsafe { RawPingPong::in_memory(seg.add(at)) }
    });
    let iters = p.pick(5_000, 50_000);
    // A failure costs a fault recorded, its text and a notice: fewer of them.
    let failing = iters / 10;
    let (mut am_ns, mut floor) = (Vec::new(), Floor::default());
    let (mut failure_ns, mut failure_rtts) = (Vec::new(), Vec::new());
    for batch in 0..=p.batches as u64 {
        let base = batch * iters;
        if b.rank() == 0 {
            let r = raw.map(|raw| raw.initiate_all(base, iters));
            let a = round_trips(&b, p, 1, iters)?;
            let f = failures(&b, p, 1, failing)?;
            if batch > 0 {
                am_ns.push(a);
                if let Some(r) = r {
                    floor.push(r);
                }
                failure_ns.push(f);
                failure_rtts.push(f / a);
            }
        } else {
            if let Some(raw) = raw {
                raw.respond_all(base, iters);
            }
            b.wait_count((batch + 1) * (iters + failing))?;
        }
    }
    b.am.barrier()?;
    Ok((b.rank() == 0).then(|| {
        let mut o = Outcome::new("round-trip", 2, p.clock.overhead_ns());
        let won = floor.winner();
        let mut raw_ns = floor.samples(won).to_vec();
        let mut ratio: Vec<f64> = am_ns.iter().zip(&raw_ns).map(|(a, r)| a / r).collect();
        o.figures = vec![Figure::of("round_trip_ns", &mut am_ns)];
        raw_figures(&mut o, ("raw_rtt_ns", &mut raw_ns), &mut ratio);
        if raw.is_some() {
            for d in Design::ALL {
                let key = format!("raw_{}_ns", d.key());
                o.figures
                    .push(Figure::of(&key, &mut floor.samples(d).to_vec()));
            }
            o.notes
                .push(format!("raw floor: {} ({})", won.key(), won.describe()));
        }
        o.figures.push(Figure::of("failure_ns", &mut failure_ns));
        o.figures
            .push(Figure::of("failure_round_trips", &mut failure_rtts));
        o
    }))
}

/// *round-trip-ranks*: the round trip from rank 0 to each other rank in turn
/// (Liu & Culler's spatial locality), one series.
pub fn round_trip_ranks(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "round-trip-ranks", 2, true)?;
    let b = BenchAm::new(setup)?;
    let n = b.am.size();
    let iters = p.pick(2_000, 20_000);
    let mut samples = vec![Vec::new(); n];
    for batch in 1..=p.batches as u64 {
        for (dest, v) in samples.iter_mut().enumerate().skip(1) {
            b.am.barrier()?;
            if b.rank() == 0 {
                v.push(round_trips(&b, p, dest, iters)?);
            } else if b.rank() == dest {
                b.wait_count(batch * iters)?;
            }
        }
    }
    b.am.barrier()?;
    Ok((b.rank() == 0).then(|| {
        let mut o = Outcome::new("round-trip-ranks", n, p.clock.overhead_ns());
        let points: Vec<Point> = samples
            .iter_mut()
            .enumerate()
            .skip(1)
            .map(|(d, v)| Point::of(d as f64, v))
            .collect();
        let mut med: Vec<f64> = points.iter().map(|p| p.median).collect();
        o.figures.push(Figure::of("round_trip_ns", &mut med));
        o.series.push(Series {
            name: "round trip from rank 0".into(),
            x: "destination rank".into(),
            y: "ns".into(),
            points,
        });
        o
    }))
}

/// *one-to-one*: `ns_per_msg` and `msgs_per_s` on rank 0 (`None` elsewhere); where the
/// two ranks share memory, the raw stream's rate plain (`raw_plain_msgs_per_s`) and with
/// the producer prefetching (`raw_prefetched_msgs_per_s`), the faster of the two as the
/// floor (`raw_msgs_per_s`, named in a note) and `ratio` (each batch's rate over the
/// floor's rate of that batch); `pair_ns_per_msg`, per request-reply pair in bursts of
/// 1024 (a ring's slots in flight at most).
pub fn one_to_one(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "one-to-one", 2, false)?;
    let b = BenchAm::new(setup)?;
    let at = b.am.rma().alloc_symmetric(2 * RAW_STREAM_BYTES, 4096)?;
    let raw = b.am.rq().conduit().mapped_segment(1).map(|(seg, _)| {
        // SAFETY: `at` is a fresh page-aligned allocation of two RAW_STREAM_BYTES (a
        // multiple of 128) in rank 1's segment (zeroed at creation), mapped by both
        // ranks and used for the raw references only, one ring each.
        unsafe {
            [
                RawStream::in_memory(seg.add(at)),
                RawStream::in_memory(seg.add(at + RAW_STREAM_BYTES)),
            ]
        }
    });
    let bursts = p.pick(20, 200);
    let raw_n = bursts * BURST;
    let (mut per_msg, mut rate) = (Vec::new(), Vec::new());
    let mut raw_rates: [Vec<f64>; 2] = Default::default();
    for batch in 0..=p.batches as u64 {
        b.am.barrier()?;
        if b.rank() == 0 {
            let base = batch * raw_n;
            let r =
                raw.map(|[plain, pre]| [plain.send(base, raw_n), pre.send_prefetched(base, raw_n)]);
            let t = p.clock.start();
            for _ in 0..bursts {
                for _ in 0..BURST - 1 {
                    b.am.request(1, b.bump, &[])?;
                }
                let acks = b.am.state().acks.get();
                b.am.request(1, b.ping, &[])?; // the last of the burst asks for the ack
                b.wait_acks(acks + 1)?;
            }
            let ns = p.clock.since(t) / (bursts * BURST) as f64;
            if batch > 0 {
                per_msg.push(ns);
                rate.push(1e9 / ns);
                for (v, x) in raw_rates.iter_mut().zip(r.into_iter().flatten()) {
                    v.push(x);
                }
            }
        } else {
            let wrong = raw.map_or(0, |rings| {
                rings
                    .iter()
                    .map(|ring| ring.receive(batch * raw_n, raw_n))
                    .sum()
            });
            if wrong != 0 {
                return Err(crate::fixture::bench_error(
                    "one-to-one: the raw stream's memory is not shared",
                )
                .into());
            }
            b.wait_count((batch + 1) * bursts * BURST)?;
        }
    }
    // Request-reply pairs as one operation (Table 1's last rows): every request's
    // handler replies, and the burst ends when the last reply is in.
    let mut pairs = Vec::new();
    let handled = b.am.state().count.get();
    for batch in 0..=p.batches as u64 {
        b.am.barrier()?;
        if b.rank() == 0 {
            let acks = b.am.state().acks.get();
            let t = p.clock.start();
            for _ in 0..BURST {
                b.am.request(1, b.ping, &[])?;
            }
            b.wait_acks(acks + BURST)?;
            if batch > 0 {
                pairs.push(p.clock.since(t) / BURST as f64);
            }
        } else {
            b.wait_count(handled + (batch + 1) * BURST)?;
        }
    }
    b.am.barrier()?;
    Ok((b.rank() == 0).then(|| {
        let mut o = Outcome::new("one-to-one", 2, p.clock.overhead_ns());
        let designs = [
            ("plain", "a plain SPSC ring"),
            ("prefetched", "the producer prefetching its slots"),
        ];
        let med = |v: &[f64]| crate::reference::median(&mut v.to_vec());
        let won = usize::from(med(&raw_rates[1]) > med(&raw_rates[0]));
        let mut raw_rate = raw_rates[won].clone();
        let mut ratio: Vec<f64> = rate.iter().zip(&raw_rate).map(|(a, r)| a / r).collect();
        o.figures = vec![
            Figure::of("ns_per_msg", &mut per_msg),
            Figure::of("msgs_per_s", &mut rate),
            Figure::of("pair_ns_per_msg", &mut pairs),
        ];
        raw_figures(&mut o, ("raw_msgs_per_s", &mut raw_rate), &mut ratio);
        if !raw_rates[0].is_empty() {
            for ((key, _), v) in designs.iter().zip(&mut raw_rates) {
                o.figures
                    .push(Figure::of(format!("raw_{key}_msgs_per_s"), v));
            }
            let (key, what) = designs[won];
            o.notes.push(format!("raw floor: {key} ({what})"));
        }
        o
    }))
}

/// *one-to-two*: `send_ns` per message on rank 0: the time of the send loop alone
/// (the rings hold a whole burst, so no send waits for a receiver); the
/// acknowledgements are awaited outside the timed part.
pub fn one_to_two(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "one-to-two", 3, false)?;
    let b = BenchAm::new(setup)?;
    let mut per_msg = Vec::new();
    let per_dest = BURST / 2;
    let mut expect = 0;
    for batch in 0..=p.batches as u64 {
        for _ in 0..p.pick(4, 20) {
            b.am.barrier()?;
            if b.rank() == 0 {
                let acks = b.am.state().acks.get();
                let t = p.clock.start();
                for _ in 0..per_dest - 1 {
                    b.am.request(1, b.bump, &[])?;
                    b.am.request(2, b.bump, &[])?;
                }
                b.am.request(1, b.ping, &[])?;
                b.am.request(2, b.ping, &[])?;
                let ns = p.clock.since(t) / BURST as f64;
                b.wait_acks(acks + 2)?;
                if batch > 0 {
                    per_msg.push(ns);
                }
            } else {
                expect += per_dest; // cumulative: the barrier may handle some
                b.wait_count(expect)?;
            }
        }
    }
    b.am.barrier()?;
    Ok((b.rank() == 0).then(|| {
        let mut o = Outcome::new("one-to-two", 3, p.clock.overhead_ns());
        o.figures.push(Figure::of("send_ns", &mut per_msg));
        o.notes
            .push("send loop only; the rings hold the whole burst".into());
        o
    }))
}

/// *two-to-one*: per message on rank 0, `receive_ns`: ranks 1 and 2 have each
/// enqueued 1024 requests (all of them in rank 0's rings) before rank 0 starts its
/// clock and polls until it has handled the 2048; `receive_replying_ns`: the same, each
/// handler replying, and `reply_send_ns` the difference per batch (Table 1's reply
/// rows); `receive_live_ns`: rank 0's clock starts as both begin sending theirs.
pub fn two_to_one(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "two-to-one", 3, false)?;
    let b = BenchAm::new(setup)?;
    let (mut drained, mut replying, mut live) = (Vec::new(), Vec::new(), Vec::new());
    // Conduit barriers, not AM ones: rank 0 must not poll outside its timed part.
    let barrier = || b.am.rq().conduit().barrier().map_err(RqError::from);
    // Ranks 1 and 2 send a burst of `h` each, into rank 0's rings before its clock
    // starts (`filled_first`) or while it runs; rank 0 times handling the 2 × BURST:
    // ns per message, into `into` when `keep`.
    let phase = |h: RequestHandler,
                 filled_first: bool,
                 into: &mut Vec<f64>,
                 keep: bool|
     -> amrq::Result<()> {
        barrier()?;
        if b.rank() != 0 {
            (0..BURST).try_for_each(|_| b.am.request(0, h, &[]))?;
        }
        if filled_first {
            barrier()?;
        }
        if b.rank() == 0 {
            let target = b.am.state().count.get() + 2 * BURST;
            let t = p.clock.start();
            b.wait_count(target)?;
            if keep {
                into.push(p.clock.since(t) / (2 * BURST) as f64);
            }
        }
        Ok(())
    };
    for batch in 0..=p.batches as u64 {
        let keep = batch > 0;
        for _ in 0..p.pick(4, 20) {
            // The rings filled first, then the receiver timed draining them.
            phase(b.bump, true, &mut drained, keep)?;
            // The same drain, each handler sending a reply: the reply's send overhead
            // is the difference (the reply rings hold a burst, so no reply waits).
            let acks = b.am.state().acks.get();
            phase(b.ping, true, &mut replying, keep)?;
            // The senders take their replies in once rank 0's clock has stopped.
            barrier()?;
            if b.rank() != 0 {
                b.wait_acks(acks + BURST)?;
            }
            // Liu & Culler's: the receiver timed while both senders send.
            phase(b.bump, false, &mut live, keep)?;
        }
    }
    b.am.barrier()?;
    Ok((b.rank() == 0).then(|| {
        let mut o = Outcome::new("two-to-one", 3, p.clock.overhead_ns());
        let mut reply_send: Vec<f64> = replying.iter().zip(&drained).map(|(r, d)| r - d).collect();
        o.figures.push(Figure::of("receive_ns", &mut drained));
        o.figures.push(Figure::of("receive_live_ns", &mut live));
        o.figures
            .push(Figure::of("receive_replying_ns", &mut replying));
        o.figures.push(Figure::of("reply_send_ns", &mut reply_send));
        o.notes.push(
            "receive_ns: the rings filled first, then their drain timed; receive_live_ns: the receiver timed while both senders send (Liu & Culler's); receive_replying_ns: the drain of receive_ns with a reply sent by each handler; reply_send_ns: the difference, the reply's send overhead"
                .into(),
        );
        o.notes
            .push("includes the handler (a counter increment), as in the paper".into());
        o
    }))
}
