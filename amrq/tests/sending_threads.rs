//! Several threads of each rank sending AM requests at once (`Am::sender`): every
//! request handled exactly once, in order per thread, with checksums, its reply run on
//! the sending rank's own thread; ranks as threads and as processes under `amrun`;
//! ranks that return right after their threads sent (the job's end must still serve
//! every request); a rank killed while its peers' threads send to it; threads that put,
//! get, add and enqueue at once. Between two namespace hosts (`common/rig.rs`, UCX over
//! tcp) too, where the threads' frames leave through their rank's outbox.

#![cfg(not(amrq_loom))]

#[path = "common/marker.rs"]
mod marker;
#[path = "common/rig.rs"]
mod rig;
#[path = "common/ucx.rs"]
mod ucx_common;

use amrq::prelude::*;
use amrq::rq::QueueId;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Process tests spin: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn mix(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ x
}

/// What request `seq` of thread `thread` of rank `src` to rank `dest` carries.
fn value(src: usize, thread: usize, dest: usize, seq: u64) -> u64 {
    mix(((src as u64) << 48) ^ ((thread as u64) << 40) ^ ((dest as u64) << 32) ^ seq)
}

/// The payload of every seventh request: bytes from its value.
fn payload(v: u64, seq: u64) -> Option<Vec<u8>> {
    (seq % 7 == 3).then(|| {
        (0..(v % 200) as usize)
            .map(|i| (v >> (i % 8)) as u8)
            .collect()
    })
}

fn payload_sum(p: &[u8]) -> u64 {
    p.iter()
        .fold(0u64, |a, &b| a.wrapping_mul(31).wrapping_add(u64::from(b)))
}

/// One rank's view: per (source rank, thread), the next sequence number expected.
struct Seen {
    threads: usize,
    next: RefCell<Vec<u64>>,
    count: Cell<u64>,
    sum: Cell<u64>,
    disorder: Cell<u64>,
    acks: Cell<u64>,
    ack: Cell<Option<ReplyHandler>>,
}

/// The job's part on every rank: `threads` threads each send `per` requests to every
/// rank (itself included) while this thread serves; each request is checked and
/// acknowledged by a reply. Returns (count, sum, disorder) as received here.
fn stress(setup: Setup, threads: usize, per: u64) -> amrq::Result<(u64, u64, u64)> {
    let mut t = HandlerTable::new();
    let ack = t.reply("ack", |s: &Seen, _m| {
        s.acks.set(s.acks.get() + 1);
        Ok(())
    });
    let work = t.request("work", |s: &Seen, ctx, m| {
        let (thread, seq, v) = (m.arg(0)? as usize, m.arg(1)?, m.arg(2)?);
        let key = m.source() * s.threads + thread;
        let mut next = s.next.borrow_mut();
        if next[key] != seq {
            s.disorder.set(s.disorder.get() + 1);
        }
        next[key] = seq + 1;
        s.sum
            .set(s.sum.get().wrapping_add(mix(v) ^ payload_sum(&m.payload())));
        s.count.set(s.count.get() + 1);
        ctx.reply(s.ack.get().expect("set before any request"), &[])
    });
    let size = setup.size();
    let seen = Seen {
        threads,
        next: RefCell::new(vec![0; size * threads]),
        count: Cell::new(0),
        sum: Cell::new(0),
        disorder: Cell::new(0),
        acks: Cell::new(0),
        ack: Cell::new(Some(ack)),
    };
    let job = setup.start(t, seen)?;
    let me = job.rank();
    let all = (size * threads) as u64 * per;
    std::thread::scope(|s| -> amrq::Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let mut sender = job.sender()?;
                Ok(s.spawn(move || -> Result<(), AmError> {
                    for seq in 0..per {
                        for dest in (0..sender.size()).map(|d| (d + me + thread) % size) {
                            let v = value(me, thread, dest, seq);
                            let args = [thread as u64, seq, v];
                            match payload(v, seq) {
                                Some(p) => sender.request_medium(dest, work, &args, &p)?,
                                None => sender.request(dest, work, &args)?,
                            }
                        }
                    }
                    Ok(())
                }))
            })
            .collect::<amrq::Result<_>>()?;
        job.wait_until(|s| s.count.get() == all && s.acks.get() == all)?;
        for w in workers {
            w.join().expect("worker ran")?;
        }
        Ok(())
    })?;
    job.barrier()?;
    let s = job.state();
    Ok((s.count.get(), s.sum.get(), s.disorder.get()))
}

