//! The supervisor's event loop: feeds observations into the pure `Core` and carries out
//! its actions. One thread waits in `ppoll` on a signalfd (the handled signals are blocked
//! and read from it), the graveyard's inotify descriptor and an eventfd through which the
//! few helper threads (readiness probe, lock waiters, API watch) post events. No hop
//! between threads on the path from a death to the signal sent.

use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use tracing::{debug, error, info, warn};

use crate::events::{Event, Poster};
use crate::files::Watched;
use crate::locks;
use crate::observe::Observer;
use crate::process::{self, Child};
use crate::record::OwnRecord;
use crate::setup_error::SetupError;
use crate::sigfd::Signals;
use crate::watch::{GraveyardWatcher, Interest};
use sexton_core::config::{Config, DeathDepsMode, DeathTrigger, WatchMode};
use sexton_core::duration::format_go_duration;
use sexton_core::machine::{
    Action, ChildStatus, Core, DepState, Outcome, Phase, Policy, Reason, describe_status,
};
use sexton_core::pre_stop::PreStop;
use sexton_core::signal::Signal;

pub struct Supervisor {
    cfg: Config,
    core: Core,
    child: Option<Child>,
    /// The preStop hook's process (an `exec` hook), while it runs.
    hook: Option<Child>,
    record: OwnRecord,
    observer: Observer,
    signals: Signals,
    watcher: Option<GraveyardWatcher>,
    /// The graveyard directory as last seen, to notice that it was removed or replaced.
    graveyard: Watched,
    graveyard_id: Option<(u64, u64)>,
    /// The poll interval (modes `poll` and `auto`).
    poll: Option<Duration>,
    /// Poll even when the lock waiters and inotify cover every dependency (mode `poll`,
    /// or inotify not available).
    always_poll: bool,
    poster: Poster,
    events: mpsc::Receiver<Event>,
    probe_stop: Arc<AtomicBool>,
    /// When the graveyard's loss was last said, and how many losses since went unsaid. One
    /// that cannot be put right (a foreign file at this container's lock path) is found
    /// again at every poll: said once a minute, not every second for the pod's life.
    loss_said: Option<Instant>,
    losses_unsaid: u32,
}

/// How often a graveyard lost again and again is said (`graveyard_gone`).
const LOSS_SAID_EVERY: Duration = Duration::from_secs(60);

/// Sets up the graveyard and its watch, then supervises until the container is to end.
/// Returns the exit code. `signals` were blocked before any thread existed (threads
/// inherit the mask: `cli.rs`).
pub fn run(cfg: Config, signals: Signals) -> Result<i32, SetupError> {
    let (poster, events) = Poster::new()?;
    let pid1 = std::process::id() == 1;
    if !pid1 {
        if let Err(e) = process::become_subreaper() {
            warn!(
                "cannot become a child subreaper ({e}); orphans of the child will not be reaped by sexton"
            );
        }
    }
    let record = OwnRecord::open(&cfg.graveyard, &cfg.name)?;
    let locks_work = record.locks_work();
    let core = Core::new(Policy::from_config(&cfg, pid1));
    let watched = core.watched();
    let (watcher, poll) = start_watch(&cfg, !watched.is_empty())?;
    let graveyard = Watched::new(&cfg.graveyard);
    let always_poll = watcher.is_none();
    let mut sup = Supervisor {
        observer: Observer::new(&cfg.graveyard, &watched, locks_work, poster.clone()),
        graveyard_id: graveyard.dir_identity(),
        graveyard,
        core,
        cfg,
        child: None,
        hook: None,
        record,
        signals,
        watcher,
        poll,
        always_poll,
        poster,
        events,
        probe_stop: Arc::new(AtomicBool::new(false)),
        loss_said: None,
        losses_unsaid: 0,
    };
    sup.rewatch_own_files();
    sup.start_api_watch()?;
    Ok(sup.run_loop())
}

