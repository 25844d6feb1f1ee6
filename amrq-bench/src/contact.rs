//! The first message to a new peer across hosts. Three ranks, rank 0 on one host, 1
//! and 2 on the other, join over UCX alone and do nothing else first; rank 0 waits 200 ms (rank 1 polls meanwhile), then
//! times its first round trip to rank 1 (a frame there and its echo back), then
//! [`TRIPS`] more, each timed, then waits 200 ms again and times one more round trip
//! to its now known peer: what a round trip costs a rank that was idle as long. The
//! report gives the first in units of the median of the others, beside the one after
//! the second wait; last, right after [`WARM`] more round trips with rank 1, rank 0
//! times its first round trip to rank 2 (a third rank, on rank 1's host): a first
//! contact by a rank that is busy, not idle (`amrq-bench startup`'s "first contact"
//! table). The job runs twice
//! a round: as a job runs by default, its first messages datagrams (the pair connects
//! past them: the slowest of the later trips), and with datagrams off, each rank
//! connecting to the other at its first message.
//!
//! What a connection costs a core is measured in a job of its own
//! (`startup --contact-cpu`, datagrams off), since a rank that polls without a pause
//! spends its core whatever it waits for: there every rank naps [`NAP`] between empty
//! polls, and rank 0 makes a first round trip to each of [`CPU_PEERS`] peers on the
//! other host in turn, giving its core time for each less that of as many naps and
//! polls with nothing to take: its first connection costs more than the later ones.

use crate::reference::median;
use crate::startup::Link;
use crate::summary::value;
use amrq::conduit::ucx::UcxConduit;
use amrq::conduit::{ChannelSpec, Conduit, ConduitError, ConduitSpec, Message, ReceivedFrame};
use std::time::{Duration, Instant};

/// Round trips timed after the first.
pub const TRIPS: usize = 2000;

/// Round trips rank 0 makes with rank 1 just before its first one to rank 2.
pub const WARM: u64 = 100;

/// The peers rank 0 connects to, one after another, in the `--contact-cpu` job (all
/// on the second host).
pub const CPU_PEERS: usize = 5;

/// The pause between two empty polls while the connection's core time is measured.
pub const NAP: Duration = Duration::from_micros(20);

/// One round: the first round trip and the median of the next [`TRIPS`], ns.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Contact {
    /// The first round trip to the new peer, ns (its first messages datagrams).
    pub first_ns: f64,
    /// The median of the round trips after it, ns.
    pub steady_ns: f64,
    /// The slowest of those: the one on which the pair connected, ns.
    #[serde(default)]
    pub slowest_ns: f64,
    /// A round trip to the known peer after the same 200 ms of idleness, ns.
    #[serde(default)]
    pub idle_ns: f64,
    /// The first round trip to another new peer (rank 2, on rank 1's host) right after
    /// [`WARM`] round trips with rank 1, ns.
    #[serde(default)]
    pub busy_first_ns: f64,
    /// The first round trip with datagrams off (each rank connects to the other on the
    /// way), ns.
    #[serde(default)]
    pub connect_first_ns: f64,
    /// The median of the round trips after that one, ns.
    #[serde(default)]
    pub connect_steady_ns: f64,
    /// [`Contact::busy_first_ns`] with datagrams off, ns.
    #[serde(default)]
    pub connect_busy_first_ns: f64,
    /// Bytes of rank 0's card (its UCX worker address and segment key, as the
    /// rendezvous sends them).
    #[serde(default)]
    pub card_bytes: usize,
    /// Rank 0's core time for its first round trip to a peer beyond that of as many
    /// naps and polls with nothing there: its end of its first connection, seconds.
    #[serde(default)]
    pub connect_cpu_s: f64,
    /// The same for its later connections (to other peers), the median.
    #[serde(default)]
    pub connect_later_s: f64,
}

/// The ranks' part (`amrq-bench startup --contact`): rank 0 times, rank 1 echoes;
/// rank 0 prints `contact: first_ns=… steady_ns=…` (`datagrams` off: the pair
/// connects at its first message); `napping` (`--contact-cpu`): the first round trips
/// alone, polling with naps, and rank 0 prints `contact: connect_cpu_s=… later_s=…`.
/// Ends the process.
pub fn rank_part(napping: bool, datagrams: bool) -> ! {
    let done = if napping {
        connect_cpu()
    } else {
        run(datagrams)
    };
    match done {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("amrq-bench startup --contact: {e}");
            std::process::exit(1)
        }
    }
}

/// This rank's UCX conduit of the job `amrun --hosts` started, one channel; its pairs'
/// first messages datagrams or not.
fn join(datagrams: bool) -> Result<UcxConduit, String> {
    join_named(datagrams).map(|(c, _)| c)
}

/// [`join`], and the job's id.
fn join_named(datagrams: bool) -> Result<(UcxConduit, String), String> {
    let place = amrq::bootstrap::env::detect_across_hosts()
        .map_err(|e| e.to_string())?
        .ok_or("not a rank of a job across hosts (start it with amrun --hosts)")?;
    let id = place.id.clone();
    let spec = ConduitSpec {
        datagrams,
        ..ConduitSpec::new(vec![ChannelSpec::new(64)])
    };
    let c = amrq::conduit::ucx::join(&place, &spec, &[], Duration::from_secs(60));
    Ok((c.map_err(|e| e.to_string())?, id))
}

