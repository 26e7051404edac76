//! The EphemeralJob controller of `kubectl-sexton controller` against the real test API
//! server: batches and parallelism, results, refusals, pause, deadline, TTLs, restarts, and
//! the CRD's validation rules (the harness: `controllers/mod.rs`).
// The scope guard is held for a whole test on purpose; each test has its own runtime thread.
#![allow(clippy::await_holding_lock, clippy::type_complexity)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use testbed::*;

mod controllers;
use controllers::*;

fn ejob_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("sexton.dev", "v1alpha1", "EphemeralJob"),
            "ephemeraljobs",
        ),
    )
}

fn probe(extra: Value) -> Value {
    let mut c = json!({"name": "probe", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                       "terminationMessagePolicy": "File", "targetContainerName": "app",
                       "command": ["sh", "-c", "pgrep app"]});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            c[k] = v;
        }
    }
    c
}

fn ejob_json(name: &str, spec: Value) -> DynamicObject {
    let mut s = json!({"selector": {"matchLabels": {"app": "web"}}, "template": {"ephemeralContainers": [probe(json!({}))]}});
    if let Value::Object(m) = spec {
        for (k, v) in m {
            s[k] = v;
        }
    }
    serde_json::from_value(json!({"apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob", "metadata": {"name": name}, "spec": s})).unwrap()
}

async fn create_ejob(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> Result<DynamicObject, kube::Error> {
    ejob_api(client, ns)
        .create(&PostParams::default(), &ejob_json(name, spec))
        .await
}

/// `n` running pods labelled app=web, created in order web-0, web-1, ...
async fn web_pods(client: &Client, ns: &str, n: usize) -> Vec<String> {
    let mut names = vec![];
    for i in 0..n {
        let name = format!("web-{i}");
        create_pod(
            client,
            ns,
            &name,
            "Always",
            vec![container("app", &[], json!({}))],
            json!({"labels": {"app": "web"}}),
        )
        .await;
        set_status(client, ns, &name, "Running", &[("app", "running")]).await;
        names.push(name);
    }
    names
}

/// Our ephemeral containers in each pod (name → count of containers named `probe`).
async fn injected(client: &Client, ns: &str) -> BTreeMap<String, usize> {
    Api::<K8sPod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            let n = p
                .spec
                .unwrap()
                .ephemeral_containers
                .unwrap_or_default()
                .iter()
                .filter(|c| c.name == "probe")
                .count();
            (p.metadata.name.unwrap(), n)
        })
        .collect()
}

/// Plays the kubelet for the ephemeral container `probe` of `pod`.
async fn set_probe(client: &Client, ns: &str, pod: &str, s: &str) {
    let st = json!([{"name": "probe", "image": "busybox:1.36", "imageID": "", "ready": false, "restartCount": 0, "state": state(s)}]);
    Api::<K8sPod>::namespaced(client.clone(), ns)
        .patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ephemeralContainerStatuses": st}})),
        )
        .await
        .unwrap();
}

async fn ejob_status(client: &Client, ns: &str, name: &str) -> Value {
    ejob_api(client, ns).get(name).await.unwrap().data["status"].clone()
}

