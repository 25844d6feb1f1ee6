//! No heap allocation per message in the steady state: Short requests, request-reply
//! round trips, typed requests and calls (one at a time and a window in flight), counted
//! by a global allocator that counts each thread's allocations. Each rank counts its own
//! thread over its own steady state: the sender's loops, the receiver's serving them,
//! and a wait long enough to sleep.

#![cfg(not(amrq_loom))]

use amrq::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting this thread's allocations and reallocations.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: a thread being torn down has no counter any more, and needs none.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is passed to `System` unchanged; counting touches no heap memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

struct State {
    pong: ReplyHandler,
    pongs: Cell<u64>,
    hits: Cell<u64>,
    done: Cell<bool>,
}

/// Messages of each kind per pass.
const N: u64 = 20_000;
/// Calls in flight in the windowed pass.
const WINDOW: usize = 64;

#[test]
fn steady_state_messages_allocate_nothing() {
    let out = Config::new().threads(2, |setup| -> amrq::Result<(u64, u64)> {
        let mut t = HandlerTable::new();
        let pong = t.reply("pong", |s: &State, _m| {
            s.pongs.set(s.pongs.get() + 1);
            Ok(())
        });
        let ping = t.request("ping", |s: &State, ctx, m| ctx.reply(s.pong, &[m.arg(0)?]));
        let hit = t.request("hit", |s: &State, _ctx, m| {
            s.hits.set(s.hits.get() + m.arg(0)?);
            Ok(())
        });
        let typed = t.handler("typed", |s: &State, _ctx, (n, _x): (u64, f64)| {
            s.hits.set(s.hits.get() + n);
            Ok(())
        });
        let double = t.call("double", |_s: &State, _ctx, x: u64| Ok(2 * x));
        // A reply that comes late: the sender's wait spins out and sleeps.
        let nap = t.request("nap", |s: &State, ctx, _m| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            ctx.reply(s.pong, &[0])
        });
        let done = t.request("done", |s: &State, _ctx, _m| {
            s.done.set(true);
            Ok(())
        });
        let state = State {
            pong,
            pongs: Cell::new(0),
            hits: Cell::new(0),
            done: Cell::new(false),
        };
        let am = setup.start(t, state)?;
        let mut window = std::collections::VecDeque::with_capacity(WINDOW);
        // One pass of every kind; the first warms up (ring pages, call slots). The
        // measured one ends with the rank's first wait long enough to sleep.
        let pass = |window: &mut std::collections::VecDeque<_>, late: bool| -> amrq::Result<()> {
            let s = am.state();
            for i in 0..N {
                am.request(1, hit, &[1])?;
                am.send(1, typed, (1, 0.5))?;
                let pongs = s.pongs.get();
                am.request(1, ping, &[i])?;
                am.wait_until(|s| s.pongs.get() > pongs)?;
                assert_eq!(am.call(1, double, i)?.wait()?, 2 * i);
            }
            for i in 0..N {
                if window.len() == WINDOW {
                    let p: amrq::am::Pending<'_, u64, State> = window.pop_front().unwrap();
                    p.wait()?;
                }
                window.push_back(am.call(1, double, i)?);
            }
            while let Some(p) = window.pop_front() {
                p.wait()?;
            }
            if late {
                let pongs = s.pongs.get();
                am.request(1, nap, &[])?;
                am.wait_until(|s| s.pongs.get() > pongs)?;
            }
            Ok(())
        };
        if am.rank() == 0 {
            pass(&mut window, false)?;
            am.barrier()?;
            let before = allocations();
            pass(&mut window, true)?;
            let allocated = allocations() - before;
            am.request(1, done, &[])?;
            am.barrier()?;
            Ok((allocated, 0))
        } else {
            am.wait_until(|s| s.hits.get() == 2 * N)?;
            am.barrier()?;
            let before = allocations();
            am.wait_until(|s| s.done.get())?;
            let allocated = allocations() - before;
            assert_eq!(am.state().hits.get(), 4 * N);
            am.barrier()?;
            Ok((allocated, am.state().hits.get()))
        }
    });
    let out = out.unwrap_or_else(|e| panic!("{}", e.chain()));
    assert_eq!(out[0].0, 0, "rank 0 (the sender) allocated per message");
    assert_eq!(out[1].0, 0, "rank 1 (the receiver) allocated per message");
}
