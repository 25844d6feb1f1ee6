//! The Active Message set-up every benchmark shares: handlers that count what arrives
//! (Liu & Culler's "simple handler that increments a counter"), acknowledge, land
//! Long arrays and send one back for *swap*.

use amrq::prelude::*;
use std::cell::{Cell, RefCell};

/// What the handlers update.
pub struct State {
    /// Requests handled (`bump`, `ping`, `land`).
    pub count: Cell<u64>,
    /// Long bytes landed.
    pub bytes: Cell<u64>,
    /// The last acknowledgement's value (the acknowledger's count).
    pub acked: Cell<u64>,
    /// Acknowledgements received.
    pub acks: Cell<u64>,
    /// Arrays landed by a `fetch` reply.
    pub fetched: Cell<u64>,
    /// What a `fetch` sends back.
    pub source: RefCell<Vec<u8>>,
    /// Values other ranks told this one (`tell`), in arrival order.
    pub told: RefCell<Vec<f64>>,
    /// The sum of the bytes `read` read.
    pub sum: Cell<u64>,
    /// Where `read` copies a payload to (its mode 2).
    scratch: RefCell<Vec<u8>>,
    ack: ReplyHandler,
    landed: ReplyHandler,
}

/// A rank's job with the benchmark handlers.
pub struct BenchAm {
    /// The job (its AM layer by `Deref`).
    pub am: Job<State>,
    /// Counts.
    pub bump: RequestHandler,
    /// Counts and acknowledges with the count.
    pub ping: RequestHandler,
    /// A Long request: counts, adds its bytes, and acknowledges if `arg(0) == 1`.
    pub land: RequestHandler,
    /// Asks for `arg(0)` bytes of the target's `source` (from byte `arg(2)`) to be
    /// sent back by a Long reply to offset `arg(1)` of the asker's segment.
    pub fetch: RequestHandler,
    /// Hands `f64::from_bits(arg(0))` to the target's `told`.
    pub tell: RequestHandler,
    /// A Long request reflected: counts, and its payload goes back by a Long reply to
    /// offset `arg(0)` of the sender's segment (the reply counts in `fetched`).
    pub echo: RequestHandler,
    /// Counts, then fails: the sender's poll or wait gets the failure back.
    pub refuse: RequestHandler,
    /// A Long request whose handler reads its payload, as `arg(1)` says ([`Read`]),
    /// and adds its bytes to `sum`; counts and acknowledges as `land`.
    pub read: RequestHandler,
}

/// How `read`'s handler reads a Long payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Lent in place (`unsafe`: nothing writes the bytes meanwhile).
    InPlace = 0,
    /// `m.payload()`: copied out into a new vector.
    Copied = 1,
    /// `m.payload_in_place().copy_to(..)`: copied into a buffer kept across messages.
    CopiedTo = 2,
}

/// The sum of `bytes`, as a handler that reads its payload computes it.
fn sum_of(bytes: &[u8]) -> u64 {
    bytes.iter().map(|&b| u64::from(b)).sum()
}

