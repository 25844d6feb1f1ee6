//! What every conduit must do, written once against the `Conduit` trait. Each case is
//! run by every rank of a job (SPMD): it gets the rank's endpoint and coordinates with
//! the others only through the conduit (its setup barrier and all-gather, and frames),
//! so it holds whether the ranks are threads, processes or hosts.

use crate::cpu::thread_cpu;
use amrq::conduit::mem::MemConduit;
use amrq::conduit::{
    AtomicOp, Channel, ChannelSpec, Conduit, ConduitError, ConduitSpec, Delivery, Fault, FaultKind,
    InterruptAlarm, InterruptChannels, Message, ReceivedFrame, Senders, Started,
};
use std::time::{Duration, Instant};

/// Polled, per-sender, rings the doorbell: the channel most cases use.
pub const MAIN: Channel = 0;
/// Two slots per sender: full after a frame or two.
pub const SMALL: Channel = 1;
/// One ring per receiver shared by every sender.
pub const SHARED: Channel = 2;
/// Only rank 0 may send into it.
pub const ONLY0: Channel = 3;
/// Polled, does not ring the doorbell (One-poll must scan it).
pub const QUIET: Channel = 4;
/// Carries frames flagged interrupt to the receiver's progress thread.
pub const INTR: Channel = 5;
/// Drained by the receiver's progress thread.
pub const ALARMS: Channel = 6;

/// Bytes of the segment each source may write in another rank's segment.
const PER_SOURCE: usize = 16 << 10;

/// The channels and sizes the suite needs of a conduit.
pub fn spec() -> ConduitSpec {
    let mut chans = vec![ChannelSpec::new(64).notify(true); 7];
    chans[SMALL] = ChannelSpec::new(2);
    chans[SHARED] = ChannelSpec::new(64).shared(true).notify(true);
    chans[ONLY0] = ChannelSpec::new(16).senders(Senders::Only(vec![0]));
    chans[QUIET] = ChannelSpec::new(16);
    chans[INTR] = ChannelSpec::new(16).delivery(Delivery::Interrupt);
    chans[ALARMS] = ChannelSpec::new(16).delivery(Delivery::Interrupt);
    ConduitSpec {
        interrupt_channel: Some(INTR),
        tag_on_buffers: 4,
        tag_on_bytes: 4096,
        segment_bytes: 256 << 10,
        ..ConduitSpec::new(chans)
    }
}

/// The suite's spec for the test named `test`: a suite whose conduit's name ends in
/// `_alone` sends each frame alone (coalescing off); the others coalesce, the default.
pub fn spec_for(test: &str) -> ConduitSpec {
    let mut s = spec();
    if test
        .split("::")
        .next()
        .is_some_and(|c| c.ends_with("_alone"))
    {
        s.coalescing.bytes = 0;
    }
    s
}

/// What a runner gives a case besides the endpoint.
pub struct Job<C> {
    /// Ends this rank as a crash would: gone without leaving the job cleanly.
    pub die: fn(C),
}

/// What went wrong, said by the rank that saw it.
#[derive(Debug)]
pub struct Failed(pub String);

impl From<ConduitError> for Failed {
    fn from(e: ConduitError) -> Self {
        Failed(e.to_string())
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A case's result.
pub type Outcome = Result<(), Failed>;

/// Longest any case waits for a peer.
const PATIENCE: Duration = Duration::from_secs(30);

fn fail<T>(c: &impl Conduit, what: impl std::fmt::Display) -> Result<T, Failed> {
    Err(Failed(format!("rank {}: {what}", c.rank())))
}

fn ok<T>(c: &impl Conduit, r: Result<T, ConduitError>, doing: &str) -> Result<T, Failed> {
    r.or_else(|e| fail(c, format!("{doing}: {e}")))
}

/// Waits a little for a frame on `chans`: the conduit's sleeping wait with a short
/// backstop, after checking that no peer died and that time is not up.
fn idle(c: &impl Conduit, chans: &[Channel], since: Instant) -> Outcome {
    ok(c, c.check_peers(), "a peer")?;
    if since.elapsed() > PATIENCE {
        return fail(c, format!("nothing arrived for {PATIENCE:?}"));
    }
    if chans.is_empty() {
        std::thread::yield_now();
        return Ok(());
    }
    let set = ok(c, c.poll_set(chans), "poll_set")?;
    ok(
        c,
        c.wait_for_arrival(&set, Duration::from_millis(5)),
        "wait",
    )
}

/// Sends `m` to `dest` on `ch`, trying again while the ring is full (the receiver
/// takes frames on its own, so this only waits).
fn send_when_room(c: &impl Conduit, dest: usize, ch: Channel, m: &Message<'_>) -> Outcome {
    let since = Instant::now();
    loop {
        match c.try_send(dest, ch, m) {
            Ok(()) => return Ok(()),
            Err(ConduitError::Busy) => idle(c, &[], since)?,
            Err(e) => return fail(c, format!("send: {e}")),
        }
    }
}

/// The bytes of message `seq` from `src` (`len` of them).
fn bytes(src: usize, seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (src as u64 * 131 + seq * 7 + i as u64) as u8)
        .collect()
}

/// The kinds of frame the exactly-once flood cycles through.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Short,
    Medium,
    Long,
    TagOn,
}

