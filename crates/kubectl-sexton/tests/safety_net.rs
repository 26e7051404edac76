//! The controller's safety net against the real test API server, with sexton's webhook
//! **down**: its MutatingWebhookConfiguration `sexton-webhook` (deploy/'s two webhooks for
//! Pods, `failurePolicy: Ignore`) calls a loopback port on which nothing listens, so the
//! API server admits every Pod unchanged, as it does when no replica answers. The
//! configuration is owned for the life of this test process as the webhook's tests own it
//! (`admission::WATCHDOG`, one lock for both). `kubectl-sexton controller` runs as the real
//! binary with deploy/rbac.yaml's rights (the harness: `controllers/mod.rs`); the test plays
//! the kubelet. The causes that need a webhook that answers (a refusal, a limit, a sidecar
//! it did not recognise) are in `safety_net_admission.rs`.
// The scope guard is held for a whole test on purpose; each test has its own runtime thread.
#![allow(clippy::await_holding_lock)]

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testbed::*;

mod admission;
mod controllers;
use controllers::net::*;
use controllers::*;

/// `sexton-webhook`, calling a port where nothing listens, for this test process.
struct Down {
    _watchdog: Process,
    _lifeline: std::fs::File,
    _scratch: Scratch,
}

fn webhook_down() -> &'static Down {
    static D: OnceLock<Down> = OnceLock::new();
    D.get_or_init(|| {
        testenv();
        let scratch = Scratch::new("net-down");
        let config = scratch.path("configuration.json");
        let dead = format!("https://127.0.0.1:{}", free_port());
        let manifest = admission::configuration("sexton-webhook", &dead, None, None);
        std::fs::write(&config, manifest.to_string()).unwrap();
        let fifo = scratch.fifo("lifeline");
        let lifeline = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", admission::WATCHDOG, "sh"])
            .arg(testenv().state.join("webhook-test.lock"))
            .arg(&fifo)
            .arg(&config)
            // what runs while the configuration is owned: no webhook at all
            .args(["sleep", "86400"])
            .env("KUBECONFIG", &testenv().kubeconfig);
        let mut watchdog = scratch.spawn_host("watchdog", cmd);
        let owned = scratch.path("lifeline.owned");
        assert!(
            wait_until(Duration::from_secs(150), || owned.exists()
                || !watchdog.is_running()),
            "the watchdog never took the configuration:\n{}",
            watchdog.logs()
        );
        assert!(owned.exists(), "the watchdog failed:\n{}", watchdog.logs());
        Down {
            _watchdog: watchdog,
            _lifeline: lifeline,
            _scratch: scratch,
        }
    })
}

fn declared(list: &str) -> Value {
    json!({"annotations": {"sexton.dev/sidecars": list}})
}

fn metric(ctl: &Ctl, action: &str, reason: &str) -> f64 {
    let key = format!(
        r#"sexton_controller_actions_total{{controller="safety-net",action="{action}",reason="{reason}"}}"#
    );
    ctl.metrics().get(&key).copied().unwrap_or(0.0)
}

/// Waits until the safety net's count of `action` by `reason` is `want` (it is counted once
/// the API server answered the patch, a moment after the pod changed).
fn wait_metric(ctl: &Ctl, action: &str, reason: &str, want: f64) {
    let ok = wait_until(LONG, || metric(ctl, action, reason) == want);
    assert!(
        ok,
        "{action}/{reason}: {} != {want}",
        metric(ctl, action, reason)
    );
}

