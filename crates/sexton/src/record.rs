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

pub struct OwnRecord {
    dir: PathBuf,
    name: String,
    /// Held for the supervisor's whole life (the kernel releases them however we die);
    /// more than one once the graveyard was re-created.
    locks: Vec<Flock<File>>,
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

    /// The path of this container's lock file, if it holds one (not where flock is not
    /// supported).
    pub fn lock_path(&self) -> Option<PathBuf> {
        (!self.locks.is_empty()).then(|| self.dir.join(locks::lock_file_name(&self.name)))
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
    /// the lock (a new file, locked, linked; we keep holding the old one too), the
    /// tombstone as it stands, and the reservations.
    pub fn restore(&mut self) -> io::Result<()> {
        files::ensure_graveyard(&self.dir)?;
        let lock_path = self.dir.join(locks::lock_file_name(&self.name));
        // (no lock to put back where flock is not supported)
        if !self.locks.is_empty() && std::fs::symlink_metadata(&lock_path).is_err() {
            if let Some(lock) = locks::relink_lock(&self.dir, &self.name)? {
                self.locks.push(lock);
            }
        }
        if self.tombstone != Tombstone::default() {
            self.write(&self.tombstone.encode())?;
        }
        // reservations whose files went with the old directory are worthless now
        self.death_slot = self.death_slot.take().filter(Reserved::exists);
        self.ready_slot = self.ready_slot.take().filter(Reserved::exists);
        self.reserve()
    }
}
