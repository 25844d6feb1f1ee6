//! Hello, world: every rank greets rank 0 with an Active Message, whose handler prints it.
use amrq::prelude::*;
use std::cell::Cell;

fn main() {
    let mut cfg = Config::new();
    cfg.ranks.set_default(2); // started alone: 2 ranks (AMRQ_RANKS or a launcher may say more)
    cfg.run(|setup| {
        // Every rank registers the same handlers, in the same order.
        let mut handlers = HandlerTable::new();
        let hello = handlers.handler("hello", |heard: &Cell<usize>, ctx, size: usize| {
            println!("hello from rank {} of {size}", ctx.source());
            heard.set(heard.get() + 1);
            Ok(())
        });
        let job = setup.start(handlers, Cell::new(0))?;
        job.send(0, hello, job.size())?; // typed args: up to 8 words
        if job.rank() == 0 {
            job.wait_until(|heard| heard.get() == job.size())?; // polls: runs handlers
        }
        Ok(()) // returning is safe: the job ends once every message is handled
    })
}
