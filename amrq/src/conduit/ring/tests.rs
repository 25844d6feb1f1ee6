//! Ring tests on heap memory: tables around the counters' limits, full rings, padding,
//! corrupt headers, and a threaded exactly-once stress. The loom models are in
//! `tests/loom_ring.rs`.

use super::*;
use std::ptr::NonNull;

/// A heap ring for tests.
struct HeapRing {
    _mem: Vec<u128>, // 16-byte units; the ring starts at the first 128-byte boundary
    ring: RawRing,
}

impl HeapRing {
    fn new(nslots: u64, start: u64) -> Self {
        let h = Self::zeroed(nslots);
        h.ring.init(start);
        h
    }

    /// A ring on zeroed memory, never initialised: a ring at position 0.
    fn zeroed(nslots: u64) -> Self {
        let mut mem = vec![0u128; RawRing::bytes(nslots) / 16 + 8];
        let p = mem.as_mut_ptr().cast::<u8>();
        let off = p.align_offset(CTL_BYTES);
        // SAFETY: `off` < 128 and the vector has 128 spare bytes; it lives as long as `ring`
        // (same struct) and its heap buffer never moves.
        let ring = unsafe { RawRing::new(NonNull::new_unchecked(p.add(off)), nslots) };
        Self { _mem: mem, ring }
    }
}

/// Args and payload derived from a frame number, so the reader can check every byte.
fn frame_of(i: u64) -> (Vec<u64>, Vec<u8>) {
    let nargs = (i % 9) as usize;
    let len = match i % 5 {
        0 => 0,
        1 => 7,
        2 => 40,
        3 => 64 + (i % 130) as usize,
        _ => 1 + (i % 17) as usize,
    };
    let args = (0..nargs as u64)
        .map(|a| i.wrapping_mul(31).wrapping_add(a))
        .collect();
    let payload = (0..len).map(|b| (i as usize + b) as u8).collect();
    (args, payload)
}

fn push<M: RingMemory>(p: &mut Producer, r: &M, i: u64) -> bool {
    let (a, d) = frame_of(i);
    p.try_push(
        r,
        FrameHeader {
            tag: i as u16,
            ..Default::default()
        },
        &a,
        &d,
    )
}

fn pop_check(c: &mut Consumer, r: &RawRing, i: u64) {
    let f = c.peek(r).expect("not corrupt").expect("a frame");
    let (a, d) = frame_of(i);
    assert_eq!(f.header.tag, i as u16, "frame {i} out of order");
    assert_eq!(&c.read_args(r, &f)[..a.len()], &a[..], "args of frame {i}");
    let mut got = vec![0u8; f.header.len as usize];
    c.read_payload(r, &f, &mut got);
    assert_eq!(got, d, "payload of frame {i}");
    c.release(r, &f);
}

#[test]
fn wrap_around_table() {
    // Positions that cross u64::MAX and ring laps, for several ring sizes and batches.
    for &nslots in &[4u64, 8, 16, 256] {
        for &start in &[
            0,
            u64::MAX - 2,
            u64::MAX - nslots + 1,
            u64::MAX / 2,
            u64::MAX,
        ] {
            // A zeroed ring is a ring at position 0 (what a region's layout relies on).
            let zeroed: &[bool] = if start == 0 { &[false, true] } else { &[false] };
            for (&batch, &zeroed) in [1, 2, Consumer::default_batch(nslots)]
                .iter()
                .flat_map(|b| zeroed.iter().map(move |z| (b, z)))
            {
                let h = if zeroed {
                    HeapRing::zeroed(nslots)
                } else {
                    HeapRing::new(nslots, start)
                };
                let (mut p, mut c) = (
                    Producer::new(nslots, start),
                    Consumer::new(nslots, start, batch),
                );
                let max = max_frame_slots(nslots);
                let mut next_read = 0;
                let mut i = 0;
                let mut sent = 0;
                while sent < 500 {
                    let (a, d) = frame_of(i);
                    if frame_slots(a.len(), d.len()) > max {
                        i += 1;
                        continue;
                    }
                    if push(&mut p, &h.ring, i) {
                        sent += 1;
                        i += 1;
                    } else {
                        // Full: drain one and retry the same frame.
                        while frame_slots(frame_of(next_read).0.len(), frame_of(next_read).1.len())
                            > max
                        {
                            next_read += 1;
                        }
                        pop_check(&mut c, &h.ring, next_read);
                        next_read += 1;
                    }
                }
                while next_read < i {
                    let (a, d) = frame_of(next_read);
                    if frame_slots(a.len(), d.len()) <= max {
                        pop_check(&mut c, &h.ring, next_read);
                    }
                    next_read += 1;
                }
                assert_eq!(c.peek(&h.ring), Ok(None), "nslots {nslots} start {start}");
            }
        }
    }
}

