//! Files in the graveyard (tombstones, reserved records, stat keys; the locks are in
//! `locks.rs`). Every other container of the pod (and anything else sharing the
//! volume) can put anything there, so nothing is trusted:
//! - reads never follow a symlink, never block (a FIFO at a tombstone path would freeze the
//!   event loop in open(2)), accept regular files only (checked with fstat on the opened
//!   descriptor) and read at most `MAX_RECORD` bytes;
//! - writes go to a new temp file with a name no earlier incarnation used (every
//!   incarnation is PID 1, so a PID is no name), get their mode set explicitly (a umask
//!   of 077 must not hide a tombstone or a lock from a peer running as another user), and
//!   are renamed into place;
//! - the space for the death record is reserved before the child starts (`Reserved`), so a
//!   graveyard that fills up later still records the death;
//! - nothing is fsynced. The graveyard is the pod's emptyDir: it does not outlive the pod,
//!   and after a node's crash a torn record is read as unusable (not a death) and read
//!   again. An fsync waits for the disk's whole journal: beside one 12 GB write it took up
//!   to 3.8 s on the CI machine kind, and in a cold CI run, beside parallel compiles, a
//!   reservation's fsync held three containers' start for over 15 s. That wait would fall
//!   on the child's start and on a death's notice, on any node whose disk is busy.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::OFlag;

use sexton_core::tombstone::{DecodeError, Tombstone};

/// The largest tombstone or lock file read: reading a huge file on every poll would cost
/// memory and CPU.
pub use sexton_core::MAX_RECORD;

/// Mode of every file sexton puts into the graveyard: readable by peers of any UID.
pub const FILE_MODE: u32 = 0o644;

/// Size of a reserved record: far above any tombstone sexton writes (names are at most 63
/// bytes), one page or block on every filesystem that matters.
pub const RESERVED_SIZE: usize = 4096;

/// Flags of every open of a graveyard file: no symlink, no blocking on a FIFO or device,
/// no controlling terminal, not inherited by the child.
pub(crate) fn safe_flags() -> i32 {
    (OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).bits()
}

/// Temp names must differ across incarnations of the same container: each one is PID 1
/// of its namespace and restarts its counter, so `.main.tmp.1.0` would repeat and the
/// O_EXCL create of a restarted container would fail on its predecessor's leftover.
pub(crate) fn unique_suffix() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut random = [0u8; 8];
    // SAFETY: getrandom writes at most `random.len()` bytes into the buffer.
    let got = unsafe { nix::libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    if got == random.len() as isize {
        format!("{:016x}{seq:x}", u64::from_ne_bytes(random))
    } else {
        // no getrandom (old kernel, seccomp): the wall clock in nanoseconds differs
        // between incarnations, which is all that is needed
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{nanos:x}{seq:x}")
    }
}

/// Prefix of this container's temp files: `.NAME.tmp.` (a dot keeps them apart from
/// tombstones, since container names cannot start with one).
fn temp_prefix(name: &str) -> String {
    format!(".{name}.tmp.")
}

pub(crate) fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{}{}", temp_prefix(name), unique_suffix()))
}

/// Creates a new file exclusively, with `mode` set explicitly (not through the umask).
pub(crate) fn create_exclusive(path: &Path, mode: u32, read: bool) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(read)
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(safe_flags())
        .open(path)?;
    f.set_permissions(fs::Permissions::from_mode(mode))?;
    Ok(f)
}

/// Creates the graveyard if it does not exist. One created here gets mode 1777 (like
/// /tmp): containers of the pod may run as different users and must each create their
/// own files, and none may remove another's. An existing one (an emptyDir) is left as is.
pub fn ensure_graveyard(dir: &Path) -> io::Result<()> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a directory",
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o1777)),
        // a peer created it meanwhile
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes temp files a crashed earlier incarnation of this container left behind. Only
/// called while holding the container's lock, so no live process of ours writes them.
pub fn remove_stale_temp_files(dir: &Path, name: &str) -> usize {
    let prefix = temp_prefix(name);
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().as_bytes().starts_with(prefix.as_bytes()))
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

/// Writes `dir/name` atomically: a new temp file in `dir` (O_EXCL|O_NOFOLLOW), write,
/// chmod, rename over the target. rename(2) replaces a symlink at the target rather
/// than following it, and readers see either the old or the new content, never a mix.
pub fn atomic_write(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_then_rename(dir, name, mode, |f| f.write_all(bytes))
}

/// Copies a file atomically into `dir/name` with `mode` (used by `sexton install`).
pub fn atomic_copy(src: &Path, dir: &Path, name: &str, mode: u32) -> io::Result<u64> {
    let mut input = File::open(src)?;
    write_then_rename(dir, name, mode, |f| io::copy(&mut input, f))
}

