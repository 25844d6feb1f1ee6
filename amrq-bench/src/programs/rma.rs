//! Put and get latency and bandwidth between two ranks against single-core memcpy of
//! the same size in the same run, and the fit `T = c + x / B` (Liu & Culler, Table 5).
//!
//! Rank 0 puts a warm local buffer into rank 1's registered segment (and gets it back)
//! for sizes 8 B … 16 MiB; batches of puts, gets and memcpys of the same size
//! alternate; each figure is the median over batches. Rank 1 does nothing meanwhile
//! (on one host a put is a copy by the caller: no receiver involvement).
//!
//! ```text
//! amrq-bench rma [--quick] [--threads] [--json]
//! ```
//! Then the 8-byte blocking get through AM frames (`Rma::over_frames`: a request and a
//! Medium reply, what a network conduit does) against the raw cache-line round trip
//! between the two ranks, measured in alternating batches.
//!
//! Last line: `rma: put_8b_ns=… get_8b_ns=… put_min_ratio_64k=… get_min_ratio_64k=…
//! put_c_ns=… put_gb_s=… frames_get_8b_ns=… raw_rtt_ns=… frames_get_ratio=…` (ratio =
//! put bandwidth / memcpy bandwidth, the lowest over sizes ≥ 64 KiB; the last, frames
//! get / raw round trip).

use super::{Flags, Ranks};
use crate::reference::{
    fit_latency_bandwidth, median, memcpy_ns, Floor, RawPingPong, RAW_PINGPONG_BYTES,
};
use amrq::prelude::*;
use amrq::rma::{Rma, RmaError};
use std::time::Instant;

/// Runs the command.
pub fn main(f: &Flags) -> ! {
    f.run(Config::new(), Ranks::Exactly(2), |setup| {
        rank_main(setup, f)
    })
}

/// The first `len` bytes of `buf` from its first page boundary on.
fn page_aligned(buf: &mut [u8], len: usize) -> &mut [u8] {
    let skip = buf.as_ptr().align_offset(4096);
    &mut buf[skip..skip + len]
}

