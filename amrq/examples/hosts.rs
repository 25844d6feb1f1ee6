//! Ranks on several hosts (shared memory between the ranks of a host, UCX between
//! hosts; on one host, shared memory alone): each rank says where it runs and how it
//! reaches its peers, every rank sends an Active Message to every other (each
//! handler counts them), and rank 0 times Short request→reply round trips with the
//! last rank.
//!
//! ```text
//! amrun --hosts h0:1,h1:1 --exec 'ip netns exec {host}' --rendezvous 169.254.7.1 \
//!     target/release/examples/hosts [ITERS]
//! ```
//! (`docs/guide/07-across-hosts.md` shows how to make two namespace hosts `h0`, `h1`
//! on one machine.) The transport is UCX's choice unless `UCX_TLS` / `UCX_NET_DEVICES` say otherwise; amrun
//! passes every `UCX_*` variable on to the ranks.

use amrq::conduit::combined::Route;
use amrq::prelude::*;
use std::cell::Cell;
use std::time::Instant;

struct State {
    pong: ReplyHandler,
    /// Hellos received.
    hellos: Cell<u64>,
    /// Pongs received (rank 0) / pings served.
    count: Cell<u64>,
}

fn main() {
    let iters: u64 = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .unwrap_or_else(|_| fail(&format!("{a:?}: give ITERS as a number"))),
        None => 10_000,
    };
    Config::new().run(|setup| rank_main(setup, iters))
}

fn fail(e: &dyn std::fmt::Display) -> ! {
    eprintln!("hosts: {e}");
    std::process::exit(1)
}

fn rank_main(setup: Setup, iters: u64) -> amrq::Result<()> {
    let mut table = HandlerTable::new();
    let hello = table.request("hello", |s: &State, _, _| {
        s.hellos.set(s.hellos.get() + 1);
        Ok(())
    });
    let pong = table.reply("pong", |s: &State, _| {
        s.count.set(s.count.get() + 1);
        Ok(())
    });
    let ping = table.request("ping", |s: &State, ctx, m| {
        s.count.set(s.count.get() + 1);
        ctx.reply(s.pong, &[m.arg(0)?])
    });
    let state = State {
        pong,
        hellos: Cell::new(0),
        count: Cell::new(0),
    };
    let am = setup.start(table, state)?;
    let (me, n) = (am.rank(), am.size());
    let place = amrq::bootstrap::env::detect().ok().flatten();
    let host = place.map(|p| p.host).unwrap_or_else(|| "this one".into());
    let lanes: Vec<String> = (0..n)
        .filter(|&p| p != me)
        .map(|p| match am.rq().conduit().across() {
            Some(c) if !matches!(c.route(p), Ok(Route::Local(_))) => format!(
                "{p} via {}",
                transport(&c.remote().endpoint_info(p).unwrap_or_default())
            ),
            _ => format!("{p} via shared memory"),
        })
        .collect();
    println!(
        "rank {me} of {n} on host {host}: to rank {}",
        lanes.join(", ")
    );
    for peer in (0..n).filter(|&p| p != me) {
        am.request(peer, hello, &[me as u64])?;
    }
    am.wait_until(|s| s.hellos.get() == n as u64 - 1)?;
    am.barrier()?;
    let last = n - 1;
    if me == 0 && last > 0 {
        let t = Instant::now();
        for i in 1..=iters {
            am.request(last, ping, &[i])?;
            am.wait_until(|s| s.count.get() >= i)?;
        }
        let rtt = t.elapsed() / iters as u32;
        println!(
            "rank 0 ↔ rank {last}: {iters} Short round trips, {:.2} µs each",
            rtt.as_secs_f64() * 1e6
        );
    } else if me == last {
        am.wait_until(|s| s.count.get() >= iters)?;
    }
    am.barrier()?;
    if me == 0 {
        println!("every rank heard from all {} others", n - 1);
    }
    Ok(())
}

/// The transports and devices of an endpoint's lanes, from `ucp_ep_print_info`'s text
/// (lines such as `#   lane[0]:  3:tcp/amrq0.0 md[1] …`).
fn transport(info: &str) -> String {
    let mut seen: Vec<&str> = info
        .lines()
        .filter(|l| l.contains("lane["))
        .filter_map(|l| l.split_whitespace().find(|w| w.contains('/')))
        .map(|w| w.split(':').next_back().unwrap_or(w))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    match seen.is_empty() {
        true => "UCX (no lanes reported)".into(),
        false => seen.join(" + "),
    }
}
