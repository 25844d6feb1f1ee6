//! The conduit conformance suite: what every conduit must do, written once against the
//! `Conduit` trait (`cases.rs`) and run for each conduit (`run.rs`), like UCX's gtest
//! or GASNet-EX's test programs. A new conduit is done when the suite passes: give it
//! a runner and one `suite!` line below.
//!
//! Each test is `<conduit>::<case>`; `cargo test --test conformance shm_processes`
//! runs one conduit's.

#![cfg(not(amrq_loom))]

mod cases;
#[path = "../common/cpu.rs"]
mod cpu;
mod deferred;
#[path = "../common/marker.rs"]
mod marker;
#[path = "../common/ranks.rs"]
mod ranks;
#[path = "../common/rig.rs"]
mod rig;
mod run;
#[path = "../common/ucx.rs"]
mod ucx;

/// The tests of every case for one conduit: `suite!(name, runner, ranks)`, where
/// `runner(test_name, ranks, case)` starts a job of that conduit running the case.
macro_rules! suite {
    ($conduit:ident, $runner:path, $ranks:expr) => {
        mod $conduit {
            use super::cases;
            suite!(@cases $conduit, $runner, $ranks,
                exactly_once_in_order,
                exactly_once_in_order_shared,
                busy_on_full_ring_sends_nothing,
                frame_limits,
                one_poll_in_priority_order,
                sleeping_wait_wakes_on_arrival,
                interrupts_deliver_without_polling,
                put_get_complete,
                borrowed_puts_read_until_answered,
                atomics_are_atomic,
                departed_peers_are_seen_and_their_frames_delivered,
                dead_peer_is_reported,
                sender_not_permitted_is_refused,
                faults_are_recorded_against_the_sender,
            );
        }
    };
    (@cases $conduit:ident, $runner:path, $ranks:expr, $($case:ident,)*) => {
        $(
            #[test]
            fn $case() {
                let name = concat!(stringify!($conduit), "::", stringify!($case));
                $runner(name, $ranks, cases::$case);
            }
        )*
    };
}

suite!(threads, crate::run::threads, 3);
suite!(shm_processes, crate::run::processes, 3);
suite!(in_flight, crate::deferred::threads, 3);
suite!(combined, crate::run::combined, 4);
suite!(ucx_threads, crate::run::ucx_threads, 3);
suite!(ucx_hosts, crate::run::ucx_hosts, 2);
suite!(cluster_hosts, crate::run::cluster_hosts, 4);
// The network conduits again with each frame sent alone (coalescing off).
suite!(ucx_threads_alone, crate::run::ucx_threads, 3);
suite!(ucx_hosts_alone, crate::run::ucx_hosts, 2);
suite!(cluster_hosts_alone, crate::run::cluster_hosts, 4);
suite!(front_hosts, crate::run::front_hosts, 4);

/// Threads of a rank sending at once through injectors (the shared-memory endpoint's):
/// ranks as threads, and as processes of one host.
mod injectors {
    use super::cases;

    #[test]
    fn threads() {
        crate::run::threads("injectors::threads", 3, cases::injectors_send_exactly_once);
    }

    #[test]
    fn shm_processes() {
        crate::run::processes(
            "injectors::shm_processes",
            3,
            cases::injectors_send_exactly_once,
        );
    }
}

/// Runs `rank` on two thread ranks, each over the deferring conduit, and checks that
/// both returned `Ok`.
fn two_deferred_ranks<E: std::fmt::Debug + Send>(
    rank: impl Fn(deferred::Deferred<amrq::conduit::mem::MemConduit>) -> Result<(), E> + Sync,
) {
    let spec = amrq::Config::default().conduit_spec();
    let eps = amrq::conduit::threads::endpoints_for(2, &spec).expect("endpoints");
    let rank = &rank;
    let out: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = eps
            .into_iter()
            .map(|c| s.spawn(move || rank(deferred::Deferred::new(c))))
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("rank panicked"))
            .collect()
    });
    assert!(out.iter().all(Result::is_ok), "{out:?}");
}