async fn wait_ejob(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + LONG;
    loop {
        let s = ejob_status(client, ns, name).await;
        if pred(&s) {
            return s;
        }
        assert!(
            Instant::now() < end,
            "{ns}/{name}: never {what}; status {s}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn phase(s: &Value) -> &str {
    s["phase"].as_str().unwrap_or_default()
}

fn ejob_controller(scratch: &Scratch, name: &str, ns: &str) -> Ctl {
    Ctl::start(
        scratch,
        name,
        controller_kubeconfig(),
        &["--namespace", ns, "--controllers", "ephemeraljob"],
        &[],
    )
}

async fn ejob_scenario(
    test: &str,
) -> (
    std::sync::RwLockReadGuard<'static, ()>,
    Client,
    String,
    Scratch,
) {
    let scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, test).await;
    controller_kubeconfig();
    (scope, client, ns, Scratch::new(test))
}

/// User story 1: a batch over the pods of a Deployment-like label, `parallelism` at a time.
#[tokio::test(flavor = "current_thread")]
async fn ejob_runs_a_batch_with_parallelism_respected_over_time() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-batch").await;
    let pods = web_pods(&client, &ns, 5).await;
    let ctl = ejob_controller(&scratch, "controller", &ns);
    let job = create_ejob(&client, &ns, "check", json!({"parallelism": 2}))
        .await
        .unwrap();
    let uid = job.metadata.uid.clone().unwrap();

    let mut order: Vec<String> = vec![];
    let mut finished: Vec<String> = vec![];
    let mut max_active = 0;
    let end = Instant::now() + LONG;
    while finished.len() < pods.len() {
        assert!(
            Instant::now() < end,
            "batch did not progress: injected {order:?}, finished {finished:?}\n{}",
            ctl.c.logs()
        );
        let inj = injected(&client, &ns).await;
        for (pod, n) in &inj {
            assert!(
                *n <= 1,
                "{pod}: {n} containers named probe (duplicate injection)"
            );
            if *n == 1 && !order.contains(pod) {
                order.push(pod.clone());
            }
        }
        let active: Vec<&String> = order.iter().filter(|p| !finished.contains(p)).collect();
        max_active = max_active.max(active.len());
        assert!(
            active.len() <= 2,
            "parallelism 2 exceeded: {active:?} unfinished at once"
        );
        // The kubelet runs the oldest unfinished one: running, then exit 0.
        if let Some(p) = active.first().map(|p| p.to_string()) {
            set_probe(&client, &ns, &p, "running").await;
            set_probe(&client, &ns, &p, "0").await;
            finished.push(p);
            // Let the controller see it (its status counts it) before looking again, so
            // that what it injects in response is what the next look checks.
            let k = finished.len() as i64;
            wait_ejob(&client, &ns, "check", "counting the finished target", |s| {
                s["succeeded"].as_i64() == Some(k)
            })
            .await;
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(order, pods, "targets are taken in creation order");
    assert_eq!(max_active, 2, "parallelism was used");
    let s = wait_ejob(&client, &ns, "check", "Succeeded", |s| {
        phase(s) == "Succeeded"
    })
    .await;
    assert_eq!(
        (
            s["match"].as_i64(),
            s["succeeded"].as_i64(),
            s["failed"].as_i64()
        ),
        (Some(5), Some(5), Some(0))
    );
    assert!(s["completionTime"].is_string() && s["startTime"].is_string());
    assert_eq!(
        s["conditions"].as_array().unwrap().last().unwrap()["type"],
        "Complete"
    );
    // Our containers carry the job's UID.
    let p = get_pod(&client, &ns, "web-0").await;
    let c = &p.spec.unwrap().ephemeral_containers.unwrap()[0];
    assert!(
        c.env.as_ref().unwrap().iter().any(
            |e| e.name == "SEXTON_EPHEMERALJOB_UID" && e.value.as_deref() == Some(uid.as_str())
        )
    );
    // `kubectl get ejob` looks like the proposal's output.
    let out = kubectl(&["get", "ejob", "-n", &ns]);
    let text = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "STATUS", "MATCH", "SUCCEED", "FAILED", "RUNNING", "WAITING", "AGE"
        ]
    );
    let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        row[..7],
        ["check", "Succeeded", "5", "5", "0", "0", "0"],
        "{text}"
    );
    eprintln!("{text}");
    let m = ctl.metrics();
    assert_eq!(
        m[r#"sexton_controller_actions_total{controller="ephemeraljob",action="inject",reason="Scheduled"}"#],
        5.0
    );
}

