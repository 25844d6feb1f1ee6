//! One-poll over several queues, exercised through its armed (idle) path: shared by the
//! threads and the processes tests.

use amrq::conduit::mem::MemConduit;
use amrq::conduit::Conduit;
use amrq::conduit::ReceivedFrame;
use amrq::config::QueueSpec;
use amrq::prelude::*;
use std::cell::Cell;
use std::time::{Duration, Instant};

pub fn config() -> (Config, [QueueId; 3]) {
    let mut cfg = Config::default();
    let qs = [
        cfg.add(QueueSpec::new("urgent", 16).one_poll()),
        cfg.add(QueueSpec::new("normal", 16).one_poll()),
        cfg.add(QueueSpec::new("bulk", 16).one_poll()),
    ];
    (cfg, qs)
}

/// Checks that `f`, taken from queue `q`, is the next frame of its queue, and releases it.
fn take_next<'a>(
    qs: &[QueueId; 3],
    next: &mut [u64; 3],
    q: QueueId,
    f: impl ReceivedFrame<'a>,
) -> Result<(), String> {
    let i = qs.iter().position(|&x| x == q).ok_or("unknown queue")?;
    if f.args() != [next[i]] {
        return Err(format!(
            "queue {i}: got {:?}, expected {}",
            f.args(),
            next[i]
        ));
    }
    next[i] += 1;
    f.release();
    Ok(())
}

pub struct Go {
    bursts: Cell<u64>,
}

/// For each of `bursts` bursts, rank 1 polls until its doorbell is armed, then asks
/// rank 0 for a burst of frames spread over the three queues; it must receive every
/// frame through One-poll, exactly once and in order per queue, before a deadline. A
/// sender that failed to ring the doorbell would leave rank 1 waiting on a silent word.
pub fn armed_bursts(c: MemConduit, bursts: u64) -> Result<(), String> {
    let (_, qs) = config();
    let e = |e: AmError| e.to_string();
    let mut table = HandlerTable::new();
    let go = table.request("go", |s: &Go, _ctx, _m| {
        s.bursts.set(s.bursts.get() + 1);
        Ok(())
    });
    let am = Am::new(
        c,
        table,
        Go {
            bursts: Cell::new(0),
        },
    )
    .map_err(e)?;
    let mut next = [0u64; 3];
    let set = am.rq().poll_set(&qs).map_err(|e| e.to_string())?;
    for b in 0..bursts {
        let k = 1 + b % 5;
        if am.rank() == 0 {
            am.wait_until_for(Duration::from_secs(30), |s| s.bursts.get() > b)
                .map_err(e)?;
            for i in 0..k {
                let q = ((b + i) % 3) as usize;
                while !am
                    .rq()
                    .enqueue(1, qs[q], &[next[q]], &[])
                    .map_err(|e| e.to_string())?
                {}
                next[q] += 1;
            }
        } else {
            let armed_by = Instant::now() + Duration::from_secs(10);
            while am.rq().conduit().one_poll_armed() == 0 {
                if am.rq().one_poll(&set).map_err(|e| e.to_string())?.is_some() {
                    return Err("a frame before the burst was asked for".into());
                }
                if Instant::now() > armed_by {
                    return Err("One-poll never armed its doorbell".into());
                }
            }
            am.request(0, go, &[]).map_err(e)?;
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut got = 0;
            while got < k {
                match am.rq().one_poll(&set).map_err(|e| e.to_string())? {
                    Some((q, f)) => {
                        take_next(&qs, &mut next, q, f)?;
                        got += 1;
                    }
                    None if Instant::now() > deadline => {
                        return Err(format!(
                            "burst {b}: {got} of {k} frames seen: a doorbell was lost"
                        ));
                    }
                    None => {}
                }
            }
        }
    }
    am.barrier().map_err(e)
}

