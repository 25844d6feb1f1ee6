//! *calls*: what a call's pending answer costs against the same exchange written by
//! hand, two ranks, in alternating batches. Both deliver each answer to the program:
//!
//! - **call**: `am.call(1, count, ())` returns a pending answer; the handler counts and
//!   answers the count;
//! - **by hand**: a request carrying a slot number, whose handler counts and replies
//!   (slot, count) to a reply handler that stores the count in that slot of a window
//!   array and counts the replies; the program waits for the count and reads the slot.
//!
//! Timed: the round trip, one at a time (`call_rtt_ns`, `handwritten_rtt_ns`,
//! `rtt_ratio`), and a window of [`WINDOW`] in flight, the oldest taken before the next
//! is sent (`call_window_ns_per_msg`, `handwritten_window_ns_per_msg`,
//! `window_ratio`). Each ratio is per batch: the call's time over the hand-written
//! one's of the same batch.

use crate::fixture::{bench_error, require_ranks};
use crate::report::{Figure, Outcome};
use crate::Params;
use amrq::am::{Call, Pending};
use amrq::prelude::*;
use std::cell::Cell;

/// Exchanges in flight in the windowed runs (a quarter of the default ring).
pub const WINDOW: usize = 64;

/// What both ranks hold.
struct State {
    /// Requests and calls handled.
    count: Cell<u64>,
    /// Replies stored by `answer`.
    answered: Cell<u64>,
    /// The replies' values, by slot.
    answers: [Cell<u64>; WINDOW],
    answer: ReplyHandler,
}

/// The job and its handlers.
struct Bench {
    am: Job<State>,
    ask: RequestHandler,
    count: Call<(), u64>,
}

impl Bench {
    fn new(setup: Setup) -> amrq::Result<Self> {
        let mut t = HandlerTable::new();
        let answer = t.reply("answer", |s: &State, m| {
            let slot = s
                .answers
                .get(m.arg(0)? as usize)
                .ok_or("a slot past the window")?;
            slot.set(m.arg(1)?);
            s.answered.set(s.answered.get() + 1);
            Ok(())
        });
        let ask = t.request("ask", |s: &State, ctx, m| {
            s.count.set(s.count.get() + 1);
            ctx.reply(s.answer, &[m.arg(0)?, s.count.get()])
        });
        let count = t.call("count", |s: &State, _ctx, (): ()| {
            s.count.set(s.count.get() + 1);
            Ok(s.count.get())
        });
        let state = State {
            count: Cell::new(0),
            answered: Cell::new(0),
            answers: std::array::from_fn(|_| Cell::new(0)),
            answer,
        };
        let am = setup.start(t, state)?;
        Ok(Self { am, ask, count })
    }

    /// The hand-written exchange's answer in `slot`, once `n` replies are in.
    fn answer(&self, n: u64, slot: usize) -> amrq::Result<u64> {
        self.am.wait_until(|s| s.answered.get() >= n)?;
        Ok(self.am.state().answers[slot].get())
    }
}

/// Answers must grow: each is the target's count, which every exchange increments.
fn check_growing(last: &mut u64, answer: u64) -> amrq::Result<()> {
    if answer <= *last {
        return Err(bench_error(format!("answer {answer} after {last}")).into());
    }
    *last = answer;
    Ok(())
}

/// `iters` calls to rank 1, one at a time; ns each.
fn call_round_trips(b: &Bench, p: &Params, iters: u64) -> amrq::Result<f64> {
    let mut last = 0;
    let t = p.clock.start();
    for _ in 0..iters {
        check_growing(&mut last, b.am.call(1, b.count, ())?.wait()?)?;
    }
    Ok(p.clock.since(t) / iters as f64)
}

/// `iters` hand-written exchanges with rank 1, one at a time; ns each.
fn handwritten_round_trips(b: &Bench, p: &Params, iters: u64) -> amrq::Result<f64> {
    let (base, mut last) = (b.am.state().answered.get(), 0);
    let t = p.clock.start();
    for i in 1..=iters {
        b.am.request(1, b.ask, &[0])?;
        check_growing(&mut last, b.answer(base + i, 0)?)?;
    }
    Ok(p.clock.since(t) / iters as f64)
}

