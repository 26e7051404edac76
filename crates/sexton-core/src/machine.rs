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
//!
//! The state machine is `Core` (here: its state, what it is asked, and the events that
//! start, run and end the child; `stop.rs`: stopping and restarting, and the timers);
//! `rules.rs` holds the policy's rules as questions, `explain.rs` what the core says about
//! its decisions (messages, and the `Note`s beside the actions), `vocabulary.rs` the words
//! of both sides. The glue builds the `Policy` once, from the configuration, and reads
//! every rule back from the core.

mod explain;
mod rules;
mod stop;
mod vocabulary;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

pub use crate::signal::Signal;
pub use vocabulary::{
    Action, Cause, ChildStatus, DepState, KILL_WAIT, Lock, Note, Outcome, Phase, PodView, Policy,
    Reason, Record, SpawnFailure, classify, describe_status,
};

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
    /// Why the decisions since the glue last asked were taken, where their actions do not
    /// say it (`take_notes`).
    notes: Vec<Note>,
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
            notes: vec![],
        }
    }

    /// Why the decisions since the last call were taken, where their actions do not say
    /// it, in order: the glue logs each one.
    pub fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    /// Whether a stop signal may be held (KUBEXIT_HOLD_STOP): the glue reads the
    /// dependencies again before it tells the core of one, rather than trust an inotify
    /// event still queued behind the signal.
    pub fn may_hold(&self, sig: Signal) -> bool {
        self.policy.contract.hold.is_some() && sig.ends_wait()
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
        self.notes.push(Note::WaitingForBirth {
            not_ready: self.not_ready(),
            timeout: self.policy.birth_timeout,
        });
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

    /// A dependency's state was (re-)read.
    pub fn on_dep(&mut self, name: &str, state: DepState, now: Instant) -> Vec<Action> {
        if !self.is_watched(name) {
            return vec![];
        }
        let before = self.dep_state(name).clone();
        let state = before.merge(state, self.deps_may_restart());
        self.deps.insert(name.to_string(), state.clone());
        let actions = self.after_dep(name, &state, now);
        if actions.is_empty() && state != before {
            self.note_death_not_stopping(name, &state);
        }
        actions
    }

    /// What a dependency's new state `state` decides in the current phase.
    fn after_dep(&mut self, name: &str, state: &DepState, now: Instant) -> Vec<Action> {
        let fired = self.is_death_dep(name) && self.is_trigger(state);
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
                    self.notes.push(Note::Dropped { signal: sig });
                    vec![]
                }
            }
            Phase::Running if stop && hold => self.hold(sig, now),
            Phase::Holding { .. } if stop => vec![], // held already
            _ if self.absorbs(sig) => {
                self.notes.push(Note::Absorbed { signal: sig });
                vec![]
            }
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

    /// The preStop hook (exec or HTTP) finished, whatever its result.
    pub fn on_pre_stop_done(&mut self, now: Instant) -> Vec<Action> {
        self.after_hook(now)
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
            Phase::Holding { .. } => {
                self.notes.push(Note::ExitedWhileHeld { status });
                return vec![];
            }
            Phase::Running if self.restart_due() => return self.schedule_restart(status, now),
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
}

#[cfg(test)]
mod tests;
