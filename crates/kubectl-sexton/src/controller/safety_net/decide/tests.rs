//! The safety net's decision, table-tested (`decide.rs`).

use super::*;
use crate::controller::terminator::decide::{Named, Reason};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use serde_json::{Value, json};

const Q: &str = "sexton-quick-exit:1";

fn rules(catalogue: &Catalogue, terminator_runs: bool) -> Rules<'_> {
    Rules {
        catalogue,
        images: Images {
            quick_exit: Some(Q),
            named: Named::Any,
        },
        terminator_runs,
    }
}

fn yes() -> Served {
    Served::Yes {
        hook: "inject.sexton.dev".into(),
        labelled_later: None,
    }
}

fn c(name: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "image": format!("img/{name}:1")});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            c[k] = v;
        }
    }
    c
}

fn state(s: &str) -> Value {
    match s {
        "running" => json!({"running": {}}),
        "crashloop" => json!({"waiting": {"reason": "CrashLoopBackOff"}}),
        "stalled" => json!({"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}),
        code => json!({"terminated": {"exitCode": code.parse::<i32>().unwrap()}}),
    }
}

/// A pod: annotations, restart policy, containers and states (`STATE` or `STATE@IMAGE`).
fn pod(annotations: Value, policy: &str, containers: Vec<Value>, states: &[(&str, &str)]) -> Pod {
    let statuses: Vec<Value> = states
        .iter()
        .map(|(n, s)| {
            let (s, image) = match s.split_once('@') {
                Some((s, i)) => (s, json!(i)),
                None => (*s, json!(format!("img/{n}:1"))),
            };
            json!({"name": n, "image": image, "state": state(s)})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "1", "annotations": annotations},
        "spec": {"restartPolicy": policy, "containers": containers},
        "status": {"phase": "Running", "containerStatuses": statuses},
    }))
    .unwrap()
}

fn declared(list: &str) -> Value {
    json!({"sexton.dev/sidecars": list})
}

/// The swap of a decision to end, or a panic saying what it was.
fn ends(d: &Decision) -> (&str, Cause, &[String], bool) {
    match d {
        Decision::End(e) => (
            e.swap.container.as_str(),
            e.record.cause,
            &e.record.sidecars,
            e.first,
        ),
        other => panic!("expected End, got {other:?}"),
    }
}

fn kind(d: &Decision) -> &'static str {
    match d {
        Decision::Ignore(_) => "ignore",
        Decision::Wait(_) => "wait",
        Decision::End(_) => "end",
        Decision::Refuse { .. } => "refuse",
        Decision::Done(_) => "done",
    }
}

#[test]
fn a_declared_sidecar_is_swapped_once_every_main_is_done_and_not_before() {
    let cat = Catalogue::empty();
    let two_mains = || vec![c("a", json!({})), c("b", json!({})), c("proxy", json!({}))];
    // (policy, a, b, decision)
    for (policy, a, b, want) in [
        ("Never", "running", "0", "wait"),
        ("Never", "0", "running", "wait"),
        ("Never", "0", "0", "end"),
        ("Never", "0", "3", "end"),
        ("OnFailure", "0", "0", "end"),
        // a failed main is restarted under OnFailure: the retry is waited for
        ("OnFailure", "0", "3", "wait"),
        ("OnFailure", "1", "0", "wait"),
    ] {
        let p = pod(
            declared("proxy"),
            policy,
            two_mains(),
            &[("a", a), ("b", b), ("proxy", "running")],
        );
        let d = decide(&p, &yes(), &rules(&cat, true));
        assert_eq!(kind(&d), want, "{policy} a={a} b={b}: {d:?}");
        if want == "end" {
            assert_eq!(
                ends(&d),
                (
                    "proxy",
                    Cause::NotInjected,
                    &["proxy".to_string()][..],
                    true
                )
            );
            let Decision::End(e) = d else { unreachable!() };
            assert_eq!(
                (e.swap.from.as_str(), e.swap.to.as_str()),
                ("img/proxy:1", Q)
            );
        }
    }
}

