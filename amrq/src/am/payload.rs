//! What follows the args of an outgoing message.

/// What follows the args of a message.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// Carried in the queue (Short when empty, Medium otherwise).
    Inline(&'a [u8]),
    /// Deposited at an offset of the destination's registered segment (Long).
    Long(&'a [u8], usize),
}
