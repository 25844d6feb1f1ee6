//! Split-C: a spread array dealt out cyclically over the ranks. Each rank writes its
//! own elements, then gets every element split-phase into a buffer of its own (the
//! gets in flight together, complete at `sync`), and puts one value split-phase into
//! every element its right neighbour owns; after a barrier every rank checks its
//! elements and the array's sum.
//!
//! ```text
//! cargo run --release --example spread          # ranks: the cores of this host
//! amrun -n 4 target/release/examples/spread
//! AMRQ_RMA_FRAMES=1 target/release/examples/spread   # every access as AM frames
//! ```
//! Last line (rank 0): `spread: ranks=… len=… sum=…`.

use amrq::prelude::*;
use amrq::splitc::{GlobalPtr, Layout};

const LEN: usize = 1000;

fn main() {
    Config::new().run(|setup| {
        let job = setup.start(HandlerTable::new(), ())?;
        let sc = job.splitc();
        let (me, n) = (sc.my_proc(), sc.procs());
        let a = sc.all_spread_malloc::<u64>(LEN, Layout::Cyclic)?;
        for i in a.local_indices(me) {
            sc.write(a.at(i), i as u64)?;
        }
        sc.barrier()?;
        // Split-phase gets of the whole array into this rank's buffer.
        let buf = job.rma().alloc_local(8 * LEN, 8)?;
        let local = |i: usize| GlobalPtr::<u64>::new(me, buf + 8 * i);
        for i in 0..LEN {
            sc.get(local(i), a.at(i))?;
        }
        sc.sync()?; // every get is in place
        for i in 0..LEN {
            if sc.read(local(i))? != i as u64 {
                return Err(format!("element {i} read wrong").into());
            }
        }
        // Every rank has read before anyone writes; then split-phase puts of
        // 1_000_000 + i into each element the right neighbour owns.
        sc.barrier()?;
        let right = (me + 1) % n;
        for i in a.local_indices(right).collect::<Vec<_>>() {
            sc.put(a.at(i), 1_000_000 + i as u64)?;
        }
        sc.sync()?;
        sc.barrier()?;
        let mut mine = 0u64;
        for i in a.local_indices(me) {
            let v = sc.read(a.at(i))?;
            if v != 1_000_000 + i as u64 {
                return Err(format!("element {i} holds {v}").into());
            }
            mine += v;
        }
        let sum = sc.all_reduce(mine, amrq::coll::sum)?;
        let want = (0..LEN as u64).map(|i| 1_000_000 + i).sum::<u64>();
        if sum != want {
            return Err(format!("sum {sum}, expected {want}").into());
        }
        sc.barrier()?;
        if me == 0 {
            println!("{n} ranks, {LEN} elements: gets and puts complete at sync; the array adds to {sum}");
            println!("spread: ranks={n} len={LEN} sum={sum}");
        }
        Ok(())
    })
}
