//! Put, get and atomics through UCX (`ucp_put_nbx`, `ucp_get_nbx`,
//! `ucp_atomic_op_nbx`) on the peers' registered segments, with the keys exchanged at
//! start-up; to this rank itself, the ring conduit's copies and processor atomics.
//!
//! Completion: a get or an atomic is complete when its request is; a put is complete
//! (in place at its target) only after a flush of the worker that began after it: each
//! put is stamped with the number of flushes begun, and `op_test` begins one when none
//! covers it. Over tcp, gets and atomics travel as messages that the target's worker
//! answers when it makes progress: any amrq call at the target does (or its progress
//! thread), and a get from a target that computes without calling amrq waits for it.

use super::conduit::UcxConduit;
use super::sys::{self, StatusPtr};
use crate::conduit::{AtomicOp, Conduit, ConduitError, OpToken, Rank, Started};
use std::collections::VecDeque;
use std::ffi::c_void;

/// Copies of puts' data kept for later puts, at most, each of at most
/// [`SPARE_BYTES`] (so that the spares hold at most [`COPY_LIMIT`]).
const SPARE_COPIES: usize = 64;
const SPARE_BYTES: usize = COPY_LIMIT / SPARE_COPIES;

/// How long a put waits for the network to take the oldest copy before it fails.
const COPY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Bytes of puts' data held in copies UCX has not sent yet, at most: past it a put
/// waits for the network to take the oldest (as a full socket makes a send wait), so
/// that a burst of puts neither grows memory without bound nor touches fresh pages for
/// each copy (a stream of 64 KiB puts ran at ~0.6× its speed when every copy was new).
const COPY_LIMIT: usize = 4 << 20;

/// An operation in flight.
enum Op {
    /// A put: its request (null once locally done), the copy of its bytes UCX reads
    /// (none for a borrowed put, or once sent), the flush that completes it, and how
    /// its request failed if that was seen before `op_test` asked.
    Put {
        req: *mut c_void,
        data: Vec<u8>,
        flush: u64,
        failed: Option<sys::ucs_status_t>,
    },
    /// A get or an atomic: its request, and an atomic's operand and result words.
    Request {
        req: *mut c_void,
        words: Box<[u64; 2]>,
    },
}

/// The operations in flight of an endpoint, and its worker flushes.
#[derive(Default)]
pub struct Ops {
    slots: Vec<Option<Op>>,
    free: Vec<usize>,
    /// Flushes begun, and completed.
    begun: u64,
    done: u64,
    /// The flush in flight (begun number `begun`).
    flushing: Option<*mut c_void>,
    /// Copies of puts' data that are done, for the next puts (no allocation and no
    /// fresh pages per put).
    spare: Vec<Vec<u8>>,
    /// The slots of puts that held a copy when they started, oldest first, and the
    /// bytes of the copies still held.
    copies: VecDeque<usize>,
    copied: usize,
}

impl Ops {
    /// Keeps a copy's buffer for a later put, if the spares have room for it.
    fn keep_spare(&mut self, buf: Vec<u8>) {
        let fits = (1..=SPARE_BYTES).contains(&buf.capacity());
        if fits && self.spare.len() < SPARE_COPIES {
            self.spare.push(buf);
        }
    }

    fn add(&mut self, op: Op) -> OpToken {
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(op);
                i
            }
            None => {
                self.slots.push(Some(op));
                self.slots.len() - 1
            }
        };
        OpToken(i as u64)
    }
}

impl UcxConduit {
    /// Where `offset..offset + len` of `rank`'s segment is; every operation starts
    /// here, and sends a batch past its deadline first.
    fn range(&self, rank: Rank, offset: usize, len: usize) -> Result<u64, ConduitError> {
        self.send_overdue();
        if rank >= self.size {
            return Err(ConduitError::NoSuchRank {
                rank,
                size: self.size,
            });
        }
        // The local endpoint's segments have the job's segment size, as every rank's.
        self.me.in_segment(rank, offset, len)?;
        Ok(self.net.base(rank) + offset as u64)
    }

