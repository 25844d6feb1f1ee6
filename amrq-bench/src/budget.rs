//! The instruction budget of the fast paths, broken down like the AM paper's Table 2
//! (von Eicken et al., nCUBE/2: 21 instructions to send a one-word message, 34 to
//! receive it).
//!
//! How it is measured: `amrq-bench rq-loop` (one rank, messages to itself, so that no other core
//! is involved) runs under `valgrind --tool=callgrind --dump-instr=yes` twice, with N and
//! 2N iterations; the difference of the two runs' cost at each instruction address,
//! divided by N, is that instruction's count per iteration, free of start-up. Each
//! address is then charged to the innermost function of amrq (through the inlining
//! chain `addr2line -i` reads from the debug info) that the table below names: inlined
//! helpers (a slot's address, the header's unpacking) count for the function that
//! called them. The counts are deterministic: the same binary gives the same figures on
//! a busy or an idle machine, which is why CI can guard them ([`check`]).
//!
//! Needs `valgrind`, and `addr2line` and `nm` from binutils, and a release build
//! (`debug = 1` keeps line tables).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

/// Which side of the message an instruction serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// The sender.
    Send,
    /// The receiver: polling, the ring, dispatch, the handler.
    Receive,
    /// The benchmark's own loop.
    Harness,
}

/// The tasks of Table 2, as they exist in amrq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Task {
    /// The API call, the header and args written into the slot (send); the message
    /// handed to the handler (receive).
    Compose,
    /// Checks of destination, channel, arg count, payload size, permission (send); of
    /// the sender, the header and the payload range (receive).
    Protection,
    /// Room, tail, sequence word, prefetch (send); the sequence word, the head, its
    /// publication, the round-robin scan (receive).
    Ring,
    /// The doorbell a sleeping or One-poll receiver armed.
    Notify,
    /// The handler table and the call.
    Dispatch,
    /// Poll budgets, waits, the reply-first order: which queue is looked at when.
    Scheduling,
    /// The handler's own body.
    Handler,
    /// Anything not in the table (listed by name in the output).
    Other,
}

impl Task {
    const ALL: [Task; 8] = [
        Task::Compose,
        Task::Protection,
        Task::Ring,
        Task::Notify,
        Task::Dispatch,
        Task::Scheduling,
        Task::Handler,
        Task::Other,
    ];

    fn name(self) -> &'static str {
        match self {
            Task::Compose => "message composition / consumption",
            Task::Protection => "protection and permission checks",
            Task::Ring => "ring bookkeeping (buffer management)",
            Task::Notify => "doorbell (notification)",
            Task::Dispatch => "dispatch",
            Task::Scheduling => "scheduling (poll and wait loops)",
            Task::Handler => "handler body",
            Task::Other => "other",
        }
    }
}

