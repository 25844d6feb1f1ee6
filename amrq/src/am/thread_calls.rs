//! Calls made by a rank's other threads ([`Sender::call`](super::Sender::call)): their
//! answers land on the rank's own thread, which runs every handler, and reach the
//! calling thread through a slot it waits on (spinning, then sleeping on the slot's
//! futex word).
//!
//! Each sender takes blocks of slots from its rank's table and alone opens calls in
//! them; the rank's thread only fills and frees them, so a call takes no lock. A call's
//! word has its top bit set (the rank's own calls never do) and names its slot; a slot
//! is reused only once its answer has landed, so a late answer never meets a later
//! call.

use super::args::Args;
use super::{AmError, RequestFailure};
use crate::bootstrap::Boot;
use crate::conduit::handoff;
use crate::conduit::mem::Waker;
use crate::conduit::{ConduitError, Rank};
use crate::util::Backoff;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The slot of one call of a thread's.
type CallSlot = handoff::CallSlot<Box<RequestFailure>>;
/// A block of slots, made when a sender first takes it.
type Block = OnceLock<Box<[CallSlot]>>;

/// The top bit of a thread's call word.
pub(super) const THREAD_CALL: u64 = 1 << 63;
/// Slots per block.
const BLOCK: usize = 64;
/// Blocks per rank: at most `BLOCK × BLOCKS` calls of its threads in flight.
const BLOCKS: usize = 256;
/// Longest sleep between looks at the peers while waiting for an answer.
const NAP: Duration = Duration::from_millis(1);

/// A rank's slots for its threads' calls.
#[derive(Default)]
pub(super) struct ThreadCalls {
    blocks: OnceLock<Box<[Block]>>,
    /// Blocks handed out so far.
    made: std::sync::atomic::AtomicUsize,
    /// Blocks of dropped senders, for the next ones.
    spare: Mutex<Vec<usize>>,
    /// The job's liveness, for waits.
    boot: OnceLock<Boot>,
}

