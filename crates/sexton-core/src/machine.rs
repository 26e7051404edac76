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
    /// Record `Born`, then start the child; report with `on_spawned`,
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
    /// The termination signal of a stop is decided but not yet reported sent, and the
    /// grace it is owed from the moment it is sent (`signal_sent`).
    term_owed: Option<Duration>,
    /// The child's current run has received the termination signal (sent by a stop, or
    /// forwarded): a stop never sends it twice (`absorbs`).
    term_delivered: bool,
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
            term_owed: None,
            term_delivered: false,
        }
    }

    /// The glue sent `signal` to the child at `at`. The termination signal of a stop is
    /// decided at the `now` of an event, and sent after the glue has handled that event's
    /// other work: on a loaded machine (or under emulation) milliseconds later. The grace
    /// period runs from the signal, not from the decision, so SIGKILL moves accordingly:
    /// the child always gets its whole grace period (after a preStop hook, at least
    /// `MIN_GRACE_AFTER_HOOK`), as the docs and the kubelet promise.
    pub fn signal_sent(&mut self, signal: Signal, at: Instant) {
        if signal != self.policy.term_signal {
            return;
        }
        let Some(grace) = self.term_owed.take() else {
            return;
        };
        if let Phase::Stopping {
            hook_until: None,
            killed: false,
            kill_at,
            ..
        } = &mut self.phase
        {
            *kill_at = (*kill_at).max(at + grace);
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
        self.term_delivered = false;
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
    /// SIGKILL after the grace period. A child that already received the termination
    /// signal (forwarded while it ran) is not sent it again, nor run the hook: the stop
    /// only sets its deadline. Without a running child (it waits to be restarted, or
    /// exited during a hold), the container ends at once.
    fn stop(&mut self, cause: Cause, now: Instant, run_hook: bool) -> Vec<Action> {
        if !self.child_running {
            return self.end_without_child(cause);
        }
        let kill_at = now + self.policy.grace_period;
        let signalled = self.term_delivered;
        let hook = (self.policy.contract.pre_stop.clone()).filter(|_| run_hook && !signalled);
        let hook_until = hook.as_ref().map(|h| match h {
            PreStop::Sleep(d) => (now + *d).min(kill_at),
            _ => kill_at,
        });
        let mut actions = match &hook {
            None if signalled => vec![],
            None => vec![self.term_action(&cause, self.policy.grace_period)],
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

    /// The stop's termination signal, owed `grace` from the moment it is sent.
    fn term_action(&mut self, cause: &Cause, grace: Duration) -> Action {
        self.term_delivered = true;
        self.term_owed = Some(grace);
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
        let mut actions = vec![self.term_action(&cause, MIN_GRACE_AFTER_HOOK)];
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
            _ if self.absorbs(sig) => vec![],
            Phase::Running | Phase::Stopping { .. } | Phase::Holding { .. }
                if sig.is_forwarded() && self.child_running =>
            {
                self.stop_forwarded |= stop;
                self.term_delivered |= sig == self.policy.term_signal;
                vec![Action::Signal {
                    signal: sig,
                    group: self.policy.signal_group,
                    why: format!("forwarding {sig}"),
                }]
            }
            _ => vec![],
        }
    }

    /// Whether `sig` is dropped because the stop under way delivers it already: while the
    /// child is being stopped, its termination signal (sent, or due after the preStop
    /// hook) is not sent a second time. A native sidecar's program gets one SIGTERM from
    /// the kubelet, and many take a second one as "exit now, skip the drain"; under
    /// `native-wrap` the kubelet's SIGTERM reaches a sidecar whose supervisor has
    /// stopped it already. Any other signal is still forwarded (a different stop signal
    /// too: its sender asked for something the child has not been told), and SIGKILL
    /// still follows at the end of the grace period.
    pub fn absorbs(&self, sig: Signal) -> bool {
        matches!(self.phase, Phase::Stopping { .. }) && sig == self.policy.term_signal
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
mod tests;
