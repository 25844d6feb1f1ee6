//! A barrier and an all-to-all at growing numbers of ranks over two hosts, to check
//! the [model](crate::model) against: per number of ranks, a job whose ranks join, make
//! a barrier, then time [`BARRIERS`] barriers back to back and two all-to-alls (every
//! rank sends a Short request to every other, starting with the next rank, and waits
//! for the P − 1 it is sent; a barrier before each), the first paying the connections
//! across hosts, the second not. Each rank prints its own times; a barrier's time is
//! rank 0's mean, an all-to-all's the slowest rank's. At 2 ranks (one a host) rank 0
//! also times [`TRIPS`] round trips to rank 1 at once and as many after sleeping
//! 2 ms, while rank 1 waits in its barrier: the difference is what waking a rank that
//! slept costs.

use crate::reference::median;
use crate::startup::Link;
use crate::summary::value;
use amrq::prelude::*;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Barriers timed per job.
pub const BARRIERS: usize = 20;
/// Round trips timed each way at 2 ranks.
pub const TRIPS: usize = 50;

/// One number of ranks: each round's figures, seconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Ranks in all.
    pub ranks: usize,
    /// A barrier, rank 0's mean, per round.
    pub barrier_s: Vec<f64>,
    /// The first all-to-all, the slowest rank's time, per round.
    pub first_all_to_all_s: Vec<f64>,
    /// The second all-to-all, per round.
    pub all_to_all_s: Vec<f64>,
    /// At 2 ranks: a round trip's median at once, and after rank 1 slept, per round.
    pub trip_s: Vec<(f64, f64)>,
}

struct State {
    hits: Cell<u64>,
    pongs: Cell<u64>,
    pong: ReplyHandler,
}

/// The ranks' part (`amrq-bench startup --collectives`): prints `collectives: rank=…
/// barrier_s=… first_s=… steady_s=…` (and `hot_s=… slept_s=…` from rank 0 at 2
/// ranks). Ends the process.
pub fn rank_part() -> ! {
    Config::new().run(|setup| {
        let mut t = HandlerTable::new();
        let hit = t.request("hit", |s: &State, _ctx, _m| {
            s.hits.set(s.hits.get() + 1);
            Ok(())
        });
        let pong = t.reply("pong", |s: &State, _m| {
            s.pongs.set(s.pongs.get() + 1);
            Ok(())
        });
        let ping = t.request("ping", |s: &State, ctx, _m| ctx.reply(s.pong, &[]));
        let state = State {
            hits: Cell::new(0),
            pongs: Cell::new(0),
            pong,
        };
        let am = setup.start(t, state)?;
        let (me, n) = (am.rank(), am.size());
        am.barrier()?;
        let t0 = Instant::now();
        for _ in 0..BARRIERS {
            am.barrier()?;
        }
        let barrier = t0.elapsed().as_secs_f64() / BARRIERS as f64;
        let mut all_to_all = [0.0; 2];
        for (round, time) in all_to_all.iter_mut().enumerate() {
            am.barrier()?;
            let t0 = Instant::now();
            for i in 1..n {
                am.request((me + i) % n, hit, &[])?;
            }
            let want = (round as u64 + 1) * (n as u64 - 1);
            am.wait_until(|s| s.hits.get() >= want)?;
            *time = t0.elapsed().as_secs_f64();
        }
        let mut line = format!(
            "collectives: rank={me} barrier_s={barrier:e} first_s={:e} steady_s={:e}",
            all_to_all[0], all_to_all[1]
        );
        am.barrier()?;
        if n == 2 && me == 0 {
            let trip = |nap: Option<Duration>| -> amrq::Result<f64> {
                let mut v = Vec::with_capacity(TRIPS);
                for _ in 0..TRIPS {
                    if let Some(d) = nap {
                        std::thread::sleep(d);
                    }
                    let pongs = am.state().pongs.get();
                    let t0 = Instant::now();
                    am.request(1, ping, &[])?;
                    am.wait_until(|s| s.pongs.get() > pongs)?;
                    v.push(t0.elapsed().as_secs_f64());
                }
                Ok(median(&mut v))
            };
            let hot = trip(None)?;
            let slept = trip(Some(Duration::from_millis(2)))?;
            line += &format!(" hot_s={hot:e} slept_s={slept:e}");
        }
        println!("{line}");
        am.barrier()?;
        Ok(())
    })
}

/// `rounds` jobs at each number of `ranks` over `link`.
pub fn measure(link: &Link, ranks: &[usize], rounds: usize) -> Result<Vec<Sample>, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find amrq-bench: {e}"))?;
    let mut samples = Vec::new();
    for &n in ranks {
        let mut s = Sample {
            ranks: n,
            ..Sample::default()
        };
        for r in 0..rounds {
            eprintln!("collectives: {n} ranks, round {}/{rounds}", r + 1);
            let (_, out) = link.time(n, &me, &["startup", "--collectives"])?;
            let lines: Vec<_> = out
                .lines()
                .filter_map(|l| l.strip_prefix("collectives: "))
                .collect();
            if lines.len() != n {
                return Err(format!(
                    "{n} ranks: {} said their times:\n{out}",
                    lines.len()
                ));
            }
            let get = |l: &str, k: &str| value::<f64>(l, k);
            let slowest = |k: &str| lines.iter().filter_map(|l| get(l, k)).fold(0.0, f64::max);
            let rank0 = lines.iter().find(|l| l.starts_with("rank=0 ")).copied();
            let rank0 = rank0.ok_or_else(|| format!("rank 0 said nothing:\n{out}"))?;
            s.barrier_s
                .push(get(rank0, "barrier_s").unwrap_or(f64::NAN));
            s.first_all_to_all_s.push(slowest("first_s"));
            s.all_to_all_s.push(slowest("steady_s"));
            if let (Some(hot), Some(slept)) = (get(rank0, "hot_s"), get(rank0, "slept_s")) {
                s.trip_s.push((hot, slept));
            }
        }
        samples.push(s);
    }
    Ok(samples)
}
