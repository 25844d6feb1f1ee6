//! The Long round trip shared by the threads and the processes tests (included by both).

use amrq::conduit::mem::MemConduit;
use amrq::conduit::ConduitError;
use amrq::prelude::*;
use std::cell::Cell;

pub struct LongState {
    back: ReplyHandler,
    /// This rank's registered segment: (first byte's address, length).
    segment: Cell<(usize, usize)>,
    ok: Cell<u64>,
    bad: Cell<u64>,
}

impl LongState {
    /// True if `m`'s payload lies inside this rank's registered segment, shared (Long:
    /// no copy, never lent as a slice).
    fn in_segment(&self, m: &Msg<'_>) -> bool {
        let (base, len) = self.segment.get();
        let p = m.payload_in_place();
        let at = p.as_ptr() as usize;
        p.is_shared() && p.held().is_none() && at >= base && at + p.len() <= base + len
    }

    fn count(&self, ok: bool) {
        let c = if ok { &self.ok } else { &self.bad };
        c.set(c.get() + 1);
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

/// Rank 0 sends Long requests of several sizes to rank 1 (at offset 4096 of its
/// segment); each handler checks the bytes and that they are in its segment, and
/// replies Long with them reversed, to offset 8192 of rank 0's segment, where rank 0's
/// reply handler checks them the same way.
pub fn long_round_trips(c: MemConduit) -> Result<(), String> {
    let e = |e: AmError| e.to_string();
    let mut table = HandlerTable::new();
    let back = table.reply("back", |s: &LongState, m| {
        let want: Vec<u8> = pattern(m.arg(0)? as usize, m.arg(1)?)
            .into_iter()
            .rev()
            .collect();
        s.count(*m.payload() == want[..] && (want.is_empty() || s.in_segment(&m)));
        Ok(())
    });
    let take = table.request("take", |s: &LongState, ctx, m| {
        let len = m.arg(0)? as usize;
        if *m.payload() != pattern(len, m.arg(1)?)[..] || (len > 0 && !s.in_segment(&m)) {
            s.count(false);
        }
        let reversed: Vec<u8> = m.payload().iter().rev().copied().collect();
        ctx.reply_long(s.back, &[m.arg(0)?, m.arg(1)?], &reversed, 8192)
    });
    let state = LongState {
        back,
        segment: Cell::new((0, 0)),
        ok: Cell::new(0),
        bad: Cell::new(0),
    };
    let am = Am::new(c, table, state).map_err(e)?;
    let (seg, seg_len) = am.segment();
    am.state().segment.set((seg.as_ptr() as usize, seg_len));
    am.barrier().map_err(e)?;
    let sizes = [0usize, 1, 100, 4096, 65_536, 1 << 20];
    if am.rank() == 0 {
        for (k, &len) in sizes.iter().enumerate() {
            am.request_long(
                1,
                take,
                &[len as u64, k as u64],
                &pattern(len, k as u64),
                4096,
            )
            .map_err(e)?;
            am.wait_until(|s| s.ok.get() + s.bad.get() == k as u64 + 1)
                .map_err(e)?;
        }
        if am.state().bad.get() != 0 || am.state().ok.get() != sizes.len() as u64 {
            return Err(format!("{} Long replies wrong", am.state().bad.get()));
        }
        let err = am
            .request_long(1, take, &[], &[0; 16], seg_len - 8)
            .unwrap_err();
        match err.conduit() {
            Some(ConduitError::OutOfSegment {
                rank: 1,
                offset,
                len: 16,
                ..
            }) if *offset == seg_len - 8 => {}
            other => return Err(format!("out-of-segment Long gave {other:?}")),
        }
    }
    am.barrier().map_err(e)?;
    if am.state().bad.get() != 0 {
        return Err("a Long request arrived wrong".into());
    }
    Ok(())
}
