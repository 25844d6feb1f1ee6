//! Hello, world: every rank greets rank 0 with an Active Message, whose handler prints it.
use amrq::prelude::*;
use std::cell::Cell;

fn main() {
    let mut cfg = Config::new();
    cfg.ranks.set_default(2); // started alone: 2 ranks (AMRQ_RANKS or a launcher may say more)
    cfg.run(|setup| {
        // Every rank registers the same handlers, in the same order.
        let mut handlers = HandlerTable::new();
        let hello = handlers.request("hello", |heard: &Cell<usize>, _ctx, m| {
            println!("hello from rank {} of {}", m.source(), m.arg(0)?);
            heard.set(heard.get() + 1);
            Ok(())
        });
        let job = setup.start(handlers, Cell::new(0))?;
        job.request(0, hello, &[job.size() as u64])?; // a Short request: 0 to 8 u64 args
        if job.rank() == 0 {
            job.wait_until(|heard| heard.get() == job.size())?; // polls: runs handlers
        }
        Ok(()) // returning is safe: the job ends once every message is handled
    })
}
