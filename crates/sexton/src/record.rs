//! This container's own presence in the graveyard: the lifetime lock, the tombstone, and
//! the space reserved for the records still to come (`Ready` after a probe, `Died`).
//!
//! Rules:
//! - the lock is taken before anything else is written, so peers never see a record
//!   without a lock that will tell them when we are gone;
//! - the child is started only after `Born` is durably in the graveyard (the caller
//!   checks `record_birth`);
//! - the death record always has its space: reserved before the child starts;
//! - a graveyard removed under our feet is re-created with our lock and record in it.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use nix::fcntl::Flock;
use tracing::{debug, warn};

use crate::files::{self, FILE_MODE, Reserved};
use crate::locks::{self, Acquired};
use crate::setup_error::SetupError;
use sexton_core::machine::{Lock, Outcome};
use sexton_core::tombstone::Tombstone;

/// How long to wait for our own lock before concluding that another live container uses
/// the same name (a peer's probe holds it only for an instant).
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// How many times the lock file is put back after it was swept away (the graveyard
/// emptied or re-created). Each costs a descriptor for the container's life: a peer's lock
/// waiter may block on a superseded lock, and a superseded lock let go would read to it as
/// this container's death (older sexton versions copied into other images take any
/// release for one; and a peer cannot tell a lock put back from a restarted container's).
/// Past this many the lock is not put back: peers keep the waiters they have (every lock
/// stays held), and a peer that looks later relies on the tombstone alone, as for a
/// kubexit container. A bound, so that a cleanup sweeping the graveyard every second
/// cannot exhaust the descriptors that recording a death needs.
const LOCK_RELINKS_MAX: usize = 16;

pub struct OwnRecord {
    dir: PathBuf,
    name: String,
    /// Held for the supervisor's whole life (the kernel releases them however we die);
    /// more than one once the graveyard was re-created, at most `LOCK_RELINKS_MAX` + 1.
    locks: Vec<Flock<File>>,
    /// The lock was swept away once too often and is no longer put back.
    lock_abandoned: bool,
    tombstone: Tombstone,
    ready_slot: Option<Reserved>,
    death_slot: Option<Reserved>,
}

impl OwnRecord {
    /// Creates the graveyard if needed, takes the lock, removes what a crashed earlier
    /// incarnation left, and reserves space for the records to come (`Ready`, `Died`). An
    /// error is one line naming the setting and the fix; nothing was started.
    pub fn open(dir: &Path, name: &str) -> Result<OwnRecord, SetupError> {
        files::ensure_graveyard(dir).map_err(|source| SetupError::CreateGraveyard {
            dir: dir.to_path_buf(),
            source,
        })?;
        let lock_path = dir.join(locks::lock_file_name(name));
        let locks = match locks::acquire_lock(dir, name, LOCK_WAIT) {
            Ok(Acquired::Held(l)) => vec![l],
            Ok(Acquired::Busy) => {
                return Err(SetupError::NameInUse {
                    name: name.to_string(),
                    lock: lock_path,
                });
            }
            Ok(Acquired::Unsupported(e)) => {
                warn!(
                    "flock is not supported on {} ({e}): a container killed before recording its death cannot be detected, and a second container with the same name is not refused; only tombstones count",
                    dir.display()
                );
                vec![]
            }
            Err(source) => {
                return Err(SetupError::Lock {
                    dir: dir.to_path_buf(),
                    lock: lock_path,
                    source,
                });
            }
        };
        let stale = files::remove_stale_temp_files(dir, name);
        if stale > 0 {
            debug!(
                count = stale,
                "removed temp files left by an earlier incarnation"
            );
        }
        let mut record = OwnRecord {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            locks,
            lock_abandoned: false,
            tombstone: Tombstone::default(),
            ready_slot: None,
            death_slot: None,
        };
        record.reserve().map_err(|source| SetupError::Reserve {
            dir: dir.to_path_buf(),
            source,
        })?;
        Ok(record)
    }

    /// Reserves the records still to come that have no space yet.
    fn reserve(&mut self) -> io::Result<()> {
        if self.death_slot.is_none() && self.tombstone.died.is_none() {
            self.death_slot = Some(Reserved::new(&self.dir, &self.name)?);
        }
        if self.ready_slot.is_none() && self.tombstone.ready.is_none() {
            self.ready_slot = Some(Reserved::new(&self.dir, &self.name)?);
        }
        Ok(())
    }

    /// flock must mean something on this filesystem for lock-based death detection: our
    /// own lock must look held through a second descriptor. If it does not, a live peer's
    /// lock would look free too (a false death), so the detection is switched off.
    pub fn locks_work(&self) -> bool {
        if self.locks.is_empty() {
            return false; // not supported here: already said at open
        }
        let works = matches!(locks::lock_state(&self.dir, &self.name), Ok(Lock::Held));
        if !works {
            warn!(
                "flock is not effective on {}: a container killed before recording its death cannot be detected; only tombstones count",
                self.dir.display()
            );
        }
        works
    }

    /// The path of this container's lock file, if it holds one there (not where flock is
    /// not supported, nor once the lock is no longer put back).
    pub fn lock_path(&self) -> Option<PathBuf> {
        (!self.locks.is_empty() && !self.lock_abandoned)
            .then(|| self.dir.join(locks::lock_file_name(&self.name)))
    }

    /// The path of this container's record (tombstone), once it has one.
    pub fn record_path(&self) -> Option<PathBuf> {
        (self.tombstone != Tombstone::default()).then(|| self.dir.join(&self.name))
    }

