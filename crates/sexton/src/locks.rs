//! Lock files: `GRAVEYARD/.NAME.lock`, held (exclusive flock) by a container's supervisor
//! for its whole life. A peer probes it with a shared non-blocking flock: held means alive,
//! free means its supervisor is gone (dead, even without a tombstone), absent says nothing
//! (not started yet, or a kubexit container).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use sexton_core::machine::Lock;

use crate::files::{
    FILE_MODE, ReadError, Unusable, create_exclusive, kind_of, open_regular, safe_flags, temp_path,
};

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

/// Opens our own lock file for locking: an existing one must be a regular file.
fn open_own_lock(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(safe_flags())
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "is not a regular file but {}; remove it",
            kind_of(&meta.file_type())
        )));
    }
    Ok(f)
}

/// What taking our own lock gave.
#[derive(Debug)]
pub enum Acquired {
    Held(Flock<File>),
    /// Someone else holds it: another live container uses the same name.
    Busy,
    /// flock does not work on this filesystem (NFS without a lock manager answers
    /// ENOLCK, some FUSE and network filesystems EOPNOTSUPP or EINVAL).
    Unsupported(Errno),
}

/// Whether a flock error means "no flock here" rather than a real failure.
fn unsupported(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENOLCK | Errno::EOPNOTSUPP | Errno::EINVAL | Errno::ENOSYS
    )
}

/// Takes this container's lock (exclusive flock), retrying for up to `wait` (a peer's
/// probe holds it shared for an instant).
///
/// A lock file is never visible unlocked while we start: a new one is created under a
/// temporary name, locked, then linked into place. (Created in place, a peer could open it
/// between create and flock, find it free and call a false death.) This is what lets a
/// peer read a free lock file as proof of death, with no grace period.
pub fn acquire_lock(graveyard: &Path, name: &str, wait: Duration) -> io::Result<Acquired> {
    let path = graveyard.join(lock_file_name(name));
    let deadline = Instant::now() + wait;
    loop {
        match open_own_lock(&path) {
            Ok(f) => match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(Acquired::Held(lock)),
                Err((_, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err((_, Errno::EWOULDBLOCK)) => return Ok(Acquired::Busy),
                Err((_, e)) if unsupported(e) => return Ok(Acquired::Unsupported(e)),
                Err((_, e)) => return Err(io::Error::from(e)),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Some(acquired) = create_lock(graveyard, name, &path)? {
                    return Ok(acquired);
                }
                // someone created it meanwhile: lock theirs (or find it held)
            }
            Err(e) => return Err(e),
        }
    }
}

/// Creates a locked lock file and links it into place; `None` if one appeared meanwhile.
/// Where flock is not supported, no lock file is left: peers then find none, which says
/// nothing, rather than a free one, which would say "dead".
fn create_lock(graveyard: &Path, name: &str, path: &Path) -> io::Result<Option<Acquired>> {
    let tmp = temp_path(graveyard, name);
    let created: io::Result<Acquired> = (|| {
        let f = create_exclusive(&tmp, FILE_MODE, true)?;
        let lock = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((_, e)) if unsupported(e) => return Ok(Acquired::Unsupported(e)),
            Err((_, e)) => return Err(io::Error::from(e)),
        };
        fs::hard_link(&tmp, path)?;
        Ok(Acquired::Held(lock))
    })();
    let _ = fs::remove_file(&tmp); // the lock lives on under its real name
    match created {
        Ok(acquired) => Ok(Some(acquired)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e),
    }
}

/// Puts a lock file back into place for a lock we hold (the graveyard was wiped and
/// re-created): a new file, locked, linked. We keep holding both; the new one is what
/// peers see from now on.
pub fn relink_lock(graveyard: &Path, name: &str) -> io::Result<Option<Flock<File>>> {
    match create_lock(graveyard, name, &graveyard.join(lock_file_name(name)))? {
        Some(Acquired::Held(lock)) => Ok(Some(lock)),
        _ => Ok(None),
    }
}

/// A peer's lock as a probe found it. `Held` keeps the descriptor that found it held, so
/// that a lock waiter blocks on exactly that lock: opened again later, the path could name
/// another file or none (a graveyard removed in between), and a waiter that cannot open it
/// would leave the dependency watched by nobody.
#[derive(Debug)]
pub enum Probe {
    /// No lock file (not started, or a kubexit container).
    Unknown,
    /// Its supervisor is gone.
    Free,
    /// Its supervisor is alive; the descriptor that found it so.
    Held(File),
}

impl Probe {
    pub fn lock(&self) -> Lock {
        match self {
            Probe::Unknown => Lock::Unknown,
            Probe::Free => Lock::Free,
            Probe::Held(_) => Lock::Held,
        }
    }
}

