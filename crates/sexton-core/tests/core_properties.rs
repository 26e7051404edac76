//! Property tests of the supervisor's pure core: random policies and random sequences of
//! observations, signals, child exits, helper reports and clock ticks, driven the way the
//! OS glue drives the core. Invariants:
//! - the child is signalled (or killed) only between its spawn and the reaping of its
//!   status, and it is spawned once, then only restarted after it exited (when restarts
//!   are on), never after a stop signal;
//! - exactly one `Finish`, and nothing after it;
//! - while stopping there is always a deadline, and following the deadlines ends the run
//!   without any help from the child;
//! - a dependency seen dead stays dead (under `success`, only a restart brings back one
//!   that failed);
//! - the exit code follows the documented rules for each reason.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use sexton_core::config::{DeathTrigger, DepExitCode};
use sexton_core::contract::{Backoff, Contract, Hold};
use sexton_core::machine::{
    Action, ChildStatus, Core, DepState, KILL_WAIT, Outcome, Phase, PodView, Policy, Reason,
    Signal, SpawnFailure,
};
use sexton_core::pre_stop::PreStop;

const NAMES: [&str; 4] = ["main", "db", "proxy", "other"];

#[derive(Debug, Clone)]
enum Step {
    Dep(usize, DepState),
    Signal(i32),
    ChildExit(ChildStatus),
    Tick(u64),
    Pod(PodView),
    ApiUnreachable,
    ApiError,
    KillFailed,
    PreStopDone,
}

/// How the glue answers a `Spawn`.
#[derive(Debug, Clone, Copy)]
enum SpawnResult {
    Started,
    Failed(SpawnFailure),
    BirthNotRecorded,
}

fn dep_state() -> impl Strategy<Value = DepState> {
    prop_oneof![
        Just(DepState::Absent),
        Just(DepState::Unreadable),
        any::<bool>().prop_map(|ready| DepState::Alive { ready }),
        prop::option::of(prop_oneof![Just(0), Just(1), Just(137), -5..300i32])
            .prop_map(|exit_code| DepState::Dead { exit_code }),
    ]
}

fn child_status() -> impl Strategy<Value = ChildStatus> {
    prop_oneof![
        (0..=255i32).prop_map(ChildStatus::Exited),
        (1..=64i32).prop_map(|n| ChildStatus::Signaled(Signal::new(n).unwrap())),
    ]
}

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::sample::subsequence(NAMES.to_vec(), 0..=3)
        .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn pod_view() -> impl Strategy<Value = PodView> {
    (
        any::<bool>(),
        names(),
        prop::collection::vec((0..4usize, prop::option::of(0..3i32)), 0..2),
    )
        .prop_map(|(spec_seen, ready, ended)| PodView {
            containers: if spec_seen {
                NAMES[..3].iter().map(|s| s.to_string()).collect()
            } else {
                vec![]
            },
            ready,
            terminated: ended
                .into_iter()
                .map(|(i, c)| (NAMES[i].to_string(), c))
                .collect(),
        })
}

/// The sidecar contract's rules, each on or off.
fn contract() -> impl Strategy<Value = Contract> {
    (
        any::<bool>(),
        prop::option::of(0..40_000u64),
        prop::option::of(1..20_000u64),
        prop::option::of(prop_oneof![
            Just(PreStop::Exec(vec!["/drain".into()])),
            (0..5000u64).prop_map(|ms| PreStop::Sleep(Duration::from_millis(ms))),
        ]),
    )
        .prop_map(|(all_deps, hold, restart, pre_stop)| Contract {
            all_deps,
            hold: hold.map(|ms| Hold {
                pod_grace: Duration::from_millis(ms),
            }),
            restart: restart.map(|ms| Backoff {
                base: Duration::from_millis(ms),
            }),
            pre_stop,
        })
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        names(),
        names(),
        0..3000u64,
        0..5000u64,
        1..=64i32,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        contract(),
    )
        .prop_map(
            |(
                death,
                birth,
                grace,
                timeout,
                term,
                group,
                child_code,
                success,
                api,
                pid1,
                contract,
            )| Policy {
                death_deps: death,
                birth_deps: birth,
                grace_period: Duration::from_millis(grace),
                birth_timeout: Duration::from_millis(timeout),
                term_signal: Signal::new(term).unwrap(),
                signal_group: group,
                dep_exit_code: if child_code {
                    DepExitCode::Child
                } else {
                    DepExitCode::Zero
                },
                death_trigger: if success {
                    DeathTrigger::Success
                } else {
                    DeathTrigger::Any
                },
                birth_via_api: api,
                pid1,
                contract,
            },
        )
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..4usize, dep_state()).prop_map(|(i, s)| Step::Dep(i, s)),
        2 => (1..=64i32).prop_map(Step::Signal),
        1 => child_status().prop_map(Step::ChildExit),
        3 => (0..4000u64).prop_map(Step::Tick),
        1 => pod_view().prop_map(Step::Pod),
        1 => Just(Step::ApiUnreachable),
        1 => Just(Step::ApiError),
        1 => Just(Step::KillFailed),
        1 => Just(Step::PreStopDone),
    ]
}