/// Functions charged to a task, matched against the end of the function's cleaned
/// name (generics and hashes removed; `<T as Trait>::f` read as `T::f`). Inlined
/// helpers that are not here are charged to the function that called them.
const TABLE: &[(&str, Side, Task)] = {
    use Side::*;
    use Task::*;
    &[
        // Send.
        ("Am::request", Send, Compose),
        ("Am::send_request", Send, Compose),
        ("Am::send_reply", Send, Compose),
        ("Am::enqueue", Send, Compose),
        ("ReqCtx::reply", Send, Compose),
        ("Rq::enqueue_runtime", Send, Compose),
        ("Rq::enqueue", Send, Compose),
        ("rq::committed", Send, Compose),
        ("producer::write_frame", Send, Compose),
        ("FrameHeader::pack", Send, Compose),
        ("Am::send_short", Send, Compose),
        ("MemConduit::try_send", Send, Protection),
        ("MemConduit::try_send_quick", Send, Protection),
        ("MemConduit::check_send", Send, Protection),
        ("Producer::try_push", Send, Ring),
        ("Producer::try_push_express", Send, Ring),
        ("Producer::push_slots", Send, Ring),
        ("TxRing::push_express", Send, Ring),
        ("Producer::has_room", Send, Ring),
        ("Producer::refresh_head", Send, Ring),
        ("TxRing::push", Send, Ring),
        ("TxRing::ring_doorbell", Send, Notify),
        ("doorbell::ring", Send, Notify),
        ("doorbell::is_armed", Send, Notify),
        // Receive.
        ("Consumer::ready", Receive, Ring),
        ("Consumer::look", Receive, Ring),
        ("Consumer::look_through", Receive, Ring),
        ("ExpressGate::lets_through", Receive, Protection),
        ("Consumer::take_ready", Receive, Protection),
        ("Consumer::peek", Receive, Ring),
        ("Consumer::release", Receive, Ring),
        ("Consumer::advance", Receive, Ring),
        ("Consumer::publish", Receive, Ring),
        ("RxChannel::next_ready", Receive, Ring),
        ("RxChannel::took", Receive, Ring),
        ("RxRing::ready", Receive, Ring),
        ("MemConduit::drain_frames", Receive, Ring),
        ("MemConduit::drain_both_frames", Receive, Ring),
        ("MemConduit::drain_both", Receive, Ring),
        ("MemConduit::scan", Receive, Ring),
        ("MemConduit::look", Receive, Ring),
        ("MemConduit::drain", Receive, Ring),
        ("MemConduit::peek", Receive, Ring),
        ("MemConduit::take", Receive, Protection),
        ("MemConduit::payload_of", Receive, Protection),
        ("MemFrame::express", Receive, Compose),
        ("MemFrame::out", Receive, Compose),
        ("MemFrame::release_slots", Receive, Ring),
        ("MemFrame::release", Receive, Ring),
        ("MemFrame::args", Receive, Compose),
        ("MemFrame::payload", Receive, Compose),
        ("MemFrame::source", Receive, Compose),
        ("MemFrame::tag", Receive, Compose),
        ("MemFrame::drop", Receive, Ring),
        ("Msg::arg", Receive, Compose),
        ("Am::drain::{{closure}}", Receive, Compose),
        ("Am::dispatch_request", Receive, Dispatch),
        ("Am::dispatch_reply", Receive, Dispatch),
        ("Am::msg_of", Receive, Compose),
        ("HandlerTable::get", Receive, Dispatch),
        ("handlers::call_request", Receive, Dispatch),
        ("handlers::call_reply", Receive, Dispatch),
        ("Captures::handler", Receive, Dispatch),
        ("Am::contain", Receive, Dispatch),
        ("Am::poll", Receive, Scheduling),
        ("Am::poll_queues", Receive, Scheduling),
        ("Am::drain", Receive, Scheduling),
        ("Am::wait_until", Receive, Scheduling),
        ("Am::wait_round", Receive, Scheduling),
        ("Rq::poll_queue", Receive, Scheduling),
        ("Rq::read_queue", Receive, Scheduling),
        // rq-loop's handlers (closures of its rank functions), then its loops.
        ("am_rank::{{closure}}", Receive, Handler),
        ("oneway_rank::{{closure}}", Receive, Handler),
        ("rq_loop::am_rank", Harness, Other),
        ("rq_loop::oneway_rank", Harness, Other),
        ("empty_wait_rank::{{closure}}", Harness, Other),
        ("rq_loop::empty_wait_rank", Harness, Other),
        ("rq_loop::rq_loop", Harness, Other),
        // `--ring-floor`: its poll and dispatch, its handler, its loop.
        ("floor::Rx::poll", Receive, Dispatch),
        ("floor::count", Receive, Handler),
        ("floor::floor_rank", Harness, Other),
    ]
};

/// One measured mode of `amrq-bench rq-loop`.
#[derive(Debug, Clone)]
pub struct Mode {
    /// Key in the committed figures (`am_oneway`, …).
    pub key: &'static str,
    /// What one iteration is.
    pub what: &'static str,
    /// `rq-loop`'s arguments.
    pub args: &'static [&'static str],
}

