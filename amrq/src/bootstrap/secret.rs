//! The per-user secret from which jobs started by `mpirun`, `srun` and other PMI
//! launchers derive their key (`amrun` and self-launch hand out a fresh random key
//! instead). A launcher's job id is public, so a key computed from it alone could be
//! computed by anyone on the host; mixed with a secret only this user can read, it
//! cannot.
//!
//! The secret is 32 random bytes, in hex, in `$AMRQ_SECRET_FILE` or else
//! `$HOME/.amrq/secret`. It is created on first use with mode 0600 (atomically: a
//! private temporary file linked into place, so two ranks starting at once agree), as
//! munge and ssh keys are, and refused if anyone else could read it or it belongs to
//! another user. Ranks on several hosts need the same file: a shared home directory
//! gives it, or copy it once.

use super::key::random_bytes;
use super::BootError;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Names the secret file, instead of `$HOME/.amrq/secret`.
///
/// ```
/// // AMRQ_SECRET_FILE=/path/to/file names another secret file than $HOME/.amrq/secret.
/// assert_eq!(amrq::bootstrap::secret::ENV_SECRET_FILE, "AMRQ_SECRET_FILE");
/// ```
pub const ENV_SECRET_FILE: &str = "AMRQ_SECRET_FILE";

/// Where this user's secret is.
///
/// ```
/// if let Ok(p) = amrq::bootstrap::secret::path() {
///     println!("this user's secret: {}", p.display());
/// }
/// ```
pub fn path() -> Result<PathBuf, BootError> {
    if let Some(p) = std::env::var_os(ENV_SECRET_FILE).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).ok_or_else(|| {
        BootError::Env(format!(
            "neither {ENV_SECRET_FILE} nor HOME is set: set {ENV_SECRET_FILE} to a file only you can read"
        ))
    })?;
    Ok(PathBuf::from(home).join(".amrq").join("secret"))
}

/// This user's secret: read, or created on first use.
///
/// ```no_run
/// let s = amrq::bootstrap::secret::load_or_create().unwrap();
/// assert_eq!(s.len(), 32);
/// ```
pub fn load_or_create() -> Result<Vec<u8>, BootError> {
    load_or_create_at(&path()?)
}

/// The secret in the file `path`: read, or created on first use.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("amrq-doc-secret-{}", std::process::id()));
/// let file = dir.join("secret");
/// let first = amrq::bootstrap::secret::load_or_create_at(&file).unwrap(); // created
/// let again = amrq::bootstrap::secret::load_or_create_at(&file).unwrap(); // read back
/// assert!(!first.is_empty() && first == again);
/// std::fs::remove_dir_all(dir).unwrap();
/// ```
pub fn load_or_create_at(path: &Path) -> Result<Vec<u8>, BootError> {
    let err = |what: String| BootError::Env(format!("the job secret {}: {what}", path.display()));
    if !path.exists() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create its folder: {e}")))?;
        }
        let bytes = random_bytes::<32>().map_err(|e| err(format!("getrandom: {e}")))?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let tmp = path.with_extension(format!("tmp-{}-{}", std::process::id(), &hex[..8]));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| err(format!("cannot create it: {e}")))?;
        f.write_all(hex.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| err(format!("cannot write it: {e}")))?;
        // Linking fails if another process made it first: then its secret stands.
        let _ = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
    }
    let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read it: {e}")))?;
    if meta.uid() != super::socket::my_uid() {
        return Err(err(format!(
            "it belongs to user {}, not to this user: remove it or point {ENV_SECRET_FILE} at your own",
            meta.uid()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(err(format!(
            "others can read it (mode {:o}): chmod 600 {}",
            meta.permissions().mode() & 0o777,
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read it: {e}")))?;
    let text = text.trim();
    if text.len() < 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(err(
            "it is not at least 32 hex digits: remove it and a new one is made".into(),
        ));
    }
    Ok(text.as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("amrq-secret-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("secret")
    }

    #[test]
    fn made_on_first_use_private_and_then_kept() {
        let p = scratch("first");
        let a = load_or_create_at(&p).expect("made");
        let mode = std::fs::metadata(&p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create_at(&p).expect("read"), a);
        let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
    }

    #[test]
    fn ranks_starting_at_once_agree() {
        let p = scratch("race");
        let all: Vec<Vec<u8>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8).map(|_| s.spawn(|| load_or_create_at(&p))).collect();
            hs.into_iter()
                .map(|h| h.join().expect("no panic").expect("secret"))
                .collect()
        });
        assert!(all.windows(2).all(|w| w[0] == w[1]));
        let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
    }

    #[test]
    fn a_secret_others_can_read_is_refused_with_the_fix() {
        let p = scratch("open");
        load_or_create_at(&p).expect("made");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = load_or_create_at(&p)
            .expect_err("readable by others")
            .to_string();
        assert!(e.contains("chmod 600"), "{e}");
        let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
    }
}