fn kind(seq: u64, all: bool) -> Kind {
    match (seq % 4, all) {
        (0, _) => Kind::Short,
        (2, true) => Kind::Long,
        (3, true) => Kind::TagOn,
        _ => Kind::Medium,
    }
}

/// Payload length of message `seq` of kind `k`.
fn length(k: Kind, seq: u64) -> usize {
    match k {
        Kind::Short => 0,
        Kind::Medium => (seq as usize * 37) % 600,
        Kind::Long => 64,
        Kind::TagOn => 1000 + (seq as usize % 3000),
    }
}

/// One try at sending message `seq` of the flood from this rank to `dest` on `ch`.
fn try_flood_send<C: Conduit>(
    c: &C,
    dest: usize,
    ch: Channel,
    seq: u64,
    all: bool,
) -> Result<bool, Failed> {
    let me = c.rank();
    let k = kind(seq, all);
    let payload = bytes(me, seq, length(k, seq));
    let args = [seq, (me as u64) << 32 | seq];
    let msg = Message {
        tag: 7,
        flags: 1,
        args: &args,
        payload: &payload,
    };
    let sent = match k {
        Kind::Short | Kind::Medium => c.try_send(dest, ch, &msg),
        // At most 64 frames per pair are in flight on a 64-slot ring, so 128 places per
        // source are never overwritten before their frame is taken.
        Kind::Long => c.try_send_long(dest, ch, &msg, me * PER_SOURCE + (seq as usize % 128) * 64),
        Kind::TagOn => c.try_send_tag_on(dest, ch, &msg),
    };
    match sent {
        Ok(()) => Ok(true),
        Err(ConduitError::Busy) => Ok(false),
        Err(e) => fail(c, format!("sending {seq} ({k:?}) to {dest}: {e}")),
    }
}

/// Checks a frame of the flood against what its sender sent, in order.
fn check_flood_frame<'a, C: Conduit>(
    c: &C,
    f: &impl ReceivedFrame<'a>,
    next: &mut [u64],
    all: bool,
) -> Outcome {
    let src = f.source();
    let seq = next[src];
    let k = kind(seq, all);
    let want = bytes(src, seq, length(k, seq));
    let args_ok = f.args() == [seq, (src as u64) << 32 | seq];
    let kind_ok = f.is_long() == (k == Kind::Long) && f.is_tag_on() == (k == Kind::TagOn);
    if !args_ok || !kind_ok || f.tag() != 7 || f.flags() & 0xf != 1 || f.payload() != want {
        return fail(
            c,
            format!(
                "from {src}: expected message {seq} ({k:?}), got args {:?}, long {}, tag-on {}, {} bytes",
                f.args(),
                f.is_long(),
                f.is_tag_on(),
                f.payload().len()
            ),
        );
    }
    next[src] += 1;
    Ok(())
}

/// Every rank sends `per_pair` frames to every rank (itself too) on `ch`, while taking
/// what arrives: each frame arrives exactly once, in its sender's order, intact.
fn flood<C: Conduit>(c: &C, ch: Channel, per_pair: u64, all_kinds: bool) -> Outcome {
    let n = c.size();
    let (mut sent, mut next) = (vec![0u64; n], vec![0u64; n]);
    let mut since = Instant::now();
    while sent.iter().any(|&s| s < per_pair) || next.iter().any(|&r| r < per_pair) {
        let mut moved = false;
        for (dest, s) in sent.iter_mut().enumerate() {
            while *s < per_pair && try_flood_send(c, dest, ch, *s, all_kinds)? {
                *s += 1;
                moved = true;
            }
        }
        let got = c.drain(ch, 64, |f| check_flood_frame(c, f, &mut next, all_kinds))?;
        if let Some(src) = (0..n).find(|&s| next[s] > per_pair) {
            return fail(c, format!("more than {per_pair} frames from {src}"));
        }
        if moved || got > 0 {
            since = Instant::now();
        } else {
            idle(c, &[ch], since)?;
        }
    }
    ok(c, c.barrier(), "barrier")?;
    // Nothing more arrives after the last expected frame.
    match ok(c, c.peek(ch), "peek")? {
        Some(f) => fail(c, format!("an extra frame from {}", f.source())),
        None => Ok(()),
    }
}

/// Short, Medium, Long and Tag-On frames on per-sender rings: exactly once, in order.
pub fn exactly_once_in_order<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    flood(&c, MAIN, 3000, true)
}

/// Short and Medium frames on a ring every sender shares: exactly once, in order.
pub fn exactly_once_in_order_shared<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    flood(&c, SHARED, 3000, false)
}

