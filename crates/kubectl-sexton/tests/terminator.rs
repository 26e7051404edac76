//! The SidecarTerminator of `kubectl-sexton controller` against the real test API server:
//! which pods it swaps a sidecar of and which it leaves, conflicts, its queue under a
//! backlog and at SIGTERM, its events, and the stuck-pod detection beside it (the harness:
//! `controllers/mod.rs`).
// The scope guard is held for a whole test on purpose; each test has its own runtime thread.
#![allow(clippy::await_holding_lock, clippy::type_complexity)]

use std::collections::BTreeMap;
use std::process::Command;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use testbed::*;

mod controllers;
use controllers::*;

#[tokio::test(flavor = "current_thread")]
async fn restart_policy_by_main_state_by_sidecar_state_and_special_pods() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, "ctl-matrix").await;
    let scratch = Scratch::new("ctl-matrix");
    let ctl = Ctl::start(
        &scratch,
        "controller",
        controller_kubeconfig(),
        &[
            "--namespace",
            &ns,
            "--quick-exit-image",
            Q,
            "--sidecar-allowed-images=example/",
        ],
        &[],
    );

    // (pod, expected decision, swaps expected as (container, image))
    let mut expect: Vec<(String, String, &str, Vec<(&str, &str)>)> = vec![];
    for policy in ["Never", "OnFailure"] {
        for main in ["running", "1", "0"] {
            for side in ["running", "0"] {
                let name = format!("{}-main-{main}-side-{side}", policy.to_lowercase());
                create_pod(
                    &client,
                    &ns,
                    &name,
                    policy,
                    vec![container("main", &[], json!({})), sidecar("proxy")],
                    json!({}),
                )
                .await;
                let rv = set_status(
                    &client,
                    &ns,
                    &name,
                    "Running",
                    &[("main", main), ("proxy", side)],
                )
                .await;
                let want = if main == "running" || (policy == "OnFailure" && main == "1") {
                    "wait"
                } else if side == "0" {
                    "done"
                } else {
                    "swap"
                };
                let swaps = if want == "swap" {
                    vec![("proxy", Q)]
                } else {
                    vec![]
                };
                expect.push((name, rv, want, swaps));
            }
        }
    }
    // Several mains and sidecars; one sidecar names its own image, one has ended already.
    create_pod(
        &client,
        &ns,
        "multi",
        "Never",
        vec![
            container("a", &[], json!({})),
            container("b", &[], json!({})),
            sidecar("proxy"),
            container("logs", &[(MARK_IMAGE, "example/logs-quick:1")], json!({})),
            sidecar("ended"),
        ],
        json!({}),
    )
    .await;
    let rv = set_status(
        &client,
        &ns,
        "multi",
        "Running",
        &[
            ("a", "0"),
            ("b", "3"),
            ("proxy", "running"),
            ("logs", "running"),
            ("ended", "0"),
        ],
    )
    .await;
    expect.push((
        "multi".into(),
        rv,
        "swap",
        vec![("proxy", Q), ("logs", "example/logs-quick:1")],
    ));
    // Unmarked: never touched.
    create_pod(
        &client,
        &ns,
        "unmarked",
        "Never",
        vec![
            container("main", &[], json!({})),
            container("proxy", &[], json!({})),
        ],
        json!({}),
    )
    .await;
    let rv = set_status(
        &client,
        &ns,
        "unmarked",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    expect.push(("unmarked".into(), rv, "ignore", vec![]));
    // Being deleted (a finalizer keeps it visible): never touched.
    create_pod(
        &client,
        &ns,
        "deleting",
        "Never",
        vec![container("main", &[], json!({})), sidecar("proxy")],
        json!({"finalizers": ["sexton.test/hold"]}),
    )
    .await;
    Api::<K8sPod>::namespaced(client.clone(), &ns)
        .delete("deleting", &DeleteParams::default())
        .await
        .unwrap();
    let rv = set_status(
        &client,
        &ns,
        "deleting",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    expect.push(("deleting".into(), rv, "ignore", vec![]));
    // `command` with the default image: refused, with a Warning event saying what to do.
    create_pod(
        &client,
        &ns,
        "with-command",
        "Never",
        vec![
            container("main", &[], json!({})),
            container("proxy", &[(MARK, "TRUE")], json!({"command": ["/envoy"]})),
        ],
        json!({}),
    )
    .await;
    let rv = set_status(
        &client,
        &ns,
        "with-command",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    expect.push(("with-command".into(), rv, "refuse", vec![]));
    // Pending: not even in the controller's cache (it watches Running pods only).
    create_pod(
        &client,
        &ns,
        "pending",
        "Never",
        vec![container("main", &[], json!({})), sidecar("proxy")],
        json!({}),
    )
    .await;
    set_status(
        &client,
        &ns,
        "pending",
        "Pending",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;

    let mut swapped = 0;
    for (name, rv, want, swaps) in &expect {
        let got = ctl.wait_decision(&ns, name, rv);
        assert_eq!(got, *want, "{name}");
        for (c, image) in swaps {
            let p = wait_image(&client, &ns, name, c, image).await;
            let record: BTreeMap<String, String> = serde_json::from_str(
                &p.metadata.annotations.unwrap()["sexton.dev/swapped-sidecars"],
            )
            .unwrap();
            assert_eq!(
                record[*c],
                format!("example/{c}:1"),
                "{name}: original image recorded"
            );
            swapped += 1;
        }
        if swaps.is_empty() {
            let p = get_pod(&client, &ns, name).await;
            assert_eq!(
                p.metadata.resource_version.as_deref(),
                Some(rv.as_str()),
                "{name} must not be written"
            );
            assert!(
                p.spec.unwrap().containers.iter().all(|c| c
                    .image
                    .as_deref()
                    .unwrap()
                    .starts_with("example/")),
                "{name}: image changed"
            );
        }
    }
    // Only the swapped pods got a SidecarSwapped event, exactly one each, from this controller.
    for (name, _, _, swaps) in &expect {
        let evs: Vec<Event> = events(&client, &ns, name)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("SidecarSwapped"))
            .collect();
        if swaps.is_empty() {
            assert!(evs.is_empty(), "{name}: unexpected {evs:?}");
        } else {
            let e = wait_event(&client, &ns, name, "SidecarSwapped").await;
            assert_eq!(e.type_.as_deref(), Some("Normal"));
            assert_eq!(e.reporting_controller.as_deref(), Some("sexton-controller"));
            for (c, _) in swaps {
                assert!(
                    e.note.as_deref().unwrap().contains(&format!("{c:?}")),
                    "{name}: {:?}",
                    e.note
                );
            }
            assert_eq!(
                events(&client, &ns, name)
                    .await
                    .iter()
                    .filter(|e| e.reason.as_deref() == Some("SidecarSwapped"))
                    .count(),
                1
            );
        }
    }
    let refused = wait_event(&client, &ns, "with-command", "SwapRefusedCommand").await;
    assert_eq!(refused.type_.as_deref(), Some("Warning"));
    let note = refused.note.unwrap();
    assert!(
        note.contains("\"proxy\"") && note.contains("command") && note.contains(MARK_IMAGE),
        "{note}"
    );
    let p = get_pod(&client, &ns, "pending").await;
    assert!(
        p.metadata.annotations.is_none() && image_of(&p, "proxy") == "example/proxy:1",
        "pending pod touched"
    );

    // Metrics: the counters reflect what happened.
    let m = ctl.metrics();
    let get = |k: &str| {
        *m.get(k)
            .unwrap_or_else(|| panic!("no metric {k}; have {:?}", m.keys().collect::<Vec<_>>()))
    };
    assert_eq!(
        get(
            r#"sexton_controller_actions_total{controller="sidecar-terminator",action="swap",reason="MainsCompleted"}"#
        ),
        swapped as f64
    );
    assert_eq!(
        get(
            r#"sexton_controller_actions_total{controller="sidecar-terminator",action="refuse",reason="SwapRefusedCommand"}"#
        ),
        1.0
    );
    assert!(
        get(r#"sexton_controller_reconciles_total{controller="sidecar-terminator"}"#)
            >= expect.len() as f64
    );
    assert!(
        get(r#"sexton_controller_queue_latency_seconds_count{controller="sidecar-terminator"}"#)
            >= 1.0
    );
    assert_eq!(get("sexton_controller_leader"), 1.0);
    assert_eq!(ctl.get(&ctl.health, "/healthz").0, 200);
    assert_eq!(ctl.get(&ctl.health, "/readyz").0, 200);
    assert_eq!(ctl.get(&ctl.health, "/nope").0, 404);
}

#[tokio::test(flavor = "current_thread")]
async fn no_second_patch_even_after_a_controller_restart() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, "ctl-idem").await;
    let scratch = Scratch::new("ctl-idem");
    let args = ["--namespace", &ns, "--quick-exit-image", Q];
    let first = Ctl::start(&scratch, "first", controller_kubeconfig(), &args, &[]);
    let rv = main_done_pod(&client, &ns, "job").await;
    assert_eq!(first.wait_decision(&ns, "job", &rv), "swap");
    let after = wait_image(&client, &ns, "job", "proxy", Q).await;
    let rv = after.metadata.resource_version.clone().unwrap();
    // The controller sees its own patch: done, no second write.
    assert_eq!(first.wait_decision(&ns, "job", &rv), "done");
    // Its Event is posted from a queue, after the patch: killed before, it would be lost
    // (Events are best effort), and the count below would read 0 (seen under load).
    wait_event(&client, &ns, "job", "SidecarSwapped").await;
    drop(first); // SIGKILL

    let second = Ctl::start(&scratch, "second", controller_kubeconfig(), &args, &[]);
    assert_eq!(second.wait_decision(&ns, "job", &rv), "done");
    // The kubelet stops the old sidecar (143 after SIGTERM; that status may or may not be
    // reported) and the replacement exits 0. (For restartPolicy Never the API server refuses
    // a terminated container becoming running again, so a fake kubelet cannot report both.)
    let rv2 = set_status(
        &client,
        &ns,
        "job",
        "Running",
        &[("main", "0"), ("proxy", "143@example/proxy:1")],
    )
    .await;
    assert_eq!(second.wait_decision(&ns, "job", &rv2), "done");
    let rv3 = set_status(
        &client,
        &ns,
        "job",
        "Running",
        &[("main", "0"), ("proxy", "0")],
    )
    .await;
    assert_eq!(second.wait_decision(&ns, "job", &rv3), "done");
    let p = get_pod(&client, &ns, "job").await;
    assert_eq!(
        p.metadata.resource_version.unwrap(),
        rv3,
        "the restarted controller wrote the pod"
    );
    let swaps = events(&client, &ns, "job")
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SidecarSwapped"))
        .count();
    assert_eq!(swaps, 1);
    assert!(
        second
            .metrics()
            .keys()
            .all(|k| !k.contains("action=\"swap\"")),
        "second controller swapped"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_conflicting_write_is_reread_and_the_swap_applied_once() {
    // The pod is changed while the controller's patch of it is held: the 409 comes from
    // the real API server.
    let h = held_swap("ctl-conflict", "job", &[]).await;
    let (client, ns, ctl) = (&h.client, &h.ns, &h.ctl);
    let api = Api::<K8sPod>::namespaced(client.clone(), ns);
    api.patch(
        "job",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"changed": "meanwhile"}}})),
    )
    .await
    .unwrap();
    h.relay.release();

    let p = wait_image(client, ns, "job", "proxy", Q).await;
    assert_eq!(
        p.metadata.labels.unwrap()["changed"],
        "meanwhile",
        "the concurrent change survived"
    );
    ctl.wait_line(|l| msg(l).starts_with("conflict:"));
    // (the image can be seen before the controller has counted the swap it made)
    ctl.wait_line(|l| msg(l) == "swapped sidecar image");
    let m = ctl.metrics();
    // (at least one: the change made meanwhile queues the pod again, and if the cache
    // still holds that version when it is taken, the patch over it is refused too)
    assert!(
        m[r#"sexton_controller_patch_conflicts_total{controller="sidecar-terminator"}"#] >= 1.0
    );
    assert_eq!(
        m[r#"sexton_controller_actions_total{controller="sidecar-terminator",action="swap",reason="MainsCompleted"}"#],
        1.0
    );
    // the event is published after the swap: wait for it, then check there is one
    wait_event(client, ns, "job", "SidecarSwapped").await;
    assert_eq!(
        events(client, ns, "job")
            .await
            .iter()
            .filter(|e| e.reason.as_deref() == Some("SidecarSwapped"))
            .count(),
        1
    );
}

/// A controller (run with `args` besides its namespace and quick-exit image) that reaches
/// the API server through `kubectl proxy` (with its own ServiceAccount's token) and a relay
/// holding its first PATCH of the pod `pod`, whose mains are done, half-way until
/// `relay.release()`.
struct HeldSwap {
    _scope: std::sync::RwLockReadGuard<'static, ()>,
    client: Client,
    ns: String,
    ctl: Ctl,
    relay: HoldingProxy,
    _kubectl_proxy: KubectlProxy,
    _scratch: Scratch,
}

async fn held_swap(test: &str, pod: &str, args: &[&str]) -> HeldSwap {
    let scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, test).await;
    let scratch = Scratch::new(test);
    let kubectl_proxy = KubectlProxy::start(controller_kubeconfig());
    let needle = format!("PATCH /api/v1/namespaces/{ns}/pods/{pod}");
    let relay = HoldingProxy::start(kubectl_proxy.addr, &needle);
    let kc = kubeconfig_via(relay.addr, &scratch.path("via-relay.kubeconfig"));
    let mut all = vec!["--namespace", &ns, "--quick-exit-image", Q];
    all.extend_from_slice(args);
    let ctl = Ctl::start(&scratch, "controller", &kc, &all, &[]);
    main_done_pod(&client, &ns, pod).await;
    // (waited for on a thread of its own: the runtime must keep the test's client going)
    let held = tokio::task::spawn_blocking(move || (relay.wait_held(), relay));
    let (was_held, relay) = held.await.unwrap();
    assert!(
        was_held,
        "controller never reached the patch:\n{}",
        ctl.c.logs()
    );
    HeldSwap {
        _scope: scope,
        client,
        ns,
        ctl,
        relay,
        _kubectl_proxy: kubectl_proxy,
        _scratch: scratch,
    }
}