/// The modes measured: the one-word AM of Table 2, the same in a stream of 64, the
/// AM round trip to itself, an empty wait round, the one-word AM with the ring
/// primitives alone (the floor), the one-word AM through a `Sender`, uncontended
/// sections (the engine's, RQ's and the raw floor), and an RQ enqueue + read_queue.
pub const MODES: &[Mode] = &[
    Mode {
        key: "am_oneway",
        what: "one one-word Short AM sent and handled (one poll)",
        args: &["--am-oneway"],
    },
    Mode {
        key: "am_stream64",
        what: "per message of 64 one-word Short AMs sent, then handled in one poll",
        args: &["--am-oneway", "--burst", "64"],
    },
    Mode {
        key: "am_round_trip",
        what: "a Short AM request and its reply, to itself",
        args: &["--am"],
    },
    Mode {
        key: "am_empty_wait",
        what: "a round of `Am::wait_until` in which nothing arrives",
        args: &["--empty-wait"],
    },
    Mode {
        key: "ring_floor",
        what: "the one-word AM of am_oneway with the ring primitives alone: the floor (no channel, permission, fault containment, One-poll or scan)",
        args: &["--ring-floor"],
    },
    Mode {
        key: "am_oneway_sender",
        what: "the one-word AM of am_oneway sent through a `Sender` (the path of the rank's other threads), on the rank's own thread",
        args: &["--am-oneway", "--sender"],
    },
    Mode {
        key: "section_engine",
        what: "an uncontended section of a job with a progress engine (`EngineJob::hold` and its drop), the engine idle",
        args: &["--section", "engine"],
    },
    Mode {
        key: "section_rq",
        what: "an uncontended RQ section (`Interrupts::hold` and its drop), the progress thread idle",
        args: &["--section", "rq"],
    },
    Mode {
        key: "section_raw",
        what: "a raw asymmetric section: a volatile store and a compiler fence to enter, the same to leave (the floor of the two above)",
        args: &["--section", "raw"],
    },
    Mode {
        key: "rq_frame",
        what: "an RQ enqueue, read_queue and release of a one-arg frame",
        args: &[],
    },
];

/// The breakdown of one mode: instructions per iteration per (side, task), and the
/// functions no table entry named.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    /// Per (side, task).
    pub cells: BTreeMap<(Side, Task), f64>,
    /// Instructions per iteration outside the table, by function.
    pub unnamed: BTreeMap<String, f64>,
    /// Instructions per iteration by the function they were charged to.
    pub by_function: BTreeMap<String, f64>,
}

impl Budget {
    /// All instructions per iteration, the harness's excepted.
    pub fn total(&self) -> f64 {
        self.side(Side::Send) + self.side(Side::Receive)
    }

    /// All instructions per iteration, the benchmark's own loop included: what CI
    /// guards. Which of them the debug info charges to the loop and which to amrq
    /// moves between builds of the same code (the compiler merges the loop's counter
    /// test into an inlined check, or moves a register reload across the boundary):
    /// the whole iteration does not.
    ///
    /// ```
    /// use amrq_bench::budget::{Budget, Side, Task};
    /// let mut b = Budget::default();
    /// b.cells.insert((Side::Send, Task::Ring), 20.0);
    /// b.cells.insert((Side::Harness, Task::Other), 5.0);
    /// assert_eq!((b.total(), b.whole()), (20.0, 25.0));
    /// ```
    pub fn whole(&self) -> f64 {
        self.total() + self.side(Side::Harness)
    }

    /// Instructions per iteration of one side.
    pub fn side(&self, side: Side) -> f64 {
        self.cells
            .iter()
            .filter(|((s, _), _)| *s == side)
            .map(|(_, v)| v)
            .sum()
    }

    fn cell(&self, side: Side, task: Task) -> f64 {
        self.cells.get(&(side, task)).copied().unwrap_or(0.0)
    }
}