#[test]
fn full_ring_refuses_without_writing() {
    let h = HeapRing::new(8, 0);
    let (mut p, mut c) = (Producer::new(8, 0), Consumer::new(8, 0, 64));
    for i in 0..8 {
        assert!(p.try_push(&h.ring, FrameHeader::default(), &[i], &[]));
    }
    assert!(!p.try_push(&h.ring, FrameHeader::default(), &[99], &[]));
    assert_eq!(p.tail(), 8, "a refused push must not move the tail");
    for i in 0..8 {
        let f = c.peek(&h.ring).unwrap().unwrap();
        assert_eq!(c.read_args(&h.ring, &f)[0], i);
        c.release(&h.ring, &f);
    }
    // The consumer published when it found the ring empty, so room is back.
    assert_eq!(c.peek(&h.ring), Ok(None));
    assert!(p.try_push(&h.ring, FrameHeader::default(), &[8], &[]));
}

/// The Express push's room test (the slots in use against the mask): exactly a ring's
/// worth fits, and one slot handed back makes room for one more.
#[test]
fn express_pushes_fill_the_ring_exactly() {
    let h = HeapRing::new(8, 0);
    let (mut p, mut c) = (Producer::new(8, 0), Consumer::new(8, 0, 1));
    for i in 0..8 {
        assert!(p.try_push_express(&h.ring, FrameHeader::default(), &[i]));
    }
    assert!(!p.try_push_express(&h.ring, FrameHeader::default(), &[99]));
    assert_eq!(p.tail(), 8, "a refused push must not move the tail");
    let f = c.peek(&h.ring).unwrap().unwrap();
    // A batch of 1: published. The Express push does not re-read the head; a push
    // that does makes the room seen.
    c.release(&h.ring, &f);
    assert!(p.has_room_for(&h.ring, 1, 0));
    assert!(p.try_push_express(&h.ring, FrameHeader::default(), &[8]));
    assert!(!p.try_push_express(&h.ring, FrameHeader::default(), &[9]));
    for i in 1..=8 {
        let f = c.peek(&h.ring).unwrap().unwrap();
        assert_eq!(c.read_args(&h.ring, &f)[0], i);
        c.release(&h.ring, &f);
    }
}

/// `is_express`'s one compare, and an open gate's, agree with the field-by-field
/// definition (a shut gate lets nothing through) for every `nargs` and `flags` byte,
/// lengths at both ends and between, and any tag; and every such header comes back
/// whole from its word.
#[test]
fn the_express_test_is_the_field_by_field_definition() {
    for nargs in 0..=u8::MAX {
        for flags in 0..=u8::MAX {
            for len in [0, 1, 48, 1 << 16, 1 << 31, u32::MAX] {
                for tag in [0, 1, u16::MAX] {
                    let h = FrameHeader {
                        len,
                        tag,
                        nargs,
                        flags,
                    };
                    let by_fields = len == 0
                        && usize::from(nargs) <= EXPRESS_ARGS
                        && flags & (FLAG_PAD | FLAG_LONG | FLAG_TAG_ON) == 0;
                    assert_eq!(is_express(h.pack()), by_fields, "{h:?}");
                    assert_eq!(ExpressGate::OPEN.lets_through(h.pack()), by_fields);
                    assert!(!ExpressGate::SHUT.lets_through(h.pack()));
                    assert_eq!(FrameHeader::unpack(h.pack()), h);
                }
            }
        }
    }
}

#[test]
fn express_frame_takes_one_slot() {
    assert_eq!(frame_slots(0, 0), 1);
    assert_eq!(frame_slots(6, 0), 1);
    assert_eq!(frame_slots(7, 0), 2);
    assert_eq!(frame_slots(0, 48), 1);
    assert_eq!(frame_slots(0, 49), 2);
}