/// Probes a peer's lock without disturbing it: a shared, non-blocking flock on a read-only
/// descriptor, released at once (read-only, so closing it raises no IN_CLOSE_WRITE).
/// `Err`: a lock file that cannot be probed, and why.
pub fn probe(graveyard: &Path, name: &str) -> Result<Probe, Unusable> {
    let f = match open_regular(&graveyard.join(lock_file_name(name))) {
        Ok(f) => f,
        Err(ReadError::NotFound) => return Ok(Probe::Unknown),
        Err(ReadError::Unusable(why)) => return Err(why),
    };
    match Flock::lock(f, FlockArg::LockSharedNonblock) {
        Ok(_held_for_an_instant) => Ok(Probe::Free),
        Err((f, Errno::EWOULDBLOCK)) => Ok(Probe::Held(f)),
        Err((_, e)) => Err(Unusable::Flock(e)),
    }
}

/// `probe`, without the descriptor: Held means alive, Free gone, Unknown no lock file.
pub fn lock_state(graveyard: &Path, name: &str) -> Result<Lock, Unusable> {
    probe(graveyard, name).map(|p| p.lock())
}

/// Blocks until the lock behind `f` (a descriptor a probe found held) is free: its
/// supervisor released it, i.e. died. Meant for a thread of its own: a blocked shared
/// flock does not disturb the holder.
pub fn wait_released(mut f: File) -> io::Result<()> {
    loop {
        match Flock::lock(f, FlockArg::LockShared) {
            Ok(_released_at_once) => return Ok(()),
            Err((file, Errno::EINTR)) => f = file,
            Err((_, e)) => return Err(io::Error::from(e)),
        }
    }
}

/// `wait_released` on `name`'s lock file; an error at once if there is no usable one.
#[cfg(test)]
pub fn wait_lock_released(graveyard: &Path, name: &str) -> io::Result<()> {
    let f = open_regular(&graveyard.join(lock_file_name(name))).map_err(|e| match e {
        ReadError::NotFound => io::Error::from(io::ErrorKind::NotFound),
        ReadError::Unusable(why) => io::Error::other(why.to_string()),
    })?;
    wait_released(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{FILE_MODE, Reserved, atomic_write, ensure_graveyard};
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    fn tempdir() -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("sexton-locks-{}", crate::files::unique_suffix()));
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_fifo_at_a_lock_path_is_reported_not_waited_on() {
        let d = tempdir();
        nix::unistd::mkfifo(
            CString::new(d.join(".fifo.lock").as_os_str().as_bytes())
                .unwrap()
                .as_c_str(),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        assert!(
            lock_state(&d, "fifo")
                .unwrap_err()
                .to_string()
                .contains("FIFO")
        );
        assert!(wait_lock_released(&d, "fifo").is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn modes_do_not_depend_on_the_umask() {
        let d = tempdir();
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
        let lock = acquire_lock(&d, "main", Duration::ZERO).unwrap();
        atomic_write(&d, "main", b"{}\n", FILE_MODE).unwrap();
        let reserved = Reserved::new(&d, "side").unwrap();
        reserved.commit(&d, "side", b"{}\n").unwrap();
        let g = d.join("made");
        ensure_graveyard(&g).unwrap();
        nix::sys::stat::umask(old);
        for f in [".main.lock", "main", "side"] {
            let mode = fs::metadata(d.join(f)).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, FILE_MODE, "{f}");
        }
        assert_eq!(
            fs::metadata(&g).unwrap().permissions().mode() & 0o7777,
            0o1777
        );
        drop(lock);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn locks() {
        let d = tempdir();
        assert_eq!(lock_state(&d, "main").unwrap(), Lock::Unknown);
        let Acquired::Held(held) = acquire_lock(&d, "main", Duration::ZERO).unwrap() else {
            panic!("free");
        };
        assert_eq!(lock_state(&d, "main").unwrap(), Lock::Held);
        // a second holder (another open file description) cannot take it
        assert!(matches!(
            acquire_lock(&d, "main", Duration::from_millis(30)).unwrap(),
            Acquired::Busy
        ));
        // a waiter returns exactly when the holder lets go
        let (d2, (tx, rx)) = (d.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || tx.send(wait_lock_released(&d2, "main").is_ok()).unwrap());
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "returned while held"
        );
        drop(held);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true));
        assert_eq!(lock_state(&d, "main").unwrap(), Lock::Free);
        assert!(wait_lock_released(&d, "nobody").is_err());
        assert_eq!(owner_of(".main.lock"), "main");
        assert_eq!(owner_of("main"), "main");
        assert_eq!(owner_of(".main.tmp.1.2"), ".main.tmp.1.2");
        assert_eq!(names(&d), [".main.lock"], "no temp files left behind");
        fs::remove_dir_all(&d).unwrap();
    }
}
