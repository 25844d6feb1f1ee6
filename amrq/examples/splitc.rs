//! A Split-C program in Rust (the guide's Split-C chapter): a spread array written by
//! its owners, shifted by one element with reply-free stores, completed by
//! `all_store_sync`, checked, and summed with a reduction; then the same shift read
//! back with split-phase gets.
//!
//! ```text
//! cargo run --release --example splitc [-- --quick] [--ranks N] [--len N] [--threads] [--json]
//! amrun -n 4 target/release/examples/splitc --quick
//! AMRQ_RMA_FRAMES=1 target/release/examples/splitc   # every remote access as AM frames
//! ```
//! Prints `splitc: ranks=… stores_per_s=… gets_per_s=… sum=…` last (the rates are of
//! the whole job, rank 0's clock).

mod common;

use amrq::coll;
use amrq::splitc::Layout;
use common::Context;

/// A spread array shifted with stores, then with gets.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    common: common::Common,
    /// Ranks, where no launcher says (default `AMRQ_RANKS`, else 2).
    #[arg(long)]
    ranks: Option<usize>,
    /// Elements of the array (default 2^20, 2^14 with --quick).
    #[arg(long)]
    len: Option<usize>,
}

fn main() {
    let o = <Args as clap::Parser>::parse();
    let cfg = amrq::Config::new();
    let n = o
        .len
        .unwrap_or(if o.common.quick { 1 << 14 } else { 1 << 20 });
    common::run_splitc(&o.common, cfg, common::Ranks::flag_or(o.ranks, 2), |sc| {
        program(sc, n, o.common.json)
    })
}

/// Every rank's program (Split-C's `splitc_main` body).
fn program(sc: &Context, n: usize, json: bool) -> amrq::Result<()> {
    let me = sc.my_proc();
    let a = sc.all_spread_malloc::<f64>(n, Layout::Cyclic)?;
    let b = sc.all_spread_malloc::<f64>(n, Layout::Cyclic)?;
    for i in a.local_indices(me) {
        sc.write(a.at(i), i as f64)?; // local: a plain store
    }
    sc.barrier()?;

    // b[i + 1] :- a[i] — a store into the next rank's part, no reply.
    let t = sc.seconds();
    for i in a.local_indices(me) {
        let v = sc.read(a.at(i))?;
        sc.store(b.at((i + 1) % n), v)?;
    }
    sc.all_store_sync()?;
    let stores_s = sc.seconds() - t;
    let mut bad = 0u64;
    let mut mine = 0.0;
    for j in b.local_indices(me) {
        let v = sc.read(b.at(j))?;
        bad += u64::from(v != ((j + n - 1) % n) as f64);
        mine += v;
    }

    // The same shift, read back: a[i - 1] fetched by the owner of i with split-phase
    // gets into its own part of b (all issued, then one sync).
    sc.barrier()?;
    let t = sc.seconds();
    for j in b.local_indices(me) {
        sc.get(b.at(j), a.at((j + n - 1) % n))?;
    }
    sc.sync()?;
    sc.barrier()?;
    let gets_s = sc.seconds() - t;
    for j in b.local_indices(me) {
        bad += u64::from(sc.read(b.at(j))? != ((j + n - 1) % n) as f64);
    }

    let sum = sc.all_reduce(mine, coll::sum)?;
    let bad = sc.all_reduce(bad, coll::sum)?;
    if me == 0 {
        let path = if sc.is_direct() {
            "direct"
        } else {
            "AM frames"
        };
        println!(
            "{} ranks, {n} elements, cyclic; remote accesses: {path}",
            sc.procs()
        );
        println!(
            "shift by stores: {:.1} M stores/s; by split-phase gets: {:.1} M gets/s",
            n as f64 / stores_s / 1e6,
            n as f64 / gets_s / 1e6
        );
        common::summary(
            "splitc",
            json,
            &[
                ("ranks", sc.procs() as f64),
                ("stores_per_s", n as f64 / stores_s),
                ("gets_per_s", n as f64 / gets_s),
                ("sum", sum),
            ],
        );
    }
    let want = (n * (n - 1) / 2) as f64;
    match bad {
        0 if sum == want => Ok(()),
        _ => {
            Err(format!("{bad} elements wrong after the shifts; sum {sum}, expected {want}").into())
        }
    }
}
