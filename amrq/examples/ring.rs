//! Every rank streams Short AMs (one u64 arg) to its right neighbour, `(rank + 1) % N`,
//! while receiving from its left one: the ring benchmark of Liu & Culler, loaded.
//!
//! ```text
//! cargo run --release --example ring [-- --quick] [--iters N] [--ranks N] [--threads] [--json]
//! amrun -n 4 target/release/examples/ring --quick
//! ```
//! Each rank times its own stream (until it has also received all of its left
//! neighbour's) and reports it to rank 0, which prints per-rank rates and, last, after
//! every rank finished: `ring: ranks=… total_msgs_per_s=… min_rank_msgs_per_s=…`.
//! With more ranks than cores the ranks are not pinned and share cores: rates then
//! measure time-sharing as much as messaging.

mod common;

use amrq::prelude::*;
use std::cell::{Cell, RefCell};
use std::time::Instant;

/// Every rank streams Short AMs to its right neighbour.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    common: common::Common,
    /// Messages (or operations) per batch.
    #[arg(long)]
    iters: Option<u64>,
    /// Ranks, where no launcher says (default `AMRQ_RANKS`, else 2; with more ranks
    /// than cores they are not pinned and share cores).
    #[arg(long)]
    ranks: Option<usize>,
}

struct State {
    received: Cell<u64>,
    out_of_order: Cell<u64>,
    rates: RefCell<Vec<Option<f64>>>,
}

fn main() {
    let o = <Args as clap::Parser>::parse();
    common::run(
        &o.common,
        Config::new(),
        common::Ranks::flag_or(o.ranks, 2),
        |setup| rank_main(setup, &o),
    );
}

fn rank_main(setup: Setup, o: &Args) -> amrq::Result<()> {
    let iters = o
        .iters
        .unwrap_or(if o.common.quick { 500_000 } else { 5_000_000 });
    let (n, threads) = (setup.size(), setup.config().threads.get());
    let mut table = HandlerTable::new();
    let msg = table.request("msg", |s: &State, _ctx, m| {
        let k = s.received.get() + 1;
        if m.arg(0)? != k {
            s.out_of_order.set(s.out_of_order.get() + 1);
        }
        s.received.set(k);
        Ok(())
    });
    let report = table.request("report", |s: &State, _ctx, m| {
        let mut r = s.rates.borrow_mut();
        if let Some(slot) = r.get_mut(m.arg(0)? as usize) {
            *slot = Some(f64::from_bits(m.arg(1)?));
        }
        Ok(())
    });
    let state = State {
        received: Cell::new(0),
        out_of_order: Cell::new(0),
        rates: RefCell::new(vec![None; n]),
    };
    let am = setup.start(table, state)?;
    let right = (am.rank() + 1) % n;
    am.barrier()?;
    let t = Instant::now();
    for i in 1..=iters {
        am.request(right, msg, &[i])?;
    }
    am.wait_until(|s| s.received.get() >= iters)?;
    let rate = iters as f64 / t.elapsed().as_secs_f64();
    if am.state().out_of_order.get() != 0 {
        return Err(format!(
            "rank {} received rank {}'s stream out of order",
            am.rank(),
            (am.rank() + n - 1) % n
        )
        .into());
    }
    am.request(0, report, &[am.rank() as u64, rate.to_bits()])?;
    if am.rank() == 0 {
        am.wait_until(|s| s.rates.borrow().iter().all(Option::is_some))?;
    }
    am.barrier()?;
    if am.rank() == 0 {
        let rates: Vec<f64> = am
            .state()
            .rates
            .borrow()
            .iter()
            .map(|r| r.unwrap_or(0.0))
            .collect();
        let how = common::placement(threads);
        let cores = amrq::util::affinity::host_cores();
        let pinning = if n <= cores {
            "at most one per core".to_string()
        } else {
            format!("oversubscribed: {n} ranks on {cores} cores, not pinned")
        };
        println!(
            "ranks: {n} {how}, {pinning}; each sends {iters} Short AMs to its right neighbour"
        );
        for (r, x) in rates.iter().enumerate() {
            println!("rank {r} → rank {}: {:.1} M msgs/s", (r + 1) % n, x / 1e6);
        }
        let total: f64 = rates.iter().sum();
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        println!("total: {:.1} M msgs/s", total / 1e6);
        common::summary(
            "ring",
            o.common.json,
            &[
                ("ranks", n as f64),
                ("total_msgs_per_s", total),
                ("min_rank_msgs_per_s", min),
            ],
        );
    }
    Ok(())
}
