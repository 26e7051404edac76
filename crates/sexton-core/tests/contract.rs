//! Table tests of the sidecar contract's rules in the decision machine (`contract.rs`):
//! each row with the rule on, and with the kubexit-compatible default.

use std::time::{Duration, Instant};

use sexton_core::config::{DeathTrigger, DepExitCode};
use sexton_core::contract::{Backoff, Contract, Hold};
use sexton_core::machine::{
    Action, Cause, ChildStatus, Core, DepState, Outcome, Phase, Policy, Reason, Signal,
};
use sexton_core::pre_stop::PreStop;

const S: fn(u64) -> Duration = Duration::from_secs;

fn policy(deps: &[&str], contract: Contract) -> Policy {
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
        contract,
    }
}

fn sidecar() -> Contract {
    Contract {
        all_deps: true,
        hold: Some(Hold { pod_grace: S(30) }),
        restart: Some(Backoff { base: S(10) }),
        pre_stop: None,
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

/// A core whose child runs, with every dependency alive.
fn running(p: Policy) -> (Core, Instant) {
    let t0 = Instant::now();
    let deps = p.death_deps.clone();
    let mut c = Core::new(p);
    for d in &deps {
        assert!(c.on_dep(d, alive(), t0).is_empty());
    }
    assert_eq!(c.start(t0), vec![Action::Spawn]);
    assert!(c.on_spawned(t0).is_empty());
    (c, t0)
}

fn is_term(a: &[Action]) -> bool {
    matches!(
        a,
        [Action::Signal {
            signal: Signal::SIGTERM,
            ..
        }]
    )
}

fn finish(a: &[Action]) -> Outcome {
    match a {
        [Action::Finish(o)] => o.clone(),
        other => panic!("expected a single Finish, got {other:?}"),
    }
}

#[test]
fn all_mains_not_any() {
    // (all_deps, deaths in order) -> index of the death that stops the child
    let cases: &[(bool, &[&str], Option<usize>)] = &[
        (false, &["a"], Some(0)),
        (false, &["b", "a"], Some(0)),
        (true, &["a"], None),
        (true, &["a", "b"], Some(1)),
        (true, &["b", "a"], Some(1)),
    ];
    for (all, deaths, stops_at) in cases {
        let contract = Contract {
            all_deps: *all,
            ..Contract::default()
        };
        let (mut c, t0) = running(policy(&["a", "b"], contract));
        let mut stopped = None;
        for (i, d) in deaths.iter().enumerate() {
            let a = c.on_dep(d, dead(0), t0);
            if !a.is_empty() {
                assert!(is_term(&a), "{a:?}");
                stopped.get_or_insert(i);
            }
        }
        assert_eq!(stopped, *stops_at, "all={all} deaths={deaths:?}");
    }
    // the message names all of them
    let contract = Contract {
        all_deps: true,
        ..Contract::default()
    };
    let (mut c, t0) = running(policy(&["a", "b"], contract));
    c.on_dep("a", dead(0), t0);
    let a = c.on_dep("b", dead(3), t0);
    let Action::Signal { why, .. } = &a[0] else {
        panic!()
    };
    assert!(
        why.contains("\"b\" died with exit code 3") && why.contains("all of a, b"),
        "{why}"
    );
}

#[test]
fn all_deps_dead_before_start_and_success_trigger() {
    let t0 = Instant::now();
    let all = Contract {
        all_deps: true,
        ..Contract::default()
    };
    // one of two dead before the start: started under all, not under any
    for (contract, spawns) in [(all.clone(), true), (Contract::default(), false)] {
        let mut c = Core::new(policy(&["a", "b"], contract));
        c.on_dep("a", dead(0), t0);
        c.on_dep("b", alive(), t0);
        let a = c.start(t0);
        assert_eq!(a == vec![Action::Spawn], spawns, "{a:?}");
    }
    let mut c = Core::new(policy(&["a", "b"], all.clone()));
    c.on_dep("a", dead(0), t0);
    c.on_dep("b", dead(1), t0);
    assert_eq!(
        finish(&c.start(t0)).reason,
        Reason::DependencyDeadBeforeStart
    );
    // OnFailure: a failed main will be restarted; only the mains' successes count
    let mut p = policy(&["a", "b"], all);
    p.death_trigger = DeathTrigger::Success;
    let (mut c, t0) = running(p);
    assert!(c.on_dep("a", dead(1), t0).is_empty());
    assert!(c.on_dep("b", dead(0), t0).is_empty(), "a is not final yet");
    assert!(c.on_dep("a", alive(), t0).is_empty(), "a restarted");
    assert!(is_term(&c.on_dep("a", dead(0), t0)));
}

#[test]
fn a_stop_signal_is_held_while_death_deps_live() {
    // default: forwarded at once
    let (mut c, t0) = running(policy(&["main"], Contract::default()));
    assert!(is_term(&c.on_signal(Signal::SIGTERM, t0)));
    // held: not forwarded; other signals are
    let (mut c, t0) = running(policy(&["main"], sidecar()));
    assert!(c.on_signal(Signal::SIGTERM, t0).is_empty());
    // 30s pod grace - 10s grace - 1s margin
    assert_eq!(
        c.phase(),
        &Phase::Holding {
            signal: Signal::SIGTERM,
            until: t0 + S(19)
        }
    );
    assert_eq!(c.deadline(), Some(t0 + S(19)));
    assert!(matches!(
        &c.on_signal(Signal::SIGUSR1, t0)[..],
        [Action::Signal {
            signal: Signal::SIGUSR1,
            ..
        }]
    ));
    assert!(c.on_signal(Signal::SIGTERM, t0).is_empty(), "still held");
    // the main drains for 3 s, then dies: the sidecar is stopped as on a main's exit
    let t3 = t0 + S(3);
    assert!(c.tick(t3).is_empty());
    let a = c.on_dep("main", dead(0), t3);
    assert!(is_term(&a), "{a:?}");
    assert_eq!(c.deadline(), Some(t3 + S(10)));
    let o = finish(&c.on_child_exit(ChildStatus::Signaled(Signal::SIGTERM), t3));
    assert_eq!(
        (o.exit_code, o.reason, o.death_dep.as_deref()),
        (0, Reason::StoppedByDependency, Some("main"))
    );
}

#[test]
fn a_held_signal_ends_at_its_bound() {
    let mut p = policy(&["main"], sidecar());
    p.term_signal = Signal::SIGINT;
    let (mut c, t0) = running(p);
    c.on_signal(Signal::SIGTERM, t0);
    assert!(c.tick(t0 + S(19) - Duration::from_millis(1)).is_empty());
    let a = c.tick(t0 + S(19));
    let [Action::Signal { signal, why, .. }] = &a[..] else {
        panic!("{a:?}")
    };
    assert_eq!(*signal, Signal::SIGINT, "the term signal, not the held one");
    assert!(
        why.contains("SIGTERM was held") && why.contains("(main)"),
        "{why}"
    );
    // the child still has its grace period, and ends before the pod's
    assert_eq!(c.deadline(), Some(t0 + S(29)));
    let o = finish(&c.on_child_exit(ChildStatus::Exited(0), t0 + S(20)));
    assert_eq!((o.exit_code, o.reason), (0, Reason::StoppedBySignal));
    // a sleep preStop ran before the signal reached the supervisor: the bound is earlier
    let mut p = policy(&["main"], sidecar());
    p.contract.pre_stop = Some(PreStop::Sleep(S(5)));
    let (mut c, t0) = running(p);
    c.on_signal(Signal::SIGTERM, t0);
    assert_eq!(c.deadline(), Some(t0 + S(14)));
    // a pod grace period that leaves no room: no hold
    let mut p = policy(&["main"], sidecar());
    p.contract.hold = Some(Hold { pod_grace: S(5) });
    let (mut c, t0) = running(p);
    let a = c.on_signal(Signal::SIGTERM, t0);
    assert!(is_term(&a), "{a:?}");
    assert!(matches!(
        c.phase(),
        Phase::Stopping {
            cause: Cause::Signal { bound: true, .. },
            ..
        }
    ));
}

#[test]
fn nothing_to_hold_for() {
    // the main never started (absent) or failed for good: stopped at once, exit 0
    for state in [DepState::Absent, dead(1)] {
        let mut p = policy(&["main"], sidecar());
        p.death_trigger = DeathTrigger::Success;
        let (mut c, t0) = running(p);
        c.on_dep("main", state.clone(), t0);
        let a = c.on_signal(Signal::SIGTERM, t0);
        assert!(is_term(&a), "{state:?}: {a:?}");
        let o = finish(&c.on_child_exit(ChildStatus::Exited(143), t0));
        assert_eq!((o.exit_code, o.reason), (0, Reason::StoppedBySignal));
    }
    // under any, one death of two ends the hold
    let mut contract = sidecar();
    contract.all_deps = false;
    let (mut c, t0) = running(policy(&["a", "b"], contract));
    c.on_signal(Signal::SIGTERM, t0);
    assert!(is_term(&c.on_dep("a", dead(0), t0)));
}

#[test]
fn a_child_that_exits_during_the_hold_is_not_restarted() {
    let (mut c, t0) = running(policy(&["main"], sidecar()));
    c.on_signal(Signal::SIGTERM, t0);
    assert!(
        c.on_child_exit(ChildStatus::Exited(1), t0).is_empty(),
        "held on: sidecars stopping after this one still wait"
    );
    assert!(matches!(c.phase(), Phase::Holding { .. }));
    let o = finish(&c.on_dep("main", dead(0), t0 + S(1)));
    assert_eq!((o.exit_code, o.reason), (0, Reason::StoppedByDependency));
    assert!(
        o.message.contains("not running (it exited with code 1)"),
        "{}",
        o.message
    );
}

#[test]
fn a_crashed_sidecar_is_restarted_with_the_kubelets_backoff() {
    // default: the container ends with the child
    let (mut c, t0) = running(policy(&["main"], Contract::default()));
    assert_eq!(
        finish(&c.on_child_exit(ChildStatus::Exited(3), t0)).exit_code,
        3
    );

    let (mut c, t0) = running(policy(&["main"], sidecar()));
    let mut t = t0;
    // (ran for, delay before the restart)
    let steps = [
        (S(1), S(0)),
        (S(1), S(10)),
        (S(1), S(20)),
        (S(1), S(40)),
        (S(1), S(80)),
        (S(1), S(160)),
        (S(1), S(300)),
        (S(1), S(300)),
        (S(600), S(0)),
        (S(1), S(10)),
    ];
    for (n, (ran, delay)) in steps.iter().enumerate() {
        t += *ran;
        let a = c.on_child_exit(ChildStatus::Exited(1), t);
        let count = n as u32 + 1;
        if delay.is_zero() {
            assert_eq!(a, vec![Action::Restart { count }], "restart {count}");
        } else {
            assert!(a.is_empty(), "{a:?}");
            assert_eq!(c.deadline(), Some(t + *delay), "restart {count}");
            assert!(c.tick(t + *delay - Duration::from_millis(1)).is_empty());
            t += *delay;
            assert_eq!(c.tick(t), vec![Action::Restart { count }]);
        }
        assert_eq!(c.restarts(), count);
        assert_eq!(c.phase(), &Phase::Starting);
        assert!(c.on_spawned(t).is_empty());
    }
}

#[test]
fn no_restart_after_the_deps_died_or_a_stop_signal() {
    // the main died while the child waits for its restart: ends without it, exit 0
    let (mut c, t0) = running(policy(&["main"], sidecar()));
    c.on_child_exit(ChildStatus::Exited(1), t0);
    c.on_spawned(t0);
    c.on_child_exit(ChildStatus::Exited(1), t0);
    assert!(matches!(c.phase(), Phase::Restarting { .. }));
    let o = finish(&c.on_dep("main", dead(0), t0));
    assert_eq!((o.exit_code, o.reason), (0, Reason::StoppedByDependency));
    // a stop signal while waiting: held until the main died, never restarted
    let (mut c, t0) = running(policy(&["main"], sidecar()));
    c.on_child_exit(ChildStatus::Exited(1), t0);
    c.on_spawned(t0);
    c.on_child_exit(ChildStatus::Exited(1), t0);
    assert!(c.on_signal(Signal::SIGTERM, t0).is_empty());
    assert!(matches!(c.phase(), Phase::Holding { .. }));
    assert_eq!(
        c.tick(t0 + S(10)),
        vec![],
        "the restart is not due any more"
    );
    let o = finish(&c.on_dep("main", dead(0), t0 + S(11)));
    assert_eq!((o.exit_code, o.reason), (0, Reason::StoppedByDependency));
    // restart without hold: a forwarded stop signal makes the child's exit final
    let mut contract = sidecar();
    contract.hold = None;
    let (mut c, t0) = running(policy(&["main"], contract.clone()));
    assert!(is_term(&c.on_signal(Signal::SIGTERM, t0)));
    let o = finish(&c.on_child_exit(ChildStatus::Signaled(Signal::SIGTERM), t0));
    assert_eq!((o.exit_code, o.reason), (143, Reason::Signaled));
    // ... and one while waiting to restart ends the container (stopped, exit 0)
    let (mut c, t0) = running(policy(&["main"], contract));
    c.on_child_exit(ChildStatus::Exited(1), t0);
    c.on_spawned(t0);
    c.on_child_exit(ChildStatus::Exited(1), t0);
    let o = finish(&c.on_signal(Signal::SIGTERM, t0));
    assert_eq!((o.exit_code, o.reason), (0, Reason::StoppedBySignal));
}

#[test]
fn pre_stop_runs_before_the_term_signal_when_the_deps_die() {
    let with = |hook: PreStop| {
        let mut p = policy(&["main"], sidecar());
        p.contract.pre_stop = Some(hook);
        running(p)
    };
    let exec = PreStop::Exec(vec!["/drain".into()]);
    // exec/http: the glue runs it; the term signal follows its end
    let (mut c, t0) = with(exec.clone());
    assert_eq!(c.on_dep("main", dead(0), t0), vec![Action::RunPreStop]);
    assert_eq!(
        c.deadline(),
        Some(t0 + S(10)),
        "bounded by the grace period"
    );
    let t3 = t0 + S(3);
    assert!(is_term(&c.on_pre_stop_done(t3)));
    assert_eq!(
        c.deadline(),
        Some(t0 + S(10)),
        "its time counts in the grace period"
    );
    assert!(c.on_pre_stop_done(t3).is_empty(), "once");
    // a hook that takes the whole grace period: the term signal, then 2 s more
    let (mut c, t0) = with(exec.clone());
    c.on_dep("main", dead(0), t0);
    assert!(is_term(&c.tick(t0 + S(10))));
    assert_eq!(c.deadline(), Some(t0 + S(12)));
    assert!(matches!(&c.tick(t0 + S(12))[..], [Action::Kill { .. }]));
    // sleep: the core's own timer
    let (mut c, t0) = with(PreStop::Sleep(S(4)));
    assert!(c.on_dep("main", dead(0), t0).is_empty());
    assert_eq!(c.deadline(), Some(t0 + S(4)));
    assert!(is_term(&c.tick(t0 + S(4))));
    assert_eq!(c.deadline(), Some(t0 + S(10)));
    // never on a signal: the kubelet ran it before sending the signal
    let (mut c, t0) = with(exec);
    c.on_signal(Signal::SIGTERM, t0);
    assert!(is_term(&c.on_dep("main", dead(0), t0 + S(1))));
}

/// A stop under way is not signalled again: under `native-wrap` the kubelet's SIGTERM
/// reaches a sidecar whose supervisor stopped it already (the mains ended), and a program
/// that takes a second SIGTERM as "exit now" would skip its drain. Other signals are still
/// forwarded, a different stop signal too, and SIGKILL still ends the grace period.
#[test]
fn a_stop_under_way_is_not_signalled_again() {
    for contract in [sidecar(), Contract::default()] {
        let (mut c, t0) = running(policy(&["main"], contract.clone()));
        assert!(is_term(&c.on_dep("main", dead(0), t0)));
        let t1 = t0 + S(1);
        assert!(c.on_signal(Signal::SIGTERM, t1).is_empty(), "{contract:?}");
        assert!(c.absorbs(Signal::SIGTERM));
        for other in [Signal::SIGINT, Signal::SIGHUP, Signal::SIGUSR1] {
            assert!(!c.absorbs(other));
            assert_eq!(
                c.on_signal(other, t1),
                vec![Action::Signal {
                    signal: other,
                    group: false,
                    why: format!("forwarding {other}")
                }]
            );
        }
        assert_eq!(c.deadline(), Some(t0 + S(10)), "the grace period stays");
        assert!(matches!(&c.tick(t0 + S(10))[..], [Action::Kill { .. }]));
    }
    // the other order, kubexit's forwarding: SIGTERM forwarded while the child runs, then
    // the dependency dies: the stop sets the deadline, sends nothing
    let (mut c, t0) = running(policy(&["main"], Contract::default()));
    assert!(is_term(&c.on_signal(Signal::SIGTERM, t0)));
    assert!(c.on_dep("main", dead(0), t0).is_empty());
    assert!(matches!(c.phase(), Phase::Stopping { .. }));
    assert_eq!(c.deadline(), Some(t0 + S(10)));
    assert!(c.on_signal(Signal::SIGTERM, t0).is_empty());
    // a preStop hook running: SIGTERM comes once, after it
    let mut p = policy(&["main"], sidecar());
    p.contract.pre_stop = Some(PreStop::Exec(vec!["/drain".into()]));
    let (mut c, t0) = running(p);
    assert_eq!(c.on_dep("main", dead(0), t0), vec![Action::RunPreStop]);
    assert!(c.on_signal(Signal::SIGTERM, t0 + S(1)).is_empty());
    assert!(is_term(&c.on_pre_stop_done(t0 + S(2))));
    assert!(c.on_signal(Signal::SIGTERM, t0 + S(3)).is_empty());
    // a custom termination signal: the kubelet's SIGTERM is a different one, forwarded
    let mut p = policy(&["main"], sidecar());
    p.term_signal = Signal::SIGINT;
    let (mut c, t0) = running(p);
    c.on_dep("main", dead(0), t0);
    assert!(c.on_signal(Signal::SIGINT, t0).is_empty());
    assert!(is_term(&c.on_signal(Signal::SIGTERM, t0)));
    // a restarted child is a new run: it gets its own SIGTERM
    let mut contract = sidecar();
    contract.hold = None;
    let (mut c, t0) = running(policy(&["main"], contract));
    c.on_child_exit(ChildStatus::Exited(1), t0);
    assert!(c.on_spawned(t0).is_empty());
    assert!(is_term(&c.on_dep("main", dead(0), t0)));
}

#[test]
fn kubexit_default_has_no_contract() {
    // a hand-written kubexit sidecar: no hold, no restart, any
    let (mut c, t0) = running(policy(&["a", "b"], Contract::default()));
    assert!(is_term(&c.on_dep("a", dead(0), t0)));
    let o = finish(&c.on_child_exit(ChildStatus::Exited(0), t0));
    assert_eq!(o.reason.as_str(), "stopped-by-dependency");
    assert_eq!(Reason::StoppedBySignal.as_str(), "stopped-by-signal");
    assert!(!Reason::StoppedBySignal.is_failure());
}

#[test]
fn nothing_held_without_death_dependencies() {
    // a main with the contract's settings: its stop signal is forwarded, its code its own
    let (mut c, t0) = running(policy(&[], sidecar()));
    assert!(is_term(&c.on_signal(Signal::SIGTERM, t0)));
    let o = finish(&c.on_child_exit(ChildStatus::Signaled(Signal::SIGTERM), t0));
    assert_eq!((o.exit_code, o.reason), (143, Reason::Signaled));
}