    pub(super) fn put(
        &self,
        dest: Rank,
        offset: usize,
        data: &[u8],
    ) -> Result<Started, ConduitError> {
        let at = self.range(dest, offset, data.len())?;
        if dest == self.rank {
            return self.me.put_nb(dest, offset, data);
        }
        let mut p = sys::ucp_request_param_t::empty();
        p.op_attr_mask = sys::UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
        let ucp = self.net.ucp;
        let (ep, rkey) = self
            .net
            .ep_and_key(dest)
            .map_err(|e| self.peer_failed(dest, e))?;
        // SAFETY: a live endpoint and key; `data` is read before the call returns
        // (forced immediate local completion).
        let st = unsafe { (ucp.ucp_put_nbx)(ep, data.as_ptr().cast(), data.len(), at, rkey, &p) };
        let (req, kept) = match StatusPtr::of(st) {
            StatusPtr::Done => (std::ptr::null_mut(), Vec::new()),
            // Not expected with forced immediate completion: finish it while `data`
            // is still borrowed.
            StatusPtr::Request(_) => match self.net.wait(st, std::time::Duration::from_secs(60)) {
                Ok(()) => (std::ptr::null_mut(), Vec::new()),
                Err(e) => return Err(self.peer_failed(dest, e)),
            },
            StatusPtr::Err(sys::UCS_ERR_NO_RESOURCE) => {
                self.room_for_copy(data.len())?;
                let mut kept = self.ops.borrow_mut().spare.pop().unwrap_or_default();
                kept.clear();
                kept.extend_from_slice(data);
                // SAFETY: `kept` stays with the operation until it is done.
                (
                    unsafe { self.put_from(dest, at, kept.as_ptr(), kept.len())? },
                    kept,
                )
            }
            StatusPtr::Err(e) => return Err(self.peer_failed(dest, e)),
        };
        Ok(self.put_started(req, kept))
    }

    /// Posts a put of `len` bytes at `data` to address `at` of `dest` that UCX may
    /// complete later: its request, or null if it is already done.
    ///
    /// # Safety
    /// `data` stays valid for `len` bytes until the request is done.
    unsafe fn put_from(
        &self,
        dest: Rank,
        at: u64,
        data: *const u8,
        len: usize,
    ) -> Result<*mut c_void, ConduitError> {
        let p = sys::ucp_request_param_t::empty();
        let (ep, rkey) = self
            .net
            .ep_and_key(dest)
            .map_err(|e| self.peer_failed(dest, e))?;
        // SAFETY: a live endpoint and key; `data` as the caller promises.
        let st = unsafe { (self.net.ucp.ucp_put_nbx)(ep, data.cast(), len, at, rkey, &p) };
        match StatusPtr::of(st) {
            StatusPtr::Done => Ok(std::ptr::null_mut()),
            StatusPtr::Request(r) => Ok(r),
            StatusPtr::Err(e) => Err(self.peer_failed(dest, e)),
        }
    }

    /// Books a put whose request is `req` (null if done), holding the copy `kept` of
    /// its data (empty for none): it is in place after the next flush that begins.
    fn put_started(&self, req: *mut c_void, kept: Vec<u8>) -> Started {
        let mut ops = self.ops.borrow_mut();
        let flush = ops.begun + 1;
        let held = kept.len();
        let token = ops.add(Op::Put {
            req,
            data: kept,
            flush,
            failed: None,
        });
        if held > 0 {
            ops.copies.push_back(token.0 as usize);
            ops.copied += held;
        }
        Started::InFlight(token)
    }

    /// Gives back the copies UCX has sent; while those still held and `len` more bytes
    /// would pass [`COPY_LIMIT`], progresses the worker for the oldest to go (a put
    /// larger than the limit goes once nothing else is held).
    fn room_for_copy(&self, len: usize) -> Result<(), ConduitError> {
        let since = std::time::Instant::now();
        loop {
            let mut ops = self.ops.borrow_mut();
            self.reap(&mut ops);
            if ops.copied == 0 || ops.copied + len <= COPY_LIMIT {
                return Ok(());
            }
            drop(ops);
            self.progress();
            self.check_peers()?;
            if since.elapsed() > COPY_WAIT {
                return Err(ConduitError::Setup(format!(
                    "UCX put: the network took none of the {} MiB of puts this rank holds \
                     within {} s (does the target call amrq?)",
                    COPY_LIMIT >> 20,
                    COPY_WAIT.as_secs()
                )));
            }
        }
    }

    /// Takes back, oldest first, the copies of puts whose requests are done (a failed
    /// one's status is kept for `op_test`).
    fn reap(&self, ops: &mut Ops) {
        while let Some(&i) = ops.copies.front() {
            // A slot completed by `op_test` (and perhaps reused) holds no copy of its own.
            if let Some(Some(Op::Put {
                req, data, failed, ..
            })) = ops.slots.get_mut(i)
            {
                if !data.is_empty() {
                    match self.net.done(*req) {
                        Ok(false) => return,
                        Ok(true) => {}
                        Err(e) => *failed = Some(e),
                    }
                    *req = std::ptr::null_mut();
                    let copy = std::mem::take(data);
                    ops.copied -= copy.len();
                    ops.keep_spare(copy);
                }
            }
            ops.copies.pop_front();
        }
    }

