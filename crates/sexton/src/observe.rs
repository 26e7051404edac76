//! Observing dependencies in the graveyard: their tombstone and lock turned into a
//! `DepState` (by `core::classify`), problems logged once each, a thread blocked on each
//! live dependency's lock, and a poll that costs one `lstat` per file while nothing
//! changes.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::events::{Event, Poster};
use crate::files::{self, Lookup, StatKey, Watched};
use crate::locks;
use sexton_core::machine::{DepState, Lock, Record, classify};

pub struct Observer {
    dir: PathBuf,
    /// flock works on this filesystem (see `OwnRecord::locks_work`).
    locks_work: bool,
    deps: BTreeMap<String, Dep>,
    poster: Poster,
}

struct Dep {
    tombstone: Watched,
    lock: Watched,
    /// Stat of the tombstone and the lock file before the last read.
    seen: Option<(Option<StatKey>, Option<StatKey>)>,
    /// The last tombstone problem logged, so each is logged once.
    bad: Option<String>,
    /// The last lock problem logged.
    lock_problem: Option<String>,
    /// The lock was held at the last read.
    lock_held: bool,
    /// The descriptor that found it held, for the waiter to block on.
    held: Option<File>,
    /// A thread is blocked on the lock.
    waiter: bool,
    /// No waiter thread could be started (logged once until one starts again).
    waiter_unstartable: bool,
    /// A waiter failed to block on this lock: none is armed again, the poll covers it.
    waiter_broken: bool,
    /// Its death without a record was announced.
    announced: bool,
}

impl Observer {
    pub fn new(dir: &Path, names: &[String], locks_work: bool, poster: Poster) -> Observer {
        let deps = names
            .iter()
            .map(|n| {
                let dep = Dep {
                    tombstone: Watched::new(&dir.join(n)),
                    lock: Watched::new(&dir.join(locks::lock_file_name(n))),
                    seen: None,
                    bad: None,
                    lock_problem: None,
                    lock_held: false,
                    held: None,
                    waiter: false,
                    waiter_unstartable: false,
                    waiter_broken: false,
                    announced: false,
                };
                (n.clone(), dep)
            })
            .collect();
        Observer {
            dir: dir.to_path_buf(),
            locks_work,
            deps,
            poster,
        }
    }

    /// Reads `name` now. `released`: its lock waiter saw the lock released, which proves
    /// the death whatever the lock says now (a restarted incarnation may hold it again).
    pub fn read(&mut self, name: &str, released: bool) -> DepState {
        let (dir, locks_work) = (self.dir.clone(), self.locks_work);
        let Some(dep) = self.deps.get_mut(name) else {
            return DepState::Absent;
        };
        dep.seen = Some((dep.tombstone.stat(), dep.lock.stat()));
        if released {
            dep.waiter = false;
        }
        let mut lookup = files::read_tombstone(&dir, name);
        let mut lock_read = Lock::Unknown;
        let mut state = classify(record_of(&lookup), || {
            lock_read = if released {
                Lock::Free
            } else {
                dep.probe_lock(&dir, name)
            };
            // a free lock says nothing where flock does not work
            match lock_read {
                Lock::Free if !locks_work => Lock::Unknown,
                l => l,
            }
        });
        // The tombstone was read before the lock was probed: a dependency that recorded its
        // death and exited in between looks killed without a record (and its exit code
        // lost). Its lock is free now, so any death it recorded is in the tombstone: read
        // it once more. (A window of microseconds; under qemu-user, where scripts/test.sh
        // runs the arm64 build, wide enough to be hit.)
        if !released && state == (DepState::Dead { exit_code: None }) {
            lookup = files::read_tombstone(&dir, name);
            state = classify(record_of(&lookup), || Lock::Free);
        }
        dep.lock_held = lock_read == Lock::Held;
        // Keep the descriptor only for a waiter to come: one of an earlier read is not
        // what holds now, and where a waiter blocks already nobody would use it (it
        // would stay open until the next read).
        if !dep.lock_held || dep.waiter {
            dep.held = None;
        }
        dep.log(name, &lookup, &state);
        state
    }

    /// Whether a thread should block on `name`'s lock: it was held at the last read and
    /// nobody waits on it yet.
    pub fn wants_waiter(&self, name: &str) -> bool {
        self.locks_work
            && self
                .deps
                .get(name)
                .is_some_and(|d| d.lock_held && d.held.is_some() && !d.waiter && !d.waiter_broken)
    }

