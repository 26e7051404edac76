//! The supervisor's event loop: feeds observations into the pure `Core` and carries out
//! its actions. One thread waits in `ppoll` on a signalfd (the handled signals are blocked
//! and read from it), the graveyard's inotify descriptor and an eventfd through which the
//! few helper threads (readiness probe, lock waiters, API watch) post events. No hop
//! between threads on the path from a death to the signal sent.
//!
//! Here: the set-up (`run`), the loop and its wait. The loop's other concerns live beside
//! it: `signals.rs` (the signalfd: signals and reaped children), `graveyard.rs` (the watch,
//! the poll, reading dependencies, a lost graveyard put back), `helpers.rs` (the threads:
//! readiness probe, API watch, and what they post), `act.rs` (carrying out the core's
//! actions), `notes.rs` (logging why the core decided, as it says), `settings.rs` (what the
//! glue keeps of the configuration).

mod act;
mod graveyard;
mod helpers;
mod notes;
mod settings;
mod signals;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::time::TimeSpec;
use tracing::{error, info, warn};

use crate::events::{Event, Poster};
use crate::files::Watched;
use crate::observe::Observer;
use crate::process::{self, Child};
use crate::record::OwnRecord;
use crate::setup_error::SetupError;
use crate::sigfd::Signals;
use crate::watch::GraveyardWatcher;
use settings::{Settings, split};
use sexton_core::config::Config;
use sexton_core::machine::Core;

pub struct Supervisor {
    /// What the glue needs of the configuration; the rules are the core's `Policy`.
    settings: Settings,
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
    let (policy, settings) = split(cfg, pid1);
    let record = OwnRecord::open(&settings.graveyard, &settings.name)?;
    let locks_work = record.locks_work();
    let core = Core::new(policy);
    let watched = core.watched();
    let (watcher, poll) = Supervisor::start_watch(&settings, !watched.is_empty())?;
    let graveyard = Watched::new(&settings.graveyard);
    let always_poll = watcher.is_none();
    let mut sup = Supervisor {
        observer: Observer::new(&settings.graveyard, &watched, locks_work, poster.clone()),
        graveyard_id: graveyard.dir_identity(),
        graveyard,
        core,
        settings,
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

/// Which descriptors `ppoll` found ready.
struct Wake {
    signals: bool,
    inotify: bool,
    events: bool,
}

impl Supervisor {
    fn run_loop(&mut self) -> i32 {
        let policy = self.core.policy();
        info!(
            death_deps = ?policy.death_deps,
            birth_deps = ?policy.birth_deps,
            graveyard = %self.settings.graveyard.display(),
            "supervisor starting"
        );
        let now = Instant::now();
        let scanned = self.rescan(now);
        debug_assert!(scanned.is_empty(), "nothing is decided before start");
        // a stop signal that arrived during setup (the lock wait) wins over the start
        let mut actions = self.pending_signals(now);
        actions.extend(self.core.start(now));
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
}