/// A function's name from `addr2line -C`, cleaned: generic arguments and the hash
/// dropped, `<T as Trait>::f` read as `T::f`.
///
/// ```
/// use amrq_bench::budget::clean_name;
/// assert_eq!(clean_name("amrq::conduit::ring::producer::Producer::try_push<amrq::x::Y>"),
///            "amrq::conduit::ring::producer::Producer::try_push");
/// assert_eq!(clean_name("<amrq::conduit::mem::endpoint::MemConduit as amrq::conduit::api::Conduit>::try_send"),
///            "amrq::conduit::mem::endpoint::MemConduit::try_send");
/// assert_eq!(clean_name("amrq::conduit::mem::receive::<impl amrq::conduit::mem::endpoint::MemConduit>::look"),
///            "amrq::conduit::mem::endpoint::MemConduit::look");
/// assert_eq!(clean_name("amrq::conduit::mem::conduit::<impl amrq::conduit::api::Conduit for amrq::conduit::mem::endpoint::MemConduit>::drain"),
///            "amrq::conduit::mem::endpoint::MemConduit::drain");
/// ```
pub fn clean_name(raw: &str) -> String {
    // `<T as Trait>::rest` → `T::rest` (at the start only: that is how impls print).
    let mut s = raw.to_string();
    if let Some(inner) = s.strip_prefix('<') {
        if let Some(close) = matching_close(inner) {
            let head = &inner[..close];
            let rest = &inner[close + 1..];
            let ty = head.split(" as ").next().unwrap_or(head);
            s = format!("{ty}{rest}");
        }
    }
    // `module::<impl T>::f` and `module::<impl Trait for T>::f` → `T::f`: the module
    // only says where the impl is written.
    while let Some(i) = s.find("<impl ") {
        let Some(close) = matching_close(&s[i + 1..]) else {
            break;
        };
        let inner = &s[i + 6..i + 1 + close];
        let ty = inner.rsplit(" for ").next().unwrap_or(inner);
        s = format!("{ty}{}", &s[i + 2 + close..]);
    }
    let mut out = String::new();
    let mut depth = 0;
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    // A trailing `::h0123…` hash (names printed without demangling of the hash).
    if let Some(i) = out.rfind("::h") {
        if out[i + 3..].chars().all(|c| c.is_ascii_hexdigit()) && out.len() - i == 19 {
            out.truncate(i);
        }
    }
    out
}

/// Index of the `>` that closes the `<` just before `s` starts.
fn matching_close(s: &str) -> Option<usize> {
    let mut depth = 1;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The table entry for a cleaned function name, if any.
fn classify(name: &str) -> Option<(Side, Task)> {
    TABLE
        .iter()
        .find(|(pat, _, _)| name.ends_with(pat))
        .map(|&(_, side, task)| (side, task))
}

fn run(cmd: &mut Command) -> Result<std::process::Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

/// Self cost per instruction address, and the (mangled) function of each address.
type Profile = (HashMap<u64, u64>, HashMap<u64, String>);

/// Self cost per instruction address of `amrq-bench rq-loop args --batches 1 --iters
/// iters` under callgrind, with the mangled function each address belongs to.
fn profile(bench: &Path, args: &[&str], iters: u64, tmp: &Path) -> Result<Profile, String> {
    let file = tmp.join(format!("callgrind.{iters}.out"));
    run(Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--dump-instr=yes",
            "--compress-strings=no",
            "--compress-pos=no",
            "--demangle=no",
        ])
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(bench)
        .arg("rq-loop")
        .args(args)
        .args(["--batches", "1", "--iters", &iters.to_string()]))?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let (mut cost, mut func) = (HashMap::new(), HashMap::new());
    let (mut current, mut after_calls) = (String::new(), false);
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("fn=") {
            current = f.to_string();
        } else if line.starts_with("calls=") {
            after_calls = true; // the next cost line is the call's inclusive cost
        } else if let Some(hex) = line.strip_prefix("0x") {
            if std::mem::take(&mut after_calls) {
                continue;
            }
            let mut it = hex.split_whitespace();
            let addr = it.next().and_then(|a| u64::from_str_radix(a, 16).ok());
            let ir = it.nth(1).and_then(|c| c.parse::<u64>().ok());
            if let (Some(a), Some(c)) = (addr, ir) {
                *cost.entry(a).or_insert(0) += c;
                func.entry(a).or_insert_with(|| current.clone());
            }
        }
    }
    Ok((cost, func))
}

