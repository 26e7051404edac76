//! The supervisor's event loop: feeds observations into the pure `Core` and carries out
//! its actions. One thread decides; a signal thread and the inotify thread only post
//! events to it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use nix::sys::signal::Signal;
use signal_hook::iterator::Signals;
use tracing::{debug, error, info, warn};

use crate::config::{Config, format_go_duration};
use crate::core::{Action, Core, DepState, FORWARDED, Outcome, Policy};
use crate::fsutil::{self, Lookup};
use crate::process::{self, Child};
use crate::tombstone::Tombstone;

/// What the helper threads tell the deciding thread.
#[derive(Debug)]
pub enum Event {
    Signal(i32),
    /// Something happened to this file in the graveyard.
    Changed(String),
    /// The watcher lost events (queue overflow): re-read every dependency.
    Rescan,
    WatchError(String),
}

/// Error before anything was started: exit 2 with this message.
#[derive(Debug)]
pub struct SetupError(pub String);

/// How often the graveyard is re-read when inotify is not available.
const POLL_FALLBACK: Duration = Duration::from_millis(500);

pub struct Supervisor {
    cfg: Config,
    core: Core,
    child: Option<Child>,
    tombstone: Tombstone,
    /// Last "unreadable" message logged per dependency, so each is logged once.
    bad: HashMap<String, String>,
    poll: Option<Duration>,
}

/// Installs signal handling, sets up the graveyard and its watch, then supervises until
/// the container is to end. Returns the exit code.
pub fn run(cfg: Config) -> Result<i32, SetupError> {
    let (tx, rx) = mpsc::channel::<Event>();

    // Handlers first: a SIGTERM that arrives before the child exists must not be lost
    // (PID 1 ignores signals it has no handler for), and neither may the child's SIGCHLD.
    let mut wanted: Vec<i32> = FORWARDED.iter().map(|s| *s as i32).collect();
    wanted.push(Signal::SIGCHLD as i32);
    let mut signals = Signals::new(&wanted)
        .map_err(|e| SetupError(format!("cannot install signal handlers: {e}")))?;
    let sig_tx = tx.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            for s in signals.forever() {
                if sig_tx.send(Event::Signal(s)).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| SetupError(format!("cannot start signal thread: {e}")))?;

    if std::process::id() != 1 {
        if let Err(e) = process::become_subreaper() {
            warn!("cannot become a child subreaper ({e}); orphans of the child will not be reaped by sexton");
        }
    }

    std::fs::create_dir_all(&cfg.graveyard).map_err(|e| {
        SetupError(format!(
            "invalid KUBEXIT_GRAVEYARD={:?}: cannot create the directory: {e}",
            cfg.graveyard.display()
        ))
    })?;
    if !cfg.graveyard.is_dir() {
        return Err(SetupError(format!(
            "invalid KUBEXIT_GRAVEYARD={:?}: not a directory",
            cfg.graveyard.display()
        )));
    }

    // Watch first, then scan: a death between the two is seen by the watch, a death
    // before both by the scan (kubexit bug #8 lost it).
    let mut poll = None;
    let _watcher = match crate::watch::watch(&cfg.graveyard, tx.clone()) {
        Ok(w) => Some(w),
        Err(e) => {
            warn!(
                "cannot watch {} with inotify ({e}); polling every {}",
                cfg.graveyard.display(),
                format_go_duration(POLL_FALLBACK)
            );
            poll = Some(POLL_FALLBACK);
            None
        }
    };

    let mut sup = Supervisor {
        core: Core::new(Policy::from_config(&cfg)),
        cfg,
        child: None,
        tombstone: Tombstone::default(),
        bad: HashMap::new(),
        poll,
    };
    let code = sup.run_loop(&rx);
    drop(tx);
    Ok(code)
}

impl Supervisor {
    fn graveyard(&self) -> &Path {
        &self.cfg.graveyard
    }

    fn run_loop(&mut self, rx: &mpsc::Receiver<Event>) -> i32 {
        info!(
            death_deps = ?self.cfg.death_deps,
            birth_deps = ?self.cfg.birth_deps,
            graveyard = %self.graveyard().display(),
            "supervisor starting"
        );
        let now = Instant::now();
        for dep in self.core.watched() {
            let state = self.dep_state(&dep);
            let actions = self.core.on_dep(&dep, state, now);
            debug_assert!(actions.is_empty());
        }
        let actions = self.core.start(now);
        if actions.is_empty() {
            info!(
                not_ready = ?self.core.not_ready(),
                timeout = %format_go_duration(self.cfg.birth_timeout),
                "waiting for birth dependencies to be ready"
            );
        }
        if let Some(code) = self.execute(actions) {
            return code;
        }
        let mut next_poll = self.poll.map(|p| Instant::now() + p);
        loop {
            let deadline = match (self.core.deadline(), next_poll) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let event = match deadline {
                None => rx.recv().ok(),
                Some(d) => match rx.recv_timeout(d.saturating_duration_since(Instant::now())) {
                    Ok(e) => Some(e),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => None,
                },
            };
            let now = Instant::now();
            let actions = match event {
                Some(Event::Signal(s)) => self.on_signal(s, now),
                Some(Event::Changed(name)) => self.on_changed(&name, now),
                Some(Event::Rescan) => self.rescan(now),
                Some(Event::WatchError(e)) => {
                    warn!("graveyard watch error: {e}; re-reading dependencies");
                    self.rescan(now)
                }
                None => {
                    let mut a = self.core.tick(now);
                    if let Some(p) = self.poll {
                        if next_poll.is_some_and(|t| now >= t) {
                            a.extend(self.rescan(now));
                            next_poll = Some(now + p);
                        }
                    }
                    a
                }
            };
            if let Some(code) = self.execute(actions) {
                return code;
            }
        }
    }

