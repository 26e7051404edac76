//! The decision machine's vocabulary: what the glue tells the core (dependency states,
//! the child's fate, the pod as the API shows it), what the core answers (`Action`s, and
//! the `Note`s that say why where the actions do not), the policy it applies, and its
//! phases.

use std::time::{Duration, Instant};

use crate::config::{Config, DeathDepsMode, DeathTrigger, DepExitCode};
use crate::contract::{Backoff, Contract, Hold};
use crate::signal::Signal;
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
    pub(super) fn merge(&self, new: DepState, restarts: bool) -> DepState {
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

/// Why the core decided what it did, where its actions do not say it: a decision to wait,
/// to hold a signal, to restart the child, or not to pass a signal on. The glue logs each
/// one (`Core::take_notes`) and works out nothing itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The child is not started before its birth dependencies `not_ready` are ready, for
    /// at most `timeout`.
    WaitingForBirth {
        not_ready: Vec<String>,
        timeout: Duration,
    },
    /// Death dependency `dep` failed, and under KUBEXIT_DEATH_TRIGGER=success a failure
    /// does not stop the child: the dependency may be restarted.
    FailureMayRestart { dep: String, exit_code: Option<i32> },
    /// Death dependency `dep` died, and under KUBEXIT_DEATH_DEPS_MODE=all the child is
    /// stopped once `waiting` died too.
    WaitingForAll {
        dep: String,
        exit_code: Option<i32>,
        waiting: Vec<String>,
    },
    /// The child ended (`status`) while its death dependencies live: it is started again
    /// (restart number `restart`) after `delay`, at once if zero.
    Restarting {
        status: ChildStatus,
        restart: u32,
        delay: Duration,
    },
    /// The child ended (`status`) while a stop signal is held: not restarted; the
    /// container ends once the death dependencies died.
    ExitedWhileHeld { status: ChildStatus },
    /// Stop signal `signal` is held while the death dependencies `living` live, for at
    /// most `bound`.
    Holding {
        signal: Signal,
        living: Vec<String>,
        bound: Duration,
    },
    /// The termination signal of the stop under way: the child gets it once (sent, or due
    /// after the preStop hook), so it is not sent again (`Core::absorbs`).
    Absorbed { signal: Signal },
    /// A signal that stops nothing came before the child was started: dropped.
    Dropped { signal: Signal },
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

impl Phase {
    /// The one way into `Stopping`: the preStop hook runs until `hook_until` (if any), the
    /// grace period ends at `kill_at`; once SIGKILL was sent (or could not be), the wait for
    /// the child ends at `give_up_at`.
    pub(super) fn stopping(
        cause: Cause,
        hook_until: Option<Instant>,
        kill_at: Instant,
        give_up_at: Option<Instant>,
    ) -> Phase {
        Phase::Stopping {
            cause,
            hook_until,
            kill_at,
            killed: give_up_at.is_some(),
            give_up_at,
        }
    }
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
    pub(super) fn reason(&self) -> Reason {
        match self {
            Cause::Dependency(_) => Reason::StoppedByDependency,
            Cause::Signal { .. } => Reason::StoppedBySignal,
        }
    }

    pub(super) fn dep(&self) -> Option<String> {
        match self {
            Cause::Dependency(d) => Some(d.clone()),
            Cause::Signal { .. } => None,
        }
    }
}

/// "exited with code 3" or "was killed by SIGKILL".
pub fn describe_status(s: ChildStatus) -> String {
    match s {
        ChildStatus::Exited(c) => format!("exited with code {c}"),
        ChildStatus::Signaled(sig) => format!("was killed by {sig}"),
    }
}
