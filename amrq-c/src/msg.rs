//! The message a C handler is handed: the bytes of the poll's own `amrq::am::Msg`.

use amrq::am::Msg;
use std::ffi::c_void;

/// An arriving message, as a C handler sees it: the message the poll built, handed
/// over as it is (`amrq::am::Msg` has this layout: asserted below).
#[repr(C)]
pub struct AmrqMsg {
    /// The args.
    pub args: *const u64,
    /// The payload, valid during the handler only: Medium's in the queue, where no
    /// peer writes it until the handler returns; Long's in this rank's segment, where it
    /// stays and where any rank may `put` meanwhile (copy it out, or read it as the
    /// program's protocol allows).
    pub payload: *const c_void,
    /// How many args (0–8).
    pub nargs: usize,
    /// The payload's bytes (0 for Short).
    pub len: usize,
    /// The sender's rank.
    pub source: usize,
    /// 1 for a Long payload of at least one byte (in this rank's segment), else 0.
    pub in_segment: usize,
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    let l = Msg::C_LAYOUT;
    assert!(offset_of!(AmrqMsg, args) == l.args);
    assert!(offset_of!(AmrqMsg, payload) == l.payload);
    assert!(offset_of!(AmrqMsg, nargs) == l.nargs);
    assert!(offset_of!(AmrqMsg, len) == l.len);
    assert!(offset_of!(AmrqMsg, source) == l.source);
    assert!(offset_of!(AmrqMsg, in_segment) == l.in_segment);
    assert!(size_of::<AmrqMsg>() == l.size);
    assert!(align_of::<AmrqMsg>() == align_of::<Msg<'static>>());
};

/// `m` as C sees it: the same bytes.
#[inline(always)]
pub(crate) fn c_msg(m: &Msg<'_>) -> *const AmrqMsg {
    std::ptr::from_ref(m).cast()
}
