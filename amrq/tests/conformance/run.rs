//! How the suite's jobs are started for each conduit: ranks as threads of this test,
//! or as processes (this test binary re-executed, filtered to the same test, joining
//! the job through the launcher's environment).

use super::cases::{spec, spec_for, Failed, Job, Outcome};
use super::marker::{all_ran, child_args, mark_ran, run_rank, token};
use amrq::bootstrap::Boot;
use amrq::conduit::cluster::ClusterConduit;
use amrq::conduit::combined::Combined;
use amrq::conduit::mem::MemConduit;
use amrq::conduit::ucx::UcxConduit;
use amrq::conduit::{threads, Conduit};
use amrq::launch::{Bind, Hosts, Launcher};
use std::sync::Mutex;
use std::time::Duration;

/// The cases spin: one job at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A case as a runner calls it.
pub type Case<C> = fn(C, &Job<C>) -> Outcome;

/// Runs `case` on `ranks` ranks as threads over the `threads` conduit.
pub fn threads(_test: &str, ranks: usize, case: Case<MemConduit>) {
    let _g = one_at_a_time();
    let eps = threads::endpoints_for(ranks, &spec()).expect("endpoints");
    let job = Job { die: die_thread };
    on_threads(eps, |c| vec![(c.boot().clone(), c.rank())], &job, case);
}

