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
//!
//! The sidecar contract's rules (`contract.rs`: all deps, held stop signals, restarts,
//! preStop) are decided here too; with `Contract::default()` the machine is kubexit's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::config::{Config, DeathDepsMode, DeathTrigger, DepExitCode};
use crate::contract::{Backoff, Contract, Hold, MIN_GRACE_AFTER_HOOK};
use crate::pre_stop::PreStop;
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
    /// A stop signal came: held while death dependencies lived (KUBEXIT_HOLD_STOP) and
    /// the hold reached its bound, or none lived; or the child was not running (waiting
    /// to be restarted).
    StoppedBySignal,
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
            Reason::StoppedBySignal => "stopped-by-signal",
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
    /// Start the child again (it exited while its death dependencies live): record
    /// `count` restarts in the tombstone, then start it; report as for `Spawn`.
    Restart { count: u32 },
    /// Run the preStop hook (exec or HTTP; a `sleep` one is the core's own timer); report
    /// its end with `on_pre_stop_done`.
    RunPreStop,
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
    /// The sidecar contract's rules (off: kubexit's behaviour).
    pub contract: Contract,
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
            contract: Contract {
                all_deps: c.death_deps_mode == DeathDepsMode::All,
                hold: c.hold_stop.then_some(Hold {
                    pod_grace: c.pod_grace_period,
                }),
                restart: c.restart_child.then_some(Backoff {
                    base: c.restart_backoff,
                }),
                pre_stop: c.pre_stop.clone(),
            },
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
    /// The child exited while the death dependencies live (KUBEXIT_RESTART_CHILD): it is
    /// started again at `at`.
    Restarting {
        at: Instant,
    },
    /// A stop signal came while a death dependency lives (KUBEXIT_HOLD_STOP): held, not
    /// forwarded, until they all died or `until`.
    Holding {
        signal: Signal,
        until: Instant,
    },
    Stopping {
        cause: Cause,
        /// The preStop hook runs until then at the latest; the termination signal follows.
        hook_until: Option<Instant>,
        kill_at: Instant,
        killed: bool,
        /// After SIGKILL (sent or refused): when to stop waiting for the child.
        give_up_at: Option<Instant>,
    },
    Finished,
}

/// Why the child is being stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The death dependencies died, as the policy counts deaths; the one named completed it.
    Dependency(String),
    /// A stop signal. `bound`: it was held and the hold reached its bound with death
    /// dependencies still alive; otherwise none lived (any more).
    Signal { signal: Signal, bound: bool },
}

impl Cause {
    fn reason(&self) -> Reason {
        match self {
            Cause::Dependency(_) => Reason::StoppedByDependency,
            Cause::Signal { .. } => Reason::StoppedBySignal,
        }
    }

    fn dep(&self) -> Option<String> {
        match self {
            Cause::Dependency(d) => Some(d.clone()),
            Cause::Signal { .. } => None,
        }
    }
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
    /// The child runs: between a spawn and the reaping of its status.
    child_running: bool,
    /// How the child last exited.
    last_status: Option<ChildStatus>,
    /// When the child was last started.
    started_at: Option<Instant>,
    /// Restarts so far, and the back-off step of the last one.
    restarts: u32,
    backoff_step: Option<u32>,
    /// A stop signal was forwarded to the child: its exit is final, never restarted.
    stop_forwarded: bool,
}

