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
    #[inline]
    pub(crate) fn refusal(
        &self,
        dest: Rank,
        ch: Channel,
        msg: &Message<'_>,
        long: Option<usize>,
        tag_on: bool,
    ) -> Result<(), ConduitError> {
        if long.is_none() && !tag_on {
            let t = self.sender(dest, ch, &Message { args: &[], ..*msg })?;
            if msg.args.len() > MAX_ARGS || msg.payload.len() > self.caps.channels[ch].max_payload {
                return Err(self.check_send(dest, ch, msg.args.len(), msg.payload.len()));
            }
            if msg.flags & Message::INTERRUPT == 0 {
                return match msg.args.len() > t.max_args {
                    true => Err(self.check_send(dest, ch, msg.args.len(), msg.payload.len())),
                    false => Ok(()),
                };
            }
            return self.flagged_ring(dest, ch, msg).map(drop);
        }
        let t = self.sender(dest, ch, msg)?;
        match long {
            Some(offset) => self.in_segment(dest, offset, msg.payload.len()),
            None => Self::fits_tag_on(t, msg.payload.len()),
        }
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