/// User story 2: one pod, a long-running debug container.
#[tokio::test(flavor = "current_thread")]
async fn ejob_long_running_debug_container_in_one_pod() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-debug").await;
    web_pods(&client, &ns, 1).await;
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(&client, &ns, "debug", json!({"replicas": 1, "template": {"ephemeralContainers": [probe(json!({"command": ["sleep", "infinity"], "stdin": true, "tty": true}))]}})).await.unwrap();
    let s = wait_ejob(&client, &ns, "debug", "waiting", |s| s["waiting"] == 1).await;
    assert_eq!(phase(&s), "Running");
    set_probe(&client, &ns, "web-0", "running").await;
    let s = wait_ejob(&client, &ns, "debug", "running", |s| s["running"] == 1).await;
    assert_eq!((phase(&s), s["waiting"].as_i64()), ("Running", Some(0)));
    set_probe(&client, &ns, "web-0", "0").await;
    wait_ejob(&client, &ns, "debug", "Succeeded", |s| {
        phase(s) == "Succeeded"
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn ejob_replicas_limit_and_mixed_results_finish_failed() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-mixed").await;
    web_pods(&client, &ns, 3).await;
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(
        &client,
        &ns,
        "two",
        json!({"replicas": 2, "parallelism": 5}),
    )
    .await
    .unwrap();
    wait_ejob(&client, &ns, "two", "two waiting", |s| s["waiting"] == 2).await;
    let inj = injected(&client, &ns).await;
    assert_eq!(
        inj,
        BTreeMap::from([
            ("web-0".into(), 1),
            ("web-1".into(), 1),
            ("web-2".into(), 0)
        ])
    );
    set_probe(&client, &ns, "web-0", "0").await;
    set_probe(&client, &ns, "web-1", "1").await;
    let s = wait_ejob(&client, &ns, "two", "Failed", |s| phase(s) == "Failed").await;
    assert_eq!(
        (
            s["match"].as_i64(),
            s["succeeded"].as_i64(),
            s["failed"].as_i64()
        ),
        (Some(2), Some(1), Some(1))
    );
    let c = s["conditions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (c["type"].as_str(), c["reason"].as_str()),
        (Some("Failed"), Some("ContainersFailed"))
    );
    assert_eq!(injected(&client, &ns).await["web-2"], 0, "replicas limit");
    // More replicas than pods still finishes.
    create_ejob(&client, &ns, "many", json!({"replicas": 10, "parallelism": 10, "template": {"ephemeralContainers": [probe(json!({"name": "probe2"}))]}})).await.unwrap();
    wait_ejob(&client, &ns, "many", "injected", |s| s["waiting"] == 3).await;
    for p in ["web-0", "web-1", "web-2"] {
        let st = json!([{"name": "probe", "image": "b", "imageID": "", "ready": false, "restartCount": 0, "state": state("0")},
                        {"name": "probe2", "image": "b", "imageID": "", "ready": false, "restartCount": 0, "state": state("0")}]);
        Api::<K8sPod>::namespaced(client.clone(), &ns)
            .patch_status(
                p,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"ephemeralContainerStatuses": st}})),
            )
            .await
            .unwrap();
    }
    let s = wait_ejob(&client, &ns, "many", "Succeeded", |s| {
        phase(s) == "Succeeded"
    })
    .await;
    assert_eq!(s["match"].as_i64(), Some(3));
}

