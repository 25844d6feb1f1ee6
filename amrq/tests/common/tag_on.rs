//! Tag-On messages: kinds chosen by size, blocks read in place, kept or freed, reused
//! without leaks. Shared by the threads and the processes tests.

use amrq::conduit::mem::MemConduit;
use amrq::conduit::ReceivedFrame;
use amrq::prelude::*;
use amrq::rq::Kind;

pub fn config() -> (Config, QueueId) {
    let mut cfg = Config::default();
    let q = cfg.add_queue(64);
    (cfg, q)
}

fn data(i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (k as u64 ^ i.wrapping_mul(7)) as u8)
        .collect()
}

pub fn tag_on_reuse(c: MemConduit, messages: u64) -> Result<(), String> {
    let (cfg, q) = config();
    let e = |e: AmError| e.to_string();
    let r = |e: RqError| e.to_string();
    let am = Am::new(c, HandlerTable::<()>::new(), ()).map_err(e)?;
    let rq = am.rq();
    let len_of = |i: u64| 513 + (i as usize * 37) % (cfg.tag_on_bytes.get() - 513);
    if am.rank() == 0 {
        for i in 0..messages {
            let d = data(i, len_of(i));
            // The plain enqueue picks Tag-On for these sizes; a full pool is `Ok(false)`.
            while !rq.enqueue(1, q, &[i], &d).map_err(r)? {
                am.poll().map_err(e)?;
            }
        }
    } else {
        let mut kept = std::collections::VecDeque::new();
        let mut i = 0;
        while i < messages {
            let Some(f) = rq.read_queue(q).map_err(r)? else {
                continue;
            };
            if !f.is_tag_on() || f.args() != [i] || f.payload() != data(i, len_of(i))[..] {
                return Err(format!(
                    "message {i} arrived wrong (tag-on: {})",
                    f.is_tag_on()
                ));
            }
            if i % 3 == 0 {
                // Keep the block past the frame for a while: three at most.
                kept.push_back((i, f.keep().ok_or("a Tag-On frame kept no block")?));
                if kept.len() > 3 {
                    let (k, block) = kept.pop_front().ok_or("empty")?;
                    if *block != data(k, len_of(k))[..] {
                        return Err(format!("kept block {k} changed before it was freed"));
                    }
                }
            } else {
                f.release();
            }
            i += 1;
        }
        drop(kept);
    }
    am.barrier().map_err(e)?;
    // No leak: all 8 blocks can be claimed again; a 9th Tag-On finds the pool full
    // while the queue itself still has room (Basic still fits).
    if am.rank() == 0 {
        for i in 0..cfg.tag_on_buffers.get() as u64 {
            if !rq
                .enqueue_as(1, q, Kind::TagOn, 0, &[i], &data(i, 1000))
                .map_err(r)?
            {
                return Err(format!("block {i} was never freed"));
            }
        }
        if rq
            .enqueue_as(1, q, Kind::TagOn, 0, &[99], &data(99, 1000))
            .map_err(r)?
        {
            return Err("a 9th block out of 8".into());
        }
        if !rq
            .enqueue_as(1, q, Kind::Basic, 0, &[100], &data(100, 1000))
            .map_err(r)?
        {
            return Err("the queue was full too".into());
        }
    }
    am.barrier().map_err(e)?;
    if am.rank() == 1 {
        for _ in 0..cfg.tag_on_buffers.get() + 1 {
            if !rq.delete_queue(q).map_err(r)? {
                return Err("a frame went missing".into());
            }
        }
    }
    am.barrier().map_err(e)
}
