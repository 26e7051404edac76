//! The decision machine, table-tested (`machine.rs`).

use super::*;
use crate::config::{DeathTrigger, DepExitCode};
use crate::contract::Contract;
use crate::tombstone::Tombstone;

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

/// The grace period runs from the moment the glue sent the signal, not from the decision
/// (on a loaded machine the glue sends it milliseconds later); other signals, or the
/// termination signal forwarded again, do not move SIGKILL.
#[test]
fn grace_runs_from_the_signal_sent_not_from_the_decision() {
    let (mut c, t0) = running(policy());
    let late = Duration::from_millis(50);
    let a = c.on_dep("main", dead(Some(0)), t0);
    assert!(matches!(&a[..], [Action::Signal { .. }]), "{a:?}");
    c.signal_sent(Signal::SIGUSR1, t0 + late);
    assert_eq!(
        c.deadline(),
        Some(t0 + Duration::from_secs(10)),
        "another signal"
    );
    c.signal_sent(Signal::SIGTERM, t0 + late);
    assert_eq!(c.deadline(), Some(t0 + late + Duration::from_secs(10)));
    assert!(
        c.tick(t0 + Duration::from_secs(10)).is_empty(),
        "the whole grace"
    );
    c.signal_sent(Signal::SIGTERM, t0 + Duration::from_secs(5));
    assert_eq!(
        c.deadline(),
        Some(t0 + late + Duration::from_secs(10)),
        "sent again: owed once"
    );
    let a = c.tick(t0 + late + Duration::from_secs(10));
    assert!(matches!(&a[..], [Action::Kill { .. }]), "{a:?}");
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
        // the termination signal is the stop's own (`a_stop_under_way_is_not_signalled_again`)
        assert_eq!(c.on_signal(Signal::SIGINT, t0).len(), 1);
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