/// The sum rank `dest` should see.
fn expected_sum(dest: usize, size: usize, threads: usize, per: u64) -> u64 {
    let mut sum = 0u64;
    for src in 0..size {
        for thread in 0..threads {
            for seq in 0..per {
                let v = value(src, thread, dest, seq);
                let p = payload(v, seq).map_or(0, |p| payload_sum(&p));
                sum = sum.wrapping_add(mix(v) ^ p);
            }
        }
    }
    sum
}

fn check(out: &[(u64, u64, u64)], threads: usize, per: u64) {
    let size = out.len();
    for (dest, &(count, sum, disorder)) in out.iter().enumerate() {
        assert_eq!(count, (size * threads) as u64 * per, "rank {dest}'s count");
        assert_eq!(
            disorder, 0,
            "rank {dest} saw a thread's requests out of order"
        );
        assert_eq!(
            sum,
            expected_sum(dest, size, threads, per),
            "rank {dest}'s checksum"
        );
    }
}

/// Rings of `slots` for the threads' requests.
fn config(slots: u64) -> Config {
    let mut cfg = Config::new();
    cfg.sender_slots.set(slots);
    cfg
}

/// Small: the threads wait for room often.
const STRESS_SLOTS: u64 = 64;
/// Large: many requests wait when their senders return.
const RETURN_SLOTS: u64 = 2048;

#[test]
fn threads_of_ranks_as_threads_send_exactly_once() {
    for (ranks, threads, per) in [(2, 2, 3000), (3, 8, 400)] {
        let out = config(STRESS_SLOTS).threads(ranks, |setup| stress(setup, threads, per));
        let out = out.unwrap_or_else(|e| panic!("{}", e.chain()));
        check(&out, threads, per);
    }
}

/// Threads' calls: `threads` threads per rank each make `per` calls to every rank,
/// up to 32 in flight, dropping every 13th answer unread and sending every 97th call
/// an argument its handler refuses; each answer is checked, and the slots of dropped
/// and failed calls are reused (more calls are made than a rank has slots). Returns
/// the calls this rank served.
fn calls(setup: Setup, threads: usize, per: u64) -> amrq::Result<u64> {
    let mut t = HandlerTable::new();
    let f = t.call("f", |served: &Cell<u64>, ctx, (thread, seq): (u64, u64)| {
        served.set(served.get() + 1);
        match seq % 97 == 5 {
            true => Err(AmError::from("refused")),
            false => Ok((mix(thread ^ seq << 8), ctx.source() as u64)),
        }
    });
    let job = setup.start(t, Cell::new(0))?;
    let size = job.size();
    job.run_workers(threads, |thread, mut sender| -> Result<(), AmError> {
        let me = sender.rank() as u64;
        let mut window = std::collections::VecDeque::new();
        for seq in 0..per {
            for dest in 0..size {
                let answer = sender.call(dest, f, (thread as u64, seq))?;
                if seq % 13 != 7 {
                    window.push_back((seq, answer));
                }
                while window.len() > 32
                    || (seq + 1 == per && dest + 1 == size && !window.is_empty())
                {
                    let (seq, answer) = window.pop_front().expect("not empty");
                    match (seq % 97 == 5, answer.wait()) {
                        (false, Ok(got)) if got == (mix(thread as u64 ^ seq << 8), me) => {}
                        (true, Err(AmError::RequestFailed(_))) => {}
                        (_, other) => {
                            return Err(format!("call {seq} of thread {thread}: {other:?}").into())
                        }
                    }
                }
            }
        }
        Ok(())
    })?;
    job.barrier()?;
    Ok(job.state().get())
}

#[test]
fn threads_calls_are_answered_exactly_once() {
    let (ranks, threads, per) = (2, 4, 2500);
    let out = config(STRESS_SLOTS).threads(ranks, |setup| calls(setup, threads, per));
    let served = out.unwrap_or_else(|e| panic!("{}", e.chain()));
    assert_eq!(served, vec![(ranks * threads) as u64 * per; ranks]);
}

/// Ranks return as soon as their threads are done, without waiting for anything:
/// the job's end must still run every request, counted in a tally beside the job.
/// Requests handled, and replies run, across the job.
type Tally = Arc<[AtomicU64; 2]>;

