//! Active Messages (von Eicken, Culler, Goldstein and Schauser, ISCA 1992) built on
//! Remote Queues: a request is an enqueue into the destination's AM request queue
//! carrying a handler index; a poll is a dequeue plus dispatch to that handler (RQ paper,
//! Figure 3).
//!
//! - **Handler table** ([`HandlerTable`]): built the same way on every rank; its shape is
//!   compared across ranks at start-up, so a mismatch is an error, never a misdispatch.
//! - **Request / reply**: a request handler gets a [`ReqCtx`] that can reply once, to the
//!   requester only (`reply` consumes it); a reply handler gets nothing to send with.
//!   Handlers cannot send requests, so they always run to completion.
//! - **Short, Medium and Long**: 0–8 u64 args, plus for Medium a payload of up to
//!   [`Am::max_medium`] bytes (4 KiB or more) carried in the queue, or for Long a payload
//!   of any size deposited at an offset of the destination's registered segment before
//!   the handler runs; either way handed to the handler in place, no copy.
//! - **Deadlock freedom**: requests and replies travel in separate queues; `poll` runs
//!   replies first; a sender waiting for room polls (replies, then requests); a reply
//!   waiting for room polls only replies, whose handlers never send.
//! - **Failures reach the sender**: a request its target cannot run (no such handler,
//!   an arg missing, the handler's own error) comes back as
//!   [`AmError::RequestFailed`], naming the target, the handler and the reason, from
//!   the sender's next poll or wait ([`Am::poll`] says which); the target records it
//!   in [`Am::faults`] and goes on.
//! - Handlers run inside [`Am::poll`], [`Am::wait_until`] and sends that wait for room.
//!   They get the rank's state as `&S`: use `Cell`s for what they change, because a reply
//!   handler may run while a request handler waits to reply.

mod args;
mod barrier;
mod call;
mod ctx;
mod engine;
mod error;
mod events;
mod exit;
mod exit_tree;
mod failure;
mod handlers;
mod landing;
mod ops;
mod payload;
mod pending;
mod segment_alloc;
mod segment_service;
mod send_table;
mod sender;
mod thread_calls;
mod typed;

#[doc(hidden)]
pub use args::{plain_from_words, plain_to_words};
pub use args::{Arg, ArgError, Args, Words};
pub use call::{Call, CALL_ARGS};
pub use ctx::{Msg, MsgLayout, ReqCtx};
pub use engine::Am;
pub use error::AmError;
pub(crate) use events::Event;
pub use failure::RequestFailure;
pub use handlers::{HandlerTable, ReplyFn, ReplyHandler, RequestFn, RequestHandler};
pub(crate) use landing::Landing;
pub(crate) use ops::OpId;
pub(crate) use payload::Payload;
pub use pending::Pending;
pub use segment_alloc::SegmentAllocator;
pub(crate) use segment_service::{
    packed_headers, BLOCK_HEADER, TAG_ATOMIC, TAG_GET, TAG_GET_PACKED, TAG_PUT, TAG_PUT_PACKED,
    TAG_STORE,
};
pub use send_table::SendHandlerTable;
pub use sender::Sender;
pub use thread_calls::Answer;
pub use typed::Handler;