#[test]
fn frames_never_wrap_and_pad_is_skipped() {
    let h = HeapRing::new(8, 0);
    let (mut p, mut c) = (Producer::new(8, 0), Consumer::new(8, 0, 1));
    // 3 one-slot frames, then a 3-slot frame that cannot fit slots 3..8? It fits (3..6);
    // then another 3-slot frame must pad slots 6..8 and start at 0.
    for i in 0..3 {
        assert!(p.try_push(&h.ring, FrameHeader::default(), &[i], &[]));
        let f = c.peek(&h.ring).unwrap().unwrap();
        c.release(&h.ring, &f);
    }
    let big = vec![7u8; 150]; // 16 + 150 → 3 slots
    assert!(p.try_push(&h.ring, FrameHeader::default(), &[], &big));
    assert!(p.try_push(&h.ring, FrameHeader::default(), &[], &big));
    for _ in 0..2 {
        let f = c.peek(&h.ring).unwrap().unwrap();
        assert!(f.index(8) + f.slots <= 8, "frame wrapped");
        let mut got = vec![0; 150];
        c.read_payload(&h.ring, &f, &mut got);
        assert_eq!(got, big);
        c.release(&h.ring, &f);
    }
    assert_eq!(p.tail(), 3 + 3 + 2 + 3);
}

#[test]
fn corrupt_headers_are_reported_not_followed() {
    let cases: [(FrameHeader, &str); 3] = [
        (
            FrameHeader {
                nargs: 9,
                ..Default::default()
            },
            "more than 8 args",
        ),
        (
            FrameHeader {
                len: 1 << 20,
                ..Default::default()
            },
            "frame longer than the ring allows",
        ),
        (
            FrameHeader {
                len: 3,
                flags: FLAG_PAD,
                ..Default::default()
            },
            "pad frame does not end at the ring's end",
        ),
    ];
    for (bad, what) in cases {
        let h = HeapRing::new(8, 0);
        let mut c = Consumer::new(8, 0, 1);
        // SAFETY: nobody else uses this ring; we play a misbehaving producer.
        unsafe { h.ring.write_header(0, bad.pack()) };
        h.ring.seq(0).store(1, std::sync::atomic::Ordering::Release);
        assert_eq!(c.peek(&h.ring), Err(Corrupt { position: 0, what }));
    }
}

