//! The harness of the controllers' tests (`controller.rs`, `terminator.rs`, `ejob.rs`, the
//! safety net's in `net.rs`): `kubectl-sexton controller` against the real test API server
//! (scripts/testenv.sh), as the real release binary run as a process with the token of the
//! ServiceAccount from `deploy/rbac.yaml`, bound to exactly the ClusterRole and Role in that
//! file; and pods the test plays the kubelet for, by writing their status.
//!
//! Every test but the leader-election one watches its own namespace only (`--namespace`),
//! so tests can run in parallel; the leader-election test runs cluster-wide as deployed and
//! excludes the others of its file (`SCOPE`), and `cargo test` runs one test file at a time.
// (each test file uses a part of it)
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod as K8sPod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testbed::*;

pub mod net;

/// The binary under test.
pub const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
pub const Q: &str = "sexton-quick-exit:test";
pub const MARK: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT";
pub const MARK_IMAGE: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE";
pub const LONG: Duration = Duration::from_secs(30);
pub const FAKE_NODE: &str = "sexton-test-no-such-node";

/// Namespaced tests share (read); the cluster-wide leader-election test excludes them.
pub static SCOPE: RwLock<()> = RwLock::new(());

pub fn root() -> &'static str {
    testbed::ROOT
}

/// Applies deploy/namespace.yaml, deploy/rbac.yaml and the CRD for real (idempotent) and
/// writes a kubeconfig holding a token of the controller's ServiceAccount.
pub fn controller_kubeconfig() -> &'static std::path::Path {
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
pub struct Ctl {
    pub c: Process,
    pub metrics: String,
    pub health: String,
}

impl Ctl {
    pub fn start(
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

    pub fn lines(&self) -> Vec<Value> {
        self.c
            .logs()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn find(&self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        self.lines().into_iter().find(|l| pred(l))
    }

    pub fn wait_line(&self, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_line_within(LONG, pred)
    }

    pub fn wait_line_within(&self, limit: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let mut found = None;
        wait_until(limit, || {
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
    pub fn wait_decision(&self, ns: &str, name: &str, rv: &str) -> String {
        self.wait_decision_within(LONG, ns, name, rv)
    }

    pub fn wait_decision_within(&self, limit: Duration, ns: &str, name: &str, rv: &str) -> String {
        let pod = format!("{ns}/{name}");
        let l = self.wait_line_within(limit, |l| {
            l["fields"]["pod"] == pod.as_str()
                && l["fields"]["resource_version"] == rv
                && l["fields"]["decision"].is_string()
        });
        l["fields"]["decision"].as_str().unwrap().to_string()
    }

    pub fn get(&self, addr: &str, path: &str) -> (u16, String) {
        http_get(addr, path).unwrap_or_else(|e| panic!("GET {path} at {addr}: {e}"))
    }

    /// Metric samples by their full text (name with labels) → value.
    pub fn metrics(&self) -> BTreeMap<String, f64> {
        let (code, body) = self.get(&self.metrics, "/metrics");
        assert_eq!(code, 200);
        parse_metrics(&body)
    }
}

pub fn msg(l: &Value) -> &str {
    l["fields"]["message"].as_str().unwrap_or_default()
}

pub async fn namespace(client: &Client, test: &str) -> String {
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

pub fn container(name: &str, env: &[(&str, &str)], extra: Value) -> Value {
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

pub fn sidecar(name: &str) -> Value {
    container(name, &[(MARK, "true")], json!({}))
}

pub async fn create_pod(
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
pub async fn main_done_pod(client: &Client, ns: &str, name: &str) -> String {
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

pub fn state(s: &str) -> Value {
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
pub async fn set_status(
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

pub async fn get_pod(client: &Client, ns: &str, name: &str) -> K8sPod {
    Api::<K8sPod>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
}

pub fn image_of(pod: &K8sPod, container: &str) -> String {
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

pub async fn wait_image(
    client: &Client,
    ns: &str,
    name: &str,
    container: &str,
    want: &str,
) -> K8sPod {
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

pub async fn events(client: &Client, ns: &str, pod: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
        .collect()
}

pub async fn wait_event(client: &Client, ns: &str, pod: &str, reason: &str) -> Event {
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
