//! Rank 0's side of the rendezvous across hosts: it admits each joiner that proves the
//! job's key, places it in the set-up tree as it comes, keeps its own children's
//! connections, and sends the table down the tree once every rank has joined.

use super::super::key::{random_bytes, same_mac};
use super::super::rendezvous::{
    joiner_mac, readable, verdict, Code, Terms, Wire, ANSWER_WITHIN, CHALLENGE, CHALLENGE_BYTES,
    HELLO, HELLO_BYTES, PROOF, PROOF_BYTES,
};
use super::super::BootError;
use super::tree::{Edges, Link, Placement};
use super::{encode, read_blob, read_wire, Entry, Formed};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Rank 0: admits every other rank at `listener` (shown as `addr`), placing each in
/// the set-up tree as it comes and keeping its own children's connections, and sends
/// the table down the tree.
pub(super) fn admit_all(
    listener: &TcpListener,
    addr: &str,
    t: &Terms,
    mine: Entry,
    deadline: Instant,
) -> Result<Formed, BootError> {
    let _ = listener.set_nonblocking(true);
    let mut entries: Vec<Option<Entry>> = vec![None; t.size];
    let mut tree_at = vec![String::new(); t.size];
    let mut order = vec![0];
    let mut edges = Edges::default();
    entries[0] = Some(mine);
    while order.len() < t.size {
        let now = Instant::now();
        if now > deadline {
            let missing: Vec<usize> = (0..t.size).filter(|&r| entries[r].is_none()).collect();
            return Err(BootError::Timeout(format!(
                "rank 0 of job {} waited at {addr} for ranks {missing:?} to join until the attach \
                 timeout (AMRQ_ATTACH_TIMEOUT sets it); did they start, and can their hosts reach \
                 this address over TCP?",
                t.id
            )));
        }
        if !readable(
            listener.as_raw_fd(),
            None,
            (deadline - now).min(Duration::from_millis(50)),
        ) {
            continue;
        }
        let Ok((mut s, from)) = listener.accept() else {
            continue;
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(ANSWER_WITHIN));
        let _ = s.set_write_timeout(Some(ANSWER_WITHIN));
        let Some(a) = answer(&mut s, t, &entries)? else {
            continue;
        };
        let place = Placement::of(order.len(), &order, &tree_at);
        if place.send(&mut s, t, &a.nonce_j).is_err() {
            continue; // gone before it had its place: not admitted
        }
        tree_at[a.rank] = SocketAddr::new(from.ip(), a.port).to_string();
        entries[a.rank] = Some(Entry {
            host: a.host,
            address: from.ip().to_string(),
            blob: a.blob,
        });
        order.push(a.rank);
        if place.at.is_empty() {
            let _ = s.set_write_timeout(None);
            edges
                .children
                .push(Link::new(s, a.rank, t, (&a.nonce_s, &a.nonce_j), false));
        }
    }
    let entries: Vec<Entry> = entries.into_iter().flatten().collect();
    let table = encode(&entries);
    for c in &mut edges.children {
        // A rank that went away now shows to its children, and at its first collective.
        let _ = c.send(&table);
    }
    Ok((entries, edges))
}

/// A joiner rank 0 admitted: its rank, both nonces, its host, blob and tree port.
struct Admitted {
    rank: usize,
    nonce_j: [u8; 16],
    nonce_s: [u8; 16],
    host: String,
    blob: Vec<u8>,
    port: u16,
}

/// One joiner's admission, or `None` if it was refused (the job goes on). A rank that
/// proves the key but disagrees on the job's shape ends the start: that job cannot
/// form.
fn answer(
    s: &mut TcpStream,
    t: &Terms,
    joined: &[Option<Entry>],
) -> Result<Option<Admitted>, BootError> {
    let Ok(mut hello) = read_wire::<HELLO_BYTES>(s) else {
        return Ok(None);
    };
    if hello.u64() != HELLO {
        return Ok(None);
    }
    let (rank, size, nonce_j) = (hello.u64(), hello.u64(), hello.take::<16>());
    let Ok(nonce_s) = random_bytes::<16>() else {
        return Ok(None);
    };
    let mut ch = Wire::<CHALLENGE_BYTES>::new(CHALLENGE);
    ch.put(&nonce_s);
    if s.write_all(&ch.b).is_err() {
        return Ok(None);
    }
    let Ok(mut proof) = read_wire::<PROOF_BYTES>(s) else {
        return Ok(None);
    };
    if proof.u64() != PROOF {
        return Ok(None);
    }
    let (mac, digest, _bytes) = (proof.take::<32>(), proof.u64(), proof.u64());
    let theirs = super::super::rendezvous::proof_agreement(&mut proof);
    let mut judge =
        |code: Code, reason: &str| s.write_all(&verdict(t, &nonce_s, &nonce_j, code, reason).b);
    if !same_mac(&mac, &joiner_mac(t, &nonce_j, &nonce_s, rank, size)) {
        let why = format!("its key is not job {}'s key (AMRQ_JOB_KEY differs)", t.id);
        let _ = judge(Code::WrongKey, &why);
        return Ok(None);
    }
    if size != t.size as u64 || digest != t.digest {
        let why = super::super::rendezvous::disagreement(t, rank, size, &theirs, digest);
        let _ = judge(Code::Disagrees, &why);
        return Err(BootError::Refused(format!(
            "rank {rank} cannot join job {}: {why}",
            t.id
        )));
    }
    let rank = match usize::try_from(rank)
        .ok()
        .filter(|&r| joined.get(r) == Some(&None))
    {
        Some(r) => r,
        None => {
            let why = format!(
                "rank {rank} has already joined job {} (or is not one of its {} ranks)",
                t.id, t.size
            );
            let _ = judge(Code::Duplicate, &why);
            return Ok(None);
        }
    };
    if judge(Code::Admitted, "").is_err() {
        return Ok(None);
    }
    let (Ok(host), Ok(blob), Ok(port)) = (read_blob(s), read_blob(s), read_blob(s)) else {
        return Ok(None);
    };
    let mut mac = [0u8; 32];
    if s.read_exact(&mut mac).is_err() {
        return Ok(None);
    }
    let want = t
        .key
        .mac("entry", &[t.id.as_bytes(), &nonce_s, &host, &blob, &port]);
    let Ok(port) = <[u8; 2]>::try_from(port.as_slice()).map(u16::from_le_bytes) else {
        return Ok(None);
    };
    if !same_mac(&mac, &want) {
        return Ok(None);
    }
    Ok(Some(Admitted {
        rank,
        nonce_j,
        nonce_s,
        host: String::from_utf8_lossy(&host).into_owned(),
        blob,
        port,
    }))
}
