//! The SidecarTerminator's decision, table-tested (`decide.rs`).

use super::*;
use serde_json::json;

/// A container spec: (name, marker env) with optional extras merged in.
fn container(
    name: &str,
    marker: Option<(&str, &str)>,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut c = json!({"name": name, "image": format!("img/{name}:1")});
    if let Some((k, v)) = marker {
        c["env"] = json!([{"name": k, "value": v}]);
    }
    if let serde_json::Value::Object(m) = extra {
        for (k, v) in m {
            c[k] = v;
        }
    }
    c
}

fn state(s: &str) -> serde_json::Value {
    match s {
        "running" => json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}),
        "waiting" => json!({"waiting": {"reason": "ContainerCreating"}}),
        "pullbackoff" => {
            json!({"waiting": {"reason": "ImagePullBackOff", "message": "not found"}})
        }
        code => json!({"terminated": {"exitCode": code.parse::<i32>().unwrap()}}),
    }
}

/// A pod: restart policy, phase, containers, and states by container name.
fn pod(
    policy: &str,
    phase: &str,
    containers: Vec<serde_json::Value>,
    states: &[(&str, &str)],
) -> Pod {
    let statuses: Vec<_> = states
        .iter()
        .map(|(n, s)| {
            let image = containers
                .iter()
                .find(|c| c["name"] == *n)
                .map(|c| c["image"].clone())
                .unwrap_or(json!("x"));
            json!({"name": n, "image": image, "imageID": "", "ready": false, "restartCount": 0, "state": state(s)})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "42"},
        "spec": {"restartPolicy": policy, "containers": containers},
        "status": {"phase": phase, "containerStatuses": statuses},
    }))
    .unwrap()
}

const Q: Images = Images {
    quick_exit: Some("sexton-quick-exit:1"),
    named: Named::Any,
};
const SIDE: Option<(&str, &str)> = Some((ENV_SIDECAR, "true"));

fn main_and_sidecar(policy: &str, main: &str, side: &str) -> Pod {
    pod(
        policy,
        "Running",
        vec![
            container("main", None, json!({})),
            container("proxy", SIDE, json!({})),
        ],
        &[("main", main), ("proxy", side)],
    )
}

