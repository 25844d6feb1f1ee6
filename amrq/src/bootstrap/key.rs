//! A job's two names: its **id**, public, which says where its ranks meet (the
//! rendezvous name is derived from it and the user id), and its **key**, 128 secret
//! bits, which proves that a process belongs to the job. Nothing public is derived from
//! the key: a joiner proves it holds the key by answering a challenge with a MAC over
//! fresh nonces ([`JobKey::mac`]), so the key itself never crosses the socket.

use sha2::{Digest, Sha256};

/// A job's 128-bit secret key.
///
/// ```
/// use amrq::bootstrap::JobKey;
/// let k = JobKey::random().unwrap();
/// assert_eq!(JobKey::parse(&k.to_string()), Some(k));
/// assert_ne!(k.mac("a", &[b"x"]), k.mac("b", &[b"x"]));
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JobKey(pub [u64; 2]);

impl std::fmt::Debug for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobKey(…)") // a secret: never in logs
    }
}

/// `N` bytes from the kernel's random source.
///
/// ```
/// let a: [u8; 16] = amrq::bootstrap::key::random_bytes().unwrap();
/// let b: [u8; 16] = amrq::bootstrap::key::random_bytes().unwrap();
/// assert_ne!(a, b);
/// ```
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    let mut got = 0;
    while got < N {
        // SAFETY: `b[got..]` is writable for `N - got` bytes.
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), N - got, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
            continue;
        }
        got += n as usize;
    }
    Ok(b)
}

impl JobKey {
    /// 128 bits from the kernel's random source.
    ///
    /// ```
    /// use amrq::bootstrap::JobKey;
    /// let (a, b) = (JobKey::random().unwrap(), JobKey::random().unwrap());
    /// assert_ne!(a.mac("x", &[]), b.mac("x", &[]));
    /// ```
    pub fn random() -> std::io::Result<Self> {
        Ok(Self::from_bytes(random_bytes::<16>()?))
    }

    fn from_bytes(b: [u8; 16]) -> Self {
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&b[..8]);
        hi.copy_from_slice(&b[8..]);
        Self([u64::from_le_bytes(lo), u64::from_le_bytes(hi)])
    }

    /// The key from its 32 hex digits.
    ///
    /// ```
    /// use amrq::bootstrap::JobKey;
    /// assert!(JobKey::parse("00112233445566778899aabbccddeeff").is_some());
    /// assert!(JobKey::parse("not a key").is_none());
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let lo = u64::from_str_radix(&s[..16], 16).ok()?;
        let hi = u64::from_str_radix(&s[16..], 16).ok()?;
        Some(Self([lo, hi]))
    }

    /// A key derived from `secret` and a public `context` (a launcher's job id): every
    /// holder of the secret computes the same key; nobody without it can.
    ///
    /// ```
    /// use amrq::bootstrap::JobKey;
    /// let a = JobKey::derive(b"secret", "mpirun:42");
    /// assert_eq!(a, JobKey::derive(b"secret", "mpirun:42"));
    /// assert_ne!(a, JobKey::derive(b"secret", "mpirun:43"));
    /// assert_ne!(a, JobKey::derive(b"other", "mpirun:42"));
    /// ```
    pub fn derive(secret: &[u8], context: &str) -> Self {
        let h = hash(&[b"amrq job key", secret, context.as_bytes()]);
        let mut b = [0u8; 16];
        b.copy_from_slice(&h[..16]);
        Self::from_bytes(b)
    }

    /// A message authentication code over `parts`, for purpose `label`: SHA-256 of the
    /// key, the label and the parts, each length-prefixed (no two inputs collide).
    ///
    /// ```
    /// use amrq::bootstrap::JobKey;
    /// let k = JobKey::parse("00112233445566778899aabbccddeeff").unwrap();
    /// assert_eq!(k.mac("join", &[b"ab", b"c"]), k.mac("join", &[b"ab", b"c"]));
    /// assert_ne!(k.mac("join", &[b"ab", b"c"]), k.mac("join", &[b"a", b"bc"])); // no collisions by splitting
    /// ```
    pub fn mac(&self, label: &str, parts: &[&[u8]]) -> [u8; 32] {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.0[0].to_le_bytes());
        key[8..].copy_from_slice(&self.0[1].to_le_bytes());
        let mut all: Vec<&[u8]> = vec![&key, label.as_bytes()];
        all.extend_from_slice(parts);
        hash(&all)
    }
}

impl std::fmt::Display for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}{:016x}", self.0[0], self.0[1])
    }
}

/// SHA-256 of `parts`, each prefixed by its length.
pub(crate) fn hash(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// Compares two MACs in time that does not depend on where they differ.
pub(crate) fn same_mac(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The abstract Unix socket name where the ranks of job `id` meet on a host: derived
/// from the public id and the user id only (it reveals nothing about the key).
///
/// ```
/// let n = amrq::bootstrap::key::rendezvous_name("amrun-1234");
/// assert!(n.starts_with("amrq-"));
/// assert_eq!(n, amrq::bootstrap::key::rendezvous_name("amrun-1234"));
/// ```
pub fn rendezvous_name(id: &str) -> String {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let h = hash(&[b"amrq rendezvous", id.as_bytes()]);
    let hex: String = h[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("amrq-{uid}-{hex}")
}