/// The one way files are put into place: `fill` a new temp file in `dir`, set `mode`,
/// rename it over `dir/name` (no fsync: the module's header says why). The temp file is
/// removed on error.
fn write_then_rename<T>(
    dir: &Path,
    name: &str,
    mode: u32,
    fill: impl FnOnce(&mut File) -> io::Result<T>,
) -> io::Result<T> {
    let tmp = temp_path(dir, name);
    let result = (|| {
        let mut f = create_exclusive(&tmp, mode, false)?;
        let filled = fill(&mut f)?;
        fs::rename(&tmp, dir.join(name))?;
        Ok(filled)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp); // best effort; a leftover is removed at next start
    }
    result
}

/// Space for one future record, taken while it can still be had: a temp file of
/// `RESERVED_SIZE` bytes of real data (not a sparse hole, not an unwritten extent), so
/// that writing the record later only overwrites blocks that are already ours, shrinking
/// it frees space, and the rename into place needs no new inode. The write takes the
/// space without an fsync: tmpfs allocates its pages at write(2), and ext4 and XFS with
/// delayed allocation reserve the blocks there, refusing with ENOSPC at once if there
/// are none.
#[derive(Debug)]
pub struct Reserved {
    file: File,
    path: PathBuf,
}

impl Reserved {
    pub fn new(dir: &Path, name: &str) -> io::Result<Reserved> {
        let path = temp_path(dir, name);
        let result = (|| {
            let mut file = create_exclusive(&path, FILE_MODE, false)?;
            file.write_all(&[b' '; RESERVED_SIZE])?;
            Ok(file)
        })();
        match result {
            Ok(file) => Ok(Reserved { file, path }),
            Err(e) => {
                let _ = fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Whether the reserved file is still in the graveyard (not removed with it).
    pub fn exists(&self) -> bool {
        match (fs::symlink_metadata(&self.path), self.file.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    /// Writes `bytes` into the reserved space and renames it over `dir/name`. Returns the
    /// reservation on failure, so the caller can fall back.
    pub fn commit(self, dir: &Path, name: &str, bytes: &[u8]) -> Result<(), (Self, io::Error)> {
        if bytes.len() > RESERVED_SIZE {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "record larger than reserved");
            return Err((self, e));
        }
        let written = self
            .file
            .write_all_at(bytes, 0)
            .and_then(|()| self.file.set_len(bytes.len() as u64))
            .and_then(|()| fs::rename(&self.path, dir.join(name)));
        written.map_err(|e| (self, e))
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        // an unused reservation (committed ones were renamed away: this finds nothing)
        let _ = fs::remove_file(&self.path);
    }
}

/// Why a graveyard file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("does not exist")]
    NotFound,
    /// Exists but is not usable; says why (for a log line).
    #[error(transparent)]
    Unusable(#[from] Unusable),
}

/// Why an existing graveyard file cannot be used; the message completes "<path> ...".
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    #[error("is a symlink; not followed")]
    Symlink,
    #[error("cannot open: {0}")]
    Open(io::Error),
    #[error("cannot stat: {0}")]
    Stat(io::Error),
    #[error("is not a regular file but {0}")]
    NotAFile(&'static str),
    #[error("cannot read: {0}")]
    Read(io::Error),
    #[error("is larger than {} KiB, so not a tombstone", MAX_RECORD / 1024)]
    TooLarge,
    #[error("cannot flock: {0}")]
    Flock(Errno),
}

/// Opens a graveyard file read-only without following a symlink or blocking, and checks
/// on the opened descriptor that it is a regular file.
pub(crate) fn open_regular(path: &Path) -> Result<File, ReadError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(safe_flags())
        .open(path)
        .map_err(|e| match e {
            e if e.kind() == io::ErrorKind::NotFound => ReadError::NotFound,
            e if e.raw_os_error() == Some(nix::libc::ELOOP) => Unusable::Symlink.into(),
            e => Unusable::Open(e).into(),
        })?;
    let meta = f.metadata().map_err(Unusable::Stat)?;
    if !meta.is_file() {
        return Err(Unusable::NotAFile(kind_of(&meta.file_type())).into());
    }
    Ok(f)
}

pub(crate) fn kind_of(t: &fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// Reads a regular file of at most `MAX_RECORD` bytes (see `open_regular`).
pub fn read_record(path: &Path) -> Result<Vec<u8>, ReadError> {
    let f = open_regular(path)?;
    let mut buf = Vec::with_capacity(512);
    f.take(MAX_RECORD + 1)
        .read_to_end(&mut buf)
        .map_err(Unusable::Read)?;
    if buf.len() as u64 > MAX_RECORD {
        return Err(Unusable::TooLarge.into());
    }
    Ok(buf)
}

/// What a tombstone file holds right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Absent,
    Found(Tombstone),
    /// Exists but cannot be used (yet); the string says why (for a log line).
    Bad(String),
}

pub fn read_tombstone(graveyard: &Path, name: &str) -> Lookup {
    match read_record(&graveyard.join(name)) {
        Ok(bytes) => match Tombstone::decode(&bytes) {
            Ok(t) => Lookup::Found(t),
            Err(DecodeError::Empty) => Lookup::Bad("empty file".into()),
            Err(e) => Lookup::Bad(e.to_string()),
        },
        Err(ReadError::NotFound) => Lookup::Absent,
        Err(ReadError::Unusable(why)) => Lookup::Bad(why.to_string()),
    }
}

/// What `stat` says of a file, enough to tell that it changed: identity, size, times,
/// type. Compared between polls so that an idle poll reads nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatKey {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

/// A path prepared once (as a C string) and stat'ed without following a symlink and
/// without allocating: the poll of an idle graveyard costs one lstat per watched file.
#[derive(Debug)]
pub struct Watched {
    path: CString,
}

impl Watched {
    pub fn new(path: &Path) -> Watched {
        // graveyard paths come from the environment and cannot hold a NUL byte
        let path = CString::new(path.as_os_str().as_bytes()).unwrap_or_default();
        Watched { path }
    }

    pub fn stat(&self) -> Option<StatKey> {
        let st = nix::sys::stat::lstat(self.path.as_c_str()).ok()?;
        Some(StatKey {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            mode: st.st_mode,
        })
    }
}

impl Watched {
    /// The identity (device, inode) of the directory at this path, following a symlink:
    /// tells that a graveyard was removed or replaced.
    pub fn dir_identity(&self) -> Option<(u64, u64)> {
        let st = nix::sys::stat::stat(self.path.as_c_str()).ok()?;
        (st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR).then_some((st.st_dev, st.st_ino))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("sexton-files-{}", unique_suffix()));
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
        assert_eq!(names(&d), ["main", "victim"], "no temp files left behind");
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
    fn hostile_entries_are_unreadable_without_blocking() {
        let d = tempdir();
        let fifo = CString::new(d.join("fifo").as_os_str().as_bytes()).unwrap();
        nix::unistd::mkfifo(
            fifo.as_c_str(),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        assert!(matches!(read_tombstone(&d, "fifo"), Lookup::Bad(m) if m.contains("FIFO")));
        fs::create_dir(d.join("dir")).unwrap();
        assert!(matches!(read_tombstone(&d, "dir"), Lookup::Bad(m) if m.contains("directory")));
        let big = File::create(d.join("big")).unwrap();
        big.set_len(128 << 20).unwrap(); // sparse: cheap to make, 128 MiB to read
        assert!(matches!(read_tombstone(&d, "big"), Lookup::Bad(m) if m.contains("larger")));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn reserved_space_records_in_place() {
        let d = tempdir();
        let r = Reserved::new(&d, "main").unwrap();
        assert_eq!(names(&d).len(), 1);
        r.commit(&d, "main", b"{\"Died\":\"x\"}\n").unwrap();
        assert_eq!(fs::read(d.join("main")).unwrap(), b"{\"Died\":\"x\"}\n");
        assert_eq!(names(&d), ["main"]);
        // an unused reservation leaves nothing behind
        drop(Reserved::new(&d, "main").unwrap());
        assert_eq!(names(&d), ["main"]);
        // a directory in the way: the reservation comes back for a fallback
        fs::create_dir(d.join("blocked")).unwrap();
        let (r, e) = Reserved::new(&d, "blocked")
            .unwrap()
            .commit(&d, "blocked", b"x")
            .unwrap_err();
        assert!(e.raw_os_error().is_some(), "{e}");
        drop(r);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn stale_temp_files_of_this_container_only() {
        let d = tempdir();
        for f in [
            ".main.tmp.1.0",
            ".main.tmp.abc",
            ".mainx.tmp.1",
            ".side.tmp.1.0",
            "main",
        ] {
            fs::write(d.join(f), b"").unwrap();
        }
        assert_eq!(remove_stale_temp_files(&d, "main"), 2);
        assert_eq!(names(&d), [".mainx.tmp.1", ".side.tmp.1.0", "main"]);
        // temp names do not repeat
        let a = temp_path(&d, "main");
        assert_ne!(a, temp_path(&d, "main"));
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

    #[test]
    fn stat_keys_change_with_content() {
        let d = tempdir();
        let w = Watched::new(&d.join("main"));
        assert_eq!(w.stat(), None);
        atomic_write(&d, "main", b"a\n", FILE_MODE).unwrap();
        let k1 = w.stat().unwrap();
        assert_eq!(w.stat(), Some(k1), "stable while unchanged");
        atomic_write(&d, "main", b"a\n", FILE_MODE).unwrap();
        assert_ne!(w.stat(), Some(k1), "a rename is a new file");
        fs::remove_dir_all(&d).unwrap();
    }
}
