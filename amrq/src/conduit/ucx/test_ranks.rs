//! Ranks as threads of the test process over tcp on the loopback, for the unit tests
//! of the UCX conduit's parts.

use super::{threads, UcxConduit};
use crate::conduit::{ChannelSpec, ConduitSpec};

/// `n` ranks whose channels hold these numbers of slots, or `None` (said) where UCX
/// is missing.
pub fn ranks(n: usize, channels: &[u64]) -> Option<Vec<UcxConduit>> {
    if let Err(why) = super::available() {
        eprintln!("no UCX here: {why}");
        return None;
    }
    let settings: Vec<(String, String)> = [("TLS", "tcp"), ("NET_DEVICES", "lo")]
        .map(|(k, v)| (k.into(), v.into()))
        .into();
    let channels = channels.iter().map(|&c| ChannelSpec::new(c)).collect();
    Some(threads(n, &ConduitSpec::new(channels), &settings).unwrap())
}

/// Each leaves on its own thread: a leaving rank waits for the others' goodbyes.
pub fn leave(eps: Vec<UcxConduit>) {
    std::thread::scope(|s| {
        for e in eps {
            s.spawn(move || drop(e));
        }
    });
}