impl BenchAm {
    /// Starts the job of `setup` with the benchmark handlers.
    pub fn new(setup: Setup) -> amrq::Result<Self> {
        let mut table = HandlerTable::new();
        let ack = table.reply("ack", |s: &State, m| {
            s.acked.set(m.arg(0)?);
            s.acks.set(s.acks.get() + 1);
            Ok(())
        });
        let landed = table.reply("landed", |s: &State, _m| {
            s.fetched.set(s.fetched.get() + 1);
            Ok(())
        });
        let bump = table.request("bump", |s: &State, _ctx, _m| {
            s.count.set(s.count.get() + 1);
            Ok(())
        });
        let ping = table.request("ping", |s: &State, ctx, _m| {
            s.count.set(s.count.get() + 1);
            ctx.reply(s.ack, &[s.count.get()])
        });
        let land = table.request("land", |s: &State, ctx, m| {
            s.count.set(s.count.get() + 1);
            s.bytes.set(s.bytes.get() + m.payload_len() as u64);
            if m.arg(0)? == 1 {
                ctx.reply(s.ack, &[s.count.get()])?;
            }
            Ok(())
        });
        let fetch = table.request("fetch", |s: &State, ctx, m| {
            let (len, at, from) = (m.arg(0)? as usize, m.arg(1)? as usize, m.arg(2)? as usize);
            let src = s.source.borrow();
            let Some(bytes) = src.get(from..from + len) else {
                return Err(bench_error(format!(
                    "fetch of {len} bytes from {from}: the source has {}",
                    src.len()
                )));
            };
            ctx.reply_long(s.landed, &[], bytes, at)
        });
        let echo = table.request("echo", |s: &State, ctx, m| {
            s.count.set(s.count.get() + 1);
            // SAFETY: the sender writes nothing to the landing bytes until this
            // reflection reaches it, and no other rank writes them: nothing writes the
            // payload while it is borrowed.
            let data = unsafe { m.payload_in_place().as_slice_unchecked() };
            ctx.reply_long(s.landed, &[], data, m.arg(0)? as usize)
        });
        let tell = table.request("tell", |s: &State, _ctx, m| {
            s.told.borrow_mut().push(f64::from_bits(m.arg(0)?));
            Ok(())
        });
        let refuse = table.request("refuse", |s: &State, _ctx, _m| {
            s.count.set(s.count.get() + 1);
            Err("refused, as the benchmark asks".into())
        });
        let read = table.request("read", |s: &State, ctx, m| {
            let p = m.payload_in_place();
            let sum = match m.arg(1)? {
                // SAFETY: the sender lands its messages in turn at more places than a
                // ring holds messages (`stream`'s `read_places`) and writes a message's
                // bytes only once it has a slot for its frame: a place is written again
                // only after this handler returned and released its slot. No other rank
                // writes them.
                0 => sum_of(unsafe { p.as_slice_unchecked() }),
                1 => sum_of(&m.payload()),
                _ => {
                    let mut buf = s.scratch.borrow_mut();
                    buf.resize(p.len(), 0);
                    p.copy_to(&mut buf);
                    sum_of(&buf)
                }
            };
            s.sum.set(s.sum.get().wrapping_add(sum));
            s.count.set(s.count.get() + 1);
            if m.arg(0)? == 1 {
                ctx.reply(s.ack, &[s.count.get()])?;
            }
            Ok(())
        });
        let state = State {
            count: Cell::new(0),
            bytes: Cell::new(0),
            acked: Cell::new(0),
            acks: Cell::new(0),
            fetched: Cell::new(0),
            source: RefCell::new(Vec::new()),
            told: RefCell::new(Vec::new()),
            sum: Cell::new(0),
            scratch: RefCell::new(Vec::new()),
            ack,
            landed,
        };
        Ok(Self {
            am: setup.start(table, state)?,
            bump,
            ping,
            land,
            fetch,
            tell,
            echo,
            refuse,
            read,
        })
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.am.rank()
    }

    /// Waits until `n` requests in all have been handled here.
    pub fn wait_count(&self, n: u64) -> Result<(), AmError> {
        self.am.wait_until(|s| s.count.get() >= n)
    }

    /// Every rank's `value` on rank 0 (its own first, the others in arrival order);
    /// `None` elsewhere.
    pub fn gather(&self, value: f64) -> amrq::Result<Option<Vec<f64>>> {
        let n = self.am.size();
        if self.rank() != 0 {
            self.am.request(0, self.tell, &[value.to_bits()])?;
            self.am.barrier()?;
            return Ok(None);
        }
        self.am.wait_until(|s| s.told.borrow().len() >= n - 1)?;
        self.am.barrier()?;
        // Exactly this gather's n − 1 values: a rank that left the barrier first may have
        // told its value of the next gather already, and the poll that completed the
        // barrier here ran its handler (taking it too left the next gather waiting for
        // it forever). Every value of this gather came before the barrier could complete
        // anywhere: this rank waited for them before it entered.
        let mut all = vec![value];
        all.extend(self.am.state().told.borrow_mut().drain(..n - 1));
        Ok(Some(all))
    }

    /// Waits until `n` acknowledgements in all have come back.
    pub fn wait_acks(&self, n: u64) -> Result<(), AmError> {
        self.am.wait_until(|s| s.acks.get() >= n)
    }
}

/// A setup error unless the job has exactly `n` ranks (`at_least`: `n` or more).
pub fn require_ranks(setup: &Setup, name: &str, n: usize, at_least: bool) -> Result<(), AmError> {
    let size = setup.size();
    if size == n || (at_least && size > n) {
        return Ok(());
    }
    let want = if at_least {
        format!("{n} or more")
    } else {
        n.to_string()
    };
    Err(bench_error(format!(
        "{name} runs on {want} ranks (--ranks {n}), not {size}"
    )))
}

/// A benchmark's own error (a refused set-up, an impossible observation), as an
/// `AmError` so that it travels with the runtime's errors.
pub fn bench_error(why: impl Into<String>) -> AmError {
    AmError::Failed(why.into())
}

/// A barrier that polls without ever sleeping until it completes: a rank that only
/// serves its peers' requests answers each at once, so the requester's timing is not
/// the server's wake-up.
///
/// ```
/// use amrq::prelude::*;
/// amrq::Config::new().threads(2, |setup| {
///     let job = setup.start(HandlerTable::<()>::new(), ())?;
///     Ok(amrq_bench::fixture::serving_barrier(&job)?)
/// })
/// .unwrap();
/// ```
pub fn serving_barrier<S>(am: &Am<S>) -> Result<(), AmError> {
    am.barrier_notify()?;
    while !am.barrier_try()? {}
    Ok(())
}
