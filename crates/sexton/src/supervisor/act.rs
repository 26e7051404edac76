//! Carrying out the core's actions: record and start the child, run the preStop hook,
//! signal and kill, and finish (the death recorded, the shutdown hooks called). Each
//! reports back to the core; the notes of its decisions are said first.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tracing::{debug, error, info, warn};

use super::Supervisor;
use super::notes::say;
use crate::events::Event;
use crate::observe::read_once;
use crate::process;
use sexton_core::duration::format_go_duration;
use sexton_core::machine::{Action, DepState, Outcome, Phase, Reason};
use sexton_core::pre_stop::PreStop;
use sexton_core::shutdown::hooks_due;
use sexton_core::signal::Signal;

impl Supervisor {
    /// Carries out actions, each after the notes of the decisions so far; returns the exit
    /// code once the container is to end.
    pub(super) fn execute(&mut self, actions: Vec<Action>) -> Option<i32> {
        let mut queue: VecDeque<Action> = actions.into();
        loop {
            // why the core decided, before what it decided is done
            for note in self.core.take_notes() {
                say(&note);
            }
            let action = queue.pop_front()?;
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
    }

    /// Records `Born` durably, then starts the child, unless a stop signal came first;
    /// `Ready` once it runs (unless a probe decides).
    pub(super) fn spawn_child(&mut self, now: Instant) -> Vec<Action> {
        if let Err(e) = self.record.record_birth() {
            let path = self.settings.graveyard.join(&self.settings.name);
            return self
                .core
                .on_birth_not_recorded(format!("{}: {e}", path.display()));
        }
        self.rewatch_own_files(); // (the record exists from now on)
        self.start_child(None, now)
    }

    /// Starts the child again (KUBEXIT_RESTART_CHILD): the restart count into the
    /// tombstone (Born and Ready stay), then the child.
    pub(super) fn restart_child(&mut self, count: u32, now: Instant) -> Vec<Action> {
        if let Err(e) = self.record.record_restart(count) {
            warn!(
                "cannot record the restart count in the graveyard {}: {e}",
                self.settings.graveyard.display()
            );
        }
        self.start_child(Some(count), now)
    }

    /// Starts the child, unless a stop signal came first (while Born or the restart count
    /// was written); `Ready` after the first start, unless a probe decides.
    pub(super) fn start_child(&mut self, restart: Option<u32>, now: Instant) -> Vec<Action> {
        let mut actions = self.pending_signals(now);
        if self.core.phase() != &Phase::Starting {
            return actions;
        }
        match process::spawn(&self.settings.command, true) {
            Ok(child) => {
                self.child = Some(child);
                let pid = child.pid.as_raw();
                match restart {
                    None => info!(pid, command = ?self.settings.command, "started child"),
                    Some(n) => info!(pid, restarts = n, "restarted child (restart {n})"),
                }
                match (restart, &self.settings.ready_probe) {
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
    pub(super) fn run_pre_stop(&mut self, now: Instant) -> Vec<Action> {
        let Some(hook) = self.core.policy().contract.pre_stop.clone() else {
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

    pub(super) fn send(&self, signal: Signal, group: bool, why: &str) {
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

    pub(super) fn kill(&mut self, why: &str) -> Vec<Action> {
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

    pub(super) fn finish(&mut self, o: Outcome) -> i32 {
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
                self.settings.graveyard.join(&self.settings.name).display()
            ),
            Ok(()) => {}
        }
        // After `Died` is recorded (dependents react at once), tell local proxies to quit:
        // unless the hooks wait for other containers too, or for successes only.
        self.shutdown_hooks(o.exit_code);
        // A preStop hook still running is not left behind (as PID 1 the kernel would end it).
        if let Some(h) = self.hook.take() {
            let _ = process::kill_all(&h);
        }
        // Final sweep so no zombie outlives us when we are not PID 1.
        let _ = process::reap(None, None);
        o.exit_code
    }
}

impl Supervisor {
    /// The shutdown hooks, if they are due (sexton-core's `shutdown::hooks_due`): the
    /// containers they wait for are read now, once this one's death is recorded.
    fn shutdown_hooks(&self, exit_code: i32) {
        let s = &self.settings;
        if s.shutdown_hooks.is_empty() {
            return;
        }
        let after: Vec<(String, DepState)> = s
            .shutdown_hooks_after
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    read_once(&s.graveyard, n, self.record.locks_work()),
                )
            })
            .collect();
        if let Err(skip) = hooks_due(s.shutdown_hooks_on, exit_code, &after) {
            info!("{}", skip.explain());
            return;
        }
        for url in &s.shutdown_hooks {
            run_hook(url, s.shutdown_hook_timeout);
        }
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
