//! A ring conduit that fronts a rank of a job across hosts.
//!
//! A program is compiled once and learns its placement at start-up, so the conduit it
//! runs on is one type, and the one-host path must not pay for the network. A front
//! holds no channels and no send rings of its own, so each of its calls fails the
//! first test it makes on one host anyway (a channel in range, a mapped segment) and
//! takes the path that test leads to when it fails, which is out of line; there it
//! finds its [`Across`] and goes on:
//!
//! - **Receiving**: the receive side of both halves of the cluster is taken over at
//!   start-up, channel by channel, into one channel per queue in the job's numbering
//!   ([`RxChannel::across`]): each sender's ring from the half that carries its frames
//!   (shared memory for this host's ranks, the UCX local queues for the others). A
//!   drain or a look asks for the channel (`channel_across`), which progresses the
//!   network first if the channel holds no frame (or has held frames for 16 looks),
//!   and then runs the ordinary receive loop over it: the same code as on one host, so
//!   the inlined loop is compiled the same way.
//! - **Sending**: a front's send side to each rank has no ring (`Tx::Network`): the
//!   send's push hands the frame to the cluster, which routes it by destination, and a
//!   refusal comes back where a full ring's would. Long and Tag-On frames, one-sided
//!   operations and the job's calls are handed to the cluster from the paths a call
//!   takes when it finds no mapped segment or no receive side.
//! - **Sleeping**: on both halves' words at once ([`Across::sleep`]).
//!
//! Interrupt channels stay in the halves, for the progress thread
//! ([`Conduit::take_interrupts`]).

use super::channels::{Local, RxChannel, Tx, TxRing, CHECK_SLOWLY};
use super::outbox::Outbox;
use super::{HeapRegion, MemConduit, MemFrame, TagOnPool};
use crate::conduit::cluster::ClusterConduit;
use crate::conduit::combined::HalfFrame;
use crate::conduit::ring::{FrameHeader, RawRing, MAX_ARGS};
use crate::conduit::{Arming, Channel, Conduit, ConduitError, Message, PollSet, Rank};
use std::cell::Cell;
use std::sync::atomic::AtomicU32;

/// Looks at channels that hold frames between two progress calls, at most.
const LOOKS_PER_PROGRESS: u32 = 16;

/// What a front hands its calls to: the cluster, and the receive side taken from its
/// halves (see the module doc).
pub(super) struct Across {
    pub(super) cluster: ClusterConduit,
    /// Per channel, in the job's numbering; `None` for an Interrupt channel (left in
    /// the halves).
    rx: Box<[Option<RxChannel>]>,
    /// Why the last send through the cluster refused its frame (`TxRing::no_room`
    /// answers it).
    refused: Cell<Option<ConduitError>>,
    /// What the front's send sides point at (they have no ring): two slots, never
    /// written.
    placeholder: HeapRegion,
    /// Looks at a channel that held frames since the network last made progress.
    looks_since_progress: Cell<u32>,
    /// The frames of the rank's other threads, which this front sends on (a job with
    /// `sender_slots`).
    pub(super) outbox: Option<Outbox>,
}

/// The front's [`Across`], owned through a raw pointer rather than a `Box`: the
/// front's send sides keep pointers to it, and moving a `Box` would assert that no
/// other pointer to its contents is in use.
pub(super) struct AcrossOwner(std::ptr::NonNull<Across>);

impl AcrossOwner {
    fn new(across: Across) -> Self {
        Self(std::ptr::NonNull::from(Box::leak(Box::new(across))))
    }

    /// Where the send sides find it.
    fn ptr(&self) -> *const Across {
        self.0.as_ptr()
    }
}

impl std::ops::Deref for AcrossOwner {
    type Target = Across;

    fn deref(&self) -> &Across {
        // SAFETY: allocated by `new` and freed only by `drop`; nothing writes through
        // the send sides' pointers (they read it, as this does).
        unsafe { self.0.as_ref() }
    }
}

