//! One-sided operations and enqueues of a front's threads: in a job across hosts only
//! this host's segments are mapped and the network is the rank's thread's, so a
//! thread's put, get, atomic or enqueue travels through the rank's outbox as an *op
//! frame* (its hidden word names the destination and [`OP_CHANNEL`]) and the rank's thread starts it on the cluster
//! when it sends the outbox on, then completes it when the cluster says it is done.
//!
//! The thread waits on the operation's own record, a [`ThreadOp`] shared by both
//! (`Arc`): its state word (a futex), the value, a get's bytes, or the failure. The op
//! frame carries the record's address; the rank's thread owns that reference from the
//! frame on, so a thread that stops waiting leaves nothing dangling, and a get lands
//! in the record's own bytes, never in the thread's buffer.

use crate::conduit::cluster::ClusterConduit;
use crate::conduit::{AtomicOp, Channel, Conduit, ConduitError, OpToken, Rank, Started};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The channel an op frame's hidden word names: no channel has it.
pub(super) const OP_CHANNEL: Channel = 0xffff_ffff;

/// What an op frame asks for (its first arg; an atomic adds its kind).
const PUT: u64 = 0;
const GET: u64 = 1;
const ENQUEUE: u64 = 2;
const ATOMIC: u64 = 3;

const PENDING: u32 = 0;
const DONE: u32 = 1;
const FAILED: u32 = 2;

/// One one-sided operation of a thread, from its op frame to its completion.
pub(crate) struct ThreadOp {
    /// `PENDING`, then `DONE` or `FAILED` (a futex word).
    state: AtomicU32,
    /// An atomic's value before.
    value: AtomicU64,
    /// Why it failed.
    failure: Mutex<Option<ConduitError>>,
    /// A get's bytes, written by the cluster while in flight.
    bytes: UnsafeCell<Box<[u8]>>,
}

// SAFETY: `bytes` is written only by the cluster's get while the operation is in
// flight (started and completed by the rank's thread) and read only through `bytes`,
// which hands them out only once `state` is `DONE` (Release by the finisher, Acquire
// there); everything else is atomic or locked.
unsafe impl Sync for ThreadOp {}

impl ThreadOp {
    fn new(get_len: usize) -> Arc<Self> {
        Arc::new(Self {
            state: AtomicU32::new(PENDING),
            value: AtomicU64::new(0),
            failure: Mutex::new(None),
            bytes: UnsafeCell::new(vec![0; get_len].into_boxed_slice()),
        })
    }

    /// True once it completed or failed.
    pub(crate) fn is_done(&self) -> bool {
        // ORDERING: Acquire pairs with the Release store of `finish`: the value, the
        // bytes and the failure are visible after.
        self.state.load(Ordering::Acquire) != PENDING
    }

    /// Sleeps until it is done or `nap` passes.
    pub(crate) fn sleep(&self, nap: std::time::Duration) {
        crate::util::futex::wait(&self.state, PENDING, nap);
    }

    /// Its outcome once [`ThreadOp::is_done`]: an atomic's value before (0 for put and
    /// get), or why it failed.
    pub(crate) fn outcome(&self) -> Result<u64, ConduitError> {
        // ORDERING: Acquire pairs with the Release store of `finish`.
        match self.state.load(Ordering::Acquire) {
            DONE => Ok(self.value.load(Ordering::Relaxed)),
            FAILED => Err(self.failure.lock().ok().and_then(|f| f.clone()).unwrap_or(
                ConduitError::Unsupported {
                    what: "a thread's one-sided operation whose failure was lost",
                },
            )),
            _ => Err(ConduitError::Busy),
        }
    }

    /// A get's bytes once it is done; `None` before.
    pub(crate) fn bytes(&self) -> Option<&[u8]> {
        // ORDERING: Acquire pairs with the Release store of `finish`: the cluster's
        // writes of the bytes come before.
        if self.state.load(Ordering::Acquire) != DONE {
            return None;
        }
        // SAFETY: the get completed (`DONE`, Acquire above): nothing writes them any more.
        Some(unsafe { &*self.bytes.get() })
    }

    fn finish(&self, outcome: Result<u64, ConduitError>) {
        let state = match outcome {
            Ok(v) => {
                self.value.store(v, Ordering::Relaxed);
                DONE
            }
            Err(e) => {
                if let Ok(mut f) = self.failure.lock() {
                    *f = Some(e);
                }
                FAILED
            }
        };
        // ORDERING: Release pairs with the Acquire loads of `is_done` and `outcome`.
        self.state.store(state, Ordering::Release);
        crate::util::futex::wake_all(&self.state);
    }
}

/// A thread's operation as an op frame's args (its record's reference moves into the
/// frame: [`start`] takes it back); an enqueue's frame is the op frame's payload
/// ([`frame_bytes`]).
pub(super) fn op_args(what: &ThreadOpKind<'_>, offset: usize) -> (Arc<ThreadOp>, [u64; 6]) {
    let (kind, len, a, b) = match *what {
        ThreadOpKind::Put(data) => (PUT, data.len(), 0, 0),
        ThreadOpKind::Get(len) => (GET, len, 0, 0),
        ThreadOpKind::Enqueue { ch, tag, args, .. } => {
            (ENQUEUE, args.len(), ch as u64, u64::from(tag))
        }
        ThreadOpKind::Atomic(op) => {
            let (k, a, b) = op.to_words();
            (ATOMIC + k, 8, a, b)
        }
    };
    let get_len = if kind == GET { len } else { 0 };
    let op = ThreadOp::new(get_len);
    let ptr = Arc::into_raw(op.clone()) as u64;
    (op, [kind, offset as u64, len as u64, ptr, a, b])
}

