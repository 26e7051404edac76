//! The graveyard as the loop sees it: the watch (narrowed to what the dependencies need)
//! and the poll, each dependency read again when its files change, and a graveyard that was
//! removed, replaced or emptied put back with this container's lock and record.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use tracing::{debug, error, info, warn};

use super::Supervisor;
use super::settings::Settings;
use crate::locks;
use crate::record::OwnRecord;
use crate::setup_error::SetupError;
use crate::watch::{GraveyardWatcher, Interest};
use sexton_core::config::WatchMode;
use sexton_core::duration::format_go_duration;
use sexton_core::machine::Action;

/// How often a graveyard lost again and again is said (`graveyard_gone`).
const LOSS_SAID_EVERY: Duration = Duration::from_secs(60);

/// Watches what is now at the paths of our lock file (if we hold one there) and record (if
/// we have one); each path with its outcome.
fn watch_own(
    w: &mut GraveyardWatcher,
    record: &OwnRecord,
) -> Vec<(std::path::PathBuf, nix::Result<()>)> {
    let lock = record.lock_path().map(|l| (w.watch_own_lock(&l), l));
    let own = record.record_path().map(|r| (w.watch_own_record(&r), r));
    lock.into_iter()
        .chain(own)
        .map(|(res, f)| (f, res))
        .collect()
}

impl Supervisor {
    /// Watch first, then scan (in `run_loop`): a death between the two is seen by the
    /// watch, a death before both by the scan (kubexit bug #8 lost it).
    pub(super) fn start_watch(
        settings: &Settings,
        has_deps: bool,
    ) -> Result<(Option<GraveyardWatcher>, Option<Duration>), SetupError> {
        let dir = &settings.graveyard;
        let (watcher, poll) = match settings.watch {
            // nothing to watch (a main container): no inotify instance, no thread, no poll
            _ if !has_deps => (None, None),
            WatchMode::Poll => (None, Some(settings.poll_interval)),
            WatchMode::Inotify => match crate::watch::watch(dir) {
                Ok(w) => (Some(w), None),
                Err(source) => {
                    return Err(SetupError::Inotify {
                        dir: dir.clone(),
                        source,
                    });
                }
            },
            // inotify, plus a poll as a safety net: some sandboxes accept the watch and then
            // deliver nothing for writes made by other containers.
            WatchMode::Auto => match crate::watch::watch(dir) {
                Ok(w) => (Some(w), Some(settings.poll_interval)),
                Err(e) => {
                    warn!(
                        "cannot watch {} with inotify ({e}); polling every {} instead",
                        dir.display(),
                        format_go_duration(settings.poll_interval)
                    );
                    (None, Some(settings.poll_interval))
                }
            },
        };
        if has_deps {
            info!(
                mode = settings.watch.as_str(),
                inotify = watcher.is_some(),
                poll = %poll.map(format_go_duration).unwrap_or_else(|| "off".into()),
                "watching the graveyard"
            );
        }
        Ok((watcher, poll))
    }

    /// The poll runs only where a change could otherwise be missed: always in mode
    /// `poll` (or without inotify); in mode `auto` while the child is not started yet
    /// (readiness of birth dependencies) or while a dependency that matters has no thread
    /// blocked on its lock (a kubexit one, one not started yet). A sidecar whose death
    /// dependencies all hold their locks does not wake at all while idle. Returns when
    /// the next poll is due.
    pub(super) fn schedule_poll(&self, next: Option<Instant>) -> Option<Instant> {
        let interval = self.poll?;
        let core = &self.core;
        let needed = self.always_poll
            || core.before_start()
            || self.observer.any_unwaited(|d| core.wants_lock_watch(d));
        needed.then(|| next.unwrap_or_else(|| Instant::now() + interval))
    }

    /// Keeps the watch as narrow as the dependencies allow (see `watch::Interest`). When
    /// it grows, what it did not report until now is read again.
    pub(super) fn update_interest(&mut self, now: Instant) -> Vec<Action> {
        let Some(w) = &mut self.watcher else {
            return vec![];
        };
        let core = &self.core;
        let interest = Interest {
            unlocked_deps: self.observer.any_unlocked(|d| core.wants_lock_watch(d)),
        };
        match w.set_interest(interest) {
            Ok(false) => vec![],
            Ok(true) => self.rescan(now),
            Err(e) => {
                self.fall_back_to_poll(&format!("cannot change the graveyard watch ({e})"));
                vec![]
            }
        }
    }

    /// Drains the graveyard watch: re-creates a removed graveyard, re-reads what changed.
    pub(super) fn graveyard_events(&mut self, now: Instant) -> Vec<Action> {
        let Some(w) = &mut self.watcher else {
            return vec![];
        };
        let core = &self.core;
        let changes = w.drain(|file| core.is_watched(locks::owner_of(file)));
        let mut actions = vec![];
        if changes.dir_gone || (changes.own_files && !self.follow_own_files()) {
            actions.extend(self.graveyard_gone(now));
        } else if changes.overflow {
            warn!("graveyard watch lost events; re-reading dependencies");
            actions.extend(self.rescan(now));
        }
        for file in &changes.names {
            actions.extend(self.observe(locks::owner_of(file), false, now));
        }
        actions
    }