#[test]
fn pods_the_net_leaves_alone() {
    let cat = Catalogue::default();
    let done = [("main", "0"), ("proxy", "running")];
    let mc = || vec![c("main", json!({})), c("proxy", json!({}))];
    let not_served = Served::No("not served".into());
    let record = r#"{"version":1,"mechanism":"wrap","sidecars":["proxy"],"mains":["main"]}"#;
    let marked = || {
        vec![
            c("main", json!({})),
            c(
                "proxy",
                json!({"env": [{"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}]}),
            ),
        ]
    };
    // (what, pod, served, SidecarTerminator runs, why)
    let cases: Vec<(&str, Pod, Served, bool, &str)> = vec![
        (
            "not served",
            pod(declared("proxy"), "Never", mc(), &done),
            not_served,
            true,
            "not served",
        ),
        (
            "long-running",
            pod(declared("proxy"), "Always", mc(), &done),
            yes(),
            true,
            "restartPolicy Always",
        ),
        (
            "nothing declared",
            pod(json!({}), "Never", mc(), &done),
            yes(),
            true,
            "no sidecar declared or recognised",
        ),
        (
            "injected by sexton",
            pod(
                json!({"sexton.dev/sidecars": "proxy", "sexton.dev/injected": record}),
                "Never",
                mc(),
                &done,
            ),
            yes(),
            true,
            "sexton injected it (wrap)",
        ),
        (
            "a record it cannot read",
            pod(
                json!({"sexton.dev/sidecars": "proxy", "sexton.dev/injected": r#"{"version":7}"#}),
                "Never",
                mc(),
                &done,
            ),
            yes(),
            true,
            "a record of sexton's",
        ),
        (
            "wrapped by hand",
            pod(
                declared("proxy"),
                "Never",
                vec![
                    c("main", json!({})),
                    c(
                        "proxy",
                        json!({"command": ["/sexton/sexton", "--", "envoy"]}),
                    ),
                ],
                &done,
            ),
            yes(),
            true,
            "it runs behind sexton's supervisor",
        ),
        (
            "kubexit's image",
            pod(
                json!({}),
                "Never",
                vec![
                    c("main", json!({})),
                    c(
                        "proxy",
                        json!({"env": [{"name": "KUBEXIT_NAME", "value": "proxy"}, {"name": "KUBEXIT_DEATH_DEPS", "value": "main"}]}),
                    ),
                ],
                &done,
            ),
            yes(),
            true,
            "KUBEXIT_NAME",
        ),
        (
            "OpenKruise's marker",
            pod(json!({}), "Never", marked(), &done),
            yes(),
            true,
            "the SidecarTerminator",
        ),
        (
            "every container a sidecar",
            pod(declared("main,proxy"), "Never", mc(), &done),
            yes(),
            true,
            "no main to wait for",
        ),
    ];
    for (what, p, s, terminator, why) in cases {
        let rules = rules(&cat, terminator);
        match decide(&p, &s, &rules) {
            Decision::Ignore(w) => assert!(w.contains(why), "{what}: {w}"),
            other => panic!("{what}: {other:?}"),
        }
        // the Pod alone says so, but whether the webhook serves it: the net's loop queues
        // only candidates, and a namespace labelled later makes a candidate served
        let is_candidate = candidate(&p, &rules).is_ok();
        assert_eq!(is_candidate, what == "not served", "{what}");
    }
    // being deleted
    let mut p = pod(declared("proxy"), "Never", mc(), &done);
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    assert_eq!(kind(&decide(&p, &yes(), &rules(&cat, true))), "ignore");
    // OpenKruise's marker without the SidecarTerminator in the process: the net ends it
    let p = pod(json!({}), "Never", marked(), &done);
    assert_eq!(ends(&decide(&p, &yes(), &rules(&cat, false))).0, "proxy");
}

#[test]
fn every_way_of_declaring_and_recognising() {
    let cat = Catalogue::default();
    let kubexit = c(
        "proxy",
        json!({"env": [{"name": "KUBEXIT_DEATH_DEPS", "value": "main"}]}),
    );
    let istio = json!({"sidecar.istio.io/status": "{}"});
    for (what, annotations, proxy) in [
        ("annotation", declared("proxy"), c("proxy", json!({}))),
        ("kubexit's variable, no supervisor", json!({}), kubexit),
        (
            "Istio's proxy, recognised",
            istio.clone(),
            c("istio-proxy", json!({})),
        ),
    ] {
        let name = proxy["name"].as_str().unwrap().to_string();
        let p = pod(
            annotations,
            "Never",
            vec![c("main", json!({})), proxy],
            &[("main", "0"), (name.as_str(), "running")],
        );
        assert_eq!(
            ends(&decide(&p, &yes(), &rules(&cat, true))).0,
            name,
            "{what}"
        );
    }
    // a container called istio-proxy in a Pod Istio never touched is the user's: a main
    let p = pod(
        json!({}),
        "Never",
        vec![c("main", json!({})), c("istio-proxy", json!({}))],
        &[("main", "0"), ("istio-proxy", "running")],
    );
    assert_eq!(kind(&decide(&p, &yes(), &rules(&cat, true))), "ignore");
}

#[test]
fn sidecars_end_in_reverse_order_one_after_the_other() {
    let cat = Catalogue::empty();
    let three = || {
        vec![
            c("main", json!({})),
            c("logs", json!({})),
            c("proxy", json!({})),
        ]
    };
    let p = pod(
        declared("proxy,logs"),
        "Never",
        three(),
        &[("main", "0"), ("logs", "running"), ("proxy", "running")],
    );
    let d = decide(&p, &yes(), &rules(&cat, true));
    assert_eq!(
        ends(&d),
        (
            "proxy",
            Cause::NotInjected,
            &["proxy".to_string(), "logs".to_string()][..],
            true
        )
    );
    // proxy swapped: while the kubelet replaces it, logs waits
    let swapped_proxy = json!({
        "sexton.dev/sidecars": "proxy,logs",
        "sexton.dev/swapped-sidecars": r#"{"proxy":"img/proxy:1"}"#,
        "sexton.dev/safety-net": r#"{"cause":"NotInjected","sidecars":["proxy","logs"]}"#,
    });
    let mut three_swapped = three();
    three_swapped[2]["image"] = json!(Q);
    let p = pod(
        swapped_proxy.clone(),
        "Never",
        three_swapped.clone(),
        &[("main", "0"), ("logs", "running"), ("proxy", "running")],
    );
    match decide(&p, &yes(), &rules(&cat, true)) {
        Decision::Wait(w) => assert!(w.contains("\"proxy\" is being replaced"), "{w}"),
        other => panic!("{other:?}"),
    }
    // proxy's replacement exited 0: logs now, no new Events
    let p = pod(
        swapped_proxy.clone(),
        "Never",
        three_swapped.clone(),
        &[
            ("main", "0"),
            ("logs", "running"),
            ("proxy", &format!("0@{Q}")),
        ],
    );
    let d = decide(&p, &yes(), &rules(&cat, true));
    assert_eq!(ends(&d).0, "logs");
    assert!(
        !ends(&d).3,
        "not the first: the Events were published with proxy's"
    );
    // both over
    let p = pod(
        swapped_proxy,
        "Never",
        three_swapped,
        &[("main", "0"), ("logs", "0"), ("proxy", &format!("0@{Q}"))],
    );
    assert_eq!(kind(&decide(&p, &yes(), &rules(&cat, true))), "done");
}

#[test]
fn a_sidecar_that_cannot_be_swapped_stops_everything_and_says_why() {
    let cat = Catalogue::empty();
    let p = pod(
        declared("logs,proxy"),
        "Never",
        vec![
            c("main", json!({})),
            c("logs", json!({"command": ["/bin/fluent-bit"]})),
            c("proxy", json!({})),
        ],
        &[("main", "0"), ("logs", "running"), ("proxy", "running")],
    );
    match decide(&p, &yes(), &rules(&cat, true)) {
        Decision::Refuse { problems, record } => {
            assert_eq!(problems.len(), 1);
            assert_eq!(problems[0].reason, Reason::SwapRefusedCommand);
            assert_eq!(problems[0].container, "logs");
            assert_eq!(record.cause, Cause::NotInjected);
        }
        other => panic!("{other:?}"),
    }
    // a replacement that cannot start holds the sidecars before it
    let p = pod(
        json!({"sexton.dev/sidecars": "logs,proxy", "sexton.dev/swapped-sidecars": r#"{"proxy":"img/proxy:1"}"#}),
        "Never",
        vec![
            c("main", json!({})),
            c("logs", json!({})),
            c("proxy", json!({"image": Q})),
        ],
        &[("main", "0"), ("logs", "running"), ("proxy", "stalled")],
    );
    match decide(&p, &yes(), &rules(&cat, true)) {
        Decision::Refuse { problems, .. } => {
            assert_eq!(problems[0].reason, Reason::QuickExitStalled)
        }
        other => panic!("{other:?}"),
    }
    // a sidecar in CrashLoopBackOff is swapped too (the kubelet starts the replacement)
    let p = pod(
        declared("proxy"),
        "Never",
        vec![c("main", json!({})), c("proxy", json!({}))],
        &[("main", "0"), ("proxy", "crashloop")],
    );
    let Decision::End(e) = decide(&p, &yes(), &rules(&cat, true)) else {
        panic!()
    };
    assert_eq!(e.swap.waiting.as_deref(), Some("CrashLoopBackOff"));
}

#[test]
fn the_cause_as_far_as_it_can_be_told() {
    let cat = Catalogue::default();
    let done = [("main", "0"), ("istio-proxy", "running")];
    let mesh = || vec![c("main", json!({})), c("istio-proxy", json!({}))];
    // sexton injected the Pod (a native sidecar `logs`); Istio's proxy came after
    let record = r#"{"version":1,"mechanism":"native","sidecars":["logs"],"mains":["main"]}"#;
    let p = pod(
        json!({"sidecar.istio.io/status": "{}", "sexton.dev/injected": record}),
        "Never",
        mesh(),
        &done,
    );
    let Decision::End(e) = decide(&p, &yes(), &rules(&cat, true)) else {
        panic!()
    };
    assert_eq!(e.record.cause, Cause::AddedAfterAdmission);
    assert_eq!(e.record.detail, "sexton injected the Pod: native");
    // there at admission, but taken for a main: not recognised
    let record =
        r#"{"version":1,"mechanism":"native","sidecars":["logs"],"mains":["main","istio-proxy"]}"#;
    let p = pod(
        json!({"sidecar.istio.io/status": "{}", "sexton.dev/injected": record}),
        "Never",
        mesh(),
        &done,
    );
    assert_eq!(
        ends(&decide(&p, &yes(), &rules(&cat, true))).1,
        Cause::NotRecognised
    );
    // the namespace labelled after the Pod was created
    let later = Served::Yes {
        hook: "inject.sexton.dev".into(),
        labelled_later: Some("labelled at T".into()),
    };
    let p = pod(
        json!({"sidecar.istio.io/status": "{}"}),
        "Never",
        mesh(),
        &done,
    );
    let Decision::End(e) = decide(&p, &later, &rules(&cat, true)) else {
        panic!()
    };
    assert_eq!(
        (e.record.cause, e.record.detail.as_str()),
        (Cause::NamespaceLabelledLater, "labelled at T")
    );
    // set ahead of a vendor's webhook by `inject`, never injected: as without a record
    let ahead = r#"{"version":1,"mechanism":"native","sidecars":[],"mains":[]}"#;
    let p = pod(
        json!({"sidecar.istio.io/status": "{}", "sexton.dev/injected": ahead}),
        "Never",
        mesh(),
        &done,
    );
    assert_eq!(
        ends(&decide(&p, &yes(), &rules(&cat, true))).1,
        Cause::NotInjected
    );
}

#[test]
fn served_by_the_live_configuration_and_the_namespaces_labels() {
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "sexton-webhook"},
        "webhooks": [{"name": "inject.sexton.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"sexton.dev/inject": "enabled"}}}],
    }))
    .unwrap();
    let scope = WebhookScope::of(&config);
    let ns = |labelled_at: &str| -> ObjectMeta {
        serde_json::from_value(json!({
            "name": "ns", "labels": {"sexton.dev/inject": "enabled"},
            "managedFields": [{"manager": "kubectl-label", "operation": "Update", "time": labelled_at,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:sexton.dev/inject": {}}}}}],
        }))
        .unwrap()
    };
    let mut p = pod(declared("proxy"), "Never", vec![], &[]);
    p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:01:00Z".parse().unwrap(),
    ));
    assert_eq!(
        served(Some(&scope), Some(&ns("2026-01-01T00:00:00Z")), &p),
        Served::Yes {
            hook: "inject.sexton.dev".into(),
            labelled_later: None
        }
    );
    let Served::Yes { labelled_later, .. } =
        served(Some(&scope), Some(&ns("2026-01-01T00:02:00Z")), &p)
    else {
        panic!()
    };
    assert_eq!(
        labelled_later.as_deref(),
        Some(
            "the namespace's labels sexton.dev/inject were set at 2026-01-01T00:02:00Z, the Pod was created at 2026-01-01T00:01:00Z"
        )
    );
    let unlabelled: ObjectMeta = serde_json::from_value(json!({"name": "ns"})).unwrap();
    assert!(matches!(
        served(Some(&scope), Some(&unlabelled), &p),
        Served::No(_)
    ));
    assert!(
        matches!(served(None, Some(&ns("2026-01-01T00:00:00Z")), &p), Served::No(w) if w.contains("does not exist"))
    );
    assert!(matches!(served(Some(&scope), None, &p), Served::No(_)));
    // the Pod opts out
    p.metadata.annotations =
        Some([("sexton.dev/inject".to_string(), "disabled".to_string())].into());
    assert!(matches!(
        served(Some(&scope), Some(&ns("2026-01-01T00:00:00Z")), &p),
        Served::No(_)
    ));
}