/// Watch first, then scan (in `run_loop`): a death between the two is seen by the watch,
/// a death before both by the scan (kubexit bug #8 lost it).
fn start_watch(
    cfg: &Config,
    has_deps: bool,
) -> Result<(Option<GraveyardWatcher>, Option<Duration>), SetupError> {
    let dir = &cfg.graveyard;
    let (watcher, poll) = match cfg.watch {
        // nothing to watch (a main container): no inotify instance, no thread, no poll
        _ if !has_deps => (None, None),
        WatchMode::Poll => (None, Some(cfg.poll_interval)),
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
            Ok(w) => (Some(w), Some(cfg.poll_interval)),
            Err(e) => {
                warn!(
                    "cannot watch {} with inotify ({e}); polling every {} instead",
                    dir.display(),
                    format_go_duration(cfg.poll_interval)
                );
                (None, Some(cfg.poll_interval))
            }
        },
    };
    if has_deps {
        info!(
            mode = cfg.watch.as_str(),
            inotify = watcher.is_some(),
            poll = %poll.map(format_go_duration).unwrap_or_else(|| "off".into()),
            "watching the graveyard"
        );
    }
    Ok((watcher, poll))
}

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

/// Which descriptors `ppoll` found ready.
struct Wake {
    signals: bool,
    inotify: bool,
    events: bool,
}

impl Supervisor {
    fn run_loop(&mut self) -> i32 {
        info!(
            death_deps = ?self.cfg.death_deps,
            birth_deps = ?self.cfg.birth_deps,
            graveyard = %self.cfg.graveyard.display(),
            "supervisor starting"
        );
        let now = Instant::now();
        let scanned = self.rescan(now);
        debug_assert!(scanned.is_empty(), "nothing is decided before start");
        // a stop signal that arrived during setup (the lock wait) wins over the start
        let mut actions = self.pending_signals(now);
        actions.extend(self.core.start(now));
        if let Phase::WaitingBirth { .. } = self.core.phase() {
            info!(
                not_ready = ?self.core.not_ready(),
                timeout = %format_go_duration(self.cfg.birth_timeout),
                "waiting for birth dependencies to be ready"
            );
        }
        if let Some(code) = self.execute(actions) {
            return code;
        }
        let mut next_poll = None;
        loop {
            let actions = self.update_interest(Instant::now());
            if let Some(code) = self.execute(actions) {
                return code;
            }
            next_poll = self.schedule_poll(next_poll);
            let wake = self.wait(next_poll);
            let now = Instant::now();
            let mut actions = vec![];
            if wake.signals {
                actions.extend(self.pending_signals(now));
            }
            if wake.inotify {
                actions.extend(self.graveyard_events(now));
            }
            if wake.events {
                actions.extend(self.helper_events(now));
            }
            actions.extend(self.core.tick(now));
            if next_poll.is_some_and(|t| now >= t) {
                actions.extend(self.poll_graveyard(now));
                next_poll = None;
            }
            if let Some(code) = self.execute(actions) {
                return code;
            }
        }
    }

    /// The poll runs only where a change could otherwise be missed: always in mode
    /// `poll` (or without inotify); in mode `auto` while the child is not started yet
    /// (readiness of birth dependencies) or while a dependency that matters has no thread
    /// blocked on its lock (a kubexit one, one not started yet). A sidecar whose death
    /// dependencies all hold their locks does not wake at all while idle. Returns when
    /// the next poll is due.
    fn schedule_poll(&self, next: Option<Instant>) -> Option<Instant> {
        let interval = self.poll?;
        let core = &self.core;
        let needed = self.always_poll
            || core.before_start()
            || self.observer.any_unwaited(|d| core.wants_lock_watch(d));
        needed.then(|| next.unwrap_or_else(|| Instant::now() + interval))
    }