#[tokio::test(flavor = "current_thread")]
async fn ejob_skips_pods_with_a_foreign_container_of_the_same_name() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-conflict").await;
    web_pods(&client, &ns, 2).await;
    // Someone else's debug container named `probe` in web-0 (kubectl debug, say).
    Api::<K8sPod>::namespaced(client.clone(), &ns)
        .patch_ephemeral_containers(
            "web-0",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"ephemeralContainers": [probe(json!({}))]}})),
        )
        .await
        .unwrap();
    // And in a pod the selector does not match: none of the job's business.
    create_pod(
        &client,
        &ns,
        "other-0",
        "Always",
        vec![container("app", &[], json!({}))],
        json!({"labels": {"app": "other"}}),
    )
    .await;
    set_status(&client, &ns, "other-0", "Running", &[("app", "running")]).await;
    Api::<K8sPod>::namespaced(client.clone(), &ns)
        .patch_ephemeral_containers(
            "other-0",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"ephemeralContainers": [probe(json!({}))]}})),
        )
        .await
        .unwrap();
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(&client, &ns, "check", json!({"parallelism": 2}))
        .await
        .unwrap();
    wait_ejob(&client, &ns, "check", "injected", |s| s["waiting"] == 1).await;
    let e = wait_event(&client, &ns, "check", "NameConflict").await;
    assert!(e.note.unwrap().contains("web-0"));
    set_probe(&client, &ns, "web-1", "0").await;
    let s = wait_ejob(&client, &ns, "check", "Succeeded", |s| {
        phase(s) == "Succeeded"
    })
    .await;
    assert_eq!(
        s["match"].as_i64(),
        Some(1),
        "the conflicting pod is not a target"
    );
    let p = get_pod(&client, &ns, "web-0").await;
    assert_eq!(
        p.spec.unwrap().ephemeral_containers.unwrap().len(),
        1,
        "web-0 untouched"
    );
    for e in events(&client, &ns, "check").await {
        let note = e.note.unwrap_or_default();
        assert!(
            !note.contains("other-0"),
            "a pod not selected is named: {note}"
        );
    }
}

