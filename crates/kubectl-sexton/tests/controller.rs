//! `kubectl-sexton controller` (SidecarTerminator and EphemeralJob) against the real test API server
//! (scripts/testenv.sh). The controller is the real release binary, run as a process with
//! the token of the ServiceAccount from `deploy/rbac.yaml`, bound to exactly the ClusterRole
//! and Role in that file. The test plays the kubelet by writing pod status.
//!
//! Every test but the leader-election one watches its own namespace only (`--namespace`),
//! so tests can run in parallel; the leader-election test runs cluster-wide as deployed and
//! excludes the others.
// The scope guard is held for a whole test on purpose; each test has its own runtime thread.
#![allow(clippy::await_holding_lock, clippy::type_complexity)]

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod as K8sPod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testbed::*;

/// The binary under test.
const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
const Q: &str = "sexton-quick-exit:test";
const MARK: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT";
const MARK_IMAGE: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE";
const LONG: Duration = Duration::from_secs(30);
const FAKE_NODE: &str = "sexton-test-no-such-node";

/// Namespaced tests share (read); the cluster-wide leader-election test excludes them.
static SCOPE: RwLock<()> = RwLock::new(());

fn root() -> &'static str {
    testbed::ROOT
}

/// Applies deploy/namespace.yaml, deploy/rbac.yaml and the CRD for real (idempotent) and
/// writes a kubeconfig holding a token of the controller's ServiceAccount.
fn controller_kubeconfig() -> &'static std::path::Path {
    static KC: OnceLock<std::path::PathBuf> = OnceLock::new();
    KC.get_or_init(|| {
        let env = testenv();
        ejob_crd();
        for f in ["namespace.yaml", "rbac.yaml"] {
            let out = kubectl(&["apply", "-f", &format!("{}/deploy/{f}", root())]);
            assert!(
                out.status.success(),
                "apply {f}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        service_account_kubeconfig(
            "sexton-system",
            "sexton-controller",
            &env.state.join("sexton-controller.kubeconfig"),
        )
    })
}

/// A running `kubectl-sexton controller` process with JSON logs on stderr.
struct Ctl {
    c: Process,
    metrics: String,
    health: String,
}