#[tokio::test(flavor = "current_thread")]
async fn with_the_webhook_down_a_declared_sidecar_is_swapped_once_the_mains_are_done() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let ns = namespace_with(&client, "net-down", &[LABEL]).await;
    let scratch = Scratch::new("net-down");
    let ctl = controller(&scratch, &ns, &["--stuck-after", "1s"]);
    let mc = || {
        vec![
            container("a", &[], json!({})),
            container("b", &[], json!({})),
            container("proxy", &[], json!({})),
        ]
    };
    create_pod(&client, &ns, "two-mains", "Never", mc(), declared("proxy")).await;
    let stored = get_pod(&client, &ns, "two-mains").await;
    assert!(
        stored
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .get("sexton.dev/injected")
            .is_none(),
        "the webhook is down: the Pod is admitted unchanged"
    );
    // not before every main is done
    for (a, b, running) in [("running", "running", "a"), ("0", "running", "b")] {
        let rv = set_status(
            &client,
            &ns,
            "two-mains",
            "Running",
            &[("a", a), ("b", b), ("proxy", "running")],
        )
        .await;
        let (d, why) = net_decision(&ctl, &ns, "two-mains", &rv);
        assert_eq!(d, "wait", "a={a} b={b}: {why}");
        assert!(
            why.contains(&format!("main container {running:?} is running")),
            "{why}"
        );
    }
    assert_eq!(
        image_of(&get_pod(&client, &ns, "two-mains").await, "proxy"),
        "example/proxy:1"
    );
    // a failed main counts as done under Never
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "two-mains",
            &[("a", "0"), ("b", "2"), ("proxy", "running")]
        )
        .await,
        "end"
    );
    let p = wait_image(&client, &ns, "two-mains", "proxy", Q).await;
    assert_eq!(
        net_record(&p),
        json!({"cause": "NotInjected", "sidecars": ["proxy"]})
    );
    let swapped = p.metadata.annotations.as_ref().unwrap()["sexton.dev/swapped-sidecars"].clone();
    assert_eq!(swapped, r#"{"proxy":"example/proxy:1"}"#);
    let e = wait_event(&client, &ns, "two-mains", "SidecarsEndedBySafetyNet").await;
    let note = e.note.unwrap_or_default();
    assert!(
        note.contains(
            "not injected at admission: sexton's webhook serves this Pod but admitted it unchanged"
        ) && note.contains("by swapping its image to sexton-quick-exit:test"),
        "{note}"
    );
    wait_metric(&ctl, "swap", "NotInjected", 1.0);
    // stuck meanwhile (the replacement has not exited): the net's advice, not a label's
    let stuck = wait_event(&client, &ns, "two-mains", "PodStuck").await;
    let note = stuck.note.unwrap_or_default();
    assert!(
        note.contains("sexton's safety net is ending them")
            && !note.contains("label the namespace"),
        "{note}"
    );
    // the replacement exits 0: done, and never swapped again, even by a restarted controller
    let rv = set_status(
        &client,
        &ns,
        "two-mains",
        "Running",
        &[("a", "0"), ("b", "2"), ("proxy", "0")],
    )
    .await;
    assert_eq!(net_decision(&ctl, &ns, "two-mains", &rv).0, "done");
    drop(ctl);
    let again = controller(&scratch, &ns, &[]);
    assert_eq!(net_decision(&again, &ns, "two-mains", &rv).0, "done");
    wait_metric(&again, "swap", "NotInjected", 0.0);
}

