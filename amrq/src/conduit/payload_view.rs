//! [`PayloadView`], a received payload that may lie where a peer can write it.

use std::borrow::Cow;
use std::marker::PhantomData;

/// A received payload, read without ever lending a `&[u8]` over memory that another
/// rank may write meanwhile.
///
/// Where the bytes are decides what the receiver may assume:
///
/// - **Held** (Short, Medium, Tag-On): in the receiver's own queue slots or Tag-On
///   block, which no peer rewrites until the frame is released (the handler has
///   returned). [`PayloadView::held`] lends them as a `&[u8]`, free of cost.
/// - **Shared** (Long): in the receiver's registered segment, where any rank may `put`
///   or send another Long at the same moment. They are never lent: they are copied out
///   ([`PayloadView::to_cow`], [`PayloadView::to_vec`], [`PayloadView::copy_to`]) through
///   raw pointers, so the compiler assumes nothing about them, and the copy is yours and
///   stays as read. A write to those bytes during the copy is still a conflict, as with
///   any get: the program's protocol orders writes before the message was sent or after
///   the copy (otherwise what the copy holds is undefined). A program whose protocol
///   rules out such writes for longer may borrow them in place with the `unsafe`
///   [`PayloadView::as_slice_unchecked`].
///
/// ```
/// use amrq::conduit::PayloadView;
/// let b = PayloadView::from(&b"in the queue"[..]);
/// assert_eq!(b.held(), Some(&b"in the queue"[..])); // borrowed: no copy
/// assert_eq!(b.len(), 12);
/// let mut first = [0u8; 2];
/// assert_eq!(b.copy_to(&mut first), 2);
/// assert_eq!(&first, b"in");
/// assert_eq!(b, b"in the queue");
/// ```
#[derive(Clone, Copy)]
pub struct PayloadView<'a> {
    ptr: *const u8,
    len: usize,
    shared: bool,
    borrows: PhantomData<&'a [u8]>,
}

impl<'a> PayloadView<'a> {
    /// Bytes a peer may write while they are read: a Long payload in the segment.
    ///
    /// # Safety
    /// `ptr` is valid for reads of `len` bytes for `'a` (mapped; written by peers only
    /// through raw pointers, never through a Rust reference of this process).
    #[inline(always)]
    pub(crate) unsafe fn shared(ptr: *const u8, len: usize) -> Self {
        // SAFETY: the caller's contract, which is `from_raw`'s for shared bytes.
        unsafe { Self::from_raw(ptr, len, true) }
    }