impl Ctl {
    fn start(
        pod: &Scratch,
        name: &str,
        kubeconfig: &std::path::Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Ctl {
        let mut cmd = Command::new(KUBECTL_SEXTON);
        cmd.args(["controller", "--kubeconfig"])
            .arg(kubeconfig)
            .args([
                "--metrics-addr=127.0.0.1:0",
                "--health-addr=127.0.0.1:0",
                "--log-format=json",
                "--log-level=debug",
            ])
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove("POD_NAME");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let c = pod.spawn_host(name, cmd);
        let mut ctl = Ctl {
            c,
            metrics: String::new(),
            health: String::new(),
        };
        ctl.metrics = ctl.wait_line(|l| msg(l) == "serving metrics-addr")["fields"]["bound"]
            .as_str()
            .unwrap()
            .to_string();
        ctl.health = ctl.wait_line(|l| msg(l) == "serving health-addr")["fields"]["bound"]
            .as_str()
            .unwrap()
            .to_string();
        ctl
    }

    fn lines(&self) -> Vec<Value> {
        self.c
            .logs()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn find(&self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        self.lines().into_iter().find(|l| pred(l))
    }

    fn wait_line(&self, pred: impl Fn(&Value) -> bool) -> Value {
        let mut found = None;
        wait_until(LONG, || {
            found = self.find(&pred);
            found.is_some()
        });
        found.unwrap_or_else(|| {
            panic!(
                "{}: expected log line never came:\n{}",
                self.c.name,
                self.c.logs()
            )
        })
    }

    /// The controller's decision log for pod `ns/name` at resource version `rv`.
    fn wait_decision(&self, ns: &str, name: &str, rv: &str) -> String {
        let pod = format!("{ns}/{name}");
        let l = self.wait_line(|l| {
            l["fields"]["pod"] == pod.as_str()
                && l["fields"]["resource_version"] == rv
                && l["fields"]["decision"].is_string()
        });
        l["fields"]["decision"].as_str().unwrap().to_string()
    }

    fn get(&self, addr: &str, path: &str) -> (u16, String) {
        http_get(addr, path).unwrap_or_else(|e| panic!("GET {path} at {addr}: {e}"))
    }

    /// Metric samples by their full text (name with labels) → value.
    fn metrics(&self) -> BTreeMap<String, f64> {
        let (code, body) = self.get(&self.metrics, "/metrics");
        assert_eq!(code, 200);
        parse_metrics(&body)
    }
}

fn msg(l: &Value) -> &str {
    l["fields"]["message"].as_str().unwrap_or_default()
}

async fn namespace(client: &Client, test: &str) -> String {
    let ns = fresh_namespace(client, test).await;
    // Pods need the namespace's "default" ServiceAccount, which the controller-manager creates.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let end = Instant::now() + LONG;
    while sas.get_opt("default").await.unwrap().is_none() {
        assert!(Instant::now() < end, "no default ServiceAccount in {ns}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ns
}

fn container(name: &str, env: &[(&str, &str)], extra: Value) -> Value {
    let mut c = json!({"name": name, "image": format!("example/{name}:1")});
    if !env.is_empty() {
        c["env"] = env
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect();
    }
    if let Value::Object(m) = extra {
        for (k, v) in m {
            c[k] = v;
        }
    }
    c
}

fn sidecar(name: &str) -> Value {
    container(name, &[(MARK, "true")], json!({}))
}

async fn create_pod(
    client: &Client,
    ns: &str,
    name: &str,
    policy: &str,
    containers: Vec<Value>,
    meta: Value,
) -> K8sPod {
    let mut metadata = json!({"name": name});
    if let Value::Object(m) = meta {
        for (k, v) in m {
            metadata[k] = v;
        }
    }
    let pod: K8sPod = serde_json::from_value(json!({
        "metadata": metadata,
        // Bound to a node that does not exist: no scheduler or kubelet (such as the real node
        // of scripts/e2e-cluster.sh) ever touches it; the test is the kubelet.
        "spec": {"restartPolicy": policy, "automountServiceAccountToken": false, "nodeName": FAKE_NODE, "containers": containers}
    }))
    .unwrap();
    Api::<K8sPod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
}

/// A Never pod with `main` and a marked sidecar `proxy`, where main has exited 0 and proxy
/// still runs: a pod the controller must act on. Returns its resourceVersion.
async fn main_done_pod(client: &Client, ns: &str, name: &str) -> String {
    create_pod(
        client,
        ns,
        name,
        "Never",
        vec![container("main", &[], json!({})), sidecar("proxy")],
        json!({}),
    )
    .await;
    set_status(
        client,
        ns,
        name,
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await
}

fn state(s: &str) -> Value {
    match s {
        "running" => json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}),
        "waiting" => json!({"waiting": {"reason": "ContainerCreating"}}),
        "crashloop" => {
            json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}})
        }
        code => {
            json!({"terminated": {"exitCode": code.parse::<i32>().unwrap(), "reason": "Completed", "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}})
        }
    }
}

/// Plays the kubelet: writes the pod's phase and container states (`STATE` or
/// `STATE@IMAGE` when the container ran another image than the spec's, as an old container
/// does after an image change); returns the new resourceVersion.
async fn set_status(
    client: &Client,
    ns: &str,
    name: &str,
    phase: &str,
    states: &[(&str, &str)],
) -> String {
    let api = Api::<K8sPod>::namespaced(client.clone(), ns);
    let pod = api.get(name).await.unwrap();
    let spec = pod.spec.unwrap();
    let statuses: Vec<Value> = states
        .iter()
        .map(|(c, s)| {
            let (s, image) = match s.split_once('@') {
                Some((s, image)) => (s, image.to_string()),
                None => (*s, spec.containers.iter().find(|x| x.name == *c).and_then(|x| x.image.clone()).unwrap()),
            };
            json!({"name": c, "image": image, "imageID": "", "ready": s == "running", "restartCount": 0, "state": state(s)})
        })
        .collect();
    let p = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase, "containerStatuses": statuses}})),
        )
        .await
        .unwrap();
    p.metadata.resource_version.unwrap()
}