fn send_and_return(setup: Setup, tally: Option<Tally>) -> amrq::Result<u64> {
    type State = (Cell<u64>, Option<Tally>);
    let mut t = HandlerTable::new();
    let back = t.reply("back", |s: &State, _m| {
        if let Some(t) = &s.1 {
            t[1].fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    let hit = t.request("hit", move |s: &State, ctx, _m| {
        // A slow handler: a backlog is still waiting when the senders' ranks return.
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_micros(10) {}
        s.0.set(s.0.get() + 1);
        if let Some(t) = &s.1 {
            t[0].fetch_add(1, Ordering::Relaxed);
        }
        ctx.reply(back, &[]) // run at the sender's rank before it may leave
    });
    let job = setup.start(t, (Cell::new(0), tally))?;
    let right = (job.rank() + 1) % job.size();
    job.run_workers(4, |_, mut sender| -> Result<(), AmError> {
        for i in 0..RETURN_FLOOD {
            sender.request(right, hit, &[i])?;
            sender.request(sender.rank(), hit, &[i])?;
        }
        Ok(())
    })?;
    Ok(job.state().0.get()) // no barrier, no wait: the job's end does it
}

const RETURN_FLOOD: u64 = 2000;

#[test]
fn ranks_that_return_while_their_threads_requests_are_in_flight_serve_them_all() {
    for _ in 0..3 {
        let tally: Tally = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let t = tally.clone();
        let out = config(RETURN_SLOTS).threads(3, |setup| send_and_return(setup, Some(t.clone())));
        assert!(out.is_ok(), "{}", out.unwrap_err().chain());
        let all = 3 * 4 * 2 * RETURN_FLOOD;
        assert_eq!(tally[0].load(Ordering::Relaxed), all, "requests handled");
        assert_eq!(tally[1].load(Ordering::Relaxed), all, "replies run");
    }
}

#[test]
fn a_new_sender_never_reuses_a_slot_whose_answer_is_still_coming() {
    let out = config(STRESS_SLOTS).threads(2, |setup| -> amrq::Result<()> {
        let mut t = HandlerTable::new();
        let slow = t.call("slow", |_s: &(), _ctx, x: u64| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(x + 1)
        });
        let job = setup.start(t, ())?;
        if job.rank() == 0 {
            let (mut first, mut second) = (job.sender()?, job.sender()?);
            let done = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| -> amrq::Result<()> {
                let worker = s.spawn(|| -> Result<(), AmError> {
                    let a = first.call(1, slow, 10)?;
                    drop(first); // its block goes back while `a` is in flight
                    let b = second.call(1, slow, 20)?;
                    // Waits that end: two calls sharing a slot lose an answer.
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                    let take = |x: amrq::am::Answer<'_, u64>| {
                        while !x.is_ready() && std::time::Instant::now() < deadline {
                            std::thread::yield_now();
                        }
                        x.is_ready().then(|| x.wait())
                    };
                    let answers = (take(a), take(b));
                    done.store(true, Ordering::Release);
                    match answers {
                        (Some(Ok(11)), Some(Ok(21))) => Ok(()),
                        other => Err(format!("answers {other:?}").into()),
                    }
                });
                job.wait_until(|_| done.load(Ordering::Acquire))?;
                Ok(worker.join().expect("worker ran")?)
            })?;
        }
        job.barrier()
    });
    out.unwrap_or_else(|e| panic!("{}", e.chain()));
}

#[test]
fn a_sender_on_the_ranks_own_thread_fails_instead_of_waiting_for_itself() {
    let out = config(STRESS_SLOTS).threads(1, |setup| -> amrq::Result<()> {
        let mut t = HandlerTable::new();
        let id = t.call("id", |_s: &(), _ctx, x: u64| Ok(x));
        let job = setup.start(t, ())?;
        let mut sender = job.sender()?;
        match sender.call(0, id, 1)?.wait() {
            Err(AmError::WaitOnRankThread) => {}
            other => return Err(format!("{other:?}").into()),
        }
        job.poll()?; // the dropped call's answer lands and frees its slot
        Ok(())
    });
    out.unwrap_or_else(|e| panic!("{}", e.chain()));
}

/// Bytes of one thread's block in every rank's segment.
const BLOCK: usize = 96;

/// The bytes of put `seq` of thread `thread` of rank `src` into rank `dest`.
fn block(src: usize, thread: usize, dest: usize, seq: u64) -> [u8; BLOCK] {
    let v = value(src, thread, dest, seq);
    std::array::from_fn(|i| (mix(v ^ i as u64) >> 7) as u8)
}

