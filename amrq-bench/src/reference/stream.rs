//! The raw one-way stream: 64-byte slots through a plain SPSC ring.

use std::sync::atomic::{AtomicU64, Ordering};

/// The consumer's published head, on a line pair of its own.
#[repr(C, align(128))]
struct Line(AtomicU64);

/// Slots of the raw stream's ring.
///
/// ```
/// assert_eq!(amrq_bench::reference::STREAM_SLOTS, 1024); // the C reference's stream_spsc N1024
/// ```
pub const STREAM_SLOTS: usize = 1024;
/// Slots the raw stream's consumer takes between two publications of its head.
///
/// ```
/// assert_eq!(amrq_bench::reference::STREAM_SLOTS as u64 / amrq_bench::reference::STREAM_PUBLISH_EVERY, 4);
/// ```
pub const STREAM_PUBLISH_EVERY: u64 = 256;

/// One slot of the raw stream: a sequence word (position + 1 once written) and two
/// args, on a cache line of its own.
#[repr(C, align(64))]
struct StreamSlot {
    seq: AtomicU64,
    args: [AtomicU64; 2],
}

/// The shared memory of a raw one-way stream: the consumer's published head on its
/// own line pair, then [`STREAM_SLOTS`] one-line slots. `#[repr(C)]` and all zero at
/// rest, so it can be placed in memory shared by two processes
/// ([`RawStream::in_memory`]).
///
/// ```text
///  0        128       192       256                     128 + 64·1024
///  | head … | slot 0  | slot 1  | …                     |
///             seq args[0] args[1] (pad)
/// ```
///
/// The producer writes a slot's two args, then its sequence word (Release); it reads
/// the head only when its cached copy says the ring is full. The consumer spins on
/// each slot's sequence word (Acquire), reads and checks the two args, and publishes
/// its head every [`STREAM_PUBLISH_EVERY`] slots. No handler, no dispatch: the limit a
/// one-way message stream between the two cores can reach.
///
/// ```
/// use amrq_bench::reference::RawStream;
/// let ring = RawStream::new();
/// let rate = std::thread::scope(|s| {
///     s.spawn(|| assert_eq!(ring.receive(0, 10_000), 0)); // no message wrong
///     ring.send(0, 10_000)
/// });
/// println!("{:.0} M msgs/s", rate / 1e6);
/// ```
#[repr(C)]
pub struct RawStream {
    head: Line,
    slots: [StreamSlot; STREAM_SLOTS],
}

/// Bytes a [`RawStream`] takes.
///
/// ```
/// assert_eq!(amrq_bench::reference::RAW_STREAM_BYTES, 128 + 64 * 1024);
/// ```
pub const RAW_STREAM_BYTES: usize = std::mem::size_of::<RawStream>();
const _: () = {
    assert!(std::mem::size_of::<StreamSlot>() == 64);
    assert!(RAW_STREAM_BYTES == 128 + 64 * STREAM_SLOTS);
    assert!(std::mem::align_of::<RawStream>() == 128);
};

/// The second arg of message `i`: what the consumer checks it against.
#[inline(always)]
fn stream_mix(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5555
}

impl RawStream {
    /// A fresh ring on the heap (ranks as threads).
    ///
    /// ```
    /// use amrq_bench::reference::RawStream;
    /// let s = RawStream::new();
    /// std::thread::scope(|t| {
    ///     t.spawn(|| assert_eq!(s.receive(0, 5000), 0));
    ///     assert!(s.send(0, 5000) > 0.0);
    /// });
    /// ```
    pub fn new() -> Box<Self> {
        Box::new(Self {
            head: Line(AtomicU64::new(0)),
            slots: std::array::from_fn(|_| StreamSlot {
                seq: AtomicU64::new(0),
                args: [AtomicU64::new(0), AtomicU64::new(0)],
            }),
        })
    }

    /// The ring at `p`, in memory both ranks map (ranks as processes).
    ///
    /// # Safety
    /// `p` is 128-byte aligned, valid for [`RAW_STREAM_BYTES`] bytes for `'a`, zeroed
    /// before either rank first uses it, and used for nothing else meanwhile.
    ///
    /// ```
    /// use amrq_bench::reference::{RawStream, RAW_STREAM_BYTES};
    /// let f = amrq::util::shm::SharedFile::create("amrq-doc", RAW_STREAM_BYTES as u64).unwrap();
    /// let m = f.map(RAW_STREAM_BYTES).unwrap();
    /// // SAFETY: page aligned, RAW_STREAM_BYTES long, zeroed, used for nothing else.
    /// let ring = unsafe { RawStream::in_memory(m.base()) };
    /// std::thread::scope(|s| {
    ///     s.spawn(|| assert_eq!(ring.receive(0, 3000), 0));
    ///     ring.send(0, 3000);
    /// });
    /// ```
    pub unsafe fn in_memory<'a>(p: std::ptr::NonNull<u8>) -> &'a Self {
        // SAFETY: the caller's guarantee; all-zero bytes are valid atomics.
        unsafe { &*p.as_ptr().cast::<Self>() }
    }