/// With every slot taken, pods whose mains finish wait in the order they finished, not in
/// kube-runtime's own order (a hash set's: under a backlog some pods waited 30 s while
/// later ones went through): 24 pods finish one after the other while the one slot is
/// busy; once it is free, the controller must swap them in that order.
#[tokio::test(flavor = "current_thread")]
async fn a_backlog_of_swaps_is_worked_in_arrival_order() {
    let b = held_swap("ctl-fifo", "first", &["--concurrency", "1"]).await;
    let (client, ns, ctl) = (&b.client, &b.ns, &b.ctl);
    // (names that sort neither way: the order to keep is the order of finishing)
    let order: Vec<String> = (0..24)
        .map(|i| format!("job-{:02}", (i * 7) % 24))
        .collect();
    for name in &order {
        main_done_pod(client, ns, name).await;
    }
    b.relay.release();
    let swapped = |ctl: &Ctl| -> Vec<String> {
        ctl.lines()
            .iter()
            .filter(|l| msg(l) == "swapped sidecar image")
            .filter_map(|l| l["fields"]["pod"].as_str())
            .filter_map(|p| p.strip_prefix(&format!("{ns}/")).map(str::to_string))
            .filter(|p| p != "first")
            .collect()
    };
    wait_until(LONG, || swapped(ctl).len() == order.len());
    assert_eq!(
        swapped(ctl),
        order,
        "swaps out of the order the mains finished in"
    );
}

