//! A conduit whose one-sided operations stay in flight: it wraps another and performs
//! each put, get and atomic only when asked about it a second time (`op_test`) or at
//! `flush`, as a network conduit completes them later. The suite runs on it so that
//! the paths for operations in flight are exercised on one host; it also shows how a
//! conduit is made of another by delegation (no `dyn`).

use super::cases::{spec, Job};
use super::run::{on_threads, Case};
use amrq::conduit::mem::MemConduit;
use amrq::conduit::{
    threads, AtomicOp, Caps, Channel, Conduit, ConduitError, Message, OpToken, PollSet, Rank,
    Started,
};
use std::cell::RefCell;

/// An operation not yet performed, or its result.
enum Op {
    Put {
        dest: Rank,
        offset: usize,
        data: Vec<u8>,
    },
    /// A put of bytes the caller keeps until it is complete: read only then.
    PutFrom {
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    },
    Get {
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    },
    Atomic {
        dest: Rank,
        offset: usize,
        op: AtomicOp,
    },
    /// Asked about once: performed at the next ask.
    Asked(Box<Op>),
    Done(u64),
}

/// `C` with its one-sided operations deferred.
pub struct Deferred<C> {
    inner: C,
    ops: RefCell<Vec<Option<Op>>>,
}

impl<C: Conduit> Deferred<C> {
    pub fn new(inner: C) -> Self {
        Self {
            inner,
            ops: RefCell::new(Vec::new()),
        }
    }

    fn start(&self, op: Op) -> Started {
        let mut ops = self.ops.borrow_mut();
        ops.push(Some(op));
        Started::InFlight(OpToken(ops.len() as u64 - 1))
    }

    /// Performs `op` on the inner conduit (where it completes at once).
    fn perform(&self, op: Op) -> Result<u64, ConduitError> {
        let done = match op {
            Op::Put { dest, offset, data } => self.inner.put_nb(dest, offset, &data)?,
            Op::PutFrom {
                dest,
                offset,
                data,
                len,
            } => {
                // SAFETY: the caller of `put_nb_borrowed` keeps `data` until the
                // operation is over, which is now.
                let data = unsafe { std::slice::from_raw_parts(data, len) };
                self.inner.put_nb(dest, offset, data)?
            }
            Op::Get {
                src,
                offset,
                buf,
                len,
            } => {
                // SAFETY: the caller of `get_nb` keeps `buf` valid until the operation
                // is over, which is now.
                unsafe { self.inner.get_nb(src, offset, buf, len)? }
            }
            Op::Atomic { dest, offset, op } => self.inner.atomic_nb(dest, offset, op)?,
            Op::Asked(op) => return self.perform(*op),
            Op::Done(v) => return Ok(v),
        };
        match done {
            Started::Done(v) => Ok(v),
            Started::InFlight(_) => unreachable!("the inner conduit completes at once"),
        }
    }
}

