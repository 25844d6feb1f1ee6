//! What a dequeue copied out of a frame.

use super::RqError;
use crate::conduit::{Rank, ReceivedFrame};

/// What a dequeue copied out: the whole frame ([`Rq::dequeue`](super::Rq::dequeue)) or
/// the prefix asked for ([`Rq::dequeue_prefix`](super::Rq::dequeue_prefix)).
///
/// ```
/// use amrq::{rq::{Rq, RqError}, Config};
/// let mut cfg = Config::default();
/// let q = cfg.add_queue(16);
/// cfg.threads(2, |setup| -> amrq::Result<()> {
///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
///     let rq = job.rq();
///     if rq.rank() == 1 {
///         rq.enqueue(0, q, &[3], b"abc")?;
///     } else {
///         let (mut args, mut buf) = ([0; 8], [0; 8]);
///         let d = loop {
///             if let Some(d) = rq.dequeue(q, &mut args, &mut buf)? { break d; }
///         };
///         assert_eq!((d.source, d.tag, d.nargs, d.len), (1, 0, 1, 3));
///     }
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dequeued {
    /// The sender.
    pub source: Rank,
    /// The frame's tag.
    pub tag: u16,
    /// Args copied.
    pub nargs: usize,
    /// Payload bytes copied.
    pub len: usize,
}

impl Dequeued {
    /// Copies frame `f` into `args` and `buf` and removes it from its queue: what
    /// [`Rq::dequeue`](super::Rq::dequeue) does with the head of a queue, for a frame
    /// found otherwise ([`Rq::one_poll`](super::Rq::one_poll)).
    /// [`RqError::BufferTooSmall`] (the frame left in place) if `args` or `buf` is
    /// shorter than the frame's.
    ///
    /// ```
    /// use amrq::{config::QueueSpec, rq::{Dequeued, Rq, RqError}, Config};
    /// let mut cfg = Config::default();
    /// let q = cfg.add(QueueSpec::new("q", 16).one_poll());
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let job = setup.start(amrq::am::HandlerTable::<()>::new(), ())?;
    ///     let rq = job.rq();
    ///     let set = rq.poll_set(&[q])?;
    ///     rq.enqueue(0, q, &[7], b"hi")?;
    ///     let (_, f) = rq.one_poll(&set)?.expect("a frame");
    ///     let (mut args, mut buf) = ([0; 8], [0; 8]);
    ///     let d = Dequeued::take(f, &mut args, &mut buf)?;
    ///     assert_eq!((d.nargs, d.len, args[0], &buf[..2]), (1, 2, 7, &b"hi"[..]));
    ///     assert!(rq.one_poll(&set)?.is_none()); // removed
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn take<'a>(
        f: impl ReceivedFrame<'a>,
        args: &mut [u64],
        buf: &mut [u8],
    ) -> Result<Self, RqError> {
        let (a, p) = (f.args(), f.payload());
        if a.len() > args.len() || p.len() > buf.len() {
            return Err(RqError::BufferTooSmall {
                nargs: a.len(),
                len: p.len(),
            });
        }
        args[..a.len()].copy_from_slice(a);
        p.copy_to(buf);
        let d = Dequeued {
            source: f.source(),
            tag: f.tag(),
            nargs: a.len(),
            len: p.len(),
        };
        f.release();
        Ok(d)
    }

    /// The paper's rule (RQ §2.1): copies the first `args.len()` args and `buf.len()`
    /// payload bytes of frame `f` into `args` and `buf` if it holds at least that many;
    /// `None` (nothing copied) if it holds fewer. What it copied is in the answer; the
    /// frame is left as it is, for the caller to release or keep.
    pub(super) fn copy_prefix<'a>(
        f: &impl ReceivedFrame<'a>,
        args: &mut [u64],
        buf: &mut [u8],
    ) -> Option<Self> {
        let (a, p) = (f.args(), f.payload());
        if a.len() < args.len() || p.len() < buf.len() {
            return None;
        }
        args.copy_from_slice(&a[..args.len()]);
        p.copy_to(buf);
        Some(Dequeued {
            source: f.source(),
            tag: f.tag(),
            nargs: args.len(),
            len: buf.len(),
        })
    }
}