/// The RMA layer over a conduit that leaves its operations in flight: every call
/// completes them (handles, implicit operations, counters, atomics) with the same
/// results as over the ring conduit, where every operation completes at once.
#[test]
fn rma_completes_operations_a_conduit_leaves_in_flight() {
    use amrq::prelude::*;
    use amrq::rma::{Completion, Rma, RmaError};

    let rank = |c: deferred::Deferred<amrq::conduit::mem::MemConduit>| -> Result<(), RmaError> {
        let am = Am::new(c, HandlerTable::new(), ())?;
        let rma = Rma::new(am);
        let am = rma.am();
        let (me, peer) = (am.rank(), 1 - am.rank());
        let at = rma.alloc_symmetric(4096, 8)?;
        let counter = rma.alloc_symmetric(8, 8)?;
        let data: Vec<u8> = (0..1024).map(|i| (i * 3 + me) as u8).collect();
        let h = rma.put_nb(peer, at, &data[..256])?;
        while !h.test() {}
        h.wait()?;
        rma.put_nbi(peer, at + 256, &data[256..512])?;
        rma.put_nbi(peer, at + 512, &data[512..768])?;
        assert_eq!(rma.sync_nbi()?, 2);
        let done = Completion {
            counter: Some(counter),
            ..Default::default()
        };
        rma.put_with(peer, at + 768, &data[768..], done)?;
        am.barrier()?;
        assert_eq!(rma.load(me, counter)?, 1, "the peer's counted put arrived");
        let mut back = vec![0u8; 1024];
        rma.get_nb(me, at, &mut back)?.wait()?;
        let want: Vec<u8> = (0..1024).map(|i| (i * 3 + peer) as u8).collect();
        assert_eq!(back, want, "what the peer put, read back through get_nb");
        let mut again = vec![0u8; 1024];
        rma.get(peer, at, &mut again)?;
        assert_eq!(again, data, "what this rank put, read back through get");
        am.barrier()?;
        Ok(())
    };
    two_deferred_ranks(rank);
}

/// `Rma::put_scope` over a conduit that reads a borrowed put's data only when asked
/// about it a second time: the scope ends (returning, or unwinding from a panic of its
/// closure or of a handler it runs while it waits) only once every put has read its
/// buffer, so buffers overwritten right after it leave the targets with what they held
/// before.
#[test]
fn rma_put_scope_ends_after_its_puts_even_on_a_panic() {
    use amrq::conduit::{Conduit, Started};
    use amrq::prelude::*;
    use amrq::rma::{Rma, RmaError};
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let rank = |c: deferred::Deferred<amrq::conduit::mem::MemConduit>| -> Result<(), RmaError> {
        let mut table = HandlerTable::new();
        let boom = table.request("boom", |_: &(), _, _| -> Result<(), AmError> {
            panic!("a handler panics while the scope waits for its puts")
        });
        let am = Am::new(c, table, ())?;
        let rma = Rma::new(am);
        let am = rma.am();
        let (me, peer) = (am.rank(), 1 - am.rank());
        let at = rma.alloc_symmetric(12288, 8)?;
        let mut first: Vec<u8> = (0..4096).map(|i| (i * 7 + me) as u8).collect();
        let mut second: Vec<u8> = (0..4096).map(|i| (i * 5 + me) as u8).collect();
        let mut third: Vec<u8> = (0..4096).map(|i| (i * 3 + me) as u8).collect();
        let (want_first, want_second, want_third) = (first.clone(), second.clone(), third.clone());
        let n = rma.put_scope(|s| {
            for (i, chunk) in first.chunks(1024).enumerate() {
                s.put(peer, at + 1024 * i, chunk)?;
            }
            Ok(4)
        })?;
        assert_eq!(n, 4);
        first.fill(0xee);
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            rma.put_scope(|s| -> Result<(), RmaError> {
                s.put(peer, at + 4096, &second)?;
                panic!("the scope's closure fails with a put in flight");
            })
        }));
        assert!(panicked.is_err());
        second.fill(0xee);
        am.barrier()?;
        let mut got = vec![0u8; 12288];
        rma.get(me, at, &mut got)?;
        let peer_of = |v: &[u8]| -> Vec<u8> {
            // What the peer put: the same formula with its rank.
            v.iter()
                .map(|&b| b.wrapping_sub(me as u8).wrapping_add(peer as u8))
                .collect()
        };
        assert_eq!(got[..4096], peer_of(&want_first)[..], "the scope's puts");
        assert_eq!(
            got[4096..8192],
            peer_of(&want_second)[..],
            "the panicked scope's put"
        );
        am.barrier()?;
        // A request to itself, whose handler runs (and panics) while the scope waits.
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            rma.put_scope(|s| {
                for (i, chunk) in third.chunks(1024).enumerate() {
                    s.put(peer, at + 8192 + 1024 * i, chunk)?;
                }
                Ok(am.request(me, boom, &[])?)
            })
        }));
        assert!(panicked.is_err(), "the handler ran inside the scope's wait");
        third.fill(0xee);
        // The panic left the engine with its frame outstanding: the puts are read back
        // from the peer's segment through the conduit.
        let c = am.rq().conduit();
        let mut back = vec![0u8; 4096];
        // SAFETY: `back` outlives the get, completed below before it is read.
        let got = unsafe { c.get_nb(peer, at + 8192, back.as_mut_ptr(), back.len()) };
        if let Started::InFlight(t) = got.expect("get") {
            while c.op_test(t).expect("op_test").is_none() {}
        }
        assert_eq!(
            back, want_third,
            "the puts of the scope whose handler panicked"
        );
        Ok(())
    };
    two_deferred_ranks(rank);
}
