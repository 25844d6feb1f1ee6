//! Taking frames from this rank's own queues: in place (`read_queue`, and the inlined
//! loop `poll_queue`), unread (`delete_queue`), or copied out, the whole frame
//! (`dequeue`) or the paper's prefix (`dequeue_prefix`, `read_queue_prefix`).

use super::{Dequeued, QueueId, Rq, RqError};
use crate::conduit::{Conduit, ConduitError, ReceivedFrame};

impl<C: Conduit> Rq<C> {
    /// The frame at the head of local queue `q`, left in place (the payload is borrowed
    /// from the queue, no copy). Drop it to leave it queued; `release()` it to remove it.
    ///
    /// ```
    /// use amrq::{conduit::ReceivedFrame, rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     rq.enqueue(0, q, &[5], b"in place")?;
    ///     let f = rq.read_queue(q)?.expect("a frame");
    ///     assert_eq!(f.payload(), b"in place"); // borrowed from the queue's memory
    ///     drop(f); // left queued
    ///     let f = rq.read_queue(q)?.expect("the same frame");
    ///     assert_eq!(f.args(), [5]);
    ///     f.release(); // removed
    ///     assert!(rq.read_queue(q)?.is_none());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    #[inline]
    pub fn read_queue(&self, q: QueueId) -> Result<Option<C::Frame<'_>>, RqError> {
        Ok(self.conduit.peek(q.index())?)
    }

    /// Inlined polling (RQ §3.2.3): runs `f` on up to `budget` frames of local queue `q`,
    /// each read in place, and removes each after `f` returns. No handler dispatch, no
    /// copy. Returns how many frames `f` saw; an error from `f` is returned after its
    /// frame was removed.
    ///
    /// ```
    /// use amrq::{Config, conduit::ReceivedFrame, rq::{Rq, RqError}};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     for i in 0..3 { rq.enqueue(0, q, &[i], &[])?; }
    ///     let mut sum = 0;
    ///     let n = rq.poll_queue(q, 10, |f| -> Result<(), RqError> { sum += f.args()[0]; Ok(()) })?;
    ///     assert_eq!((n, sum), (3, 3));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline(always)]
    pub fn poll_queue<E, F>(&self, q: QueueId, budget: usize, f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&C::Frame<'_>) -> Result<(), E>,
    {
        if self.conduit.quiet(q.index()) {
            return Ok(0);
        }
        self.conduit.drain(q.index(), budget, f)
    }

    /// Removes the frame at the head of local queue `q`; `Ok(false)` if it was empty.
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     rq.enqueue(0, q, &[1], &[])?;
    ///     assert!(rq.delete_queue(q)?); // removed unread
    ///     assert!(!rq.delete_queue(q)?); // nothing left
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn delete_queue(&self, q: QueueId) -> Result<bool, RqError> {
        match self.conduit.peek(q.index())? {
            Some(f) => {
                f.release();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Copies the whole frame at the head of local queue `q` into `args` and `buf` and
    /// removes it. `Ok(None)` if the queue is empty; [`RqError::BufferTooSmall`] (frame
    /// left in place) if `args` or `buf` is shorter than the frame's. (The paper's
    /// dequeue, which takes a prefix of the frame, is [`Rq::dequeue_prefix`].)
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     rq.enqueue(0, q, &[1, 2], &[9; 40])?;
    ///     let (mut args, mut small) = ([0u64; 8], [0u8; 8]);
    ///     let e = rq.dequeue(q, &mut args, &mut small).unwrap_err();
    ///     assert!(matches!(e, RqError::BufferTooSmall { len: 40, .. })); // left in place
    ///     let mut buf = [0u8; 64];
    ///     let d = rq.dequeue(q, &mut args, &mut buf)?.expect("the frame");
    ///     assert_eq!((d.nargs, d.len, args[1], buf[39]), (2, 40, 2, 9));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn dequeue(
        &self,
        q: QueueId,
        args: &mut [u64],
        buf: &mut [u8],
    ) -> Result<Option<Dequeued>, RqError> {
        match self.conduit.peek(q.index())? {
            Some(f) => Dequeued::take(f, args, buf).map(Some),
            None => Ok(None),
        }
    }

    /// The paper's `dequeue(q, arg0…argn, rbuf, nbytes)`: if the frame at the head of
    /// local queue `q` holds at least `args.len()` args and `buf.len()` payload bytes,
    /// copies that many of each into `args` and `buf` and removes the frame (the rest
    /// of it goes with it); otherwise `Ok(None)`, nothing copied or removed (as for an
    /// empty queue). So a program can take a message part by part, as its head says:
    /// [`Rq::read_queue_prefix`] a first arg, then dequeue as much as that arg names.
    /// (A loop that retries until `Some` spins forever on a head shorter than it asks
    /// for: read the head's size first, or take it with [`Rq::dequeue`].)
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     rq.enqueue(0, q, &[1, 2, 3], b"abcdef")?;
    ///     let (mut two, mut big) = ([0u64; 2], [0u8; 7]);
    ///     assert!(rq.dequeue_prefix(q, &mut two, &mut big)?.is_none()); // 6 bytes < 7: left
    ///     let mut four = [0u8; 4];
    ///     let d = rq.dequeue_prefix(q, &mut two, &mut four)?.expect("6 bytes ≥ 4");
    ///     assert_eq!((d.nargs, d.len, two, &four), (2, 4, [1, 2], b"abcd"));
    ///     assert!(rq.read_queue(q)?.is_none()); // removed whole
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn dequeue_prefix(
        &self,
        q: QueueId,
        args: &mut [u64],
        buf: &mut [u8],
    ) -> Result<Option<Dequeued>, RqError> {
        let Some(f) = self.conduit.peek(q.index())? else {
            return Ok(None);
        };
        let d = Dequeued::copy_prefix(&f, args, buf);
        if d.is_some() {
            f.release();
        }
        Ok(d)
    }

    /// The paper's `read_queue(q, arg0…argn, rbuf, nbytes)`: [`Rq::dequeue_prefix`]'s
    /// copy, but the frame stays at the head of the queue.
    ///
    /// ```
    /// use amrq::{rq::{Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add_queue(16);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     rq.enqueue(0, q, &[7, 40, 2], &[])?; // a kind, then what that kind carries
    ///     let mut kind = [0u64; 1];
    ///     rq.read_queue_prefix(q, &mut kind, &mut [])?.expect("a frame");
    ///     let mut three = [0u64; 3];
    ///     let wanted = if kind[0] == 7 { &mut three[..] } else { &mut three[..1] };
    ///     rq.dequeue_prefix(q, wanted, &mut [])?.expect("still there");
    ///     assert_eq!(three, [7, 40, 2]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn read_queue_prefix(
        &self,
        q: QueueId,
        args: &mut [u64],
        buf: &mut [u8],
    ) -> Result<Option<Dequeued>, RqError> {
        match self.conduit.peek(q.index())? {
            Some(f) => Ok(Dequeued::copy_prefix(&f, args, buf)),
            None => Ok(None),
        }
    }
}