#[tokio::test(flavor = "current_thread")]
async fn every_declaration_recognition_and_the_annotated_webhook() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let ns = namespace_with(&client, "net-kinds", &[LABEL]).await;
    let scratch = Scratch::new("net-kinds");
    let ctl = controller(&scratch, &ns, &[]);
    let main = || container("main", &[], json!({}));
    // (pod, sidecar, containers, metadata)
    let cases: Vec<(&str, &str, Vec<Value>, Value)> = vec![
        (
            "annotation",
            "proxy",
            vec![main(), container("proxy", &[], json!({}))],
            declared("proxy"),
        ),
        (
            "kubexit",
            "proxy",
            vec![
                main(),
                container("proxy", &[("KUBEXIT_DEATH_DEPS", "main")], json!({})),
            ],
            json!({}),
        ),
        (
            "istio",
            "istio-proxy",
            vec![main(), container("istio-proxy", &[], json!({}))],
            json!({"annotations": {"sidecar.istio.io/status": "{\"containers\":[\"istio-proxy\"]}"}}),
        ),
    ];
    for (name, side, containers, meta) in cases {
        create_pod(&client, &ns, name, "Never", containers, meta).await;
        let rv = set_status(
            &client,
            &ns,
            name,
            "Running",
            &[("main", "0"), (side, "running")],
        )
        .await;
        assert_eq!(net_decision(&ctl, &ns, name, &rv).0, "end", "{name}");
        wait_image(&client, &ns, name, side, Q).await;
    }
    // a container called istio-proxy in a Pod Istio never touched is not a sidecar
    create_pod(
        &client,
        &ns,
        "look-alike",
        "Never",
        vec![main(), container("istio-proxy", &[], json!({}))],
        json!({}),
    )
    .await;
    let rv = set_status(
        &client,
        &ns,
        "look-alike",
        "Running",
        &[("main", "0"), ("istio-proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, "look-alike", &rv);
    assert_eq!(
        (d.as_str(), why.as_str()),
        ("ignore", "no sidecar declared or recognised")
    );
    // OpenKruise's marker: the SidecarTerminator's, not the net's
    create_pod(
        &client,
        &ns,
        "marked",
        "Never",
        vec![main(), sidecar("proxy")],
        json!({}),
    )
    .await;
    let rv = set_status(
        &client,
        &ns,
        "marked",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, "marked", &rv);
    assert_eq!(d, "ignore");
    assert!(why.contains("the SidecarTerminator"), "{why}");
    let p = wait_image(&client, &ns, "marked", "proxy", Q).await;
    assert_eq!(
        net_record(&p),
        Value::Null,
        "swapped by the SidecarTerminator alone"
    );

    // a namespace not labelled: only Pods that ask, through the annotated webhook
    let plain = namespace_with(&client, "net-plain", &[]).await;
    let scratch = Scratch::new("net-plain");
    let ctl = controller(&scratch, &plain, &[]);
    let ask =
        json!({"annotations": {"sexton.dev/sidecars": "proxy", "sexton.dev/inject": "native"}});
    for (name, meta, want) in [
        ("asks", ask, "end"),
        ("does-not-ask", declared("proxy"), "ignore"),
    ] {
        create_pod(
            &client,
            &plain,
            name,
            "Never",
            vec![main(), container("proxy", &[], json!({}))],
            meta,
        )
        .await;
        let rv = set_status(
            &client,
            &plain,
            name,
            "Running",
            &[("main", "0"), ("proxy", "running")],
        )
        .await;
        assert_eq!(net_decision(&ctl, &plain, name, &rv).0, want, "{name}");
    }
    wait_image(&client, &plain, "asks", "proxy", Q).await;
    assert_eq!(
        image_of(&get_pod(&client, &plain, "does-not-ask").await, "proxy"),
        "example/proxy:1"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn sidecars_end_in_reverse_order_and_a_jobs_pod_tells_its_job() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let ns = namespace_with(&client, "net-order", &[LABEL]).await;
    let scratch = Scratch::new("net-order");
    let ctl = controller(&scratch, &ns, &[]);
    // a real Job: the Job controller creates its Pod (bound to a node that does not exist)
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "backup"},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {"sexton.dev/sidecars": "logs,proxy"}},
            "spec": {"restartPolicy": "Never", "nodeName": FAKE_NODE, "automountServiceAccountToken": false,
                "containers": [
                    container("main", &[], json!({})),
                    container("logs", &[], json!({})),
                    container("proxy", &[], json!({})),
                ]}}},
    }))
    .unwrap();
    Api::<Job>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    let name = job_pod(&client, &ns, "backup").await;
    let rv = set_status(
        &client,
        &ns,
        &name,
        "Running",
        &[("main", "0"), ("logs", "running"), ("proxy", "running")],
    )
    .await;
    assert_eq!(net_decision(&ctl, &ns, &name, &rv).0, "end");
    // the last sidecar first
    let p = wait_image(&client, &ns, &name, "proxy", Q).await;
    assert_eq!(image_of(&p, "logs"), "example/logs:1");
    assert_eq!(net_record(&p)["sidecars"], json!(["proxy", "logs"]));
    // while the kubelet replaces proxy, logs waits
    let rv = set_status(
        &client,
        &ns,
        &name,
        "Running",
        &[("main", "0"), ("logs", "running"), ("proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, &name, &rv);
    assert_eq!(d, "wait", "{why}");
    assert!(why.contains("\"proxy\" is being replaced"), "{why}");
    assert_eq!(
        image_of(&get_pod(&client, &ns, &name).await, "logs"),
        "example/logs:1"
    );
    // proxy's replacement exited 0: logs now
    let rv = set_status(
        &client,
        &ns,
        &name,
        "Running",
        &[("main", "0"), ("logs", "running"), ("proxy", "0")],
    )
    .await;
    assert_eq!(net_decision(&ctl, &ns, &name, &rv).0, "end");
    wait_image(&client, &ns, &name, "logs", Q).await;
    wait_metric(&ctl, "swap", "NotInjected", 2.0);
    // one Event on the Pod and one on its Job
    let on_pod = wait_event(&client, &ns, &name, "SidecarsEndedBySafetyNet").await;
    assert!(
        on_pod
            .note
            .unwrap()
            .contains("sidecars \"proxy\", \"logs\" in this order")
    );
    let on_job = wait_event(&client, &ns, "backup", "SidecarsEndedBySafetyNet").await;
    assert_eq!(
        on_job.regarding.as_ref().unwrap().kind.as_deref(),
        Some("Job")
    );
    assert!(
        on_job
            .note
            .unwrap()
            .starts_with(&format!("pod {name}: main containers are done"))
    );
    let count = events(&client, &ns, &name)
        .await
        .iter()
        .filter(|e| e.reason.as_deref() == Some("SidecarsEndedBySafetyNet"))
        .count();
    assert_eq!(count, 1, "one Event per pod, not per sidecar");
    // doctor says what the net is doing, and why admission missed the pod
    let f = doctor_finding(&ns, &format!("pod {ns}/{name} (Job backup)"));
    assert_eq!(f["status"], "warning", "{f:#}");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.starts_with("the safety net is ending its sidecar(s) [\"proxy\", \"logs\"] (in this order; [\"logs\"] not ended yet)")
            && m.ends_with("its Job backup has no InjectRefused Event, so most likely no replica of the webhook answered in time when the pod was created"),
        "{m}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_namespace_labelled_after_the_pod_was_created() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let ns = namespace_with(&client, "net-later", &[]).await;
    let scratch = Scratch::new("net-later");
    let ctl = controller(&scratch, &ns, &[]);
    let p = create_pod(
        &client,
        &ns,
        "early",
        "Never",
        vec![
            container("main", &[], json!({})),
            container("proxy", &[], json!({})),
        ],
        declared("proxy"),
    )
    .await;
    let rv = set_status(
        &client,
        &ns,
        "early",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, "early", &rv);
    assert_eq!(d, "ignore");
    assert!(why.contains("does not serve it"), "{why}");
    // label the namespace a second (managedFields' resolution) after the Pod's creation
    let created = p.metadata.creation_timestamp.unwrap().0;
    assert!(wait_until(LONG, || k8s_openapi::jiff::Timestamp::now()
        .as_second()
        > created.as_second()));
    let out = kubectl(&["label", "namespace", &ns, LABEL]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // no pod event: the namespace's change queues its pods
    let p = wait_image(&client, &ns, "early", "proxy", Q).await;
    let record = net_record(&p);
    assert_eq!(record["cause"], "NamespaceLabelledLater");
    assert!(
        record["detail"]
            .as_str()
            .unwrap()
            .starts_with("the namespace's labels sexton.dev/inject were set at "),
        "{record}"
    );
    wait_metric(&ctl, "swap", "NamespaceLabelledLater", 1.0);
}

#[tokio::test(flavor = "current_thread")]
async fn on_failure_retries_are_waited_for_and_long_running_pods_never_touched() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let ns = namespace_with(&client, "net-retry", &[LABEL]).await;
    let scratch = Scratch::new("net-retry");
    let ctl = controller(&scratch, &ns, &[]);
    let mc = || {
        vec![
            container("main", &[], json!({})),
            container("proxy", &[], json!({})),
        ]
    };
    create_pod(&client, &ns, "retry", "OnFailure", mc(), declared("proxy")).await;
    let rv = set_status(
        &client,
        &ns,
        "retry",
        "Running",
        &[("main", "1"), ("proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, "retry", &rv);
    assert_eq!(d, "wait");
    assert!(why.contains("the kubelet restarts it"), "{why}");
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "retry",
            &[("main", "running"), ("proxy", "running")]
        )
        .await,
        "wait"
    );
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "retry",
            &[("main", "0"), ("proxy", "running")]
        )
        .await,
        "end"
    );
    wait_image(&client, &ns, "retry", "proxy", Q).await;

    create_pod(&client, &ns, "server", "Always", mc(), declared("proxy")).await;
    let rv = set_status(
        &client,
        &ns,
        "server",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, "server", &rv);
    assert_eq!(
        (d.as_str(), why.as_str()),
        (
            "ignore",
            "restartPolicy Always: only Job-style pods (Never, OnFailure) complete"
        )
    );
    let p = get_pod(&client, &ns, "server").await;
    assert_eq!(image_of(&p, "proxy"), "example/proxy:1");
    assert_eq!(net_record(&p), Value::Null);
}

#[tokio::test(flavor = "current_thread")]
async fn an_injected_pod_is_left_alone_and_a_command_is_refused_with_why() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let ns = namespace_with(&client, "net-left", &[LABEL]).await;
    let scratch = Scratch::new("net-left");
    let ctl = controller(&scratch, &ns, &["--stuck-after", "1s"]);
    // injected by `kubectl sexton inject` (wrap): the record covers the sidecar
    let manifest = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "wrapped", "annotations": {"sexton.dev/sidecars": "proxy"}},
        "spec": {"restartPolicy": "Never", "nodeName": FAKE_NODE, "automountServiceAccountToken": false,
            "containers": [
                {"name": "main", "image": "example/main:1", "command": ["run"]},
                {"name": "proxy", "image": "example/proxy:1", "command": ["proxy"]}]}});
    let file = scratch.path("pod.json");
    std::fs::write(&file, manifest.to_string()).unwrap();
    let out = Command::new(KUBECTL_SEXTON)
        .args(["inject", "--strategy", "wrap", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&file, &out.stdout).unwrap();
    let out = kubectl(&["create", "-n", &ns, "-f", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rv = set_status(
        &client,
        &ns,
        "wrapped",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, "wrapped", &rv);
    assert_eq!(d, "ignore");
    assert!(
        why.contains("\"proxy\": sexton injected it (wrap)"),
        "{why}"
    );

    // a sidecar with `command`: the swap would fail the pod; nothing is ended, and it says so
    create_pod(
        &client,
        &ns,
        "command",
        "Never",
        vec![
            container("main", &[], json!({})),
            container("logs", &[], json!({})),
            container("proxy", &[], json!({"command": ["/envoy"]})),
        ],
        declared("logs,proxy"),
    )
    .await;
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "command",
            &[("main", "0"), ("logs", "running"), ("proxy", "running")]
        )
        .await,
        "refuse"
    );
    let e = wait_event(&client, &ns, "command", "SwapRefusedCommand").await;
    let note = e.note.unwrap();
    assert!(
        note.starts_with("the safety net cannot end this Pod's sidecars, so none is ended: sidecar \"proxy\" sets `command`")
            && note.contains("does not exist in the quick-exit image")
            && note.contains("the net does not signal its process")
            && note.contains("(It would, because not injected at admission"),
        "{note}"
    );
    let p = get_pod(&client, &ns, "command").await;
    assert_eq!(
        (image_of(&p, "logs"), image_of(&p, "proxy")),
        ("example/logs:1".into(), "example/proxy:1".into())
    );
    wait_metric(&ctl, "refuse", "SwapRefusedCommand", 1.0);
    // stuck: the net's refusal and the way out, not a label the namespace already has
    let stuck = wait_event(&client, &ns, "command", "PodStuck").await;
    let note = stuck.note.unwrap_or_default();
    assert!(
        note.contains("the safety net cannot end them (")
            && note.contains("sets `command`")
            && note.contains("delete it; its Job makes another")
            && !note.contains("label the namespace"),
        "{note}"
    );
    // the pod the net leaves alone (injected) gets the advice of a pod it does not serve
    let stuck = wait_event(&client, &ns, "wrapped", "PodStuck").await;
    let note = stuck.note.unwrap_or_default();
    assert!(!note.contains("safety net"), "{note}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_vendors_sidecar_added_while_sextons_webhook_was_down() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let vendor_label = "sexton-test.dev/net-istio=true";
    let istio = Vendor::start("istio", vendor_label);
    let ns = namespace_with(&client, "net-vendor", &[LABEL, vendor_label]).await;
    let scratch = Scratch::new("net-vendor");
    let ctl = controller(&scratch, &ns, &[]);
    create_pod(
        &client,
        &ns,
        "meshed",
        "Never",
        vec![container("main", &[], json!({}))],
        json!({}),
    )
    .await;
    let p = get_pod(&client, &ns, "meshed").await;
    let names: Vec<_> = p
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(
        names,
        ["main", "istio-proxy"],
        "Istio's stand-in injected it:\n{}",
        istio.logs()
    );
    let istio_image = image_of(&p, "istio-proxy");
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "meshed",
            &[("main", "running"), ("istio-proxy", "running")]
        )
        .await,
        "wait"
    );
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "meshed",
            &[("main", "0"), ("istio-proxy", "running")]
        )
        .await,
        "end"
    );
    let p = wait_image(&client, &ns, "meshed", "istio-proxy", Q).await;
    let swapped = &p.metadata.annotations.as_ref().unwrap()["sexton.dev/swapped-sidecars"];
    assert_eq!(swapped, &json!({"istio-proxy": istio_image}).to_string());
    assert_eq!(net_record(&p)["cause"], "NotInjected");
}