/// Runs `case` on every endpoint of `eps`, one thread each, and fails the test with
/// every rank's complaint. `boots` gives the bootstraps of the rank's jobs and its rank
/// in each (one per conduit it is made of), which are told when a rank has finished (as
/// `Config::threads` does).
pub fn on_threads<C: Conduit + Send + 'static>(
    eps: Vec<C>,
    boots: impl Fn(&C) -> Vec<(Boot, usize)>,
    job: &Job<C>,
    case: Case<C>,
) {
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = eps
            .into_iter()
            .map(|c| {
                let boots = boots(&c);
                s.spawn(move || {
                    let out = case(c, job);
                    for (boot, rank) in boots {
                        match &out {
                            Ok(()) => boot.mark_left(rank),
                            Err(e) => boot.mark_failed(rank, e.to_string()),
                        }
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .filter_map(|(r, h)| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(Failed(e))) => Some(e),
                Err(_) => Some(format!("rank {r} panicked")),
            })
            .collect()
    });
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A thread rank's crash: marked failed, its endpoint gone without leaving.
fn die_thread(c: MemConduit) {
    c.boot().mark_failed(c.rank(), "died on purpose".into());
    std::mem::forget(c);
}

/// A process rank's crash: it records that it ran, then exits at once (no destructor
/// runs, so it never says it left).
fn die_process(c: MemConduit) {
    let ok = mark_ran(c.rank());
    std::process::exit(if ok { 0 } else { 1 });
}

/// Runs `case` on `ranks` ranks as processes over the `shm` conduit, launched by
/// amrq's launcher. In a rank (found by the launcher's environment) this runs the
/// rank's part and exits; otherwise it starts the job and checks every rank ran.
pub fn processes(test: &str, ranks: usize, case: Case<MemConduit>) {
    let joined = super::ranks::joined_spec(&spec(), Duration::from_secs(60));
    run_rank(joined, |c| case(c, &Job { die: die_process }));
    let _g = one_at_a_time();
    let mut l = Launcher::new(ranks);
    l.bind = Bind::None;
    launch(l, test, ranks);
}

/// Runs this test binary's `test` as the ranks of `l` (which says where they run),
/// and checks that the job succeeded and all `ranks` ranks ran their part.
fn launch(mut l: Launcher, test: &str, ranks: usize) {
    let token = token();
    l.verbose = false;
    l.timeout = Some(Duration::from_secs(120));
    l.env.push(("AMRQ_TEST_TOKEN".into(), token.clone()));
    let exe = std::env::current_exe().expect("test binary");
    let out = l
        .run(exe.as_os_str(), &child_args(test))
        .expect("job starts");
    assert_eq!(out.code, 0, "{out:?}");
    all_ran(&token, ranks);
}

/// Runs `case` on `ranks` (even) thread ranks over a [`Combined`] conduit: two ranks
/// per "host" share a local half, and a remote half spans the job; every rank's segment
/// is one memory registered with both.
pub fn combined(_test: &str, ranks: usize, case: Case<Both>) {
    let _g = one_at_a_time();
    let spec = spec();
    let segs = threads::segments(ranks, &spec).expect("segments");
    let all: Vec<usize> = (0..ranks).collect();
    let remote = threads::endpoints_on(&spec, &segs, &all).expect("remote half");
    let mut hosts: Vec<Vec<MemConduit>> = all
        .chunks(2)
        .map(|h| threads::endpoints_on(&spec.restricted_to(h), &segs, h).expect("local half"))
        .collect();
    let eps: Vec<Both> = remote
        .into_iter()
        .enumerate()
        .map(|(r, remote)| {
            let local = hosts[r / 2].remove(0);
            Combined::new(local, remote, vec![r / 2 * 2, r / 2 * 2 + 1]).expect("combined")
        })
        .collect();
    let boots = |c: &Both| {
        vec![
            (c.local().boot().clone(), c.local().rank()),
            (c.remote().boot().clone(), c.remote().rank()),
        ]
    };
    on_threads(eps, boots, &Job { die: die_combined }, case);
}

/// The combined conduit of the `combined` runner.
pub type Both = Combined<MemConduit, MemConduit>;

fn die_combined(c: Both) {
    c.local()
        .boot()
        .mark_failed(c.local().rank(), "died on purpose".into());
    c.remote()
        .boot()
        .mark_failed(c.remote().rank(), "died on purpose".into());
    std::mem::forget(c);
}

/// Runs `case` on `ranks` ranks as threads, each with its own UCX context, connected
/// over tcp on the loopback device (so the network path is taken inside one host);
/// skipped, saying so, where UCX is not installed.
pub fn ucx_threads(test: &str, ranks: usize, case: Case<UcxConduit>) {
    let Some(settings) = super::ucx::loopback_or_skip(test) else {
        return;
    };
    let _g = one_at_a_time();
    let eps = amrq::conduit::ucx::threads(ranks, &spec_for(test), &settings).expect("endpoints");
    let boots = |c: &UcxConduit| vec![(c.boot().clone(), c.rank())];
    on_threads(eps, boots, &Job { die: die_ucx }, case);
}

fn die_ucx(c: UcxConduit) {
    c.boot().mark_failed(c.rank(), "died on purpose".into());
    std::mem::forget(c);
}

/// Runs `case` on `ranks` ranks as processes on as many namespace hosts (one each),
/// started by amrq's launcher through `ip netns exec`, joined at rank 0's rendezvous,
/// connected by UCX over tcp on the rig's veth; each rank first checks that UCX really
/// uses that. Skipped, saying so, where UCX or namespaces are missing.
pub fn ucx_hosts(test: &str, ranks: usize, case: Case<UcxConduit>) {
    let joined = super::ranks::joined_ucx(&spec_for(test), Duration::from_secs(60));
    run_rank(joined, |c| {
        super::rig::assert_tcp_on_rig(&c);
        case(
            c,
            &Job {
                die: die_ucx_process,
            },
        )
    });
    if super::ucx::loopback_or_skip(test).is_none() {
        return;
    }
    let _g = one_at_a_time();
    let Some(rig) = super::rig::Rig::or_skip(ranks, test) else {
        return;
    };
    let mut l = Launcher::new(ranks);
    let at = super::rig::address(0);
    let hosts = Hosts::new(&rig.host_list(1), super::rig::Rig::EXEC, Some(&at));
    l.hosts = Some(hosts.expect("hosts"));
    l.env = super::rig::Rig::ucx_env();
    launch(l, test, ranks);
}

/// Runs `case` on `ranks` ranks as processes on namespace hosts, two per host, over
/// the cluster conduit: `shm` between the two ranks of a host, UCX over tcp on the
/// rig's veth between hosts (each rank first checks that UCX really uses that).
/// Skipped, saying so, where UCX or namespaces are missing.
pub fn cluster_hosts(test: &str, ranks: usize, case: Case<ClusterConduit>) {
    let joined = super::ranks::joined_cluster(&spec_for(test), Duration::from_secs(60));
    run_rank(joined, |c| {
        super::rig::assert_tcp_on_rig(c.remote());
        assert_eq!(
            c.local_ranks().len(),
            2,
            "two ranks share each host's memory"
        );
        case(
            c,
            &Job {
                die: die_cluster_process,
            },
        )
    });
    on_rig(test, ranks);
}

/// [`cluster_hosts`] with each rank's cluster behind the ring conduit's front
/// (`MemConduit::across_hosts`), the endpoint a program's job gets across hosts.
pub fn front_hosts(test: &str, ranks: usize, case: Case<MemConduit>) {
    let joined = super::ranks::joined_cluster(&spec(), Duration::from_secs(60));
    let front = joined.map_err(|e| e.to_string()).and_then(|c| {
        c.map(MemConduit::across_hosts)
            .transpose()
            .map_err(|e| e.to_string())
    });
    run_rank(front, |c| {
        let cluster = c.across().expect("a front");
        super::rig::assert_tcp_on_rig(cluster.remote());
        assert_eq!(
            cluster.local_ranks().len(),
            2,
            "two ranks share each host's memory"
        );
        case(
            c,
            &Job {
                die: die_front_process,
            },
        )
    });
    on_rig(test, ranks);
}

/// Starts `test` as `ranks` processes on namespace hosts, two per host (skipped,
/// saying so, where UCX or namespaces are missing).
fn on_rig(test: &str, ranks: usize) {
    if super::ucx::loopback_or_skip(test).is_none() {
        return;
    }
    let _g = one_at_a_time();
    let Some(rig) = super::rig::Rig::or_skip(ranks / 2, test) else {
        return;
    };
    let mut l = Launcher::new(ranks);
    let hosts = Hosts::new(
        &rig.host_list(2),
        super::rig::Rig::EXEC,
        Some(&super::rig::address(0)),
    );
    l.hosts = Some(hosts.expect("hosts"));
    l.env = super::rig::Rig::ucx_env();
    launch(l, test, ranks);
}

fn die_front_process(c: MemConduit) {
    let ok = mark_ran(c.rank());
    std::process::exit(if ok { 0 } else { 1 });
}

fn die_cluster_process(c: ClusterConduit) {
    let ok = mark_ran(c.rank());
    std::process::exit(if ok { 0 } else { 1 });
}

/// A process rank's crash over UCX: it records that it ran, then exits at once (no
/// goodbye is sent; its peers see its connections close).
fn die_ucx_process(c: UcxConduit) {
    let ok = mark_ran(c.rank());
    std::process::exit(if ok { 0 } else { 1 });
}