/// A full ring answers Busy and sends nothing; taking frames makes room again.
pub fn busy_on_full_ring_sends_nothing<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let me = c.rank();
    let mut accepted = 0u64;
    if me != 0 {
        loop {
            let args = [me as u64, accepted];
            match c.try_send(
                0,
                SMALL,
                &Message {
                    tag: 1,
                    args: &args,
                    ..Message::default()
                },
            ) {
                Ok(()) => accepted += 1,
                Err(ConduitError::Busy) => break,
                Err(e) => return fail(&c, format!("send: {e}")),
            }
            if accepted > c.caps().channels[SMALL].slots {
                return fail(
                    &c,
                    format!(
                        "{accepted} frames into a ring of {} slots",
                        c.caps().channels[SMALL].slots
                    ),
                );
            }
        }
        for _ in 0..100 {
            match c.try_send(
                0,
                SMALL,
                &Message {
                    tag: 1,
                    args: &[9, 9],
                    ..Message::default()
                },
            ) {
                Err(ConduitError::Busy) => {}
                other => return fail(&c, format!("full ring answered {other:?}")),
            }
        }
        if accepted == 0 {
            return fail(&c, "an empty ring refused a frame");
        }
    }
    let counts = ok(&c, c.allgather(accepted), "allgather")?;
    if me == 0 {
        let mut next = vec![0u64; c.size()];
        let want: u64 = counts.iter().sum();
        let (mut got, since) = (0, Instant::now());
        while got < want {
            let n = c.drain(SMALL, 16, |f| {
                let src = f.source();
                if f.args() != [src as u64, next[src]] {
                    return fail(
                        &c,
                        format!("from {src}: {:?}, expected {}", f.args(), next[src]),
                    );
                }
                next[src] += 1;
                Ok(())
            })?;
            got += n as u64;
            if n == 0 {
                idle(&c, &[SMALL], since)?;
            }
        }
        if next != counts {
            return fail(
                &c,
                format!("took {next:?}, senders had {counts:?} accepted"),
            );
        }
    }
    ok(&c, c.barrier(), "barrier")?;
    if me != 0 {
        // Room again, now that rank 0 took everything.
        ok(
            &c,
            c.try_send(
                0,
                SMALL,
                &Message {
                    tag: 1,
                    args: &[me as u64, accepted],
                    ..Message::default()
                },
            ),
            "send after drain",
        )?;
    }
    ok(&c, c.barrier(), "barrier")?;
    if me == 0 {
        let since = Instant::now();
        let mut got = 0;
        while got < c.size() - 1 {
            got += c.drain(SMALL, 16, |_| Ok::<_, ConduitError>(()))?;
            if got < c.size() - 1 {
                idle(&c, &[SMALL], since)?;
            }
        }
    }
    ok(&c, c.barrier(), "barrier")
}

/// The limits a conduit states in its caps hold exactly: the most args, the largest
/// Medium and Tag-On payloads, the segment's end; one past each is a typed error with
/// nothing sent; a kept Tag-On block stays readable after its frame is gone.
pub fn frame_limits<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let (me, n) = (c.rank(), c.size());
    let caps = c.caps().clone();
    let dest = (me + 1) % n;
    let args: Vec<u64> = (0..caps.max_args as u64 + 1).collect();
    let big = vec![0xa5u8; caps.channels[MAIN].max_payload + 1];
    let tag_on = vec![0x5au8; caps.tag_on_bytes + 1];
    let seg = caps.segment_bytes;
    let sent = |r: Result<(), ConduitError>, what: &str| ok(&c, r, what);
    let refused = |r: Result<(), ConduitError>, what: &str, want: fn(&ConduitError) -> bool| match r
    {
        Err(e) if want(&e) => Ok(()),
        other => fail(&c, format!("{what}: answered {other:?}")),
    };
    let m = |args, payload| Message {
        tag: 2,
        flags: 0,
        args,
        payload,
    };
    refused(
        c.try_send(dest, MAIN, &m(&args, &[])),
        "too many args",
        |e| matches!(e, ConduitError::TooManyArgs { .. }),
    )?;
    refused(
        c.try_send(dest, MAIN, &m(&[], &big)),
        "Medium too large",
        |e| matches!(e, ConduitError::PayloadTooLarge { .. }),
    )?;
    refused(
        c.try_send_tag_on(dest, MAIN, &m(&[], &tag_on)),
        "Tag-On too large",
        |e| matches!(e, ConduitError::TagOnTooLarge { .. }),
    )?;
    refused(
        c.try_send_long(dest, MAIN, &m(&[], &[1; 8]), seg - 7),
        "Long past the segment",
        |e| matches!(e, ConduitError::OutOfSegment { .. }),
    )?;
    refused(c.try_send(n, MAIN, &m(&[], &[])), "no such rank", |e| {
        matches!(e, ConduitError::NoSuchRank { .. })
    })?;
    refused(c.try_send(dest, 99, &m(&[], &[])), "no such channel", |e| {
        matches!(e, ConduitError::NoSuchChannel { .. })
    })?;
    // The largest of each, which must arrive whole.
    sent(
        c.try_send(dest, MAIN, &m(&args[..caps.max_args], &[])),
        "max args",
    )?;
    sent(
        c.try_send(dest, MAIN, &m(&[1], &big[1..])),
        "largest Medium",
    )?;
    sent(
        c.try_send_tag_on(dest, MAIN, &m(&[2], &tag_on[1..])),
        "largest Tag-On",
    )?;
    sent(
        c.try_send_long(dest, MAIN, &m(&[3], &[7; 8]), seg - 8),
        "Long at the segment's end",
    )?;
    let (mut got, since) = (0, Instant::now());
    let mut kept = None;
    while got < 4 {
        let Some(f) = ok(&c, c.peek(MAIN), "peek")? else {
            idle(&c, &[MAIN], since)?;
            continue;
        };
        let good = match got {
            0 => f.args() == &args[..caps.max_args] && f.payload().is_empty(),
            1 => f.args() == [1] && f.payload() == big[1..],
            2 => f.args() == [2] && f.is_tag_on() && f.payload() == tag_on[1..],
            _ => f.args() == [3] && f.is_long() && f.payload() == [7; 8],
        };
        if !good {
            return fail(
                &c,
                format!(
                    "frame {got} arrived changed: args {:?}, {} bytes",
                    f.args(),
                    f.payload().len()
                ),
            );
        }
        got += 1;
        if f.is_tag_on() {
            kept = f.keep();
            if kept.is_none() {
                return fail(&c, "keep() lost a Tag-On block");
            }
        } else {
            f.release();
        }
    }
    match kept {
        Some(block) if *block == tag_on[1..] => {}
        _ => return fail(&c, "the kept Tag-On block changed after its frame left"),
    }
    ok(&c, c.barrier(), "barrier")
}

