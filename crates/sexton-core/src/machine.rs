//! The supervisor's decision logic, with no I/O: it is told what was observed (dependency
//! states, signals, the child's fate, the clock) and answers with actions for the OS glue
//! to carry out (spawn, signal, kill, finish with an exit code). Every rule of the
//! behaviour spec that is a decision lives here and is table- and property-tested below.
//!
//! Invariants (checked by the property tests):
//! - the child is signalled only between its spawn and the reaping of its status;
//! - while the child is being stopped there is always a deadline, so every run ends;
//! - a dependency seen dead stays dead (a later record may only update its exit code);
//! - the exit code follows the documented rules.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::config::{Config, DeathTrigger, DepExitCode};
pub use crate::signal::Signal;
use crate::tombstone::Tombstone;

/// How long to wait for the child's exit after SIGKILL before giving up on it. The kernel
/// acts on SIGKILL at once unless the process sleeps uninterruptibly (a hung NFS read).
pub const KILL_WAIT: Duration = Duration::from_secs(2);

/// What a dependency's lock says (see the in-pod `locks::lock_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    Held,
    Free,
    /// No lock file (not started yet, or a kubexit container), it cannot be opened, or
    /// locks do not work on the graveyard's filesystem: says nothing.
    Unknown,
}

/// What a dependency's tombstone file holds.
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    Absent,
    /// Exists but cannot be used (partial, garbage, not a regular file, too large).
    Unreadable,
    Found(&'a Tombstone),
}

/// The rule that turns a tombstone record and the lock into a dependency state:
/// - `Died` in the tombstone: dead, with its exit code;
/// - otherwise a lock file that exists and is free: dead, exit code unknown. Lock files
///   are created locked and only then linked into place (the in-pod `locks::acquire_lock`), so a
///   free one proves that a supervisor held it and is gone: killed before it could record
///   its death, even before it wrote `Born` (no grace period is needed for that);
/// - otherwise no tombstone: not started yet; an unreadable one: not dead, not ready;
///   `Born` without `Died`: alive.
///
/// The lock is only probed when the tombstone does not decide alone (`lock` is lazy).
pub fn classify(record: Record<'_>, lock: impl FnOnce() -> Lock) -> DepState {
    match record {
        Record::Found(t) if t.is_dead() => DepState::Dead {
            exit_code: t.exit_code,
        },
        _ if lock() == Lock::Free => DepState::Dead { exit_code: None },
        Record::Absent => DepState::Absent,
        Record::Unreadable => DepState::Unreadable,
        Record::Found(t) => DepState::Alive {
            ready: t.ready.is_some(),
        },
    }
}

/// What the graveyard (and lock) says about a dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepState {
    /// No tombstone: not started yet.
    Absent,
    /// A tombstone that cannot be read (empty, partial, garbage): not dead, not ready.
    Unreadable,
    Alive {
        ready: bool,
    },
    /// Died; the exit code is unknown when its wrapper could not record it.
    Dead {
        exit_code: Option<i32>,
    },
}