    /// A put that UCX sends from `data` itself (no copy), which it may read until the
    /// operation is over.
    ///
    /// # Safety
    /// As [`Conduit::put_nb_borrowed`].
    pub(super) unsafe fn put_borrowed(
        &self,
        dest: Rank,
        offset: usize,
        data: *const u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        let at = self.range(dest, offset, len)?;
        if dest == self.rank {
            // SAFETY: the caller's contract.
            return unsafe { self.me.put_nb_borrowed(dest, offset, data, len) };
        }
        // SAFETY: `data` stays valid until the operation is over (the caller's
        // contract).
        let req = unsafe { self.put_from(dest, at, data, len)? };
        Ok(self.put_started(req, Vec::new()))
    }

    /// # Safety
    /// As [`Conduit::get_nb`].
    pub(super) unsafe fn get(
        &self,
        src: Rank,
        offset: usize,
        buf: *mut u8,
        len: usize,
    ) -> Result<Started, ConduitError> {
        let at = self.range(src, offset, len)?;
        if src == self.rank {
            // SAFETY: the caller's contract.
            return unsafe { self.me.get_nb(src, offset, buf, len) };
        }
        let p = sys::ucp_request_param_t::empty();
        let (ep, rkey) = self
            .net
            .ep_and_key(src)
            .map_err(|e| self.peer_failed(src, e))?;
        // SAFETY: a live endpoint and key; `buf` is valid for `len` bytes until the
        // operation completes (the caller's contract).
        let st = unsafe { (self.net.ucp.ucp_get_nbx)(ep, buf.cast(), len, at, rkey, &p) };
        self.started(src, st, Box::new([0; 2]))
    }

    pub(super) fn atomic(
        &self,
        dest: Rank,
        offset: usize,
        op: AtomicOp,
    ) -> Result<Started, ConduitError> {
        let at = self.range(dest, offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(ConduitError::Misaligned { offset });
        }
        if dest == self.rank {
            return self.me.atomic_nb(dest, offset, op);
        }
        // (opcode, `buffer`, the reply buffer's input): UCX's CSWAP compares with
        // `buffer` and swaps in the reply buffer's value.
        let (code, operand, swap_in) = match op {
            AtomicOp::FetchAdd(v) => (sys::UCP_ATOMIC_OP_ADD, v, 0),
            AtomicOp::Swap(v) | AtomicOp::Store(v) => (sys::UCP_ATOMIC_OP_SWAP, v, 0),
            AtomicOp::CompareSwap { current, new } => (sys::UCP_ATOMIC_OP_CSWAP, current, new),
            AtomicOp::FetchAnd(v) => (sys::UCP_ATOMIC_OP_AND, v, 0),
            AtomicOp::FetchOr(v) => (sys::UCP_ATOMIC_OP_OR, v, 0),
            AtomicOp::FetchXor(v) => (sys::UCP_ATOMIC_OP_XOR, v, 0),
            AtomicOp::Load => (sys::UCP_ATOMIC_OP_ADD, 0, 0),
        };
        let mut words = Box::new([operand, swap_in]);
        let mut p = sys::ucp_request_param_t::empty();
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_DATATYPE | sys::UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        p.datatype = sys::DATATYPE_U64;
        p.reply_buffer = (&mut words[1] as *mut u64).cast();
        let (ep, rkey) = self
            .net
            .ep_and_key(dest)
            .map_err(|e| self.peer_failed(dest, e))?;
        // SAFETY: a live endpoint and key; the operand and reply words are boxed and
        // stay with the operation until it completes.
        let st = unsafe {
            (self.net.ucp.ucp_atomic_op_nbx)(
                ep,
                code,
                (&words[0] as *const u64).cast(),
                1,
                at,
                rkey,
                &p,
            )
        };
        self.started(dest, st, words)
    }

    fn started(
        &self,
        peer: Rank,
        st: sys::ucs_status_ptr_t,
        words: Box<[u64; 2]>,
    ) -> Result<Started, ConduitError> {
        match StatusPtr::of(st) {
            StatusPtr::Done => Ok(Started::Done(words[1])),
            StatusPtr::Request(req) => Ok(Started::InFlight(
                self.ops.borrow_mut().add(Op::Request { req, words }),
            )),
            StatusPtr::Err(e) => Err(self.peer_failed(peer, e)),
        }
    }

