//! One-sided operations on symmetric memory: every rank allocates the same array (one
//! slot per rank), puts its value into its slot on every rank, and after a barrier
//! reads the array (local get) and its right neighbour's copy (remote get); then an
//! allreduce adds everyone's rank.
//!
//! ```text
//! cargo run --release --example symmetric       # ranks: the cores of this host
//! amrun -n 4 target/release/examples/symmetric
//! ```
//! Last line (rank 0): `symmetric: ranks=… rank_sum=…`.

use amrq::prelude::*;

fn main() {
    Config::new().run(|setup| {
        let job = setup.start(HandlerTable::new(), ())?;
        let (me, n) = (job.rank(), job.size());
        let rma = job.rma();
        // The same offset on every rank: slot r holds rank r's value.
        let slots = rma.alloc_symmetric(8 * n, 8)?;
        let value = |r: usize| 1000 + r as u64;
        for r in 0..n {
            rma.put_slice(r, slots + 8 * me, &[value(me)])?;
        }
        job.barrier()?; // every put is in place everywhere
        let mut mine = vec![0u64; n];
        rma.get_slice(me, slots, &mut mine)?;
        let mut right = vec![0u64; n];
        rma.get_slice((me + 1) % n, slots, &mut right)?;
        let want: Vec<u64> = (0..n).map(value).collect();
        if mine != want || right != want {
            return Err(format!("rank {me} read {mine:?} and {right:?}").into());
        }
        let mut sum = [me as u64];
        job.coll().allreduce(&mut sum, amrq::coll::sum)?;
        if sum[0] != (n * (n - 1) / 2) as u64 {
            return Err(format!("allreduce gave {}", sum[0]).into());
        }
        job.barrier()?; // nobody frees its segment while another still reads it
        if me == 0 {
            println!(
                "{n} ranks: every slot everywhere holds its rank's value; ranks add to {}",
                sum[0]
            );
            println!("symmetric: ranks={n} rank_sum={}", sum[0]);
        }
        Ok(())
    })
}