/// Two replicas with leader election: only the holder of the Lease acts.
#[tokio::test(flavor = "current_thread")]
async fn two_replicas_act_once() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    webhook_down();
    let client = admin_client().await;
    let ns = namespace_with(&client, "net-leader", &[LABEL]).await;
    let scratch = Scratch::new("net-leader");
    // (the Lease is deploy/'s: another test process's replica may hold it for a while,
    // theirs expire within 30 s, and these release it when they stop)
    let lease = |id: &'static str| -> Vec<&'static str> {
        vec![
            "--leader-elect",
            "--leader-elect-namespace",
            "sexton-system",
            "--leader-elect-lease-duration",
            "4s",
            "--leader-elect-renew-grace",
            "2s",
            "--identity",
            id,
        ]
    };
    let mut a = controller(&scratch, &ns, &lease("net-a"));
    let acquired = wait_until(Duration::from_secs(90), || {
        a.find(|l| msg(l).contains("acquired the lease")).is_some()
    });
    assert!(acquired, "never acquired the lease:\n{}", a.c.logs());
    let b_scratch = Scratch::new("net-leader-b");
    let mut b = controller(&b_scratch, &ns, &lease("net-b"));
    b.wait_line(|l| msg(l).contains("waiting for the lease"));
    create_pod(
        &client,
        &ns,
        "once",
        "Never",
        vec![
            container("main", &[], json!({})),
            container("proxy", &[], json!({})),
        ],
        declared("proxy"),
    )
    .await;
    let rv = set_status(
        &client,
        &ns,
        "once",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    assert_eq!(net_decision(&a, &ns, "once", &rv).0, "end");
    wait_image(&client, &ns, "once", "proxy", Q).await;
    let e = wait_event(&client, &ns, "once", "SidecarsEndedBySafetyNet").await;
    assert_eq!(e.reporting_instance.as_deref(), Some("net-a"));
    assert!(
        b.find(|l| l["fields"]["safety_net"].is_string()).is_none(),
        "the standby decided:\n{}",
        b.c.logs()
    );
    wait_metric(&a, "swap", "NotInjected", 1.0);
    assert_eq!(metric(&b, "swap", "NotInjected"), 0.0);
    for r in [&mut b, &mut a] {
        r.c.signal(15);
        r.c.wait_status(LONG).expect("did not stop on SIGTERM");
    }
}