#[test]
fn threaded_stress_exactly_once_in_order() {
    const FRAMES: u64 = 300_000;
    let h = HeapRing::new(64, u64::MAX - 1000);
    let ring = h.ring;
    let max = max_frame_slots(64);
    let wanted: Vec<u64> = (0..FRAMES * 2)
        .filter(|&i| {
            let (a, d) = frame_of(i);
            frame_slots(a.len(), d.len()) <= max
        })
        .take(FRAMES as usize)
        .collect();
    let seen: Vec<std::sync::atomic::AtomicU8> =
        (0..FRAMES * 2).map(|_| Default::default()).collect();
    std::thread::scope(|s| {
        let w = &wanted;
        s.spawn(move || {
            let mut p = Producer::new(64, u64::MAX - 1000);
            for &i in w {
                while !push(&mut p, &ring, i) {
                    std::hint::spin_loop();
                }
            }
        });
        let mut c = Consumer::new(64, u64::MAX - 1000, Consumer::default_batch(64));
        for &i in &wanted {
            loop {
                match c.peek(&ring).unwrap() {
                    Some(_) => break,
                    None => std::hint::spin_loop(),
                }
            }
            pop_check(&mut c, &ring, i);
            seen[i as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        assert_eq!(c.peek(&ring), Ok(None));
    });
    for &i in &wanted {
        assert_eq!(
            seen[i as usize].load(std::sync::atomic::Ordering::Relaxed),
            1,
            "frame {i}"
        );
    }
}

#[test]
fn stale_payload_never_reads_as_a_frame() {
    // A 2-slot frame at position 0 whose payload puts, where slot 1's sequence word
    // lives, exactly the value slot 1 will be expected to hold at position 5 (= 6).
    let h = HeapRing::new(4, 0);
    let (mut p, mut c) = (Producer::new(4, 0), Consumer::new(4, 0, 1));
    let mut payload = vec![0u8; 56];
    payload[48..56].copy_from_slice(&6u64.to_ne_bytes()); // bytes 64..72 of the frame
    assert!(p.try_push(&h.ring, FrameHeader::default(), &[], &payload));
    let f = c.peek(&h.ring).unwrap().unwrap();
    assert_eq!(f.slots, 2);
    c.release(&h.ring, &f);
    for i in 2..5 {
        assert!(p.try_push(&h.ring, FrameHeader::default(), &[i], &[]));
        let f = c.peek(&h.ring).unwrap().unwrap();
        assert_eq!(c.read_args(&h.ring, &f)[0], i);
        c.release(&h.ring, &f);
    }
    // Head is 5, at slot 1: nothing was sent there.
    assert_eq!(c.head(), 5);
    assert_eq!(c.peek(&h.ring), Ok(None));
}

#[test]
fn shared_ring_three_producers_exactly_once_in_order() {
    const PER: u64 = 5_000;
    let h = HeapRing::new(64, u64::MAX - 500);
    let ring = h.ring;
    // The shared tail word the producers reserve with (the conduit keeps it in the region).
    let tail = std::sync::atomic::AtomicU64::new(u64::MAX - 500);
    let max = max_frame_slots(64);
    std::thread::scope(|s| {
        for who in 0..3u64 {
            let tail = &tail;
            s.spawn(move || {
                let mut p = SharedProducer::new(u64::MAX - 500);
                for i in 0..PER {
                    let id = who << 32 | i;
                    let (a, d) = frame_of(i);
                    if frame_slots(a.len(), d.len()) > max {
                        continue;
                    }
                    let header = FrameHeader {
                        tag: who as u16,
                        ..Default::default()
                    };
                    let mut args = vec![id];
                    args.extend_from_slice(&a[..a.len().min(7)]);
                    while !p.try_push(&ring, tail, header, &args, &d) {
                        std::thread::yield_now(); // four threads on two cores: let the consumer run
                    }
                }
            });
        }
        let mut c = Consumer::new(64, u64::MAX - 500, Consumer::default_batch(64));
        let mut next = [0u64; 3];
        let expected: u64 = (0..PER)
            .filter(|&i| {
                let (a, d) = frame_of(i);
                frame_slots(a.len(), d.len()) <= max
            })
            .count() as u64
            * 3;
        let mut got = 0;
        while got < expected {
            let Some(f) = c.peek(&ring).unwrap() else {
                std::thread::yield_now();
                continue;
            };
            let args = c.read_args(&ring, &f);
            let (who, i) = ((args[0] >> 32) as usize, args[0] & 0xffff_ffff);
            assert_eq!(who, f.header.tag as usize);
            // Each producer's frames in its own order, none twice, none lost (skipped
            // ids are the frames too large for this ring).
            assert!(
                i >= next[who],
                "producer {who}: frame {i} after {}",
                next[who]
            );
            let (a, d) = frame_of(i);
            assert_eq!(&args[1..1 + a.len().min(7)], &a[..a.len().min(7)]);
            let mut p = vec![0u8; f.header.len as usize];
            c.read_payload(&ring, &f, &mut p);
            assert_eq!(p, d, "payload of producer {who}'s frame {i}");
            next[who] = i + 1;
            c.release(&ring, &f);
            got += 1;
        }
        assert_eq!(c.peek(&ring), Ok(None));
    });
}

/// `look` agrees with `ready` and `take_ready`: empty, then an Express frame (handed
/// out whole and released in one slot), then frames that are not Express (payload,
/// seven args), which it leaves to `take_ready`.
#[test]
fn look_tells_express_frames_from_others_and_publishes_when_empty() {
    let h = HeapRing::new(8, 0);
    let mut p = Producer::new(8, 0);
    let mut c = Consumer::new(8, 0, 2);
    assert_eq!(c.look(&h.ring), Look::Empty);
    let header = FrameHeader {
        tag: 7,
        ..Default::default()
    };
    assert!(p.try_push(&h.ring, header, &[1, 2], &[]));
    let Look::Express(f) = c.look(&h.ring) else {
        panic!("an Express frame")
    };
    assert_eq!(
        (f.position, f.slots, f.header.tag, f.header.nargs),
        (0, 1, 7, 2)
    );
    assert_eq!(&c.read_args(&h.ring, &f)[..2], &[1, 2]);
    c.release_one(&h.ring);
    assert!(p.try_push(&h.ring, header, &[], &[9]));
    assert!(p.try_push(&h.ring, header, &[0; 7], &[]));
    for _ in 0..2 {
        assert_eq!(c.look(&h.ring), Look::Other);
        let f = c
            .take_ready(&h.ring)
            .expect("not corrupt")
            .expect("a frame");
        c.release(&h.ring, &f);
    }
    assert_eq!(c.look(&h.ring), Look::Empty);
    // Empty, it published its head: the producer sees every slot free.
    assert_eq!(
        h.ring.head().load(std::sync::atomic::Ordering::Acquire),
        c.head()
    );
}

/// A ring that records the producer's prefetches: which group, and the consumer's head
/// when it was asked for.
struct Watched<'a> {
    ring: &'a RawRing,
    groups: std::cell::RefCell<Vec<(u64, u64)>>,
}

impl RingMemory for Watched<'_> {
    fn nslots(&self) -> u64 {
        self.ring.nslots()
    }
    fn head(&self) -> &crate::sync::AtomicU64 {
        self.ring.head()
    }
    fn seq(&self, idx: u64) -> &crate::sync::AtomicU64 {
        self.ring.seq(idx)
    }
    unsafe fn write_header(&self, idx: u64, header: u64) {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.ring.write_header(idx, header) }
    }
    unsafe fn read_header(&self, idx: u64) -> u64 {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.ring.read_header(idx) }
    }
    unsafe fn write_bytes(&self, idx: u64, offset: usize, src: &[u8]) {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.ring.write_bytes(idx, offset, src) }
    }
    unsafe fn read_bytes(&self, idx: u64, offset: usize, dst: &mut [u8]) {
        // SAFETY: the caller's guarantee, passed on.
        unsafe { self.ring.read_bytes(idx, offset, dst) }
    }
    fn prefetch_group_for_write(&self, idx: u64) {
        let head = self.ring.head().load(crate::sync::Ordering::Relaxed);
        self.groups.borrow_mut().push((idx, head));
    }
}

