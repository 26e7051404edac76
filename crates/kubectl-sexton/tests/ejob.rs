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

/// Creates a job as `client`'s user, stamped with that user as its requester (what the
/// webhook does; the requester policy checks the stamp in the scenarios' namespaces).
async fn create_ejob(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> Result<DynamicObject, kube::Error> {
    let mut job = ejob_json(name, spec);
    job.metadata.annotations = Some(BTreeMap::from([(
        REQUESTER.to_string(),
        own_stamp(client).await,
    )]));
    ejob_api(client, ns)
        .create(&PostParams::default(), &job)
        .await
}

const REQUESTER: &str = "sexton.dev/requester";

/// The `sexton.dev/requester` stamp of `client`'s user (as the API server sees it).
async fn own_stamp(client: &Client) -> String {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &Default::default())
        .await
        .unwrap();
    let u = review.status.unwrap().user_info.unwrap();
    let mut lines = vec![format!("user={}", u.username.unwrap())];
    lines.extend(u.uid.filter(|s| !s.is_empty()).map(|x| format!("uid={x}")));
    lines.extend(
        u.groups
            .unwrap_or_default()
            .iter()
            .map(|g| format!("group={g}")),
    );
    for (k, vs) in u.extra.unwrap_or_default() {
        lines.extend(vs.iter().map(|v| format!("extra={k}={v}")));
    }
    lines.join("\n")
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

/// A scenario: the shared scope's guard, the admin's client, its namespace, its scratch
/// directory.
type Scenario = (
    std::sync::RwLockReadGuard<'static, ()>,
    Client,
    String,
    Scratch,
);

async fn ejob_scenario(test: &str) -> Scenario {
    let (scope, client, ns, scratch) = ejob_scenario_without_policy(test).await;
    requester_policy_in(&ns);
    (scope, client, ns, scratch)
}

/// A scenario's namespace where the requester policy is not in force (a cluster without
/// it): the controller acts on no stamp there.
async fn ejob_scenario_without_policy(test: &str) -> Scenario {
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
    // (the first batch's two patches are sent at once: either may land first)
    order[..2].sort();
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

/// `spec.replicas` of the CRD, where a JSON patch can take its maximum and its format away
/// (Kubernetes 1.37 checks `format: int32` on its own, so both must go to store a value
/// beyond int32, as an old CRD without them did).
const REPLICAS_MAX: &str =
    "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/replicas/maximum";
const REPLICAS_FORMAT: &str =
    "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/replicas/format";

/// Puts the CRD back as deployed when dropped (also when the test fails), taking back the
/// fields the patch took (else the next `apply --server-side` of it conflicts).
struct RestoreMaximum;

impl Drop for RestoreMaximum {
    fn drop(&mut self) {
        let crd = format!("{}/deploy/crd-ephemeraljob.yaml", root());
        let out = kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &crd]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// One job the controller cannot read (`replicas` beyond int32, stored before the CRD had
/// its maximum, as after an upgrade) stops nothing: a controller started with it in the
/// list reconciles the other jobs, is ready, and logs and counts the bad one once. And the
/// CRD now refuses such a value.
#[tokio::test(flavor = "current_thread")]
async fn ejob_one_undecodable_job_does_not_stop_the_controller() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-undecodable").await;
    let huge = json!({"replicas": 99999999999_i64});
    let e = create_ejob(&client, &ns, "huge", huge.clone())
        .await
        .expect_err("the CRD took replicas beyond int32");
    assert!(e.to_string().contains("spec.replicas"), "{e}");
    {
        let relax = json!([
            {"op": "remove", "path": REPLICAS_MAX},
            {"op": "remove", "path": REPLICAS_FORMAT},
        ])
        .to_string();
        let out = kubectl(&[
            "patch",
            "crd",
            "ephemeraljobs.sexton.dev",
            "--type=json",
            "-p",
            &relax,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _restore = RestoreMaximum;
        // (the API server takes the new schema a moment later)
        let end = Instant::now() + LONG;
        while create_ejob(&client, &ns, "huge", huge.clone())
            .await
            .is_err()
        {
            assert!(Instant::now() < end, "the relaxed CRD never took the job");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    web_pods(&client, &ns, 1).await;
    create_ejob(&client, &ns, "good", json!({})).await.unwrap();
    let ctl = ejob_controller(&scratch, "controller", &ns);
    wait_ejob(&client, &ns, "good", "injected", |s| s["waiting"] == 1).await;
    assert_eq!(ctl.get(&ctl.health, "/readyz").0, 200);
    let bad = format!("{ns}/huge");
    let l = ctl.wait_line(|l| l["fields"]["object"] == bad.as_str());
    assert_eq!(l["fields"]["field"], "spec.replicas", "{l}");
    assert!(msg(&l).contains("i32"), "{l}");
    // touched, it is still skipped (logged again for its new version), and the good job
    // is still served
    let touched = ejob_api(&client, &ns)
        .patch(
            "huge",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let rv = touched.metadata.resource_version.unwrap();
    ctl.wait_line(|l| {
        l["fields"]["object"] == bad.as_str() && l["fields"]["resource_version"] == rv.as_str()
    });
    set_probe(&client, &ns, "web-0", "0").await;
    wait_ejob(&client, &ns, "good", "Succeeded", |s| {
        phase(s) == "Succeeded"
    })
    .await;
    let logged = ctl
        .lines()
        .iter()
        .filter(|l| l["fields"]["object"] == bad.as_str())
        .count();
    assert_eq!(logged, 2, "logged once per version");
    let counted =
        ctl.metrics()[r#"sexton_controller_undecodable_objects_total{watch="ephemeraljobs"}"#];
    assert_eq!(counted, logged as f64);
    assert!(
        ejob_status(&client, &ns, "huge").await.is_null(),
        "the undecodable job was given a status"
    );
    assert!(
        !ctl.c.logs().contains("InitialListFailed") && !ctl.c.logs().contains("watching failed"),
        "{}",
        ctl.c.logs()
    );
}

fn ejob_controller_with(scratch: &Scratch, ns: &str, extra: &[&str]) -> Ctl {
    let mut args = vec!["--namespace", ns, "--controllers", "ephemeraljob"];
    args.extend_from_slice(extra);
    Ctl::start(scratch, "controller", controller_kubeconfig(), &args, &[])
}

/// The issue's attack, by template: privileged, SYS_ADMIN, the pod's token volume, an image
/// off the allow-list. Each job goes to Error (TemplateRefused, naming the field) and
/// nothing is injected.
#[tokio::test(flavor = "current_thread")]
async fn ejob_the_template_policy_refuses_before_injecting() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-policy").await;
    web_pods(&client, &ns, 1).await;
    let _ctl = ejob_controller_with(&scratch, &ns, &["--ejob-allowed-images=busybox:"]);
    let jobs = [
        (
            "priv",
            json!({"securityContext": {"privileged": true}}),
            "privileged",
        ),
        (
            "caps",
            json!({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
            "SYS_ADMIN",
        ),
        (
            "token",
            json!({"volumeMounts": [{"name": "kube-api-access-abcde", "mountPath": "/t"}]}),
            "token",
        ),
        (
            "image",
            json!({"image": "attacker.example/toolbox:1"}),
            "not allowed",
        ),
    ];
    for (name, extra, _) in &jobs {
        let spec = json!({"template": {"ephemeralContainers": [probe(extra.clone())]}});
        create_ejob(&client, &ns, name, spec).await.unwrap();
    }
    for (name, _, why) in &jobs {
        let s = wait_ejob(&client, &ns, name, "Error", |s| phase(s) == "Error").await;
        let c = &s["conditions"][0];
        assert_eq!(c["reason"], "TemplateRefused", "{name}: {s}");
        assert!(c["message"].as_str().unwrap().contains(why), "{name}: {s}");
    }
    assert_eq!(injected(&client, &ns).await["web-0"], 0);
}

/// A pod holds at most --ejob-max-containers-per-pod ephemeral containers: a job that would
/// add more refuses that target (the job carries on, not in Error).
#[tokio::test(flavor = "current_thread")]
async fn ejob_a_pod_at_the_cap_is_a_refused_target() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-cap").await;
    web_pods(&client, &ns, 1).await;
    let _ctl = ejob_controller_with(&scratch, &ns, &["--ejob-max-containers-per-pod=2"]);
    let two = json!({"template": {"ephemeralContainers": [probe(json!({})), probe(json!({"name": "probe2"}))]}});
    create_ejob(&client, &ns, "first", two).await.unwrap();
    wait_ejob(&client, &ns, "first", "injected", |s| s["waiting"] == 1).await;
    // (a pod event after the injection: the controller's cache holds both containers)
    set_probe(&client, &ns, "web-0", "running").await;
    wait_ejob(&client, &ns, "first", "running", |s| s["running"] == 1).await;
    let one = json!({"template": {"ephemeralContainers": [probe(json!({"name": "later"}))]}});
    create_ejob(&client, &ns, "second", one).await.unwrap();
    let s = wait_ejob(&client, &ns, "second", "refused", |s| {
        s["refusedCount"] == 1
    })
    .await;
    let why = s["refused"][0]["message"].as_str().unwrap();
    assert!(why.contains("--ejob-max-containers-per-pod"), "{s}");
    assert_ne!(phase(&s), "Error", "{s}");
    let pod = Api::<K8sPod>::namespaced(client.clone(), &ns)
        .get("web-0")
        .await
        .unwrap();
    assert_eq!(pod.spec.unwrap().ephemeral_containers.unwrap().len(), 2);
}

/// A Pod Security denial (403, like RBAC's) of a target is that target's failure with the
/// denial's message, not the job's Error about the controller's ClusterRole.
#[tokio::test(flavor = "current_thread")]
async fn ejob_an_admission_denial_fails_that_target_alone() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-denied").await;
    web_pods(&client, &ns, 2).await;
    // (after the pods: they would not pass `restricted` either)
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})),
        )
        .await
        .unwrap();
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(&client, &ns, "check", json!({"parallelism": 2}))
        .await
        .unwrap();
    let s = wait_ejob(&client, &ns, "check", "finished", |s| {
        s["refusedCount"] == 2 && s["completionTime"].is_string()
    })
    .await;
    assert_eq!(phase(&s), "Failed", "{s}");
    let why = s["refused"][0]["message"].as_str().unwrap();
    assert!(why.contains("PodSecurity"), "{s}");
    assert!(!why.contains("ClusterRole"), "{s}");
}

// --- The requester: the controller acts only within the rights of the job's creator ------

/// The shipped ValidatingAdmissionPolicy (deploy/ephemeraljob-requester.yaml), bound to
/// `ns` alone (the namespaces of other tests and files stay unchecked), and in force: a
/// forged stamp is refused on a server-side dry run.
fn requester_policy_in(ns: &str) {
    let file =
        std::fs::read_to_string(format!("{}/deploy/ephemeraljob-requester.yaml", root())).unwrap();
    let policy = file.split("\n---\n").next().unwrap();
    // (server-side, as every apply of deploy/'s files in the tests: a client-side apply
    // would own fields that controller.rs's server-side apply of deploy/ then conflicts on)
    let out = kubectl_with_input(&["apply", "--server-side", "-f", "-"], policy.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": format!("requester-{ns}")},
        "spec": {"policyName": "sexton-ephemeraljob-requester", "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}});
    let out = kubectl_with_input(&["apply", "-f", "-"], binding.to_string().as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let forged = stamped_job("in-force", "user=nobody");
    let in_force = wait_until(LONG, || {
        let out = create_as("admin", ns, &forged, &["--dry-run=server"]);
        String::from_utf8_lossy(&out.stderr).contains("sexton-ephemeraljob-requester")
    });
    assert!(in_force, "the requester policy is not in force in {ns}");
}

/// A job whose annotation sexton.dev/requester says `stamp`, its container named `c`.
fn stamped_job(name: &str, stamp: &str) -> Value {
    let mut job = serde_json::to_value(ejob_json(name, json!({}))).unwrap();
    job["metadata"]["annotations"] = json!({REQUESTER: stamp});
    job
}

/// `kubectl create` as `user` (impersonated; `admin` is the admin itself).
fn create_as(user: &str, ns: &str, job: &Value, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["create", "-n", ns, "-f", "-"];
    let as_user = format!("--as={user}");
    if user != "admin" {
        args.push(&as_user);
    }
    args.extend(extra);
    kubectl_with_input(&args, job.to_string().as_bytes())
}

/// The stamp of an impersonated user with no groups of their own (the API server adds
/// system:authenticated).
fn impersonated(user: &str) -> String {
    format!("user={user}\ngroup=system:authenticated")
}

/// A Role of `rules` in `ns`, bound to user `user`.
fn grant(ns: &str, user: &str, name: &str, rules: Value) {
    for o in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name, "namespace": ns}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": format!("{name}-{user}"), "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]}),
    ] {
        let out = kubectl_with_input(&["apply", "-f", "-"], o.to_string().as_bytes());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // (in effect once the authorizer has the binding: the first rule's first right)
    let group = rules[0]["apiGroups"][0].as_str().unwrap();
    let resource = rules[0]["resources"][0].as_str().unwrap();
    let resource = match group {
        "" => resource.to_string(),
        _ => format!("{resource}.{group}"),
    };
    let verb = rules[0]["verbs"][0].as_str().unwrap();
    wait_allowed(ns, user, verb, &resource);
}

fn may_create_jobs(ns: &str, user: &str) {
    let rules = json!([{"apiGroups": ["sexton.dev"], "resources": ["ephemeraljobs"],
                        "verbs": ["create", "get", "list", "watch", "delete", "patch", "update"]}]);
    grant(ns, user, "ejob-creator", rules);
}

fn may_debug(ns: &str, user: &str) {
    let rules =
        json!([{"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch"]}]);
    grant(ns, user, "debugger", rules);
}

/// A user who may create EphemeralJobs but not add ephemeral containers themselves (no
/// `kubectl debug`) gets nothing injected: the target is refused, naming the user and the
/// right. Another user with that right, in the same namespace, gets the injection.
#[tokio::test(flavor = "current_thread")]
async fn ejob_injects_only_what_the_requester_may() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-requester").await;
    web_pods(&client, &ns, 1).await;
    for u in ["alice", "bob"] {
        may_create_jobs(&ns, u);
    }
    may_debug(&ns, "bob");
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    let out = create_as(
        "alice",
        &ns,
        &stamped_job("alices", &impersonated("alice")),
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = wait_ejob(&client, &ns, "alices", "finished", |s| {
        s["refusedCount"] == 1 && s["completionTime"].is_string()
    })
    .await;
    assert_eq!(phase(&s), "Failed", "{s}");
    let why = s["refused"][0]["message"].as_str().unwrap();
    assert!(
        why.contains("\"alice\"") && why.contains("patch pods/ephemeralcontainers"),
        "{s}"
    );
    assert_eq!(injected(&client, &ns).await["web-0"], 0);

    let mut bobs = stamped_job("bobs", &impersonated("bob"));
    bobs["spec"]["template"]["ephemeralContainers"][0]["name"] = json!("probe");
    let out = create_as("bob", &ns, &bobs, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_ejob(&client, &ns, "bobs", "injected", |s| {
        s["running"] == 1 || s["waiting"] == 1
    })
    .await;
    assert_eq!(injected(&client, &ns).await["web-0"], 1);
}

/// A termination message reaches the status only if the requester may read the
/// container's output (`get pods/log`): bob may debug but not read logs, carol may both.
#[tokio::test(flavor = "current_thread")]
async fn ejob_a_termination_message_needs_the_requesters_pods_log_right() {
    let (_scope, client, ns, scratch) = ejob_scenario("ejob-message").await;
    web_pods(&client, &ns, 1).await;
    for u in ["bob", "carol"] {
        may_create_jobs(&ns, u);
        may_debug(&ns, u);
    }
    let logs = json!([{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]);
    grant(&ns, "carol", "log-reader", logs);
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    let secret = "DB_PASSWORD=hunter2";
    let mut statuses = vec![];
    for user in ["bob", "carol"] {
        let container = format!("probe-{user}");
        let mut job = stamped_job(user, &impersonated(user));
        job["spec"]["template"]["ephemeralContainers"][0]["name"] = json!(container);
        let out = create_as(user, &ns, &job, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        wait_ejob(&client, &ns, user, "injected", |s| s["waiting"] == 1).await;
        let done = json!({"terminated": {"exitCode": 1, "reason": "Error", "message": secret,
                          "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}});
        statuses.push(
            json!({"name": container, "image": "busybox:1.36", "imageID": "", "ready": false,
                             "restartCount": 0, "state": done}),
        );
    }
    Api::<K8sPod>::namespaced(client.clone(), &ns)
        .patch_status(
            "web-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ephemeralContainerStatuses": statuses}})),
        )
        .await
        .unwrap();
    for (user, shown) in [("bob", false), ("carol", true)] {
        let s = wait_ejob(&client, &ns, user, "finished", |s| {
            s["completionTime"].is_string()
        })
        .await;
        let message = s["targets"][0]["message"].as_str().unwrap_or_default();
        assert_eq!(message == secret, shown, "{user}: {s}");
        if !shown {
            assert!(!s.to_string().contains(secret), "{user}: {s}");
            assert!(
                message.contains("withheld") && message.contains("get pods/log"),
                "{user}: {s}"
            );
        }
    }
}

/// The policy makes the stamp truthful and permanent: a job stamped with another user is
/// refused, and so is any change to the stamp afterwards, by anyone.
#[tokio::test(flavor = "current_thread")]
async fn ejob_a_forged_or_changed_requester_is_refused() {
    let (_scope, _client, ns, _scratch) = ejob_scenario("ejob-forged").await;
    may_create_jobs(&ns, "alice");
    let forged = create_as(
        "alice",
        &ns,
        &stamped_job("forged", &impersonated("bob")),
        &[],
    );
    let err = String::from_utf8_lossy(&forged.stderr);
    assert!(!forged.status.success() && err.contains(REQUESTER), "{err}");
    let extra = format!("{}\ngroup=system:masters", impersonated("alice"));
    let more = create_as("alice", &ns, &stamped_job("more", &extra), &[]);
    assert!(!more.status.success(), "an extra group was accepted");
    let unstamped = serde_json::to_value(ejob_json("none", json!({}))).unwrap();
    let none = create_as("alice", &ns, &unstamped, &[]);
    assert!(!none.status.success(), "a job without a stamp was accepted");

    let out = create_as(
        "alice",
        &ns,
        &stamped_job("true", &impersonated("alice")),
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let to_bob = format!("{REQUESTER}={}", impersonated("bob"));
    let removed = format!("{REQUESTER}-");
    for (who, change) in [("alice", &to_bob), ("admin", &to_bob), ("alice", &removed)] {
        let mut args = vec![
            "annotate",
            "-n",
            &ns,
            "--overwrite",
            "ephemeraljob/true",
            change,
        ];
        let as_user = format!("--as={who}");
        if who != "admin" {
            args.push(&as_user);
        }
        let out = kubectl(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("cannot be changed"),
            "{who} {change}: {err}"
        );
    }
}

/// A stamp's lines must read back as one identity: `extra=a=b=c` would be key `a`, value
/// `b=c`, for a creator whose key is `a=b`, and the controller would ask its
/// SubjectAccessReviews about someone else. Such a creator is refused, even with the lines
/// of their own identity; one with an ordinary key is not. (kubectl's `--as-user-extra`
/// cannot name such a key: the request carries the impersonation headers itself, the key
/// percent-encoded, as the API server reads it.)
#[tokio::test(flavor = "current_thread")]
async fn ejob_a_creator_with_an_equals_sign_in_an_extra_key_is_refused() {
    let (_scope, client, ns, _scratch) = ejob_scenario("ejob-extra-eq").await;
    may_create_jobs(&ns, "alice");
    let create = |name: &str, header_key: &str, key: &str| {
        let stamp = format!("{}\nextra={key}=c", impersonated("alice"));
        let req = http::Request::post(format!(
            "/apis/sexton.dev/v1alpha1/namespaces/{ns}/ephemeraljobs"
        ))
        .header("Content-Type", "application/json")
        .header("Impersonate-User", "alice")
        .header(format!("Impersonate-Extra-{header_key}"), "c")
        .body(stamped_job(name, &stamp).to_string().into_bytes())
        .unwrap();
        client.request::<Value>(req)
    };
    let plain = create("plain", "team", "team").await;
    assert!(
        plain.is_ok(),
        "an ordinary extra key was refused: {plain:?}"
    );
    let err = match create("equals", "a%3Db", "a=b").await {
        Ok(job) => panic!("a creator with the extra key a=b was accepted: {job}"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("contains '='"), "{err}");
}

/// A job that does not say who created it (a cluster without the webhook and the policy)
/// injects nothing: it fails closed with a condition that says why.
#[tokio::test(flavor = "current_thread")]
async fn ejob_without_a_requester_is_refused() {
    // (no policy here: it would refuse these jobs at admission)
    let (_scope, client, ns, scratch) = ejob_scenario_without_policy("ejob-unstamped").await;
    web_pods(&client, &ns, 1).await;
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    for (name, stamp) in [("none", None), ("malformed", Some("group=devs"))] {
        let mut job = serde_json::to_value(ejob_json(name, json!({}))).unwrap();
        if let Some(stamp) = stamp {
            job["metadata"]["annotations"] = json!({REQUESTER: stamp});
        }
        let out = create_as("admin", &ns, &job, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = wait_ejob(&client, &ns, name, "Error", |s| phase(s) == "Error").await;
        let c = &s["conditions"][0];
        assert_eq!(c["reason"], "RequesterUnknown", "{s}");
        assert!(c["message"].as_str().unwrap().contains(REQUESTER), "{s}");
    }
    assert_eq!(injected(&client, &ns).await["web-0"], 0);
}

/// Where no policy keeps a stamp from being changed, a truthful stamp is not trusted
/// either (anyone who may update the job could have written it): the job fails closed with
/// a condition that says what to install, and nothing is injected. Once the policy is in
/// force in the namespace, the next job runs.
#[tokio::test(flavor = "current_thread")]
async fn ejob_acts_only_where_the_requester_stamp_is_protected() {
    let (_scope, client, ns, scratch) = ejob_scenario_without_policy("ejob-unprotected").await;
    web_pods(&client, &ns, 1).await;
    let _ctl = ejob_controller(&scratch, "controller", &ns);
    create_ejob(&client, &ns, "before", json!({}))
        .await
        .unwrap();
    let s = wait_ejob(&client, &ns, "before", "Error", |s| phase(s) == "Error").await;
    let c = &s["conditions"][0];
    assert_eq!(c["reason"], "RequesterUnprotected", "{s}");
    let why = c["message"].as_str().unwrap();
    assert!(
        why.contains("dry run") && why.contains("sexton-ephemeraljob-requester"),
        "{s}"
    );
    assert_eq!(injected(&client, &ns).await["web-0"], 0);

    requester_policy_in(&ns);
    create_ejob(&client, &ns, "after", json!({})).await.unwrap();
    let end = Instant::now() + LONG;
    while injected(&client, &ns).await["web-0"] == 0 && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        injected(&client, &ns).await["web-0"],
        1,
        "a job created once the policy is in force is acted on"
    );
}
