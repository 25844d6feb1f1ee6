//! Arbitrary arguments at the public AM, RQ and RMA calls (property-based): every call
//! answers `Ok` or a typed error, never panics, and leaves the job intact — a round
//! trip afterwards still works, and no call through the API makes the peer record a
//! fault (the API refuses what a correct peer would never send). Arbitrary bytes at the
//! receive path are the conduit's unit test (`conduit/mem/tests.rs`).

#[path = "common/ranks.rs"]
mod ranks;

use amrq::conduit::{AtomicOp, ConduitError};
use amrq::prelude::*;
use amrq::rma::{Rma, RmaError, Strided};
use amrq::rq::Kind;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of each rank's segment in these jobs (small, so that offsets near its end and
/// past it are often drawn).
const SEGMENT: usize = 1 << 16;

/// One call with arbitrary arguments.
#[derive(Debug, Clone)]
enum Call {
    Request {
        dest: usize,
        nargs: usize,
        len: usize,
    },
    RequestLong {
        dest: usize,
        nargs: usize,
        len: usize,
        offset: usize,
    },
    Enqueue {
        dest: usize,
        queue: usize,
        kind: u8,
        nargs: usize,
        len: usize,
    },
    EnqueueLong {
        dest: usize,
        queue: usize,
        nargs: usize,
        len: usize,
        offset: usize,
    },
    EnqueueInterrupt {
        dest: usize,
        queue: usize,
        nargs: usize,
    },
    Dequeue {
        queue: usize,
        nargs: usize,
        len: usize,
    },
    Put {
        frames: bool,
        dest: usize,
        offset: usize,
        len: usize,
    },
    Get {
        frames: bool,
        dest: usize,
        offset: usize,
        len: usize,
    },
    Atomic {
        frames: bool,
        dest: usize,
        offset: usize,
        value: u64,
    },
    Alloc {
        len: usize,
        align: usize,
    },
    Free {
        offset: usize,
    },
    Strided {
        frames: bool,
        dest: usize,
        offset: usize,
        counts: Vec<usize>,
        strides: Vec<usize>,
        len: usize,
    },
}

/// A rank: mostly the two real ones, sometimes one that does not exist.
fn rank() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0..2usize, 1 => 2..usize::MAX]
}

/// An offset or size: small, near the segment's end, or anything.
fn place() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 0..256usize,
        3 => (SEGMENT - 300)..(SEGMENT + 300),
        2 => any::<usize>(),
        1 => (usize::MAX - 300)..=usize::MAX,
    ]
}

/// A length for a buffer the test allocates: bounded, past every limit.
fn len() -> impl Strategy<Value = usize> {
    prop_oneof![3 => 0..100usize, 2 => 100..10_000usize, 1 => (SEGMENT - 8)..(SEGMENT + 8)]
}

fn call() -> impl Strategy<Value = Call> {
    let nargs = 0..12usize;
    let queue = 0..6usize;
    prop_oneof![
        (rank(), nargs.clone(), len()).prop_map(|(dest, nargs, len)| Call::Request {
            dest,
            nargs,
            len
        }),
        (rank(), nargs.clone(), len(), place()).prop_map(|(dest, nargs, len, offset)| {
            Call::RequestLong {
                dest,
                nargs,
                len,
                offset,
            }
        }),
        (rank(), queue.clone(), 0..3u8, nargs.clone(), len()).prop_map(
            |(dest, queue, kind, nargs, len)| Call::Enqueue {
                dest,
                queue,
                kind,
                nargs,
                len
            }
        ),
        (rank(), queue.clone(), nargs.clone(), len(), place()).prop_map(
            |(dest, queue, nargs, len, offset)| Call::EnqueueLong {
                dest,
                queue,
                nargs,
                len,
                offset
            }
        ),
        (rank(), queue.clone(), nargs.clone())
            .prop_map(|(dest, queue, nargs)| Call::EnqueueInterrupt { dest, queue, nargs }),
        (queue, nargs, len()).prop_map(|(queue, nargs, len)| Call::Dequeue { queue, nargs, len }),
        (any::<bool>(), rank(), place(), len()).prop_map(|(frames, dest, offset, len)| Call::Put {
            frames,
            dest,
            offset,
            len
        }),
        (any::<bool>(), rank(), place(), len()).prop_map(|(frames, dest, offset, len)| Call::Get {
            frames,
            dest,
            offset,
            len
        }),
        (any::<bool>(), rank(), place(), any::<u64>()).prop_map(|(frames, dest, offset, value)| {
            Call::Atomic {
                frames,
                dest,
                offset,
                value,
            }
        }),
        (place(), place()).prop_map(|(len, align)| Call::Alloc { len, align }),
        place().prop_map(|offset| Call::Free { offset }),
        (
            any::<bool>(),
            rank(),
            place(),
            prop::collection::vec(place(), 0..4),
            prop::collection::vec(place(), 0..4),
            len()
        )
            .prop_map(
                |(frames, dest, offset, counts, strides, len)| Call::Strided {
                    frames,
                    dest,
                    offset,
                    counts,
                    strides,
                    len
                }
            ),
    ]
}