#[test]
fn prefetches_whole_free_groups_ahead_of_the_tail() {
    // Express and multi-slot frames, the consumer a varying distance behind: every
    // group prefetched starts at a multiple of 8, lies past the tail, and is free
    // (its last slot less than a lap past the head the consumer has published).
    for nslots in [16u64, 64, 256, 1024] {
        for lag in [0u64, 3, 40, 200] {
            let start = u64::MAX - 3 * nslots; // positions cross u64::MAX
            let h = HeapRing::new(nslots, start);
            let w = Watched {
                ring: &h.ring,
                groups: Default::default(),
            };
            let (mut p, mut c) = (
                Producer::new(nslots, start),
                Consumer::new(nslots, start, 4),
            );
            let (mut sent, mut got, mut checked) = (0u64, 0u64, 0usize);
            while got < 20 * nslots {
                let express = sent % 7 != 3;
                let pushed = if express {
                    p.try_push(&w, FrameHeader::default(), &[sent], b"")
                } else {
                    push(&mut p, &w, sent) // args and payload: several slots
                };
                if pushed {
                    sent += 1;
                }
                for &(idx, head) in &w.groups.borrow()[checked..] {
                    assert_eq!(idx % 8, 0, "group at slot {idx}");
                    // The group's first position: the one past the tail at `idx`.
                    let tail = p.tail();
                    let ahead = idx.wrapping_sub(tail) & (nslots - 1);
                    assert!(ahead > 0, "group {idx} at the tail {tail}");
                    let end = tail.wrapping_add(ahead).wrapping_add(8);
                    assert!(
                        end.wrapping_sub(head) <= nslots,
                        "group {idx} not free: head {head}, tail {tail}"
                    );
                }
                checked = w.groups.borrow().len();
                while got + lag < sent || !pushed {
                    match c.peek(&h.ring).expect("not corrupt") {
                        Some(f) => {
                            c.release(&h.ring, &f);
                            got += 1;
                        }
                        None => break,
                    }
                }
            }
            if nslots >= 64 && lag < nslots / 2 {
                assert!(checked > 0, "{nslots} slots, lag {lag}: nothing prefetched");
            }
        }
    }
}
