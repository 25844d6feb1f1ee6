//! One-poll over several queues, exercised through its armed (idle) path: shared by the
//! threads and the processes tests.

use amrq::conduit::mem::MemConduit;
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
