//! The harness of the webhook's tests (`webhook.rs`, `webhook_vendors.rs`): sexton's webhook
//! as the real binary with the token of the ServiceAccount of `deploy/rbac-webhook.yaml` and
//! exactly that RBAC, registered by URL on loopback in a MutatingWebhookConfiguration named
//! as `deploy/webhook.yaml`'s (`sexton-webhook`: its place in the API server's order is the
//! real one), its TLS self-managed; once per test process, which owns the configuration's
//! name for its life (`WATCHDOG`).
// (each test file uses a part of it)
#![allow(dead_code)]

use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use serde_json::{Value, json};
use testbed::*;

pub const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
pub const LONG: Duration = Duration::from_secs(60);

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn apply(manifest: &Value) -> Output {
    let s = Scratch::new("webhook-apply");
    let f = s.path("m.json");
    std::fs::write(&f, manifest.to_string()).unwrap();
    kubectl(&["apply", "-f", f.to_str().unwrap()])
}

/// The namespaces of e2e/run.sh and of the benchmarks on the real node (`bench/*.sh`), all
/// labelled `sexton-e2e=true`, are not the tests': they share this API server, and a pod of
/// theirs in a namespace labelled `sexton.dev/inject=enabled` must not be injected by the
/// webhook of a test process running meanwhile. (It happened: a safety-net pod of
/// bench/completion/run.sh, meant to be admitted unchanged, was made a native sidecar by the
/// tests' webhook, BENCHMARKS.md "Safety net: main exit to pod Succeeded".) e2e's own
/// configuration requires that label, so it never sees the tests' pods either.
pub fn not_e2e() -> Value {
    json!({"key": "sexton-e2e", "operator": "DoesNotExist"})
}

/// A MutatingWebhookConfiguration named `name` calling `base` (`https://127.0.0.1:PORT`),
/// as deploy/webhook.yaml's, with `ca` (PEM) or none yet.
pub fn configuration(
    name: &str,
    base: &str,
    ca: Option<&str>,
    selector_key: Option<&str>,
) -> Value {
    let hook = |hook: &str, path: &str, selector: Value| {
        let mut client = json!({"url": format!("{base}{path}")});
        if let Some(ca) = ca {
            client["caBundle"] = json!(base64(ca.as_bytes()));
        }
        json!({
            "name": hook,
            "admissionReviewVersions": ["v1"],
            "clientConfig": client,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchExpressions": selector},
            "failurePolicy": "Ignore",
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": 5,
            // sexton's is called again after later webhooks; others, like most webhooks
            // in the wild, are not (the default): see the README on reinvocation
            "reinvocationPolicy": if selector_key.is_none() { "IfNeeded" } else { "Never" },
            "matchPolicy": "Equivalent",
        })
    };
    let not_system = json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "sexton-system"]});
    let webhooks = match selector_key {
        // sexton's: the two webhooks of deploy/webhook.yaml, and not e2e's namespaces
        None => json!([
            hook(
                "inject.sexton.dev",
                "/mutate",
                json!([{"key": "sexton.dev/inject", "operator": "In", "values": ["enabled"]}, not_system, not_e2e()])
            ),
            hook(
                "annotated.inject.sexton.dev",
                "/mutate/annotated",
                json!([{"key": "sexton.dev/inject", "operator": "NotIn", "values": ["enabled"]}, not_system, not_e2e()])
            ),
            requester_hook(base, ca),
        ]),
        // another webhook, on namespaces labelled `key=true`
        Some(key) => json!([hook(
            &format!("{name}.test.sexton.dev"),
            "/mutate",
            json!([{"key": key, "operator": "In", "values": ["true"]}])
        )]),
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    })
}