fn spawn_result() -> impl Strategy<Value = SpawnResult> {
    prop_oneof![
        6 => Just(SpawnResult::Started),
        1 => Just(SpawnResult::Failed(SpawnFailure::NotFound)),
        1 => Just(SpawnResult::Failed(SpawnFailure::NotExecutable)),
        1 => Just(SpawnResult::BirthNotRecorded),
    ]
}

/// The glue, as far as the invariants go: whether the child exists, what it died of.
struct Harness {
    core: Core,
    policy: Policy,
    now: Instant,
    spawned: bool,
    /// The child runs (spawned or restarted, not reaped since).
    running: bool,
    /// The child's last status.
    reaped: Option<ChildStatus>,
    /// A stop signal reached the wrapper after the child was first started.
    stop_signalled: bool,
    /// The preStop hook was asked for and has not been reported done.
    hook_running: bool,
    finished: Option<Outcome>,
    spawn_results: Vec<SpawnResult>,
    /// Dependencies seen dead.
    seen_dead: Vec<String>,
    /// The last signal sent to the wrapper.
    last_signal: Option<Signal>,
    /// The child's current run has been sent the termination signal.
    term_sent: bool,
}

impl Harness {
    fn child_alive(&self) -> bool {
        self.running
    }

    fn run(&mut self, actions: Vec<Action>) -> Result<(), TestCaseError> {
        let mut queue: std::collections::VecDeque<Action> = actions.into();
        while let Some(a) = queue.pop_front() {
            prop_assert!(self.finished.is_none(), "{a:?} after Finish");
            match a {
                Action::Spawn | Action::Restart { .. } => {
                    if let Action::Restart { count } = a {
                        prop_assert!(self.policy.contract.restart.is_some());
                        prop_assert!(self.spawned && !self.running, "restarted a live child");
                        prop_assert!(!self.stop_signalled, "restarted after a stop signal");
                        prop_assert_eq!(count, self.core.restarts());
                    } else {
                        prop_assert!(!self.spawned, "spawned twice");
                    }
                    prop_assert_eq!(self.core.phase(), &Phase::Starting);
                    let result = self.spawn_results.pop().unwrap_or(SpawnResult::Started);
                    let next = match result {
                        SpawnResult::Started => {
                            self.spawned = true;
                            self.running = true;
                            self.term_sent = false;
                            self.core.on_spawned(self.now)
                        }
                        SpawnResult::Failed(f) => self.core.on_spawn_failed(f, "x".into()),
                        SpawnResult::BirthNotRecorded => {
                            self.core.on_birth_not_recorded("full".into())
                        }
                    };
                    queue.extend(next);
                }
                Action::Signal { signal, .. } if signal == self.policy.term_signal => {
                    prop_assert!(self.child_alive(), "{a:?} without a live child");
                    // once a stop is under way, the child gets its termination signal once
                    let stopping = matches!(self.core.phase(), Phase::Stopping { .. });
                    prop_assert!(
                        !(stopping && self.term_sent),
                        "{signal} sent again to a child being stopped"
                    );
                    self.term_sent = true;
                }
                Action::Signal { .. } | Action::Kill { .. } => {
                    prop_assert!(self.child_alive(), "{a:?} without a live child");
                }
                Action::RunPreStop => {
                    prop_assert!(self.child_alive(), "preStop without a live child");
                    prop_assert!(
                        matches!(self.policy.contract.pre_stop, Some(PreStop::Exec(_))),
                        "RunPreStop for {:?}",
                        self.policy.contract.pre_stop
                    );
                    self.hook_running = true;
                }
                Action::Finish(o) => {
                    self.check_outcome(&o)?;
                    self.finished = Some(o);
                }
            }
        }
        Ok(())
    }

