//! Completion events of one-sided operations (RQ §2.4): a put's count and frame at its
//! target, a frame at its sender once it is complete, and a get's frame in a local
//! queue; with the put that no one waits for (`put_async`), whose events are the only
//! way its sender learns that it is done.

use super::{frames, Pending, Rma, RmaError};
use crate::am::Event;
use crate::conduit::{Conduit, Rank};
use crate::rq::{user_queue, QueueId};

/// What a put announces once its data is in place (RQ §2.4): at its target, a count or
/// a frame; at its sender, a frame in one of the sender's own queues (the paper's
/// sender-side completion).
///
/// ```
/// use amrq::{prelude::*, rma::{Completion, Rma, RmaError}};
/// amrq::Config::new().threads(2, |setup| -> amrq::Result<()> {
///     let am = setup.start(HandlerTable::<()>::new(), ())?;
///     let rma = am.rma();
///     let (data, count) = (rma.alloc_symmetric(64, 8)?, rma.alloc_symmetric(8, 8)?);
///     am.barrier()?;
///     if am.rank() == 0 {
///         let done = Completion { counter: Some(count), ..Default::default() };
///         rma.put_with(1, data, &[1; 64], done)?; // the counter goes up once the data is in
///     } else {
///         while rma.load(1, count)? == 0 {}
///     }
///     am.barrier()?;
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Completion<'a> {
    /// Offset of a u64 counter in the target's segment, incremented by one.
    pub counter: Option<usize>,
    /// A frame enqueued into this queue of the target, with these args (the sender
    /// waits for room, running handlers meanwhile, with [`Rma::put_with`]).
    pub notify: Option<(QueueId, &'a [u64])>,
    /// A frame enqueued into this queue of the sending rank itself, with these args.
    pub local: Option<(QueueId, &'a [u64])>,
}

impl<S, C: Conduit> Rma<S, C> {
    /// [`Rma::put`], then the completion events of `done`: the count and the frame at
    /// the target, in that order, then the frame in this rank's own queue (posted by
    /// the next poll that runs nothing, or wait, if that queue is full).
    ///
    /// ```
    /// use amrq::{prelude::*, conduit::ReceivedFrame, rma::{Completion, Rma, RmaError}};
    /// let mut cfg = Config::default();
    /// let arrived = cfg.add_queue(16);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let buf = rma.alloc_symmetric(64, 64)?;
    ///     if am.rank() == 0 {
    ///         let done = Completion { notify: Some((arrived, &[buf as u64])), ..Default::default() };
    ///         rma.put_with(1, buf, b"hello", done)?;
    ///     } else {
    ///         let set = am.rq().poll_set(&[arrived])?;
    ///         let (_, f) = am.rq().wait(&set, None)?; // the data is in place once this arrives
    ///         let mut got = [0u8; 5];
    ///         rma.get(1, f.args()[0] as usize, &mut got)?;
    ///         assert_eq!(&got, b"hello");
    ///         f.release();
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn put_with(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
        done: Completion<'_>,
    ) -> Result<(), RmaError> {
        if let Some((q, _)) = done.local {
            user_queue(q)?;
        }
        if let Some(op) = self.put_start(rank, offset, data, done.counter)? {
            self.collect(op, &mut [])?; // the data (and the count) in place before the frame
        }
        if let Some((q, args)) = done.notify {
            self.notify(rank, q, args)?;
        }
        if let Some((q, args)) = done.local {
            self.am.post_events(vec![event(self.am.rank(), q, args)]);
        }
        Ok(())
    }

    /// A put no one waits for (the paper's `am_store_async`): the data has been taken
    /// when it returns (`data` may be reused), and `done`'s events come once it is in
    /// place at `rank`: the count goes up, then the frames are posted, the target's and
    /// this rank's own ([`Completion::local`], the sender-side event), in the order
    /// the puts were made. Through mapped memory the put is complete when it returns
    /// and its frames are posted at once; through frames they are posted when the
    /// target's acknowledgement is run, by one of this rank's polls or waits; a put the
    /// conduit leaves in flight (across hosts) has them posted by the first poll that
    /// runs nothing, or wait, once it is complete. With a `counter`, the put is
    /// completed before the count goes up, by this call where the conduit would leave
    /// it in flight. A frame whose queue is full is posted by a later poll; a put the
    /// target refuses is an error of the next poll or wait. Wait for a `local` frame
    /// with Am's polls (`read_queue` in a loop with [`Am::poll`](crate::am::Am::poll)):
    /// RQ's own `wait` runs no acknowledgement and posts nothing.
    ///
    /// ```
    /// use amrq::{conduit::ReceivedFrame, prelude::*, rma::{Completion, Rma, RmaError}};
    /// let mut cfg = Config::default();
    /// cfg.rma_frames.set(true); // through frames, the put completes after it returns
    /// let (sent, arrived) = (cfg.add_queue(16), cfg.add_queue(16));
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let buf = rma.alloc_symmetric(64, 64)?;
    ///     if am.rank() == 0 {
    ///         let done = Completion {
    ///             notify: Some((arrived, &[buf as u64])), // at rank 1
    ///             local: Some((sent, &[1])),              // here
    ///             ..Default::default()
    ///         };
    ///         rma.put_async(1, buf, b"hello", done)?; // returns at once
    ///         let f = loop {
    ///             match am.rq().read_queue(sent)? {
    ///                 Some(f) => break f,
    ///                 None => am.poll()?, // runs rank 1's acknowledgement
    ///             };
    ///         };
    ///         assert_eq!(f.args(), [1]); // the data is in place at rank 1
    ///         f.release();
    ///     } else {
    ///         let f = loop {
    ///             match am.rq().read_queue(arrived)? {
    ///                 Some(f) => break f,
    ///                 None => am.poll()?, // serves rank 0's put
    ///             };
    ///         };
    ///         let mut got = [0u8; 5];
    ///         rma.get(1, f.args()[0] as usize, &mut got)?;
    ///         assert_eq!(&got, b"hello");
    ///         f.release();
    ///     }
    ///     am.barrier()?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn put_async(
        &self,
        rank: Rank,
        offset: usize,
        data: &[u8],
        done: Completion<'_>,
    ) -> Result<(), RmaError> {
        for (q, _) in done.notify.iter().chain(&done.local) {
            user_queue(*q)?;
        }
        if let Some(c) = done.counter {
            self.word(rank, c)?;
        }
        let events: Vec<Event> = done
            .notify
            .map(|(q, args)| event(rank, q, args))
            .into_iter()
            .chain(done.local.map(|(q, args)| event(self.am.rank(), q, args)))
            .collect();
        if !self.direct.get() {
            self.target(rank, offset, data.len())?;
            frames::put_posting(&self.am, (rank, offset), data, done.counter, events)?;
            return Ok(());
        }
        // The put, then the count (an increment after the put is complete, so that
        // whoever reads the count with Acquire sees the bytes): as `put` does.
        match self.put_start(rank, offset, data, done.counter)? {
            None => self.am.post_events(events),
            Some(Pending::Conduit(t)) => self.am.post_on_completion(t, events),
            Some(p) => {
                p.wait(&self.am, &mut [])?;
                self.am.post_events(events);
            }
        }
        Ok(())
    }

    /// Enqueues a completion frame, waiting for room (running handlers meanwhile).
    fn notify(&self, rank: Rank, q: QueueId, args: &[u64]) -> Result<(), RmaError> {
        while !self.am.rq().enqueue(rank, q, args, &[])? {
            self.am.poll_runtime()?;
        }
        Ok(())
    }

    /// [`Rma::get`], then a frame with `args` into this rank's queue `q`: the data is in
    /// `buf` when the frame can be taken (RQ §2.4: a get's completion in a local queue).
    ///
    /// ```
    /// use amrq::{conduit::ReceivedFrame, config::QueueSpec, prelude::*, rma::{Rma, RmaError}};
    /// let mut cfg = Config::default();
    /// let done = cfg.add(QueueSpec::new("gets done", 16));
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let am = setup.start(HandlerTable::<()>::new(), ())?;
    ///     let rma = am.rma();
    ///     let at = rma.alloc_symmetric(8, 8)?;
    ///     rma.store(am.rank(), at, 40 + am.rank() as u64)?;
    ///     am.barrier()?;
    ///     let mut word = [0u8; 8];
    ///     rma.get_with(1 - am.rank(), at, &mut word, done, &[7])?;
    ///     let f = am.rq().read_queue(done)?.expect("the get's completion");
    ///     assert_eq!((f.args()[0], u64::from_ne_bytes(word)), (7, 41 - am.rank() as u64));
    ///     f.release();
    ///     am.barrier()?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_with(
        &self,
        rank: Rank,
        offset: usize,
        buf: &mut [u8],
        q: QueueId,
        args: &[u64],
    ) -> Result<(), RmaError> {
        self.get(rank, offset, buf)?;
        self.notify(self.am.rank(), q, args)
    }
}

/// A frame with `args` for queue `q` of rank `dest`.
fn event(dest: Rank, q: QueueId, args: &[u64]) -> Event {
    Event {
        dest,
        queue: q,
        args: args.to_vec(),
    }
}
