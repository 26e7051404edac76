//! One test per `Note` the core gives: the situation that gives it, and that it is given
//! once (`take_notes` empties the list).

use std::time::{Duration, Instant};

use crate::config::{DeathTrigger, DepExitCode};
use crate::contract::{Backoff, Contract, Hold};
use crate::machine::{Action, ChildStatus, Core, DepState, Note, Policy, Signal};

const S: fn(u64) -> Duration = Duration::from_secs;

fn policy(deps: &[&str]) -> Policy {
    Policy {
        death_deps: deps.iter().map(|d| d.to_string()).collect(),
        birth_deps: vec![],
        grace_period: S(10),
        birth_timeout: S(30),
        term_signal: Signal::SIGTERM,
        signal_group: false,
        dep_exit_code: DepExitCode::Zero,
        death_trigger: DeathTrigger::Any,
        birth_via_api: false,
        pid1: true,
        contract: Contract::default(),
    }
}

fn alive() -> DepState {
    DepState::Alive { ready: true }
}

fn dead(code: i32) -> DepState {
    DepState::Dead {
        exit_code: Some(code),
    }
}

/// A core whose child runs, every dependency alive, and no note left to take.
fn running(p: Policy) -> (Core, Instant) {
    let t0 = Instant::now();
    let deps = p.death_deps.clone();
    let mut c = Core::new(p);
    for d in &deps {
        assert!(c.on_dep(d, alive(), t0).is_empty());
    }
    assert_eq!(c.start(t0), vec![Action::Spawn]);
    assert!(c.on_spawned(t0).is_empty());
    assert_eq!(c.take_notes(), vec![]);
    (c, t0)
}

#[test]
fn waiting_for_birth_dependencies() {
    let t0 = Instant::now();
    let mut c = Core::new(Policy {
        birth_deps: vec!["db".into(), "proxy".into()],
        ..policy(&[])
    });
    c.on_dep("proxy", alive(), t0);
    assert!(c.start(t0).is_empty());
    assert_eq!(
        c.take_notes(),
        vec![Note::WaitingForBirth {
            not_ready: vec!["db".into()],
            timeout: S(30),
        }]
    );
    assert_eq!(c.take_notes(), vec![], "taken once");
}

#[test]
fn a_failure_may_be_restarted_under_the_success_trigger() {
    let (mut c, t0) = running(Policy {
        death_trigger: DeathTrigger::Success,
        ..policy(&["main"])
    });
    assert!(c.on_dep("main", dead(1), t0).is_empty());
    assert_eq!(
        c.take_notes(),
        vec![Note::FailureMayRestart {
            dep: "main".into(),
            exit_code: Some(1),
        }]
    );
    // the same record read again changes nothing and says nothing
    assert!(c.on_dep("main", dead(1), t0).is_empty());
    assert_eq!(c.take_notes(), vec![]);
}

#[test]
fn one_death_of_several_under_all() {
    let (mut c, t0) = running(Policy {
        contract: Contract {
            all_deps: true,
            ..Contract::default()
        },
        ..policy(&["main-a", "main-b"])
    });
    assert!(c.on_dep("main-a", dead(0), t0).is_empty());
    assert_eq!(
        c.take_notes(),
        vec![Note::WaitingForAll {
            dep: "main-a".into(),
            exit_code: Some(0),
            waiting: vec!["main-b".into()],
        }]
    );
    // the last death stops the child: its actions say so, no note
    assert!(!c.on_dep("main-b", dead(0), t0).is_empty());
    assert_eq!(c.take_notes(), vec![]);
}

#[test]
fn a_restart_at_once_then_after_the_back_off() {
    let (mut c, t0) = running(Policy {
        contract: Contract {
            restart: Some(Backoff { base: S(10) }),
            ..Contract::default()
        },
        ..policy(&["main"])
    });
    let crashed = ChildStatus::Exited(3);
    assert_eq!(
        c.on_child_exit(crashed, t0),
        vec![Action::Restart { count: 1 }]
    );
    assert_eq!(
        c.take_notes(),
        vec![Note::Restarting {
            status: crashed,
            restart: 1,
            delay: Duration::ZERO,
        }]
    );
    assert!(c.on_spawned(t0).is_empty());
    assert!(c.on_child_exit(crashed, t0).is_empty());
    assert_eq!(
        c.take_notes(),
        vec![Note::Restarting {
            status: crashed,
            restart: 2,
            delay: S(10),
        }]
    );
}

#[test]
fn a_stop_signal_held_and_the_child_exiting_while_it_is() {
    let (mut c, t0) = running(Policy {
        contract: Contract {
            hold: Some(Hold { pod_grace: S(30) }),
            ..Contract::default()
        },
        ..policy(&["main"])
    });
    assert!(c.on_signal(Signal::SIGTERM, t0).is_empty());
    // 30 s of the pod, less 10 s of grace and the 1 s margin
    assert_eq!(
        c.take_notes(),
        vec![Note::Holding {
            signal: Signal::SIGTERM,
            living: vec!["main".into()],
            bound: S(19),
        }]
    );
    assert!(c.on_signal(Signal::SIGTERM, t0).is_empty(), "held already");
    assert_eq!(c.take_notes(), vec![]);
    let status = ChildStatus::Exited(0);
    assert!(c.on_child_exit(status, t0).is_empty());
    assert_eq!(c.take_notes(), vec![Note::ExitedWhileHeld { status }]);
}

#[test]
fn the_termination_signal_of_a_stop_under_way_is_absorbed() {
    let (mut c, t0) = running(policy(&["main"]));
    assert!(matches!(
        c.on_dep("main", dead(0), t0).as_slice(),
        [Action::Signal { .. }]
    ));
    assert_eq!(c.take_notes(), vec![]);
    assert!(c.on_signal(Signal::SIGTERM, t0).is_empty());
    assert_eq!(
        c.take_notes(),
        vec![Note::Absorbed {
            signal: Signal::SIGTERM
        }]
    );
    // another signal is forwarded, and needs no note
    assert!(!c.on_signal(Signal::SIGUSR1, t0).is_empty());
    assert_eq!(c.take_notes(), vec![]);
}

#[test]
fn a_signal_that_stops_nothing_before_the_start_is_dropped() {
    let t0 = Instant::now();
    let mut c = Core::new(policy(&["main"]));
    assert!(c.on_signal(Signal::SIGUSR1, t0).is_empty());
    assert_eq!(
        c.take_notes(),
        vec![Note::Dropped {
            signal: Signal::SIGUSR1
        }]
    );
    // a stop signal ends the container: its outcome says why
    assert!(!c.on_signal(Signal::SIGTERM, t0).is_empty());
    assert_eq!(c.take_notes(), vec![]);
}
