//! A child process run with a deadline, its output read whatever it does.
//!
//! Every program the suite starts (a benchmark job, `mpirun`, `ucx_perftest`, GASNet-EX's
//! tests) runs through [`run_output`]: in a process group of its own, so that a deadline
//! ends it *and* what it started (`mpirun`'s ranks, a launcher's ranks), and with its
//! pipes drained on threads whose end is awaited a bounded time, so that a grandchild
//! that keeps them open cannot hold the suite either; and dying with the suite, so that a
//! killed suite leaves nothing running. Nothing the suite runs can hang it.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a pipe may stay open after its process ended (its grandchildren hold it).
const PIPE_GRACE: Duration = Duration::from_secs(5);

/// What a process printed, and why it failed if it did.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Why it failed (could not start, timed out, a non-zero exit), if it did.
    pub failed: Option<String>,
}

impl Output {
    /// An output that is only a failure.
    ///
    /// ```
    /// let o = amrq_bench::child::Output::failure("no free port".into());
    /// assert_eq!(o.failed.as_deref(), Some("no free port"));
    /// ```
    pub fn failure(why: String) -> Self {
        Self {
            failed: Some(why),
            ..Self::default()
        }
    }

    /// Its non-empty lines, stdout first, at most 40 (the raw file has them all).
    ///
    /// ```
    /// let o = amrq_bench::child::Output { stdout: "a\n\nb\n".into(), stderr: "c\n".into(), failed: None };
    /// assert_eq!(o.lines(), ["a", "b", "c"]);
    /// ```
    pub fn lines(&self) -> Vec<String> {
        self.stdout
            .lines()
            .chain(self.stderr.lines())
            .filter(|l| !l.trim().is_empty())
            .take(40)
            .map(str::to_string)
            .collect()
    }
}

/// Runs `cmd` with a deadline: everything it printed, and why it failed if it did.
/// At the deadline its whole process group is killed.
///
/// ```
/// use amrq_bench::child::run_output;
/// use std::{process::Command, time::{Duration, Instant}};
/// let o = run_output(Command::new("echo").arg("hi"), Duration::from_secs(10));
/// assert_eq!((o.stdout.as_str(), o.failed), ("hi\n", None));
/// // A shell whose child outlives it and keeps its pipes: both end at the deadline.
/// let t = Instant::now();
/// let o = run_output(Command::new("sh").args(["-c", "sleep 60 & sleep 60"]), Duration::from_millis(300));
/// assert!(o.failed.unwrap().contains("timed out"));
/// assert!(t.elapsed() < Duration::from_secs(5));
/// ```
pub fn run_output(cmd: &mut Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = tied(cmd).spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return Output::failure(format!("cannot start {:?}: {e}", cmd.get_program())),
    };
    // Drain the pipes while waiting, so that a chatty child never blocks on them.
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let failed = loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => break None,
            Ok(Some(s)) => break Some(s.to_string()),
            Ok(None) if start.elapsed() > limit => {
                kill_group(&child);
                let _ = child.wait();
                break Some(format!("timed out after {limit:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Some(e.to_string()),
        }
    };
    let read = |pipe: &mpsc::Receiver<String>| {
        pipe.recv_timeout(PIPE_GRACE).unwrap_or_else(|_| {
            // What it started still holds the pipe: end it, then take what came (a
            // cut-off output fails to parse, and says so).
            kill_group(&child);
            pipe.recv_timeout(PIPE_GRACE).unwrap_or_default()
        })
    };
    let mut o = Output {
        stdout: read(&out),
        stderr: read(&err),
        failed: None,
    };
    if let Some(why) = failed {
        let lines: Vec<&str> = o.stderr.lines().collect();
        let tail = &lines[lines.len().saturating_sub(3)..]; // its last words, in order
        o.failed = Some(format!(
            "{:?}: {why} ({})",
            cmd.get_program(),
            tail.join(" / ")
        ));
    }
    o
}

/// `cmd`, set to start in a process group of its own (ended by [`kill_group`]) and to
/// die with the calling thread, even if this process is killed.
///
/// ```
/// use amrq_bench::child::{kill_group, tied};
/// use std::os::unix::process::ExitStatusExt;
/// let mut c = tied(std::process::Command::new("sleep").arg("60")).spawn().unwrap();
/// kill_group(&c);
/// assert_eq!(c.wait().unwrap().signal(), Some(9));
/// ```
pub fn tied(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0);
    // SAFETY: the closure runs in the child between fork and exec and makes one
    // async-signal-safe system call, touching no memory.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        })
    }
}

/// Kills the process group of `child`, started [`tied`]: it and what it started (see
/// [`tied`] for an example).
pub fn kill_group(child: &std::process::Child) {
    // The group's id is the child's pid; the group lives while any member does, so the
    // id cannot name another group while a member of ours is left to signal.
    // SAFETY: a signal to a process group; no memory is involved.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
}

/// Reads a pipe to its end on a thread of its own; the text arrives on the channel.
fn drain<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut s);
        }
        let _ = tx.send(String::from_utf8_lossy(&s).into_owned());
    });
    rx
}

/// Runs `cmd` with a deadline; its stdout, or why it failed.
///
/// ```
/// use amrq_bench::child::run;
/// use std::{process::Command, time::Duration};
/// assert_eq!(run(Command::new("echo").arg("hi"), Duration::from_secs(10)).unwrap(), "hi\n");
/// assert!(run(&mut Command::new("false"), Duration::from_secs(10)).is_err());
/// ```
pub fn run(cmd: &mut Command, limit: Duration) -> Result<String, String> {
    let o = run_output(cmd, limit);
    match o.failed {
        None => Ok(o.stdout),
        Some(why) => Err(why),
    }
}