/// Takes back the reference an op frame's args hold, for a frame that was not written,
/// or that will never be read.
pub(super) fn unsend(args: &[u64]) {
    // SAFETY: made by `Arc::into_raw` in `op_args` for a frame that was not written, or
    // is dropped unread: this is that reference, taken back once.
    drop(unsafe { Arc::from_raw(args[3] as *const ThreadOp) });
}

/// A thread's one-sided operation, or enqueue.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ThreadOpKind<'a> {
    /// Copies the bytes to the destination's segment.
    Put(&'a [u8]),
    /// Reads this many bytes of the destination's segment.
    Get(usize),
    /// Applies the atomic to the destination's word.
    Atomic(AtomicOp),
    /// Enqueues a frame into channel `ch` of the destination, if it has room now: its
    /// outcome is 1 if it went, 0 if the queue was full.
    Enqueue {
        /// The queue's channel.
        ch: Channel,
        /// The frame's tag.
        tag: u16,
        /// Its args.
        args: &'a [u64],
        /// Its payload.
        payload: &'a [u8],
    },
}

/// The payload of the op frame of `what`: a put's bytes, an enqueue's args then payload.
pub(super) fn frame_bytes(what: &ThreadOpKind<'_>) -> Option<Vec<u8>> {
    match *what {
        ThreadOpKind::Enqueue { args, payload, .. } => {
            let mut bytes: Vec<u8> = args.iter().flat_map(|w| w.to_ne_bytes()).collect();
            bytes.extend_from_slice(payload);
            Some(bytes)
        }
        _ => None,
    }
}

/// Starts the operation of an op frame to `dest` with `args` and `payload` on
/// `cluster`: finished at once if the cluster completes it, or returned with its token
/// if it stays in flight.
pub(super) fn start(
    cluster: &ClusterConduit,
    dest: Rank,
    args: &[u64],
    payload: &[u8],
) -> Option<(OpToken, Arc<ThreadOp>)> {
    let &[kind, offset, len, ptr, a, b] = args else {
        return None; // not written by `op_args`: this process's own frames, never
    };
    // SAFETY: made by `Arc::into_raw` in `op_args` for this frame, which is read once:
    // the reference moves here.
    let op = unsafe { Arc::from_raw(ptr as *const ThreadOp) };
    let (offset, len) = (offset as usize, len as usize);
    let started = match kind {
        PUT => cluster.put_nb(dest, offset, payload),
        ENQUEUE => enqueue(cluster, dest, (a as Channel, b as u16, len), payload),
        // SAFETY: the record's bytes have `len` bytes and live as long as the record,
        // which the in-flight list holds until the get completes.
        GET => unsafe { cluster.get_nb(dest, offset, (*op.bytes.get()).as_mut_ptr(), len) },
        k => match AtomicOp::from_words(k - ATOMIC, a, b) {
            Some(atomic) => cluster.atomic_nb(dest, offset, atomic),
            None => Err(ConduitError::Unsupported {
                what: "an unknown one-sided operation",
            }),
        },
    };
    match started {
        Ok(Started::InFlight(t)) => Some((t, op)),
        Ok(Started::Done(v)) => {
            op.finish(Ok(v));
            None
        }
        Err(e) => {
            op.finish(Err(e));
            None
        }
    }
}

/// Enqueues the frame an enqueue's op frame carries (`nargs` args, then the payload)
/// into channel `ch` of `dest`, once: done with 1 if it went, 0 if the queue was full.
fn enqueue(
    cluster: &ClusterConduit,
    dest: Rank,
    (ch, tag, nargs): (Channel, u16, usize),
    bytes: &[u8],
) -> Result<Started, ConduitError> {
    let mut args = [0u64; crate::conduit::ring::MAX_ARGS];
    let Some(arg_bytes) = bytes.get(..nargs * 8).filter(|_| nargs <= args.len()) else {
        // The queue's checks ran before the op frame was written: never.
        return Err(ConduitError::TooManyArgs {
            nargs,
            max: args.len(),
        });
    };
    for (a, c) in args.iter_mut().zip(arg_bytes.chunks_exact(8)) {
        *a = u64::from_ne_bytes(c.try_into().unwrap_or_default());
    }
    let msg = crate::conduit::Message {
        tag,
        flags: 0,
        args: &args[..nargs],
        payload: &bytes[nargs * 8..],
    };
    match cluster.try_send(dest, ch, &msg) {
        Ok(()) => Ok(Started::Done(1)),
        Err(ConduitError::Busy) => Ok(Started::Done(0)),
        Err(e) => Err(e),
    }
}

/// Completes the operations of `in_flight` that the cluster has done.
pub(super) fn complete(cluster: &ClusterConduit, in_flight: &mut Vec<(OpToken, Arc<ThreadOp>)>) {
    in_flight.retain(|(t, op)| match cluster.op_test(*t) {
        Ok(None) => true,
        done => {
            op.finish(done.map(|v| v.unwrap_or(0)));
            false
        }
    });
}