    /// Bytes at `ptr`, shared ([`PayloadView::shared`]) or held.
    ///
    /// # Safety
    /// As [`PayloadView::shared`]; and if not `shared`, no one writes them for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(ptr: *const u8, len: usize, shared: bool) -> Self {
        Self {
            ptr,
            len,
            shared,
            borrows: PhantomData,
        }
    }

    /// The number of bytes.
    ///
    /// ```
    /// assert_eq!(amrq::conduit::PayloadView::from(&[1u8, 2][..]).len(), 2);
    /// ```
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for no bytes (a Short message's payload).
    ///
    /// ```
    /// assert!(amrq::conduit::PayloadView::from(&[][..]).is_empty());
    /// ```
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if a peer may write the bytes while they are read (a Long payload, in the
    /// registered segment): [`PayloadView::held`] is then `None`.
    ///
    /// ```
    /// assert!(!amrq::conduit::PayloadView::from(&b"medium"[..]).is_shared());
    /// ```
    #[inline(always)]
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// The bytes, borrowed in place, if no peer writes them while the message is held
    /// (Short, Medium, Tag-On); `None` for a Long payload.
    ///
    /// ```
    /// let b = amrq::conduit::PayloadView::from(&b"abc"[..]);
    /// assert_eq!(b.held().map(|s| s.len()), Some(3));
    /// ```
    #[inline(always)]
    pub fn held(&self) -> Option<&'a [u8]> {
        // SAFETY: not shared: `from_raw`'s caller (or `From<&[u8]>`) vouched that the
        // bytes stay unwritten for `'a`.
        (!self.shared).then(|| unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The bytes: borrowed if held, else copied out (see [`PayloadView`]).
    ///
    /// ```
    /// use std::borrow::Cow;
    /// let b = amrq::conduit::PayloadView::from(&b"abc"[..]);
    /// assert!(matches!(b.to_cow(), Cow::Borrowed(b"abc")));
    /// ```
    #[inline]
    pub fn to_cow(&self) -> Cow<'a, [u8]> {
        match self.held() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(self.to_vec()),
        }
    }

    /// A copy of the bytes.
    ///
    /// ```
    /// assert_eq!(amrq::conduit::PayloadView::from(&[5u8; 3][..]).to_vec(), vec![5, 5, 5]);
    /// ```
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        // SAFETY: `v` has room for `len` bytes, a fresh allocation apart from the view;
        // `copy_raw` writes them all before `set_len` makes them visible.
        unsafe {
            self.copy_raw(v.as_mut_ptr(), self.len);
            v.set_len(self.len);
        }
        v
    }

    /// Copies the first `min(self.len(), dst.len())` bytes into `dst`; returns how many
    /// (take a part first with [`PayloadView::get`]). No allocation: the way to read a
    /// large Long payload into a buffer of one's own.
    ///
    /// ```
    /// let mut buf = [0u8; 8];
    /// assert_eq!(amrq::conduit::PayloadView::from(&b"abc"[..]).copy_to(&mut buf), 3);
    /// assert_eq!(&buf[..3], b"abc");
    /// ```
    #[inline]
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        let n = self.len.min(dst.len());
        // SAFETY: `dst` is valid for `n ≤ dst.len()` bytes, and apart from the view: a
        // `&mut` is exclusive, and the view's bytes are never lent mutably.
        unsafe { self.copy_raw(dst.as_mut_ptr(), n) };
        n
    }

    /// Copies the first `n ≤ len` bytes to `dst`.
    ///
    /// # Safety
    /// `dst` is valid for writes of `n ≤ self.len` bytes and does not overlap the view.
    #[inline(always)]
    unsafe fn copy_raw(&self, dst: *mut u8, n: usize) {
        debug_assert!(n <= self.len);
        // SAFETY: `ptr` is valid for reads of `len ≥ n` bytes (`from_raw`'s contract),
        // `dst` for writes of `n` and apart from them (the caller's). Raw pointers only:
        // no reference is formed over bytes a peer may be writing.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, dst, n) };
    }

    /// The bytes borrowed in place, held or shared alike: for a program that knows no
    /// rank writes them while it reads (its protocol orders every write to these bytes
    /// before the message was sent, or after the borrow ends).
    ///
    /// # Safety
    /// For a shared payload: no rank, this one included, writes these bytes while the
    /// returned slice is alive. A write meanwhile is a data race, which is undefined
    /// behaviour, however harmless the program meant it to be.
    ///
    /// ```
    /// let b = amrq::conduit::PayloadView::from(&b"abc"[..]);
    /// // SAFETY: held bytes: no peer writes them while the message is held.
    /// assert_eq!(unsafe { b.as_slice_unchecked() }, b"abc");
    /// ```
    #[inline(always)]
    pub unsafe fn as_slice_unchecked(&self) -> &'a [u8] {
        // SAFETY: `ptr` is valid for `len` bytes for `'a`; the caller rules out writes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The part `range` of the payload, as a view of the same kind; `None` if it does not
    /// lie inside.
    ///
    /// ```
    /// let b = amrq::conduit::PayloadView::from(&b"header:body"[..]);
    /// let body = b.get(7..).expect("inside");
    /// assert_eq!(body, b"body");
    /// assert!(b.get(5..20).is_none());
    /// ```
    pub fn get(&self, range: impl std::ops::RangeBounds<usize>) -> Option<Self> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let start = match range.start_bound() {
            Included(&s) => s,
            Excluded(&s) => s.checked_add(1)?,
            Unbounded => 0,
        };
        let end = match range.end_bound() {
            Included(&e) => e.checked_add(1)?,
            Excluded(&e) => e,
            Unbounded => self.len,
        };
        if start > end || end > self.len {
            return None;
        }
        // SAFETY: `start ≤ end ≤ len`: inside the view, of the same kind.
        Some(unsafe { Self::from_raw(self.ptr.add(start), end - start, self.shared) })
    }

    /// The first byte's address (for C, or to compute an offset in the segment).
    ///
    /// ```
    /// let s = &b"abc"[..];
    /// assert_eq!(amrq::conduit::PayloadView::from(s).as_ptr(), s.as_ptr());
    /// ```
    #[inline(always)]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
}