    /// The poll (modes `poll` and `auto`): the graveyard still there, and the
    /// dependencies whose files changed since they were last read.
    pub(super) fn poll_graveyard(&mut self, now: Instant) -> Vec<Action> {
        if self.presence_lost() {
            return self.graveyard_gone(now);
        }
        let mut actions = vec![];
        for dep in self.observer.changed() {
            actions.extend(self.observe(&dep, false, now));
        }
        actions
    }

    /// Something happened to our lock file or record: watch the ones now at their paths
    /// (our own record may have put a new lock there already, when a write of ours found
    /// the graveyard gone: record.rs restores it on its own; and each write of our record
    /// replaces it), then check that we are still in the graveyard. In that order, an
    /// unlink after the watch raises an event and one before it fails the check. `false`:
    /// our presence is lost. A file that vanished before its watch (ENOENT) counts as lost;
    /// a watch refused for want of resources (ENOSPC: the user's inotify watches are used
    /// up; ENOMEM) says nothing about the graveyard, so the poll takes over instead.
    pub(super) fn follow_own_files(&mut self) -> bool {
        let vanished = self.watch_own_files();
        let lost = self.presence_lost();
        debug!(vanished, lost, "own lock file or record changed");
        !vanished && !lost
    }

    /// Watches our lock file and record again (new ones are in place: at the start, and
    /// once the graveyard is re-created); the poll covers what cannot be watched, one that
    /// is gone already included.
    pub(super) fn rewatch_own_files(&mut self) {
        if self.watch_own_files() {
            self.fall_back_to_poll("own lock file or record gone as it was to be watched");
        }
    }

    /// Watches what is now at the paths of our lock file and record, through which a
    /// removed or emptied graveyard is noticed (see `watch.rs`); what cannot be watched
    /// (inotify watches used up: ENOSPC) is left to the poll. Whether one of them is gone
    /// (ENOENT).
    pub(super) fn watch_own_files(&mut self) -> bool {
        let Some(w) = &mut self.watcher else {
            return false;
        };
        let mut vanished = false;
        let mut refused = None;
        for (file, watched) in watch_own(w, &self.record) {
            match watched {
                Ok(()) => {}
                Err(Errno::ENOENT) => vanished = true,
                Err(e) => refused = Some(format!("cannot watch {} ({e})", file.display())),
            }
        }
        if let Some(why) = refused {
            self.fall_back_to_poll(&why);
        }
        vanished
    }

    /// The poll takes over, for the container's life and in every watch mode, what inotify
    /// does not see (said once: a file replaced again and again would say it each time).
    /// Before, in mode `inotify` a refused watch said "polling" and set no poll.
    pub(super) fn fall_back_to_poll(&mut self, why: &str) {
        if !self.always_poll {
            warn!(
                "{why}; polling every {} to notice what inotify does not",
                format_go_duration(self.settings.poll_interval)
            );
        }
        self.poll = Some(self.settings.poll_interval);
        self.always_poll = true;
    }

    /// Whether the graveyard is no longer the one we are in: removed, replaced, or emptied
    /// (our lock file went with it, or our record did).
    pub(super) fn presence_lost(&self) -> bool {
        self.graveyard.dir_identity() != self.graveyard_id
            || !self.record.lock_in_place()
            || !self.record.record_in_place()
    }

    /// The graveyard was removed, replaced or emptied: re-create it with our lock and
    /// record, watch the new directory and lock, and read every dependency again. A
    /// dependency seen dead stays dead (the core's rule), so wiping its tombstone changes
    /// nothing.
    pub(super) fn graveyard_gone(&mut self, now: Instant) -> Vec<Action> {
        let say = self
            .loss_said
            .is_none_or(|t| now.duration_since(t) >= LOSS_SAID_EVERY);
        if say {
            let again = std::mem::take(&mut self.losses_unsaid);
            let again = match again {
                0 => String::new(),
                n => format!(" (again: {n} times since this was last said)"),
            };
            warn!(
                "the graveyard {} was removed, replaced or emptied{again}; re-creating it and putting this container's lock and record back",
                self.settings.graveyard.display()
            );
            self.loss_said = Some(now);
        } else {
            self.losses_unsaid += 1;
            debug!("the graveyard was lost again; re-creating it");
        }
        if let Err(e) = self.record.restore() {
            if say {
                error!(
                    "cannot re-create the graveyard {}: {e}; peers cannot see this container until it is back",
                    self.settings.graveyard.display()
                );
            }
        }
        if let Some(w) = &mut self.watcher {
            if let Err(e) = w.rewatch() {
                let why = format!("cannot watch the re-created graveyard ({e})");
                self.fall_back_to_poll(&why);
            }
        }
        self.rewatch_own_files();
        self.graveyard_id = self.graveyard.dir_identity();
        self.observer.forget();
        self.rescan(now)
    }

    pub(super) fn rescan(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = vec![];
        for dep in self.core.watched() {
            actions.extend(self.observe(&dep, false, now));
        }
        actions
    }

    /// Reads a dependency and tells the core; arms a lock waiter where it helps.
    pub(super) fn observe(&mut self, name: &str, released: bool, now: Instant) -> Vec<Action> {
        if !self.core.is_watched(name) {
            return vec![];
        }
        let state = self.observer.read(name, released);
        if self.core.wants_lock_watch(name) && self.observer.wants_waiter(name) {
            self.observer.arm_waiter(name);
        }
        let before = self.core.dep_state(name).clone();
        let actions = self.core.on_dep(name, state, now);
        let after = self.core.dep_state(name);
        if &before != after {
            debug!(dep = name, state = ?after, "dependency state");
        }
        actions
    }
}
