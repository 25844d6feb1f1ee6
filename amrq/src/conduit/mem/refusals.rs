//! Why the ring conduit refuses a send: the checks behind its sends' fast tests, out of
//! their way, and the refusal a network conduit that carries its frames answers as
//! they would (`refusal`).

use super::channels::TxRing;
use super::MemConduit;
use crate::conduit::ring::MAX_ARGS;
use crate::conduit::{Channel, ConduitError, Message, Rank};

impl MemConduit {
    /// The refusal `try_send`, `try_send_long` (`long: Some(offset)`) or
    /// `try_send_tag_on` (`tag_on`) would answer before looking for room, if any: for a
    /// conduit that carries this conduit's frames over a network and pushes them into
    /// local queues at the receiver (UCX), so that its sends refuse exactly as these.
    /// On that conduit's every send: inline, not `#[cold]` (callgrind, `hosts` example:
    /// 37 instructions fewer per round trip).
    /// Its checks are the channel's caps and this rank's permissions alone, so that an
    /// endpoint that only receives (the UCX conduit's) answers them.
    #[inline]
    pub(crate) fn refusal(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        long: Option<usize>,
        tag_on: bool,
    ) -> Result<(), ConduitError> {
        let (nargs, len) = (msg.args.len(), msg.payload.len());
        let c = match self.caps.channels.get(ch) {
            Some(c) if dest < self.size => c,
            _ => return Err(self.check_send(dest, ch, nargs, len)),
        };
        let medium = long.is_none() && !tag_on;
        // A Medium frame's args are checked after its permission, where a flagged one
        // may carry one fewer.
        if !medium && nargs > c.max_args {
            return Err(self.check_send(dest, ch, nargs, len));
        }
        if !c.senders.allows(self.rank) || self.caps.interrupt_channel == Some(ch) {
            return Err(self.not_permitted(ch));
        }
        if medium {
            if nargs > MAX_ARGS || len > c.max_payload {
                return Err(self.check_send(dest, ch, nargs, len));
            }
            if msg.flags & Message::INTERRUPT == 0 {
                return match nargs > c.max_args {
                    true => Err(self.check_send(dest, ch, nargs, len)),
                    false => Ok(()),
                };
            }
            return self.flagged_refusal(ch, msg).map(drop);
        }
        match long {
            Some(offset) => self.in_segment(dest, offset, len),
            None if len > self.caps.tag_on_bytes => Err(ConduitError::TagOnTooLarge {
                len,
                max: self.caps.tag_on_bytes,
            }),
            None => Ok(()),
        }
    }

    /// Why `msg`, a frame of channel `ch` flagged [`Message::INTERRUPT`], does not fit
    /// the interrupt channel (one arg word names `ch`), if it does not; else that
    /// channel.
    pub(super) fn flagged_refusal(
        &self,
        ch: Channel,
        msg: &Message<'_>,
    ) -> Result<Channel, ConduitError> {
        let Some(via) = self.caps.interrupt_channel else {
            return Err(ConduitError::NoInterruptChannel);
        };
        if ch == via {
            return Err(ConduitError::InterruptChannel { channel: ch });
        }
        let c = &self.caps.channels[via];
        if msg.args.len() >= c.max_args {
            return Err(ConduitError::TooManyArgs {
                nargs: msg.args.len(),
                max: c.max_args - 1,
            });
        }
        if msg.payload.len() > c.max_payload {
            return Err(ConduitError::PayloadTooLarge {
                len: msg.payload.len(),
                max: c.max_payload,
                channel: ch,
            });
        }
        Ok(via)
    }

    /// [`ConduitError::TagOnTooLarge`] unless `len` bytes fit a block of `t`'s pool.
    #[inline(always)]
    pub(super) fn fits_tag_on(t: &TxRing, len: usize) -> Result<(), ConduitError> {
        if len > t.pool.get().bytes() {
            return Err(ConduitError::TagOnTooLarge {
                len,
                max: t.pool.get().bytes(),
            });
        }
        Ok(())
    }

    /// Why this rank may not send into channel `ch`.
    #[cold]
    pub(super) fn not_permitted(&self, ch: Channel) -> ConduitError {
        if Some(ch) == self.caps.interrupt_channel {
            return ConduitError::InterruptChannel { channel: ch };
        }
        ConduitError::NotPermitted {
            rank: self.rank,
            channel: ch,
        }
    }

    #[cold]
    pub(super) fn no_channel(&self, ch: Channel) -> ConduitError {
        ConduitError::NoSuchChannel {
            channel: ch,
            channels: self.caps.channels.len(),
        }
    }

    #[cold]
    /// Why a send of `nargs` args and `len` payload bytes to `dest` on `ch` is refused
    /// (lengths, not the message: a send whose args live in registers keeps them there).
    pub(super) fn check_send(
        &self,
        dest: Rank,
        ch: Channel,
        nargs: usize,
        len: usize,
    ) -> ConduitError {
        if dest >= self.size {
            ConduitError::NoSuchRank {
                rank: dest,
                size: self.size,
            }
        } else if ch >= self.caps.channels.len() {
            ConduitError::NoSuchChannel {
                channel: ch,
                channels: self.caps.channels.len(),
            }
        } else if nargs > self.caps.channels[ch].max_args {
            ConduitError::TooManyArgs {
                nargs,
                max: self.caps.channels[ch].max_args,
            }
        } else {
            ConduitError::PayloadTooLarge {
                len,
                max: self.caps.channels[ch].max_payload,
                channel: ch,
            }
        }
    }
}
