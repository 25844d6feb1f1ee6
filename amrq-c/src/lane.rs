//! The inline sends of `amrq.h`: `amrq_request` and `amrq_reply` are `static inline`
//! functions that write a Short message of at most six args into its ring in the
//! caller, as the Rust API's inlined send does, and call the library
//! (`amrq_request_call`, `amrq_reply_call`) for anything else: a full ring (as the
//! cached head says), more args, a bad argument, a ring they may not write. A call
//! into the library costs more than the send itself (the thin-layer target of the C
//! interface).
//!
//! What they read is at the start of the handles, laid out here:
//!
//! ```text
//!  amrq_t                          amrq_token_t (during a request handler)
//!  ┌ amrq_fast_t ────────────┐     ┌ amrq_token_fast_t ───┐
//!  │ size                    │     │ lane ─▶ the reply lane to the requester
//!  │ nrequests, request_tags │     │ nreplies, reply_tags │
//!  │ requests ─▶ lane[size]  │     │ replied              │
//!  │ replies  ─▶ lane[size]  │     └──────────────────────┘
//!  │ nreplies, reply_tags    │
//!  └─────────────────────────┘     amrq_lane_t: amrq::conduit::mem::ExpressLane, in C
//! ```
//!
//! The header's inline code mirrors [`amrq::conduit::ring`]'s Express frame (sequence
//! word, header word `tag | nargs << 21`, args), its room test, and the library send's
//! one-load doorbell test (see [`ExpressLane::armed_word`]); the C examples and tests
//! run both paths.

use amrq::conduit::mem::ExpressLane;
use std::ffi::c_void;

/// One ring as the inline sends see it: [`ExpressLane`], field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AmrqLane {
    /// Slot 0 of the ring (64-byte slots: sequence word, header word, six args).
    pub slots: *mut u8,
    /// Slots − 1.
    pub mask: u64,
    /// The sender's tail: where its next message goes.
    pub tail: *mut u64,
    /// The sender's last view of the receiver's head.
    pub cached_head: *const u64,
    /// A send of fewer args than this may be inline (0: none may).
    pub args_below: u64,
    /// The channel's doorbell bit if it rings the receiver's doorbell, else 0.
    pub notify_bit: u64,
    /// Names the word a send tests with `notify_bit`: the receiver's armed channels
    /// once the library has seen that no fence is needed before reading them, else a
    /// word with every bit set (the library's send then does the rest).
    pub armed_word: *const *const u64,
    /// The library's own state of the ring.
    pub owner: *const c_void,
}

/// The version of what `amrq.h`'s inline code reads and writes: the handles' first
/// members ([`AmrqFast`], [`AmrqTokenFast`]), [`AmrqLane`], the Express frame and the
/// handler ids' tags; and the message a handler is handed (`AmrqMsg`). The header
/// passes its own to `amrq_init`, which refuses a header of another version (`AMRQ_STATUS_JOB`, saying which): a program compiled against
/// one library's header and linked with another's would otherwise write frames the
/// library misreads. The layout assertions below name what it covers: change one,
/// raise it.
pub const AMRQ_ABI: u32 = 3;

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<AmrqFast>() == 56 && offset_of!(AmrqFast, reply_tags) == 48);
    assert!(size_of::<AmrqTokenFast>() == 32 && offset_of!(AmrqTokenFast, replied) == 24);
    assert!(offset_of!(AmrqLane, owner) == 56);
    assert!(amrq::conduit::ring::MAX_ARGS == 8);
    assert!(
        crate::ids::AMRQ_REQUEST_IDS == 0x5251_0000 && crate::ids::AMRQ_REPLY_IDS == 0x5250_0000
    );
};

const _: () = {
    assert!(std::mem::size_of::<AmrqLane>() == std::mem::size_of::<ExpressLane>());
    assert!(std::mem::align_of::<AmrqLane>() == std::mem::align_of::<ExpressLane>());
    assert!(std::mem::size_of::<AmrqLane>() == 64);
};

impl From<ExpressLane> for AmrqLane {
    fn from(l: ExpressLane) -> Self {
        Self {
            slots: l.slots,
            mask: l.mask,
            tail: l.tail,
            cached_head: l.cached_head,
            args_below: l.args_below,
            notify_bit: l.notify_bit,
            armed_word: l.armed_word,
            owner: l.owner,
        }
    }
}

