//! A job's end. Returning from a rank's main drops its [`Job`](super::Job); the rank
//! then serves its peers until the job is quiescent (every rank has returned, every
//! Active Message sent has been handled: `am/exit.rs`) and leaves.
//!
//! Inside [`Config::run`](crate::Config::run) and
//! [`Config::threads`](crate::Config::threads) the drop does not do that itself: it
//! parks the rank's layers here, because only the runner learns how the main ended. A
//! main that returned `Ok` ends its parked layers (the job's end); one that failed
//! records its failure first, so that the peers' waits end naming it at once, and its
//! layers leave without waiting for anyone. Elsewhere (`Config::join`, C), the drop
//! ends the job in place.

use crate::am::AmError;
use crate::conduit::Rank;
use crate::splitc::SplitC;
use std::cell::{Cell, RefCell};

/// A rank's layers, type-erased, that can take part in the job's end.
pub(super) trait Ending {
    /// Serves until the job is quiescent.
    fn end(&self) -> Result<(), AmError>;
    /// The rank.
    fn rank(&self) -> Rank;
}

impl<S: 'static> Ending for SplitC<S> {
    fn end(&self) -> Result<(), AmError> {
        self.am().quiesce()
    }

    fn rank(&self) -> Rank {
        self.am().rank()
    }
}

thread_local! {
    /// A runner on this thread parks the `Job`s its main drops.
    static PARKING: Cell<bool> = const { Cell::new(false) };
    static PARKED: RefCell<Vec<Box<dyn Ending>>> = const { RefCell::new(Vec::new()) };
}

/// Where a dropped `Job`'s layers go: parked for the runner (`Some` given back if no
/// runner is on this thread, for the drop to end in place).
pub(super) fn park(layers: Box<dyn Ending>) -> Option<Box<dyn Ending>> {
    // A `Job` dropped while the thread's locals are torn down has no runner any more.
    if !PARKING.try_with(Cell::get).unwrap_or(false) {
        return Some(layers);
    }
    let mut layers = Some(layers);
    let _ = PARKED.try_with(|p| p.borrow_mut().extend(layers.take()));
    layers
}

/// Ends `layers` in place, saying on stderr what prevented it.
pub(super) fn end_in_place(layers: &dyn Ending) {
    if let Err(e) = layers.end() {
        crate::util::say(&format!(
            "amrq: rank {}: the job's end was not reached: {}",
            layers.rank(),
            crate::Error::from(e).chain()
        ));
    }
}

/// An error of the job's end, unless it only echoes another rank's failure or
/// departure: that rank reports it (and its launcher), this one's main succeeded.
fn not_an_echo(e: AmError) -> Result<(), AmError> {
    use crate::conduit::ConduitError::{AllPeersLeft, PeerDead, PeerLeft};
    match e.conduit() {
        Some(PeerDead { .. } | PeerLeft { .. } | AllPeersLeft) => Ok(()),
        _ => Err(e),
    }
}

/// Runs a rank's main with its `Job`s parked; if it returned `Ok`, ends them (the
/// job's end) and returns what that met; if not, calls `failed` with the outcome before
/// they leave. A panic is caught and returned, as `catch_unwind` does.
pub(crate) fn run_main<T>(
    main: impl FnOnce() -> crate::Result<T>,
    failed: impl FnOnce(&std::thread::Result<crate::Result<T>>),
) -> std::thread::Result<crate::Result<T>> {
    PARKING.with(|p| p.set(true));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(main));
    PARKING.with(|p| p.set(false));
    let parked = PARKED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let out = match out {
        Ok(Ok(value)) => Ok(parked
            .iter()
            .try_for_each(|l| l.end().or_else(not_an_echo))
            .map_err(crate::Error::from)
            .map(|()| value)),
        other => other,
    };
    if !matches!(out, Ok(Ok(_))) {
        failed(&out);
    }
    drop(parked); // the layers leave: after the failure was recorded
    out
}