/// Put, get, atomics and enqueue from `threads` threads per rank at once, `per` of each
/// to every rank: each thread puts its own block in every rank's segment and reads it
/// back, adds to every rank's counter and enqueues into every rank's shared queue, which
/// the rank's thread drains meanwhile (counted, checked in order per thread and summed).
/// Fails on any wrong byte, count or sum.
fn one_sided(setup: Setup, work: QueueId, threads: usize, per: u64) -> amrq::Result<()> {
    let job = setup.start(HandlerTable::<()>::new(), ())?;
    let (me, size) = (job.rank(), job.size());
    let rma = job.rma();
    let blocks = rma.alloc_symmetric(size * threads * BLOCK, 64)?;
    let counter = rma.alloc_symmetric(8, 8)?;
    job.barrier()?;
    let at = |src: usize, thread: usize| blocks + (src * threads + thread) * BLOCK;
    let all = (size * threads) as u64 * per;
    let (mut count, mut sum, mut disorder) = (0u64, 0u64, 0u64);
    // This thread serves while the workers run (across hosts their operations leave
    // through it), until they have all ended; a stall makes them give up, and fails.
    let (ended, give_up) = (AtomicU64::new(0), std::sync::atomic::AtomicBool::new(false));
    let (ended, give_up) = (&ended, &give_up);
    std::thread::scope(|s| -> amrq::Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let mut sender = job.sender()?;
                Ok(s.spawn(move || -> Result<(), amrq::Error> {
                    let mut work_of_thread = || -> Result<(), amrq::Error> {
                        let mut back = [0u8; BLOCK];
                        for seq in 0..per {
                            for dest in (0..size).map(|d| (d + me + thread) % size) {
                                let v = value(me, thread, dest, seq);
                                let p = payload(v, seq).unwrap_or_default();
                                while !sender.enqueue(dest, work, &[thread as u64, seq, v], &p)? {
                                    if give_up.load(Ordering::Relaxed) {
                                        return Err("gave up".into());
                                    }
                                    std::thread::yield_now(); // full: the rank's thread drains it
                                }
                                let b = block(me, thread, dest, seq);
                                sender.put(dest, at(me, thread), &b)?;
                                sender.get(dest, at(me, thread), &mut back)?;
                                if back != b {
                                    return Err(format!("rank {me} thread {thread}: put {seq} to {dest} read back wrong").into());
                                }
                                let add = amrq::conduit::AtomicOp::FetchAdd(v & 0xffff);
                                sender.atomic(dest, counter, add)?;
                                if give_up.load(Ordering::Relaxed) {
                                    return Err("gave up".into());
                                }
                            }
                        }
                        Ok(())
                    };
                    let done = work_of_thread();
                    // ORDERING: Release pairs with the serving loop's Acquire load.
                    ended.fetch_add(1, Ordering::Release);
                    done
                }))
            })
            .collect::<amrq::Result<_>>()?;
        let mut next = vec![0u64; size * threads];
        let (mut args, mut buf) = ([0u64; 8], vec![0u8; 256]);
        let (mut progress, mut last_ended, mut stalled) = (std::time::Instant::now(), 0, None);
        loop {
            // ORDERING: Acquire pairs with each worker's Release increment as it ends.
            let now_ended = ended.load(Ordering::Acquire);
            if now_ended == threads as u64 && (count == all || stalled.is_some()) {
                break;
            }
            if now_ended != last_ended {
                (last_ended, progress) = (now_ended, std::time::Instant::now());
            }
            if stalled.is_none() && progress.elapsed().as_secs() >= 30 {
                stalled = Some(format!(
                    "rank {me}: {count} of {all} frames, {now_ended} of {threads} threads ended, then nothing for 30 s"
                ));
                give_up.store(true, Ordering::Relaxed);
            }
            // Serving goes on after a failure: across hosts the workers need it to end.
            match job.rq().dequeue(work, &mut args, &mut buf) {
                Ok(Some(d)) => {
                    progress = std::time::Instant::now();
                    let key = d.source * threads + args[0] as usize;
                    if next[key] != args[1] {
                        disorder += 1;
                    }
                    next[key] = args[1] + 1;
                    sum = sum.wrapping_add(mix(args[2]) ^ payload_sum(&buf[..d.len]));
                    count += 1;
                }
                Ok(None) => std::thread::yield_now(),
                Err(e) => {
                    stalled.get_or_insert(format!("rank {me}: dequeue: {e}"));
                    give_up.store(true, Ordering::Relaxed);
                }
            }
        }
        let outcomes: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        if let Some(e) = stalled {
            return Err(e.into()); // the workers gave up because of it
        }
        for o in outcomes {
            o.expect("worker ran")?;
        }
        Ok(())
    })?;
    job.barrier()?; // every rank's threads are done
    let mut want_counter = 0u64;
    for src in 0..size {
        for thread in 0..threads {
            let mut last = [0u8; BLOCK];
            rma.get(me, at(src, thread), &mut last)?;
            if last != block(src, thread, me, per - 1) {
                return Err(format!(
                    "rank {me}: the last block of {src}'s thread {thread} is wrong"
                )
                .into());
            }
            for seq in 0..per {
                want_counter = want_counter.wrapping_add(value(src, thread, me, seq) & 0xffff);
            }
        }
    }
    let got = (count, sum, disorder, rma.load(me, counter)?);
    let want = (all, expected_sum(me, size, threads, per), 0, want_counter);
    job.barrier()?;
    match got == want {
        true => Ok(()),
        false => Err(format!(
            "rank {me}: (frames, checksum, out of order, counter) {got:?}, expected {want:?}"
        )
        .into()),
    }
}