/// `iters` calls to rank 1, at most [`WINDOW`] pending, kept in a window array as the
/// hand-written exchange keeps its answers; ns each.
fn call_window(b: &Bench, p: &Params, iters: u64) -> amrq::Result<f64> {
    let mut window: [Option<Pending<'_, u64, State>>; WINDOW] = std::array::from_fn(|_| None);
    let mut last = 0;
    let t = p.clock.start();
    for i in 0..iters as usize {
        let slot = &mut window[i % WINDOW];
        if let Some(oldest) = slot.take() {
            check_growing(&mut last, oldest.wait()?)?;
        }
        *slot = Some(b.am.call(1, b.count, ())?);
    }
    for i in iters as usize..iters as usize + WINDOW {
        if let Some(oldest) = window[i % WINDOW].take() {
            check_growing(&mut last, oldest.wait()?)?;
        }
    }
    Ok(p.clock.since(t) / iters as f64)
}

/// `iters` hand-written exchanges with rank 1, at most [`WINDOW`] unanswered; ns each.
fn handwritten_window(b: &Bench, p: &Params, iters: u64) -> amrq::Result<f64> {
    let (base, mut last) = (b.am.state().answered.get(), 0);
    let w = WINDOW as u64;
    let t = p.clock.start();
    for i in 0..iters {
        if i >= w {
            let oldest = i - w;
            check_growing(
                &mut last,
                b.answer(base + oldest + 1, (oldest % w) as usize)?,
            )?;
        }
        b.am.request(1, b.ask, &[i % w])?;
    }
    for oldest in iters.saturating_sub(w)..iters {
        check_growing(
            &mut last,
            b.answer(base + oldest + 1, (oldest % w) as usize)?,
        )?;
    }
    Ok(p.clock.since(t) / iters as f64)
}

/// *calls*: the figures above on rank 0 (`None` elsewhere).
pub fn calls(setup: Setup, p: &Params) -> amrq::Result<Option<Outcome>> {
    require_ranks(&setup, "calls", 2, false)?;
    let b = Bench::new(setup)?;
    let iters = p.pick(5_000, 50_000);
    let [mut call_rtt, mut hand_rtt, mut rtt_ratio] = [(); 3].map(|()| Vec::new());
    let [mut call_win, mut hand_win, mut win_ratio] = [(); 3].map(|()| Vec::new());
    // Alternating which goes first, so that neither always follows the other.
    let pair = |first_call: bool,
                call: &dyn Fn() -> amrq::Result<f64>,
                hand: &dyn Fn() -> amrq::Result<f64>| {
        Ok::<_, amrq::Error>(match first_call {
            true => {
                let c = call()?;
                (c, hand()?)
            }
            false => {
                let h = hand()?;
                (call()?, h)
            }
        })
    };
    for batch in 0..=p.batches as u64 {
        if b.am.rank() == 0 {
            let first_call = batch % 2 == 1;
            let (c, h) = pair(first_call, &|| call_round_trips(&b, p, iters), &|| {
                handwritten_round_trips(&b, p, iters)
            })?;
            let (cw, hw) = pair(first_call, &|| call_window(&b, p, iters), &|| {
                handwritten_window(&b, p, iters)
            })?;
            if batch > 0 {
                for (v, x) in [
                    (&mut call_rtt, c),
                    (&mut hand_rtt, h),
                    (&mut rtt_ratio, c / h),
                    (&mut call_win, cw),
                    (&mut hand_win, hw),
                    (&mut win_ratio, cw / hw),
                ] {
                    v.push(x);
                }
            }
        } else {
            let n = (batch + 1) * 4 * iters;
            b.am.wait_until(|s| s.count.get() >= n)?;
        }
    }
    b.am.barrier()?;
    Ok((b.am.rank() == 0).then(|| {
        let mut o = Outcome::new("calls", 2, p.clock.overhead_ns());
        o.figures = vec![
            Figure::of("call_rtt_ns", &mut call_rtt),
            Figure::of("handwritten_rtt_ns", &mut hand_rtt),
            Figure::of("rtt_ratio", &mut rtt_ratio),
            Figure::of("call_window_ns_per_msg", &mut call_win),
            Figure::of("handwritten_window_ns_per_msg", &mut hand_win),
            Figure::of("window_ratio", &mut win_ratio),
        ];
        o.notes.push(format!(
            "both deliver each answer to the program: a call's pending value, or a reply handler's store into a window array of {WINDOW} slots"
        ));
        o
    }))
}