impl DepState {
    /// A state seen dead stays dead: a tombstone that disappears (graveyard wiped), a
    /// lock file that is gone or an unreadable record does not bring a dependency back.
    /// A later observation may bring a newer death record (a restarted container died
    /// again) or fill in an unknown exit code; and where restarts are expected
    /// (`restarts`: KUBEXIT_DEATH_TRIGGER=success, for restartPolicy OnFailure) a failed
    /// dependency that is alive again was restarted.
    fn merge(&self, new: DepState, restarts: bool) -> DepState {
        match (self, new) {
            (DepState::Dead { exit_code: Some(c) }, DepState::Dead { exit_code: None }) => {
                DepState::Dead {
                    exit_code: Some(*c),
                }
            }
            (DepState::Dead { .. }, new @ DepState::Dead { .. }) => new,
            (DepState::Dead { exit_code }, new @ DepState::Alive { .. })
                if restarts && *exit_code != Some(0) =>
            {
                new
            }
            (old @ DepState::Dead { .. }, _) => old.clone(),
            (_, new) => new,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildStatus {
    Exited(i32),
    /// Killed by this signal (any number, real-time ones included).
    Signaled(Signal),
}

impl ChildStatus {
    /// The shell convention: the exit code, or 128+N when killed by signal N.
    pub fn code(self) -> i32 {
        match self {
            ChildStatus::Exited(c) => c,
            ChildStatus::Signaled(s) => 128 + s.number(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnFailure {
    NotFound,
    NotExecutable,
}

/// Why this container ended; recorded in the tombstone's `Reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The child exited by itself.
    Exited,
    /// The child was killed by a signal not sent because of a dependency.
    Signaled,
    /// A death dependency died and the child was stopped.
    StoppedByDependency,
    /// A death dependency was already dead (or died while waiting for birth deps): the
    /// child was never started.
    DependencyDeadBeforeStart,
    /// Terminated by a signal while waiting to start: the child was never started.
    TerminatedBeforeStart,
    /// Birth dependencies were not ready in time: the child was never started.
    BirthTimeout,
    /// A birth dependency died (or its container terminated) before it was ready: the
    /// child was never started.
    BirthDependencyDied,
    /// A birth dependency is not a container of this pod: the child was never started.
    BirthDependencyUnknown,
    /// The Kubernetes API refused to tell whether birth dependencies are ready (403 and
    /// the like): the child was never started.
    BirthApiError,
    /// `Born` could not be recorded in the graveyard (full, read-only, a directory in the
    /// way): the child was never started, since peers could not see it.
    BirthNotRecorded,
    /// The command could not be executed.
    SpawnFailed,
    /// The child could not be stopped (it runs with other credentials, or does not die
    /// on SIGKILL) and sexton, not being PID 1, exited leaving it behind.
    ChildNotStopped,
}

impl Reason {
    /// Whether this end is a failure someone must fix (logged as an error), rather than
    /// the child's own fate or an orderly stop.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Reason::BirthTimeout
                | Reason::BirthDependencyDied
                | Reason::BirthDependencyUnknown
                | Reason::BirthApiError
                | Reason::BirthNotRecorded
                | Reason::SpawnFailed
                | Reason::ChildNotStopped
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Exited => "exited",
            Reason::Signaled => "signaled",
            Reason::StoppedByDependency => "stopped-by-dependency",
            Reason::DependencyDeadBeforeStart => "dependency-dead-before-start",
            Reason::TerminatedBeforeStart => "terminated-before-start",
            Reason::BirthTimeout => "birth-timeout",
            Reason::BirthDependencyDied => "birth-dependency-died",
            Reason::BirthDependencyUnknown => "birth-dependency-unknown",
            Reason::BirthApiError => "birth-api-error",
            Reason::BirthNotRecorded => "birth-not-recorded",
            Reason::SpawnFailed => "spawn-failed",
            Reason::ChildNotStopped => "child-not-stopped",
        }
    }
}

/// How the container ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub exit_code: i32,
    pub reason: Reason,
    /// The signal that killed the child, if any.
    pub child_signal: Option<Signal>,
    pub death_dep: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record `Born` durably, then start the child; report with `on_spawned`,
    /// `on_spawn_failed` or `on_birth_not_recorded`.
    Spawn,
    /// Send `signal` to the child (or its process group when `group`).
    Signal {
        signal: Signal,
        group: bool,
        why: String,
    },
    /// SIGKILL the child's process group (grace period over); report a failure with
    /// `on_kill_failed`.
    Kill { why: String },
    /// Record the death and exit with the outcome's code.
    Finish(Outcome),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub death_deps: Vec<String>,
    pub birth_deps: Vec<String>,
    pub grace_period: Duration,
    pub birth_timeout: Duration,
    pub term_signal: Signal,
    pub signal_group: bool,
    pub dep_exit_code: DepExitCode,
    pub death_trigger: DeathTrigger,
    /// Readiness of birth deps comes from the pod's status in the Kubernetes API
    /// (`containerStatuses[].ready`), not from tombstones.
    pub birth_via_api: bool,
    /// sexton is PID 1 of its PID namespace: when it exits, the kernel kills every other
    /// process of the namespace, the child included.
    pub pid1: bool,
}

impl Policy {
    pub fn from_config(c: &Config, pid1: bool) -> Policy {
        Policy {
            death_deps: c.death_deps.clone(),
            birth_deps: c.birth_deps.clone(),
            grace_period: c.grace_period,
            birth_timeout: c.birth_timeout,
            term_signal: c.term_signal,
            signal_group: c.signal_group,
            dep_exit_code: c.dep_exit_code,
            death_trigger: c.death_trigger,
            birth_via_api: c.pod.is_some() && !c.birth_deps.is_empty(),
            pid1,
        }
    }
}

/// The pod as the Kubernetes API shows it, for birth dependencies in API mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodView {
    /// Names of every container of the pod spec (init containers included); empty when
    /// the spec was not seen.
    pub containers: Vec<String>,
    /// Containers whose status says `ready: true`.
    pub ready: Vec<String>,
    /// Containers whose current state is `terminated`, with the exit code.
    pub terminated: Vec<(String, Option<i32>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Observing the graveyard before deciding to start.
    Created,
    WaitingBirth {
        deadline: Instant,
    },
    /// `Spawn` was asked for; the glue records `Born` and starts the child.
    Starting,
    Running,
    Stopping {
        dep: String,
        kill_at: Instant,
        killed: bool,
        /// After SIGKILL (sent or refused): when to stop waiting for the child.
        give_up_at: Option<Instant>,
    },
    Finished,
}

#[derive(Debug)]
pub struct Core {
    policy: Policy,
    phase: Phase,
    deps: BTreeMap<String, DepState>,
    /// Birth deps the API says are ready (when `birth_via_api`).
    api_ready: BTreeSet<String>,
    /// Why the API could not be read so far, until it answers once.
    api_problem: Option<String>,
}

impl Core {
    pub fn new(policy: Policy) -> Core {
        Core {
            policy,
            phase: Phase::Created,
            deps: BTreeMap::new(),
            api_ready: Default::default(),
            api_problem: None,
        }
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Every dependency whose tombstone this container watches (death deps, and birth
    /// deps unless their readiness comes from the API), each once.
    pub fn watched(&self) -> Vec<String> {
        let mut v = self.policy.death_deps.clone();
        for b in self.tombstone_birth_deps() {
            if !v.contains(b) {
                v.push(b.clone());
            }
        }
        v
    }

    /// Whether `name`'s tombstone matters to this container (without building the list:
    /// asked on every graveyard event).
    pub fn is_watched(&self, name: &str) -> bool {
        self.policy
            .death_deps
            .iter()
            .chain(self.tombstone_birth_deps())
            .any(|d| d == name)
    }

    /// Whether the child has not been started yet (birth dependencies may still be read).
    pub fn before_start(&self) -> bool {
        matches!(self.phase, Phase::Created | Phase::WaitingBirth { .. })
    }

    /// Whether a dependency's lock is worth a waiting thread now: a death dependency
    /// before the child has ended, or a birth dependency still waited for. (Also: the
    /// dependencies whose changes the watch and the poll must see.)
    pub fn wants_lock_watch(&self, name: &str) -> bool {
        let waiting = matches!(self.phase, Phase::Created | Phase::WaitingBirth { .. });
        let live = waiting || matches!(self.phase, Phase::Starting | Phase::Running);
        (live && self.is_death_dep(name))
            || (waiting && self.tombstone_birth_deps().iter().any(|d| d == name))
    }

    fn is_death_dep(&self, name: &str) -> bool {
        self.policy.death_deps.iter().any(|d| d == name)
    }

    /// Birth deps whose readiness comes from their tombstones (none in API mode).
    fn tombstone_birth_deps(&self) -> &[String] {
        if self.policy.birth_via_api {
            &[]
        } else {
            &self.policy.birth_deps
        }
    }

    pub fn dep_state(&self, name: &str) -> &DepState {
        self.deps.get(name).unwrap_or(&DepState::Absent)
    }

    /// The next instant at which `tick` has something to do.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::WaitingBirth { deadline } => Some(*deadline),
            Phase::Stopping {
                kill_at,
                killed: false,
                ..
            } => Some(*kill_at),
            Phase::Stopping { give_up_at, .. } => *give_up_at,
            _ => None,
        }
    }

    /// Does this dependency state count as the death of a death dependency?
    fn is_trigger(&self, s: &DepState) -> bool {
        matches!(
            (s, self.policy.death_trigger),
            (DepState::Dead { .. }, DeathTrigger::Any)
                | (DepState::Dead { exit_code: Some(0) }, DeathTrigger::Success)
        )
    }

    fn dead_death_dep(&self) -> Option<String> {
        self.policy
            .death_deps
            .iter()
            .find(|d| self.is_trigger(self.dep_state(d)))
            .cloned()
    }

    /// Whether restarts of failed containers are expected (KUBEXIT_DEATH_TRIGGER=success
    /// is for restartPolicy OnFailure).
    fn restarts(&self) -> bool {
        self.policy.death_trigger == DeathTrigger::Success
    }

    /// A birth dependency (read from tombstones) whose death is final: it will not become
    /// ready. Where restarts are expected, only an exit with 0 is final.
    fn dead_birth_dep(&self) -> Option<String> {
        self.tombstone_birth_deps()
            .iter()
            .find(|d| match self.dep_state(d) {
                DepState::Dead { exit_code } => !self.restarts() || *exit_code == Some(0),
                _ => false,
            })
            .cloned()
    }

    /// Birth deps not ready yet, in configured order.
    pub fn not_ready(&self) -> Vec<String> {
        self.policy
            .birth_deps
            .iter()
            .filter(|d| {
                if self.policy.birth_via_api {
                    !self.api_ready.contains(*d)
                } else {
                    !matches!(self.dep_state(d), DepState::Alive { ready: true })
                }
            })
            .cloned()
            .collect()
    }

    /// The API shows the pod: which containers exist, are ready, have terminated.
    pub fn on_pod(&mut self, pod: &PodView, _now: Instant) -> Vec<Action> {
        self.api_problem = None;
        self.api_ready = pod
            .ready
            .iter()
            .filter(|r| self.policy.birth_deps.contains(r))
            .cloned()
            .collect();
        if !matches!(self.phase, Phase::WaitingBirth { .. }) {
            return vec![];
        }
        let unknown = self
            .policy
            .birth_deps
            .iter()
            .find(|d| !pod.containers.is_empty() && !pod.containers.contains(d));
        if let Some(dep) = unknown {
            let msg = format!(
                "birth dependency {dep:?} is not a container of this pod (its containers: {}); fix KUBEXIT_BIRTH_DEPS; not starting the child",
                pod.containers.join(", ")
            );
            return self.not_started(Reason::BirthDependencyUnknown, 1, None, msg);
        }
        let ended = pod.terminated.iter().find(|(name, _)| {
            self.policy.birth_deps.contains(name) && !self.api_ready.contains(name)
        });
        if let Some((dep, code)) = ended {
            let msg = format!(
                "birth dependency {dep:?} terminated ({}) before it was ready; not starting the child",
                match code {
                    Some(c) => format!("exit code {c}"),
                    None => "exit code unknown".into(),
                }
            );
            return self.not_started(Reason::BirthDependencyDied, 1, None, msg);
        }
        if self.not_ready().is_empty() {
            self.spawn()
        } else {
            vec![]
        }
    }

    /// The API could not be reached (yet): remembered for the birth-timeout message.
    pub fn on_api_unreachable(&mut self, problem: String) {
        self.api_problem = Some(problem);
    }

    /// The API cannot be asked (forbidden, misconfigured): waiting would only end in the
    /// birth timeout, so end now without starting the child.
    pub fn on_api_error(&mut self, message: String) -> Vec<Action> {
        match self.phase {
            Phase::Created | Phase::WaitingBirth { .. } => self.not_started(
                Reason::BirthApiError,
                1,
                None,
                format!("{message}; not starting the child"),
            ),
            _ => vec![],
        }
    }

    fn describe_dead(&self, dep: &str) -> String {
        format!("death dependency {dep:?} {}", self.describe_death(dep))
    }

    /// "died with exit code 3" or "died (exit code unknown)".
    fn describe_death(&self, dep: &str) -> String {
        match self.dep_state(dep) {
            DepState::Dead { exit_code: Some(c) } => format!("died with exit code {c}"),
            _ => "died (exit code unknown)".into(),
        }
    }

    fn code_when_stopped(&self, status: Option<ChildStatus>) -> i32 {
        match (self.policy.dep_exit_code, status) {
            (DepExitCode::Zero, _) => 0,
            (DepExitCode::Child, Some(s)) => s.code(),
            // never started, or never reaped: as if the termination signal had ended it
            (DepExitCode::Child, None) => 128 + self.policy.term_signal.number(),
        }
    }

    fn finish(&mut self, outcome: Outcome) -> Vec<Action> {
        self.phase = Phase::Finished;
        vec![Action::Finish(outcome)]
    }

    fn not_started(
        &mut self,
        reason: Reason,
        exit_code: i32,
        dep: Option<String>,
        message: String,
    ) -> Vec<Action> {
        self.finish(Outcome {
            exit_code,
            reason,
            child_signal: None,
            death_dep: dep,
            message,
        })
    }

    fn spawn(&mut self) -> Vec<Action> {
        self.phase = Phase::Starting;
        vec![Action::Spawn]
    }

    /// Ends the wait without starting the child if a death dependency or a birth
    /// dependency is dead; `when` says at which point (for the message).
    fn end_if_deps_dead(&mut self, when: &str) -> Option<Vec<Action>> {
        if let Some(dep) = self.dead_death_dep() {
            let msg = format!("{} {when}", self.describe_dead(&dep));
            let code = self.code_when_stopped(None);
            return Some(self.not_started(Reason::DependencyDeadBeforeStart, code, Some(dep), msg));
        }
        if let Some(dep) = self.dead_birth_dep() {
            let msg = format!(
                "birth dependency {dep:?} {} before it was ready; not starting the child",
                self.describe_death(&dep)
            );
            return Some(self.not_started(Reason::BirthDependencyDied, 1, None, msg));
        }
        None
    }

    /// Called once, after the first scan of the graveyard (and any signal already
    /// received) has been fed in.
    pub fn start(&mut self, now: Instant) -> Vec<Action> {
        if self.phase != Phase::Created {
            return vec![];
        }
        if let Some(actions) =
            self.end_if_deps_dead("before the child was started; not starting it")
        {
            return actions;
        }
        if self.not_ready().is_empty() {
            return self.spawn();
        }
        self.phase = Phase::WaitingBirth {
            deadline: now + self.policy.birth_timeout,
        };
        vec![]
    }

    /// The child was started (after `Spawn`).
    pub fn on_spawned(&mut self, now: Instant) -> Vec<Action> {
        if self.phase != Phase::Starting {
            return vec![];
        }
        self.phase = Phase::Running;
        match self.dead_death_dep() {
            Some(dep) => self.stop(dep, now),
            None => vec![],
        }
    }

    /// `Born` could not be recorded: peers could never see this container, so the child
    /// is not started.
    pub fn on_birth_not_recorded(&mut self, problem: String) -> Vec<Action> {
        if self.phase != Phase::Starting {
            return vec![];
        }
        let msg = format!("cannot record Born in the graveyard: {problem}; not starting the child");
        self.not_started(Reason::BirthNotRecorded, 2, None, msg)
    }

    /// A dependency's state was (re-)read.
    pub fn on_dep(&mut self, name: &str, state: DepState, now: Instant) -> Vec<Action> {
        if !self.is_watched(name) {
            return vec![];
        }
        let state = self.dep_state(name).merge(state, self.restarts());
        self.deps.insert(name.to_string(), state.clone());
        let fired = self.is_death_dep(name) && self.is_trigger(&state);
        match self.phase {
            Phase::Created | Phase::Starting | Phase::Finished | Phase::Stopping { .. } => {
                vec![]
            }
            Phase::WaitingBirth { .. } => {
                if let Some(actions) = self.end_if_deps_dead(
                    "while waiting for birth dependencies; not starting the child",
                ) {
                    return actions;
                }
                if self.not_ready().is_empty() {
                    self.spawn()
                } else {
                    vec![]
                }
            }
            Phase::Running if fired => self.stop(name.to_string(), now),
            Phase::Running => vec![],
        }
    }

    /// A death dependency died while the child runs: the termination signal now, SIGKILL
    /// after the grace period.
    fn stop(&mut self, dep: String, now: Instant) -> Vec<Action> {
        let why = self.describe_dead(&dep);
        self.phase = Phase::Stopping {
            dep,
            kill_at: now + self.policy.grace_period,
            killed: false,
            give_up_at: None,
        };
        let mut actions = vec![Action::Signal {
            signal: self.policy.term_signal,
            group: self.policy.signal_group,
            why,
        }];
        actions.extend(self.tick(now));
        actions
    }

    /// A signal arrived for the wrapper (SIGCHLD is handled by the glue, never here).
    pub fn on_signal(&mut self, sig: Signal, _now: Instant) -> Vec<Action> {
        match self.phase {
            Phase::Created | Phase::WaitingBirth { .. } | Phase::Starting => {
                if sig.ends_wait() {
                    let msg =
                        format!("received {sig} before the child was started; not starting it");
                    self.not_started(Reason::TerminatedBeforeStart, 128 + sig.number(), None, msg)
                } else {
                    vec![]
                }
            }
            Phase::Running | Phase::Stopping { .. } if sig.is_forwarded() => {
                vec![Action::Signal {
                    signal: sig,
                    group: self.policy.signal_group,
                    why: format!("forwarding {sig}"),
                }]
            }
            _ => vec![],
        }
    }

    /// Timers: birth timeout, end of the grace period, end of the wait after SIGKILL.
    pub fn tick(&mut self, now: Instant) -> Vec<Action> {
        match self.phase.clone() {
            Phase::WaitingBirth { deadline } if now >= deadline => {
                let missing = self.not_ready().join(", ");
                let mut msg = format!(
                    "birth dependencies not ready after {}: {missing}",
                    crate::duration::format_go_duration(self.policy.birth_timeout)
                );
                if let Some(problem) = &self.api_problem {
                    msg.push_str(&format!(
                        "; the Kubernetes API was never reached ({problem})"
                    ));
                }
                msg.push_str("; not starting the child");
                self.not_started(Reason::BirthTimeout, 1, None, msg)
            }
            Phase::Stopping {
                dep,
                kill_at,
                killed: false,
                ..
            } if now >= kill_at => {
                self.phase = Phase::Stopping {
                    dep,
                    kill_at,
                    killed: true,
                    give_up_at: Some(now + KILL_WAIT),
                };
                vec![Action::Kill {
                    why: format!(
                        "grace period of {} expired after {}",
                        crate::duration::format_go_duration(self.policy.grace_period),
                        self.policy.term_signal
                    ),
                }]
            }
            Phase::Stopping {
                dep,
                give_up_at: Some(t),
                ..
            } if now >= t => self.give_up(
                dep,
                format!(
                    "the child did not exit within {} after SIGKILL",
                    crate::duration::format_go_duration(KILL_WAIT)
                ),
            ),
            _ => vec![],
        }
    }

    /// SIGKILL could not be delivered (the child runs with other credentials). As PID 1,
    /// exiting ends the child anyway (the kernel kills the rest of the namespace), so end
    /// now; otherwise give the child a last moment to exit, then leave it behind.
    pub fn on_kill_failed(&mut self, problem: String, now: Instant) -> Vec<Action> {
        let Phase::Stopping { dep, kill_at, .. } = self.phase.clone() else {
            return vec![];
        };
        if self.policy.pid1 {
            return self.give_up(dep, format!("SIGKILL failed ({problem})"));
        }
        self.phase = Phase::Stopping {
            dep,
            kill_at,
            killed: true,
            give_up_at: Some(now + KILL_WAIT),
        };
        vec![]
    }

    /// The child cannot be stopped. As PID 1 the container ends with the code it would
    /// have had (the kernel kills the child when PID 1 exits); otherwise the child is left
    /// running, which is an error.
    fn give_up(&mut self, dep: String, why: String) -> Vec<Action> {
        if self.policy.pid1 {
            let exit_code = self.code_when_stopped(None);
            let message = format!(
                "child stopped because death dependency {dep:?} died, but {why}; exiting {exit_code} as PID 1, which makes the kernel kill the rest of the container"
            );
            return self.finish(Outcome {
                exit_code,
                reason: Reason::StoppedByDependency,
                child_signal: None,
                death_dep: Some(dep),
                message,
            });
        }
        let message = format!(
            "death dependency {dep:?} died, but the child could not be stopped: {why}; exiting 1 and leaving it running (sexton is not PID 1, so nothing else will end it)"
        );
        self.finish(Outcome {
            exit_code: 1,
            reason: Reason::ChildNotStopped,
            child_signal: None,
            death_dep: Some(dep),
            message,
        })
    }

    /// The child's own exit status was reaped.
    pub fn on_child_exit(&mut self, status: ChildStatus, _now: Instant) -> Vec<Action> {
        let child_signal = match status {
            ChildStatus::Signaled(s) => Some(s),
            ChildStatus::Exited(_) => None,
        };
        let outcome = match self.phase.clone() {
            Phase::Finished => return vec![],
            Phase::Stopping { dep, .. } => {
                let exit_code = self.code_when_stopped(Some(status));
                Outcome {
                    exit_code,
                    reason: Reason::StoppedByDependency,
                    child_signal,
                    message: format!(
                        "child stopped because death dependency {dep:?} died (child status {}); exiting {exit_code}",
                        describe_status(status)
                    ),
                    death_dep: Some(dep),
                }
            }
            _ => Outcome {
                exit_code: status.code(),
                reason: if child_signal.is_some() {
                    Reason::Signaled
                } else {
                    Reason::Exited
                },
                child_signal,
                death_dep: None,
                message: format!(
                    "child {}; exiting {}",
                    describe_status(status),
                    status.code()
                ),
            },
        };
        self.finish(outcome)
    }

    pub fn on_spawn_failed(&mut self, failure: SpawnFailure, detail: String) -> Vec<Action> {
        if self.phase != Phase::Starting {
            return vec![];
        }
        let exit_code = match failure {
            SpawnFailure::NotFound => 127,
            SpawnFailure::NotExecutable => 126,
        };
        self.finish(Outcome {
            exit_code,
            reason: Reason::SpawnFailed,
            child_signal: None,
            death_dep: None,
            message: detail,
        })
    }
}

pub fn describe_status(s: ChildStatus) -> String {
    match s {
        ChildStatus::Exited(c) => format!("exited with code {c}"),
        ChildStatus::Signaled(sig) => format!("was killed by {sig}"),
    }
}

#[cfg(test)]
mod tests;