/// SIGTERM with a backlog: the swap under way finishes, the pods still waiting for a slot
/// are left alone (to the next leader) and the controller exits 0 at once.
#[tokio::test(flavor = "current_thread")]
async fn sigterm_finishes_the_swap_under_way_and_leaves_the_waiting_pods() {
    let mut b = held_swap("ctl-stop-backlog", "first", &["--concurrency", "1"]).await;
    let (client, ns) = (b.client.clone(), b.ns.clone());
    let waiting = ["w-0", "w-1", "w-2", "w-3", "w-4"];
    for name in waiting {
        main_done_pod(&client, &ns, name).await;
    }
    let last = format!("{ns}/w-4");
    b.ctl
        .wait_line(|l| msg(l) == "queued behind other pods" && l["fields"]["pod"] == last.as_str());
    b.ctl.c.signal(15);
    b.ctl.wait_line(|l| msg(l) == "SIGTERM: shutting down");
    b.relay.release();
    let st = b.ctl.c.wait_status(LONG).expect("did not stop on SIGTERM");
    assert_eq!(code_of(st), 0, "{}", b.ctl.c.logs());
    assert_eq!(image_of(&get_pod(&client, &ns, "first").await, "proxy"), Q);
    for name in waiting {
        assert_eq!(
            image_of(&get_pod(&client, &ns, name).await, "proxy"),
            "example/proxy:1",
            "{name} was swapped after SIGTERM"
        );
    }
}