impl Core {
    pub fn new(policy: Policy) -> Core {
        Core {
            policy,
            phase: Phase::Created,
            deps: BTreeMap::new(),
            api_ready: Default::default(),
            api_problem: None,
            child_running: false,
            last_status: None,
            started_at: None,
            restarts: 0,
            backoff_step: None,
            stop_forwarded: false,
        }
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How often the child was started again.
    pub fn restarts(&self) -> u32 {
        self.restarts
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
        let live = waiting
            || matches!(
                self.phase,
                Phase::Starting | Phase::Running | Phase::Restarting { .. } | Phase::Holding { .. }
            );
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
            Phase::Restarting { at } => Some(*at),
            Phase::Holding { until, .. } => Some(*until),
            Phase::Stopping {
                hook_until: Some(h),
                ..
            } => Some(*h),
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

    /// The death dependency whose death stops the child, once the policy says it does:
    /// the first that died (kubexit's `any`); under `all`, once every one died, the last
    /// of the list.
    fn dead_death_dep(&self) -> Option<String> {
        let deps = &self.policy.death_deps;
        if self.policy.contract.all_deps {
            let all = !deps.is_empty() && deps.iter().all(|d| self.is_trigger(self.dep_state(d)));
            return deps.last().filter(|_| all).cloned();
        }
        deps.iter()
            .find(|d| self.is_trigger(self.dep_state(d)))
            .cloned()
    }

    /// Death dependencies that live (started, not dead): what a held stop signal waits for.
    pub fn living_death_deps(&self) -> Vec<String> {
        self.policy
            .death_deps
            .iter()
            .filter(|d| {
                matches!(
                    self.dep_state(d),
                    DepState::Alive { .. } | DepState::Unreadable
                )
            })
            .cloned()
            .collect()
    }

    /// Whether restarts of failed containers are expected (KUBEXIT_DEATH_TRIGGER=success
    /// is for restartPolicy OnFailure).
    fn deps_may_restart(&self) -> bool {
        self.policy.death_trigger == DeathTrigger::Success
    }

    /// A birth dependency (read from tombstones) whose death is final: it will not become
    /// ready. Where restarts are expected, only an exit with 0 is final.
    fn dead_birth_dep(&self) -> Option<String> {
        self.tombstone_birth_deps()
            .iter()
            .find(|d| match self.dep_state(d) {
                DepState::Dead { exit_code } => !self.deps_may_restart() || *exit_code == Some(0),
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
        let mut s = format!("death dependency {dep:?} {}", self.describe_death(dep));
        if self.policy.contract.all_deps && self.policy.death_deps.len() > 1 {
            s.push_str(&format!(
                ", and with it all of {}",
                self.policy.death_deps.join(", ")
            ));
        }
        s
    }

    fn describe_cause(&self, cause: &Cause) -> String {
        match cause {
            Cause::Dependency(d) => self.describe_dead(d),
            Cause::Signal {
                signal,
                bound: true,
            } => format!(
                "{signal} was held while death dependencies lived ({}) until its bound, the pod's grace period of {} less this container's grace period and 1s",
                self.living_death_deps().join(", "),
                crate::duration::format_go_duration(
                    self.policy
                        .contract
                        .hold
                        .map_or(Duration::ZERO, |h| h.pod_grace)
                )
            ),
            Cause::Signal {
                signal,
                bound: false,
            } => format!("{signal} received and no death dependency lives"),
        }
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

    /// The child was started (after `Spawn` or `Restart`).
    pub fn on_spawned(&mut self, now: Instant) -> Vec<Action> {
        if self.phase != Phase::Starting {
            return vec![];
        }
        self.phase = Phase::Running;
        self.child_running = true;
        self.started_at = Some(now);
        match self.dead_death_dep() {
            Some(dep) => self.stop(Cause::Dependency(dep), now, true),
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
        let state = self.dep_state(name).merge(state, self.deps_may_restart());
        self.deps.insert(name.to_string(), state.clone());
        let fired = self.is_death_dep(name) && self.is_trigger(&state);
        let stops = fired && self.dead_death_dep().is_some();
        match self.phase.clone() {
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
            Phase::Running | Phase::Restarting { .. } if stops => {
                self.stop(Cause::Dependency(name.to_string()), now, true)
            }
            Phase::Running | Phase::Restarting { .. } => vec![],
            Phase::Holding { signal, .. } => {
                if self.dead_death_dep().is_some() || self.living_death_deps().is_empty() {
                    self.release(signal, now)
                } else {
                    vec![]
                }
            }
        }
    }

    /// Stops the child: the preStop hook first when the supervisor decides the stop itself
    /// (`run_hook`; on a signal the kubelet has run it), then the termination signal, then
    /// SIGKILL after the grace period. Without a running child (it waits to be restarted,
    /// or exited during a hold), the container ends at once.
    fn stop(&mut self, cause: Cause, now: Instant, run_hook: bool) -> Vec<Action> {
        if !self.child_running {
            return self.end_without_child(cause);
        }
        let kill_at = now + self.policy.grace_period;
        let hook = self.policy.contract.pre_stop.clone().filter(|_| run_hook);
        let hook_until = hook.as_ref().map(|h| match h {
            PreStop::Sleep(d) => (now + *d).min(kill_at),
            _ => kill_at,
        });
        let mut actions = match &hook {
            None => vec![self.term_action(&cause)],
            Some(PreStop::Sleep(_)) => vec![],
            Some(_) => vec![Action::RunPreStop],
        };
        self.phase = Phase::Stopping {
            cause,
            hook_until,
            kill_at,
            killed: false,
            give_up_at: None,
        };
        actions.extend(self.tick(now));
        actions
    }

    fn term_action(&self, cause: &Cause) -> Action {
        Action::Signal {
            signal: self.policy.term_signal,
            group: self.policy.signal_group,
            why: self.describe_cause(cause),
        }
    }

    /// The preStop hook ended (or its time is up): the termination signal, and at least
    /// `MIN_GRACE_AFTER_HOOK` before SIGKILL, as the kubelet gives.
    fn after_hook(&mut self, now: Instant) -> Vec<Action> {
        let Phase::Stopping {
            cause,
            hook_until: Some(_),
            kill_at,
            ..
        } = self.phase.clone()
        else {
            return vec![];
        };
        let mut actions = vec![self.term_action(&cause)];
        self.phase = Phase::Stopping {
            cause,
            hook_until: None,
            kill_at: kill_at.max(now + MIN_GRACE_AFTER_HOOK),
            killed: false,
            give_up_at: None,
        };
        actions.extend(self.tick(now));
        actions
    }

    /// The preStop hook (exec or HTTP) finished, whatever its result.
    pub fn on_pre_stop_done(&mut self, now: Instant) -> Vec<Action> {
        self.after_hook(now)
    }

    /// The container ends without a child to stop: exit code as if it had been stopped.
    fn end_without_child(&mut self, cause: Cause) -> Vec<Action> {
        let exit_code = self.code_when_stopped(self.last_status);
        let last = self
            .last_status
            .map_or("never ran".to_string(), describe_status);
        let message = format!(
            "{}; the child was not running (it {last}); exiting {exit_code}",
            self.describe_cause(&cause)
        );
        self.finish(Outcome {
            exit_code,
            reason: cause.reason(),
            child_signal: None,
            death_dep: cause.dep(),
            message,
        })
    }

    /// Whether the child is between two runs (a stop signal then means: no more runs).
    fn between_runs(&self) -> bool {
        matches!(self.phase, Phase::Restarting { .. })
            || (self.phase == Phase::Starting && self.restarts > 0)
    }

    /// A signal arrived for the wrapper (SIGCHLD is handled by the glue, never here).
    pub fn on_signal(&mut self, sig: Signal, now: Instant) -> Vec<Action> {
        let stop = sig.ends_wait();
        // (a container without death dependencies has nothing to hold for)
        let hold = self.policy.contract.hold.is_some() && !self.policy.death_deps.is_empty();
        match self.phase {
            _ if self.between_runs() => match (stop, hold) {
                (false, _) => vec![],
                (true, true) => self.hold(sig, now),
                (true, false) => self.end_without_child(Cause::Signal {
                    signal: sig,
                    bound: false,
                }),
            },
            Phase::Created | Phase::WaitingBirth { .. } | Phase::Starting => {
                if stop {
                    let msg =
                        format!("received {sig} before the child was started; not starting it");
                    self.not_started(Reason::TerminatedBeforeStart, 128 + sig.number(), None, msg)
                } else {
                    vec![]
                }
            }
            Phase::Running if stop && hold => self.hold(sig, now),
            Phase::Holding { .. } if stop => vec![], // held already
            Phase::Running | Phase::Stopping { .. } | Phase::Holding { .. }
                if sig.is_forwarded() && self.child_running =>
            {
                self.stop_forwarded |= stop;
                vec![Action::Signal {
                    signal: sig,
                    group: self.policy.signal_group,
                    why: format!("forwarding {sig}"),
                }]
            }
            _ => vec![],
        }
    }

    /// Ordered termination: a stop signal while death dependencies live is held until
    /// they died, at most until the bound that leaves the child its grace period inside
    /// the pod's (`Hold::until`).
    fn hold(&mut self, sig: Signal, now: Instant) -> Vec<Action> {
        let Some(hold) = self.policy.contract.hold else {
            return vec![];
        };
        let hook_time =
            (self.policy.contract.pre_stop.as_ref()).map_or(Duration::ZERO, PreStop::known_length);
        let until = hold.until(now, hook_time, self.policy.grace_period);
        let living = !self.living_death_deps().is_empty();
        if !living || until <= now {
            let cause = Cause::Signal {
                signal: sig,
                bound: living,
            };
            return self.stop(cause, now, false);
        }
        self.phase = Phase::Holding { signal: sig, until };
        vec![]
    }

    /// The hold ends because no death dependency lives any more (or one died, under `any`).
    fn release(&mut self, signal: Signal, now: Instant) -> Vec<Action> {
        let cause = match self.dead_death_dep() {
            Some(d) => Cause::Dependency(d),
            None => Cause::Signal {
                signal,
                bound: false,
            },
        };
        self.stop(cause, now, false)
    }

    /// Timers: birth timeout, restart back-off, the bound of a hold, the end of a preStop
    /// hook, of the grace period, of the wait after SIGKILL.
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
            Phase::Restarting { at } if now >= at => {
                self.phase = Phase::Starting;
                vec![Action::Restart {
                    count: self.restarts,
                }]
            }
            Phase::Holding { signal, until } if now >= until => {
                let cause = Cause::Signal {
                    signal,
                    bound: true,
                };
                self.stop(cause, now, false)
            }
            Phase::Stopping {
                hook_until: Some(h),
                ..
            } if now >= h => self.after_hook(now),
            Phase::Stopping {
                cause,
                hook_until: None,
                kill_at,
                killed: false,
                ..
            } if now >= kill_at => {
                self.phase = Phase::Stopping {
                    cause,
                    hook_until: None,
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
                cause,
                give_up_at: Some(t),
                ..
            } if now >= t => self.give_up(
                cause,
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
        let Phase::Stopping { cause, kill_at, .. } = self.phase.clone() else {
            return vec![];
        };
        if self.policy.pid1 {
            return self.give_up(cause, format!("SIGKILL failed ({problem})"));
        }
        self.phase = Phase::Stopping {
            cause,
            hook_until: None,
            kill_at,
            killed: true,
            give_up_at: Some(now + KILL_WAIT),
        };
        vec![]
    }

    /// The child cannot be stopped. As PID 1 the container ends with the code it would
    /// have had (the kernel kills the child when PID 1 exits); otherwise the child is left
    /// running, which is an error.
    fn give_up(&mut self, cause: Cause, why: String) -> Vec<Action> {
        let because = self.describe_cause(&cause);
        if self.policy.pid1 {
            let exit_code = self.code_when_stopped(None);
            let message = format!(
                "child stopped because {because}, but {why}; exiting {exit_code} as PID 1, which makes the kernel kill the rest of the container"
            );
            return self.finish(Outcome {
                exit_code,
                reason: cause.reason(),
                child_signal: None,
                death_dep: cause.dep(),
                message,
            });
        }
        let message = format!(
            "{because}, but the child could not be stopped: {why}; exiting 1 and leaving it running (sexton is not PID 1, so nothing else will end it)"
        );
        self.finish(Outcome {
            exit_code: 1,
            reason: Reason::ChildNotStopped,
            child_signal: None,
            death_dep: cause.dep(),
            message,
        })
    }

    /// The child's own exit status was reaped.
    pub fn on_child_exit(&mut self, status: ChildStatus, now: Instant) -> Vec<Action> {
        if self.phase == Phase::Finished {
            return vec![];
        }
        self.child_running = false;
        self.last_status = Some(status);
        let child_signal = match status {
            ChildStatus::Signaled(s) => Some(s),
            ChildStatus::Exited(_) => None,
        };
        let outcome = match self.phase.clone() {
            Phase::Stopping { cause, .. } => {
                let exit_code = self.code_when_stopped(Some(status));
                Outcome {
                    exit_code,
                    reason: cause.reason(),
                    child_signal,
                    message: format!(
                        "child stopped because {} (child status {}); exiting {exit_code}",
                        self.describe_cause(&cause),
                        describe_status(status)
                    ),
                    death_dep: cause.dep(),
                }
            }
            // held on: peers ordered after this container still wait for its end
            Phase::Holding { .. } => return vec![],
            Phase::Running if self.restart_due() => return self.schedule_restart(now),
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

    /// A native sidecar's restart: while its death dependencies live and no stop signal
    /// came.
    fn restart_due(&self) -> bool {
        self.policy.contract.restart.is_some()
            && !self.stop_forwarded
            && self.dead_death_dep().is_none()
    }

    /// The kubelet's back-off: at once, then 10 s doubling to 300 s, reset after 10 min.
    fn schedule_restart(&mut self, now: Instant) -> Vec<Action> {
        let Some(backoff) = self.policy.contract.restart else {
            return vec![];
        };
        let ran = self
            .started_at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let step = Backoff::next_step(self.backoff_step, ran);
        self.backoff_step = Some(step);
        self.restarts = self.restarts.saturating_add(1);
        self.phase = Phase::Restarting {
            at: now + backoff.delay(step),
        };
        self.tick(now)
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
mod tests {
    use super::*;

    #[test]
    fn classify_tombstone_and_lock() {
        let now = chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap();
        let born = Tombstone {
            born: Some(now),
            ..Default::default()
        };
        let ready = Tombstone {
            born: Some(now),
            ready: Some(now),
            ..Default::default()
        };
        let died = Tombstone {
            born: Some(now),
            died: Some(now),
            exit_code: Some(3),
            ..Default::default()
        };
        let died_no_born = Tombstone {
            died: Some(now),
            exit_code: Some(0),
            ..Default::default()
        };
        let no_born = Tombstone {
            ready: Some(now),
            ..Default::default()
        };
        let cases: &[(Option<&Tombstone>, Lock, DepState)] = &[
            // a free lock file alone: its supervisor started and is gone
            (None, Lock::Free, DepState::Dead { exit_code: None }),
            (None, Lock::Held, DepState::Absent),
            (None, Lock::Unknown, DepState::Absent),
            (Some(&born), Lock::Held, DepState::Alive { ready: false }),
            (Some(&born), Lock::Unknown, DepState::Alive { ready: false }), // kubexit dep
            (Some(&born), Lock::Free, DepState::Dead { exit_code: None }),
            (Some(&ready), Lock::Held, DepState::Alive { ready: true }),
            (Some(&ready), Lock::Free, DepState::Dead { exit_code: None }),
            (
                Some(&died),
                Lock::Held,
                DepState::Dead { exit_code: Some(3) },
            ),
            (
                Some(&died),
                Lock::Free,
                DepState::Dead { exit_code: Some(3) },
            ),
            (
                Some(&died_no_born),
                Lock::Unknown,
                DepState::Dead { exit_code: Some(0) },
            ),
            (
                Some(&no_born),
                Lock::Free,
                DepState::Dead { exit_code: None },
            ),
            (Some(&no_born), Lock::Held, DepState::Alive { ready: true }),
        ];
        for (t, lock, want) in cases {
            let record = t.map_or(Record::Absent, Record::Found);
            assert_eq!(&classify(record, || *lock), want, "{t:?} {lock:?}");
        }
        // an unreadable tombstone says nothing; a free lock beside it still proves death
        assert_eq!(
            classify(Record::Unreadable, || Lock::Held),
            DepState::Unreadable
        );
        assert_eq!(
            classify(Record::Unreadable, || Lock::Unknown),
            DepState::Unreadable
        );
        assert_eq!(
            classify(Record::Unreadable, || Lock::Free),
            DepState::Dead { exit_code: None }
        );
        // the lock is not probed when the tombstone decides alone
        classify(Record::Found(&died), || panic!("probed"));
    }

    fn policy() -> Policy {
        Policy {
            death_deps: vec!["main".into()],
            birth_deps: vec![],
            grace_period: Duration::from_secs(10),
            birth_timeout: Duration::from_secs(30),
            term_signal: Signal::SIGTERM,
            signal_group: false,
            dep_exit_code: DepExitCode::Zero,
            death_trigger: DeathTrigger::Any,
            birth_via_api: false,
            pid1: true,
            contract: Contract::default(),
        }
    }

    #[test]
    fn birth_deps_through_the_api() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into(), "db".into()],
            birth_via_api: true,
            ..policy()
        });
        assert_eq!(
            c.watched(),
            vec!["main"],
            "birth deps are not read from tombstones"
        );
        // tombstones say nothing about readiness in API mode
        c.on_dep("proxy", DepState::Alive { ready: true }, t0);
        assert!(c.start(t0).is_empty());
        assert_eq!(c.not_ready(), vec!["proxy", "db"]);
        assert!(c.on_pod(&pod(&["proxy", "unrelated"], &[]), t0).is_empty());
        assert_eq!(c.not_ready(), vec!["db"]);
        // readiness can be lost again
        assert!(c.on_pod(&pod(&["db"], &[]), t0).is_empty());
        assert_eq!(c.not_ready(), vec!["proxy"]);
        assert_eq!(
            c.on_pod(&pod(&["db", "proxy"], &[]), t0),
            vec![Action::Spawn]
        );
        // once running, API errors change nothing
        assert!(c.on_api_error("boom".into()).is_empty());
    }

    /// A pod with containers main, proxy, db and unrelated.
    fn pod(ready: &[&str], terminated: &[(&str, Option<i32>)]) -> PodView {
        PodView {
            containers: ["main", "proxy", "db", "unrelated"]
                .map(String::from)
                .to_vec(),
            ready: ready.iter().map(|s| s.to_string()).collect(),
            terminated: terminated
                .iter()
                .map(|(n, c)| (n.to_string(), *c))
                .collect(),
        }
    }

    #[test]
    fn api_birth_dep_terminated_or_unknown_ends_the_wait_at_once() {
        let t0 = Instant::now();
        let waiting = |deps: &[&str]| {
            let mut c = Core::new(Policy {
                birth_deps: deps.iter().map(|s| s.to_string()).collect(),
                birth_via_api: true,
                ..policy()
            });
            assert!(c.start(t0).is_empty());
            c
        };
        let o = finish(&waiting(&["proxy"]).on_pod(&pod(&[], &[("proxy", Some(127))]), t0)).clone();
        assert_eq!((o.reason, o.exit_code), (Reason::BirthDependencyDied, 1));
        assert!(
            o.message.contains("\"proxy\" terminated (exit code 127)"),
            "{}",
            o.message
        );
        let o = finish(&waiting(&["proxi"]).on_pod(&pod(&[], &[]), t0)).clone();
        assert_eq!((o.reason, o.exit_code), (Reason::BirthDependencyUnknown, 1));
        assert!(
            o.message.contains("\"proxi\" is not a container") && o.message.contains("main, proxy"),
            "{}",
            o.message
        );
        // a spec not seen yet (no container names) proves nothing
        assert!(
            waiting(&["proxi"])
                .on_pod(&PodView::default(), t0)
                .is_empty()
        );
        // an unrelated container's end changes nothing
        assert!(
            waiting(&["proxy"])
                .on_pod(&pod(&[], &[("db", Some(1))]), t0)
                .is_empty()
        );
    }

    #[test]
    fn api_never_reached_is_named_in_the_timeout() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into()],
            birth_via_api: true,
            ..policy()
        });
        c.start(t0);
        c.on_api_unreachable("https://10.0.0.1:443: connection refused".into());
        let o = finish(&c.tick(t0 + Duration::from_secs(30))).clone();
        assert!(
            o.message
                .contains("never reached (https://10.0.0.1:443: connection refused)"),
            "{}",
            o.message
        );
        // once it answered, the timeout is only about readiness
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into()],
            birth_via_api: true,
            ..policy()
        });
        c.start(t0);
        c.on_api_unreachable("refused".into());
        c.on_pod(&pod(&[], &[]), t0);
        let o = finish(&c.tick(t0 + Duration::from_secs(30))).clone();
        assert!(!o.message.contains("never reached"), "{}", o.message);
    }