impl<C: Conduit + 'static> Conduit for Deferred<C> {
    type Frame<'a>
        = C::Frame<'a>
    where
        C: 'a;
    type Interrupts = C::Interrupts;

    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn caps(&self) -> &Caps {
        self.inner.caps()
    }
    fn take_interrupts(&mut self) -> Option<C::Interrupts> {
        self.inner.take_interrupts()
    }
    fn try_send(&self, dest: Rank, ch: Channel, msg: &Message<'_>) -> Result<(), ConduitError> {
        self.inner.try_send(dest, ch, msg)
    }
    fn try_send_long(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        offset: usize,
    ) -> Result<(), ConduitError> {
        self.inner.try_send_long(dest, ch, msg, offset)
    }
    fn try_send_tag_on(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<(), ConduitError> {
        self.inner.try_send_tag_on(dest, ch, msg)
    }
    fn segment(&self) -> (std::ptr::NonNull<u8>, usize) {
        self.inner.segment()
    }
    fn peek(&self, ch: Channel) -> Result<Option<Self::Frame<'_>>, ConduitError> {
        self.inner.peek(ch)
    }
    fn drain<E, F>(&self, ch: Channel, budget: usize, f: F) -> Result<usize, E>
    where
        E: From<ConduitError>,
        F: FnMut(&Self::Frame<'_>) -> Result<(), E>,
    {
        self.inner.drain(ch, budget, f)
    }
    fn wait_for_arrival(
        &self,
        set: &PollSet,
        timeout: std::time::Duration,
    ) -> Result<(), ConduitError> {
        self.inner.wait_for_arrival(set, timeout)
    }

    fn put_nb(&self, dest: Rank, offset: usize, data: &[u8]) -> Result<Started, ConduitError> {
        // A get of the same range into scratch checks it with the inner conduit's
        // errors, and writes nothing at the target.
        let mut scratch = vec![0u8; data.len()];
        // SAFETY: `scratch` outlives the call; the inner conduit completes at once.
        let _ = unsafe {
            self.inner
                .get_nb(dest, offset, scratch.as_mut_ptr(), data.len())?
        };
        Ok(self.start(Op::Put {
            dest,
            offset,
            data: data.to_vec(),
        }))
    }

    unsafe fn put_nb_borrowed(
        &self,
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        let mut scratch = vec![0u8; len];
        // SAFETY: `scratch` outlives the call; the inner conduit completes at once
        // (a get of the range checks it and writes nothing at the target).
        let _ = unsafe { self.inner.get_nb(dest, offset, scratch.as_mut_ptr(), len)? };
        Ok(self.start(Op::PutFrom {
            dest,
            offset,
            data,
            len,
        }))
    }

    unsafe fn get_nb(
        &self,
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        let mut scratch = vec![0u8; len];
        // SAFETY: `scratch` outlives the call; the inner conduit completes at once.
        let _ = unsafe { self.inner.get_nb(src, offset, scratch.as_mut_ptr(), len)? };
        Ok(self.start(Op::Get {
            src,
            offset,
            buf,
            len,
        }))
    }

    fn atomic_nb(&self, dest: Rank, offset: usize, op: AtomicOp) -> Result<Started, ConduitError> {
        let _ = self.inner.atomic_nb(dest, offset, AtomicOp::Load)?; // checks, changes nothing
        Ok(self.start(Op::Atomic { dest, offset, op }))
    }

    fn op_test(&self, op: OpToken) -> Result<Option<u64>, ConduitError> {
        let i = op.0 as usize;
        let taken = self.ops.borrow_mut().get_mut(i).and_then(Option::take);
        match taken {
            None => Err(ConduitError::Setup(format!("op_test of a spent token {i}"))),
            Some(Op::Done(v)) => Ok(Some(v)),
            Some(Op::Asked(op)) => self.perform(*op).map(Some),
            Some(first) => {
                self.ops.borrow_mut()[i] = Some(Op::Asked(Box::new(first)));
                Ok(None)
            }
        }
    }

    fn flush(&self) -> Result<(), ConduitError> {
        let n = self.ops.borrow().len();
        for i in 0..n {
            let taken = self.ops.borrow_mut()[i].take();
            if let Some(op) = taken {
                let v = self.perform(op)?;
                self.ops.borrow_mut()[i] = Some(Op::Done(v));
            }
        }
        Ok(())
    }

    fn poll_set(&self, channels: &[Channel]) -> Result<PollSet, ConduitError> {
        self.inner.poll_set(channels)
    }
    fn one_poll(&self, set: &PollSet) -> Result<Option<(Channel, Self::Frame<'_>)>, ConduitError> {
        self.inner.one_poll(set)
    }
    fn dropped(&self, ch: Channel) -> u64 {
        self.inner.dropped(ch)
    }
    fn faults(&self) -> amrq::conduit::Faults {
        self.inner.faults()
    }
    fn record_fault(&self, fault: amrq::conduit::Fault) {
        self.inner.record_fault(fault)
    }
    fn allgather(&self, mine: u64) -> Result<Vec<u64>, ConduitError> {
        self.inner.allgather(mine)
    }
    fn barrier(&self) -> Result<(), ConduitError> {
        self.inner.barrier()
    }
    fn check_peers(&self) -> Result<(), ConduitError> {
        self.inner.check_peers()
    }
    fn peer_left(&self, rank: Rank) -> bool {
        self.inner.peer_left(rank)
    }
}

// SAFETY: the raw buffer pointers of gets in flight belong to callers on the thread
// that owns the endpoint (a conduit is used by one thread); moving the endpoint to
// another thread before it starts carries none.
unsafe impl<C: Conduit + Send> Send for Deferred<C> {}

/// Runs `case` on `ranks` thread ranks whose conduit defers its one-sided operations.
pub fn threads(_test: &str, ranks: usize, case: Case<Deferred<MemConduit>>) {
    let eps = threads::endpoints_for(ranks, &spec()).expect("endpoints");
    let eps: Vec<_> = eps.into_iter().map(Deferred::new).collect();
    let job = Job { die };
    on_threads(
        eps,
        |d| vec![(d.inner.boot().clone(), d.rank())],
        &job,
        case,
    );
}

fn die(d: Deferred<MemConduit>) {
    d.inner
        .boot()
        .mark_failed(d.inner.rank(), "died on purpose".into());
    std::mem::forget(d);
}