impl std::ops::DerefMut for AcrossOwner {
    fn deref_mut(&mut self) -> &mut Across {
        // SAFETY: as in `deref`; `&mut self` is the front's own `&mut`, so no send of
        // it runs meanwhile and the send sides' pointers are not in use.
        unsafe { self.0.as_mut() }
    }
}

impl Drop for AcrossOwner {
    fn drop(&mut self) {
        // SAFETY: allocated by `new` as a box; the front that holds this owner holds
        // the send sides too, and drops them with it.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

impl Across {
    /// [`TxRing::push`] of a front's frame to `dest` on `ch`: sent through the cluster
    /// at once; `false` if refused (see [`Across::refusal`]). A frame of the interrupt
    /// channel is one flagged interrupt, its first word naming the channel it was sent
    /// to.
    #[cold]
    #[inline(never)]
    pub(super) fn send(
        &self,
        dest: Rank,
        ch: Channel,
        header: FrameHeader,
        (words, n): ([u64; MAX_ARGS], usize),
        payload: &[u8],
    ) -> bool {
        let (ch, flags, args) = match self.cluster.caps().interrupt_channel == Some(ch) && n > 0 {
            true => (
                words[0] as Channel,
                header.flags | Message::INTERRUPT,
                &words[1..n],
            ),
            false => (ch, header.flags, &words[..n]),
        };
        let msg = Message {
            tag: header.tag,
            flags,
            args,
            payload,
        };
        match self.cluster.try_send(dest, ch, &msg) {
            Ok(()) => true,
            Err(e) => {
                self.refused.set(Some(e));
                false
            }
        }
    }

    /// Why the last [`Across::send`] refused its frame.
    pub(super) fn refusal(&self) -> ConduitError {
        self.refused.take().unwrap_or(ConduitError::Busy)
    }

    /// The receive side of channel `ch`, if this front drains it.
    pub(super) fn channel(&self, ch: Channel) -> Option<&RxChannel> {
        self.rx.get(ch)?.as_ref()
    }

    /// Sleeps until a frame may have arrived on one of `set`'s channels in either half,
    /// or `timeout` passes: both halves arm their wake-ups (the network's progresses
    /// first), this front looks once more at the channels it took from them and at its
    /// outbox, then waits on both words and the outbox's.
    pub(super) fn sleep(
        &self,
        set: &PollSet,
        timeout: std::time::Duration,
    ) -> Result<(), ConduitError> {
        let outbox = self.outbox.as_ref().map(Outbox::arm);
        let slept = self.sleep_on_halves(set, timeout, outbox);
        if let Some(o) = &self.outbox {
            o.disarm();
        }
        slept
    }

    /// [`Across::sleep`] once the outbox (if any) is armed: its word, the value seen,
    /// and whether a frame already waits there.
    fn sleep_on_halves(
        &self,
        set: &PollSet,
        timeout: std::time::Duration,
        outbox: Option<(&AtomicU32, u32, bool)>,
    ) -> Result<(), ConduitError> {
        let (local, remote) = (self.cluster.local(), self.cluster.remote());
        let near = local.arm_arrival(set)?;
        let far = match remote.arm_arrival(set) {
            Ok(far) => far,
            Err(e) => {
                if let Arming::Armed(a) = near {
                    local.disarm_arrival(set, a);
                }
                return Err(e);
            }
        };
        let ready = outbox.is_some_and(|o| o.2)
            || set
                .channels
                .iter()
                .any(|&ch| self.channel(ch).is_some_and(|c| c.next_ready().is_some()));
        match (near, far) {
            (Arming::Armed(n), Arming::Armed(f)) => {
                if !ready {
                    let words = [(n.word, n.seen), (f.word, f.seen)];
                    match outbox {
                        Some((word, seen, _)) => {
                            let [a, b] = words;
                            crate::util::futex::wait_any(&[a, b, (word, seen)], timeout)
                        }
                        None => crate::util::futex::wait_any(&words, timeout),
                    }
                }
                local.disarm_arrival(set, n);
                remote.disarm_arrival(set, f);
            }
            (n, f) => {
                let sleepless =
                    matches!(n, Arming::CannotSleep) || matches!(f, Arming::CannotSleep);
                if let Arming::Armed(n) = n {
                    local.disarm_arrival(set, n);
                }
                if let Arming::Armed(f) = f {
                    remote.disarm_arrival(set, f);
                }
                if sleepless && !ready {
                    std::thread::yield_now();
                }
            }
        }
        Ok(())
    }
}

/// A frame of either half of the cluster (an Interrupt channel's), with its sender as a
/// job rank (the local half numbers this host's ranks from 0).
#[inline]
pub(super) fn job_frame<'a>(f: HalfFrame<MemFrame<'a>, MemFrame<'a>>) -> MemFrame<'a> {
    match f {
        HalfFrame::Local(mut f, source) => {
            f.source = source;
            f
        }
        HalfFrame::Remote(f) => f,
    }
}

impl MemConduit {
    /// The endpoint of a rank of a job across hosts: a front for `cluster` (see the
    /// module doc), with the job's rank, size and limits. It takes over the receive
    /// side of `cluster`'s halves: their own receive calls find no frames after this.
    /// Fails only if a page for its placeholder ring cannot be had.
    ///
    /// ```
    /// # use amrq::conduit::{ucx, ChannelSpec, Conduit, ConduitSpec, Message, ReceivedFrame};
    /// # if let Err(why) = ucx::available() { eprintln!("no UCX here: {why}"); return; }
    /// # let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")].map(|(k, v)| (k.into(), v.into())).into();
    /// # let spec = ConduitSpec::new(vec![ChannelSpec::new(64)]);
    /// # use amrq::bootstrap::{env::Place, JobKey};
    /// # let place = Place {
    /// #     rank: 0, size: 1, id: format!("doc-{}", std::process::id()),
    /// #     key: JobKey::random().unwrap(), launcher: "doc", host: "localhost".into(), rendezvous: Some(format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port())),
    /// # };
    /// use amrq::conduit::{cluster, mem::MemConduit};
    /// let c = cluster::join(&place, &spec, &settings, std::time::Duration::from_secs(10)).unwrap();
    /// let front = MemConduit::across_hosts(c).unwrap();
    /// front.try_send(0, 0, &Message { tag: 3, args: &[7], ..Message::default() }).unwrap();
    /// let f = loop {
    ///     if let Some(f) = front.peek(0).unwrap() { break f; }
    /// };
    /// assert_eq!((f.source(), f.tag(), f.args()), (0, 3, &[7u64][..]));
    /// f.release();
    /// ```
    pub fn across_hosts(mut cluster: ClusterConduit) -> Result<Self, ConduitError> {
        let (rank, size) = (cluster.rank(), cluster.size());
        let caps = cluster.caps().clone();
        let local_ranks = cluster.local_ranks().to_vec();
        let doorbell = cluster.local().doorbell;
        let owner = cluster.local()._owner.clone();
        let boot = cluster.remote().boot().clone();
        let (local, remote) = cluster.halves_mut();
        let far = remote.receiver_mut();
        let rx = (0..caps.channels.len())
            .map(|ch| {
                if caps.channels[ch].interrupt || caps.interrupt_channel == Some(ch) {
                    return None;
                }
                let here = std::mem::replace(&mut local.rx[ch], RxChannel::moved());
                let there = std::mem::replace(&mut far.rx[ch], RxChannel::moved());
                Some(RxChannel::across(here, there, &local_ranks))
            })
            .collect();
        // Two slots (the least a ring has), page-aligned and zeroed: a placeholder that
        // the front's send sides name and never write.
        let placeholder = HeapRegion::new(RawRing::bytes(2))?;
        let threads = caps.channels.iter().find(|c| c.received_with.is_some());
        let outbox = threads.map(|c| Outbox::new(c.slots, size)).transpose()?;
        let across = AcrossOwner::new(Across {
            cluster,
            rx,
            refused: Cell::new(None),
            placeholder,
            looks_since_progress: Cell::new(0),
            outbox,
        });
        let (ring_at, across_at) = (across.placeholder.base(), across.ptr());
        let tx = (0..caps.channels.len())
            .flat_map(|ch| (0..size).map(move |dest| (ch, dest)))
            .map(|(ch, dest)| {
                let c = &caps.channels[ch];
                TxRing {
                    // SAFETY: page-aligned, room for two slots, alive as long as the
                    // `Across` (which this endpoint holds), never written: `Tx::Network`
                    // sends through the cluster.
                    ring: Cell::new(unsafe { RawRing::new(ring_at, 2) }),
                    prod: Local::new(Tx::Network {
                        dest,
                        ch,
                        across: across_at,
                    }),
                    max_args: c.max_args,
                    permitted: c.senders.allows(rank) && caps.interrupt_channel != Some(ch),
                    own_args_below: Cell::new(0), // no quick send: every frame goes through `push`
                    notify_bit: 0,
                    doorbell,
                    light_bit: 0,
                    armed_word: Cell::new(&CHECK_SLOWLY),
                    // SAFETY: an empty pool (no block): `claim` and `block` find nothing.
                    pool: Cell::new(unsafe { TagOnPool::new(ring_at, 0, 0) }),
                    pool_cursor: Cell::new(0),
                }
            })
            .collect();
        Ok(Self {
            rank,
            size,
            segment_bytes: caps.segment_bytes,
            tx_channels: caps.channels.len(),
            caps,
            tx,
            _pairs: std::rc::Rc::new([]),
            rx: Box::new([]),
            segments: Box::new([]),
            // Never armed (`arm_if_idle`): kept valid all the same.
            doorbell,
            one_poll_armed: Cell::new(0),
            one_poll_idle: Cell::new(0),
            boot,
            faults: crate::conduit::FaultLog::new(rank),
            _owner: owner,
            across: Some(across),
        })
    }

    /// [`Conduit::forward_threads`](crate::conduit::Conduit::forward_threads): a
    /// front sends on its outbox's frames.
    pub(super) fn forward_threads(&self) -> Result<bool, ConduitError> {
        match self
            .across
            .as_ref()
            .and_then(|a| Some((a.outbox.as_ref()?, &a.cluster)))
        {
            Some((outbox, cluster)) => {
                cluster.remote().progress_now();
                outbox.forward(cluster)
            }
            None => Ok(true),
        }
    }

    /// The cluster this endpoint fronts, if it is a rank of a job across hosts.
    ///
    /// ```
    /// use amrq::conduit::threads;
    /// let eps = threads::endpoints(1, &[16]).unwrap();
    /// assert!(eps[0].across().is_none()); // ranks of one process: rings of its own
    /// ```
    pub fn across(&self) -> Option<&ClusterConduit> {
        self.across.as_ref().map(|a| &a.cluster)
    }

    /// The channel a front's drain or look of channel `ch` runs over, once the network
    /// has made progress; otherwise (no front, no such channel, an Interrupt channel's)
    /// what that drain returns.
    #[cold]
    #[inline(never)]
    pub(super) fn channel_across(
        &self,
        ch: Channel,
    ) -> Result<&RxChannel, Result<usize, ConduitError>> {
        let Some(a) = &self.across else {
            return Err(Err(self.no_channel(ch)));
        };
        match a.rx.get(ch) {
            None => Err(Err(self.no_channel(ch))),
            Some(None) => Err(Err(ConduitError::DeliveredByInterrupts { channel: ch })),
            Some(Some(chan)) => {
                if let Some(o) = a.outbox.as_ref().filter(|o| o.has_work()) {
                    o.forward(&a.cluster).map_err(Err)?;
                }
                // Frames already here are served first: progress (a system call over
                // tcp) would sit between a reply's arrival and its handler, on the
                // round trip's path. At least every few looks all the same, so that a
                // host's busy rings cannot hold the network's frames and batches back.
                let looks = a.looks_since_progress.get();
                if looks >= LOOKS_PER_PROGRESS || chan.next_ready().is_none() {
                    a.looks_since_progress.set(0);
                    a.cluster.remote().progress_now();
                } else {
                    a.looks_since_progress.set(looks + 1);
                }
                Ok(chan)
            }
        }
    }
}
