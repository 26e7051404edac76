//! Files in the graveyard: atomic writes that never follow a symlink, reads that never
//! follow one either, and the tombstone lookup that turns a file into a `DepState`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::core::Lock;
use crate::tombstone::{DecodeError, Tombstone};

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

fn temp_path(dir: &Path, name: &str) -> PathBuf {
    let seq = TMP_SEQ.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.tmp.{}.{seq}", std::process::id()))
}

/// Writes `dir/name` atomically: a new temp file in `dir` (O_EXCL|O_NOFOLLOW), write,
/// fsync, chmod, rename over the target. rename(2) replaces a symlink at the target rather
/// than following it, and readers see either the old or the new content, never a mix.
pub fn atomic_write(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_then_rename(dir, name, mode, true, |f| f.write_all(bytes))
}

/// Like `atomic_write`, but renames first and fsyncs after: for records that others are
/// waiting for (a death). Readers never depend on the fsync (atomicity comes from the
/// rename); it only buys durability across a crash of the node, which an emptyDir does not
/// outlive usefully, and on a journaled disk it can cost milliseconds. After such a crash
/// the file could read empty, which readers take as "not dead": the safe side.
pub fn atomic_write_urgent(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_then_rename(dir, name, mode, false, |f| f.write_all(bytes))
}

/// Copies a file atomically into `dir/name` with `mode` (used by `sexton install`).
pub fn atomic_copy(src: &Path, dir: &Path, name: &str, mode: u32) -> io::Result<u64> {
    let mut input = File::open(src)?;
    write_then_rename(dir, name, mode, true, |f| io::copy(&mut input, f))
}

/// The one way files are put into place: `fill` a new temp file in `dir` (O_EXCL,
/// O_NOFOLLOW), set `mode`, then rename it over `dir/name`, with the fsync before the
/// rename (`sync_first`) or after it (file and directory). The temp file is removed on error.
fn write_then_rename<T>(
    dir: &Path,
    name: &str,
    mode: u32,
    sync_first: bool,
    fill: impl FnOnce(&mut File) -> io::Result<T>,
) -> io::Result<T> {
    let tmp = temp_path(dir, name);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc_o_nofollow())
            .open(&tmp)?;
        let filled = fill(&mut f)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        if sync_first {
            f.sync_all()?;
        }
        fs::rename(&tmp, dir.join(name))?;
        Ok((f, filled))
    })();
    match result {
        Ok((f, filled)) => {
            if !sync_first {
                let _ = f.sync_all();
                if let Ok(d) = File::open(dir) {
                    let _ = d.sync_all();
                }
            }
            Ok(filled)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn libc_o_nofollow() -> i32 {
    nix::fcntl::OFlag::O_NOFOLLOW.bits()
}

/// Reads a file without following a symlink at its last component.
pub fn read_nofollow(path: &Path) -> io::Result<Vec<u8>> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(path)?;
    let mut buf = Vec::with_capacity(256);
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// What a tombstone file holds right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Absent,
    Found(Tombstone),
    /// Exists but cannot be used yet; the string says why (for a log line).
    Bad(String),
}

pub fn read_tombstone(graveyard: &Path, name: &str) -> Lookup {
    match read_nofollow(&graveyard.join(name)) {
        Ok(bytes) => match Tombstone::decode(&bytes) {
            Ok(t) => Lookup::Found(t),
            Err(DecodeError::Empty) => Lookup::Bad("empty file".into()),
            Err(e) => Lookup::Bad(e.to_string()),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Lookup::Absent,
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            Lookup::Bad("is a symlink; not followed".into())
        }
        Err(e) => Lookup::Bad(format!("cannot read: {e}")),
    }
}

/// The lock file a supervisor holds for its whole life: `GRAVEYARD/.NAME.lock`. The dot
/// keeps it apart from tombstones (container names cannot start with a dot).
pub fn lock_file_name(name: &str) -> String {
    format!(".{name}.lock")
}

/// The container a graveyard file belongs to: `main` for `main` and for `.main.lock`.
pub fn owner_of(file_name: &str) -> &str {
    file_name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".lock"))
        .unwrap_or(file_name)
}