/// One-poll returns the first frame of the first non-empty channel of its set, in
/// priority order, whether or not a channel rings the doorbell; nothing when all are
/// empty.
pub fn one_poll_in_priority_order<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let me = c.rank();
    let set = ok(&c, c.poll_set(&[MAIN, QUIET]), "poll_set")?;
    if ok(&c, c.one_poll(&set), "one_poll")?.is_some() {
        return fail(&c, "One-poll of empty channels found a frame");
    }
    ok(&c, c.barrier(), "barrier")?;
    if me == 1 {
        for (ch, v) in [(QUIET, 1u64), (QUIET, 2), (MAIN, 3)] {
            ok(
                &c,
                c.try_send(
                    0,
                    ch,
                    &Message {
                        tag: 3,
                        args: &[v],
                        ..Message::default()
                    },
                ),
                "send",
            )?;
        }
    }
    ok(&c, c.barrier(), "barrier")?;
    if me == 0 {
        let mut order = Vec::new();
        let since = Instant::now();
        while order.len() < 3 {
            match ok(&c, c.one_poll(&set), "one_poll")? {
                Some((ch, f)) => {
                    order.push((ch, f.args()[0]));
                    f.release();
                }
                None => idle(&c, &[MAIN, QUIET], since)?,
            }
        }
        if order != [(MAIN, 3), (QUIET, 1), (QUIET, 2)] {
            return fail(&c, format!("One-poll took {order:?}"));
        }
        if ok(&c, c.one_poll(&set), "one_poll")?.is_some() {
            return fail(&c, "One-poll found a fourth frame");
        }
    }
    ok(&c, c.barrier(), "barrier")
}

/// A blocking wait sleeps until a frame arrives (well before its backstop), and
/// returns after its backstop when none does.
pub fn sleeping_wait_wakes_on_arrival<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let me = c.rank();
    let set = ok(&c, c.poll_set(&[MAIN]), "poll_set")?;
    if me == 0 {
        let t = Instant::now();
        ok(
            &c,
            c.wait_for_arrival(&set, Duration::from_millis(50)),
            "wait",
        )?;
        if t.elapsed() > Duration::from_secs(10) {
            return fail(&c, format!("a 50 ms wait took {:?}", t.elapsed()));
        }
    }
    // Woken by a sender of each kind (in a combined conduit, of each half).
    for sender in [1, c.size() - 1] {
        ok(&c, c.barrier(), "barrier")?;
        if me == sender {
            std::thread::sleep(Duration::from_millis(100)); // rank 0 is asleep by now
            let m = Message {
                tag: 4,
                args: &[sender as u64],
                ..Message::default()
            };
            ok(&c, c.try_send(0, MAIN, &m), "send")?;
        }
        if me == 0 {
            let (t, cpu) = (Instant::now(), thread_cpu());
            loop {
                if let Some(f) = ok(&c, c.peek(MAIN), "peek")? {
                    let v = f.args().to_vec();
                    f.release();
                    if v != [sender as u64] {
                        return fail(&c, format!("woke to {v:?}"));
                    }
                    break;
                }
                if t.elapsed() > PATIENCE {
                    return fail(&c, "the frame never woke the wait");
                }
                ok(
                    &c,
                    c.wait_for_arrival(&set, Duration::from_secs(20)),
                    "wait",
                )?;
            }
            // One 20 s backstop would be 20 s: the frame woke it; and it slept meanwhile
            // (spinning ~100 ms would cost ~100 ms of this thread's time).
            let (took, busy) = (t.elapsed(), thread_cpu() - cpu);
            if took > Duration::from_secs(10) || busy > Duration::from_millis(40) {
                return fail(
                    &c,
                    format!("woken by {sender} after {took:?}, {busy:?} of it on the CPU"),
                );
            }
        }
    }
    ok(&c, c.barrier(), "barrier")
}