#[test]
fn threads_put_get_add_and_enqueue_exactly_once() {
    for (ranks, threads, per) in [(2, 2, 2000), (3, 8, 200)] {
        let (cfg, work) = queue_config();
        let out = cfg.threads(ranks, |setup| one_sided(setup, work, threads, per));
        out.unwrap_or_else(|e| panic!("{}", e.chain()));
    }
}

/// [`config`] with the shared queue of [`one_sided`], small: its senders wait for room.
fn queue_config() -> (Config, QueueId) {
    let mut cfg = config(STRESS_SLOTS);
    let work = cfg.add(amrq::rq::QueueSpec::new("work", 128).shared());
    (cfg, work)
}

/// The processes' part.
#[test]
fn sending_threads_rank() {
    let Ok(what) = std::env::var("AMRQ_TEST_SENDING") else {
        return;
    };
    let (mut cfg, work) = queue_config();
    if what == "return" {
        cfg.sender_slots.set(RETURN_SLOTS);
    }
    cfg.run(move |setup| {
        let rank = setup.rank();
        match what.as_str() {
            "stress" => check_here(stress(setup, 4, 1500)?, rank)?,
            "one-sided" => one_sided(setup, work, 4, 200)?,
            "return" => drop(send_and_return(setup, None)?),
            "calls" => {
                let served = calls(setup, 4, 1000)?;
                let want = std::env::var("AMRQ_TEST_RANKS").map_or(0, |s| s.parse().unwrap_or(0))
                    * 4
                    * 1000;
                if served != want {
                    return Err(format!("rank {rank} served {served} calls, not {want}").into());
                }
            }
            what => killed_while_sent_to(setup, what == "killed-serving")?,
        }
        match marker::mark_ran(rank) {
            true => Ok(()),
            false => Err("cannot leave word that this rank ran".into()),
        }
    })
}

/// A process's own share of [`check`].
fn check_here((count, sum, disorder): (u64, u64, u64), rank: usize) -> amrq::Result<()> {
    let size = std::env::var("AMRQ_TEST_RANKS").map_or(2, |s| s.parse().unwrap_or(2));
    let want = (
        (size * 4) as u64 * 1500,
        expected_sum(rank, size, 4, 1500),
        0,
    );
    match (count, sum, disorder) == want {
        true => Ok(()),
        false => Err(format!(
            "rank {rank}: got {:?}, expected {want:?}",
            (count, sum, disorder)
        )
        .into()),
    }
}