async fn get_pod(client: &Client, ns: &str, name: &str) -> K8sPod {
    Api::<K8sPod>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
}

fn image_of(pod: &K8sPod, container: &str) -> String {
    pod.spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == container)
        .unwrap()
        .image
        .clone()
        .unwrap()
}

async fn wait_image(client: &Client, ns: &str, name: &str, container: &str, want: &str) -> K8sPod {
    let end = Instant::now() + LONG;
    loop {
        let p = get_pod(client, ns, name).await;
        if image_of(&p, container) == want {
            return p;
        }
        assert!(
            Instant::now() < end,
            "{ns}/{name}: {container} never became {want}; is {}",
            image_of(&p, container)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn events(client: &Client, ns: &str, pod: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
        .collect()
}

async fn wait_event(client: &Client, ns: &str, pod: &str, reason: &str) -> Event {
    let end = Instant::now() + LONG;
    loop {
        if let Some(e) = events(client, ns, pod)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
        {
            return e;
        }
        assert!(
            Instant::now() < end,
            "{ns}/{pod}: no {reason} event; have {:?}",
            events(client, ns, pod)
                .await
                .iter()
                .map(|e| e.reason.clone())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

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
        &["--namespace", &ns, "--quick-exit-image", Q],
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

#[tokio::test(flavor = "current_thread")]
async fn without_the_role_the_error_names_the_missing_permission() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, "ctl-norbac").await;
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nobody"}})).unwrap(),
        )
        .await
        .unwrap();
    let scratch = Scratch::new("ctl-norbac");
    let kc = service_account_kubeconfig(&ns, "nobody", &scratch.path("nobody.kubeconfig"));
    let ctl = Ctl::start(&scratch, "controller", &kc, &["--namespace", &ns], &[]);
    let l =
        ctl.wait_line(|l| msg(l).starts_with("watching failed") && l["fields"]["watch"] == "pods");
    let m = msg(&l);
    assert!(
        m.contains("forbidden") && m.contains("pods list and watch"),
        "{m}"
    );
    assert_eq!(
        ctl.get(&ctl.health, "/readyz").0,
        503,
        "not ready without a filled cache"
    );
    // SIGTERM before any cache was filled still ends the process at once (kube-runtime's
    // graceful shutdown alone would wait for the store forever).
    let mut ctl = ctl;
    let t = Instant::now();
    ctl.c.signal(15);
    let st = ctl.c.wait_status(LONG).expect("did not stop on SIGTERM");
    assert_eq!(code_of(st), 0);
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t.elapsed()
    );
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

#[test]
fn bad_flags_are_named() {
    for (args, needle) in [
        (
            vec!["--leader-elect-lease-duration", "1.5s"],
            "--leader-elect-lease-duration",
        ),
        (
            vec!["--leader-elect-renew-grace", "20s"],
            "shorter than --leader-elect-lease-duration",
        ),
        (vec!["--log-format", "xml"], "--log-format"),
        (vec!["--metrics-addr", "nowhere"], "--metrics-addr"),
        (vec!["--concurrency", "0"], "--concurrency"),
    ] {
        let out = Command::new(KUBECTL_SEXTON)
            .arg("controller")
            .args(&args)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Production shape: two replicas with --leader-elect, cluster-wide. Only the holder of
/// the Lease acts; when it is killed, the other takes over within the lease duration.
#[tokio::test(flavor = "current_thread")]
async fn leader_election_one_acts_and_the_other_takes_over() {
    let _scope = SCOPE.write().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, "ctl-leader").await;
    let scratch = Scratch::new("ctl-leader");
    let kc = controller_kubeconfig();
    let args = |id: &'static str| -> Vec<&'static str> {
        vec![
            "--leader-elect",
            "--leader-elect-namespace",
            "sexton-system",
            "--leader-elect-lease-duration",
            "4s",
            "--leader-elect-renew-grace",
            "2s",
            "--quick-exit-image",
            Q,
            "--identity",
            id,
        ]
    };
    let a = Ctl::start(&scratch, "a", kc, &args("replica-a"), &[]);
    a.wait_line(|l| msg(l).contains("acquired the lease"));
    let b = Ctl::start(&scratch, "b", kc, &args("replica-b"), &[]);
    b.wait_line(|l| msg(l).contains("waiting for the lease"));
    assert_eq!(b.get(&b.health, "/readyz").0, 200, "a standby is ready");
    assert_eq!(b.metrics()["sexton_controller_leader"], 0.0);

    let rv = main_done_pod(&client, &ns, "one").await;
    assert_eq!(a.wait_decision(&ns, "one", &rv), "swap");
    wait_image(&client, &ns, "one", "proxy", Q).await;
    let e = wait_event(&client, &ns, "one", "SidecarSwapped").await;
    assert_eq!(e.reporting_instance.as_deref(), Some("replica-a"));
    assert!(
        b.find(|l| l["fields"]["decision"].is_string()).is_none(),
        "the standby reconciled:\n{}",
        b.c.logs()
    );

    // Kill the leader without letting it release the lease.
    let killed = Instant::now();
    drop(a);
    b.wait_line(|l| msg(l).contains("acquired the lease"));
    let takeover = killed.elapsed();
    eprintln!("takeover after SIGKILL of the leader: {takeover:?} (lease 4s)");
    // The lease expires at most 4s after the kill; the standby then waits 0.1-1s (random) before taking it.
    assert!(
        takeover < Duration::from_secs(6),
        "takeover took {takeover:?}"
    );
    main_done_pod(&client, &ns, "two").await;
    wait_image(&client, &ns, "two", "proxy", Q).await;
    assert_eq!(
        wait_event(&client, &ns, "two", "SidecarSwapped")
            .await
            .reporting_instance
            .as_deref(),
        Some("replica-b")
    );

    // SIGTERM: graceful stop releases the lease, so a successor does not wait for expiry.
    let mut b = b;
    b.c.signal(15);
    let st =
        b.c.wait_status(LONG)
            .expect("controller did not stop on SIGTERM");
    assert_eq!(code_of(st), 0, "{}", b.c.logs());
    assert!(
        b.find(|l| msg(l) == "leader election: lease released")
            .is_some(),
        "{}",
        b.c.logs()
    );
    let c = Ctl::start(&scratch, "c", kc, &args("replica-c"), &[]);
    let started = Instant::now();
    c.wait_line(|l| msg(l).contains("acquired the lease"));
    eprintln!("takeover after a released lease: {:?}", started.elapsed());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "released lease not taken at once"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn deploy_manifests_apply_with_server_dry_run() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    controller_kubeconfig(); // the namespace exists (a server dry run cannot create into a dry-run namespace)
    // Server-side, like every other apply of these files in the tests (a client-side apply
    // over server-side-applied objects warns about the missing last-applied annotation).
    let out = kubectl(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-k",
        &format!("{}/deploy", root()),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // The Deployment passes the namespace's `restricted` Pod Security level and uses no
    // deprecated API. (kubectl's own warnings about apply bookkeeping are not ours.)
    assert!(
        !err.contains("PodSecurity") && !err.contains("deprecated"),
        "Pod Security or deprecation warnings: {err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for kind in [
        "deployment.apps/sexton-controller",
        "clusterrole.rbac.authorization.k8s.io/sexton-controller",
        "role.rbac.authorization.k8s.io/sexton-controller-leader-election",
    ] {
        assert!(stdout.contains(kind), "{kind} missing: {stdout}");
    }
}

// ---------------------------------------------------------------------------------------
// EphemeralJob

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

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