/// Frames of an Interrupt channel, and frames flagged interrupt on a polled one, reach
/// the receiver's progress thread without the receiver polling; polling an Interrupt
/// channel is refused.
pub fn interrupts_deliver_without_polling<C: Conduit>(mut c: C, _: &Job<C>) -> Outcome {
    const EACH: u64 = 200;
    let (me, n) = (c.rank(), c.size());
    let senders = (n - 1) as u64;
    let thread = if me == 0 {
        let Some(rx) = c.take_interrupts() else {
            return fail(&c, "no Interrupt channels to take");
        };
        if c.take_interrupts().is_some() {
            return fail(&c, "Interrupt channels taken twice");
        }
        match c.drain(ALARMS, 1, |_| Ok::<_, ConduitError>(())) {
            Err(ConduitError::DeliveredByInterrupts { .. }) => {}
            other => {
                return fail(
                    &c,
                    format!("polling an Interrupt channel answered {other:?}"),
                )
            }
        }
        Some(std::thread::spawn(move || {
            progress_thread(rx, n, 2 * EACH * senders)
        }))
    } else {
        None
    };
    ok(&c, c.barrier(), "barrier")?;
    if me != 0 {
        for i in 0..EACH {
            for (ch, flags) in [(ALARMS, 0), (MAIN, Message::INTERRUPT)] {
                let m = Message {
                    tag: 5,
                    flags,
                    args: &[me as u64, i],
                    payload: &[],
                };
                send_when_room(&c, 0, ch, &m)?;
            }
        }
    }
    if let Some(t) = thread {
        // Rank 0 never polls: the thread alone takes the frames.
        let seen = t
            .join()
            .map_err(|_| Failed("the progress thread panicked".into()))??;
        for (src, per) in seen.iter().enumerate().skip(1) {
            if *per != [EACH, EACH] {
                return fail(
                    &c,
                    format!("from {src}: (ALARMS, flagged on MAIN) = {per:?}, want {EACH} each"),
                );
            }
        }
        if ok(&c, c.peek(MAIN), "peek")?.is_some() {
            return fail(&c, "a frame flagged interrupt was left on MAIN");
        }
    }
    ok(&c, c.barrier(), "barrier")
}

/// A progress thread over `rx`: takes `want` frames (sleeping on the alarm when idle),
/// checks each sender's order per channel, counts them per (source, channel).
fn progress_thread<R: InterruptChannels>(
    rx: R,
    ranks: usize,
    want: u64,
) -> Result<Vec<[u64; 2]>, Failed> {
    let mut seen = vec![[0u64; 2]; ranks];
    let (alarm, since) = (rx.alarm(), Instant::now());
    let mut got = 0;
    while got < want {
        let n = rx.drain(64, |ch, f| {
            let i = usize::from(ch == MAIN);
            let src = f.source();
            if ch != MAIN && ch != ALARMS || f.args() != [src as u64, seen[src][i]] {
                return Err(Failed(format!("channel {ch} from {src}: {:?}", f.args())));
            }
            seen[src][i] += 1;
            Ok(())
        })?;
        got += n as u64;
        if n == 0 {
            if since.elapsed() > PATIENCE {
                return Err(Failed(format!(
                    "the progress thread took {got} of {want} frames"
                )));
            }
            alarm.sleep_if(|| !rx.any_ready(), Duration::from_millis(20));
        }
    }
    Ok(seen)
}

/// Completes a one-sided operation: at once, or by asking the conduit until it says.
fn complete<C: Conduit>(
    c: &C,
    started: Result<Started, ConduitError>,
    what: &str,
) -> Result<u64, Failed> {
    match ok(c, started, what)? {
        Started::Done(v) => Ok(v),
        Started::InFlight(t) => {
            let since = Instant::now();
            loop {
                if let Some(v) = ok(c, c.op_test(t), what)? {
                    return Ok(v);
                }
                if since.elapsed() > PATIENCE {
                    return fail(c, format!("{what} never completed"));
                }
                std::thread::yield_now();
            }
        }
    }
}

