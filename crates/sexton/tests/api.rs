//! Against a real kube-apiserver (scripts/testenv.sh): the test control plane itself, and
//! birth dependencies through the API. sexton runs as a real process, PID 1 of its own PID
//! and mount namespaces, with a ServiceAccount token mounted at the standard in-cluster
//! path and KUBERNETES_SERVICE_HOST/PORT pointing at the test API server: exactly what it
//! sees in a pod. The test plays the kubelet by writing the pod's status.
// The serial guard is held for a whole test on purpose; each test has its own runtime thread.
#![allow(clippy::await_holding_lock)]

mod common;

use std::fs;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod as K8sPod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use testbed::*;

/// One API server for all tests here; the restart test must not overlap the others.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

async fn create<K>(client: &Client, ns: &str, v: serde_json::Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let obj: K = serde_json::from_value(v).unwrap();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap()
}

/// A pod object (never scheduled: no kubelet), a ServiceAccount, and optionally the Role
/// granting get/list/watch on pods, bound to it. Returns the directory holding the
/// ServiceAccount's token, the CA and the namespace, as mounted in a pod.
async fn setup(client: &Client, ns: &str, pod: &Pod, with_role: bool) -> std::path::PathBuf {
    create::<ServiceAccount>(client, ns, json!({"metadata": {"name": "job"}})).await;
    if with_role {
        create::<Role>(client, ns, json!({
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
        })).await;
        create::<RoleBinding>(client, ns, json!({
            "metadata": {"name": "job-pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "job", "namespace": ns}]
        })).await;
    }
    create::<K8sPod>(
        client,
        ns,
        json!({
            "metadata": {"name": "job-1"},
            // bound to a node that does not exist: nothing but the test plays its kubelet
            "spec": {"serviceAccountName": "job", "restartPolicy": "Never", "nodeName": "sexton-test-no-such-node", "containers": [
                {"name": "main", "image": "example/main"},
                {"name": "proxy", "image": "example/proxy"}
            ]}
        }),
    )
    .await;
    let tr: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let tr = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request("job", &PostParams::default(), &tr)
        .await
        .unwrap();
    let dir = pod.path("serviceaccount");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("token"), tr.status.unwrap().token).unwrap();
    fs::copy(&testenv().ca, dir.join("ca.crt")).unwrap();
    fs::write(dir.join("namespace"), ns).unwrap();
    dir
}

/// One birth-through-the-API scenario: a fresh namespace holding the pod object `job-1`
/// (containers `main` and `proxy`) and a ServiceAccount, with or without the Role, whose
/// token is mounted as in a pod. Holds the serial lock for the test's duration.
struct Scenario {
    _serial: std::sync::MutexGuard<'static, ()>,
    client: Client,
    ns: String,
    pod: Pod,
    sa: std::path::PathBuf,
}

impl Scenario {
    async fn new(test: &str, with_role: bool) -> Scenario {
        let serial = serial();
        let client = admin_client().await;
        let ns = fresh_namespace(&client, test).await;
        let pod = Pod::new(&format!("api{test}"));
        let sa = setup(&client, &ns, &pod, with_role).await;
        Scenario {
            _serial: serial,
            client,
            ns,
            pod,
            sa,
        }
    }

    /// `main` waiting up to `timeout` for `proxy` to be ready according to the API; its
    /// child marks `$POD/ran`. sexton is PID 1 of new PID and mount namespaces, with the
    /// token at the in-cluster path.
    fn waiting_main(&self, timeout: &str) -> Container {
        self.waiting_main_with(timeout, &[])
    }

    /// `waiting_main` with some environment variables set differently.
    fn waiting_main_with(&self, timeout: &str, env: &[(&str, &str)]) -> Container {
        fs::create_dir_all("/run/secrets").unwrap(); // mount point; the tmpfs is private to the namespace
        let script = r#"mount -t tmpfs tmpfs /run/secrets && mkdir -p /run/secrets/kubernetes.io/serviceaccount && cp "$SA_DIR/token" "$SA_DIR/ca.crt" "$SA_DIR/namespace" /run/secrets/kubernetes.io/serviceaccount/ && exec "$SEXTON" -- "$@""#;
        let mut c = Command::new("unshare");
        c.args(["--mount", "--pid", "--fork", "--mount-proc", "--kill-child"])
            .args(["sh", "-c", script, "sh", "sh", "-c", "touch \"$POD/ran\""]);
        c.env_clear()
            .env(
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            )
            .env("SEXTON", sexton_bin())
            .env("SA_DIR", &self.sa)
            .env("POD", &self.pod.root)
            .env("KUBERNETES_SERVICE_HOST", &testenv().host)
            .env("KUBERNETES_SERVICE_PORT", testenv().port.to_string())
            .env("KUBEXIT_NAME", "main")
            .env("KUBEXIT_GRAVEYARD", &self.pod.graveyard)
            .env("KUBEXIT_POD_NAME", "job-1")
            .env("KUBEXIT_NAMESPACE", &self.ns)
            .env("KUBEXIT_BIRTH_DEPS", "proxy")
            .env("KUBEXIT_BIRTH_TIMEOUT", timeout)
            .env("KUBEXIT_LOG_LEVEL", "debug");
        for (k, v) in env {
            c.env(k, v);
        }
        self.pod.spawn("main", c)
    }