/// Rank 1 kills itself (SIGKILL) once rank 0's threads are flooding it; rank 0's
/// threads must end with the failure, not wait for room forever. Rank 0's thread only
/// joins them, or, when `serving`, serves meanwhile (`run_workers`): across hosts its
/// threads' frames leave through it.
fn killed_while_sent_to(setup: Setup, serving: bool) -> amrq::Result<()> {
    let mut t = HandlerTable::new();
    let hit = t.request("hit", |n: &Cell<u64>, _ctx, _m| {
        n.set(n.get() + 1);
        Ok(())
    });
    let job = setup.start(t, Cell::new(0))?;
    if job.rank() == 1 {
        job.wait_until(|n| n.get() >= 1000)?;
        // SAFETY: a plain system call on this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    let flood = |mut sender: amrq::am::Sender<'_>| -> Result<(), AmError> {
        loop {
            sender.request(1, hit, &[])?;
        }
    };
    if serving {
        job.run_workers(4, |_, sender| flood(sender))?;
        return Err("the threads' sends to a killed rank all went".into());
    }
    std::thread::scope(|s| -> amrq::Result<()> {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let sender = job.sender()?;
                Ok(s.spawn(move || flood(sender)))
            })
            .collect::<amrq::Result<_>>()?;
        let errors: Vec<AmError> = workers
            .into_iter()
            .map(|w| w.join().expect("worker ran").expect_err("sends fail"))
            .collect();
        Err(errors.into_iter().next().expect("4 workers").into())
    })
}

/// `what` as `ranks` processes under `amrun`: its exit status, stdout and stderr.
fn under_amrun(ranks: usize, what: &str, token: &str) -> (i32, String, String) {
    let env = [
        ("AMRQ_TEST_SENDING", what.to_string()),
        ("AMRQ_TEST_RANKS", ranks.to_string()),
    ];
    let amrun = env!("CARGO_BIN_EXE_amrun");
    marker::under_amrun(amrun, "sending_threads_rank", ranks, &env, token)
}

#[test]
fn threads_of_ranks_as_processes_send_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (ranks, what) in [(3, "stress"), (2, "return"), (2, "calls"), (3, "one-sided")] {
        let token = marker::token();
        let (code, out, err) = under_amrun(ranks, what, &token);
        assert_eq!(code, 0, "{what}: stdout {out}\nstderr {err}");
        marker::all_ran(&token, ranks);
    }
}

#[test]
fn a_killed_rank_ends_the_job_while_threads_send_to_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let token = marker::token();
    let started = std::time::Instant::now();
    let (code, out, err) = under_amrun(2, "killed", &token);
    assert_ne!(code, 0, "stdout {out}\nstderr {err}");
    assert!(err.contains("rank 1"), "the killed rank is named: {err}");
    assert!(
        started.elapsed().as_secs() < 60,
        "ended in {:?}",
        started.elapsed()
    );
}

/// `what` as `per_host` ranks on each of the 2 hosts of `rig`, started by amrq's
/// launcher: how the job ended.
fn on_two_hosts(rig: &rig::Rig, per_host: usize, what: &str, token: &str) -> amrq::launch::Outcome {
    let mut l = rig.launcher(per_host, token, std::time::Duration::from_secs(180));
    l.env.push(("AMRQ_TEST_SENDING".into(), what.into()));
    l.env
        .push(("AMRQ_TEST_RANKS".into(), (2 * per_host).to_string()));
    let exe = std::env::current_exe().expect("test binary");
    l.run(exe.as_os_str(), &marker::child_args("sending_threads_rank"))
        .expect("job starts")
}

/// A rig of 2 hosts, or `None` where the test cannot run (it said why).
fn two_hosts(test: &str) -> Option<rig::Rig> {
    ucx_common::loopback_or_skip(test)?;
    rig::Rig::or_skip(2, test)
}

#[test]
fn threads_of_ranks_on_two_hosts_send_call_put_get_and_enqueue_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(rig) =
        two_hosts("threads_of_ranks_on_two_hosts_send_call_put_get_and_enqueue_exactly_once")
    else {
        return;
    };
    // 2 ranks per host: each thread sends to ranks of its host and of the other.
    for what in ["stress", "calls", "return", "one-sided"] {
        let token = marker::token();
        let out = on_two_hosts(&rig, 2, what, &token);
        assert_eq!(out.code, 0, "{what}: {:?}", out.failure);
        marker::all_ran(&token, 4);
    }
}

#[test]
fn a_rank_killed_on_another_host_ends_the_job_while_threads_send_to_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let test = "a_rank_killed_on_another_host_ends_the_job_while_threads_send_to_it";
    let Some(rig) = two_hosts(test) else { return };
    let started = std::time::Instant::now();
    let out = on_two_hosts(&rig, 1, "killed-serving", &marker::token());
    assert_ne!(out.code, 0, "{out:?}");
    let f = out.failure.expect("a failure");
    assert_eq!(f.rank, Some(1), "the killed rank is named: {f:?}");
    assert!(
        started.elapsed().as_secs() < 60,
        "ended in {:?}",
        started.elapsed()
    );
}