    /// Arms a thread blocked on a live dependency's lock: it wakes the moment the lock is
    /// released, however the holder died. Exact, and independent of inotify (the kernel
    /// queues the close event *before* it releases the flock, so an event-driven probe
    /// alone could still see the lock held). The thread blocks on the very descriptor
    /// the last read found held, and says so if it cannot block (`Event::LockWaitFailed`):
    /// a dependency believed waited for while nobody waits would be watched by nothing.
    pub fn arm_waiter(&mut self, name: &str) {
        let Some(dep) = self.deps.get_mut(name) else {
            return;
        };
        let Some(file) = dep.held.take() else {
            return;
        };
        let (dep_name, poster) = (name.to_string(), self.poster.clone());
        let spawned = std::thread::Builder::new()
            .name("lock-waiter".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                poster.post(match locks::wait_released(file) {
                    Ok(()) => Event::LockReleased(dep_name),
                    Err(e) => Event::LockWaitFailed(dep_name, e.to_string()),
                });
            });
        match spawned {
            Ok(_) => {
                dep.waiter = true;
                if std::mem::take(&mut dep.waiter_unstartable) {
                    info!(dep = name, "lock waiter started after all");
                }
            }
            // said once, and again only after a waiter could be started in between
            // (each poll retries: a pids limit may be lifted)
            Err(e) if !dep.waiter_unstartable => {
                warn!(
                    dep = name,
                    "cannot start a lock waiter ({e}); relying on events and polling"
                );
                dep.waiter_unstartable = true;
            }
            Err(_) => {}
        }
    }

    /// A waiter could not block on `name`'s lock: the dependency is polled from now on.
    pub fn waiter_failed(&mut self, name: &str, why: &str) {
        if let Some(dep) = self.deps.get_mut(name) {
            warn!(
                dep = name,
                "cannot wait on the lock of {name:?} ({why}); polling it instead"
            );
            dep.waiter = false;
            dep.waiter_broken = true;
        }
    }

    /// The poll: dependencies whose files changed since their last read (one lstat each
    /// for the tombstone and the lock), and those whose held lock nobody waits on (its
    /// release changes no stat).
    pub fn changed(&self) -> Vec<String> {
        self.deps
            .iter()
            .filter(|(_, d)| {
                d.seen != Some((d.tombstone.stat(), d.lock.stat())) || (d.lock_held && !d.waiter)
            })
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Whether a dependency that `cares` has no lock file (as of its last read; one never
    /// read counts): the watch must then see its lock being linked, or its kubexit
    /// tombstone written in place.
    pub fn any_unlocked(&self, cares: impl Fn(&str) -> bool) -> bool {
        self.deps
            .iter()
            .any(|(n, d)| cares(n) && d.seen.is_none_or(|(_, lock)| lock.is_none()))
    }

    /// Whether a dependency that `cares` has no thread blocked on its lock: its death
    /// could then go unnoticed where inotify is silent, without the poll.
    pub fn any_unwaited(&self, cares: impl Fn(&str) -> bool) -> bool {
        self.deps
            .iter()
            .any(|(n, d)| cares(n) && !(self.locks_work && d.waiter))
    }

    /// Forgets what the last reads saw (the graveyard was re-created): the next poll
    /// reads everything.
    pub fn forget(&mut self) {
        for d in self.deps.values_mut() {
            d.seen = None;
        }
    }
}

/// What a tombstone lookup says, for `classify`.
/// A container's state read once, outside the loop's watch (the containers the shutdown
/// hooks wait for, read when this one has died). As `Observer::read`: the tombstone, then
/// the lock only if the record does not decide (a free lock says nothing where flock does
/// not work), then the tombstone again if the lock says dead without a record.
pub fn read_once(dir: &Path, name: &str, locks_work: bool) -> DepState {
    let lock = || match locks::lock_state(dir, name) {
        Ok(Lock::Free) if !locks_work => Lock::Unknown,
        Ok(l) => l,
        Err(_) => Lock::Unknown,
    };
    let state = classify(record_of(&files::read_tombstone(dir, name)), lock);
    if state == (DepState::Dead { exit_code: None }) {
        return classify(record_of(&files::read_tombstone(dir, name)), || Lock::Free);
    }
    state
}

fn record_of(lookup: &Lookup) -> Record<'_> {
    match lookup {
        Lookup::Absent => Record::Absent,
        Lookup::Found(t) => Record::Found(t),
        Lookup::Bad(_) => Record::Unreadable,
    }
}

impl Dep {
    /// Probes the lock, keeping the descriptor if it is held; a lock file that cannot be
    /// probed is logged once, with the consequence.
    fn probe_lock(&mut self, dir: &Path, name: &str) -> Lock {
        self.held = None;
        match locks::probe(dir, name) {
            Ok(probe) => {
                self.lock_problem = None;
                let lock = probe.lock();
                if let locks::Probe::Held(f) = probe {
                    self.held = Some(f);
                }
                lock
            }
            Err(why) => {
                // warned once per distinct problem
                let why = why.to_string();
                if self.lock_problem.as_deref() != Some(&why) {
                    warn!(
                        dep = name,
                        "cannot probe the lock {} of {name:?} ({why}): if its whole container is killed before it records its death, that death cannot be seen",
                        dir.join(locks::lock_file_name(name)).display()
                    );
                    self.lock_problem = Some(why);
                }
                Lock::Unknown
            }
        }
    }