fn run(datagrams: bool) -> Result<(), String> {
    let (c, id) = join_named(datagrams)?;
    // Rank 1 tells rank 2, beside it, when to start polling: three ranks that poll
    // without a pause would share two cores.
    let flag = std::env::temp_dir().join(format!("amrq-contact-{id}"));
    if c.size() != 3 {
        return Err(format!("{} ranks: this measurement takes 3", c.size()));
    }
    let trip = |peer, i: u64| -> Result<(), ConduitError> {
        let m = Message {
            tag: 1,
            args: &[i],
            ..Message::default()
        };
        loop {
            match c.try_send(peer, 0, &m) {
                Err(ConduitError::Busy) => {
                    c.peek(0)?;
                }
                sent => return sent,
            }
        }
    };
    let take = || -> Result<u64, ConduitError> {
        loop {
            if let Some(f) = c.peek(0)? {
                let i = f.args().first().copied().unwrap_or(u64::MAX);
                f.release();
                return Ok(i);
            }
        }
    };
    let rounds = TRIPS as u64 + 2;
    let echo = || -> Result<(), String> {
        let i = take().map_err(|e| e.to_string())?;
        trip(0, i).map_err(|e| e.to_string())
    };
    let pause = |ms| std::thread::sleep(Duration::from_millis(ms));
    if c.rank() == 1 {
        for _ in 0..rounds - 1 + WARM {
            echo()?;
        }
        std::fs::write(&flag, b"").map_err(|e| format!("{}: {e}", flag.display()))?;
        pause(100); // rank 0 times rank 2, then waits 200 ms
        echo()?;
        let _ = std::fs::remove_file(&flag);
        return c.barrier().map_err(|e| e.to_string());
    }
    if c.rank() == 2 {
        while !flag.exists() {
            pause(1);
        }
        echo()?;
        c.flush().map_err(|e| e.to_string())?; // the echo leaves, and is acknowledged
        pause(400); // out of the way of the last round trip
        return c.barrier().map_err(|e| e.to_string());
    }
    // Rank 1 is polling by then: what is timed is the first contact, not its start.
    std::thread::sleep(Duration::from_millis(200));
    let mut busy = f64::NAN;
    let mut times = Vec::with_capacity(TRIPS + 2);
    for i in 0..rounds {
        if i == rounds - 1 {
            // Busy with rank 1, then, as busy, a first round trip to rank 2 once it
            // polls (told by rank 1 after its last echo here).
            for w in 0..WARM {
                trip(1, w).map_err(|e| e.to_string())?;
                take().map_err(|e| e.to_string())?;
            }
            let polls = Instant::now();
            while polls.elapsed() < Duration::from_millis(10) {
                c.peek(0).map_err(|e| e.to_string())?;
            }
            let t = Instant::now();
            trip(2, 0).map_err(|e| e.to_string())?;
            take().map_err(|e| e.to_string())?;
            busy = t.elapsed().as_nanos() as f64;
            std::thread::sleep(Duration::from_millis(200));
        }
        let t = Instant::now();
        trip(1, i).map_err(|e| e.to_string())?;
        let back = take().map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_nanos() as f64);
        if back != i {
            return Err(format!("round trip {i} came back as {back}"));
        }
    }
    let (first, idle) = (times[0], times[TRIPS + 1]);
    let later = &mut times[1..=TRIPS];
    let slowest = later.iter().copied().fold(0.0, f64::max);
    println!(
        "contact: first_ns={first:.0} steady_ns={:.0} slowest_ns={slowest:.0} idle_ns={idle:.0} \
         busy_first_ns={busy:.0} card_bytes={}",
        median(later),
        c.card().to_bytes().len()
    );
    c.barrier().map_err(|e| e.to_string())
}

