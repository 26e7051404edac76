//! The supervisor's decision logic, with no I/O: it is told what was observed (dependency
//! states, signals, the child's fate, the clock) and answers with actions for the OS glue
//! to carry out (spawn, signal, kill, finish with an exit code). Every rule of the
//! behaviour spec that is a decision lives here and is table-tested below.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::config::{Config, DeathTrigger, DepExitCode};

/// What a dependency's lock says (see `fsutil::lock_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    Held,
    Free,
    /// No lock file (not started yet, or a kubexit container), or locks do not work on the
    /// graveyard's filesystem: says nothing.
    Unknown,
}

/// The rule that turns a tombstone (if any) and the lock into a dependency state:
/// `Died` means dead; born without `Died` and with a free lock means its whole container
/// was killed before recording its death; a lock alone (no `Born`) or no tombstone means
/// not started yet. The lock is only consulted when it matters (`lock` is lazy).
pub fn classify(
    tombstone: Option<&crate::tombstone::Tombstone>,
    lock: impl FnOnce() -> Lock,
) -> DepState {
    match tombstone {
        None => DepState::Absent,
        Some(t) if t.is_dead() => DepState::Dead {
            exit_code: t.exit_code,
        },
        Some(t) if t.born.is_some() && lock() == Lock::Free => DepState::Dead { exit_code: None },
        Some(t) => DepState::Alive {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildStatus {
    Exited(i32),
    Signaled(Signal),
}

impl ChildStatus {
    /// The shell convention: the exit code, or 128+N when killed by signal N.
    pub fn code(self) -> i32 {
        match self {
            ChildStatus::Exited(c) => c,
            ChildStatus::Signaled(s) => 128 + s as i32,
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
    /// The Kubernetes API refused to tell whether birth dependencies are ready (403 and
    /// the like): the child was never started.
    BirthApiError,
    /// The command could not be executed.
    SpawnFailed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Exited => "exited",
            Reason::Signaled => "signaled",
            Reason::StoppedByDependency => "stopped-by-dependency",
            Reason::DependencyDeadBeforeStart => "dependency-dead-before-start",
            Reason::TerminatedBeforeStart => "terminated-before-start",
            Reason::BirthTimeout => "birth-timeout",
            Reason::BirthApiError => "birth-api-error",
            Reason::SpawnFailed => "spawn-failed",
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
    /// Start the child now.
    Spawn,
    /// Send `signal` to the child (or its process group when `group`).
    Signal {
        signal: Signal,
        group: bool,
        why: String,
    },
    /// SIGKILL the child's process group (grace period over).
    Kill { why: String },
    /// Record the death and exit with the outcome's code.
    Finish(Outcome),
}

/// Signals forwarded to the child. Never SIGCHLD, never runtime-internal ones.
pub const FORWARDED: &[Signal] = &[
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
    Signal::SIGCONT,
];

/// Signals that end the container while it waits to start the child.
const TERMINATING: &[Signal] = &[
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGHUP,
];

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
}

impl Policy {
    pub fn from_config(c: &Config) -> Policy {
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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Observing the graveyard before deciding to start.
    Created,
    WaitingBirth {
        deadline: Instant,
    },
    Running,
    Stopping {
        dep: String,
        kill_at: Instant,
        killed: bool,
    },
    Finished,
}

#[derive(Debug)]
pub struct Core {
    policy: Policy,
    phase: Phase,
    deps: BTreeMap<String, DepState>,
    /// Birth deps the API says are ready (when `birth_via_api`).
    api_ready: std::collections::BTreeSet<String>,
}

impl Core {
    pub fn new(policy: Policy) -> Core {
        Core {
            policy,
            phase: Phase::Created,
            deps: BTreeMap::new(),
            api_ready: Default::default(),
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
            _ => None,
        }
    }

    /// Does this dependency state count as the death of a death dependency?
    fn is_trigger(&self, s: &DepState) -> bool {
        match (s, self.policy.death_trigger) {
            (DepState::Dead { .. }, DeathTrigger::Any) => true,
            (DepState::Dead { exit_code: Some(0) }, DeathTrigger::Success) => true,
            _ => false,
        }
    }

    fn dead_death_dep(&self) -> Option<String> {
        self.policy
            .death_deps
            .iter()
            .find(|d| self.is_trigger(self.dep_state(d)))
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

    /// The API says exactly these containers of the pod are ready now.
    pub fn on_api_ready(&mut self, ready: &[String], _now: Instant) -> Vec<Action> {
        self.api_ready = ready
            .iter()
            .filter(|r| self.policy.birth_deps.contains(r))
            .cloned()
            .collect();
        match self.phase {
            Phase::WaitingBirth { .. } if self.not_ready().is_empty() => self.spawn(),
            _ => vec![],
        }
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
        match self.dep_state(dep) {
            DepState::Dead { exit_code: Some(c) } => {
                format!("death dependency {dep:?} died with exit code {c}")
            }
            _ => format!("death dependency {dep:?} died (exit code unknown)"),
        }
    }

    fn code_when_stopped(&self, status: Option<ChildStatus>) -> i32 {
        match (self.policy.dep_exit_code, status) {
            (DepExitCode::Zero, _) => 0,
            (DepExitCode::Child, Some(s)) => s.code(),
            // never started: as if the termination signal had ended it
            (DepExitCode::Child, None) => 128 + self.policy.term_signal as i32,
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
        self.phase = Phase::Running;
        vec![Action::Spawn]
    }

    /// Called once, after the first scan of the graveyard has been fed in.
    pub fn start(&mut self, now: Instant) -> Vec<Action> {
        if self.phase != Phase::Created {
            return vec![];
        }
        if let Some(dep) = self.dead_death_dep() {
            let msg = format!(
                "{} before the child was started; not starting it",
                self.describe_dead(&dep)
            );
            let code = self.code_when_stopped(None);
            return self.not_started(Reason::DependencyDeadBeforeStart, code, Some(dep), msg);
        }
        if self.not_ready().is_empty() {
            return self.spawn();
        }
        self.phase = Phase::WaitingBirth {
            deadline: now + self.policy.birth_timeout,
        };
        vec![]
    }

    /// A dependency's state changed (or was re-read).
    pub fn on_dep(&mut self, name: &str, state: DepState, now: Instant) -> Vec<Action> {
        if !self.is_watched(name) {
            return vec![];
        }
        self.deps.insert(name.to_string(), state.clone());
        let is_death_dep = self.policy.death_deps.iter().any(|d| d == name);
        let fired = is_death_dep && self.is_trigger(&state);
        match self.phase.clone() {
            Phase::Created | Phase::Finished | Phase::Stopping { .. } => vec![],
            Phase::WaitingBirth { .. } => {
                if fired {
                    let msg = format!(
                        "{} while waiting for birth dependencies; not starting the child",
                        self.describe_dead(name)
                    );
                    let code = self.code_when_stopped(None);
                    return self.not_started(
                        Reason::DependencyDeadBeforeStart,
                        code,
                        Some(name.to_string()),
                        msg,
                    );
                }
                if self.not_ready().is_empty() {
                    self.spawn()
                } else {
                    vec![]
                }
            }
            Phase::Running => {
                if !fired {
                    return vec![];
                }
                let kill_at = now + self.policy.grace_period;
                self.phase = Phase::Stopping {
                    dep: name.to_string(),
                    kill_at,
                    killed: false,
                };
                let mut actions = vec![Action::Signal {
                    signal: self.policy.term_signal,
                    group: self.policy.signal_group,
                    why: self.describe_dead(name),
                }];
                actions.extend(self.tick(now));
                actions
            }
        }
    }

    /// A signal arrived for the wrapper (SIGCHLD is handled by the glue, never here).
    pub fn on_signal(&mut self, sig: Signal, _now: Instant) -> Vec<Action> {
        match self.phase {
            Phase::Created | Phase::WaitingBirth { .. } => {
                if TERMINATING.contains(&sig) {
                    let msg = format!(
                        "received {} before the child was started; not starting it",
                        sig.as_str()
                    );
                    self.not_started(Reason::TerminatedBeforeStart, 128 + sig as i32, None, msg)
                } else {
                    vec![]
                }
            }
            Phase::Running | Phase::Stopping { .. } => {
                if FORWARDED.contains(&sig) {
                    vec![Action::Signal {
                        signal: sig,
                        group: self.policy.signal_group,
                        why: format!("forwarding {}", sig.as_str()),
                    }]
                } else {
                    vec![]
                }
            }
            Phase::Finished => vec![],
        }
    }

    /// Timers: birth timeout, end of the grace period.
    pub fn tick(&mut self, now: Instant) -> Vec<Action> {
        match self.phase.clone() {
            Phase::WaitingBirth { deadline } if now >= deadline => {
                let missing = self.not_ready().join(", ");
                let msg = format!(
                    "birth dependencies not ready after {}: {missing}; not starting the child",
                    crate::config::format_go_duration(self.policy.birth_timeout)
                );
                self.not_started(Reason::BirthTimeout, 1, None, msg)
            }
            Phase::Stopping {
                dep,
                kill_at,
                killed: false,
            } if now >= kill_at => {
                self.phase = Phase::Stopping {
                    dep,
                    kill_at,
                    killed: true,
                };
                vec![Action::Kill {
                    why: format!(
                        "grace period of {} expired after {}",
                        crate::config::format_go_duration(self.policy.grace_period),
                        self.policy.term_signal.as_str()
                    ),
                }]
            }
            _ => vec![],
        }
    }

    /// The child's own exit status was reaped.
    pub fn on_child_exit(&mut self, status: ChildStatus, _now: Instant) -> Vec<Action> {
        let child_signal = match status {
            ChildStatus::Signaled(s) => Some(s),
            ChildStatus::Exited(_) => None,
        };
        let outcome = match self.phase.clone() {
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
        ChildStatus::Signaled(sig) => format!("was killed by {}", sig.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tombstone::Tombstone;

    #[test]
    fn classify_tombstone_and_lock() {
        let now = chrono::Utc::now();
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
            (None, Lock::Free, DepState::Absent), // a lock file alone: not started yet
            (None, Lock::Held, DepState::Absent),
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
            (Some(&no_born), Lock::Free, DepState::Alive { ready: true }),
        ];
        for (t, lock, want) in cases {
            assert_eq!(&classify(*t, || *lock), want, "{t:?} {lock:?}");
        }
        // the lock is not probed when the tombstone decides alone
        classify(Some(&died), || panic!("probed"));
        classify(None, || panic!("probed"));
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
        assert!(
            c.on_api_ready(&["proxy".into(), "unrelated".into()], t0)
                .is_empty()
        );
        assert_eq!(c.not_ready(), vec!["db"]);
        // readiness can be lost again
        assert!(c.on_api_ready(&["db".into()], t0).is_empty());
        assert_eq!(c.not_ready(), vec!["proxy"]);
        assert_eq!(
            c.on_api_ready(&["db".into(), "proxy".into()], t0),
            vec![Action::Spawn]
        );
        // once running, API errors change nothing
        assert!(c.on_api_error("boom".into()).is_empty());
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
        assert_eq!(c.deadline(), None);
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
            let (mut c, _) = running(policy());
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
            for &s in FORWARDED {
                assert_eq!(
                    c.on_signal(s, t0),
                    vec![Action::Signal {
                        signal: s,
                        group,
                        why: format!("forwarding {}", s.as_str())
                    }]
                );
            }
            for s in [
                Signal::SIGCHLD,
                Signal::SIGURG,
                Signal::SIGPIPE,
                Signal::SIGALRM,
                Signal::SIGTSTP,
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
        assert!(
            c.on_dep("db", dead(Some(0)), t0).is_empty(),
            "dead is not ready"
        );
        assert_eq!(
            c.on_dep("db", DepState::Alive { ready: true }, t0),
            vec![Action::Spawn]
        );
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
                assert_eq!(o.exit_code, 128 + sig as i32);
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
}
