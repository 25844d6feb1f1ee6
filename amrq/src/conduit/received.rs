//! What a receiver holds of a frame: [`ReceivedFrame`], a frame still in place in its
//! queue, and [`TagOnData`], a Tag-On block kept after its frame left.

use super::{PayloadView, Rank};

/// A Tag-On data block kept after its frame left the queue: read in place, freed for
/// the sender's reuse when dropped (StarT-Voyager's receiver-side buffer pool).
///
/// ```
/// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
/// let eps = threads::endpoints(2, &[64]).unwrap();
/// let big = vec![7u8; 2000];
/// eps[0].try_send_tag_on(1, 0, &Message { tag: 0, flags: 0, args: &[1], payload: &big }).unwrap();
/// let f = eps[1].peek(0).unwrap().expect("the frame");
/// let block = f.keep().expect("a Tag-On frame"); // the frame is gone, its block stays
/// assert_eq!(&block[..], &big[..]);
/// drop(block); // the block goes back to rank 0's use
/// ```
pub struct TagOnData<'a> {
    data: &'a [u8],
    flag: &'a std::sync::atomic::AtomicU64,
}

impl<'a> TagOnData<'a> {
    /// A block of `data` whose pool flag is `flag` (set while the block is in use).
    ///
    /// ```
    /// use amrq::conduit::TagOnData;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// let flag = AtomicU64::new(1); // in use
    /// {
    ///     let d = TagOnData::new(b"block", &flag);
    ///     assert_eq!(&d[..], b"block");
    /// }
    /// assert_eq!(flag.load(Ordering::Relaxed), 0); // freed on drop
    /// ```
    pub fn new(data: &'a [u8], flag: &'a std::sync::atomic::AtomicU64) -> Self {
        Self { data, flag }
    }
}

impl std::fmt::Debug for TagOnData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagOnData")
            .field("len", &self.data.len())
            .finish()
    }
}

impl std::ops::Deref for TagOnData<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.data
    }
}

impl Drop for TagOnData<'_> {
    fn drop(&mut self) {
        // ORDERING: Release: our reads of the block happen before the sender reuses it;
        // pairs with the Acquire load of the flag when the sender claims a block.
        self.flag.store(0, std::sync::atomic::Ordering::Release);
    }
}

/// A frame received on a channel and still in place. Dropping it leaves it at the head
/// of its queue (RQ's `read_queue`); [`ReceivedFrame::release`] removes it.
///
/// ```
/// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
/// let eps = threads::endpoints(2, &[16]).unwrap();
/// eps[1].try_send(0, 0, &Message { tag: 5, flags: 1, args: &[10, 20], payload: b"xy" }).unwrap();
/// let f = eps[0].peek(0).unwrap().expect("a frame");
/// assert_eq!((f.source(), f.tag(), f.flags(), f.args()), (1, 5, 1, &[10, 20][..]));
/// assert_eq!(f.payload().held(), Some(&b"xy"[..])); // a Medium payload: lent in place
/// assert!(!f.is_long() && !f.is_tag_on());
/// f.release();
/// ```
pub trait ReceivedFrame<'a> {
    /// Rank that sent it.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[1].try_send(0, 0, &Message { tag: 0, flags: 0, args: &[], payload: &[] }).unwrap();
    /// assert_eq!(eps[0].peek(0).unwrap().map(|f| f.source()), Some(1));
    /// ```
    fn source(&self) -> Rank;
    /// Its tag.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send(1, 0, &Message { tag: 9, flags: 0, args: &[], payload: &[] }).unwrap();
    /// assert_eq!(eps[1].peek(0).unwrap().map(|f| f.tag()), Some(9));
    /// ```
    fn tag(&self) -> u16;
    /// Its flags (bits 0–5).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send(1, 0, &Message { tag: 0, flags: 0b101, args: &[], payload: &[] }).unwrap();
    /// assert_eq!(eps[1].peek(0).unwrap().map(|f| f.flags()), Some(0b101));
    /// ```
    fn flags(&self) -> u8;
    /// True for a Long message, whose payload lies in this rank's registered segment.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send_long(1, 0, &Message { tag: 0, flags: 0, args: &[], payload: b"long" }, 256).unwrap();
    /// let f = eps[1].peek(0).unwrap().unwrap();
    /// assert!(f.is_long()); // its payload is in rank 1's segment, at byte 256
    /// assert_eq!(f.payload(), b"long");
    /// ```
    fn is_long(&self) -> bool;
    /// Its args.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send(1, 0, &Message { tag: 0, flags: 0, args: &[1, 2, 3], payload: &[] }).unwrap();
    /// assert_eq!(eps[1].peek(0).unwrap().unwrap().args(), [1, 2, 3]);
    /// ```
    fn args(&self) -> &[u64];
    /// Its payload, in place: held in the receive ring (or Tag-On block), or for a Long
    /// message shared in this rank's registered segment (see [`PayloadView`]). A shared
    /// payload never starts right after the args: the Active Message layer tells the
    /// two kinds apart by that.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send(1, 0, &Message { tag: 0, flags: 0, args: &[], payload: &[4; 100] }).unwrap();
    /// assert_eq!(eps[1].peek(0).unwrap().unwrap().payload(), [4; 100]);
    /// ```
    fn payload(&self) -> PayloadView<'_>;
    /// True for a Tag-On message, whose payload is a block of the receiver's pool.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send_tag_on(1, 0, &Message { tag: 0, flags: 0, args: &[], payload: &[1; 1000] }).unwrap();
    /// assert!(eps[1].peek(0).unwrap().unwrap().is_tag_on());
    /// ```
    fn is_tag_on(&self) -> bool;
    /// Removes the frame from its queue, handing its slots back to the sender (and its
    /// Tag-On block, if any).
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send(1, 0, &Message { tag: 0, flags: 0, args: &[1], payload: &[] }).unwrap();
    /// let f = eps[1].peek(0).unwrap().unwrap();
    /// drop(f); // still queued
    /// eps[1].peek(0).unwrap().unwrap().release(); // removed
    /// assert!(eps[1].peek(0).unwrap().is_none());
    /// ```
    fn release(self);
    /// Removes the frame from its queue but keeps its Tag-On block, which stays readable
    /// until the returned handle is dropped; `None` (frame removed) for other kinds.
    ///
    /// ```
    /// use amrq::conduit::{threads, Conduit, Message, ReceivedFrame};
    /// let eps = threads::endpoints(2, &[16]).unwrap();
    /// eps[0].try_send(1, 0, &Message { tag: 0, flags: 0, args: &[1], payload: b"small" }).unwrap();
    /// let f = eps[1].peek(0).unwrap().unwrap();
    /// assert!(f.keep().is_none()); // not Tag-On: removed, nothing kept
    /// assert!(eps[1].peek(0).unwrap().is_none());
    /// ```
    fn keep(self) -> Option<TagOnData<'a>>;
}