    /// Moves the worker flush on: completes the one in flight, begins one if `want`.
    fn step_flush(&self, ops: &mut Ops, want: bool) -> Result<(), ConduitError> {
        if let Some(req) = ops.flushing {
            match self.net.done(req) {
                Ok(false) => return Ok(()),
                Ok(true) => {}
                Err(e) => {
                    ops.flushing = None;
                    return Err(ConduitError::Setup(format!(
                        "UCX flush: {}",
                        self.net.ucp.status(e)
                    )));
                }
            }
            ops.flushing = None;
            ops.done = ops.begun;
        }
        if want {
            let p = sys::ucp_request_param_t::empty();
            // SAFETY: a live worker.
            let st = unsafe { (self.net.ucp.ucp_worker_flush_nbx)(self.net.worker, &p) };
            ops.begun += 1;
            match StatusPtr::of(st) {
                StatusPtr::Done => ops.done = ops.begun,
                StatusPtr::Request(r) => ops.flushing = Some(r),
                StatusPtr::Err(e) => {
                    return Err(ConduitError::Setup(format!(
                        "UCX flush: {}",
                        self.net.ucp.status(e)
                    )))
                }
            }
        }
        Ok(())
    }

    pub(super) fn test(&self, token: OpToken) -> Result<Option<u64>, ConduitError> {
        self.progress();
        let mut ops = self.ops.borrow_mut();
        let i = token.0 as usize;
        let outcome = match ops.slots.get_mut(i).and_then(Option::as_mut) {
            None => {
                return Err(ConduitError::Setup(format!(
                    "operation {} is not in flight (completed already, or never started)",
                    token.0
                )))
            }
            Some(Op::Request { req, words }) => match self.net.done(*req) {
                Ok(false) => return Ok(None),
                Ok(true) => Ok(words[1]),
                Err(e) => Err(e),
            },
            Some(Op::Put {
                req, flush, failed, ..
            }) => {
                let flush = *flush;
                match failed.take().map_or_else(|| self.net.done(*req), Err) {
                    Ok(false) => return Ok(None),
                    Ok(true) => *req = std::ptr::null_mut(),
                    Err(e) => {
                        *req = std::ptr::null_mut();
                        return Err(ConduitError::Setup(format!(
                            "UCX put: {}",
                            self.net.ucp.status(e)
                        )));
                    }
                }
                let want = ops.flushing.is_none() && ops.begun < flush;
                self.step_flush(&mut ops, want)?;
                if ops.done < flush {
                    return Ok(None);
                }
                Ok(0)
            }
        };
        if let Some(Op::Put { data, .. }) = ops.slots[i].take() {
            ops.copied -= data.len();
            ops.keep_spare(data);
        }
        ops.free.push(i);
        outcome
            .map(Some)
            .map_err(|e| ConduitError::Setup(format!("UCX operation: {}", self.net.ucp.status(e))))
    }

    /// Completes every operation this rank started: waits for requests, then one flush
    /// begun after all of them.
    pub(super) fn flush_all(&self) -> Result<(), ConduitError> {
        self.settle_datagrams(super::conduit::PATIENCE);
        let since = std::time::Instant::now();
        let target = self.ops.borrow().begun + 1;
        loop {
            self.progress();
            let mut ops = self.ops.borrow_mut();
            let mut busy = false;
            for slot in ops.slots.iter_mut().flatten() {
                let (req, failed) = match slot {
                    Op::Put { req, failed, .. } => (req, Some(failed)),
                    Op::Request { req, .. } => (req, None),
                };
                match self.net.done(*req) {
                    Ok(false) => busy = true,
                    Ok(true) => *req = std::ptr::null_mut(), // answered by op_test
                    Err(e) => {
                        *req = std::ptr::null_mut();
                        if let Some(f) = failed {
                            *f = Some(e); // for op_test to answer
                        }
                    }
                }
            }
            if !busy {
                let want = ops.begun < target;
                self.step_flush(&mut ops, want)?;
                if ops.done >= target {
                    return Ok(());
                }
            }
            drop(ops);
            self.check_peers()?;
            if since.elapsed() > std::time::Duration::from_secs(60) {
                return Err(ConduitError::Setup(
                    "UCX flush did not complete within 60 s".into(),
                ));
            }
        }
    }
}