    fn check_outcome(&self, o: &Outcome) -> Result<(), TestCaseError> {
        let p = &self.policy;
        let stopped_code = |st: Option<ChildStatus>| match (p.dep_exit_code, st) {
            (DepExitCode::Zero, _) => 0,
            (DepExitCode::Child, Some(s)) => s.code(),
            (DepExitCode::Child, None) => 128 + p.term_signal.number(),
        };
        let want = match o.reason {
            Reason::Exited | Reason::Signaled => {
                let st = self.reaped.expect("an exit reason needs a reaped child");
                prop_assert_eq!(
                    o.reason == Reason::Signaled,
                    matches!(st, ChildStatus::Signaled(_))
                );
                st.code()
            }
            // the child's last status, unless it still runs (given up on after SIGKILL)
            Reason::StoppedByDependency | Reason::StoppedBySignal => {
                stopped_code(self.reaped.filter(|_| !self.running))
            }
            Reason::DependencyDeadBeforeStart => {
                prop_assert!(!self.spawned);
                stopped_code(None)
            }
            Reason::TerminatedBeforeStart => {
                prop_assert!(!self.spawned);
                let sig = self.last_signal.expect("terminated by a signal");
                prop_assert!(sig.ends_wait(), "{sig} does not end a wait");
                128 + sig.number()
            }
            Reason::BirthTimeout
            | Reason::BirthDependencyDied
            | Reason::BirthDependencyUnknown
            | Reason::BirthApiError => {
                prop_assert!(!self.spawned);
                1
            }
            Reason::BirthNotRecorded => 2,
            Reason::SpawnFailed => {
                prop_assert!(o.exit_code == 126 || o.exit_code == 127);
                o.exit_code
            }
            Reason::ChildNotStopped => {
                prop_assert!(!p.pid1, "PID 1 never leaves a child behind");
                prop_assert!(self.child_alive());
                1
            }
        };
        prop_assert_eq!(o.exit_code, want, "{:?}", o);
        if o.reason == Reason::StoppedByDependency || o.reason == Reason::DependencyDeadBeforeStart
        {
            prop_assert!(o.death_dep.is_some());
        }
        Ok(())
    }

    fn step(&mut self, s: &Step) -> Result<(), TestCaseError> {
        let actions = match s {
            Step::Dep(i, state) => {
                let name = NAMES[*i];
                let a = self.core.on_dep(name, state.clone(), self.now);
                if matches!(state, DepState::Dead { .. }) && self.core.is_watched(name) {
                    self.seen_dead.push(name.to_string());
                }
                a
            }
            Step::Signal(n) => {
                let sig = Signal::new(*n).unwrap();
                self.last_signal = Some(sig);
                self.stop_signalled |= self.spawned && sig.ends_wait();
                self.core.on_signal(sig, self.now)
            }
            Step::ChildExit(st) => {
                if !self.child_alive() {
                    return Ok(()); // no child: the glue reaps no status for it
                }
                self.reaped = Some(*st);
                self.running = false;
                self.core.on_child_exit(*st, self.now)
            }
            Step::Tick(ms) => {
                self.now += Duration::from_millis(*ms);
                self.core.tick(self.now)
            }
            Step::Pod(v) => self.core.on_pod(v, self.now),
            Step::ApiUnreachable => {
                self.core.on_api_unreachable("refused".into());
                vec![]
            }
            Step::ApiError => self.core.on_api_error("forbidden".into()),
            Step::KillFailed => {
                if !self.child_alive()
                    || !matches!(self.core.phase(), Phase::Stopping { killed: true, .. })
                {
                    return Ok(()); // the glue reports only a failed kill
                }
                self.core.on_kill_failed("EPERM".into(), self.now)
            }
            Step::PreStopDone => {
                if !self.hook_running {
                    return Ok(()); // the glue reports only a hook it ran
                }
                self.hook_running = false;
                self.core.on_pre_stop_done(self.now)
            }
        };
        self.run(actions)?;
        self.check_state()
    }

