//! The UCX conduit's set-up collectives (all-gather, barrier): every rank's word,
//! gathered up the tree of `util::heap_tree` and sent back down it. Each rank talks to
//! its parent and at most 8 children, both ways: the connections the job's end uses
//! again.

use super::conduit::{Out, UcxConduit, PATIENCE};
use super::wire;
use crate::bootstrap::BootError;
use crate::conduit::{Conduit, ConduitError, Rank};
use crate::util::heap_tree::{children_of, parent_of};
use std::time::{Duration, Instant};

impl UcxConduit {
    /// The setup collectives (all-gather, barrier): every rank's `mine`, gathered up
    /// the tree of `util::heap_tree` and sent back down it, under a new epoch
    /// (progressing while it waits, so credits flow meanwhile). Each rank talks to its
    /// parent and children only, both ways: the connections the job's end uses again.
    pub(super) fn exchange(&self, mine: u64) -> Result<Vec<u64>, ConduitError> {
        let epoch = self.epoch.get() + 1;
        self.epoch.set(epoch);
        self.progress();
        let (me, n, since) = (self.rank, self.size, Instant::now());
        // Up: this rank's part as (rank, value) pairs, its children's first.
        let mut part = vec![me as u64, mine];
        for kid in children_of(me, n) {
            part.extend(self.coll_step((epoch, UP), kid, since)?);
        }
        let all = match parent_of(me) {
            Some(parent) => {
                self.coll_send(parent, (epoch, UP), &part)?;
                self.coll_step((epoch, DOWN), parent, since)?
            }
            None => {
                let mut all = vec![None; n];
                for pair in part.chunks(2) {
                    let (r, v) = (pair[0] as usize, pair.get(1).copied());
                    match all.get_mut(r) {
                        Some(slot @ None) => *slot = v,
                        _ => {
                            return Err(ConduitError::Setup(format!(
                                "a set-up collective gathered rank {r} twice, or a rank outside the job"
                            )))
                        }
                    }
                }
                all.into_iter()
                    .enumerate()
                    .map(|(r, v)| {
                        v.ok_or_else(|| {
                            ConduitError::Setup(format!(
                                "a set-up collective gathered nothing from rank {r}"
                            ))
                        })
                    })
                    .collect::<Result<Vec<u64>, _>>()?
            }
        };
        if all.len() != n {
            return Err(ConduitError::Setup(format!(
                "a set-up collective passed down {} values for {n} ranks",
                all.len()
            )));
        }
        for kid in children_of(me, n) {
            self.coll_send(kid, (epoch, DOWN), &all)?;
        }
        Ok(all)
    }

    /// Sends `values` to `dest` as step `step` of set-up collective `epoch`.
    fn coll_send(
        &self,
        dest: Rank,
        (epoch, step): (u64, u64),
        values: &[u64],
    ) -> Result<(), ConduitError> {
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let head = [self.rank as u64, epoch, step];
        self.send(dest, &Out::with(wire::AM_COLL, &head, &data))
    }

    /// The values rank `from` sent in step `step` of collective `epoch`, once they
    /// arrive, within `PATIENCE` of `since` (the collective's start).
    fn coll_step(
        &self,
        (epoch, step): (u64, u64),
        from: Rank,
        since: Instant,
    ) -> Result<Vec<u64>, ConduitError> {
        let mut spins = 0u32;
        loop {
            // Spins a little, then sleeps until the network has something: many ranks
            // of one host wait here at once at start-up, and the ones with work to
            // do need the cores.
            spins = spins.saturating_add(1);
            if spins > 64 {
                self.net.sleep(Duration::from_millis(5));
            }
            self.progress();
            if let Some(values) = self.shared.local().coll.remove(&(epoch, step, from)) {
                return Ok(values);
            }
            self.check_peers()?;
            if since.elapsed() > PATIENCE {
                let what = if step == UP {
                    "its part going up"
                } else {
                    "the values coming down"
                };
                return Err(ConduitError::Bootstrap(BootError::Timeout(format!(
                    "rank {} waited {PATIENCE:?} at a set-up collective for rank {from} ({what} the tree)",
                    self.rank
                ))));
            }
        }
    }
}

/// The steps of a set-up collective: up the tree, then down.
const UP: u64 = 0;
const DOWN: u64 = 1;