impl<'a> From<&'a [u8]> for PayloadView<'a> {
    /// Held bytes (a test's stand-in for a Medium payload).
    #[inline(always)]
    fn from(s: &'a [u8]) -> Self {
        // SAFETY: a shared borrow: no one writes it for `'a`.
        unsafe { Self::from_raw(s.as_ptr(), s.len(), false) }
    }
}

impl PartialEq<[u8]> for PayloadView<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        self.len == other.len() && *self.to_cow() == *other
    }
}

impl PartialEq<&[u8]> for PayloadView<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        *self == **other
    }
}

impl PartialEq<Vec<u8>> for PayloadView<'_> {
    fn eq(&self, other: &Vec<u8>) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<[u8; N]> for PayloadView<'_> {
    fn eq(&self, other: &[u8; N]) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for PayloadView<'_> {
    fn eq(&self, other: &&[u8; N]) -> bool {
        *self == other[..]
    }
}

impl PartialEq<PayloadView<'_>> for [u8] {
    fn eq(&self, other: &PayloadView<'_>) -> bool {
        other == self
    }
}

impl PartialEq<PayloadView<'_>> for &[u8] {
    fn eq(&self, other: &PayloadView<'_>) -> bool {
        other == *self
    }
}

impl std::fmt::Debug for PayloadView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.held() {
            Some(s) => s.fmt(f),
            None => write!(f, "<{} bytes in the segment>", self.len),
        }
    }
}

// SAFETY: a `PayloadView` lends its bytes only as a `&'a [u8]` when held (which is `Send` and
// `Sync`) and otherwise only copies them out through raw pointers, which any thread
// may do while the memory is mapped (for `'a`).
unsafe impl Send for PayloadView<'_> {}
// SAFETY: as above.
unsafe impl Sync for PayloadView<'_> {}

#[cfg(test)]
mod tests {
    use super::PayloadView;
    use std::borrow::Cow;

    #[test]
    fn shared_bytes_are_only_copied_out() {
        let data = vec![9u8; 100];
        // SAFETY: `data` outlives `b` and nothing writes it.
        let b = unsafe { PayloadView::shared(data.as_ptr(), data.len()) };
        assert!(b.is_shared() && b.held().is_none());
        assert!(matches!(b.to_cow(), Cow::Owned(v) if v == data));
        let mut short = [0u8; 10];
        assert_eq!(b.copy_to(&mut short), 10);
        assert_eq!(short, [9; 10]);
        let mut long = [0u8; 200];
        assert_eq!(b.copy_to(&mut long), 100);
        assert_eq!(b, &data[..]);
        assert_eq!(&data[..], b);
        assert_ne!(b, &data[..99]);
        let part = b.get(10..20).expect("inside");
        assert!(part.is_shared() && part.len() == 10 && part.to_vec() == [9; 10]);
        assert!(b.get(..=100).is_none() && b.get(101..).is_none());
        assert_eq!(format!("{b:?}"), "<100 bytes in the segment>");
    }
}