    /// The producer's side: messages `base .. base + n`, then waits until the consumer
    /// has taken them all; returns messages per second. The consumer runs
    /// [`RawStream::receive`] with the same `base` and `n`; `base` continues where the
    /// last call on the same ring ended (0 on a fresh ring).
    ///
    /// ```
    /// let ring = amrq_bench::reference::RawStream::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| { ring.receive(0, 2000); ring.receive(2000, 2000); });
    ///     ring.send(0, 2000);
    ///     ring.send(2000, 2000); // continues where the last call ended
    /// });
    /// ```
    pub fn send(&self, base: u64, n: u64) -> f64 {
        self.send_with(base, n, false)
    }

    /// [`RawStream::send`] with the producer prefetching its slots for writing, eight
    /// at a time a sixteenth of the ring ahead where the consumer has freed them, as
    /// amrq's ring producer does. The consumer runs [`RawStream::receive`].
    ///
    /// ```
    /// let ring = amrq_bench::reference::RawStream::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| assert_eq!(ring.receive(0, 5000), 0));
    ///     assert!(ring.send_prefetched(0, 5000) > 0.0);
    /// });
    /// ```
    pub fn send_prefetched(&self, base: u64, n: u64) -> f64 {
        self.send_with(base, n, true)
    }

    #[inline(always)]
    fn send_with(&self, base: u64, n: u64, prefetch: bool) -> f64 {
        const GROUP: u64 = 8;
        const AHEAD: u64 = STREAM_SLOTS as u64 / 16;
        let t = std::time::Instant::now();
        // ORDERING: Acquire pairs with the consumer's Release store of its head: its
        // reads of the slots it handed back happen before we overwrite them.
        let mut cached_head = self.head.0.load(Ordering::Acquire);
        for i in base..base + n {
            while i - cached_head >= STREAM_SLOTS as u64 {
                // ORDERING: as above.
                cached_head = self.head.0.load(Ordering::Acquire);
            }
            let s = &self.slots[i as usize % STREAM_SLOTS];
            s.args[0].store(i, Ordering::Relaxed);
            s.args[1].store(stream_mix(i), Ordering::Relaxed);
            // ORDERING: Release publishes the args above; pairs with the consumer's
            // Acquire load of the sequence word.
            s.seq.store(i + 1, Ordering::Release);
            let first = (i + 1 + AHEAD) & !(GROUP - 1);
            if prefetch
                && (i + 1) % GROUP == 0
                && first + GROUP - cached_head <= STREAM_SLOTS as u64
            {
                let slot = &self.slots[first as usize % STREAM_SLOTS];
                super::prefetch_write_8_lines((slot as *const StreamSlot).cast());
            }
        }
        // ORDERING: Acquire pairs with the consumer's last Release store of its head.
        while self.head.0.load(Ordering::Acquire) != base + n {
            std::hint::spin_loop();
        }
        n as f64 / t.elapsed().as_secs_f64()
    }

    /// The consumer's side of [`RawStream::send`]: takes messages `base .. base + n`,
    /// checking each one's args; returns how many were wrong (0 unless the memory is
    /// shared wrongly).
    ///
    /// ```
    /// let ring = amrq_bench::reference::RawStream::new();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| ring.send(0, 100));
    ///     assert_eq!(ring.receive(0, 100), 0); // every message's args as sent
    /// });
    /// ```
    pub fn receive(&self, base: u64, n: u64) -> u64 {
        let mut bad = 0;
        for i in base..base + n {
            let s = &self.slots[i as usize % STREAM_SLOTS];
            // ORDERING: Acquire pairs with the producer's Release store of the sequence
            // word: the args written before it are visible.
            while s.seq.load(Ordering::Acquire) != i + 1 {}
            let (a, b) = (
                s.args[0].load(Ordering::Relaxed),
                s.args[1].load(Ordering::Relaxed),
            );
            bad += u64::from(a != i || b != stream_mix(i));
            if (i + 1) % STREAM_PUBLISH_EVERY == 0 {
                // ORDERING: Release orders our reads of the slots before the producer's
                // reuse; pairs with its Acquire loads of the head.
                self.head.0.store(i + 1, Ordering::Release);
            }
        }
        // ORDERING: as above; also tells the producer the batch is done.
        self.head.0.store(base + n, Ordering::Release);
        bad
    }
}