/// deploy/webhook.yaml's third webhook (EphemeralJob CREATE), here only in namespaces
/// labelled `sexton.dev/inject=enabled`: other test processes' jobs are stamped by hand.
pub fn requester_hook(base: &str, ca: Option<&str>) -> Value {
    let mut client = json!({"url": format!("{base}/mutate/ephemeraljobs")});
    if let Some(ca) = ca {
        client["caBundle"] = json!(base64(ca.as_bytes()));
    }
    json!({
        "name": "requester.sexton.dev",
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "rules": [{"operations": ["CREATE"], "apiGroups": ["sexton.dev"], "apiVersions": ["*"], "resources": ["ephemeraljobs"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchLabels": {"sexton.dev/inject": "enabled"}, "matchExpressions": [not_e2e()]},
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "timeoutSeconds": 5,
        "reinvocationPolicy": "Never",
        "matchPolicy": "Equivalent",
    })
}

pub fn base64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// sexton's webhook, once per test process: RBAC applied, configuration created, process
/// started, and the API server seen calling it.
pub struct Webhook {
    pub process: Process,
    /// The FIFO the watchdog reads, open here read-write (an open that never blocks, even
    /// if the watchdog died before reading): closed when this test process exits, however
    /// it exits, which stops the webhook and removes its configuration.
    _lifeline: std::fs::File,
    _scratch: Scratch,
}

/// The watchdog: owns the configuration named `sexton-webhook` (the name deploy/'s RBAC
/// lets the webhook patch) for the life of one test process. A test process that has
/// ended still owns it while its webhook drains (seconds): it is removed only after that,
/// and the next test process, which would otherwise create it meanwhile and see it
/// deleted under it, waits for the lock (in the test control plane's state directory)
/// that the watchdog holds from before it creates the configuration until it has
/// deleted it.
pub const WATCHDOG: &str = r#"lock=$1 lifeline=$2 config=$3; shift 3
exec 9>"$lock"
flock -w 120 9 || { echo "watchdog: $lock held by another test process for 120 s" >&2; exit 1; }
kubectl apply -f "$config" >/dev/null || exit 1
: > "$lifeline.owned"
"$@" 9>&- & pid=$!
cat "$lifeline" >/dev/null; kill "$pid"; wait "$pid"
kubectl delete mutatingwebhookconfiguration sexton-webhook --ignore-not-found >/dev/null 2>&1"#;

pub fn webhook() -> &'static Webhook {
    static W: OnceLock<Webhook> = OnceLock::new();
    W.get_or_init(|| {
        testenv();
        for f in ["namespace.yaml", "rbac-webhook.yaml"] {
            let out = kubectl(&["apply", "-f", &format!("{ROOT}/deploy/{f}")]);
            assert!(out.status.success(), "{f}: {}", text(&out.stderr));
        }
        let port = free_port();
        let scratch = Scratch::new("webhook");
        let config = scratch.path("configuration.json");
        let manifest = configuration(
            "sexton-webhook",
            &format!("https://127.0.0.1:{port}"),
            None,
            None,
        );
        std::fs::write(&config, manifest.to_string()).unwrap();
        let kc = service_account_kubeconfig(
            "sexton-system",
            "sexton-webhook",
            &scratch.path("sa.kubeconfig"),
        );
        let fifo = scratch.fifo("lifeline");
        let lifeline = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", WATCHDOG, "sh"])
            .arg(testenv().state.join("webhook-test.lock"))
            .arg(&fifo)
            .arg(&config)
            .arg(KUBECTL_SEXTON);
        cmd.args([
            "webhook",
            "--self-managed-tls",
            "--tls-san",
            "127.0.0.1",
            "--namespace",
            "sexton-system",
        ])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        // (the test registry serves plain HTTP: the vendors' tests wrap its images)
        .args(["--insecure-registry", &registry().anonymous])
        .args([
            "--sexton-image",
            "sexton:test",
            "--log-format",
            "json",
            "--log-level",
            "debug",
            "--kubeconfig",
        ])
        .arg(&kc)
        // (the webhook reads --kubeconfig; the watchdog's kubectl, the admin's)
        .env("KUBECONFIG", &testenv().kubeconfig);
        let mut process = scratch.spawn_host("webhook", cmd);
        let owned = scratch.path("lifeline.owned");
        assert!(
            wait_until(Duration::from_secs(150), || owned.exists()
                || !process.is_running()),
            "the watchdog never took the configuration:\n{}",
            process.logs()
        );
        assert!(owned.exists(), "the watchdog failed:\n{}", process.logs());
        let w = Webhook {
            process,
            _lifeline: lifeline,
            _scratch: scratch,
        };
        wait_until_called(&w);
        w
    })
}

/// Until the API server trusts the new caBundle and calls the webhook (a dry run in a
/// labelled namespace comes back injected).
pub fn wait_until_called(w: &Webhook) {
    let ns = labelled_namespace("wh-ready", &["sexton.dev/inject=enabled"]);
    let ok = wait_until(LONG, || {
        let out = dry_run(&ns, &pod("probe", json!({}), false));
        text(&out.stdout).contains("sexton.dev/injected")
    });
    assert!(
        ok,
        "the API server never called the webhook:\n{}",
        w.process.logs()
    );
}

/// A Pod with a main and a marked sidecar (the test plays no kubelet: it stays Pending).
pub fn pod(name: &str, annotations: Value, sidecar_restart_policy_never: bool) -> Value {
    let mut sidecar = json!({"name": "proxy", "image": "proxy:1", "command": ["proxy"],
        "env": [{"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}]});
    if sidecar_restart_policy_never {
        sidecar["restartPolicy"] = json!("Never");
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "nodeName": "sexton-test-no-such-node",
            "containers": [{"name": "main", "image": "app:1", "command": ["run"]}, sidecar],
        }
    })
}

/// The pod with every container meeting the restricted Pod Security Standard.
pub fn restricted(mut p: Value) -> Value {
    for c in p["spec"]["containers"].as_array_mut().unwrap() {
        c["securityContext"] = json!({"allowPrivilegeEscalation": false, "runAsNonRoot": true, "runAsUser": 1000,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}});
    }
    p
}

pub fn dry_run(ns: &str, manifest: &Value) -> Output {
    let s = Scratch::new("webhook-dry-run");
    let f = s.path("pod.json");
    std::fs::write(&f, manifest.to_string()).unwrap();
    kubectl(&[
        "create",
        "--dry-run=server",
        "-o",
        "json",
        "-n",
        ns,
        "-f",
        f.to_str().unwrap(),
    ])
}

pub fn create(ns: &str, manifest: &Value) -> Output {
    let s = Scratch::new("webhook-create");
    let f = s.path("pod.json");
    std::fs::write(&f, manifest.to_string()).unwrap();
    kubectl(&["create", "-n", ns, "-f", f.to_str().unwrap()])
}

pub async fn stored(client: &Client, ns: &str, name: &str) -> Value {
    serde_json::to_value(
        Api::<Pod>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .unwrap(),
    )
    .unwrap()
}

pub fn injected(p: &Value) -> bool {
    p["metadata"]["annotations"]["sexton.dev/injected"].is_string()
}
