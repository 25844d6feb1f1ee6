//! Ranks on several hosts (shared memory between the ranks of a host, UCX between
//! hosts; on one host, shared memory alone): each rank says where it runs and how it
//! reaches its peers, every rank sends an Active Message to every other, and rank 0
//! times calls (a request and its one-word answer) to the last rank.
//!
//! ```text
//! amrun --hosts h0:1,h1:1 --exec 'ip netns exec {host}' --rendezvous 169.254.7.1 \
//!     target/release/examples/hosts [CALLS]
//! ```
//! (`docs/guide/07-across-hosts.md` makes the two namespace hosts `h0` and `h1`.) UCX
//! picks the transport unless `UCX_TLS` / `UCX_NET_DEVICES` say otherwise; amrun passes
//! every `UCX_*` variable on to the ranks.

use amrq::conduit::combined::Route;
use amrq::prelude::*;
use std::cell::Cell;
use std::time::Instant;

fn main() {
    let calls = std::env::args()
        .nth(1)
        .map_or(Ok(10_000), |a| a.parse::<u64>());
    Config::new().run(|setup| {
        let calls = calls.clone().map_err(|e| format!("CALLS, a number: {e}"))?;
        let mut table = HandlerTable::new();
        let hello = table.request("hello", |heard: &Cell<u64>, _, _| {
            heard.set(heard.get() + 1);
            Ok(())
        });
        let echo = table.call("echo", |_: &Cell<u64>, _ctx, x: u64| Ok(x));
        let am = setup.start(table, Cell::new(0))?;
        let (me, n) = (am.rank(), am.size());
        let host = amrq::bootstrap::env::detect()
            .ok()
            .flatten()
            .map(|p| p.host);
        let lanes: Vec<String> = (0..n)
            .filter(|&p| p != me)
            .map(|p| match am.rq().conduit().across() {
                Some(c) if !matches!(c.route(p), Ok(Route::Local(_))) => {
                    let info = c.remote().endpoint_info(p).unwrap_or_default();
                    format!("{p} via {}", transport(&info))
                }
                _ => format!("{p} via shared memory"),
            })
            .collect();
        let host = host.unwrap_or_else(|| "this one".into());
        println!(
            "rank {me} of {n} on host {host}: to rank {}",
            lanes.join(", ")
        );
        for peer in (0..n).filter(|&p| p != me) {
            am.request(peer, hello, &[])?;
        }
        am.wait_until(|heard| heard.get() == n as u64 - 1)?;
        am.barrier()?;
        if me == 0 && n > 1 {
            let t = Instant::now();
            for i in 0..calls {
                if am.call(n - 1, echo, i)?.wait()? != i {
                    return Err(format!("call {i} came back with another value").into());
                }
            }
            let each = t.elapsed().as_secs_f64() / calls.max(1) as f64;
            println!(
                "rank 0 → rank {}: {calls} calls, {:.2} µs each",
                n - 1,
                each * 1e6
            );
            println!("every rank heard from all {} others", n - 1);
        }
        am.barrier()
    })
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