    fn on_signal(&mut self, s: i32, now: Instant) -> Vec<Action> {
        let Ok(sig) = Signal::try_from(s) else { return vec![] };
        if sig == Signal::SIGCHLD {
            let (status, others) = process::reap(self.child.map(|c| c.pid));
            if others > 0 {
                debug!(count = others, "reaped orphaned processes");
            }
            return match status {
                Some(st) => self.core.on_child_exit(st, now),
                None => vec![],
            };
        }
        info!(signal = sig.as_str(), "received signal");
        self.core.on_signal(sig, now)
    }

    fn on_changed(&mut self, name: &str, now: Instant) -> Vec<Action> {
        if !self.core.watched().iter().any(|d| d == name) {
            return vec![];
        }
        let state = self.dep_state(name);
        self.observe(name, state, now)
    }

    fn rescan(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = vec![];
        for dep in self.core.watched() {
            let state = self.dep_state(&dep);
            actions.extend(self.observe(&dep, state, now));
        }
        actions
    }

    fn observe(&mut self, name: &str, state: DepState, now: Instant) -> Vec<Action> {
        if self.core.dep_state(name) != &state {
            debug!(dep = name, state = ?state, "dependency state");
        }
        self.core.on_dep(name, state, now)
    }

    /// Reads a dependency's tombstone. Unreadable ones count as not dead; each distinct
    /// problem is logged once.
    fn dep_state(&mut self, name: &str) -> DepState {
        match fsutil::read_tombstone(self.graveyard(), name) {
            Lookup::Absent => {
                self.bad.remove(name);
                DepState::Absent
            }
            Lookup::Found(t) => {
                self.bad.remove(name);
                if t.is_dead() {
                    DepState::Dead { exit_code: t.exit_code }
                } else {
                    DepState::Alive { ready: t.ready.is_some() }
                }
            }
            Lookup::Bad(why) => {
                if self.bad.get(name) != Some(&why) {
                    warn!(dep = name, "tombstone of {name:?} is not usable yet ({why}); treating it as not dead and re-reading on the next change");
                    self.bad.insert(name.to_string(), why);
                }
                DepState::Unreadable
            }
        }
    }

    fn write_tombstone(&self) {
        if let Err(e) = fsutil::atomic_write(self.graveyard(), &self.cfg.name, &self.tombstone.encode(), 0o644) {
            error!(
                "cannot write tombstone {}: {e}",
                self.graveyard().join(&self.cfg.name).display()
            );
        }
    }

    /// Carries out actions; returns the exit code once the container is to end.
    fn execute(&mut self, actions: Vec<Action>) -> Option<i32> {
        let mut queue: std::collections::VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Spawn => match process::spawn(&self.cfg.command) {
                    Ok(child) => {
                        self.child = Some(child);
                        let now: DateTime<Utc> = Utc::now();
                        self.tombstone.born = Some(now);
                        self.tombstone.ready = Some(now);
                        self.write_tombstone();
                        info!(pid = child.pid.as_raw(), command = ?self.cfg.command, "started child");
                    }
                    Err((failure, detail)) => {
                        error!("{detail}");
                        queue.extend(self.core.on_spawn_failed(failure, detail));
                    }
                },
                Action::Signal { signal, group, why } => {
                    if let Some(child) = &self.child {
                        info!(
                            signal = signal.as_str(),
                            pid = child.pid.as_raw(),
                            process_group = group,
                            "sending {} to the child: {why}",
                            signal.as_str()
                        );
                        if let Err(e) = process::send(child, signal, group) {
                            error!("cannot send {}: {e}", signal.as_str());
                        }
                    }
                }
                Action::Kill { why } => {
                    if let Some(child) = &self.child {
                        warn!(pgid = child.pgid.as_raw(), "sending SIGKILL to the child's process group: {why}");
                        process::kill_all(child);
                    }
                }
                Action::Finish(outcome) => return Some(self.finish(outcome)),
            }
        }
        None
    }

    fn finish(&mut self, o: Outcome) -> i32 {
        let t = &mut self.tombstone;
        t.died = Some(Utc::now());
        t.exit_code = Some(o.exit_code);
        t.signal = o.child_signal.map(|s| s.as_str().to_string());
        t.reason = Some(o.reason.as_str().to_string());
        t.death_dep = o.death_dep.clone();
        self.write_tombstone();
        // Final sweep so no zombie outlives us when we are not PID 1.
        let _ = process::reap(None);
        info!(
            exit_code = o.exit_code,
            reason = o.reason.as_str(),
            "{}",
            o.message
        );
        o.exit_code
    }
}