/// Put and get move bytes between segments, complete when the conduit says so (at
/// once, by `op_test`, or by `flush`), and refuse ranges outside the segment; a conduit
/// without them says Unsupported.
pub fn put_get_complete<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let (me, n) = (c.rank(), c.size());
    let seg = c.caps().segment_bytes;
    if !c.caps().flags.put_get {
        return match c.put_nb((me + 1) % n, 0, &[1]) {
            Err(ConduitError::Unsupported { .. }) => Ok(()),
            other => fail(&c, format!("put without put_get answered {other:?}")),
        };
    }
    let base = |src: usize| (128 << 10) + src * 4096;
    // Some complete through op_test, the rest through flush.
    let mut pending = Vec::new();
    for dest in 0..n {
        let data = bytes(me, dest as u64, 4096);
        match ok(&c, c.put_nb(dest, base(me), &data), "put")? {
            Started::Done(_) => {}
            Started::InFlight(t) if dest % 2 == 0 => pending.push(t),
            Started::InFlight(_) => {}
        }
    }
    for t in pending {
        complete(&c, Ok(Started::InFlight(t)), "put")?;
    }
    ok(&c, c.flush(), "flush")?;
    ok(&c, c.barrier(), "barrier")?;
    // Rank x's put is at base(x) of every segment.
    for (src, x) in (0..n).flat_map(|s| (0..n).map(move |x| (s, x))) {
        let mut back = vec![0u8; 4096];
        // SAFETY: `back` lives until the get is complete (`complete` waits for it).
        let got = unsafe { c.get_nb(src, base(x), back.as_mut_ptr(), back.len()) };
        complete(&c, got, "get")?;
        if back != bytes(x, src as u64, 4096) {
            return fail(
                &c,
                format!("{src}'s segment does not hold what {x} put there"),
            );
        }
    }
    let mut b = [0u8; 8];
    // SAFETY: `b` outlives the call; an error leaves nothing in flight.
    let wrapping_get = unsafe { c.get_nb(0, usize::MAX - 2, b.as_mut_ptr(), 8) };
    for (r, what) in [
        (c.put_nb(0, seg - 4, &[0; 8]), "a put past the segment"),
        (wrapping_get, "a get past the end of memory"),
        (c.put_nb(n, 0, &[0]), "a put to no rank"),
    ] {
        if r.is_ok() {
            return fail(&c, format!("{what} was accepted"));
        }
    }
    ok(&c, c.barrier(), "barrier")
}

/// A put from a borrowed buffer reads it until the conduit answers for it, and no
/// longer: each buffer is overwritten as soon as its put is complete, and the targets
/// still hold what it held before.
pub fn borrowed_puts_read_until_answered<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let (me, n) = (c.rank(), c.size());
    if !c.caps().flags.put_get {
        return Ok(());
    }
    let base = |src: usize| (160 << 10) + src * PER_SOURCE;
    let mut buffers: Vec<Vec<u8>> = (0..n)
        .map(|dest| bytes(me, 100 + dest as u64, PER_SOURCE))
        .collect();
    let mut started = Vec::new();
    for (dest, b) in buffers.iter().enumerate() {
        // SAFETY: each buffer is written again only after its put is complete (below).
        let s = unsafe { c.put_nb_borrowed(dest, base(me), b.as_ptr(), b.len()) };
        started.push(s);
    }
    for (s, b) in started.into_iter().zip(&mut buffers) {
        complete(&c, s, "borrowed put")?;
        b.fill(0xee);
    }
    ok(&c, c.barrier(), "barrier")?;
    for src in 0..n {
        let mut back = vec![0u8; PER_SOURCE];
        // SAFETY: `back` lives until the get is complete (`complete` waits for it).
        let got = unsafe { c.get_nb(me, base(src), back.as_mut_ptr(), back.len()) };
        complete(&c, got, "get")?;
        if back != bytes(src, 100 + me as u64, PER_SOURCE) {
            return fail(&c, format!("{src}'s borrowed put is not in place here"));
        }
    }
    ok(&c, c.barrier(), "barrier")
}

/// Remote atomics are atomic against every rank's, return the value before, and refuse
/// misaligned or outside words.
pub fn atomics_are_atomic<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    const ADDS: u64 = 2000;
    let (me, n) = (c.rank(), c.size());
    if !c.caps().flags.atomics {
        return match c.atomic_nb(0, 0, AtomicOp::Load) {
            Err(ConduitError::Unsupported { .. }) => Ok(()),
            other => fail(&c, format!("an atomic without atomics answered {other:?}")),
        };
    }
    let (word, flag) = (64usize, 72usize);
    let mut olds = Vec::with_capacity(ADDS as usize);
    for _ in 0..ADDS {
        olds.push(complete(
            &c,
            c.atomic_nb(0, word, AtomicOp::FetchAdd(1)),
            "fetch_add",
        )?);
    }
    if olds.windows(2).any(|w| w[0] >= w[1]) {
        return fail(&c, "fetch_add returned values that did not grow");
    }
    ok(&c, c.barrier(), "barrier")?;
    // Exactly one rank wins the compare-and-swap.
    let won = complete(
        &c,
        c.atomic_nb(
            0,
            flag,
            AtomicOp::CompareSwap {
                current: 0,
                new: me as u64 + 1,
            },
        ),
        "cas",
    )? == 0;
    let wins = ok(&c, c.allgather(u64::from(won)), "allgather")?;
    if wins.iter().sum::<u64>() != 1 {
        return fail(&c, format!("compare-and-swap won by {wins:?}"));
    }
    let total = complete(&c, c.atomic_nb(0, word, AtomicOp::Load), "load")?;
    if total != ADDS * n as u64 {
        return fail(&c, format!("{total} after {n} × {ADDS} adds"));
    }
    match c.atomic_nb(0, word + 4, AtomicOp::Load) {
        Err(ConduitError::Misaligned { .. }) => {}
        other => return fail(&c, format!("a misaligned atomic answered {other:?}")),
    }
    if c.atomic_nb(0, c.caps().segment_bytes, AtomicOp::Load)
        .is_ok()
    {
        return fail(&c, "an atomic past the segment was accepted");
    }
    ok(&c, c.barrier(), "barrier")
}

