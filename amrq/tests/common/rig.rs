//! Hosts made of network namespaces on this machine, for the tests of what crosses a
//! network. Host i is namespace `<prefix>-h<i>` whose one interface, [`DEVICE`], has
//! the address [`address`]`(i)`; all hosts hang on one bridge in a switch namespace
//! `<prefix>-sw`, so nothing touches this machine's own network:
//!
//! ```text
//!   <prefix>-h0 [amrq0 169.254.77.1] ──veth── p0 ┐
//!   <prefix>-h1 [amrq0 169.254.77.2] ──veth── p1 ┼ br0 in <prefix>-sw
//!   …                                            ┘
//! ```
//!
//! The prefix holds this process's pid, so a rig a killed run left behind is swept
//! (its namespaces deleted) by the next one. One rig at a time (a lock file), removed
//! when dropped, also when the test fails. Where namespaces cannot be made (not root,
//! no `ip`), the test says it was skipped, unless `AMRQ_REQUIRE_RIG` is set (CI), where
//! that fails it.

#![allow(dead_code)]

use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Every host's network device.
pub const DEVICE: &str = "amrq0";

const PREFIX: &str = "amrqrig";

/// Host i's address.
pub fn address(i: usize) -> String {
    format!("169.254.77.{}", i + 1)
}

static ONE_RIG: Mutex<()> = Mutex::new(());
static SERIAL: AtomicUsize = AtomicUsize::new(0);

/// A set of namespace hosts, removed on drop.
pub struct Rig {
    /// The namespaces, one per host (the names `ip netns exec` takes).
    pub hosts: Vec<String>,
    switch: String,
    _lock: (MutexGuard<'static, ()>, std::fs::File),
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// True once `host`'s device is up with its carrier (`ip` says `state UP`).
fn running(host: &str) -> bool {
    Command::new("ip")
        .args(["-n", host, "link", "show", DEVICE])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("state UP"))
}

/// Deletes the namespaces of rigs whose process is gone.
fn sweep() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for name in dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
    {
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|r| r.trim_start_matches('-').split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            eprintln!("rig: removing namespace {name}, left by a run that is gone");
            let _ = ip(&["netns", "del", &name]);
        }
    }
}

impl Rig {
    /// `n` hosts, or `None` (after saying why) where namespaces cannot be made.
    pub fn or_skip(n: usize, test: &str) -> Option<Rig> {
        let lock = lock();
        sweep();
        let prefix = format!(
            "{PREFIX}-{}-{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        );
        let switch = format!("{prefix}-sw");
        if let Err(why) = ip(&["netns", "add", &switch]) {
            if std::env::var_os("AMRQ_REQUIRE_RIG").is_some() {
                panic!("AMRQ_REQUIRE_RIG is set and network namespaces cannot be made: {why}");
            }
            eprintln!("{test}: skipped: network namespaces cannot be made here ({why}); run as root with iproute2");
            return None;
        }
        let mut rig = Rig {
            hosts: Vec::new(),
            switch,
            _lock: lock,
        };
        if let Err(e) = rig.build(&prefix, n) {
            panic!("cannot build the namespace rig: {e}"); // `rig` drops: all removed
        }
        Some(rig)
    }

    fn build(&mut self, prefix: &str, n: usize) -> Result<(), String> {
        let sw = self.switch.clone();
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        for i in 0..n {
            let host = format!("{prefix}-h{i}");
            ip(&["netns", "add", &host])?;
            self.hosts.push(host.clone());
            let port = format!("p{i}");
            ip(&[
                "link", "add", &port, "netns", &sw, "type", "veth", "peer", "name", DEVICE,
                "netns", &host,
            ])?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &sw, "link", "set", &port, "up"])?;
            let cidr = format!("{}/24", address(i));
            ip(&["-n", &host, "addr", "add", &cidr, "dev", DEVICE])?;
            ip(&["-n", &host, "link", "set", DEVICE, "up"])?;
            ip(&["-n", &host, "link", "set", "lo", "up"])?;
        }
        // The kernel reports a link running (which UCX requires of a device) up to a
        // second after it is set up.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        for host in &self.hosts {
            while !running(host) {
                if std::time::Instant::now() > deadline {
                    return Err(format!("{DEVICE} in {host} is not running after 10 s"));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// `name:1,…` for `amrun --hosts` / [`amrq::launch::Hosts`], `per_host` ranks each.
    pub fn host_list(&self, per_host: usize) -> String {
        self.hosts
            .iter()
            .map(|h| format!("{h}:{per_host}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The processes still running on the rig's hosts (`ip netns pids`), as
    /// `host: pid command` lines: none once a job has ended.
    pub fn processes_left(&self) -> Vec<String> {
        let mut left = Vec::new();
        for host in &self.hosts {
            let out = Command::new("ip").args(["netns", "pids", host]).output();
            let pids = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            for pid in pids.unwrap_or_default().split_whitespace() {
                let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ");
                left.push(format!("{host}: {pid} {cmd}"));
            }
        }
        left
    }

    /// amrq's launcher for a job of `per_host` ranks on each host, reached through the
    /// rig's tcp, that gives up after `timeout`, with the test's `token` in the ranks'
    /// environment (`AMRQ_TEST_TOKEN`).
    pub fn launcher(
        &self,
        per_host: usize,
        token: &str,
        timeout: std::time::Duration,
    ) -> amrq::launch::Launcher {
        let list = self.host_list(per_host);
        let hosts = amrq::launch::Hosts::new(&list, Self::EXEC, Some(&address(0)));
        let hosts = hosts.expect("hosts");
        let mut l = amrq::launch::Launcher::new(hosts.ranks());
        l.hosts = Some(hosts);
        l.verbose = false;
        l.timeout = Some(timeout);
        l.env = Self::ucx_env();
        l.env.push(("AMRQ_TEST_TOKEN".into(), token.into()));
        l
    }

    /// The `--exec` template that runs a command on a host of the rig.
    pub const EXEC: &'static str = "ip netns exec {host}";

    /// The UCX settings that keep UCX on the rig's network (it would otherwise use
    /// shared memory between namespaces of one machine).
    pub fn ucx_env() -> Vec<(String, String)> {
        [("UCX_TLS", "tcp"), ("UCX_NET_DEVICES", DEVICE)]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain([&self.switch]) {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("rig: {e}");
            }
        }
    }
}

/// This process's turn (a mutex), and this machine's (a lock file), at the rig.
fn lock() -> (MutexGuard<'static, ()>, std::fs::File) {
    let guard = ONE_RIG.lock().unwrap_or_else(|e| e.into_inner());
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("amrq-rig.lock"))
        .expect("the rig's lock file");
    // SAFETY: flock on a descriptor we own; released when the file closes.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    (guard, file)
}

/// In a rank of a rig job: that UCX's endpoint to every peer uses tcp on the rig's
/// device and no shared-memory transport (read from UCX's own description).
pub fn assert_tcp_on_rig(c: &amrq::conduit::ucx::UcxConduit) {
    use amrq::conduit::Conduit;
    let rank = c.rank();
    for peer in (0..c.size()).filter(|&p| p != rank) {
        let info = c.endpoint_info(peer).unwrap_or_default();
        let want = format!("tcp/{DEVICE}");
        let shm = ["posix", "sysv", "cma", "xpmem", "knem"];
        assert!(
            info.contains(&want) && !shm.iter().any(|t| info.contains(t)),
            "rank {rank}: UCX's endpoint to rank {peer} does not use only {want}:\n{info}"
        );
    }
}