/// Rank 0 sends `frames` frames over the three queues, each after a pseudo-random pause
/// below `max_pause` (a quarter of them back to back, one in 16 after ten times
/// `max_pause`, on a loaded host too), so that arrivals land before
/// rank 1's One-poll arms its doorbell, while it arms, and after: One-poll arms after 32
/// empty polls with symmetric fences, and after 8 Ki ring looks (some tens of µs) with
/// the asymmetric ones, whose `membarrier` then takes ~10 µs. Rank 1 takes them with One-poll alone: each
/// exactly once and in order per queue, none left unseen for a second (a sender that
/// missed the arm and a receiver whose last look missed the frame would leave it
/// there), and the armed path taken for a good share of them.
pub fn arrivals_around_the_arm_point(
    c: MemConduit,
    frames: u64,
    max_pause: Duration,
) -> Result<(), String> {
    let (_, qs) = config();
    let rq = amrq::rq::Rq::new(c);
    let set = rq.poll_set(&qs).map_err(|e| e.to_string())?;
    let mut next = [0u64; 3];
    if rq.rank() == 0 {
        let mut pauses = Pauses::new(max_pause);
        for i in 0..frames {
            pauses.spin();
            let q = (i % 3) as usize;
            while !rq
                .enqueue(1, qs[q], &[next[q]], &[])
                .map_err(|e| e.to_string())?
            {}
            next[q] += 1;
        }
    } else {
        // Frames found on a poll that followed an armed one: noticed through the summary.
        let (mut got, mut after_armed, mut last) = (0, 0, Instant::now());
        let mut polls = 0u32;
        while got < frames {
            let was_armed = rq.conduit().one_poll_armed() != 0;
            match rq.one_poll(&set).map_err(|e| e.to_string())? {
                Some((q, f)) => {
                    take_next(&qs, &mut next, q, f)?;
                    got += 1;
                    after_armed += u64::from(was_armed);
                    last = Instant::now();
                }
                // The clock now and then: reading it costs more than a poll.
                None if {
                    polls = polls.wrapping_add(1);
                    polls.is_multiple_of(1024) && last.elapsed() > Duration::from_secs(1)
                } =>
                {
                    return Err(format!(
                        "{got} of {frames} frames seen: a doorbell was lost"
                    ));
                }
                None => {}
            }
        }
        if after_armed < frames / 100 {
            return Err(format!(
                "only {after_armed} of {frames} frames came while armed"
            ));
        }
    }
    rq.conduit().barrier().map_err(|e| e.to_string())
}

/// The sender's pauses of the arm-point tests: pseudo-random, below `max`, a quarter
/// of them none, one in 16 ten times `max` (past the arm point however slow the polls).
struct Pauses {
    lcg: u64,
    max: Duration,
}

impl Pauses {
    fn new(max: Duration) -> Self {
        Self {
            lcg: 0x2545_f491_4f6c_dd1d,
            max,
        }
    }

    /// Spins through the next pause.
    fn spin(&mut self) {
        self.lcg = self
            .lcg
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let pause = match self.lcg >> 60 {
            0..=3 => Duration::ZERO,
            4 => self.max * 10,
            _ => Duration::from_nanos((self.lcg >> 20) % self.max.as_nanos() as u64),
        };
        let until = Instant::now() + pause;
        while Instant::now() < until {}
    }
}

/// What `Am::poll`'s receiver has seen: the next number expected, and the first
/// message out of order.
pub struct Seen {
    next: Cell<u64>,
    wrong: Cell<Option<(u64, u64)>>,
}

/// `Am::poll` arms the AM queues after some thousands of empty polls (as One-poll
/// does; with asymmetric fences, after 8 Ki ring looks and a `membarrier`). Rank 0
/// sends `messages` one-word requests with the pauses of
/// [`arrivals_around_the_arm_point`]; rank 1 runs them by `Am::poll` alone: each exactly
/// once and in order, none left unseen for a second, and a good share of them noticed
/// through the armed word.
pub fn am_poll_around_the_arm_point(
    c: MemConduit,
    messages: u64,
    max_pause: Duration,
) -> Result<(), String> {
    let e = |e: AmError| e.to_string();
    let mut table = HandlerTable::new();
    let count = table.request("count", |s: &Seen, _ctx, m| {
        let k = m.arg(0)?;
        if k != s.next.get() && s.wrong.get().is_none() {
            s.wrong.set(Some((k, s.next.get())));
        }
        s.next.set(k + 1);
        Ok(())
    });
    let seen = Seen {
        next: Cell::new(0),
        wrong: Cell::new(None),
    };
    let am = Am::new(c, table, seen).map_err(e)?;
    if am.rank() == 0 {
        let mut pauses = Pauses::new(max_pause);
        for k in 0..messages {
            pauses.spin();
            am.request(1, count, &[k]).map_err(e)?;
        }
    } else {
        let (mut after_armed, mut last, mut polls) = (0, Instant::now(), 0u32);
        while am.state().next.get() < messages {
            let was_armed = am.rq().conduit().one_poll_armed() != 0;
            match am.poll().map_err(e)? {
                0 => {
                    // The clock now and then: reading it costs more than a poll.
                    polls = polls.wrapping_add(1);
                    if polls % 1024 == 0 && last.elapsed() > Duration::from_secs(1) {
                        return Err(format!(
                            "{} of {messages} messages seen: a doorbell was lost",
                            am.state().next.get()
                        ));
                    }
                }
                n => {
                    after_armed += u64::from(was_armed) * n as u64;
                    last = Instant::now();
                }
            }
            if let Some((got, expected)) = am.state().wrong.get() {
                return Err(format!("message {got} ran when {expected} was next"));
            }
        }
        if after_armed < messages / 100 {
            return Err(format!(
                "only {after_armed} of {messages} messages came while armed"
            ));
        }
    }
    am.barrier().map_err(e)
}
