//! The vocabulary of one-sided operations at the conduit: remote atomics
//! ([`AtomicOp`]), and what starting an operation answers ([`Started`]): done at once
//! (a copy into mapped memory), or in flight until the conduit completes it (a network
//! put, UCX's `ucp_put_nbx` returning a request).

use std::sync::atomic::{AtomicU64, Ordering};

/// A remote atomic operation on a u64 word (i64 values work through `as u64`: the
/// bits of two's-complement add, swap, compare-and-swap and the bitwise operations are
/// the same).
///
/// ```
/// use amrq::conduit::AtomicOp;
/// use std::sync::atomic::AtomicU64;
/// let w = AtomicU64::new(5);
/// assert_eq!(AtomicOp::CompareSwap { current: 5, new: 9 }.apply(&w), 5);
/// assert_eq!(AtomicOp::FetchAdd(1).apply(&w), 9);
/// assert_eq!(w.into_inner(), 10);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// Adds, wrapping.
    FetchAdd(u64),
    /// Stores the value.
    Swap(u64),
    /// Stores `new` if the word is `current`.
    CompareSwap {
        /// Expected value.
        current: u64,
        /// Value stored if it matched.
        new: u64,
    },
    /// Bitwise and.
    FetchAnd(u64),
    /// Bitwise or.
    FetchOr(u64),
    /// Bitwise xor.
    FetchXor(u64),
    /// Reads the word (Acquire: what was written before a [`AtomicOp::Store`], or any
    /// other atomic, of the value read is visible after).
    Load,
    /// Writes the word (Release); its value before is not returned (0).
    Store(u64),
}

impl AtomicOp {
    /// Applies the operation to `w` as a processor atomic; returns the value before.
    ///
    /// ```
    /// use amrq::conduit::AtomicOp;
    /// use std::sync::atomic::AtomicU64;
    /// let w = AtomicU64::new(0b1100);
    /// assert_eq!(AtomicOp::FetchAnd(0b0100).apply(&w), 0b1100);
    /// assert_eq!(AtomicOp::Load.apply(&w), 0b0100);
    /// ```
    pub fn apply(self, w: &AtomicU64) -> u64 {
        // ORDERING: AcqRel: a remote atomic orders like a lock operation, so that a
        // counter or flag built on it publishes (Release) and acquires (Acquire) the
        // data around it; pairs with the same operations of other ranks, and with the
        // RMA layer's Acquire loads and Release stores of such words.
        let o = Ordering::AcqRel;
        match self {
            AtomicOp::FetchAdd(v) => w.fetch_add(v, o),
            AtomicOp::Swap(v) => w.swap(v, o),
            AtomicOp::CompareSwap { current, new } => {
                // ORDERING: as above; Acquire on failure (the value read is returned).
                match w.compare_exchange(current, new, o, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
            AtomicOp::FetchAnd(v) => w.fetch_and(v, o),
            AtomicOp::FetchOr(v) => w.fetch_or(v, o),
            AtomicOp::FetchXor(v) => w.fetch_xor(v, o),
            // ORDERING: Acquire pairs with the Release of `Store` and the AcqRel above.
            AtomicOp::Load => w.load(Ordering::Acquire),
            AtomicOp::Store(v) => {
                // ORDERING: Release pairs with the Acquire of `Load` and the AcqRel above.
                w.store(v, Ordering::Release);
                0
            }
        }
    }

    /// The operation as three words for a frame: kind, first and second operand.
    ///
    /// ```
    /// use amrq::conduit::AtomicOp;
    /// let op = AtomicOp::CompareSwap { current: 1, new: 2 };
    /// let (k, a, b) = op.to_words();
    /// assert_eq!(AtomicOp::from_words(k, a, b), Some(op));
    /// assert_eq!(AtomicOp::from_words(99, 0, 0), None);
    /// ```
    pub fn to_words(self) -> (u64, u64, u64) {
        match self {
            AtomicOp::FetchAdd(v) => (0, v, 0),
            AtomicOp::Swap(v) => (1, v, 0),
            AtomicOp::CompareSwap { current, new } => (2, current, new),
            AtomicOp::FetchAnd(v) => (3, v, 0),
            AtomicOp::FetchOr(v) => (4, v, 0),
            AtomicOp::FetchXor(v) => (5, v, 0),
            AtomicOp::Load => (6, 0, 0),
            AtomicOp::Store(v) => (7, v, 0),
        }
    }

    /// The operation [`AtomicOp::to_words`] wrote; `None` for an unknown kind.
    ///
    /// ```
    /// use amrq::conduit::AtomicOp;
    /// let (k, a, b) = AtomicOp::FetchXor(5).to_words(); // as a frame carries it
    /// assert_eq!(AtomicOp::from_words(k, a, b), Some(AtomicOp::FetchXor(5)));
    /// ```
    pub fn from_words(kind: u64, a: u64, b: u64) -> Option<Self> {
        Some(match kind {
            0 => AtomicOp::FetchAdd(a),
            1 => AtomicOp::Swap(a),
            2 => AtomicOp::CompareSwap { current: a, new: b },
            3 => AtomicOp::FetchAnd(a),
            4 => AtomicOp::FetchOr(a),
            5 => AtomicOp::FetchXor(a),
            6 => AtomicOp::Load,
            7 => AtomicOp::Store(a),
            _ => return None,
        })
    }
}

/// A one-sided operation a conduit has started and not yet completed; ask
/// [`Conduit::op_test`](super::Conduit::op_test) about it.
///
/// ```
/// use amrq::conduit::{threads, Conduit, Started};
/// let eps = threads::endpoints(2, &[16]).unwrap();
/// match eps[0].put_nb(1, 0, b"data").unwrap() {
///     Started::Done(_) => {} // mapped memory: done at once
///     Started::InFlight(token) => while eps[0].op_test(token).unwrap().is_none() {},
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "an operation in flight is complete only once op_test says so"]
pub struct OpToken(pub u64);

/// What starting a one-sided operation answers.
///
/// ```
/// use amrq::conduit::{threads, AtomicOp, Conduit, Started};
/// let eps = threads::endpoints(2, &[16]).unwrap();
/// let old = match eps[0].atomic_nb(1, 0, AtomicOp::FetchAdd(2)).unwrap() {
///     Started::Done(v) => v,
///     Started::InFlight(t) => loop {
///         if let Some(v) = eps[0].op_test(t).unwrap() { break v; }
///     },
/// };
/// assert_eq!(old, 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an operation in flight is complete only once op_test says so"]
pub enum Started {
    /// Complete already, with an atomic's value before (0 for put and get).
    Done(u64),
    /// In flight until [`Conduit::op_test`](super::Conduit::op_test) answers its value,
    /// or [`Conduit::flush`](super::Conduit::flush) returns.
    InFlight(OpToken),
}