/// A rank that leaves cleanly: what it sent before is delivered, others see it gone,
/// and once all have gone a receiver knows nothing more can come.
pub fn departed_peers_are_seen_and_their_frames_delivered<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    const SENT: u64 = 40;
    let (me, n) = (c.rank(), c.size());
    ok(&c, c.barrier(), "barrier")?;
    if me != 0 {
        for i in 0..SENT {
            let m = Message {
                tag: 6,
                args: &[i],
                ..Message::default()
            };
            send_when_room(&c, 0, MAIN, &m)?;
        }
        drop(c); // leaves the job
        return Ok(());
    }
    let since = Instant::now();
    while !c.all_peers_left() {
        if since.elapsed() > PATIENCE {
            let stay: Vec<_> = (1..n).filter(|&r| !c.peer_left(r)).collect();
            return fail(&c, format!("ranks {stay:?} never appeared to leave"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if (1..n).any(|r| !c.peer_left(r)) || c.peer_left(0) {
        return fail(&c, "peer_left disagrees with all_peers_left");
    }
    let mut next = vec![0u64; n];
    c.drain(MAIN, usize::MAX, |f| {
        let src = f.source();
        if f.args() != [next[src]] {
            return fail(&c, format!("from {src}: {:?}", f.args()));
        }
        next[src] += 1;
        Ok(())
    })?;
    if next[1..].iter().any(|&k| k != SENT) {
        return fail(&c, format!("after they left, took {next:?} of {SENT} each"));
    }
    Ok(())
}

/// A rank that dies (gone without leaving) is reported as dead to a rank that checks.
pub fn dead_peer_is_reported<C: Conduit>(c: C, job: &Job<C>) -> Outcome {
    let entered = c.barrier();
    if c.rank() == 1 {
        (job.die)(c);
        return Ok(());
    }
    // The barrier itself may be the first to see rank 1 gone (it left it first).
    let mut seen = entered;
    let since = Instant::now();
    loop {
        match seen {
            Err(ConduitError::PeerDead { rank: 1, .. }) => return Ok(()),
            Err(e) => return fail(&c, format!("a wait for rank 1: {e}")),
            Ok(()) if since.elapsed() > PATIENCE => return fail(&c, "rank 1 died unnoticed"),
            Ok(()) => std::thread::sleep(Duration::from_millis(2)),
        }
        seen = c.check_peers();
    }
}

/// A rank not allowed to send into a channel is refused, with nothing delivered; an
/// allowed one is not.
pub fn sender_not_permitted_is_refused<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let me = c.rank();
    let m = Message {
        tag: 8,
        args: &[me as u64],
        ..Message::default()
    };
    let dest = (me + 1) % c.size();
    match (me, c.try_send(dest, ONLY0, &m)) {
        (0, Ok(())) => {}
        (0, other) => return fail(&c, format!("the permitted sender got {other:?}")),
        (_, Err(ConduitError::NotPermitted { .. })) => {}
        (_, other) => return fail(&c, format!("a sender not permitted got {other:?}")),
    }
    ok(&c, c.barrier(), "barrier")?;
    let since = Instant::now();
    let mut got = Vec::new();
    while me == 1 && got.is_empty() {
        c.drain(ONLY0, 8, |f| {
            got.push(f.source());
            Ok::<_, ConduitError>(())
        })?;
        if got.is_empty() {
            idle(&c, &[ONLY0], since)?;
        }
    }
    ok(&c, c.barrier(), "barrier")?;
    c.drain(ONLY0, 8, |f| {
        got.push(f.source());
        Ok::<_, ConduitError>(())
    })?;
    let want: &[usize] = if me == 1 { &[0] } else { &[] };
    if got != want || c.dropped(ONLY0) != 0 {
        return fail(
            &c,
            format!("took frames from {got:?}, dropped {}", c.dropped(ONLY0)),
        );
    }
    Ok(())
}

/// A fault recorded against a peer (what a layer above does with a frame a correct
/// peer never sends) is reported by `faults` against that peer, in the job's ranks,
/// and against no other.
pub fn faults_are_recorded_against_the_sender<C: Conduit>(c: C, _: &Job<C>) -> Outcome {
    let (me, n) = (c.rank(), c.size());
    let blamed = (me + 1) % n;
    if !c.faults().is_empty() {
        return fail(&c, format!("faults before any: {:?}", c.faults()));
    }
    for id in [1, 2] {
        c.record_fault(Fault {
            source: Some(blamed),
            channel: 0,
            kind: FaultKind::UnknownHandler { id },
        });
    }
    let faults = c.faults();
    let sources: Vec<_> = faults.recent().map(|f| f.source).collect();
    if faults.of(blamed) != 2 || faults.total() != 2 || sources != [Some(blamed); 2] {
        return fail(
            &c,
            format!("recorded 2 against rank {blamed}, read {faults:?}"),
        );
    }
    Ok(())
}

/// A send of one frame by some thread (the endpoint's, or an injector's).
type SendFn<'a> = Box<dyn FnMut(usize, &Message<'_>) -> Result<(), ConduitError> + 'a>;

/// Frames from one sending thread: every receiver checks them exactly once, in order,
/// with their checksum.
fn check_word(src: usize, thread: u64, seq: u64) -> u64 {
    ((src as u64) << 48 ^ thread << 32 ^ seq).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Several threads of every rank send at once into the shared channel, each through
/// its own injector, while the endpoint's own thread sends there too and drains it:
/// every frame arrives exactly once, in order per sending thread, with its checksum.
pub fn injectors_send_exactly_once(c: MemConduit, _: &Job<MemConduit>) -> Outcome {
    const THREADS: u64 = 3;
    const PER_DEST: u64 = 400;
    let (me, n) = (c.rank(), c.size());
    let others: Vec<usize> = (0..n).filter(|&d| d != me).collect();
    let send_all = |mut send: SendFn<'_>, thread: u64| {
        for seq in 0..PER_DEST {
            for &d in &others {
                let args = [thread, seq, check_word(me, thread, seq)];
                let m = Message {
                    tag: 9,
                    args: &args,
                    ..Message::default()
                };
                let since = Instant::now();
                loop {
                    match send(d, &m) {
                        Ok(()) => break,
                        Err(ConduitError::Busy) if since.elapsed() < PATIENCE => {
                            std::thread::yield_now()
                        }
                        Err(e) => return Err(format!("thread {thread} to {d}: {e}")),
                    }
                }
            }
        }
        Ok(())
    };
    let want = others.len() as u64 * (THREADS + 1) * PER_DEST;
    let mut next = vec![vec![0u64; THREADS as usize + 1]; n];
    let mut got = 0u64;
    let outcome: Result<(), String> = std::thread::scope(|s| {
        let mut workers = Vec::new();
        for t in 0..THREADS {
            let mut inj = c.injector(SHARED).map_err(|e| format!("injector: {e}"))?;
            let send_all = &send_all;
            workers.push(s.spawn(move || send_all(Box::new(move |d, m| inj.try_send(d, m)), t)));
        }
        // The endpoint's own sends, interleaved with its drains.
        let mut own = (0..PER_DEST).flat_map(|seq| others.iter().map(move |&d| (d, seq)));
        let mut pending = own.next();
        let since = Instant::now();
        while got < want || pending.is_some() {
            if let Some((d, seq)) = pending {
                let args = [THREADS, seq, check_word(me, THREADS, seq)];
                let m = Message {
                    tag: 9,
                    args: &args,
                    ..Message::default()
                };
                match c.try_send(d, SHARED, &m) {
                    Ok(()) => pending = own.next(),
                    Err(ConduitError::Busy) => {}
                    Err(e) => return Err(format!("own send to {d}: {e}")),
                }
            }
            let drained = c
                .drain(SHARED, 64, |f| -> Result<(), Failed> {
                    let (src, a) = (f.source(), f.args());
                    if f.tag() != 9 || a.len() != 3 || a[0] > THREADS {
                        return Err(Failed(format!(
                            "a frame this test did not send, from {src}"
                        )));
                    }
                    let (t, seq) = (a[0] as usize, a[1]);
                    if seq != next[src][t] || a[2] != check_word(src, a[0], seq) {
                        return Err(Failed(format!(
                            "from {src} thread {t}: seq {seq} (wanted {}), checksum {}",
                            next[src][t],
                            a[2] == check_word(src, a[0], seq)
                        )));
                    }
                    next[src][t] += 1;
                    got += 1;
                    Ok(())
                })
                .map_err(|Failed(e)| e)?;
            if drained == 0 && since.elapsed() > 4 * PATIENCE {
                return Err(format!("{got} of {want} frames after {:?}", 4 * PATIENCE));
            }
        }
        for w in workers {
            w.join()
                .map_err(|_| "a sending thread panicked".to_string())??;
        }
        Ok(())
    });
    if let Err(e) = outcome {
        return fail(&c, e);
    }
    ok(&c, c.barrier(), "barrier")
}