/// Takes this container's lock (exclusive flock), retrying for up to `wait` (a peer's
/// probe holds it shared for an instant). `Ok(None)`: someone else holds it for longer,
/// i.e. another live container uses the same name.
///
/// A lock file is never visible unlocked while we start: a new one is created under a
/// temporary name, locked, then linked into place. (Created in place, a peer could open it
/// between create and flock, find it free next to an old `Born` and call a false death.)
pub fn acquire_lock(
    graveyard: &Path,
    name: &str,
    wait: Duration,
) -> io::Result<Option<Flock<File>>> {
    let path = graveyard.join(lock_file_name(name));
    let deadline = Instant::now() + wait;
    loop {
        match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc_o_nofollow())
            .open(&path)
        {
            Ok(f) => match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(Some(lock)),
                Err((_, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
                Err((_, e)) => return Err(io::Error::from(e)),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let tmp = temp_path(graveyard, &lock_file_name(name));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .custom_flags(libc_o_nofollow())
                    .open(&tmp)?;
                let lock = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                    Ok(l) => l,
                    Err((_, e)) => {
                        let _ = fs::remove_file(&tmp);
                        return Err(io::Error::from(e));
                    }
                };
                let linked = fs::hard_link(&tmp, &path);
                let _ = fs::remove_file(&tmp);
                match linked {
                    Ok(()) => return Ok(Some(lock)),
                    // someone created it meanwhile: lock theirs (or find it held)
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Probes a peer's lock without disturbing it: a shared, non-blocking flock on a read-only
/// descriptor, released at once (read-only, so closing it raises no IN_CLOSE_WRITE).
/// Held: its supervisor is alive; Free: it is gone; Unknown: no lock file (not started, or
/// a kubexit container).
pub fn lock_state(graveyard: &Path, name: &str) -> Lock {
    let path = graveyard.join(lock_file_name(name));
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(&path)
    {
        Ok(f) => f,
        Err(_) => return Lock::Unknown,
    };
    match Flock::lock(f, FlockArg::LockSharedNonblock) {
        Ok(_held_for_an_instant) => Lock::Free,
        Err((_, Errno::EWOULDBLOCK)) => Lock::Held,
        Err(_) => Lock::Unknown,
    }
}

/// Blocks until `name`'s lock is free (its supervisor released it, i.e. died), then
/// returns. Returns at once with an error if there is no lock file. Meant for a thread of
/// its own: a blocked shared flock does not disturb the holder.
pub fn wait_lock_released(graveyard: &Path, name: &str) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(graveyard.join(lock_file_name(name)))?;
    loop {
        match Flock::lock(f, FlockArg::LockShared) {
            Ok(_released_at_once) => return Ok(()),
            Err((file, Errno::EINTR)) => f = file,
            Err((_, e)) => return Err(io::Error::from(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "sexton-fsutil-{}-{}",
            std::process::id(),
            TMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn atomic_write_replaces_symlink_without_following() {
        let d = tempdir();
        let victim = d.join("victim");
        fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("main")).unwrap();
        atomic_write(&d, "main", b"{}\n", 0o644).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert!(
            !fs::symlink_metadata(d.join("main"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(d.join("main")).unwrap(), b"{}\n");
        // no temp files left behind
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn read_tombstone_states() {
        let d = tempdir();
        assert_eq!(read_tombstone(&d, "x"), Lookup::Absent);
        fs::write(d.join("x"), b"").unwrap();
        assert!(matches!(read_tombstone(&d, "x"), Lookup::Bad(m) if m.contains("empty")));
        fs::write(d.join("x"), b"{\"Died\":").unwrap();
        assert!(matches!(read_tombstone(&d, "x"), Lookup::Bad(_)));
        fs::write(
            d.join("x"),
            b"{\"Died\":\"2020-04-28T10:41:47Z\",\"ExitCode\":4}",
        )
        .unwrap();
        assert!(matches!(read_tombstone(&d, "x"), Lookup::Found(t) if t.exit_code == Some(4)));
        fs::write(d.join("target"), b"{\"Died\":\"2020-04-28T10:41:47Z\"}").unwrap();
        std::os::unix::fs::symlink(d.join("target"), d.join("link")).unwrap();
        assert!(matches!(read_tombstone(&d, "link"), Lookup::Bad(m) if m.contains("symlink")));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn locks() {
        let d = tempdir();
        assert_eq!(lock_state(&d, "main"), Lock::Unknown);
        let held = acquire_lock(&d, "main", Duration::ZERO)
            .unwrap()
            .expect("free");
        assert_eq!(lock_state(&d, "main"), Lock::Held);
        // a second holder (another open file description) cannot take it
        assert!(
            acquire_lock(&d, "main", Duration::from_millis(30))
                .unwrap()
                .is_none()
        );
        // a waiter returns exactly when the holder lets go
        let (d2, (tx, rx)) = (d.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || tx.send(wait_lock_released(&d2, "main").is_ok()).unwrap());
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "returned while held"
        );
        drop(held);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true));
        assert_eq!(lock_state(&d, "main"), Lock::Free);
        assert!(wait_lock_released(&d, "nobody").is_err());
        assert_eq!(owner_of(".main.lock"), "main");
        assert_eq!(owner_of("main"), "main");
        assert_eq!(owner_of(".main.tmp.1.2"), ".main.tmp.1.2");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn atomic_copy_mode() {
        let d = tempdir();
        fs::write(d.join("src"), b"binary").unwrap();
        let out = d.join("out");
        fs::create_dir(&out).unwrap();
        assert_eq!(
            atomic_copy(&d.join("src"), &out, "sexton", 0o755).unwrap(),
            6
        );
        let m = fs::metadata(out.join("sexton")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o755);
        fs::remove_dir_all(&d).unwrap();
    }
}
