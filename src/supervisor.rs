//! The supervisor's event loop: feeds observations into the pure `Core` and carries out
//! its actions. One thread waits in `ppoll` on a signalfd (the handled signals are blocked
//! and read from it), the graveyard's inotify descriptor and an eventfd through which the
//! few helper threads (readiness probe, lock waiters) post events. No hop between threads
//! on the path from a death to the signal sent.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use tracing::{debug, error, info, warn};

use crate::config::{Config, DeathTrigger, WatchMode, format_go_duration};
use crate::core::{Action, Core, DepState, FORWARDED, Lock, Outcome, Policy, classify};
use crate::fsutil::{self, Lookup};
use crate::process::{self, Child};
use crate::tombstone::Tombstone;

/// What the helper threads tell the deciding thread.
#[derive(Debug)]
pub enum Event {
    /// The readiness probe of the child succeeded.
    Ready,
    /// The lock of this dependency was released (its supervisor is gone).
    LockReleased(String),
    /// The Kubernetes API says these containers of the pod are ready now.
    ApiReady(Vec<String>),
    /// The Kubernetes API cannot be asked (forbidden, no credentials).
    ApiFatal(String),
}

/// How a helper thread posts an event: a channel, plus an eventfd that wakes the loop.
#[derive(Clone)]
pub struct Poster {
    tx: mpsc::Sender<Event>,
    efd: Arc<EventFd>,
}

impl Poster {
    pub fn post(&self, ev: Event) {
        if self.tx.send(ev).is_ok() {
            let _ = self.efd.write(1);
        }
    }
}

/// Error before anything was started: exit 2 with this message.
#[derive(Debug)]
pub struct SetupError(pub String);

/// How long to wait for our own lock before concluding that another live container uses
/// the same name (a peer's probe holds it only for an instant).
const LOCK_WAIT: Duration = Duration::from_secs(2);

pub struct Supervisor {
    cfg: Config,
    core: Core,
    child: Option<Child>,
    tombstone: Tombstone,
    /// Last "unreadable" message logged per dependency, so each is logged once.
    bad: HashMap<String, String>,
    poll: Option<Duration>,
    poster: Poster,
    probe_stop: Arc<AtomicBool>,
    locks_work: bool,
    /// Death dependencies with a thread blocked on their lock.
    lock_waiters: std::collections::HashSet<String>,
}