/// One selected pod cannot take the container (no `app` to target: the API answers 422).
/// It counts as a failed target with the API's reason; the others are injected and run.
#[tokio::test(flavor = "current_thread")]
async fn ejob_a_pod_that_refuses_the_container_fails_alone() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-refused").await;
    web_pods(&client, &ns, 2).await;
    create_pod(
        &client,
        &ns,
        "web-odd",
        "Always",
        vec![container("other", &[], json!({}))],
        json!({"labels": {"app": "web"}}),
    )
    .await;
    set_status(&client, &ns, "web-odd", "Running", &[("other", "running")]).await;
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(&client, &ns, "check", json!({"parallelism": 3}))
        .await
        .unwrap();
    let s = wait_ejob(&client, &ns, "check", "two injected, one refused", |s| {
        s["waiting"] == 2 && s["refusedCount"] == 1
    })
    .await;
    assert_eq!(s["refused"][0]["pod"], "web-odd", "{s}");
    let why = s["refused"][0]["message"].as_str().unwrap();
    assert!(
        why.contains("targetContainerName"),
        "the API's reason: {why}"
    );
    assert_ne!(phase(&s), "Error", "{s}");
    // web-0 succeeds; web-1 fails with a long termination message, kept to 1 KiB
    set_probe(&client, &ns, "web-0", "0").await;
    let long = "x".repeat(3000);
    let st = json!([{"name": "probe", "image": "busybox:1.36", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 3, "reason": "Error", "message": long,
                                 "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:07Z"}}}]);
    Api::<K8sPod>::namespaced(client.clone(), &ns)
        .patch_status(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ephemeralContainerStatuses": st}})),
        )
        .await
        .unwrap();
    let s = wait_ejob(&client, &ns, "check", "Failed", |s| phase(s) == "Failed").await;
    assert_eq!(
        (s["succeeded"].as_i64(), s["failed"].as_i64()),
        (Some(1), Some(2)),
        "{s}"
    );
    let targets = s["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2, "{s}");
    // failed first
    let (t1, t0) = (&targets[0], &targets[1]);
    assert_eq!(
        (
            t1["pod"].as_str(),
            t1["state"].as_str(),
            t1["exitCode"].as_i64(),
            t1["reason"].as_str()
        ),
        (Some("web-1"), Some("Failed"), Some(3), Some("Error"))
    );
    assert_eq!(t1["message"].as_str().map(str::len), Some(1024));
    assert_eq!(t1["finishedAt"], "2026-01-01T00:00:07Z");
    assert_eq!(
        (
            t0["pod"].as_str(),
            t0["container"].as_str(),
            t0["state"].as_str(),
            t0["exitCode"].as_i64()
        ),
        (Some("web-0"), Some("probe"), Some("Succeeded"), Some(0))
    );
    // `kubectl sexton ejob results`: every target, the refused pod included
    let out = Command::new(KUBECTL_SEXTON)
        .args(["ejob", "results", "check", "-n", &ns, "--kubeconfig"])
        .arg(&testenv().kubeconfig)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0][..5],
        ["POD", "CONTAINER", "STATE", "EXIT", "DURATION"],
        "{text}"
    );
    assert!(
        rows.iter()
            .any(|r| r[..5] == ["web-1", "probe", "Failed", "3", "7s"]),
        "{text}"
    );
    assert!(
        rows.iter()
            .any(|r| r[..3] == ["web-0", "probe", "Succeeded"]),
        "{text}"
    );
    assert!(
        rows.iter().any(|r| r[..3] == ["web-odd", "-", "Refused"]),
        "{text}"
    );
    let out = Command::new(KUBECTL_SEXTON)
        .args([
            "ejob",
            "results",
            "check",
            "-n",
            &ns,
            "-o",
            "json",
            "--kubeconfig",
        ])
        .arg(&testenv().kubeconfig)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(json.to_string().contains("web-odd"), "{json}");
    // a job that is not there: one line naming it, exit 1
    let out = Command::new(KUBECTL_SEXTON)
        .args(["ejob", "results", "nope", "-n", &ns, "--kubeconfig"])
        .arg(&testenv().kubeconfig)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("nope") && err.lines().count() == 1,
        "{err}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn ejob_paused_then_resumed() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-paused").await;
    web_pods(&client, &ns, 1).await;
    let ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(&client, &ns, "check", json!({"paused": true}))
        .await
        .unwrap();
    let s = wait_ejob(&client, &ns, "check", "Paused", |s| phase(s) == "Paused").await;
    assert_eq!(s["waiting"].as_i64(), Some(0));
    ctl.wait_line(|l| {
        l["fields"]["job"] == format!("{ns}/check").as_str() && l["fields"]["phase"] == "Paused"
    });
    assert_eq!(
        injected(&client, &ns).await["web-0"],
        0,
        "injected while paused"
    );
    ejob_api(&client, &ns)
        .patch(
            "check",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    wait_ejob(&client, &ns, "check", "resumed", |s| s["waiting"] == 1).await;
    assert_eq!(injected(&client, &ns).await["web-0"], 1);
}

#[tokio::test(flavor = "current_thread")]
async fn ejob_deadline_fails_the_job() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-deadline").await;
    web_pods(&client, &ns, 1).await;
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(&client, &ns, "slow", json!({"activeDeadlineSeconds": 2}))
        .await
        .unwrap();
    wait_ejob(&client, &ns, "slow", "injected", |s| s["waiting"] == 1).await;
    set_probe(&client, &ns, "web-0", "running").await;
    let s = wait_ejob(&client, &ns, "slow", "Failed", |s| phase(s) == "Failed").await;
    assert_eq!(
        s["conditions"].as_array().unwrap().last().unwrap()["reason"],
        "DeadlineExceeded"
    );
    wait_event(&client, &ns, "slow", "DeadlineExceeded").await;
}