/// Errors that say the job is no longer intact: never the answer to a bad argument.
fn broken(e: &AmError) -> bool {
    matches!(
        e.conduit(),
        Some(
            ConduitError::PeerDead { .. }
                | ConduitError::PeerLeft { .. }
                | ConduitError::AllPeersLeft
                | ConduitError::ChannelClosed { .. }
                | ConduitError::FrameOutstanding { .. }
        )
    )
}

fn rma_broken(e: &RmaError) -> bool {
    match e {
        RmaError::Am(e) => broken(e),
        _ => false,
    }
}

/// How many calls answered `Ok` and how many a typed error.
#[derive(Default)]
struct Tally {
    ok: Cell<u64>,
    refused: Cell<u64>,
}

impl Tally {
    fn count(&self, ok: bool) {
        let c = if ok { &self.ok } else { &self.refused };
        c.set(c.get() + 1);
    }
}

struct State {
    /// The last pong: the round trip that checks the job is intact.
    ponged: Cell<u64>,
    pong: ReplyHandler,
    /// Replies to the arbitrary requests.
    echo_back: ReplyHandler,
}

/// Makes `call` at rank 0; `Err` (a test failure) if it broke the job or said so.
fn make(
    tally: &Tally,
    am: &Am<State>,
    rma: &Rma<State>,
    handlers: (RequestHandler, RequestHandler),
    call: &Call,
) -> Result<(), TestCaseError> {
    let args = [7u64; 12];
    let pick_rma = |frames: bool| {
        rma.use_frames(frames);
        rma
    };
    let am_result = |r: Result<(), AmError>| match r {
        Err(e) if broken(&e) => Err(TestCaseError::fail(format!("{call:?}: {e}"))),
        r => {
            tally.count(r.is_ok());
            Ok(())
        }
    };
    let rq_result = |r: Result<bool, RqError>| am_result(r.map(drop).map_err(AmError::from));
    let rma_result = |r: Result<(), RmaError>| match r {
        Err(e) if rma_broken(&e) => Err(TestCaseError::fail(format!("{call:?}: {e}"))),
        r => {
            tally.count(r.is_ok());
            Ok(())
        }
    };
    let payload = |len: usize| vec![0x5au8; len];
    let (echo, sink) = handlers;
    match *call {
        Call::Request { dest, nargs, len } => {
            let handler = if nargs == 0 { sink } else { echo };
            am_result(am.request_medium(dest, handler, &args[..nargs], &payload(len)))
        }
        Call::RequestLong {
            dest,
            nargs,
            len,
            offset,
        } => am_result(am.request_long(dest, sink, &args[..nargs], &payload(len), offset)),
        Call::Enqueue {
            dest,
            queue,
            kind,
            nargs,
            len,
        } => {
            let kind = [Kind::Express, Kind::Basic, Kind::TagOn][usize::from(kind)];
            let q = QueueId::new(queue);
            rq_result(
                am.rq()
                    .enqueue_as(dest, q, kind, 3, &args[..nargs], &payload(len)),
            )
        }
        Call::EnqueueLong {
            dest,
            queue,
            nargs,
            len,
            offset,
        } => {
            let q = QueueId::new(queue);
            rq_result(
                am.rq()
                    .enqueue_long(dest, q, 3, &args[..nargs], &payload(len), offset),
            )
        }
        Call::EnqueueInterrupt { dest, queue, nargs } => {
            rq_result(
                am.rq()
                    .enqueue_interrupt(dest, QueueId::new(queue), &args[..nargs], &[]),
            )
        }
        Call::Dequeue { queue, nargs, len } => {
            let (mut a, mut b) = (vec![0u64; nargs], vec![0u8; len]);
            let r = am.rq().dequeue(QueueId::new(queue), &mut a, &mut b);
            rq_result(r.map(|_| true))
        }
        Call::Put {
            frames,
            dest,
            offset,
            len,
        } => rma_result(pick_rma(frames).put(dest, offset, &payload(len))),
        Call::Get {
            frames,
            dest,
            offset,
            len,
        } => rma_result(pick_rma(frames).get(dest, offset, &mut payload(len))),
        Call::Atomic {
            frames,
            dest,
            offset,
            value,
        } => {
            let r = pick_rma(frames).atomic(dest, offset, AtomicOp::FetchXor(value));
            rma_result(r.map(drop))
        }
        Call::Alloc { len, align } => {
            if let Ok(at) = rma.alloc_local(len, align) {
                prop_assert!(at.checked_add(len).is_some_and(|end| end <= SEGMENT));
                prop_assert!(align == 0 || !align.is_power_of_two() || at % align == 0);
                rma.free(at)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            Ok(())
        }
        Call::Free { offset } => rma_result(rma.free(offset)),
        Call::Strided {
            frames,
            dest,
            offset,
            ref counts,
            ref strides,
            len,
        } => {
            let region = Strided {
                offset,
                counts,
                strides,
            };
            let r = pick_rma(frames);
            rma_result(r.put_strided(dest, &region, &payload(len)))?;
            rma_result(r.get_strided(dest, &region, &mut payload(len)))
        }
    }
}

#[test]
fn arbitrary_arguments_give_typed_errors_and_leave_the_job_intact() {
    let mut cfg = {
        let mut c = Config::new();
        c.segment_bytes.set(SEGMENT);
        c.interrupt_slots.set(8);
        c
    };
    cfg.add_queue(8);
    cfg.add(amrq::config::QueueSpec::new("shared", 16).shared());
    let done = AtomicBool::new(false);
    let current = std::sync::Mutex::new(String::new());
    // A call that never returns is a bug too: fail with it rather than hang CI.
    std::thread::scope(|watch| {
        watch.spawn(|| {
            let start = std::time::Instant::now();
            while !done.load(Ordering::Acquire) {
                if start.elapsed() > std::time::Duration::from_secs(300) {
                    eprintln!("still running after 300 s, in {}", current.lock().unwrap());
                    std::process::exit(1);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        });
        run_calls(&cfg, &done, &current);
    });
}

fn run_calls(cfg: &Config, done: &AtomicBool, current: &std::sync::Mutex<String>) {
    let out = crate::ranks::run(2, cfg, |conduit| -> Result<(), String> {
        let mut table = HandlerTable::new();
        let echo_back = table.reply("echo_back", |_: &State, m| m.arg(0).map(drop));
        let echo = table.request("echo", |s: &State, ctx, m| {
            ctx.reply(s.echo_back, &[m.arg(0)?])
        });
        let sink = table.request("sink", |_: &State, _ctx, _m| Ok(()));
        let pong = table.reply("pong", |s: &State, m| {
            s.ponged.set(m.arg(0)?);
            Ok(())
        });
        let ping = table.request("ping", |s: &State, ctx, m| ctx.reply(s.pong, &[m.arg(0)?]));
        let state = State {
            ponged: Cell::new(0),
            pong,
            echo_back,
        };
        let am = Am::new(conduit, table, state).map_err(|e| e.to_string())?;
        let rma = Rma::new(am);
        let am = rma.am();
        if am.rank() == 1 {
            // Serves until rank 0 is done (its queues drained by these polls; its own
            // user queues fill, which is a full queue to rank 0, not an error).
            while !done.load(Ordering::Acquire) {
                am.poll().map_err(|e| e.to_string())?;
            }
        } else {
            let runner_config = RunnerConfig {
                cases: 256,
                failure_persistence: None,
                ..RunnerConfig::default()
            };
            let mut runner = TestRunner::new(runner_config);
            let round = Cell::new(0u64);
            let tally = Tally::default();
            let result = runner.run(&prop::collection::vec(call(), 1..24), |calls| {
                for c in &calls {
                    *current.lock().unwrap() = format!("{c:?}");
                    make(&tally, am, &rma, (echo, sink), c)?;
                }
                // Intact: a round trip to the peer still comes back right.
                let r = round.get() + 1;
                round.set(r);
                am.request(1, ping, &[r])
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let back =
                    am.wait_until_for(std::time::Duration::from_secs(10), |s| s.ponged.get() == r);
                prop_assert!(back.is_ok(), "no echo after {calls:?}");
                Ok(())
            });
            done.store(true, Ordering::Release);
            result.map_err(|e| e.to_string())?;
            let (ok, refused) = (tally.ok.get(), tally.refused.get());
            eprintln!(
                "{ok} calls answered Ok, {refused} a typed error, {} round trips",
                round.get()
            );
            if ok < 100 || refused < 100 || round.get() != 256 {
                return Err(format!(
                    "too few calls of each kind: {ok} Ok, {refused} refused"
                ));
            }
        }
        am.barrier().map_err(|e| e.to_string())?;
        // Nothing the API sent was a frame a correct peer never sends.
        let faults = am.faults();
        if !faults.is_empty() {
            return Err(format!("rank {} recorded faults: {faults:?}", am.rank()));
        }
        Ok(())
    })
    .expect("job ran");
    assert_eq!(out, [Ok(()), Ok(())]);
}