/// The problems of a decision that must act without swapping anything.
fn only_problems(d: Decision) -> Vec<Refusal> {
    match d {
        Decision::Act { swaps, problems } => {
            assert!(swaps.is_empty(), "must not swap: {swaps:?}");
            problems
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

fn swap_of(d: &Decision) -> Vec<String> {
    match d {
        Decision::Act { swaps, .. } => swaps
            .iter()
            .map(|s| format!("{}->{}", s.container, s.to))
            .collect(),
        _ => vec![],
    }
}

#[test]
fn policy_by_main_state_by_sidecar_state() {
    // (policy, main, sidecar, expected: "swap" | "wait" | "done")
    let table = [
        ("Never", "running", "running", "wait"),
        ("Never", "0", "running", "swap"),
        ("Never", "1", "running", "swap"),
        ("Never", "137", "running", "swap"),
        ("Never", "0", "0", "done"),
        ("Never", "1", "2", "done"),
        ("OnFailure", "running", "running", "wait"),
        ("OnFailure", "0", "running", "swap"),
        ("OnFailure", "1", "running", "wait"),
        ("OnFailure", "0", "0", "done"),
        ("OnFailure", "1", "0", "wait"),
        ("Never", "waiting", "running", "wait"),
    ];
    for (policy, main, side, want) in table {
        let d = decide(&main_and_sidecar(policy, main, side), Q);
        let got = match &d {
            Decision::Act { swaps, problems } if !swaps.is_empty() && problems.is_empty() => "swap",
            Decision::Wait(_) => "wait",
            Decision::Done(_) => "done",
            other => panic!("{policy} {main} {side}: unexpected {other:?}"),
        };
        assert_eq!(got, want, "{policy} main={main} sidecar={side}: {d:?}");
    }
}

#[test]
fn ignored_pods() {
    let cases = [
        (
            main_and_sidecar("Always", "0", "running"),
            "restartPolicy Always",
        ),
        (
            pod(
                "Never",
                "Pending",
                vec![
                    container("main", None, json!({})),
                    container("proxy", SIDE, json!({})),
                ],
                &[],
            ),
            "phase Pending",
        ),
        (
            pod(
                "Never",
                "Running",
                vec![
                    container("main", None, json!({})),
                    container("proxy", None, json!({})),
                ],
                &[("main", "0"), ("proxy", "running")],
            ),
            "no container carries",
        ),
        (
            pod(
                "Never",
                "Running",
                vec![
                    container("main", None, json!({})),
                    container("proxy", Some((ENV_SIDECAR, "yes")), json!({})),
                ],
                &[("main", "0"), ("proxy", "running")],
            ),
            "no container carries",
        ),
        (
            pod(
                "Never",
                "Running",
                vec![
                    container("main", None, json!({})),
                    container("proxy", Some((ENV_SIDECAR_IMAGE, "")), json!({})),
                ],
                &[("main", "0"), ("proxy", "running")],
            ),
            "no container carries",
        ),
    ];
    for (p, want) in cases {
        match decide(&p, Q) {
            Decision::Ignore(why) => assert!(why.contains(want), "{why} should say {want}"),
            other => panic!("expected Ignore({want}), got {other:?}"),
        }
    }
    let mut deleting = main_and_sidecar("Never", "0", "running");
    deleting.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
    assert_eq!(
        decide(&deleting, Q),
        Decision::Ignore("pod is being deleted".into())
    );
}

#[test]
fn marker_is_case_insensitive_and_init_containers_are_not_mains() {
    let mut p = pod(
        "Never",
        "Running",
        vec![
            container("main", None, json!({})),
            container("proxy", Some((ENV_SIDECAR, "TRUE")), json!({})),
        ],
        &[("main", "0"), ("proxy", "running")],
    );
    p.spec.as_mut().unwrap().init_containers = Some(vec![
        serde_json::from_value(json!({
            "name": "native", "image": "n", "restartPolicy": "Always"
        }))
        .unwrap(),
    ]);
    assert_eq!(swap_of(&decide(&p, Q)), ["proxy->sexton-quick-exit:1"]);
}

#[test]
fn several_mains_and_sidecars() {
    let containers = vec![
        container("a", None, json!({})),
        container("b", None, json!({})),
        container("proxy", SIDE, json!({})),
        container(
            "logs",
            Some((ENV_SIDECAR_IMAGE, "busybox:quick")),
            json!({}),
        ),
        container("done", SIDE, json!({})),
    ];
    let states = |b: &'static str| {
        vec![
            ("a", "0"),
            ("b", b),
            ("proxy", "running"),
            ("logs", "running"),
            ("done", "0"),
        ]
    };
    let p = pod("Never", "Running", containers.clone(), &states("running"));
    assert!(matches!(decide(&p, Q), Decision::Wait(w) if w.contains("\"b\"")));
    let p = pod("Never", "Running", containers, &states("3"));
    assert_eq!(
        swap_of(&decide(&p, Q)),
        ["proxy->sexton-quick-exit:1", "logs->busybox:quick"],
        "user-named image wins over the default; a terminated sidecar is left alone"
    );
}

#[test]
fn refusals_name_the_container_and_the_fix() {
    let with = |extra: serde_json::Value, marker, os: Option<&str>| {
        let mut p = pod(
            "Never",
            "Running",
            vec![
                container("main", None, json!({})),
                container("proxy", marker, extra),
            ],
            &[("main", "0"), ("proxy", "running")],
        );
        if let Some(os) = os {
            p.spec.as_mut().unwrap().os =
                Some(serde_json::from_value(json!({"name": os})).unwrap());
        }
        p
    };
    let cases = [
        (
            with(json!({"command": ["envoy"]}), SIDE, None),
            Q,
            "SwapRefusedCommand",
        ),
        (
            with(
                json!({"lifecycle": {"postStart": {"exec": {"command": ["x"]}}}}),
                SIDE,
                None,
            ),
            Q,
            "SwapRefusedPostStart",
        ),
        (with(json!({}), SIDE, Some("windows")), Q, "SwapRefusedOS"),
        (
            with(json!({}), SIDE, None),
            Images {
                quick_exit: None,
                ..Q
            },
            "SwapRefusedNoImage",
        ),
        (
            with(json!({"image": "sexton-quick-exit:1"}), SIDE, None),
            Q,
            "SwapRefusedSameImage",
        ),
    ];
    for (p, image, reason) in cases {
        let problems = only_problems(decide(&p, image));
        assert_eq!(problems.len(), 1, "{reason}");
        assert_eq!(problems[0].reason.as_str(), reason);
        assert_eq!(problems[0].container, "proxy");
        assert!(
            problems[0].message.contains("\"proxy\""),
            "{}",
            problems[0].message
        );
    }
    // A user-named image lifts the default-image checks: the user vouches for it.
    let p = with(
        json!({"command": ["envoy"], "lifecycle": {"postStart": {"exec": {"command": ["x"]}}}}),
        Some((ENV_SIDECAR_IMAGE, "envoy-quick:1")),
        Some("windows"),
    );
    assert_eq!(swap_of(&decide(&p, Q)), ["proxy->envoy-quick:1"]);
}

#[test]
fn all_or_nothing_when_one_sidecar_is_refused() {
    let p = pod(
        "Never",
        "Running",
        vec![
            container("main", None, json!({})),
            container("proxy", SIDE, json!({"command": ["envoy"]})),
            container("logs", SIDE, json!({})),
        ],
        &[("main", "0"), ("proxy", "running"), ("logs", "running")],
    );
    let problems = only_problems(decide(&p, Q));
    assert_eq!(problems[0].reason, Reason::SwapRefusedCommand);
    // Once the refused sidecar has ended (say, by hand), the others are swapped.
    let p = pod(
        "Never",
        "Running",
        vec![
            container("main", None, json!({})),
            container("proxy", SIDE, json!({"command": ["envoy"]})),
            container("logs", SIDE, json!({})),
        ],
        &[("main", "0"), ("proxy", "143"), ("logs", "running")],
    );
    assert_eq!(swap_of(&decide(&p, Q)), ["logs->sexton-quick-exit:1"]);
}

#[test]
fn every_container_marked_is_reported() {
    let p = pod(
        "Never",
        "Running",
        vec![container("proxy", SIDE, json!({}))],
        &[("proxy", "running")],
    );
    let problems = only_problems(decide(&p, Q));
    assert_eq!(problems[0].reason, Reason::NoMainContainer);
}

#[test]
fn a_waiting_sidecar_is_swapped_too() {
    for state in ["pullbackoff", "waiting"] {
        let p = main_and_sidecar("Never", "0", state);
        match decide(&p, Q) {
            Decision::Act { swaps, problems } => {
                assert!(problems.is_empty(), "{problems:?}");
                assert_eq!(swaps[0].to, Q.quick_exit.unwrap());
                assert!(swaps[0].waiting.is_some(), "{state}");
            }
            other => panic!("{state}: {other:?}"),
        }
    }
    // not while the main runs
    assert!(matches!(
        decide(&main_and_sidecar("Never", "running", "pullbackoff"), Q),
        Decision::Wait(_)
    ));
}

#[test]
fn ignore_exit_code_that_cannot_be_honoured_is_reported() {
    let p = pod(
        "Never",
        "Running",
        vec![
            container("main", None, json!({})),
            container(
                "proxy",
                SIDE,
                json!({"env": [{"name": ENV_SIDECAR, "value": "true"},
                {"name": ENV_SIDECAR_IGNORE_EXIT_CODE, "value": "true"}]}),
            ),
        ],
        &[("main", "0"), ("proxy", "2")],
    );
    let problems = only_problems(decide(&p, Q));
    assert_eq!(problems[0].reason, Reason::IgnoreExitCodeNotHonoured);
    // exited 0: nothing to honour
    let fine = pod(
        "Never",
        "Running",
        vec![
            container("main", None, json!({})),
            container(
                "proxy",
                SIDE,
                json!({"env": [{"name": ENV_SIDECAR, "value": "true"},
            {"name": ENV_SIDECAR_IGNORE_EXIT_CODE, "value": "true"}]}),
            ),
        ],
        &[("main", "0"), ("proxy", "0")],
    );
    assert!(matches!(decide(&fine, Q), Decision::Done(_)));
}

/// Apply a swap patch the way the API server would (for what the decision reads).
fn apply(p: &Pod, swaps: &[Swap]) -> Pod {
    let patch = swap_patch(p, swaps);
    let mut v = serde_json::to_value(p).unwrap();
    v["metadata"]["annotations"] = patch["metadata"]["annotations"].clone();
    for s in swaps {
        for c in v["spec"]["containers"].as_array_mut().unwrap() {
            if c["name"] == s.container {
                c["image"] = json!(s.to);
            }
        }
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn never_swaps_twice() {
    let p = main_and_sidecar("Never", "0", "running");
    let Decision::Act { swaps, .. } = decide(&p, Q) else {
        panic!()
    };
    let patch = swap_patch(&p, &swaps);
    assert_eq!(patch["metadata"]["resourceVersion"], "42");
    assert_eq!(
        patch["spec"]["containers"],
        json!([{"name": "proxy", "image": "sexton-quick-exit:1"}])
    );
    assert_eq!(
        patch["metadata"]["annotations"][ANNOTATION_SWAPPED],
        json!(r#"{"proxy":"img/proxy:1"}"#)
    );
    let after = apply(&p, &swaps);
    // The old container still runs until the kubelet acts: nothing more to do.
    assert!(matches!(decide(&after, Q), Decision::Done(w) if w.contains("being replaced")));
    // Even if someone puts the old image back, the annotation prevents a second swap.
    let mut reverted = after.clone();
    reverted.spec.as_mut().unwrap().containers[1].image = Some("img/proxy:1".into());
    assert!(matches!(decide(&reverted, Q), Decision::Done(_)));
}

#[test]
fn swapped_sidecar_that_cannot_start_or_fails_is_reported() {
    let p = main_and_sidecar("Never", "0", "running");
    let Decision::Act { swaps, .. } = decide(&p, Q) else {
        panic!()
    };
    let mut stalled = apply(&p, &swaps);
    stalled
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[1]
        .state = Some(serde_json::from_value(state("pullbackoff")).unwrap());
    let problems = only_problems(decide(&stalled, Q));
    assert_eq!(problems[0].reason, Reason::QuickExitStalled);
    let mut failed = apply(&p, &swaps);
    let st = &mut failed
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[1];
    st.state = Some(serde_json::from_value(state("128")).unwrap());
    st.image = "sexton-quick-exit:1".into();
    match decide(&failed, Q) {
        Decision::Act { problems, .. } => {
            assert_eq!(problems[0].reason, Reason::QuickExitFailed)
        }
        other => panic!("{other:?}"),
    }
    // The old container's own exit code (143 after SIGTERM) is not the replacement's.
    let mut old_exit = apply(&p, &swaps);
    old_exit
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[1]
        .state = Some(serde_json::from_value(state("143")).unwrap());
    assert!(matches!(decide(&old_exit, Q), Decision::Done(_)));
}

/// A finished main beside a running sidecar whose marker names `image`.
fn marked_with_image(image: &str) -> Pod {
    pod(
        "Never",
        "Running",
        vec![
            container("main", None, json!({})),
            container("proxy", Some((ENV_SIDECAR_IMAGE, image)), json!({})),
        ],
        &[("main", "0"), ("proxy", "running")],
    )
}

/// No image allowed by name.
const NO_ALLOW_LIST: Images = Images {
    named: Named::Prefixes(&[]),
    ..Q
};

#[test]
fn a_named_image_is_swapped_to_only_when_allowed() {
    let p = marked_with_image("attacker.example/x:1");
    let none = NO_ALLOW_LIST;
    let problems = only_problems(decide(&p, none));
    assert_eq!(problems[0].reason, Reason::SwapRefusedImageNotAllowed);
    assert!(problems[0].message.contains("attacker.example/x:1"));
    let listed = ["attacker.example/".to_string()];
    let some = Images {
        named: Named::Prefixes(&listed),
        ..Q
    };
    assert_eq!(swap_of(&decide(&p, some)), ["proxy->attacker.example/x:1"]);
}

#[test]
fn naming_the_configured_quick_exit_image_needs_no_allow_list() {
    // examples/job-sidecar-terminator.yaml names the quick-exit image itself
    let p = marked_with_image("sexton-quick-exit:1");
    assert_eq!(
        swap_of(&decide(&p, NO_ALLOW_LIST)),
        ["proxy->sexton-quick-exit:1"]
    );
}