    fn check_state(&mut self) -> Result<(), TestCaseError> {
        if let Phase::Stopping { .. } = self.core.phase() {
            prop_assert!(
                self.core.deadline().is_some(),
                "stopping without a deadline"
            );
        }
        if let Phase::WaitingBirth { .. } | Phase::Holding { .. } | Phase::Restarting { .. } =
            self.core.phase()
        {
            prop_assert!(self.core.deadline().is_some());
        }
        for name in &self.seen_dead {
            let state = self.core.dep_state(name);
            let restarted = self.policy.death_trigger == DeathTrigger::Success
                && matches!(state, DepState::Alive { .. });
            prop_assert!(
                matches!(state, DepState::Dead { .. }) || restarted,
                "{name} was seen dead and is now {state:?}"
            );
        }
        // a restarted dependency starts a new life: it may be absent again, and so on
        let core = &self.core;
        self.seen_dead
            .retain(|n| matches!(core.dep_state(n), DepState::Dead { .. }));
        Ok(())
    }

    /// Follows the deadlines alone (the child never exits on its own): a run that is
    /// stopping or waiting must end within a few deadlines.
    fn drain_deadlines(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..8 {
            if self.finished.is_some() {
                return Ok(());
            }
            let Some(d) = self.core.deadline() else {
                break;
            };
            self.now = self.now.max(d);
            let actions = self.core.tick(self.now);
            self.run(actions)?;
        }
        match self.core.phase() {
            Phase::Stopping { .. } | Phase::WaitingBirth { .. } | Phase::Holding { .. } => {
                prop_assert!(
                    false,
                    "did not end by following deadlines: {:?}",
                    self.core.phase()
                )
            }
            _ => {}
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_for_any_sequence(
        policy in policy(),
        pre in prop::collection::vec((0..4usize, dep_state()), 0..3),
        early_signal in prop::option::of(1..=64i32),
        steps in prop::collection::vec(step(), 0..40),
        spawn_results in prop::collection::vec(spawn_result(), 1),
    ) {
        let now = Instant::now();
        let mut h = Harness {
            core: Core::new(policy.clone()),
            policy,
            now,
            spawned: false,
            running: false,
            reaped: None,
            stop_signalled: false,
            hook_running: false,
            finished: None,
            spawn_results,
            seen_dead: vec![],
            last_signal: None,
            term_sent: false,
        };
        // the first scan, then signals received during setup, then the start
        for (i, state) in &pre {
            let a = h.core.on_dep(NAMES[*i], state.clone(), now);
            prop_assert!(a.is_empty(), "nothing is decided before start");
            if matches!(state, DepState::Dead { .. }) && h.core.is_watched(NAMES[*i]) {
                h.seen_dead.push(NAMES[*i].to_string());
            }
            // (a dependency restarted during the scan starts a new life, as after start)
            h.check_state()?;
        }
        if let Some(n) = early_signal {
            h.last_signal = Signal::new(n);
            let a = h.core.on_signal(Signal::new(n).unwrap(), now);
            h.run(a)?;
        }
        if h.finished.is_none() {
            let a = h.core.start(now);
            h.run(a)?;
        }
        for s in &steps {
            if h.finished.is_some() {
                // nothing may come out of a finished core
                let a = match s {
                    Step::Dep(i, st) => h.core.on_dep(NAMES[*i], st.clone(), h.now),
                    Step::Signal(n) => h.core.on_signal(Signal::new(*n).unwrap(), h.now),
                    Step::Tick(ms) => h.core.tick(h.now + Duration::from_millis(*ms)),
                    _ => vec![],
                };
                prop_assert!(a.is_empty(), "{a:?} after Finish");
                continue;
            }
            h.step(s)?;
        }
        h.drain_deadlines()?;
    }

    #[test]
    fn a_death_dependency_dying_while_running_stops_the_child_in_bounded_time(
        policy in policy(),
        code in prop::option::of(0..3i32),
    ) {
        // (a preStop hook delays the signal: covered by the sequences above)
        let contract = Contract { pre_stop: None, ..policy.contract.clone() };
        let policy = Policy { death_deps: vec!["main".into()], birth_deps: vec![], contract, ..policy };
        let t0 = Instant::now();
        let mut c = Core::new(policy.clone());
        prop_assert_eq!(c.start(t0), vec![Action::Spawn]);
        prop_assert!(c.on_spawned(t0).is_empty());
        let a = c.on_dep("main", DepState::Dead { exit_code: code }, t0);
        let fires = policy.death_trigger == DeathTrigger::Any || code == Some(0);
        prop_assert_eq!(matches!(a.first(), Some(Action::Signal { .. })), fires);
        if fires {
            // grace period, SIGKILL, then at most KILL_WAIT: the deadline is always there
            let last = t0 + policy.grace_period + KILL_WAIT;
            prop_assert!(c.deadline().is_some_and(|d| d <= last));
        }
    }
}