/// Where the binary was loaded under valgrind: the most common difference between a
/// function's lowest executed address and its symbol's address (`nm`).
fn load_offset(binary: &Path, func: &HashMap<u64, String>) -> Result<u64, String> {
    let nm = run(Command::new("nm").arg(binary))?;
    let syms: HashMap<&str, u64> = std::str::from_utf8(&nm.stdout)
        .unwrap_or("")
        .lines()
        .filter_map(|l| {
            let mut p = l.split_whitespace();
            let (a, _, n) = (p.next()?, p.next()?, p.next()?);
            Some((n, u64::from_str_radix(a, 16).ok()?))
        })
        .collect();
    let mut lowest: HashMap<&str, u64> = HashMap::new();
    for (&a, f) in func {
        let e = lowest.entry(f.as_str()).or_insert(a);
        *e = (*e).min(a);
    }
    let mut votes: HashMap<u64, usize> = HashMap::new();
    for (f, a) in lowest {
        if let Some(&s) = syms.get(f) {
            *votes.entry(a.wrapping_sub(s)).or_insert(0) += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(_, n)| n)
        .map(|(o, _)| o)
        .ok_or_else(|| "no symbol of the profile found in the binary (stripped?)".into())
}

/// The inlining chain of each address (innermost first), as cleaned function names.
fn inline_chains(binary: &Path, addrs: &[u64]) -> Result<HashMap<u64, Vec<String>>, String> {
    let mut cmd = Command::new("addr2line");
    cmd.args(["-f", "-i", "-C", "-a", "-e"]).arg(binary);
    cmd.args(addrs.iter().map(|a| format!("{a:#x}")));
    let out = run(&mut cmd)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut chains = HashMap::new();
    let mut lines = text.lines();
    let mut current: Option<(u64, Vec<String>)> = None;
    while let Some(l) = lines.next() {
        if let Some(hex) = l.strip_prefix("0x") {
            if let Some((a, c)) = current.take() {
                chains.insert(a, c);
            }
            current = u64::from_str_radix(hex, 16).ok().map(|a| (a, Vec::new()));
        } else if let Some((_, c)) = current.as_mut() {
            c.push(clean_name(l));
            lines.next(); // its file:line
        }
    }
    if let Some((a, c)) = current {
        chains.insert(a, c);
    }
    Ok(chains)
}

/// Measures one mode with `iters` and `2 × iters` iterations (see the module doc), in
/// `bench`, an `amrq-bench` executable.
pub fn measure(bench: &Path, mode: &Mode, iters: u64) -> Result<Budget, String> {
    let tmp = std::env::temp_dir().join(format!("amrq-budget-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let once = profile(bench, mode.args, iters, &tmp);
    let twice = profile(bench, mode.args, 2 * iters, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    let ((c1, _), (c2, func)) = (once?, twice?);
    let per_iter: HashMap<u64, f64> = c2
        .iter()
        .map(|(a, &c)| {
            (
                *a,
                (c as f64 - c1.get(a).copied().unwrap_or(0) as f64) / iters as f64,
            )
        })
        .filter(|&(_, v)| v.abs() >= 0.005)
        .collect();
    let offset = load_offset(bench, &func)?;
    let addrs: Vec<u64> = per_iter.keys().map(|a| a.wrapping_sub(offset)).collect();
    let chains = inline_chains(bench, &addrs)?;
    let mut b = Budget::default();
    for (a, v) in per_iter {
        let chain = chains.get(&a.wrapping_sub(offset));
        let names = chain.map(Vec::as_slice).unwrap_or(&[]);
        match names.iter().find_map(|n| classify(n).map(|c| (n, c))) {
            Some((name, cell)) => {
                *b.cells.entry(cell).or_insert(0.0) += v;
                *b.by_function.entry(name.clone()).or_insert(0.0) += v;
            }
            None => {
                let name = names.last().cloned().unwrap_or_else(|| "?".into());
                *b.cells.entry((Side::Receive, Task::Other)).or_insert(0.0) += v;
                *b.unnamed.entry(name).or_insert(0.0) += v;
            }
        }
    }
    Ok(b)
}

/// The Markdown table of one mode's budget, send and receive side by side.
pub fn table(mode: &Mode, b: &Budget) -> String {
    let mut s = format!(
        "**{}** — {} (`amrq-bench rq-loop {}`)\n\n| task | send | receive |\n|---|---:|---:|\n",
        mode.key,
        mode.what,
        mode.args.join(" ")
    );
    for t in Task::ALL {
        let (tx, rx) = (b.cell(Side::Send, t), b.cell(Side::Receive, t));
        if tx.abs() < 0.05 && rx.abs() < 0.05 {
            continue;
        }
        s += &format!("| {} | {tx:.1} | {rx:.1} |\n", t.name());
    }
    // `+ 0.0` turns a sum of nothing (-0.0) into 0.0 for the table.
    s += &format!(
        "| **total** (both: **{:.1}**) | **{:.1}** | **{:.1}** |\n",
        b.total(),
        b.side(Side::Send) + 0.0,
        b.side(Side::Receive) + 0.0
    );
    s += &format!(
        "\nThe benchmark's own loop: {:.1} instructions per iteration (not counted); the whole iteration, which CI guards: {:.1}.\n",
        b.side(Side::Harness),
        b.whole()
    );
    if !b.unnamed.is_empty() {
        let mut v: Vec<_> = b.unnamed.iter().filter(|(_, &c)| c.abs() >= 0.5).collect();
        v.sort_by(|x, y| y.1.total_cmp(x.1));
        if !v.is_empty() {
            s += "Charged to *other* (no table entry): ";
            s += &v
                .iter()
                .map(|(n, c)| format!("`{n}` {c:.1}"))
                .collect::<Vec<_>>()
                .join(", ");
            s += "\n";
        }
    }
    s
}

/// The committed figures: one line per mode, `key whole` (see [`Budget::whole`]).
pub fn parse_figures(text: &str) -> Result<BTreeMap<String, f64>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut p = l.split_whitespace();
            match (p.next(), p.next().and_then(|v| v.parse::<f64>().ok())) {
                (Some(k), Some(v)) => Ok((k.to_string(), v)),
                _ => Err(format!("bad line in the committed figures: {l:?}")),
            }
        })
        .collect()
}

/// Compares measured totals with committed ones: an error naming every mode that grew
/// by more than `tolerance` (a fraction) over its committed figure. A mode that
/// shrank is reported too, as a note: commit the lower figure.
///
/// ```
/// use amrq_bench::budget::check;
/// let committed = [("am_oneway".to_string(), 100.0)].into_iter().collect();
/// let ok = [("am_oneway".to_string(), 101.0)].into_iter().collect();
/// let worse = [("am_oneway".to_string(), 110.0)].into_iter().collect();
/// assert!(check(&committed, &ok, 0.02).is_ok());
/// assert!(check(&committed, &worse, 0.02).is_err());
/// ```
pub fn check(
    committed: &BTreeMap<String, f64>,
    measured: &BTreeMap<String, f64>,
    tolerance: f64,
) -> Result<Vec<String>, String> {
    let (mut notes, mut grown) = (Vec::new(), Vec::new());
    for (k, &want) in committed {
        let Some(&got) = measured.get(k) else {
            grown.push(format!("{k}: not measured"));
            continue;
        };
        if got > want * (1.0 + tolerance) {
            grown.push(format!(
                "{k}: {got:.1} instructions, committed {want:.1} (+{:.1} %)",
                (got / want - 1.0) * 100.0
            ));
        } else if got < want * (1.0 - tolerance) {
            notes.push(format!(
                "{k}: {got:.1} instructions, below the committed {want:.1}: commit the lower figure"
            ));
        }
    }
    if grown.is_empty() {
        Ok(notes)
    } else {
        Err(format!(
            "the fast path grew past the committed instruction counts (raise them only with a reason in the commit message):\n  {}",
            grown.join("\n  ")
        ))
    }
}