fn rank_main(setup: Setup, f: &Flags) -> amrq::Result<()> {
    let threads = setup.config().threads.get();
    let am = setup.start(HandlerTable::<()>::new(), ())?;
    if am.rq().conduit().mapped_segment(0).is_none() {
        return Err(
            "rma measures against memcpy and the raw round trip in shared memory: run it on one host"
                .into(),
        );
    }
    let rma = am.rma();
    let max = if f.quick { 4 << 20 } else { 16 << 20 };
    let sizes: Vec<usize> =
        std::iter::successors(Some(8usize), |s| Some(s * 8).filter(|&s| s <= max))
            .chain([64 << 10, 256 << 10, 1 << 20, max])
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
    let at = rma.alloc_symmetric(max, 4096)?;
    let batches = if f.quick { 5 } else { 11 };
    let mut rows = Vec::new();
    if am.rank() == 0 {
        // Page-aligned local buffers, like the segment: a copy whose destination sits a
        // few bytes past its source modulo 4 KiB runs up to 20× slower (4K aliasing),
        // which would measure the buffers' placement, not the transfer.
        let (mut src_buf, mut dst_buf) = (vec![0u8; max + 4096], vec![0u8; max + 4096]);
        let src = page_aligned(&mut src_buf, max);
        src.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        let src = &*src;
        let dst = page_aligned(&mut dst_buf, max);
        for &size in &sizes {
            let reps =
                ((if f.quick { 8 << 20 } else { 64 << 20 }) / size).clamp(20, 200_000) as u64;
            let (mut put, mut get, mut cpy) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..batches {
                let t = Instant::now();
                for _ in 0..reps {
                    rma.put(1, at, &src[..size])?;
                }
                put.push(t.elapsed().as_nanos() as f64 / reps as f64);
                let t = Instant::now();
                for _ in 0..reps {
                    rma.get(1, at, &mut dst[..size])?;
                }
                get.push(t.elapsed().as_nanos() as f64 / reps as f64);
                cpy.push(memcpy_ns(&src[..size], &mut dst[..size], reps));
            }
            assert_eq!(dst[..size], src[..size], "the data went there and back");
            rows.push((size, median(&mut put), median(&mut get), median(&mut cpy)));
        }
    }
    am.barrier()?;
    let (frames_get, raw_rtt) = frames_get_vs_raw(&am, rma, at, batches)?;
    if am.rank() != 0 {
        return Ok(());
    }
    println!(
        "ranks: 2 ({}), rank 0 puts into / gets from rank 1's segment; {batches} batches per size",
        super::placement(threads)
    );
    println!(
        "{:>10} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10}",
        "bytes", "put ns", "get ns", "memcpy ns", "put GB/s", "put/memcpy", "get/memcpy"
    );
    let (mut put_min, mut get_min) = (f64::INFINITY, f64::INFINITY);
    for &(size, put, get, cpy) in &rows {
        let (pr, gr) = (cpy / put, cpy / get);
        if size >= 64 << 10 {
            put_min = put_min.min(pr);
            get_min = get_min.min(gr);
        }
        println!(
            "{size:>10} {put:>12.1} {get:>12.1} {cpy:>12.1} {:>10.2} {pr:>10.3} {gr:>10.3}",
            size as f64 / put
        );
    }
    println!("8-byte get through frames: {frames_get:.1} ns; raw round trip {raw_rtt:.1} ns");
    let pts: Vec<(f64, f64)> = rows.iter().map(|&(s, p, _, _)| (s as f64, p)).collect();
    let (c, b) = fit_latency_bandwidth(&pts);
    println!(
        "put fit: T = {c:.1} ns + x / {b:.2} B/ns (least squares over all sizes, relative errors)"
    );
    f.summary(
        "rma",
        &[
            ("put_8b_ns", rows[0].1),
            ("get_8b_ns", rows[0].2),
            ("put_min_ratio_64k", put_min),
            ("get_min_ratio_64k", get_min),
            ("put_c_ns", c),
            ("put_gb_s", b),
            ("frames_get_8b_ns", frames_get),
            ("raw_rtt_ns", raw_rtt),
            ("frames_get_ratio", frames_get / raw_rtt),
        ],
    );
    Ok(())
}

/// Medians of the 8-byte blocking get through frames (rank 0 from rank 1, which serves
/// it from its barrier wait) and of the raw round trip, in alternating batches.
fn frames_get_vs_raw(
    am: &Am<()>,
    rma: &Rma<()>,
    at: usize,
    batches: usize,
) -> Result<(f64, f64), RmaError> {
    const ITERS: u64 = 2000;
    let raw_at = rma.alloc_symmetric(RAW_PINGPONG_BYTES, 4096)?;
    let Some((seg, _)) = am.rq().conduit().mapped_segment(0) else {
        unreachable!("rank_main refused a job whose ranks share no memory")
    };
    // SAFETY: a fresh symmetric allocation in rank 0's segment, mapped by both ranks,
    // page aligned and zeroed (the allocator never handed it out before), used only
    // for the raw reference.
    let raw = unsafe { RawPingPong::in_memory(seg.add(raw_at)) };
    rma.use_frames(true);
    let frames = rma;
    let (mut get_ns, mut floor) = (Vec::new(), Floor::default());
    let mut word = [0u8; 8];
    for b in 0..=batches as u64 {
        if am.rank() == 0 {
            let r = raw.initiate_all(b * ITERS, ITERS);
            let t = Instant::now();
            for _ in 0..ITERS {
                frames.get(1, at, &mut word)?;
            }
            if b > 0 {
                floor.push(r);
                get_ns.push(t.elapsed().as_nanos() as f64 / ITERS as f64);
            }
        } else {
            raw.respond_all(b * ITERS, ITERS);
        }
        am.barrier()?; // rank 1 serves the gets while it waits here
    }
    rma.use_frames(false);
    Ok((median(&mut get_ns), floor.floor().1))
}