    #[test]
    fn api_error_ends_the_wait() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into()],
            birth_via_api: true,
            ..policy()
        });
        c.start(t0);
        let o = finish(&c.on_api_error("forbidden: needs get, list, watch on pods".into())).clone();
        assert_eq!((o.reason, o.exit_code), (Reason::BirthApiError, 1));
        assert!(o.message.contains("forbidden") && o.message.contains("not starting"));
        // a timeout names the deps the API did not report ready
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into()],
            birth_via_api: true,
            ..policy()
        });
        c.start(t0);
        let o = finish(&c.tick(t0 + Duration::from_secs(30))).clone();
        assert!(o.message.contains("proxy"));
    }

    fn dead(code: Option<i32>) -> DepState {
        DepState::Dead { exit_code: code }
    }

    fn finish(actions: &[Action]) -> &Outcome {
        match actions {
            [Action::Finish(o)] => o,
            other => panic!("expected a single Finish, got {other:?}"),
        }
    }

    fn running(p: Policy) -> (Core, Instant) {
        let t0 = Instant::now();
        let mut c = Core::new(p);
        assert_eq!(c.start(t0), vec![Action::Spawn]);
        assert_eq!(c.phase(), &Phase::Starting);
        assert!(c.on_spawned(t0).is_empty());
        (c, t0)
    }

    #[test]
    fn starts_immediately_without_deps_in_the_way() {
        for state in [
            DepState::Absent,
            DepState::Unreadable,
            DepState::Alive { ready: false },
            DepState::Alive { ready: true },
        ] {
            let t0 = Instant::now();
            let mut c = Core::new(policy());
            assert!(c.on_dep("main", state.clone(), t0).is_empty());
            assert_eq!(c.start(t0), vec![Action::Spawn], "{state:?}");
            assert_eq!(c.phase(), &Phase::Starting);
            assert!(c.on_spawned(t0).is_empty());
            assert_eq!(c.phase(), &Phase::Running);
        }
    }

    #[test]
    fn dep_dead_before_start_does_not_start_child() {
        // (dep_exit_code, trigger, dep state) -> Some(exit code) if not started
        let cases = [
            (DepExitCode::Zero, DeathTrigger::Any, dead(Some(0)), Some(0)),
            (DepExitCode::Zero, DeathTrigger::Any, dead(Some(1)), Some(0)),
            (DepExitCode::Zero, DeathTrigger::Any, dead(None), Some(0)),
            (
                DepExitCode::Child,
                DeathTrigger::Any,
                dead(Some(1)),
                Some(143),
            ),
            (
                DepExitCode::Zero,
                DeathTrigger::Success,
                dead(Some(0)),
                Some(0),
            ),
            (
                DepExitCode::Zero,
                DeathTrigger::Success,
                dead(Some(1)),
                None,
            ),
            (DepExitCode::Zero, DeathTrigger::Success, dead(None), None),
        ];
        for (dec, trig, state, want) in cases {
            let t0 = Instant::now();
            let mut c = Core::new(Policy {
                dep_exit_code: dec,
                death_trigger: trig,
                ..policy()
            });
            c.on_dep("main", state.clone(), t0);
            let a = c.start(t0);
            match want {
                Some(code) => {
                    let o = finish(&a);
                    assert_eq!(o.exit_code, code, "{dec:?} {trig:?} {state:?}");
                    assert_eq!(o.reason, Reason::DependencyDeadBeforeStart);
                    assert_eq!(o.death_dep.as_deref(), Some("main"));
                    assert!(o.message.contains("\"main\""), "{}", o.message);
                }
                None => assert_eq!(a, vec![Action::Spawn], "{dec:?} {trig:?} {state:?}"),
            }
        }
    }

    #[test]
    fn death_dep_dies_then_term_then_kill_after_grace() {
        let (mut c, t0) = running(policy());
        assert!(
            c.on_dep("main", DepState::Alive { ready: true }, t0)
                .is_empty()
        );
        let a = c.on_dep("main", dead(Some(0)), t0);
        assert_eq!(a.len(), 1);
        assert!(
            matches!(&a[0], Action::Signal { signal: Signal::SIGTERM, group: false, why } if why.contains("exit code 0"))
        );
        assert_eq!(c.deadline(), Some(t0 + Duration::from_secs(10)));
        // repeated notifications do not signal again
        assert!(c.on_dep("main", dead(Some(0)), t0).is_empty());
        assert!(c.tick(t0 + Duration::from_secs(9)).is_empty());
        let a = c.tick(t0 + Duration::from_secs(10));
        assert!(matches!(&a[..], [Action::Kill { why }] if why.contains("10s")));
        assert_eq!(c.deadline(), Some(t0 + Duration::from_secs(10) + KILL_WAIT));
        assert!(c.tick(t0 + Duration::from_secs(11)).is_empty(), "kill once");
        let o = finish(&c.on_child_exit(ChildStatus::Signaled(Signal::SIGKILL), t0)).clone();
        assert_eq!(o.exit_code, 0);
        assert_eq!(o.reason, Reason::StoppedByDependency);
        assert_eq!(o.child_signal, Some(Signal::SIGKILL));
    }

    #[test]
    fn zero_grace_kills_at_once() {
        let (mut c, t0) = running(Policy {
            grace_period: Duration::ZERO,
            ..policy()
        });
        let a = c.on_dep("main", dead(Some(0)), t0);
        assert!(
            matches!(&a[..], [Action::Signal { .. }, Action::Kill { .. }]),
            "{a:?}"
        );
    }

    #[test]
    fn custom_term_signal_and_group() {
        let (mut c, t0) = running(Policy {
            term_signal: Signal::SIGINT,
            signal_group: true,
            ..policy()
        });
        let a = c.on_dep("main", dead(Some(3)), t0);
        assert!(matches!(
            &a[..],
            [Action::Signal {
                signal: Signal::SIGINT,
                group: true,
                ..
            }]
        ));
    }

    #[test]
    fn exit_codes_when_stopped_by_dep() {
        let cases = [
            (DepExitCode::Zero, ChildStatus::Exited(0), 0),
            (DepExitCode::Zero, ChildStatus::Exited(7), 0),
            (DepExitCode::Zero, ChildStatus::Signaled(Signal::SIGTERM), 0),
            (DepExitCode::Child, ChildStatus::Exited(7), 7),
            (
                DepExitCode::Child,
                ChildStatus::Signaled(Signal::SIGTERM),
                143,
            ),
            (
                DepExitCode::Child,
                ChildStatus::Signaled(Signal::SIGKILL),
                137,
            ),
        ];
        for (dec, status, want) in cases {
            let (mut c, t0) = running(Policy {
                dep_exit_code: dec,
                ..policy()
            });
            c.on_dep("main", dead(Some(0)), t0);
            let o = finish(&c.on_child_exit(status, t0)).clone();
            assert_eq!(o.exit_code, want, "{dec:?} {status:?}");
            assert_eq!(o.reason, Reason::StoppedByDependency);
        }
    }

    #[test]
    fn exit_codes_of_child_on_its_own() {
        let cases = [
            (ChildStatus::Exited(0), 0, Reason::Exited, None),
            (ChildStatus::Exited(3), 3, Reason::Exited, None),
            (ChildStatus::Exited(255), 255, Reason::Exited, None),
            (
                ChildStatus::Signaled(Signal::SIGKILL),
                137,
                Reason::Signaled,
                Some(Signal::SIGKILL),
            ),
            (
                ChildStatus::Signaled(Signal::SIGTERM),
                143,
                Reason::Signaled,
                Some(Signal::SIGTERM),
            ),
            (
                ChildStatus::Signaled(Signal::SIGSEGV),
                139,
                Reason::Signaled,
                Some(Signal::SIGSEGV),
            ),
        ];
        for (status, code, reason, sig) in cases {
            // dep_exit_code only matters when stopped by a dep
            let (mut c, t0) = running(Policy {
                dep_exit_code: DepExitCode::Zero,
                ..policy()
            });
            let o = finish(&c.on_child_exit(status, t0)).clone();
            assert_eq!(
                (o.exit_code, o.reason, o.child_signal),
                (code, reason, sig),
                "{status:?}"
            );
        }
    }

    #[test]
    fn spawn_failures() {
        for (f, code) in [
            (SpawnFailure::NotFound, 127),
            (SpawnFailure::NotExecutable, 126),
        ] {
            let t0 = Instant::now();
            let mut c = Core::new(policy());
            assert_eq!(c.start(t0), vec![Action::Spawn]);
            let o = finish(&c.on_spawn_failed(f, "x".into())).clone();
            assert_eq!((o.exit_code, o.reason), (code, Reason::SpawnFailed));
        }
    }

    #[test]
    fn signals_forwarded_while_running_and_stopping() {
        for group in [false, true] {
            let (mut c, t0) = running(Policy {
                signal_group: group,
                ..policy()
            });
            for s in Signal::forwarded() {
                assert_eq!(
                    c.on_signal(s, t0),
                    vec![Action::Signal {
                        signal: s,
                        group,
                        why: format!("forwarding {s}")
                    }]
                );
            }
            for s in [
                Signal::SIGCHLD,
                Signal::SIGPIPE,
                Signal::SIGSEGV,
                Signal::SIGKILL,
            ] {
                assert!(c.on_signal(s, t0).is_empty(), "{s:?} must not be forwarded");
            }
            c.on_dep("main", dead(Some(0)), t0);
            assert!(matches!(c.phase(), Phase::Stopping { .. }));
            assert_eq!(c.on_signal(Signal::SIGTERM, t0).len(), 1);
        }
    }

    #[test]
    fn non_death_deps_and_unknown_names_ignored() {
        let (mut c, t0) = running(Policy {
            birth_deps: vec![],
            death_deps: vec!["main".into()],
            ..policy()
        });
        assert!(c.on_dep("other", dead(Some(0)), t0).is_empty());
        assert_eq!(c.phase(), &Phase::Running);
        for s in [
            DepState::Absent,
            DepState::Unreadable,
            DepState::Alive { ready: false },
        ] {
            assert!(c.on_dep("main", s, t0).is_empty());
        }
    }

    #[test]
    fn success_trigger_only_fires_on_zero() {
        let (mut c, t0) = running(Policy {
            death_trigger: DeathTrigger::Success,
            ..policy()
        });
        assert!(
            c.on_dep("main", dead(Some(1)), t0).is_empty(),
            "failed main is restarted: keep running"
        );
        assert!(
            c.on_dep("main", dead(None), t0).is_empty(),
            "unknown code is not success"
        );
        // restarted by the kubelet: new Born, no Died
        assert!(
            c.on_dep("main", DepState::Alive { ready: true }, t0)
                .is_empty()
        );
        assert_eq!(c.on_dep("main", dead(Some(0)), t0).len(), 1);
    }

    #[test]
    fn birth_deps_wait_then_spawn() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into(), "db".into()],
            ..policy()
        });
        c.on_dep("proxy", DepState::Alive { ready: false }, t0);
        assert!(c.start(t0).is_empty());
        assert_eq!(c.deadline(), Some(t0 + Duration::from_secs(30)));
        assert_eq!(c.not_ready(), vec!["proxy", "db"]);
        assert!(
            c.on_dep("proxy", DepState::Alive { ready: true }, t0)
                .is_empty()
        );
        assert!(c.on_dep("db", DepState::Unreadable, t0).is_empty());
        assert_eq!(
            c.on_dep("db", DepState::Alive { ready: true }, t0),
            vec![Action::Spawn]
        );
    }

    #[test]
    fn birth_dep_that_died_ends_the_wait_at_once() {
        for (state, says) in [
            (
                dead(Some(127)),
                "\"db\" died with exit code 127 before it was ready",
            ),
            (
                dead(None),
                "\"db\" died (exit code unknown) before it was ready",
            ),
        ] {
            let t0 = Instant::now();
            let mut c = Core::new(Policy {
                birth_deps: vec!["db".into()],
                ..policy()
            });
            assert!(c.start(t0).is_empty());
            let o = finish(&c.on_dep("db", state, t0 + Duration::from_millis(1))).clone();
            assert_eq!((o.reason, o.exit_code), (Reason::BirthDependencyDied, 1));
            assert!(o.message.contains(says), "{}", o.message);
        }
        // already dead at start
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["db".into()],
            ..policy()
        });
        c.on_dep("db", dead(Some(1)), t0);
        assert_eq!(finish(&c.start(t0)).reason, Reason::BirthDependencyDied);
    }

    #[test]
    fn birth_deps_already_ready() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into()],
            ..policy()
        });
        c.on_dep("proxy", DepState::Alive { ready: true }, t0);
        assert_eq!(c.start(t0), vec![Action::Spawn]);
    }

    #[test]
    fn birth_timeout_names_missing_deps() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into(), "db".into()],
            ..policy()
        });
        c.on_dep("db", DepState::Alive { ready: true }, t0);
        c.start(t0);
        assert!(c.tick(t0 + Duration::from_secs(29)).is_empty());
        let o = finish(&c.tick(t0 + Duration::from_secs(30))).clone();
        assert_eq!(o.reason, Reason::BirthTimeout);
        assert_ne!(o.exit_code, 0);
        assert!(
            o.message.contains("proxy") && !o.message.contains("db"),
            "{}",
            o.message
        );
    }

    #[test]
    fn terminated_while_waiting_for_birth() {
        for (sig, start) in [
            (Signal::SIGTERM, false),
            (Signal::SIGINT, false),
            (Signal::SIGWINCH, true),
            (Signal::SIGUSR1, true),
        ] {
            let t0 = Instant::now();
            let mut c = Core::new(Policy {
                birth_deps: vec!["proxy".into()],
                ..policy()
            });
            c.start(t0);
            let a = c.on_signal(sig, t0);
            if start {
                assert!(a.is_empty(), "{sig:?} is not a reason to end");
            } else {
                let o = finish(&a);
                assert_eq!(o.reason, Reason::TerminatedBeforeStart);
                assert_eq!(o.exit_code, 128 + sig.number());
                assert!(
                    c.on_dep("proxy", DepState::Alive { ready: true }, t0)
                        .is_empty(),
                    "never spawn after finish"
                );
            }
        }
    }

    #[test]
    fn death_dep_dies_while_waiting_for_birth() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["proxy".into()],
            ..policy()
        });
        c.start(t0);
        let o = finish(&c.on_dep("main", dead(Some(0)), t0)).clone();
        assert_eq!(o.reason, Reason::DependencyDeadBeforeStart);
        assert_eq!(o.exit_code, 0);
        assert_eq!(c.deadline(), None);
    }

    #[test]
    fn dep_both_birth_and_death() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            birth_deps: vec!["main".into()],
            ..policy()
        });
        assert_eq!(c.watched(), vec!["main"]);
        c.start(t0);
        assert_eq!(
            c.on_dep("main", DepState::Alive { ready: true }, t0),
            vec![Action::Spawn]
        );
        assert!(c.on_spawned(t0).is_empty());
        assert_eq!(c.on_dep("main", dead(Some(0)), t0).len(), 1);
    }

    #[test]
    fn nothing_after_finish() {
        let (mut c, t0) = running(policy());
        finish(&c.on_child_exit(ChildStatus::Exited(0), t0));
        assert!(c.on_dep("main", dead(Some(0)), t0).is_empty());
        assert!(c.on_signal(Signal::SIGTERM, t0).is_empty());
        assert!(c.tick(t0 + Duration::from_secs(100)).is_empty());
        assert_eq!(c.deadline(), None);
    }

    #[test]
    fn dead_stays_dead() {
        for trigger in [DeathTrigger::Any, DeathTrigger::Success] {
            let t0 = Instant::now();
            let mut c = Core::new(Policy {
                death_trigger: trigger,
                birth_deps: vec!["db".into()],
                ..policy()
            });
            c.start(t0);
            c.on_dep("main", dead(Some(3)), t0);
            for later in [DepState::Absent, DepState::Unreadable] {
                c.on_dep("main", later, t0);
                assert_eq!(c.dep_state("main"), &dead(Some(3)), "{trigger:?}");
            }
            // a known code is not forgotten when only the lock tells of a death
            c.on_dep("main", dead(None), t0);
            assert_eq!(c.dep_state("main"), &dead(Some(3)));
            // alive again: a restart where restarts are expected, else impossible
            c.on_dep("main", DepState::Alive { ready: true }, t0);
            let want = match trigger {
                DeathTrigger::Success => DepState::Alive { ready: true },
                DeathTrigger::Any => dead(Some(3)),
            };
            assert_eq!(c.dep_state("main"), &want);
        }
        // a success is final even where restarts are expected
        let (mut c, t0) = running(Policy {
            death_trigger: DeathTrigger::Success,
            ..policy()
        });
        assert_eq!(c.on_dep("main", dead(Some(0)), t0).len(), 1);
        c.on_dep("main", DepState::Alive { ready: true }, t0);
        assert_eq!(c.dep_state("main"), &dead(Some(0)));
    }

    #[test]
    fn birth_dep_failure_under_restarts_is_waited_out() {
        let t0 = Instant::now();
        let mut c = Core::new(Policy {
            death_trigger: DeathTrigger::Success,
            birth_deps: vec!["db".into()],
            ..policy()
        });
        c.start(t0);
        assert!(
            c.on_dep("db", dead(Some(1)), t0).is_empty(),
            "it will be restarted"
        );
        assert_eq!(
            c.on_dep("db", DepState::Alive { ready: true }, t0),
            vec![Action::Spawn]
        );
        let mut c = Core::new(Policy {
            death_trigger: DeathTrigger::Success,
            birth_deps: vec!["db".into()],
            ..policy()
        });
        c.start(t0);
        assert_eq!(
            finish(&c.on_dep("db", dead(Some(0)), t0)).reason,
            Reason::BirthDependencyDied
        );
    }

    #[test]
    fn signal_while_starting_wins_over_the_spawn() {
        let t0 = Instant::now();
        let mut c = Core::new(policy());
        assert_eq!(c.start(t0), vec![Action::Spawn]);
        assert!(
            c.on_signal(Signal::SIGUSR1, t0).is_empty(),
            "not a stop signal"
        );
        let rtmin3 = Signal::parse("SIGRTMIN+3").unwrap();
        let o = finish(&c.on_signal(rtmin3, t0)).clone();
        assert_eq!(
            (o.reason, o.exit_code),
            (Reason::TerminatedBeforeStart, 128 + 37)
        );
        assert!(c.on_spawned(t0).is_empty(), "no child after finish");
        assert!(
            c.on_spawn_failed(SpawnFailure::NotFound, "x".into())
                .is_empty()
        );
    }

    #[test]
    fn born_not_recorded_ends_without_child() {
        let t0 = Instant::now();
        let mut c = Core::new(policy());
        c.start(t0);
        let o = finish(&c.on_birth_not_recorded("No space left on device".into())).clone();
        assert_eq!((o.reason, o.exit_code), (Reason::BirthNotRecorded, 2));
        assert!(o.message.contains("No space left") && o.message.contains("not starting"));
    }

    #[test]
    fn death_dep_dead_when_the_spawn_completes() {
        let t0 = Instant::now();
        let mut c = Core::new(policy());
        c.start(t0);
        c.on_dep("main", dead(Some(0)), t0);
        let a = c.on_spawned(t0);
        assert!(
            matches!(
                &a[..],
                [Action::Signal {
                    signal: Signal::SIGTERM,
                    ..
                }]
            ),
            "{a:?}"
        );
    }

    #[test]
    fn child_that_cannot_be_killed() {
        for (pid1, code, reason) in [
            (true, 0, Reason::StoppedByDependency),
            (false, 1, Reason::ChildNotStopped),
        ] {
            let (mut c, t0) = running(Policy { pid1, ..policy() });
            c.on_dep("main", dead(Some(0)), t0);
            let t1 = t0 + Duration::from_secs(10);
            assert!(matches!(&c.tick(t1)[..], [Action::Kill { .. }]));
            let a = c.on_kill_failed("EPERM".into(), t1);
            if pid1 {
                let o = finish(&a);
                assert_eq!((o.exit_code, o.reason), (code, reason));
                assert!(o.message.contains("PID 1"), "{}", o.message);
            } else {
                assert!(a.is_empty(), "a last moment to exit");
                assert_eq!(c.deadline(), Some(t1 + KILL_WAIT));
                let o = finish(&c.tick(t1 + KILL_WAIT)).clone();
                assert_eq!((o.exit_code, o.reason), (code, reason));
                assert!(o.message.contains("leaving it running"), "{}", o.message);
            }
        }
    }

    #[test]
    fn child_that_does_not_die_on_sigkill_is_given_up() {
        for (pid1, code) in [(true, 0), (false, 1)] {
            let (mut c, t0) = running(Policy { pid1, ..policy() });
            c.on_dep("main", dead(Some(0)), t0);
            let t1 = t0 + Duration::from_secs(10);
            c.tick(t1);
            assert_eq!(
                c.deadline(),
                Some(t1 + KILL_WAIT),
                "a deadline while stopping"
            );
            assert!(c.tick(t1 + KILL_WAIT - Duration::from_millis(1)).is_empty());
            let o = finish(&c.tick(t1 + KILL_WAIT)).clone();
            assert_eq!(o.exit_code, code);
            assert!(
                o.message.contains("did not exit within 2s after SIGKILL"),
                "{}",
                o.message
            );
        }
    }

    #[test]
    fn real_time_signals_kill_with_128_plus_n() {
        for n in 1..=64 {
            let (mut c, t0) = running(policy());
            let sig = Signal::new(n).unwrap();
            let o = finish(&c.on_child_exit(ChildStatus::Signaled(sig), t0)).clone();
            assert_eq!(o.exit_code, 128 + n);
            assert_eq!(o.child_signal, Some(sig));
        }
    }
}