/// Installs signal handling, sets up the graveyard and its watch, then supervises until
/// the container is to end. Returns the exit code.
pub fn run(cfg: Config) -> Result<i32, SetupError> {
    // Signals first, before any thread exists (threads inherit the mask): the handled ones
    // are blocked and read from a signalfd. Blocked signals are queued even for PID 1 of
    // a namespace (which otherwise drops signals it has no handler for), so a SIGTERM that
    // arrives before the child exists is not lost, and neither is the child's SIGCHLD.
    let mut mask = SigSet::empty();
    for s in FORWARDED.iter().chain([&Signal::SIGCHLD]) {
        mask.add(*s);
        // an inherited SIG_IGN for SIGCHLD would make the kernel reap the child for us
        // and lose its exit status
        unsafe {
            let _ = nix::sys::signal::signal(*s, SigHandler::SigDfl);
        }
    }
    nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)
        .map_err(|e| SetupError(format!("cannot block signals: {e}")))?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| SetupError(format!("cannot create a signalfd: {e}")))?;
    let efd = EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
        .map_err(|e| SetupError(format!("cannot create an eventfd: {e}")))?;
    let (tx, rx) = mpsc::channel::<Event>();
    let poster = Poster {
        tx,
        efd: Arc::new(efd),
    };

    if std::process::id() != 1 {
        if let Err(e) = process::become_subreaper() {
            warn!(
                "cannot become a child subreaper ({e}); orphans of the child will not be reaped by sexton"
            );
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

    // Our lock, held until we die however we die (even SIGKILL: the kernel releases it),
    // taken before `Born` is written so that peers never see a born container without it.
    let _lock = match fsutil::acquire_lock(&cfg.graveyard, &cfg.name, LOCK_WAIT) {
        Ok(Some(l)) => l,
        Ok(None) => {
            return Err(SetupError(format!(
                "invalid KUBEXIT_NAME={:?}: the lock {} is held by another live container; each container of a pod needs its own name",
                cfg.name,
                cfg.graveyard
                    .join(fsutil::lock_file_name(&cfg.name))
                    .display()
            )));
        }
        Err(e) => {
            return Err(SetupError(format!(
                "invalid KUBEXIT_GRAVEYARD={:?}: cannot create the lock file: {e}",
                cfg.graveyard.display()
            )));
        }
    };

    // flock must mean something on this filesystem for lock-based death detection: our
    // own lock must look held through a second descriptor. If it does not, a live peer's
    // lock would look free too (a false death), so that detection is switched off.
    let locks_work = fsutil::lock_state(&cfg.graveyard, &cfg.name) == Lock::Held;
    if !locks_work {
        warn!(
            "flock is not effective on {}: a container killed before recording its death cannot be detected; only tombstones count",
            cfg.graveyard.display()
        );
    }

    // Watch first, then scan: a death between the two is seen by the watch, a death
    // before both by the scan (kubexit bug #8 lost it). The core says which tombstones
    // matter (death deps, and birth deps unless the API says who is ready).
    let core = Core::new(Policy::from_config(&cfg));
    let has_deps = !core.watched().is_empty();
    let (watcher, poll) = match cfg.watch {
        // nothing to watch (a main container): no inotify instance, no thread, no poll
        _ if !has_deps => (None, None),
        WatchMode::Poll => (None, Some(cfg.poll_interval)),
        WatchMode::Inotify => match crate::watch::watch(&cfg.graveyard) {
            Ok(w) => (Some(w), None),
            Err(e) => {
                return Err(SetupError(format!(
                    "KUBEXIT_WATCH=inotify: cannot watch {} with inotify: {e} (use KUBEXIT_WATCH=auto or poll)",
                    cfg.graveyard.display()
                )));
            }
        },
        // inotify, plus a poll as a safety net: some sandboxes accept the watch and then
        // deliver nothing for writes made by other containers.
        WatchMode::Auto => match crate::watch::watch(&cfg.graveyard) {
            Ok(w) => (Some(w), Some(cfg.poll_interval)),
            Err(e) => {
                warn!(
                    "cannot watch {} with inotify ({e}); polling every {} instead",
                    cfg.graveyard.display(),
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
    } else {
        debug!("no dependencies: not watching the graveyard");
    }

    let mut sup = Supervisor {
        core,
        cfg,
        child: None,
        tombstone: Tombstone::default(),
        bad: HashMap::new(),
        poll,
        poster,
        probe_stop: Arc::new(AtomicBool::new(false)),
        locks_work,
        lock_waiters: Default::default(),
    };
    sup.start_api_watch()?;
    Ok(sup.run_loop(&rx, &sigfd, watcher.as_ref()))
}

impl Supervisor {
    fn graveyard(&self) -> &Path {
        &self.cfg.graveyard
    }

    fn run_loop(
        &mut self,
        rx: &mpsc::Receiver<Event>,
        sigfd: &SignalFd,
        watcher: Option<&crate::watch::GraveyardWatcher>,
    ) -> i32 {
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
        let efd = self.poster.efd.clone();
        let mut next_poll = self.poll.map(|p| Instant::now() + p);
        loop {
            let deadline = match (self.core.deadline(), next_poll) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let timeout = deadline
                .map(|d| TimeSpec::from_duration(d.saturating_duration_since(Instant::now())));
            let (sig_ready, ino_ready, wake_ready) = {
                let mut fds = vec![
                    PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
                    PollFd::new(efd.as_fd(), PollFlags::POLLIN),
                ];
                if let Some(w) = watcher {
                    fds.push(PollFd::new(w.fd(), PollFlags::POLLIN));
                }
                match ppoll(&mut fds, timeout, None) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(e) => {
                        error!("ppoll failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
                (
                    ready(&fds[0]),
                    fds.get(2).is_some_and(ready),
                    ready(&fds[1]),
                )
            };
            let now = Instant::now();
            if sig_ready {
                while let Ok(Some(info)) = sigfd.read_signal() {
                    let actions = self.on_signal(info.ssi_signo as i32, now);
                    if let Some(code) = self.execute(actions) {
                        return code;
                    }
                }
            }
            if ino_ready {
                if let Some(w) = watcher {
                    let changes = w.drain();
                    let mut actions = vec![];
                    if changes.rescan {
                        warn!(
                            "graveyard watch lost events or the directory moved; re-reading dependencies"
                        );
                        actions.extend(self.rescan(now));
                    }
                    for name in &changes.names {
                        actions.extend(self.on_changed(name, now));
                    }
                    if let Some(code) = self.execute(actions) {
                        return code;
                    }
                }
            }
            if wake_ready {
                let _ = efd.read();
                while let Ok(ev) = rx.try_recv() {
                    let actions = match ev {
                        Event::Ready => {
                            self.on_ready();
                            vec![]
                        }
                        Event::LockReleased(dep) => {
                            self.lock_waiters.remove(&dep);
                            self.on_changed(&dep, now)
                        }
                        Event::ApiReady(ready) => {
                            debug!(ready = ?ready, "ready containers according to the API");
                            self.core.on_api_ready(&ready, now)
                        }
                        Event::ApiFatal(message) => {
                            error!("{message}");
                            self.core.on_api_error(message)
                        }
                    };
                    if let Some(code) = self.execute(actions) {
                        return code;
                    }
                }
            }
            let mut actions = self.core.tick(now);
            if let (Some(p), Some(t)) = (self.poll, next_poll) {
                if now >= t {
                    actions.extend(self.rescan(now));
                    next_poll = Some(now + p);
                }
            }
            if let Some(code) = self.execute(actions) {
                return code;
            }
        }
    }

    fn on_signal(&mut self, s: i32, now: Instant) -> Vec<Action> {
        let Ok(sig) = Signal::try_from(s) else {
            return vec![];
        };
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

    fn on_changed(&mut self, file: &str, now: Instant) -> Vec<Action> {
        // a tombstone, or a lock file whose holder may just have died
        let name = fsutil::owner_of(file);
        if !self.core.is_watched(name) {
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
        let changed = self.core.dep_state(name) != &state;
        if changed {
            debug!(dep = name, state = ?state, "dependency state");
        }
        let actions = self.core.on_dep(name, state.clone(), now);
        if changed
            && actions.is_empty()
            && self.cfg.death_trigger == DeathTrigger::Success
            && self.cfg.death_deps.iter().any(|d| d == name)
        {
            if let DepState::Dead { exit_code } = state {
                info!(
                    dep = name,
                    "death dependency {name:?} died with exit code {}; not stopping the child (KUBEXIT_DEATH_TRIGGER=success: it may be restarted)",
                    exit_code.map_or("unknown".to_string(), |c| c.to_string())
                );
            }
        }
        actions
    }

    /// Arms a thread blocked on a live death dependency's lock: it wakes the moment the
    /// lock is released, however the holder died. Exact, and independent of inotify (the
    /// kernel queues the close event *before* it releases the flock, so an event-driven
    /// probe alone could still see the lock held).
    fn watch_lock(&mut self, dep: &str) {
        if !self.locks_work
            || self.lock_waiters.contains(dep)
            || !self.cfg.death_deps.iter().any(|d| d == dep)
            || !matches!(
                self.core.phase(),
                crate::core::Phase::Running
                    | crate::core::Phase::WaitingBirth { .. }
                    | crate::core::Phase::Created
            )
        {
            return;
        }
        let (graveyard, name, poster) = (
            self.cfg.graveyard.clone(),
            dep.to_string(),
            self.poster.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("lock-waiter".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                if fsutil::wait_lock_released(&graveyard, &name).is_ok() {
                    poster.post(Event::LockReleased(name));
                }
            });
        match spawned {
            Ok(_) => {
                self.lock_waiters.insert(dep.to_string());
            }
            Err(e) => warn!(
                dep,
                "cannot start a lock waiter ({e}); relying on events and polling"
            ),
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
                move |ev| {
                    poster.post(match ev {
                        crate::api::ApiEvent::Ready(r) => Event::ApiReady(r),
                        crate::api::ApiEvent::Fatal(m) => Event::ApiFatal(m),
                    })
                },
            )
            .map_err(|e| SetupError(format!("cannot start the API watch thread: {e}")))
        }
        #[cfg(not(feature = "api"))]
        {
            let _ = pod;
            Err(SetupError(
                "invalid KUBEXIT_POD_NAME: this sexton was built without the `api` feature, so birth dependencies cannot be read from the Kubernetes API; unset KUBEXIT_POD_NAME/KUBEXIT_NAMESPACE to use tombstones".into(),
            ))
        }
    }

    /// The readiness probe succeeded: record `Ready`.
    fn on_ready(&mut self) {
        if self.child.is_some() && self.tombstone.ready.is_none() && self.tombstone.died.is_none() {
            self.tombstone.ready = Some(Utc::now());
            self.write_tombstone();
            info!("child is ready");
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
                match probe.check(timeout) {
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
                let state = classify(Some(&t), || {
                    match fsutil::lock_state(self.graveyard(), name) {
                        // a free lock says nothing where flock does not work
                        Lock::Free if !self.locks_work => Lock::Unknown,
                        lock => lock,
                    }
                });
                if matches!(state, DepState::Alive { .. }) && t.born.is_some() {
                    self.watch_lock(name);
                }
                if state == (DepState::Dead { exit_code: None })
                    && !t.is_dead()
                    && self.core.dep_state(name) != &state
                {
                    // Born, never recorded its death, and its supervisor's lock is free: the
                    // whole container was killed (OOM, SIGKILL after the grace period).
                    warn!(
                        dep = name,
                        "{name:?} was born but its supervisor is gone (lock released) without recording its death: treating it as dead, exit code unknown"
                    );
                }
                state
            }
            Lookup::Bad(why) => {
                if self.bad.get(name) != Some(&why) {
                    warn!(
                        dep = name,
                        "tombstone of {name:?} is not usable yet ({why}); treating it as not dead and re-reading on the next change"
                    );
                    self.bad.insert(name.to_string(), why);
                }
                DepState::Unreadable
            }
        }
    }

    fn write_tombstone(&self) {
        // a death is waited for by others: make it visible before making it durable
        let write = if self.tombstone.died.is_some() {
            fsutil::atomic_write_urgent
        } else {
            fsutil::atomic_write
        };
        if let Err(e) = write(
            self.graveyard(),
            &self.cfg.name,
            &self.tombstone.encode(),
            0o644,
        ) {
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
                        // a fresh record: a restarted container replaces its old tombstone
                        self.tombstone = Tombstone {
                            born: Some(now),
                            ..Tombstone::default()
                        };
                        if self.cfg.ready_probe.is_none() {
                            self.tombstone.ready = Some(now);
                        }
                        self.write_tombstone();
                        info!(pid = child.pid.as_raw(), command = ?self.cfg.command, "started child");
                        self.start_probe();
                    }
                    Err((failure, detail)) => {
                        error!("{detail}");
                        queue.extend(self.core.on_spawn_failed(failure, detail));
                    }
                },
                Action::Signal { signal, group, why } => {
                    if let Some(child) = &self.child {
                        // signal first, log after: formatting is not on the critical path
                        let sent = process::send(child, signal, group);
                        info!(
                            signal = signal.as_str(),
                            pid = child.pid.as_raw(),
                            process_group = group,
                            "sending {} to the child: {why}",
                            signal.as_str()
                        );
                        if let Err(e) = sent {
                            error!("cannot send {}: {e}", signal.as_str());
                        }
                    }
                }
                Action::Kill { why } => {
                    if let Some(child) = &self.child {
                        warn!(
                            pgid = child.pgid.as_raw(),
                            "sending SIGKILL to the child's process group: {why}"
                        );
                        process::kill_all(child);
                    }
                }
                Action::Finish(outcome) => return Some(self.finish(outcome)),
            }
        }
        None
    }

    fn finish(&mut self, o: Outcome) -> i32 {
        self.probe_stop.store(true, Ordering::Relaxed);
        let t = &mut self.tombstone;
        t.died = Some(Utc::now());
        t.exit_code = Some(o.exit_code);
        t.signal = o.child_signal.map(|s| s.as_str().to_string());
        t.reason = Some(o.reason.as_str().to_string());
        t.death_dep = o.death_dep.clone();
        self.write_tombstone();
        info!(
            exit_code = o.exit_code,
            reason = o.reason.as_str(),
            "{}",
            o.message
        );
        // After `Died` is recorded (dependents react at once), tell local proxies to quit.
        for url in &self.cfg.shutdown_hooks {
            run_hook(url, self.cfg.shutdown_hook_timeout);
        }
        // Final sweep so no zombie outlives us when we are not PID 1.
        let _ = process::reap(None);
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
