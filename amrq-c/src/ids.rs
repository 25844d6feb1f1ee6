//! Handler ids as C sees them: a request handler's and a reply handler's are distinct
//! types, so that C's compiler refuses one where the other is expected, and their
//! values are tagged, so that the library refuses one mixed up by a cast, forged or
//! never set (`AMRQ_STATUS_ARGUMENT`, naming what it is).

use crate::Failure;

/// Where request handlers' ids start: the `k`-th registered has `AMRQ_REQUEST_IDS + k`.
pub const AMRQ_REQUEST_IDS: u32 = 0x5251_0000;
/// Where reply handlers' ids start: the `k`-th registered has `AMRQ_REPLY_IDS + k`.
pub const AMRQ_REPLY_IDS: u32 = 0x5250_0000;
/// Where call handlers' ids start: the `k`-th registered has `AMRQ_CALL_IDS + k`.
pub const AMRQ_CALL_IDS: u32 = 0x5243_0000;

/// A request handler, as `amrq_table_request` names it (a type of its own: C refuses a
/// reply handler here).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmrqRequestHandler {
    /// The tagged id (`AMRQ_REQUEST_IDS` + registration order).
    pub id: u32,
}

/// A reply handler, as `amrq_table_reply` names it (a type of its own: C refuses a
/// request handler here).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmrqReplyHandler {
    /// The tagged id (`AMRQ_REPLY_IDS` + registration order).
    pub id: u32,
}

/// A call handler, as `amrq_table_call` names it (a type of its own: C refuses a
/// request or reply handler here).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmrqCallHandler {
    /// The tagged id (`AMRQ_CALL_IDS` + registration order).
    pub id: u32,
}

/// The index of `id` among `n` handlers of the kind that starts at `base`, or why it
/// names none.
fn index(
    id: u32,
    (base, kind): (u32, &str),
    other: (u32, &str),
    n: usize,
) -> Result<usize, String> {
    let k = id.wrapping_sub(base) as usize;
    if k < n {
        return Ok(k);
    }
    if (id.wrapping_sub(other.0) as usize) < super::job::MAX_HANDLERS {
        return Err(format!(
            "handler id {id:#x} is {} id, given where {kind} handler's is expected",
            other.1
        ));
    }
    Err(format!(
        "no {kind} handler has id {id:#x} (this job registered {n}; ids come from amrq_table_{kind})"
    ))
}

impl AmrqRequestHandler {
    /// Its index among `n` request handlers, or why it is none of them.
    ///
    /// ```
    /// use amrq_c::ids::{AmrqRequestHandler, AMRQ_REQUEST_IDS};
    /// let h = AmrqRequestHandler { id: AMRQ_REQUEST_IDS + 2 };
    /// assert_eq!(h.index(3), Ok(2));
    /// assert!(AmrqRequestHandler { id: 0 }.index(3).is_err()); // never set
    /// ```
    pub fn index(self, n: usize) -> Result<usize, String> {
        let reply = (AMRQ_REPLY_IDS, "a reply handler's");
        index(self.id, (AMRQ_REQUEST_IDS, "request"), reply, n)
    }

    /// [`AmrqRequestHandler::index`] as a C call's failure.
    pub(crate) fn checked(self, n: usize) -> Result<usize, Failure> {
        self.index(n).map_err(Failure::argument)
    }
}

impl AmrqCallHandler {
    /// Its index among `n` call handlers, or why it is none of them.
    ///
    /// ```
    /// use amrq_c::ids::{AmrqCallHandler, AMRQ_CALL_IDS, AMRQ_REQUEST_IDS};
    /// assert_eq!(AmrqCallHandler { id: AMRQ_CALL_IDS + 1 }.index(2), Ok(1));
    /// let e = AmrqCallHandler { id: AMRQ_REQUEST_IDS }.index(1).unwrap_err();
    /// assert!(e.contains("a request handler's id"), "{e}");
    /// ```
    pub fn index(self, n: usize) -> Result<usize, String> {
        let request = (AMRQ_REQUEST_IDS, "a request handler's");
        index(self.id, (AMRQ_CALL_IDS, "call"), request, n)
    }

    /// [`AmrqCallHandler::index`] as a C call's failure.
    pub(crate) fn checked(self, n: usize) -> Result<usize, Failure> {
        self.index(n).map_err(Failure::argument)
    }
}

impl AmrqReplyHandler {
    /// Its index among `n` reply handlers, or why it is none of them.
    ///
    /// ```
    /// use amrq_c::ids::{AmrqReplyHandler, AMRQ_REQUEST_IDS};
    /// // A request handler's id passed as a reply handler's: refused, saying so.
    /// let e = AmrqReplyHandler { id: AMRQ_REQUEST_IDS }.index(1).unwrap_err();
    /// assert!(e.contains("a request handler's id"), "{e}");
    /// ```
    pub fn index(self, n: usize) -> Result<usize, String> {
        let request = (AMRQ_REQUEST_IDS, "a request handler's");
        index(self.id, (AMRQ_REPLY_IDS, "reply"), request, n)
    }

    /// [`AmrqReplyHandler::index`] as a C call's failure.
    pub(crate) fn checked(self, n: usize) -> Result<usize, Failure> {
        self.index(n).map_err(Failure::argument)
    }
}