/// A SidecarTerminator test: its namespace, and a controller watching it with the
/// quick-exit image and `extra` flags.
async fn terminator_scenario(
    test: &str,
    extra: &[&str],
) -> (
    std::sync::RwLockReadGuard<'static, ()>,
    Client,
    String,
    Scratch,
    Ctl,
) {
    let scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, test).await;
    let scratch = Scratch::new(test);
    let mut args = vec!["--namespace", &ns, "--quick-exit-image", Q];
    args.extend_from_slice(extra);
    let ctl = Ctl::start(&scratch, "controller", controller_kubeconfig(), &args, &[]);
    (scope, client, ns, scratch, ctl)
}

/// A marked sidecar that waits (CrashLoopBackOff) once the mains are done is swapped too,
/// with its own event; a sidecar that asks for its exit code to be ignored, and exited
/// non-zero, gets a Warning that sexton cannot honour it.
#[tokio::test(flavor = "current_thread")]
async fn waiting_sidecars_are_swapped_and_ignore_exit_code_is_reported() {
    let (_scope, client, ns, _scratch, _ctl) = terminator_scenario("ctl-waiting", &[]).await;
    for (name, main) in [("crashing", "0"), ("crashing-main-runs", "running")] {
        create_pod(
            &client,
            &ns,
            name,
            "Never",
            vec![container("main", &[], json!({})), sidecar("proxy")],
            json!({}),
        )
        .await;
        set_status(
            &client,
            &ns,
            name,
            "Running",
            &[("main", main), ("proxy", "crashloop")],
        )
        .await;
    }
    wait_image(&client, &ns, "crashing", "proxy", Q).await;
    let e = wait_event(&client, &ns, "crashing", "SidecarSwappedWhileWaiting").await;
    let note = e.note.unwrap();
    assert!(
        note.contains("CrashLoopBackOff") && note.contains(Q),
        "{note}"
    );
    let ignore = [
        (MARK, "true"),
        ("KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE", "true"),
    ];
    create_pod(
        &client,
        &ns,
        "ignored",
        "Never",
        vec![
            container("main", &[], json!({})),
            container("proxy", &ignore, json!({})),
        ],
        json!({}),
    )
    .await;
    set_status(
        &client,
        &ns,
        "ignored",
        "Running",
        &[("main", "0"), ("proxy", "2")],
    )
    .await;
    let e = wait_event(&client, &ns, "ignored", "IgnoreExitCodeNotHonoured").await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert!(e.note.unwrap().contains("exited with 2"));
    // (a barrier: the controller has seen everything above) the main still runs: untouched
    let p = get_pod(&client, &ns, "crashing-main-runs").await;
    assert_eq!(image_of(&p, "proxy"), "example/proxy:1");
    assert_eq!(
        image_of(&get_pod(&client, &ns, "ignored").await, "proxy"),
        "example/proxy:1"
    );
}