    /// Keeps the watch as narrow as the dependencies allow (see `watch::Interest`). When
    /// it grows, what it did not report until now is read again.
    fn update_interest(&mut self, now: Instant) -> Vec<Action> {
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

    /// Waits in `ppoll` until a descriptor is ready or the next deadline (the core's or
    /// the poll's) passes.
    fn wait(&self, next_poll: Option<Instant>) -> Wake {
        let deadline = match (self.core.deadline(), next_poll) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let timeout =
            deadline.map(|d| TimeSpec::from_duration(d.saturating_duration_since(Instant::now())));
        let efd = self.poster.eventfd();
        let sig = || PollFd::new(self.signals.fd(), PollFlags::POLLIN);
        // no allocation per wake-up: without a watch, the third slot is left out
        let mut fds = [
            sig(),
            PollFd::new(efd.as_fd(), PollFlags::POLLIN),
            self.watcher
                .as_ref()
                .map_or_else(sig, |w| PollFd::new(w.fd(), PollFlags::POLLIN)),
        ];
        let n = if self.watcher.is_some() { 3 } else { 2 };
        match ppoll(&mut fds[..n], timeout, None) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                error!("ppoll failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        Wake {
            signals: ready(&fds[0]),
            events: ready(&fds[1]),
            inotify: n == 3 && ready(&fds[2]),
        }
    }

    /// Every signal pending on the signalfd, in the core's terms.
    fn pending_signals(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = vec![];
        while let Some(sig) = self.signals.next() {
            actions.extend(self.on_signal(sig, now));
            if self.core.phase() == &Phase::Finished {
                break;
            }
        }
        actions
    }

    fn on_signal(&mut self, sig: Signal, now: Instant) -> Vec<Action> {
        if sig == Signal::SIGCHLD {
            return self.reaped(now);
        }
        info!(signal = %sig, "received signal");
        // Whether to hold a stop signal depends on the dependencies as they are now: read
        // them again rather than trust an inotify event still queued behind the signal.
        let mut actions = vec![];
        if self.cfg.hold_stop && sig.ends_wait() {
            actions = self.rescan(now);
        }
        let was_holding = matches!(self.core.phase(), Phase::Holding { .. });
        let absorbed = self.core.absorbs(sig);
        actions.extend(self.core.on_signal(sig, now));
        if absorbed {
            info!(
                "{sig}: the child is being stopped already and gets {sig} once (sent, or due after the preStop hook); not sent again, SIGKILL still follows the grace period"
            );
        } else if let (false, Phase::Holding { until, .. }) = (was_holding, self.core.phase()) {
            info!(
                "holding {sig}: death dependencies {} still alive; the child is stopped once they died, at the latest in {}",
                self.core.living_death_deps().join(", "),
                format_go_duration(until.saturating_duration_since(now))
            );
        } else if actions.is_empty() && self.child.is_none() && self.core.restarts() == 0 {
            info!(signal = %sig, "no child yet: {sig} is not a stop signal; dropped");
        }
        actions
    }

    /// SIGCHLD: every exited process reaped; the child's and the hook's ends told to the core.
    fn reaped(&mut self, now: Instant) -> Vec<Action> {
        let r = process::reap(self.child.map(|c| c.pid), self.hook.map(|h| h.pid));
        if r.others > 0 {
            debug!(count = r.others, "reaped orphaned processes");
        }
        let mut actions = vec![];
        if let Some(st) = r.hook {
            self.hook = None;
            info!("preStop hook {}", describe_status(st));
            actions.extend(self.core.on_pre_stop_done(now));
        }
        if let Some(st) = r.child {
            self.child = None;
            let next = self.core.on_child_exit(st, now);
            self.explain_child_exit(st, now, &next);
            actions.extend(next);
        }
        actions
    }

    /// A child's exit that does not end the container: restarted (at once when `actions`
    /// already restart it), or the stop held.
    fn explain_child_exit(&self, st: ChildStatus, now: Instant, actions: &[Action]) {
        let status = describe_status(st);
        let n = self.core.restarts();
        let when = match self.core.phase() {
            _ if actions.iter().any(|a| matches!(a, Action::Restart { .. })) => {
                "at once".to_string()
            }
            Phase::Restarting { at } => format!(
                "in {}",
                format_go_duration(at.saturating_duration_since(now))
            ),
            Phase::Holding { .. } => {
                info!(
                    "child {status} while a stop signal is held; not restarting it, waiting for the death dependencies to die"
                );
                return;
            }
            _ => return,
        };
        info!(
            restarts = n,
            "child {status}; restarting it {when} (restart {n}; the death dependencies are alive)"
        );
    }

    /// Drains the graveyard watch: re-creates a removed graveyard, re-reads what changed.
    fn graveyard_events(&mut self, now: Instant) -> Vec<Action> {
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
    fn poll_graveyard(&mut self, now: Instant) -> Vec<Action> {
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
    fn follow_own_files(&mut self) -> bool {
        let vanished = self.watch_own_files();
        let lost = self.presence_lost();
        debug!(vanished, lost, "own lock file or record changed");
        !vanished && !lost
    }

    /// Watches our lock file and record again (new ones are in place: at the start, and
    /// once the graveyard is re-created); the poll covers what cannot be watched, one that
    /// is gone already included.
    fn rewatch_own_files(&mut self) {
        if self.watch_own_files() {
            self.fall_back_to_poll("own lock file or record gone as it was to be watched");
        }
    }

    /// Watches what is now at the paths of our lock file and record, through which a
    /// removed or emptied graveyard is noticed (see `watch.rs`); what cannot be watched
    /// (inotify watches used up: ENOSPC) is left to the poll. Whether one of them is gone
    /// (ENOENT).
    fn watch_own_files(&mut self) -> bool {
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
    fn fall_back_to_poll(&mut self, why: &str) {
        if !self.always_poll {
            warn!(
                "{why}; polling every {} to notice what inotify does not",
                format_go_duration(self.cfg.poll_interval)
            );
        }
        self.poll = Some(self.cfg.poll_interval);
        self.always_poll = true;
    }

    /// Whether the graveyard is no longer the one we are in: removed, replaced, or emptied
    /// (our lock file went with it, or our record did).
    fn presence_lost(&self) -> bool {
        self.graveyard.dir_identity() != self.graveyard_id
            || !self.record.lock_in_place()
            || !self.record.record_in_place()
    }

    /// The graveyard was removed, replaced or emptied: re-create it with our lock and
    /// record, watch the new directory and lock, and read every dependency again. A
    /// dependency seen dead stays dead (the core's rule), so wiping its tombstone changes
    /// nothing.
    fn graveyard_gone(&mut self, now: Instant) -> Vec<Action> {
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
                self.cfg.graveyard.display()
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
                    self.cfg.graveyard.display()
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

    /// What the helper threads posted.
    fn helper_events(&mut self, now: Instant) -> Vec<Action> {
        let _ = self.poster.eventfd().read(); // reset the counter; the channel holds the news
        let mut actions = vec![];
        while let Ok(ev) = self.events.try_recv() {
            actions.extend(match ev {
                Event::Ready => {
                    self.on_ready();
                    vec![]
                }
                Event::PreStopDone => self.core.on_pre_stop_done(now),
                Event::LockReleased(dep) => self.observe(&dep, true, now),
                Event::LockWaitFailed(dep, why) => {
                    self.observer.waiter_failed(&dep, &why);
                    self.observe(&dep, false, now)
                }
                Event::Pod(view) => {
                    debug!(ready = ?view.ready, "ready containers according to the API");
                    self.core.on_pod(&view, now)
                }
                Event::ApiUnreachable(problem) => {
                    self.core.on_api_unreachable(problem);
                    vec![]
                }
                Event::ApiFatal(message) => {
                    error!("{message}");
                    self.core.on_api_error(message)
                }
            });
        }
        actions
    }

    fn rescan(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = vec![];
        for dep in self.core.watched() {
            actions.extend(self.observe(&dep, false, now));
        }
        actions
    }

    /// Reads a dependency and tells the core; arms a lock waiter where it helps.
    fn observe(&mut self, name: &str, released: bool, now: Instant) -> Vec<Action> {
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
            self.explain_success_trigger(name, after, &actions);
        }
        actions
    }

    /// A death dependency that died without stopping the child: under
    /// KUBEXIT_DEATH_TRIGGER=success a failure (it may be restarted), under
    /// KUBEXIT_DEATH_DEPS_MODE=all one of several. Said, since it looks like a missed death
    /// otherwise.
    fn explain_success_trigger(&self, name: &str, state: &DepState, actions: &[Action]) {
        let DepState::Dead { exit_code } = state else {
            return;
        };
        if !actions.is_empty() || !self.cfg.death_deps.iter().any(|d| d == name) {
            return;
        }
        let code = exit_code.map_or("unknown".to_string(), |c| c.to_string());
        if self.cfg.death_trigger == DeathTrigger::Success && *exit_code != Some(0) {
            info!(
                dep = name,
                "death dependency {name:?} died with exit code {code}; not stopping the child (KUBEXIT_DEATH_TRIGGER=success: it may be restarted)"
            );
        } else if self.cfg.death_deps_mode == DeathDepsMode::All {
            let success = self.cfg.death_trigger == DeathTrigger::Success;
            let waiting: Vec<&str> = (self.cfg.death_deps.iter())
                .filter(|d| match self.core.dep_state(d) {
                    DepState::Dead { exit_code } => success && *exit_code != Some(0),
                    _ => true,
                })
                .map(String::as_str)
                .collect();
            info!(
                dep = name,
                "death dependency {name:?} died with exit code {code}; the child is stopped once all have died (KUBEXIT_DEATH_DEPS_MODE=all), waiting for {}",
                waiting.join(", ")
            );
        }
    }

    /// Birth deps through the Kubernetes API: one watch of this pod on its own thread.
    fn start_api_watch(&self) -> Result<(), SetupError> {
        let Some(pod) = self.cfg.pod.clone() else {
            return Ok(());
        };
        if self.cfg.birth_deps.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "api")]
        {
            let poster = self.poster.clone();
            crate::api::spawn(
                pod,
                self.cfg.kubeconfig.clone(),
                self.probe_stop.clone(),
                move |ev| poster.post(ev),
            )
            .map_err(SetupError::ApiThread)
        }
        #[cfg(not(feature = "api"))]
        {
            let _ = pod;
            Err(SetupError::NoApiFeature)
        }
    }

    /// The readiness probe succeeded: record `Ready`.
    fn on_ready(&mut self) {
        if self.child.is_none() {
            return;
        }
        match self.record.record_ready() {
            Ok(true) if self.cfg.ready_probe.is_some() => info!("child is ready"),
            Ok(true) => debug!("child started: recorded Ready"),
            Ok(false) => {}
            Err(e) => error!(
                "cannot record Ready in the graveyard {}: {e}; containers waiting for this one will time out",
                self.cfg.graveyard.display()
            ),
        }
    }

    /// Checks the child's readiness on a thread of its own (each check may block up to
    /// the probe timeout) and posts `Event::Ready` once it passes.
    fn start_probe(&self) {
        let Some(probe) = self.cfg.ready_probe.clone() else {
            return;
        };
        let (interval, timeout) = (self.cfg.ready_interval, self.cfg.ready_timeout);
        let (poster, stop, span) = (
            self.poster.clone(),
            self.probe_stop.clone(),
            tracing::Span::current(),
        );
        let spawned = std::thread::Builder::new().name("ready-probe".into()).stack_size(128 * 1024).spawn(move || {
            let _e = span.enter();
            info!(probe = %probe.describe(), interval = %format_go_duration(interval), "checking the child's readiness");
            let mut failures = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match crate::probe::check(&probe, timeout) {
                    Ok(()) => {
                        poster.post(Event::Ready);
                        return;
                    }
                    Err(e) => {
                        failures += 1;
                        // the first failure, then every 50th: visible but not noisy
                        if failures == 1 || failures % 50 == 0 {
                            info!(probe = %probe.describe(), failures, "child not ready yet: {e}");
                        }
                    }
                }
                std::thread::sleep(interval);
            }
        });
        if let Err(e) = spawned {
            error!(
                "cannot start the readiness probe thread: {e}; the child will never be marked ready"
            );
        }
    }

    /// Carries out actions; returns the exit code once the container is to end.
    fn execute(&mut self, actions: Vec<Action>) -> Option<i32> {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Spawn => queue.extend(self.spawn_child(Instant::now())),
                Action::Restart { count } => {
                    queue.extend(self.restart_child(count, Instant::now()))
                }
                Action::RunPreStop => queue.extend(self.run_pre_stop(Instant::now())),
                Action::Signal { signal, group, why } => {
                    self.send(signal, group, &why);
                    self.core.signal_sent(signal, Instant::now());
                }
                Action::Kill { why } => queue.extend(self.kill(&why)),
                Action::Finish(outcome) => return Some(self.finish(outcome)),
            }
        }
        None
    }

    /// Records `Born` durably, then starts the child, unless a stop signal came first;
    /// `Ready` once it runs (unless a probe decides).
    fn spawn_child(&mut self, now: Instant) -> Vec<Action> {
        if let Err(e) = self.record.record_birth() {
            let path = self.cfg.graveyard.join(&self.cfg.name);
            return self
                .core
                .on_birth_not_recorded(format!("{}: {e}", path.display()));
        }
        self.rewatch_own_files(); // (the record exists from now on)
        self.start_child(None, now)
    }

    /// Starts the child again (KUBEXIT_RESTART_CHILD): the restart count into the
    /// tombstone (Born and Ready stay), then the child.
    fn restart_child(&mut self, count: u32, now: Instant) -> Vec<Action> {
        if let Err(e) = self.record.record_restart(count) {
            warn!(
                "cannot record the restart count in the graveyard {}: {e}",
                self.cfg.graveyard.display()
            );
        }
        self.start_child(Some(count), now)
    }

    /// Starts the child, unless a stop signal came first (while Born or the restart count
    /// was written); `Ready` after the first start, unless a probe decides.
    fn start_child(&mut self, restart: Option<u32>, now: Instant) -> Vec<Action> {
        let mut actions = self.pending_signals(now);
        if self.core.phase() != &Phase::Starting {
            return actions;
        }
        match process::spawn(&self.cfg.command, true) {
            Ok(child) => {
                self.child = Some(child);
                let pid = child.pid.as_raw();
                match restart {
                    None => info!(pid, command = ?self.cfg.command, "started child"),
                    Some(n) => info!(pid, restarts = n, "restarted child (restart {n})"),
                }
                match (restart, &self.cfg.ready_probe) {
                    (Some(_), _) => {}
                    (None, Some(_)) => self.start_probe(),
                    (None, None) => self.on_ready(),
                }
                actions.extend(self.core.on_spawned(now));
            }
            Err((failure, detail)) => actions.extend(self.core.on_spawn_failed(failure, detail)),
        }
        actions
    }

    /// Runs the preStop hook before the termination signal: an `exec` hook as a process
    /// of its own (reaped with the child), an HTTP one on a thread; each reports its end.
    /// A hook that cannot be started counts as done (logged).
    fn run_pre_stop(&mut self, now: Instant) -> Vec<Action> {
        let Some(hook) = self.cfg.pre_stop.clone() else {
            return self.core.on_pre_stop_done(now);
        };
        let budget = self
            .core
            .deadline()
            .map_or(Duration::ZERO, |d| d.saturating_duration_since(now));
        info!(
            hook = %hook.describe(),
            budget = %format_go_duration(budget),
            "running the preStop hook before stopping the child"
        );
        match hook {
            PreStop::Exec(command) => {
                let command: Vec<std::ffi::OsString> =
                    command.into_iter().map(Into::into).collect();
                match process::spawn(&command, false) {
                    Ok(h) => {
                        self.hook = Some(h);
                        vec![]
                    }
                    Err((_, detail)) => {
                        error!("preStop hook: {detail}");
                        self.core.on_pre_stop_done(now)
                    }
                }
            }
            PreStop::Http(url) => {
                let (poster, span) = (self.poster.clone(), tracing::Span::current());
                let spawned = std::thread::Builder::new()
                    .name("pre-stop".into())
                    .stack_size(128 * 1024)
                    .spawn(move || {
                        let _e = span.enter();
                        match crate::probe::request("GET", &url, budget) {
                            Ok(code) => info!(url = %url, status = code, "preStop hook answered HTTP {code}"),
                            Err(e) => warn!(url = %url, "preStop hook failed: {e}"),
                        }
                        poster.post(Event::PreStopDone);
                    });
                match spawned {
                    Ok(_) => vec![],
                    Err(e) => {
                        error!("cannot start the preStop hook's thread: {e}");
                        self.core.on_pre_stop_done(now)
                    }
                }
            }
            PreStop::Sleep(_) => vec![], // the core's own timer
        }
    }

    fn send(&self, signal: Signal, group: bool, why: &str) {
        let Some(child) = &self.child else {
            return;
        };
        // signal first, log after: formatting is not on the critical path
        let sent = process::send(child, signal, group);
        info!(
            signal = %signal,
            pid = child.pid.as_raw(),
            process_group = group,
            "sending {signal} to the child: {why}"
        );
        if let Err(e) = sent {
            error!(
                "cannot send {signal} to the child (pid {}): {e}; it may run with other credentials (a setuid program)",
                child.pid
            );
        }
    }

    fn kill(&mut self, why: &str) -> Vec<Action> {
        let Some(child) = self.child else {
            return vec![];
        };
        warn!(
            pgid = child.pgid.as_raw(),
            "sending SIGKILL to the child's process group: {why}"
        );
        match process::kill_all(&child) {
            Ok(()) => vec![],
            Err(e) => {
                error!("cannot SIGKILL the child (pid {}): {e}", child.pid);
                self.core.on_kill_failed(e.to_string(), Instant::now())
            }
        }
    }

    fn finish(&mut self, o: Outcome) -> i32 {
        self.probe_stop.store(true, Ordering::Relaxed);
        let recorded = self.record.record_death(&o);
        // one line says how it ended: an error for what needs fixing
        if o.reason.is_failure() {
            error!(
                exit_code = o.exit_code,
                reason = o.reason.as_str(),
                "{}",
                o.message
            );
        } else {
            info!(
                exit_code = o.exit_code,
                reason = o.reason.as_str(),
                "{}",
                o.message
            );
        }
        match recorded {
            // where Born could not be written, the death cannot be either: said above
            Err(_) if o.reason == Reason::BirthNotRecorded => {}
            Err(e) => error!(
                "cannot record this container's death in {}: {e}; containers depending on it will see it only through its lock",
                self.cfg.graveyard.join(&self.cfg.name).display()
            ),
            Ok(()) => {}
        }
        // After `Died` is recorded (dependents react at once), tell local proxies to quit.
        for url in &self.cfg.shutdown_hooks {
            run_hook(url, self.cfg.shutdown_hook_timeout);
        }
        // A preStop hook still running is not left behind (as PID 1 the kernel would end it).
        if let Some(h) = self.hook.take() {
            let _ = process::kill_all(&h);
        }
        // Final sweep so no zombie outlives us when we are not PID 1.
        let _ = process::reap(None, None);
        o.exit_code
    }
}

/// POSTs to a shutdown endpoint, retrying connection failures briefly, within `budget`.
/// Never fails the container: every outcome is only logged.
fn run_hook(url: &crate::probe::HttpUrl, budget: Duration) {
    let deadline = Instant::now() + budget;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        match crate::probe::request("POST", url, left) {
            Ok(code) if (200..300).contains(&code) => {
                info!(url = %url, status = code, attempt, "shutdown hook succeeded");
                return;
            }
            Ok(code) => {
                warn!(url = %url, status = code, attempt, "shutdown hook answered HTTP {code}; not retrying");
                return;
            }
            Err(e) => {
                let pause = Duration::from_millis(100 * attempt.min(5) as u64);
                if Instant::now() + pause >= deadline {
                    warn!(url = %url, attempt, "shutdown hook failed: {e}; giving up after {}", format_go_duration(budget));
                    return;
                }
                debug!(url = %url, attempt, "shutdown hook failed: {e}; retrying");
                std::thread::sleep(pause);
            }
        }
    }
}
