//! A rank that has left the job is reported, not waited for (shared by the threads and
//! the processes tests). Rank 1 leaves at once. Rank 0 floods its request queue: once
//! the queue is full, the send ends with `PeerLeft` instead of waiting for room that
//! will never come. Then rank 0 waits for a message nobody can send any more and gets
//! `AllPeersLeft` instead of a hang.

use amrq::conduit::mem::MemConduit;
use amrq::conduit::ConduitError;
use amrq::prelude::*;

pub fn left_rank(c: MemConduit) -> Result<(), String> {
    let mut table = HandlerTable::new();
    let bump = table.request("bump", |_: &(), _ctx, _m| Ok(()));
    let am = Am::new(c, table, ()).map_err(|e| e.to_string())?;
    if am.rank() == 1 {
        return Ok(()); // leaves the job
    }
    let mut sent = 0u64;
    let err = loop {
        match am.request(1, bump, &[]) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
    };
    if !matches!(err.conduit(), Some(ConduitError::PeerLeft { rank: 1 })) {
        return Err(format!("send after {sent}: {err}"));
    }
    if sent == 0 {
        return Err("the first send already failed: the queue had room".into());
    }
    match am.wait_until(|_| false) {
        Err(e) if matches!(e.conduit(), Some(ConduitError::AllPeersLeft)) => Ok(()),
        other => Err(format!("wait with every peer gone: {other:?}")),
    }
}