/// Any pod, marked or not, whose mains are done while another container runs: a gauge, one
/// PodStuck event naming the fix, and the teardown time once the pod ends, by whether
/// sexton acted.
#[tokio::test(flavor = "current_thread")]
async fn stuck_pods_are_reported_and_teardowns_timed() {
    let (_scope, client, ns, _scratch, ctl) =
        terminator_scenario("ctl-stuck", &["--stuck-after", "1s"]).await;
    let unmarked = vec![
        container("main", &[], json!({})),
        container("proxy", &[], json!({})),
    ];
    create_pod(&client, &ns, "plain", "Never", unmarked.clone(), json!({})).await;
    create_pod(
        &client,
        &ns,
        "plain-2",
        "Never",
        unmarked.clone(),
        json!({}),
    )
    .await;
    create_pod(&client, &ns, "busy", "Never", unmarked, json!({})).await;
    // main finished at 2026-01-01T00:00:01Z, long ago
    set_status(
        &client,
        &ns,
        "plain",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    set_status(
        &client,
        &ns,
        "busy",
        "Running",
        &[("main", "running"), ("proxy", "running")],
    )
    .await;
    let e = wait_event(&client, &ns, "plain", "PodStuck").await;
    let note = e.note.unwrap();
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert!(
        note.contains("[\"proxy\"] still run")
            && note.contains("kubectl sexton inject --sidecar proxy"),
        "{note}"
    );
    let gauge = "sexton_controller_stuck_pods";
    assert!(
        wait_until(LONG, || ctl.metrics().get(gauge) == Some(&1.0)),
        "{:?}",
        ctl.metrics()
    );
    // two pods end on their own (the second one's main only now); a marked one is ended by
    // the swap
    set_status(
        &client,
        &ns,
        "plain",
        "Succeeded",
        &[("main", "0"), ("proxy", "0")],
    )
    .await;
    for phase in ["Running", "Succeeded"] {
        let proxy = if phase == "Running" { "running" } else { "0" };
        set_status(
            &client,
            &ns,
            "plain-2",
            phase,
            &[("main", "0"), ("proxy", proxy)],
        )
        .await;
    }
    main_done_pod(&client, &ns, "marked").await;
    wait_image(&client, &ns, "marked", "proxy", Q).await;
    set_status(
        &client,
        &ns,
        "marked",
        "Succeeded",
        &[("main", "0"), ("proxy", &format!("0@{Q}"))],
    )
    .await;
    let count =
        |acted| format!("sexton_controller_pod_teardown_seconds_count{{acted=\"{acted}\"}}");
    let ok = wait_until(LONG, || {
        let m = ctl.metrics();
        m.get(&count("false")) == Some(&2.0)
            && m.get(&count("true")) == Some(&1.0)
            && m.get(gauge) == Some(&0.0)
    });
    assert!(ok, "{:?}", ctl.metrics());
    assert!(
        events(&client, &ns, "busy").await.is_empty(),
        "busy is not stuck"
    );
    // one event per pod, however many scans saw it
    let stuck = events(&client, &ns, "plain").await;
    assert_eq!(
        stuck
            .iter()
            .filter(|e| e.reason.as_deref() == Some("PodStuck"))
            .count(),
        1
    );
    let bad = Command::new(KUBECTL_SEXTON)
        .args(["controller", "--stuck-after", "500ms"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        bad.status.code() == Some(2) && err.contains("--stuck-after"),
        "{err}"
    );
}

/// A sidecar's own image is swapped to only when the admin allows it: by default the
/// controller refuses (a Warning event naming the image and the flag) and changes nothing,
/// so the pod's author cannot have the controller write an image of their choosing.
#[tokio::test(flavor = "current_thread")]
async fn a_named_image_off_the_allow_list_is_refused() {
    let (_scope, client, ns, _scratch, _ctl) = terminator_scenario(
        "ctl-named",
        &["--sidecar-allowed-images=registry.example/quick/"],
    )
    .await;
    for (name, image) in [
        ("off", "attacker.example/toolbox:1"),
        ("on", "registry.example/quick/exit:1"),
    ] {
        create_pod(
            &client,
            &ns,
            name,
            "Never",
            vec![
                container("main", &[], json!({})),
                container("proxy", &[(MARK, "true"), (MARK_IMAGE, image)], json!({})),
            ],
            json!({}),
        )
        .await;
        set_status(
            &client,
            &ns,
            name,
            "Running",
            &[("main", "0"), ("proxy", "running")],
        )
        .await;
    }
    wait_image(&client, &ns, "on", "proxy", "registry.example/quick/exit:1").await;
    let e = wait_event(&client, &ns, "off", "SwapRefusedImageNotAllowed").await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    let note = e.note.unwrap();
    assert!(
        note.contains("attacker.example/toolbox:1") && note.contains("--sidecar-allowed-images"),
        "{note}"
    );
    assert_eq!(
        image_of(&get_pod(&client, &ns, "off").await, "proxy"),
        "example/proxy:1"
    );
}