/// What the inline `amrq_request` reads of an `amrq_t`: its first member.
#[repr(C)]
#[derive(Debug)]
pub struct AmrqFast {
    /// Ranks in the job.
    pub size: usize,
    /// Request handlers registered.
    pub nrequests: usize,
    /// The tag each request handler's messages carry, by C id.
    pub request_tags: *const u16,
    /// The request channel's lanes, one per destination rank.
    pub requests: *const AmrqLane,
    /// The reply channel's lanes, one per destination rank.
    pub replies: *const AmrqLane,
    /// Reply handlers registered.
    pub nreplies: usize,
    /// The tag each reply handler's messages carry, by C id.
    pub reply_tags: *const u16,
}

/// What the inline `amrq_reply` reads and writes of an `amrq_token_t`: its first
/// member.
#[repr(C)]
#[derive(Debug)]
pub struct AmrqTokenFast {
    /// The reply lane to the requester.
    pub lane: *const AmrqLane,
    /// Reply handlers registered.
    pub nreplies: usize,
    /// The tag each reply handler's messages carry, by C id.
    pub reply_tags: *const u16,
    /// 1 once the request was replied to (at most one reply per request).
    pub replied: u64,
}

/// The lanes of a job's request and reply channels (one of each per rank) and its
/// handlers' tags: what [`AmrqFast`] and the tokens point into.
pub(crate) struct Lanes {
    requests: Box<[AmrqLane]>,
    replies: Box<[AmrqLane]>,
    request_tags: Box<[u16]>,
    reply_tags: Box<[u16]>,
}

impl Lanes {
    /// The lanes of `conduit` (a job of `size` ranks), and the tags of its request and
    /// reply handlers by C id.
    pub(crate) fn of(
        conduit: &amrq::conduit::mem::MemConduit,
        size: usize,
        request_tags: Box<[u16]>,
        reply_tags: Box<[u16]>,
    ) -> Self {
        use amrq::rq::QueueId;
        let lanes_of = |q: QueueId| {
            (0..size)
                .map(|dest| {
                    let lane = conduit.express_lane(dest, q.index());
                    lane.unwrap_or(ExpressLane::CLOSED).into()
                })
                .collect()
        };
        Self {
            requests: lanes_of(QueueId::AM_REQUEST),
            replies: lanes_of(QueueId::AM_REPLY),
            request_tags,
            reply_tags,
        }
    }

    /// What `amrq_t` starts with.
    pub(crate) fn fast(&self) -> AmrqFast {
        AmrqFast {
            size: self.requests.len(),
            nrequests: self.request_tags.len(),
            request_tags: self.request_tags.as_ptr(),
            requests: self.requests.as_ptr(),
            replies: self.replies.as_ptr(),
            nreplies: self.reply_tags.len(),
            reply_tags: self.reply_tags.as_ptr(),
        }
    }

    /// What each token hands the inline `amrq_reply`: the reply lanes, the reply
    /// handlers' tags and their count.
    pub(crate) fn for_replies(&self) -> (*const AmrqLane, *const u16, usize) {
        let tags = &self.reply_tags;
        (self.replies.as_ptr(), tags.as_ptr(), tags.len())
    }
}

/// Rings the receiver's doorbell for the message an inline send has just written on
/// `lane`, whose bit it saw armed (called by the header's inline sends only).
///
/// # Safety
/// `lane` is a lane of a live `amrq_t`, used on its thread.
#[no_mangle]
pub unsafe extern "C" fn amrq_lane_notify(lane: *const AmrqLane) {
    // SAFETY: the caller's guarantee.
    let Some(l) = (unsafe { lane.as_ref() }) else {
        return;
    };
    let ring = || {
        // SAFETY: as above: the lane of a live conduit, on its thread.
        unsafe { ExpressLane::notify_owner(l.owner) };
        Ok(())
    };
    // An atomic OR and perhaps a futex wake: nothing to report, but nothing unwinds.
    let _ = crate::guard(|_| {}, ring);
}
