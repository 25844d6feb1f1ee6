//! What an outgoing message carries: its args by value for the retry of a Short send,
//! and what follows them.

/// What follows the args of a message.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// Carried in the queue (Short when empty, Medium otherwise).
    Inline(&'a [u8]),
    /// Deposited at an offset of the destination's registered segment (Long).
    Long(&'a [u8], usize),
}

/// The args of a Short send, by value: what its out-of-line retry is handed, so that
/// the inlined send never puts the caller's args in memory for it (a slice would: each
/// such store takes a store-buffer entry of a sender that is waiting for its slots'
/// cache lines, and slowed a streaming sender, `amrq-bench one-to-one`'s).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShortArgs {
    words: [u64; crate::conduit::ring::MAX_ARGS],
    n: usize,
}

impl ShortArgs {
    /// `args` by value; `None` if there are more than `MAX_ARGS` (which the conduit
    /// refuses: its send of the slice says why).
    #[inline(always)]
    pub(crate) fn of(args: &[u64]) -> Option<Self> {
        let mut words = [0; crate::conduit::ring::MAX_ARGS];
        words.get_mut(..args.len())?.copy_from_slice(args);
        Some(Self {
            words,
            n: args.len(),
        })
    }

    /// The args.
    pub(crate) fn as_slice(&self) -> &[u64] {
        &self.words[..self.n]
    }
}