    /// Plays the kubelet for `proxy` (`main` is never ready: it has not started).
    async fn proxy_ready(&self, ready: bool) {
        set_ready(&self.client, &self.ns, &[("main", false), ("proxy", ready)]).await;
    }
}

/// Plays the kubelet: writes the containers' readiness into the pod's status.
async fn set_ready(client: &Client, ns: &str, ready: &[(&str, bool)]) {
    let statuses: Vec<_> = ready
        .iter()
        .map(|(name, r)| json!({"name": name, "ready": r, "restartCount": 0, "image": format!("example/{name}"), "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}))
        .collect();
    let patch = json!({"status": {"phase": "Running", "containerStatuses": statuses}});
    // the API server may just be restarting: retry for a while
    let api = Api::<K8sPod>::namespaced(client.clone(), ns);
    let end = Instant::now() + TIMEOUT;
    loop {
        match api
            .patch_status("job-1", &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(e) if Instant::now() < end => {
                eprintln!("patch status: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("patch status: {e}"),
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn testenv_smoke() {
    let _s = serial();
    let client = admin_client().await;
    let ns = fresh_namespace(&client, "smoke").await;
    let out = kubectl(&["get", "--raw", "/readyz"]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout) == "ok",
        "{out:?}"
    );
    let out = kubectl(&["get", "namespace", &ns, "-o", "name"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("namespace/{ns}")
    );
    // RBAC is on: an unbound ServiceAccount may not list pods
    let out = kubectl(&[
        "auth",
        "can-i",
        "list",
        "pods",
        "-n",
        &ns,
        "--as",
        &format!("system:serviceaccount:{ns}:nobody"),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
    let out = kubectl(&["version", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1.37."),
        "{v}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn child_starts_only_after_the_dependency_is_ready_in_the_api() {
    let s = Scenario::new("birth", true).await;
    let mut main = s.waiting_main("60s");
    main.wait_log("watching the pod's container readiness through the Kubernetes API");
    s.proxy_ready(false).await;
    main.wait_log("ready containers according to the API ready=[]");
    assert!(
        main.is_running() && !s.pod.path("ran").exists(),
        "started before proxy was ready"
    );
    s.proxy_ready(true).await;
    assert_eq!(main.wait(), 0, "{}", main.logs());
    assert!(s.pod.path("ran").exists());
}

#[tokio::test(flavor = "current_thread")]
async fn birth_timeout_names_the_dependency() {
    let s = Scenario::new("timeout", true).await;
    s.proxy_ready(false).await;
    let mut main = s.waiting_main("2s");
    assert_eq!(main.wait(), 1);
    assert!(
        main.logs()
            .contains("birth dependencies not ready after 2s: proxy"),
        "{}",
        main.logs()
    );
    assert!(!s.pod.path("ran").exists());
}

#[tokio::test(flavor = "current_thread")]
async fn unreachable_api_is_reported_once_with_its_address() {
    let s = Scenario::new("unreachable", true).await;
    // a port nobody listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut main = s.waiting_main_with(
        "4s",
        &[
            ("KUBERNETES_SERVICE_PORT", &port),
            ("KUBEXIT_LOG_LEVEL", "info"),
        ],
    );
    assert_eq!(main.wait(), 1);
    let logs = main.logs();
    let address = format!("127.0.0.1:{port}");
    let mentions: Vec<&str> = logs.lines().filter(|l| l.contains(&address)).collect();
    assert!(
        !mentions.is_empty() && mentions[0].contains("onnection refused"),
        "the first report names the address and the cause:\n{logs}"
    );
    // four seconds of retries every 100 ms..2 s: one report, not one per retry
    assert!(
        logs.lines().count() <= 6,
        "{} lines:\n{logs}",
        logs.lines().count()
    );
    let last = logs
        .lines()
        .rev()
        .find(|l| l.contains("not ready after"))
        .unwrap_or("");
    assert!(
        last.contains("never reached") && last.contains(&address),
        "the final message says the API was never reached: {last}"
    );
    assert!(!s.pod.path("ran").exists());
}

/// Plays the kubelet: `proxy` terminated with `code` (the pod's restartPolicy is Never).
async fn proxy_terminated(s: &Scenario, code: i32) {
    let patch = json!({"status": {"phase": "Running", "containerStatuses": [
        {"name": "main", "ready": false, "restartCount": 0, "image": "example/main", "imageID": "", "state": {"waiting": {"reason": "ContainerCreating"}}},
        {"name": "proxy", "ready": false, "restartCount": 0, "image": "example/proxy", "imageID": "",
         "state": {"terminated": {"exitCode": code, "reason": "Error", "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}}}
    ]}});
    Api::<K8sPod>::namespaced(s.client.clone(), &s.ns)
        .patch_status("job-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn terminated_birth_dependency_ends_the_wait_at_once() {
    let s = Scenario::new("terminated", true).await;
    let started = Instant::now();
    let mut main = s.waiting_main("60s");
    main.wait_log("watching the pod's container readiness through the Kubernetes API");
    proxy_terminated(&s, 127).await;
    assert_eq!(main.wait(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "ends at once, not at the birth timeout"
    );
    let logs = main.logs();
    assert!(
        logs.contains(r#"birth dependency "proxy" terminated (exit code 127) before it was ready"#),
        "{logs}"
    );
    assert_eq!(
        s.pod.tombstone("main").unwrap()["Reason"],
        "birth-dependency-died"
    );
    assert!(!s.pod.path("ran").exists());
}

#[tokio::test(flavor = "current_thread")]
async fn birth_dependency_that_is_not_a_container_of_the_pod_is_an_error_at_once() {
    let s = Scenario::new("nosuch", true).await;
    let started = Instant::now();
    let mut main = s.waiting_main_with("60s", &[("KUBEXIT_BIRTH_DEPS", "proxi")]);
    assert_eq!(main.wait(), 1);
    assert!(started.elapsed() < Duration::from_secs(10));
    let logs = main.logs();
    assert!(
        logs.contains(r#"birth dependency "proxi" is not a container of this pod (its containers: main, proxy)"#),
        "{logs}"
    );
    assert_eq!(
        s.pod.tombstone("main").unwrap()["Reason"],
        "birth-dependency-unknown"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn forbidden_without_the_role_names_the_missing_rule() {
    let s = Scenario::new("forbidden", false).await;
    let started = Instant::now();
    let mut main = s.waiting_main("60s");
    assert_eq!(main.wait(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "fails fast, not at the birth timeout"
    );
    let logs = main.logs();
    assert!(logs.contains("HTTP 403"), "{logs}");
    assert!(
        logs.contains(r#"resources: ["pods"], verbs: ["get", "list", "watch"]"#),
        "{logs}"
    );
    assert!(!s.pod.path("ran").exists());
    assert_eq!(
        s.pod.tombstone("main").unwrap()["Reason"],
        "birth-api-error"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn survives_an_api_server_restart_during_the_wait() {
    let mut s = Scenario::new("restart", true).await;
    s.proxy_ready(false).await;
    let mut main = s.waiting_main("90s");
    main.wait_log("ready containers according to the API ready=[]");
    testenv_cmd("restart-apiserver");
    assert!(
        main.is_running(),
        "an API server restart is not a reason to give up"
    );
    s.client = admin_client().await;
    s.proxy_ready(true).await;
    assert_eq!(main.wait(), 0, "{}", main.logs());
    assert!(s.pod.path("ran").exists());
}

#[test]
fn pod_name_without_namespace_is_a_config_error() {
    let out = Command::new(sexton_bin())
        .env("KUBEXIT_NAME", "main")
        .env("KUBEXIT_POD_NAME", "job-1")
        .env("KUBEXIT_BIRTH_DEPS", "proxy")
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("KUBEXIT_NAMESPACE: required when KUBEXIT_POD_NAME=\"job-1\"")
    );
}

#[test]
fn testenv_up_twice_then_down_leaves_no_process_behind() {
    testenv(); // (built and running: this test must not build a control plane)
    // a second control plane on other ports and state, so the shared one is untouched
    let state = std::env::temp_dir().join(format!("sexton-testenv-updown-{}", std::process::id()));
    let run = |verb: &str| {
        Command::new(TESTENV)
            .arg(verb)
            .env("SEXTON_TESTENV_STATE", &state)
            .env("SEXTON_API_PORT", "16543")
            .env("SEXTON_ETCD_PORT", "23890")
            .output()
            .unwrap()
    };
    let ours = || -> Vec<i32> {
        processes()
            .into_iter()
            .filter(|p| {
                fs::read_to_string(format!("/proc/{}/cmdline", p.0))
                    .is_ok_and(|c| c.contains(state.to_str().unwrap()))
            })
            .map(|p| p.0)
            .collect()
    };
    let up = run("up");
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    assert_eq!(
        ours().len(),
        3,
        "etcd, kube-apiserver, kube-controller-manager"
    );
    let again = run("up");
    assert!(
        again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already up"),
        "idempotent"
    );
    assert_eq!(ours().len(), 3, "no second copy started");
    let env = String::from_utf8(run("env").stdout).unwrap();
    assert_eq!(
        env.trim(),
        format!("export KUBECONFIG={}/admin.kubeconfig", state.display())
    );
    let out = Command::new("kubectl")
        .env("KUBECONFIG", state.join("admin.kubeconfig"))
        .args(["get", "--raw", "/readyz"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok");
    assert!(run("down").status.success());
    assert!(
        wait_until(TIMEOUT, || ours().is_empty()),
        "left behind: {:?}",
        ours()
    );
    assert!(!state.exists(), "state removed");
    assert!(run("down").status.success(), "down twice is fine");
}

#[tokio::test(flavor = "current_thread")]
async fn example_manifests_apply_to_the_api_server() {
    let _s = serial();
    let client = admin_client().await;
    let ns = fresh_namespace(&client, "examples").await;
    ejob_crd(); // examples/ephemeraljob.yaml needs its CRD
    for f in fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples"))
        .unwrap()
        .flatten()
    {
        let path = f.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let out = kubectl(&[
                "apply",
                "-n",
                &ns,
                "--dry-run=server",
                "-f",
                path.to_str().unwrap(),
            ]);
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// sexton's own API client (src/api/http.rs) with the scenario's service account token, as
/// `sexton` builds it from the in-cluster files.
fn sa_client(s: &Scenario) -> sexton::api::http::Client {
    use sexton::api::config::{Config, Token};
    sexton::api::http::Client::new(Config {
        host: testenv().host.clone(),
        port: testenv().port,
        prefix: String::new(),
        ca: Some(fs::read(s.sa.join("ca.crt")).unwrap()),
        token: Token::File(s.sa.join("token")),
        identity: None,
        insecure: false,
    })
    .unwrap()
}

fn pod_ref(s: &Scenario) -> sexton_core::config::PodRef {
    sexton_core::config::PodRef {
        name: "job-1".into(),
        namespace: s.ns.clone(),
    }
}

/// The watch loop with watches of 1 s: after the server has ended one (timeoutSeconds, the
/// last chunk of a chunked body), the loop resumes and still sees the dependency get ready.
#[tokio::test(flavor = "current_thread")]
async fn a_watch_the_server_ends_is_resumed() {
    use sexton::api::pod::{parse_event, watch_path};
    use sexton::events::Event;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};
    let s = Scenario::new("resume", true).await;
    let (client, pod) = (sa_client(&s), pod_ref(&s));
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let looping = {
        let (stop, pod) = (stop.clone(), pod.clone());
        std::thread::spawn(move || {
            let post = move |e: Event| {
                let _ = tx.send(e);
            };
            sexton::api::watch::watch_pod(&client, &pod, &stop, &post, 1)
        })
    };
    let next_view = || match rx.recv_timeout(TIMEOUT) {
        Ok(Event::Pod(view)) => view,
        other => panic!("expected the pod, got {other:?}"),
    };
    assert!(next_view().ready.is_empty(), "the pod as first read");
    // a clock that is an event: a watch of our own that the server ends after 3 s, by which
    // time it has ended the loop's 1 s watch (started before the pod was posted)
    let clock = sa_client(&s);
    let mut body = clock
        .stream(&watch_path(&pod, "", 3), Duration::from_secs(60))
        .unwrap();
    let mut events = 0;
    while let Some(line) = body.next_line().expect("the server ends the watch cleanly") {
        parse_event(&line).unwrap();
        events += 1;
    }
    assert!(events >= 1, "the watch from \"\" starts with the pod");
    s.proxy_ready(true).await;
    let end = Instant::now() + TIMEOUT;
    while !next_view().ready.iter().any(|c| c == "proxy") {
        assert!(
            Instant::now() < end,
            "the resumed watch never saw proxy ready"
        );
    }
    stop.store(true, Ordering::Relaxed);
    looping.join().unwrap(); // (its 1 s watches end: it sees `stop`)
}