    /// Whether the lock file at its path is still the one we hold (a graveyard removed or
    /// emptied took it away). True where there is none to check.
    pub fn lock_in_place(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let (Some(path), Some(lock)) = (self.lock_path(), self.locks.last()) else {
            return true;
        };
        match (std::fs::symlink_metadata(path), lock.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    /// Records `Born` in a fresh record (complete and visible before the child starts): a
    /// restarted container replaces its old tombstone. The child must not be started if
    /// this fails. `Ready` comes after the child was started (`record_ready`): a peer
    /// waiting for it must never see a container ready whose command then turns out not
    /// to exist.
    pub fn record_birth(&mut self) -> io::Result<()> {
        self.tombstone = Tombstone {
            born: Some(Utc::now()),
            ..Tombstone::default()
        };
        self.write(&self.tombstone.encode())
    }

    /// Records `Ready` (the child was started, or its probe passed), in the space
    /// reserved for it.
    pub fn record_ready(&mut self) -> io::Result<bool> {
        let t = &mut self.tombstone;
        if t.born.is_none() || t.ready.is_some() || t.died.is_some() {
            return Ok(false);
        }
        t.ready = Some(Utc::now());
        let slot = self.ready_slot.take();
        self.write_reserved(slot).map(|()| true)
    }

    /// Records how often the child was started again. `Born` and `Ready` stay: peers see
    /// the container alive across restarts (the lock is the supervisor's, not the child's).
    pub fn record_restart(&mut self, count: u32) -> io::Result<()> {
        self.tombstone.restarts = Some(count);
        self.write(&self.tombstone.encode())
    }

    /// Records the death, in the space reserved for it.
    pub fn record_death(&mut self, o: &Outcome) -> io::Result<()> {
        let t = &mut self.tombstone;
        t.died = Some(Utc::now());
        t.exit_code = Some(o.exit_code);
        t.signal = o.child_signal.map(|s| s.name());
        t.reason = Some(o.reason.as_str().to_string());
        t.death_dep = o.death_dep.clone();
        let slot = self.death_slot.take();
        self.write_reserved(slot)
    }

    /// Writes the current tombstone into `slot` if there is one; if that fails (the
    /// graveyard was removed with the reservation in it), re-creates the graveyard and
    /// writes it the ordinary way.
    fn write_reserved(&mut self, slot: Option<Reserved>) -> io::Result<()> {
        let bytes = self.tombstone.encode();
        if let Some(slot) = slot {
            match slot.commit(&self.dir, &self.name, &bytes) {
                Ok(()) => return Ok(()),
                Err((_slot, e)) if e.kind() == io::ErrorKind::NotFound => {
                    warn!(
                        "the graveyard {} is gone; re-creating it",
                        self.dir.display()
                    );
                    self.restore()?;
                }
                // the caller reports it if the ordinary write fails too
                Err((_slot, e)) => {
                    debug!("cannot write the reserved record ({e}); writing a new file")
                }
            }
        }
        self.write(&bytes)
    }

    fn write(&self, bytes: &[u8]) -> io::Result<()> {
        match files::atomic_write(&self.dir, &self.name, bytes, FILE_MODE) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                files::ensure_graveyard(&self.dir)?;
                files::atomic_write(&self.dir, &self.name, bytes, FILE_MODE)
            }
            other => other,
        }
    }

    /// Whether something is at this container's record's path, once it has one: only a
    /// record deleted or moved away is put back. Whatever a peer put there instead is the
    /// peers' to judge, and a directory there could not be replaced: a check of the file's
    /// type would make every poll try again, and fail again.
    pub fn record_in_place(&self) -> bool {
        self.tombstone == Tombstone::default()
            || std::fs::symlink_metadata(self.dir.join(&self.name)).is_ok()
    }

    /// After the graveyard was removed: re-creates it and puts back what peers rely on,
    /// the lock (a new file, locked, linked; we keep holding the old ones too, up to
    /// `LOCK_RELINKS_MAX`), the tombstone as it stands if it went, and the reservations.
    pub fn restore(&mut self) -> io::Result<()> {
        files::ensure_graveyard(&self.dir)?;
        // (no lock to put back where flock is not supported, or once abandoned)
        if let Some(lock_path) = self.lock_path() {
            if std::fs::symlink_metadata(&lock_path).is_err() {
                self.relink_lock(&lock_path)?;
            }
        }
        // (only if it went: rewriting a record in place would replace the watched file, an
        // event that finds the graveyard lost again while a foreign file holds the lock's
        // path, and restores it again: PID 1 in a busy loop)
        if !self.record_in_place() {
            self.write(&self.tombstone.encode())?;
        }
        // reservations whose files went with the old directory are worthless now
        self.death_slot = self.death_slot.take().filter(Reserved::exists);
        self.ready_slot = self.ready_slot.take().filter(Reserved::exists);
        self.reserve()
    }

    /// Puts a new lock at `lock_path`, or abandons the lock once it was put back
    /// `LOCK_RELINKS_MAX` times (said once, with the consequence).
    fn relink_lock(&mut self, lock_path: &Path) -> io::Result<()> {
        if self.locks.len() > LOCK_RELINKS_MAX {
            warn!(
                "the lock file {} was deleted {LOCK_RELINKS_MAX} times while this container ran; it is not put back again (each costs an open file for good): peers that look from now on see this container through its tombstone alone, and cannot see it killed without a record. Find what deletes files in the graveyard",
                lock_path.display()
            );
            self.lock_abandoned = true;
            return Ok(());
        }
        if let Some(lock) = locks::relink_lock(&self.dir, &self.name)? {
            self.locks.push(lock);
        }
        Ok(())
    }
}