impl std::fmt::Debug for ThreadCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCalls")
            .field(
                "blocks",
                &self.made.load(std::sync::atomic::Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

impl ThreadCalls {
    /// The slot `word` names, if any.
    fn slot(&self, word: u64) -> Option<&CallSlot> {
        let i = (word & !THREAD_CALL) as usize;
        let block = self.blocks.get()?.get(i / BLOCK)?.get()?;
        block.get(i % BLOCK)
    }

    /// Records where waits check the job's liveness (the first sender's endpoint).
    pub(super) fn set_boot(&self, boot: &Boot) {
        self.boot.get_or_init(|| boot.clone());
    }

    /// A block for a sender: a spare one, or a new one; `None` if all are taken.
    fn take_block(&self) -> Option<usize> {
        if let Some(b) = self.spare.lock().ok()?.pop() {
            return Some(b);
        }
        let blocks = self
            .blocks
            .get_or_init(|| (0..BLOCKS).map(|_| OnceLock::new()).collect());
        // Relaxed: the counter only hands out distinct indices.
        let b = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cell = blocks.get(b)?;
        cell.get_or_init(|| (0..BLOCK).map(|_| CallSlot::default()).collect());
        Some(b)
    }

    /// Gives a dropped sender's blocks back.
    pub(super) fn give_back(&self, blocks: &[usize]) {
        if let Ok(mut spare) = self.spare.lock() {
            spare.extend_from_slice(blocks);
        }
    }

    /// A `CALL_DONE` reply of `source` for a thread's call (its word, then the
    /// answer's); false if it answers no call of this rank's threads to `source`.
    pub(super) fn answer(&self, source: Rank, args: &[u64]) -> bool {
        match args.split_first() {
            Some((&word, answer)) => self.slot(word).is_some_and(|s| s.answer(source, answer)),
            None => false,
        }
    }

    /// A failure notice of `source` for the thread's call `word` names.
    pub(super) fn fail(&self, word: u64, source: Rank, failure: Box<RequestFailure>) -> bool {
        self.slot(word).is_some_and(|s| s.fail(source, failure))
    }
}

/// A sender's own slots: the blocks it took, and where it looks for a free slot next.
#[derive(Debug, Default)]
pub(super) struct OwnSlots {
    pub(super) blocks: Vec<usize>,
    cursor: usize,
}

impl OwnSlots {
    /// Opens a call to `target` in a free slot of this sender's (taking another block
    /// if all are busy): its word.
    pub(super) fn open(&mut self, table: &ThreadCalls, target: Rank) -> Result<u64, AmError> {
        loop {
            let mine = self.blocks.len() * BLOCK;
            for k in 0..mine {
                let i = (self.cursor + k) % mine;
                let word = (self.blocks[i / BLOCK] * BLOCK + i % BLOCK) as u64 | THREAD_CALL;
                let s = table.slot(word).expect("a block of this sender's");
                if s.is_free() {
                    self.cursor = i + 1;
                    s.open(target);
                    return Ok(word);
                }
            }
            // All busy (a spare block may hold calls of a dropped sender still in
            // flight: its slots are looked at as any other's).
            let block = table.take_block().ok_or(AmError::TooManyCalls {
                max: BLOCK * BLOCKS,
            })?;
            self.blocks.push(block);
            self.cursor = mine;
        }
    }

    /// Frees the slot of a call that could not be sent.
    pub(super) fn unsend(&self, table: &ThreadCalls, word: u64) {
        if let Some(s) = table.slot(word) {
            s.unsend();
        }
    }
}

/// The answer of a call a [`Sender`](super::Sender) made, of type `R`: [`Answer::wait`]
/// blocks this thread until it lands. `Send`: another thread may wait for it. Dropped
/// first, the answer is thrown away when it comes.
///
/// ```
/// use amrq::prelude::*;
/// let mut cfg = Config::new();
/// cfg.sender_slots.set(256);
/// cfg.threads(2, |setup| -> amrq::Result<()> {
///     let mut t = HandlerTable::new();
///     let square = t.call("square", |_s: &(), _ctx, x: u64| Ok(x * x));
///     let job = setup.start(t, ())?;
///     let peer = 1 - job.rank();
///     let sums = job.run_workers(2, |i, mut sender| -> Result<u64, AmError> {
///         let answers = (0..100).map(|x| sender.call(peer, square, x + i as u64)).collect::<Result<Vec<_>, _>>()?;
///         answers.into_iter().map(|a| a.wait()).sum()
///     })?;
///     assert_eq!(sums, [328_350, 338_350]); // 0² + … + 99², 1² + … + 100²
///     Ok(job.barrier()?)
/// })
/// .unwrap();
/// ```
pub struct Answer<'a, R> {
    table: &'a ThreadCalls,
    /// Whether the rank's thread, which lands the answer, still serves.
    threads: &'a super::sender::Threads,
    /// Across hosts, the ranks its rank's thread found gone (the job's liveness record
    /// does not say).
    left: Option<&'a Waker>,
    word: u64,
    /// The outcome was taken: nothing to abandon.
    taken: bool,
    answer: std::marker::PhantomData<fn() -> R>,
}

impl<'a, R: Args> Answer<'a, R> {
    pub(super) fn new(
        table: &'a ThreadCalls,
        threads: &'a super::sender::Threads,
        left: Option<&'a Waker>,
        word: u64,
    ) -> Self {
        Self {
            table,
            threads,
            left,
            word,
            taken: false,
            answer: std::marker::PhantomData,
        }
    }

    fn slot(&self) -> &'a CallSlot {
        self.table.slot(self.word).expect("an open call's slot")
    }

    /// The rank the call went to.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # let mut cfg = Config::new();
    /// # cfg.sender_slots.set(64);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let id = t.call("id", |_s: &(), _ctx, x: u64| Ok(x));
    ///     let job = setup.start(t, ())?;
    ///     job.run_workers(1, |_, mut sender| -> Result<u64, AmError> {
    ///         let a = sender.call(0, id, 5)?;
    ///         assert_eq!(a.target(), 0);
    ///         a.wait()
    ///     })?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn target(&self) -> Rank {
        self.slot().target()
    }

    /// True once the answer (or the failure) has landed: [`Answer::wait`] then returns
    /// at once.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # let mut cfg = Config::new();
    /// # cfg.sender_slots.set(64);
    /// cfg.threads(1, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let id = t.call("id", |_s: &(), _ctx, x: u64| Ok(x));
    ///     let job = setup.start(t, ())?;
    ///     job.run_workers(1, |_, mut sender| -> Result<(), AmError> {
    ///         let a = sender.call(0, id, 5)?;
    ///         while !a.is_ready() {} // rank 0's thread serves it meanwhile
    ///         assert_eq!(a.wait()?, 5);
    ///         Ok(())
    ///     })?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn is_ready(&self) -> bool {
        self.slot().is_done()
    }

    /// Waits for the answer: spins a bounded time, then sleeps until it lands, checking
    /// between sleeps that the target is alive and in the job. The call's own failure
    /// is [`AmError::RequestFailed`]; a target that failed or left, the conduit's
    /// error.
    ///
    /// ```
    /// # use amrq::prelude::*;
    /// # let mut cfg = Config::new();
    /// # cfg.sender_slots.set(64);
    /// cfg.threads(2, |setup| -> amrq::Result<()> {
    ///     let mut t = HandlerTable::new();
    ///     let half = t.call("half", |_s: &(), _ctx, x: u64| match x % 2 {
    ///         0 => Ok(x / 2),
    ///         _ => Err(AmError::from("odd")),
    ///     });
    ///     let job = setup.start(t, ())?;
    ///     job.run_workers(1, |_, mut sender| -> Result<(), AmError> {
    ///         assert_eq!(sender.call(1, half, 8)?.wait()?, 4);
    ///         assert!(matches!(sender.call(1, half, 7)?.wait(), Err(AmError::RequestFailed(_))));
    ///         Ok(())
    ///     })?;
    ///     Ok(job.barrier()?)
    /// })
    /// .unwrap();
    /// ```
    pub fn wait(mut self) -> Result<R, AmError> {
        let s = self.slot();
        let mut backoff = Backoff::new();
        while !s.is_done() {
            if !backoff.is_yielding() {
                backoff.snooze();
                continue;
            }
            self.check(s.target())?; // dropped on the way out: abandoned
            if let Some(e) = self.threads.unserved_here() {
                return Err(e);
            }
            s.sleep(NAP);
        }
        self.taken = true;
        match s.take() {
            Ok((words, len)) => R::from_words(&words[..len]).map_err(|e| e.of(s.target(), len)),
            Err(Some(failure)) => Err(AmError::RequestFailed(failure)),
            Err(None) => Err(AmError::Failed("the call failed".into())),
        }
    }

    /// The job's liveness, as far as the call's target goes.
    fn check(&self, target: Rank) -> Result<(), AmError> {
        if let Some(boot) = self.table.boot.get() {
            crate::conduit::mem::check_peer(boot, target)?;
        }
        match self.left.is_some_and(|w| w.has_left(target)) {
            true => Err(ConduitError::PeerLeft { rank: target }.into()),
            false => Ok(()),
        }
    }
}

impl<R> Drop for Answer<'_, R> {
    fn drop(&mut self) {
        if !self.taken {
            if let Some(s) = self.table.slot(self.word) {
                s.abandon();
            }
        }
    }
}

impl<R> std::fmt::Debug for Answer<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answer")
            .field("word", &self.word)
            .finish_non_exhaustive()
    }
}