    /// Logs what deserves it, once: an unusable tombstone, a death seen through the lock.
    fn log(&mut self, name: &str, lookup: &Lookup, state: &DepState) {
        match lookup {
            Lookup::Bad(why) if self.bad.as_deref() != Some(why) => {
                warn!(
                    dep = name,
                    "tombstone of {name:?} is not usable ({why}); treating it as not dead and re-reading it when it changes"
                );
                self.bad = Some(why.clone());
            }
            Lookup::Bad(_) => {}
            _ => self.bad = None,
        }
        let recorded = matches!(lookup, Lookup::Found(t) if t.is_dead());
        if *state == (DepState::Dead { exit_code: None }) && !recorded && !self.announced {
            // its supervisor's lock is free and no death was recorded: the whole
            // container was killed (OOM, SIGKILL after the grace period), maybe before
            // it was even born
            warn!(
                dep = name,
                "{name:?} is gone (its supervisor's lock released, no death recorded): treating it as dead, exit code unknown"
            );
            self.announced = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::{Acquired, acquire_lock};
    use nix::fcntl::Flock;
    use std::fs::File;
    use std::sync::mpsc::Receiver;
    use std::time::Duration;

    /// A graveyard where `main` is born and holds its lock (held here), and an observer of
    /// `main` that read it alive once.
    fn main_alive_and_read() -> (PathBuf, Flock<File>, Observer, Receiver<Event>) {
        let d = std::env::temp_dir().join(format!("sexton-observe-{}", files::unique_suffix()));
        std::fs::create_dir_all(&d).unwrap();
        let Acquired::Held(held) = acquire_lock(&d, "main", Duration::ZERO).unwrap() else {
            panic!("lock not taken");
        };
        std::fs::write(d.join("main"), "{\"Born\":\"2026-01-01T00:00:00Z\"}\n").unwrap();
        let (poster, events) = Poster::new().unwrap();
        let mut o = Observer::new(&d, &["main".to_string()], true, poster);
        assert_eq!(o.read("main", false), DepState::Alive { ready: false });
        (d, held, o, events)
    }

    /// The waiter blocks on the lock the read found held, even when the graveyard is
    /// removed between the read and the waiter thread's start. (It used to open the path
    /// again on its own thread: under load that open came after the removal, found
    /// nothing, and left a dependency believed waited for watched by nobody: a sidecar
    /// that never stopped, faults_graveyard's graveyard_removed_while_running.)
    #[test]
    fn waiter_blocks_on_the_lock_it_read_even_after_the_graveyard_went() {
        let (d, held, mut o, events) = main_alive_and_read();
        assert!(o.wants_waiter("main"));
        std::fs::remove_dir_all(&d).unwrap();
        o.arm_waiter("main");
        assert!(!o.any_unwaited(|_| true), "the waiter is armed");
        assert!(
            events.recv_timeout(Duration::from_millis(200)).is_err(),
            "nothing happened yet"
        );
        drop(held);
        match events.recv_timeout(Duration::from_secs(10)) {
            Ok(Event::LockReleased(n)) => assert_eq!(n, "main"),
            other => panic!("expected the release of main's lock, got {other:?}"),
        }
    }

    /// A read while a waiter blocks on the lock keeps no descriptor of it: nobody would
    /// block on that one, and it would stay open until the next read (the re-read of
    /// every dependency after the graveyard was swept left one behind each time).
    #[test]
    fn no_descriptor_kept_while_a_waiter_blocks() {
        let (d, held, mut o, _events) = main_alive_and_read();
        o.arm_waiter("main");
        assert!(!o.any_unwaited(|_| true), "the waiter is armed");
        assert_eq!(o.read("main", false), DepState::Alive { ready: false });
        assert!(
            o.deps["main"].held.is_none(),
            "a descriptor kept beside the waiter"
        );
        drop(held);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A lock that was held at one read and is not at the next leaves no descriptor behind
    /// for a waiter (it would block on a file that no longer says anything).
    #[test]
    fn no_waiter_without_a_held_lock() {
        let (d, held, mut o, _events) = main_alive_and_read();
        drop(held);
        assert_eq!(o.read("main", false), DepState::Dead { exit_code: None });
        assert!(!o.wants_waiter("main"));
        o.arm_waiter("main");
        assert!(o.any_unwaited(|_| true), "no waiter on a free lock");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
