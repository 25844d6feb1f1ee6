//! [`ExpressLane`]: what code outside amrq needs to write an Express frame into one
//! per-pair ring itself, for a send compiled into its caller (the C header's inline
//! `amrq_request` and `amrq_reply`, where a call into the library costs more than the
//! send).
//!
//! ```text
//!  ExpressLane (this process)            the ring (mapped)
//!  slots ───────────────────────────────▶ slot 0 | slot 1 | …   64 bytes each:
//!  mask = slots − 1                                seq | header | args[0..6]
//!  tail, cached_head ──▶ the rank's own Producer (private)
//!  armed_word ─────────▶ the ring's send state (private) ──▶ a word to test:
//!                        the receiver's `armed` (mapped) or one with every bit set
//! ```
//!
//! A lane writes exactly what [`Producer::try_push`](crate::conduit::ring::Producer::try_push)
//! writes for an Express frame: the header word, the args, then the sequence word with
//! Release; then the tail, a write prefetch, and the doorbell's test. Anything else (a
//! ring the cached head says is full, more than six args, a payload) goes to the
//! library's own send, which shares the producer's state through the same words.

use super::channels::{Tx, TxRing};
use super::MemConduit;
use crate::conduit::ring::{RingMemory, EXPRESS_ARGS};
use crate::conduit::{Channel, Rank};

/// One per-pair ring as an inline Express send sees it (see the module doc).
///
/// `args_below` is `EXPRESS_ARGS + 1` (7) on a lane that takes inline sends, and 0 on
/// one that does not (a shared ring, a channel this rank may not send into, a ring shared
/// until its sender moves to an own ring: a lane taken before the move stays closed,
/// and its sends go through the library): a send of
/// `n` args is inline if `n < args_below`.
///
/// ```
/// use amrq::conduit::threads;
/// let eps = threads::endpoints(2, &[256]).unwrap();
/// let lane = eps[0].express_lane(1, 0).expect("rank 1, channel 0");
/// assert_eq!((lane.mask, lane.args_below), (255, 7));
/// assert!(eps[0].express_lane(2, 0).is_none()); // no rank 2
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ExpressLane {
    /// Slot 0 of the ring.
    pub slots: *mut u8,
    /// Slots − 1.
    pub mask: u64,
    /// The producer's tail: the position the next frame takes.
    pub tail: *mut u64,
    /// The producer's last view of the consumer's head.
    pub cached_head: *const u64,
    /// A send of fewer args than this is inline (0: none is).
    pub args_below: u64,
    /// The channel's bit in the receiver's doorbell if its frames ring it, else 0.
    pub notify_bit: u64,
    /// Where the word a send tests with `notify_bit` is named, after a compiler fence:
    /// the library's own send state of the ring, which holds the address of the
    /// receiver's armed channels once the library has seen that the receiver arms
    /// this channel with `membarrier` (so the light handshake of
    /// [`crate::conduit::doorbell::ring`] applies), and until then the address of
    /// a word with every bit set. A set bit calls [`ExpressLane::notify_owner`], which
    /// does the rest (and the fence the receiver may need).
    pub armed_word: *const *const u64,
    /// The ring's send state, for [`ExpressLane::notify_owner`].
    pub owner: *const std::ffi::c_void,
}

const _: () = {
    assert!(std::mem::size_of::<ExpressLane>() == 8 * 8);
    assert!(std::mem::align_of::<ExpressLane>() == 8);
    assert!(EXPRESS_ARGS == 6);
};

impl ExpressLane {
    /// A lane no send is inline on (`args_below` 0; its pointers are null).
    ///
    /// ```
    /// use amrq::conduit::mem::ExpressLane;
    /// assert_eq!(ExpressLane::CLOSED.args_below, 0);
    /// ```
    pub const CLOSED: ExpressLane = ExpressLane {
        slots: std::ptr::null_mut(),
        mask: 0,
        tail: std::ptr::null_mut(),
        cached_head: std::ptr::null(),
        args_below: 0,
        notify_bit: 0,
        armed_word: std::ptr::null(),
        owner: std::ptr::null(),
    };

    /// Rings the receiver's doorbell for a frame an inline send has just published on
    /// the lane whose `owner` is `owner`, having seen its bit set in the word the lane's
    /// `armed_word` names (the library's own send does the same after each frame).
    /// Takes the owner, not the lane, so that a copy of the lane in another type (the C
    /// interface's `amrq_lane_t`) can call it.
    ///
    /// # Safety
    /// `owner` is null (a closed lane's) or the `owner` of a lane from
    /// [`MemConduit::express_lane`] of a conduit still alive, and this is that
    /// conduit's thread.
    ///
    /// ```
    /// use amrq::conduit::{mem::ExpressLane, threads};
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// let lane = eps[0].express_lane(0, 0).unwrap();
    /// // SAFETY: the owner of a live conduit's lane, on its thread.
    /// unsafe { ExpressLane::notify_owner(lane.owner) }; // nobody armed: nothing happens
    /// ```
    pub unsafe fn notify_owner(owner: *const std::ffi::c_void) {
        if owner.is_null() {
            return; // a closed lane's
        }
        // SAFETY: the caller's guarantee: `owner` is a `TxRing` of a live conduit.
        let t = unsafe { &*owner.cast::<TxRing>() };
        t.ring_doorbell();
    }
}

impl MemConduit {
    /// The [`ExpressLane`] of the ring from this rank to `dest` on channel `ch`; `None`
    /// if there is no such rank or channel. Its pointers stay valid while the conduit
    /// lives, and only its thread may use them, never inside a call of the conduit
    /// (the library's sends and the lane's writes take turns on the producer's words).
    ///
    /// ```
    /// use amrq::conduit::threads;
    /// let eps = threads::endpoints(2, &[64]).unwrap();
    /// let lane = eps[1].express_lane(0, 0).unwrap();
    /// // SAFETY: the producer's words of a live conduit, read on its thread.
    /// assert_eq!(unsafe { (*lane.tail, *lane.cached_head) }, (0, 0));
    /// ```
    pub fn express_lane(&self, dest: Rank, ch: Channel) -> Option<ExpressLane> {
        if dest >= self.size || ch >= self.rx.len() || ch >= self.tx_channels {
            return None;
        }
        let t = &self.tx[ch * self.size + dest];
        let tx = t.prod.as_ptr();
        // SAFETY: `tx` points into this conduit's send states, alive as long as it is;
        // no borrow of it is live (this thread is here). Only addresses are taken.
        let words = match unsafe { &mut *tx } {
            Tx::Own(p) => Some(p.words()),
            Tx::Shared { .. } | Tx::Sharing { .. } | Tx::Network { .. } => None,
        };
        // Permitted, this rank's own ring, room for an Express frame's args.
        let inline = t.own_args_below.get() > EXPRESS_ARGS;
        let (tail, cached_head) = words.unwrap_or((std::ptr::null_mut(), std::ptr::null()));
        Some(ExpressLane {
            slots: t.ring.get().slot_ptr(0).cast_mut(),
            mask: t.ring.get().nslots() - 1,
            tail,
            cached_head,
            args_below: if inline { EXPRESS_ARGS as u64 + 1 } else { 0 },
            notify_bit: t.notify_bit,
            armed_word: t.armed_word.as_ptr().cast_const().cast(),
            owner: std::ptr::from_ref(t).cast(),
        })
    }
}