#[tokio::test(flavor = "current_thread")]
async fn ejob_ttls_delete_the_job() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-ttl").await;
    web_pods(&client, &ns, 1).await;
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(
        &client,
        &ns,
        "finished",
        json!({"ttlSecondsAfterFinished": 1}),
    )
    .await
    .unwrap();
    // A job that never finishes (it selects nothing) but lives 2 s at most.
    create_ejob(
        &client,
        &ns,
        "created",
        json!({"ttlSecondsAfterCreated": 2, "selector": {"matchLabels": {"app": "none"}}}),
    )
    .await
    .unwrap();
    wait_ejob(&client, &ns, "finished", "injected", |s| s["waiting"] == 1).await;
    set_probe(&client, &ns, "web-0", "0").await;
    let api = ejob_api(&client, &ns);
    let end = Instant::now() + LONG;
    let mut gone = BTreeMap::new();
    while gone.len() < 2 {
        assert!(
            Instant::now() < end,
            "not deleted: {:?}",
            api.list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .map(|j| j.metadata.name.clone())
                .collect::<Vec<_>>()
        );
        for n in ["finished", "created"] {
            if !gone.contains_key(n) && api.get_opt(n).await.unwrap().is_none() {
                gone.insert(n, Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn ejob_controller_restart_mid_job_injects_nothing_twice() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-restart").await;
    web_pods(&client, &ns, 2).await;
    let first = ejob_controller(&scratch, "first", &ns);
    create_ejob(&client, &ns, "check", json!({})).await.unwrap();
    wait_ejob(&client, &ns, "check", "injected", |s| s["waiting"] == 1).await;
    drop(first);
    let second = ejob_controller(&scratch, "second", &ns);
    second.wait_line(|l| {
        l["fields"]["job"] == format!("{ns}/check").as_str() && l["fields"]["decision"] == "plan"
    });
    let l = second.find(|l| l["fields"]["decision"] == "plan").unwrap();
    assert_eq!(
        l["fields"]["injected"], 0,
        "the restarted controller injected again"
    );
    assert_eq!(
        injected(&client, &ns).await,
        BTreeMap::from([("web-0".into(), 1), ("web-1".into(), 0)])
    );
    set_probe(&client, &ns, "web-0", "0").await;
    wait_ejob(&client, &ns, "check", "second target", |s| {
        s["waiting"] == 1 && s["succeeded"] == 1
    })
    .await;
    set_probe(&client, &ns, "web-1", "0").await;
    wait_ejob(&client, &ns, "check", "Succeeded", |s| {
        phase(s) == "Succeeded"
    })
    .await;
    assert_eq!(
        injected(&client, &ns).await,
        BTreeMap::from([("web-0".into(), 1), ("web-1".into(), 1)])
    );
}

#[tokio::test(flavor = "current_thread")]
async fn ejob_validation_rules_are_enforced_by_the_api_server() {
    let (_scope, client, ns, _scratch) = ejob_scenario("ejob-valid").await;
    let without = |field: &str| {
        let mut c = probe(json!({}));
        c.as_object_mut().unwrap().remove(field);
        json!({"template": {"ephemeralContainers": [c]}})
    };
    let with = |extra: Value| json!({"template": {"ephemeralContainers": [probe(extra)]}});
    let cases: Vec<(Value, &str)> = vec![
        (without("name"), "name: Required"),
        (without("image"), "image: Required"),
        (without("imagePullPolicy"), "imagePullPolicy: Required"),
        (
            without("terminationMessagePolicy"),
            "terminationMessagePolicy: Required",
        ),
        (
            without("targetContainerName"),
            "targetContainerName: Required",
        ),
        (with(json!({"name": "Not_A_Label"})), "should match"),
        (
            json!({"template": {"ephemeralContainers": [probe(json!({})), probe(json!({}))]}}),
            "names must be unique",
        ),
        (
            json!({"template": {"ephemeralContainers": []}}),
            "should have at least 1 items",
        ),
        (
            with(json!({"ports": [{"containerPort": 80}]})),
            "may not have ports",
        ),
        (
            with(json!({"resources": {"limits": {"cpu": "1"}}})),
            "may not have resources",
        ),
        (
            with(json!({"livenessProbe": {"exec": {"command": ["true"]}}})),
            "may not have probes",
        ),
        (
            with(json!({"readinessProbe": {"exec": {"command": ["true"]}}})),
            "may not have probes",
        ),
        (
            with(json!({"startupProbe": {"exec": {"command": ["true"]}}})),
            "may not have probes",
        ),
        (
            with(json!({"lifecycle": {"preStop": {"exec": {"command": ["true"]}}}})),
            "may not have lifecycle hooks",
        ),
        (
            with(json!({"volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "x"}]})),
            "may not use subPath",
        ),
        (
            json!({"replicas": 0}),
            "should be greater than or equal to 1",
        ),
        (
            json!({"parallelism": 0}),
            "should be greater than or equal to 1",
        ),
        (json!({"selector": null}), "selector: Required"),
        // found by OpenKruise's test cases: refused late, by the pod API, before
        (with(json!({"image": " busybox:1.36"})), "should match"),
        (with(json!({"image": "busybox:1.36\n"})), "should match"),
        (
            with(json!({"imagePullPolicy": "Sometimes"})),
            "Unsupported value: \"Sometimes\"",
        ),
        (
            with(json!({"terminationMessagePolicy": "Nope"})),
            "Unsupported value: \"Nope\"",
        ),
        (json!({"selector": {}}), "spec.selector is empty"),
        (
            json!({"selector": {"matchLabels": {}, "matchExpressions": []}}),
            "spec.selector is empty",
        ),
    ];
    for (i, (spec, needle)) in cases.iter().enumerate() {
        let mut obj = serde_json::to_value(ejob_json(&format!("bad-{i}"), spec.clone())).unwrap();
        if spec.get("selector") == Some(&Value::Null) {
            obj["spec"].as_object_mut().unwrap().remove("selector");
        }
        let obj: DynamicObject = serde_json::from_value(obj).unwrap();
        match ejob_api(&client, &ns)
            .create(&PostParams::default(), &obj)
            .await
        {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{needle}: {s:?}");
                assert!(
                    s.message.contains(needle),
                    "expected {needle:?} in: {}",
                    s.message
                );
            }
            other => panic!("{needle}: accepted: {other:?}"),
        }
    }
    // An empty selector when said so; the default TTL.
    let all = create_ejob(
        &client,
        &ns,
        "everything",
        json!({"selector": {}, "selectAllPods": true}),
    )
    .await
    .unwrap();
    assert_eq!(all.data["spec"]["ttlSecondsAfterFinished"], 1800);
    // After creation only replicas, parallelism and paused may change.
    create_ejob(
        &client,
        &ns,
        "ok",
        json!({"activeDeadlineSeconds": 60, "ttlSecondsAfterFinished": 5}),
    )
    .await
    .unwrap();
    let api = ejob_api(&client, &ns);
    api.patch(
        "ok",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3, "parallelism": 2, "paused": true}})),
    )
    .await
    .unwrap();
    for (patch, field) in [
        (
            json!({"selector": {"matchLabels": {"app": "other"}}}),
            "spec.selector is immutable",
        ),
        (
            json!({"template": {"ephemeralContainers": [probe(json!({"image": "busybox:1.37"}))]}}),
            "spec.template is immutable",
        ),
        (
            json!({"activeDeadlineSeconds": 61}),
            "spec.activeDeadlineSeconds is immutable",
        ),
        (
            json!({"ttlSecondsAfterFinished": 6}),
            "spec.ttlSecondsAfterFinished is immutable",
        ),
        (
            json!({"ttlSecondsAfterCreated": 6}),
            "spec.ttlSecondsAfterCreated is immutable",
        ),
    ] {
        match api
            .patch(
                "ok",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": patch})),
            )
            .await
        {
            Err(kube::Error::Api(s)) => assert!(
                s.code == 422 && s.message.contains(field),
                "{field}: {}",
                s.message
            ),
            other => panic!("{field}: accepted: {other:?}"),
        }
    }
}