/// The `--contact-cpu` job: a first round trip from rank 0 to each other rank in turn,
/// every rank napping between empty polls.
fn connect_cpu() -> Result<(), String> {
    let c = join(false)?;
    let e = |e: ConduitError| e.to_string();
    let polls = std::cell::Cell::new(0u64);
    let take = || -> Result<(), ConduitError> {
        loop {
            polls.set(polls.get() + 1);
            if let Some(f) = c.peek(0)? {
                f.release();
                return Ok(());
            }
            std::thread::sleep(NAP);
        }
    };
    let send = |peer| loop {
        let m = Message {
            tag: 1,
            ..Message::default()
        };
        match c.try_send(peer, 0, &m) {
            Err(ConduitError::Busy) => std::thread::sleep(NAP),
            sent => return sent,
        }
    };
    if c.rank() != 0 {
        take().map_err(e)?;
        send(0).map_err(e)?;
        return c.barrier().map_err(e);
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut costs = Vec::new();
    for peer in 1..c.size() {
        polls.set(0);
        let before = crate::startup::cpu_s();
        send(peer).map_err(e)?;
        take().map_err(e)?;
        let first = crate::startup::cpu_s() - before;
        let before = crate::startup::cpu_s();
        for _ in 0..polls.get() {
            if c.peek(0).map_err(e)?.is_some() {
                return Err("a frame came that nobody sent".into());
            }
            std::thread::sleep(NAP);
        }
        costs.push(first - (crate::startup::cpu_s() - before));
    }
    let first = costs.first().copied().unwrap_or(f64::NAN);
    let later = if costs.len() > 1 {
        median(&mut costs[1..])
    } else {
        f64::NAN
    };
    println!("contact: connect_cpu_s={first:e} later_s={later:e}");
    c.barrier().map_err(e)
}

/// `rounds` jobs of three ranks, rank 0 on the first host of `link`, 1 and 2 on the
/// second: each round's [`Contact`].
pub fn measure(link: &Link, rounds: usize) -> Result<Vec<Contact>, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find amrq-bench: {e}"))?;
    (0..rounds)
        .map(|r| {
            eprintln!("first contact, round {}/{rounds}", r + 1);
            let three = format!("{}:1,{}:2", link.hosts[0], link.hosts[1]);
            let (_, out) = link.time_on(&three, &me, &["startup", "--contact"])?;
            let off_args = ["startup", "--contact", "--no-datagrams"];
            let (_, off) = link.time_on(&three, &me, &off_args)?;
            let (connect_first_ns, connect_steady_ns, connect_busy_first_ns) = (
                said(&off, "first_ns")?,
                said(&off, "steady_ns")?,
                said(&off, "busy_first_ns")?,
            );
            let list = format!("{}:1,{}:{CPU_PEERS}", link.hosts[0], link.hosts[1]);
            let (_, cpu) = link.time_on(&list, &me, &["startup", "--contact-cpu"])?;
            let (connect_cpu_s, connect_later_s) =
                (said(&cpu, "connect_cpu_s")?, said(&cpu, "later_s")?);
            out.lines()
                .find_map(|l| {
                    let l = l.strip_prefix("contact: ")?;
                    Some(Contact {
                        first_ns: value(l, "first_ns")?,
                        steady_ns: value(l, "steady_ns")?,
                        slowest_ns: value(l, "slowest_ns")?,
                        idle_ns: value(l, "idle_ns")?,
                        busy_first_ns: value(l, "busy_first_ns")?,
                        connect_first_ns,
                        connect_steady_ns,
                        connect_busy_first_ns,
                        card_bytes: value(l, "card_bytes")?,
                        connect_cpu_s,
                        connect_later_s,
                    })
                })
                .ok_or_else(|| format!("rank 0 did not say its round trips:\n{out}"))
        })
        .collect()
}

/// The value of `key` on rank 0's `contact:` line in a job's output `out`.
fn said(out: &str, key: &str) -> Result<f64, String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("contact: "))
        .find_map(|l| value::<f64>(l, key))
        .ok_or_else(|| format!("rank 0 did not say {key}:\n{out}"))
}

/// The report's table: each round's first round trip, the steady one, their ratio,
/// the round trip after idleness, the connection's, and the same with datagrams off.
pub fn report(contacts: &[Contact]) -> String {
    let mut t = format!(
        "## First contact\n\nThree ranks, rank 0 on one host, 1 and 2 on the other, over \
         UCX alone. Timed by rank 0, \
         after 200 ms idle: its first round trip to rank 1 (a frame and its echo, each \
         a datagram), then {TRIPS} more, each timed (\"steady\": their median; the \
         slowest is the one on which the pair connected, its datagrams spent); then, \
         busy ({WARM} round trips with rank 1 and 10 ms of polls), its first round trip \
         to rank 2 on rank 1's host (\"busy first\"); then, after 200 ms idle again, one \
         to rank 1, known by then (\"after idle\": what idleness alone costs a round \
         trip). \"Datagrams off\": the same job, each rank connecting to a peer at its \
         first message there. Ratios are to the steady round trip of the same job.\n\n\
         | round | first (µs) | after idle (µs) | busy first (µs) | steady (µs) | \
         first / steady | busy first / steady | connecting (µs) | datagrams off: first \
         (µs) | busy first (µs) | steady (µs) | first / steady | busy first / steady |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for (i, c) in contacts.iter().enumerate() {
        t += &format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} | \
             {:.1} | {:.0} | {:.0} |\n",
            i + 1,
            c.first_ns / 1e3,
            c.idle_ns / 1e3,
            c.busy_first_ns / 1e3,
            c.steady_ns / 1e3,
            c.first_ns / c.steady_ns,
            c.busy_first_ns / c.steady_ns,
            c.slowest_ns / 1e3,
            c.connect_first_ns / 1e3,
            c.connect_busy_first_ns / 1e3,
            c.connect_steady_ns / 1e3,
            c.connect_first_ns / c.connect_steady_ns,
            c.connect_busy_first_ns / c.connect_steady_ns
        );
    }
    t
}
