//! `kubectl-sexton doctor`, the real release binary: manifest checks table-tested on the
//! fixtures in tests/doctor/ (and each fix run to see that it fixes), and the cluster
//! checks against the real test API server, where the test plays the kubelet (pods bound to
//! a node that does not exist, their status written through the status subresource), runs
//! an old-style webhook that strips `restartPolicy` (testenv/old-webhook, as the webhook
//! tests do), adds a virtual-kubelet Node, and takes rights away with a ServiceAccount.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testbed::*;

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doctor");
const FAKE_NODE: &str = "sexton-test-no-such-node";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `kubectl-sexton doctor ARGS`, with `stdin` if given.
fn doctor(args: &[&str], stdin: Option<&str>) -> Output {
    output_with_input(
        Command::new(KUBECTL_SEXTON)
            .arg("doctor")
            .args(args)
            .env_remove("KUBECONFIG"),
        stdin.unwrap_or("").as_bytes(),
    )
}

/// The doctor against the test cluster for namespace `ns` (admin unless `kubeconfig`), as JSON.
fn doctor_json(ns: &str, kubeconfig: Option<&std::path::Path>, extra: &[&str]) -> (i32, Value) {
    let admin = testenv().kubeconfig.clone();
    let kc = kubeconfig.unwrap_or(&admin).to_str().unwrap().to_string();
    let mut args = vec!["--kubeconfig", &kc, "-n", ns, "-o", "json"];
    args.extend(extra);
    let out = doctor(&args, None);
    let code = out.status.code().unwrap_or(-1);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}), exit {code}:\n{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (code, report)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))
}

// ---------------------------------------------------------------------------------------
// Manifests

/// (object, status, fix) of a finding.
type Expected = &'static [(&'static str, &'static str, &'static str)];

/// (fixture, every finding that is not ok).
const TABLE: &[(&str, Expected)] = &[
    ("clean.yaml", &[]),
    (
        "undeclared.yaml",
        &[
            (
                "Job/migrate",
                "warning",
                "kubectl sexton inject --sidecar db-proxy -f FILE",
            ),
            (
                "CronJob/report",
                "warning",
                "kubectl sexton inject --sidecar metrics -f FILE",
            ),
        ],
    ),
    (
        "kubexit.yaml",
        &[("Job/kubexit", "warning", "kubectl sexton inject -f FILE")],
    ),
    (
        "kruise.yaml",
        &[("Job/marked", "warning", "kubectl sexton inject -f FILE")],
    ),
    (
        "quit-endpoints.yaml",
        &[
            (
                "Job/istio-quit",
                "warning",
                "drop the quit call; the proxy is injected at admission, and sexton's webhook ends the injected sidecars it recognises (Istio's istio-proxy, Linkerd's linkerd-proxy, ...: `kubectl sexton doctor` lists them per Job) with no declaration: `kubectl label namespace NS sexton.dev/inject=enabled`; or, for a proxy in the manifest: kubectl sexton inject --sidecar PROXY -f FILE",
            ),
            (
                "Job/cloudsql-quit",
                "warning",
                "drop the quit call, then: kubectl sexton inject --sidecar cloud-sql-proxy -f FILE",
            ),
        ],
    ),
    (
        "sleep-loop.yaml",
        &[(
            "Job/sleep-loop",
            "warning",
            "drop the loop, then: kubectl sexton inject --sidecar proxy -f FILE",
        )],
    ),
    (
        "kube-inject.yaml",
        &[(
            "Job/kube-injected",
            "warning",
            "kubectl sexton inject -f FILE",
        )],
    ),
    (
        "list.json",
        &[(
            "Job/in-a-list",
            "warning",
            "kubectl sexton inject --sidecar envoy -f FILE",
        )],
    ),
];

fn not_ok(report: &Value) -> Vec<(String, String, String)> {
    check(report, "manifests")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] != "ok")
        .map(|f| {
            (
                f["object"].as_str().unwrap().to_string(),
                f["status"].as_str().unwrap().to_string(),
                f["fix"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn manifest_checks_find_each_pattern_with_its_fix() {
    for (file, want) in TABLE {
        let path = format!("{FIXTURES}/{file}");
        let out = doctor(&["-f", &path, "-o", "json"], None);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(o, s, f)| {
                (
                    format!("{path}: {o}"),
                    s.to_string(),
                    f.replace("FILE", &path),
                )
            })
            .collect();
        assert_eq!(not_ok(&report), want, "{file}");
        assert_eq!(
            out.status.code(),
            Some(if want.is_empty() { 0 } else { 1 }),
            "{file}: {}",
            text(&out.stderr)
        );
        assert_eq!(report["schemaVersion"], 1);
    }
}

/// Each fix's `kubectl sexton inject` command, run as given, leaves nothing to find in
/// the template it was about.
#[test]
fn each_fix_fixes_its_file() {
    let mut ran = 0;
    for (file, want) in TABLE {
        for (object, _, fix) in *want {
            let Some(cmd) = fix.find("kubectl sexton inject").map(|i| &fix[i..]) else {
                continue;
            };
            if cmd.contains("PROXY") {
                continue; // the proxy is not in this manifest: the fix is the webhook's
            }
            let path = format!("{FIXTURES}/{file}");
            let args: Vec<String> = cmd
                .replace("FILE", &path)
                .split_whitespace()
                .skip(2) // "kubectl sexton"
                .map(str::to_string)
                .collect();
            let injected = Command::new(KUBECTL_SEXTON).args(&args).output().unwrap();
            assert!(
                injected.status.success(),
                "{args:?}: {}",
                text(&injected.stderr)
            );
            let after = doctor(&["-f", "-", "-o", "json"], Some(&text(&injected.stdout)));
            let after: Value = serde_json::from_slice(&after.stdout).unwrap();
            let left = not_ok(&after);
            assert!(
                !left.iter().any(|(o, _, _)| *o == format!("-: {object}")),
                "{args:?} left {object}: {left:?}"
            );
            ran += 1;
        }
    }
    assert_eq!(ran, 8);
}

#[test]
fn manifests_from_a_directory_and_stdin_and_bad_input() {
    // a directory: every fixture, in name order
    let out = doctor(&["-f", FIXTURES, "-o", "json"], None);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected: usize = TABLE.iter().map(|(_, w)| w.len()).sum();
    assert_eq!(not_ok(&report).len(), expected);
    assert_eq!(out.status.code(), Some(1));
    // stdin, as text: grouped under the check, each fix on its own line, no colour off a terminal
    let yaml = std::fs::read_to_string(format!("{FIXTURES}/sleep-loop.yaml")).unwrap();
    let out = doctor(&["-f", "-"], Some(&yaml));
    let report = text(&out.stdout);
    assert!(
        report.starts_with("[warning] manifests: 1 file(s), 1 Job/CronJob pod template(s)"),
        "{report}"
    );
    assert!(
        report.contains(
            "\n    [warning] -: Job/sleep-loop: container \"proxy\" loops on sleep until a file appears"
        ),
        "{report}"
    );
    assert!(
        report.contains(
            "\n        fix: drop the loop, then: kubectl sexton inject --sidecar proxy -f -\n"
        ),
        "{report}"
    );
    assert!(!report.contains('\x1b'));
    // unreadable input: exit 2, one line naming it
    for (args, needle) in [
        (vec!["-f", "/no/such/file.yaml"], "-f /no/such/file.yaml"),
        (vec!["-f", "-"], "-f -: not YAML or JSON"),
        (vec!["--stuck-after", "soon"], "--stuck-after"),
        (
            vec!["--sidecar-catalogue", "/no/such/catalogue.yaml"],
            "--sidecar-catalogue /no/such/catalogue.yaml",
        ),
    ] {
        let out = doctor(&args, Some("{not: [yaml"));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
}

/// Colour on a terminal (a pseudo-terminal from `script`), and not with NO_COLOR.
#[test]
fn colour_only_on_a_terminal_without_no_color() {
    let path = format!("{FIXTURES}/kruise.yaml");
    let run = |no_color: bool| {
        let mut c = Command::new("script");
        c.args([
            "-qec",
            &format!("{KUBECTL_SEXTON} doctor -f {path}"),
            "/dev/null",
        ]);
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        text(&c.output().unwrap().stdout)
    };
    assert!(
        run(false).contains("\x1b[33m[warning]\x1b[0m"),
        "{}",
        run(false)
    );
    assert!(!run(true).contains('\x1b'), "{}", run(true));
}

// ---------------------------------------------------------------------------------------
// The doctor cannot run

#[test]
fn without_a_usable_cluster_it_exits_2_naming_why() {
    let s = Scratch::new("doctor-unreachable");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // free, and nobody listens once the listener is dropped
    let kc = s.path("kubeconfig");
    std::fs::write(
        &kc,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{token: x}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"),
    )
    .unwrap();
    for (args, needle) in [
        (
            vec!["--kubeconfig", kc.to_str().unwrap()],
            "cannot reach the Kubernetes API server",
        ),
        (
            vec!["--kubeconfig", "/no/such/kubeconfig"],
            "invalid --kubeconfig=/no/such/kubeconfig",
        ),
        (
            vec!["--kubeconfig", kc.to_str().unwrap(), "--context", "nope"],
            "invalid --context=\"nope\"",
        ),
    ] {
        let out = doctor(&args, None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("kubectl-sexton doctor: "), "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

// ---------------------------------------------------------------------------------------
// The cluster

/// A namespace of the test's own, deleted when the test ends.
struct Ns(String);

impl Ns {
    async fn new(client: &Client, test: &str, labels: &[&str]) -> Ns {
        if labels.is_empty() {
            return Ns(fresh_namespace(client, test).await);
        }
        Ns(labelled_namespace(test, labels))
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        // pods bound to a node that does not exist have no kubelet to confirm their
        // deletion: without --force they, and so the namespace, would stay Terminating
        let _ = kubectl(&[
            "delete",
            "pods",
            "--all",
            "-n",
            &self.0,
            "--grace-period=0",
            "--force",
        ]);
        let _ = kubectl(&["delete", "namespace", &self.0, "--wait=false"]);
    }
}

/// A cluster-scoped object the test created, deleted when it ends.
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let mut args = vec!["delete", "--ignore-not-found", "--wait=false"];
        args.extend(self.0.iter().map(String::as_str));
        let _ = kubectl(&args);
    }
}

fn apply(s: &Scratch, manifest: &Value) {
    let f = s.path("apply.json");
    std::fs::write(&f, manifest.to_string()).unwrap();
    let out = kubectl(&["apply", "-f", f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "current_thread")]
async fn a_clean_namespace_is_ok() {
    let client = admin_client().await;
    let ns = Ns::new(&client, "doctor-clean", &[]).await;
    let (code, report) = doctor_json(&ns.0, None, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["status"], "ok");
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "api-server",
            "components",
            "admission",
            "webhook-chain",
            "virtual-kubelet",
            "image-volumes",
            "injected-sidecars",
            "stuck-pods",
            "safety-net"
        ]
    );
    assert!(
        check(&report, "api-server")["summary"]
            .as_str()
            .unwrap()
            .contains("v1.37"),
        "{report:#}"
    );
    assert_eq!(
        check(&report, "admission")["summary"],
        format!(
            "a native sidecar survives admission (server-side dry run) in namespace {}",
            ns.0
        )
    );
    // read-only: the probe was a dry run
    let pods = kubectl(&["get", "pods", "-n", &ns.0, "-o", "name"]);
    assert_eq!(text(&pods.stdout), "");
}

/// The old-style webhook (testenv/old-webhook), serving TLS on loopback and registered by
/// URL for namespaces labelled `key=true`, as the webhook tests run it.
struct OldWebhook {
    _process: Process,
    _config: Cleanup,
    _scratch: Scratch,
}

fn old_webhook(name: &str, key: &str) -> OldWebhook {
    let scratch = Scratch::new("doctor-old-webhook");
    let bin = testenv_cmd("old-webhook");
    let (cert, tls_key) = (scratch.path("tls.crt"), scratch.path("tls.key"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&tls_key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(&bin);
    cmd.arg(format!("127.0.0.1:{port}"))
        .arg(&cert)
        .arg(&tls_key);
    let process = scratch.spawn_host("old-webhook", cmd);
    process.wait_log("serving on");
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cert).unwrap());
    apply(
        &scratch,
        &json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": format!("{name}.test.sexton.dev"),
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/mutate"), "caBundle": ca},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {key: "true"}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 5,
            }],
        }),
    );
    OldWebhook {
        _process: process,
        _config: Cleanup(vec![format!("mutatingwebhookconfiguration/{name}")]),
        _scratch: scratch,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_webhook_that_strips_native_sidecars_is_found_and_named() {
    let client = admin_client().await;
    let key = format!("sexton-test-doctor-stripper-{}", std::process::id());
    let name = format!("zz-{key}");
    let _old = old_webhook(&name, &key);
    let ns = Ns::new(&client, "doctor-strip", &[&format!("{key}=true")]).await;
    // the API server calls a new webhook once its configuration reached the webhook cache:
    // wait for the doctor to see the stripping (bounded)
    let end = Instant::now() + Duration::from_secs(30);
    let report = loop {
        let (code, report) = doctor_json(&ns.0, None, &[]);
        if check(&report, "admission")["status"] != "ok" || Instant::now() > end {
            assert_eq!(code, 1, "{report:#}");
            break report;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let admission = check(&report, "admission");
    assert_eq!(admission["status"], "error", "{report:#}");
    let f = &admission["findings"][0];
    assert_eq!(f["object"], format!("namespace {}", ns.0));
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("came back with restartPolicy unset"),
        "{message}"
    );
    // (after whichever of sexton's configurations sorts first: other tests register some)
    assert!(
        message.contains(&format!(
            "suspects: MutatingWebhookConfiguration {name} webhook {name}.test.sexton.dev (runs after sexton-webhook"
        )) && message.contains("reinvocationPolicy Never)"),
        "{message}"
    );
    // webhooks of other namespaces are not suspects
    assert_eq!(
        message.matches("MutatingWebhookConfiguration ").count(),
        1,
        "{message}"
    );
    assert!(f["fix"].as_str().unwrap().contains(&format!(
        "kubectl label namespace {} sexton.dev/inject=enabled",
        ns.0
    )));
    // and the other checks are unaffected
    assert_eq!(check(&report, "stuck-pods")["status"], "ok");
}

/// Plays the kubelet: `main` exited 0 `ago` seconds ago, `proxy` still runs.
async fn main_done(client: &Client, ns: &str, name: &str, ago: i64) {
    main_done_with(client, ns, name, ago, "proxy", json!({})).await
}

/// As `main_done`, the sidecar named `sidecar`, the pod annotated `annotations`.
async fn main_done_with(
    client: &Client,
    ns: &str,
    name: &str,
    ago: i64,
    sidecar: &str,
    annotations: Value,
) {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "nodeName": FAKE_NODE, "automountServiceAccountToken": false,
            "containers": [{"name": "main", "image": "app:1"}, {"name": sidecar, "image": "proxy:1"}]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let finished = Timestamp::now() - SignedDuration::from_secs(ago);
    let status = |c: &str, state: Value| json!({"name": c, "image": format!("{c}:1"), "imageID": "", "ready": false, "restartCount": 0, "state": state});
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "containerStatuses": [
            status("main", json!({"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": (finished - SignedDuration::from_secs(5)).to_string(), "finishedAt": finished.to_string()}})),
            status(sidecar, json!({"running": {"startedAt": (finished - SignedDuration::from_secs(5)).to_string()}})),
        ]}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_stuck_pod_is_found_with_its_running_sidecar_named() {
    let client = admin_client().await;
    let ns = Ns::new(&client, "doctor-stuck", &[]).await;
    main_done(&client, &ns.0, "stuck", 300).await;
    main_done(&client, &ns.0, "just-done", 5).await;
    let (code, report) = doctor_json(&ns.0, None, &["--stuck-after", "60s"]);
    assert_eq!(code, 1, "{report:#}");
    let stuck = check(&report, "stuck-pods");
    assert_eq!(stuck["status"], "error");
    let findings = stuck["findings"].as_array().unwrap();
    assert_eq!(
        findings.len(),
        1,
        "only the pod past the threshold: {stuck:#}"
    );
    let f = &findings[0];
    assert_eq!(f["object"], format!("pod {}/stuck", ns.0));
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with("main container(s) [\"main\"] terminated 30")
            && message.contains("but [\"proxy\"] still run"),
        "{message}"
    );
    assert_eq!(
        f["fix"],
        "kubectl sexton inject --sidecar proxy -f MANIFEST"
    );
    // the threshold is the flag's
    let (code, report) = doctor_json(&ns.0, None, &["--stuck-after", "10m"]);
    assert_eq!(
        (code, &check(&report, "stuck-pods")["status"]),
        (0, &json!("ok")),
        "{report:#}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_virtual_kubelet_node_and_the_jobs_that_target_it_are_reported() {
    let client = admin_client().await;
    let ns = Ns::new(&client, "doctor-vk", &[]).await;
    let s = Scratch::new("doctor-vk");
    let node = format!("sexton-test-vk-{}", std::process::id());
    let _node = Cleanup(vec![format!("node/{node}")]);
    apply(
        &s,
        &json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {"type": "virtual-kubelet"}},
            "spec": {"taints": [{"key": "virtual-kubelet.io/provider", "value": "test", "effect": "NoSchedule"}]}}),
    );
    let job = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["restartPolicy"] = json!("Never");
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns.0},
            "spec": {"suspend": true, "template": {"spec": spec}}})
    };
    let two = json!([{"name": "main", "image": "app:1"}, {"name": "proxy", "image": "proxy:1"}]);
    apply(
        &s,
        &job(
            "to-vk",
            json!({"nodeSelector": {"type": "virtual-kubelet"}, "containers": two}),
        ),
    );
    apply(&s, &job("elsewhere", json!({"containers": two})));
    let (code, report) = doctor_json(&ns.0, None, &[]);
    assert_eq!(code, 1, "{report:#}");
    let vk = check(&report, "virtual-kubelet");
    assert_eq!(vk["status"], "warning", "{vk:#}");
    let objects: Vec<(&str, &str)> = vk["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["object"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    assert!(objects.contains(&(&format!("node {node}"), "ok")), "{vk:#}");
    let job_object = format!("job {}/to-vk", ns.0);
    assert!(objects.contains(&(&job_object, "warning")), "{vk:#}");
    assert!(
        !objects.iter().any(|(o, _)| o.ends_with("/elsewhere")),
        "{vk:#}"
    );
    let f = vk["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["object"] == job_object.as_str())
        .unwrap();
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("nodeSelector type=virtual-kubelet")
    );
    assert_eq!(
        f["fix"],
        "kubectl sexton inject --strategy wrap -f MANIFEST"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_check_without_the_rights_it_needs_reports_its_own_error() {
    let client = admin_client().await;
    let ns = Ns::new(&client, "doctor-rbac", &[]).await;
    let s = Scratch::new("doctor-rbac");
    // rights in the namespace only: pods (and their dry-run create), Jobs, CronJobs
    let rbac = [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "limited", "namespace": ns.0}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "limited", "namespace": ns.0},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create"]},
                      {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "limited", "namespace": ns.0},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "limited"},
            "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": ns.0}]}),
    ];
    for r in &rbac {
        apply(&s, r);
    }
    let limited = format!("system:serviceaccount:{}:limited", ns.0);
    wait_allowed(&ns.0, &limited, "create", "pods");
    // a Job whose pod has Istio's sidecar: found, though who ends it cannot be known
    apply(
        &s,
        &vendor_job(&ns.0, "meshed", istio(), json!({}), &["istio-proxy"], &[]),
    );
    wait_pods(&ns.0, 1);
    let kc = service_account_kubeconfig(&ns.0, "limited", &s.path("kubeconfig"));
    let (code, report) = doctor_json(&ns.0, Some(&kc), &[]);
    assert_eq!(code, 1, "{report:#}");
    let refused = "forbidden: cannot list mutatingwebhookconfigurations.admissionregistration.k8s.io (cluster-wide): ";
    let chain = check(&report, "webhook-chain");
    assert_eq!(chain["status"], "error", "{chain:#}");
    assert!(
        chain["findings"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with(refused),
        "{chain:#}"
    );
    let f = finding(
        &report,
        "injected-sidecars",
        &format!("job {}/meshed", ns.0),
    );
    assert_eq!(f["status"], "warning", "{f:#}");
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "\"istio-proxy\" (Istio, annotation sidecar.istio.io/status): not ended unless sexton's webhook serves namespace {}, which is unknown: {refused}",
            ns.0
        )),
        "{message}"
    );
    let vk = check(&report, "virtual-kubelet");
    assert_eq!(vk["status"], "error", "{vk:#}");
    assert!(
        vk["findings"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("forbidden: cannot list nodes (cluster-wide): "),
        "{vk:#}"
    );
    let components = check(&report, "components");
    assert_eq!(components["status"], "error");
    let messages: Vec<&str> = components["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.iter().any(|m| m
            .starts_with("forbidden: cannot list deployments.apps in namespace sexton-system: ")),
        "{messages:?}"
    );
    // what the account may do still works
    assert_eq!(check(&report, "admission")["status"], "ok", "{report:#}");
    assert_eq!(check(&report, "stuck-pods")["status"], "ok", "{report:#}");
    assert_eq!(check(&report, "api-server")["status"], "ok", "{report:#}");
}

/// The chart installed under another release name: its objects are named `batch-sexton-*`,
/// and the doctor finds the Deployments by their label (no pod runs here: 0 ready, an
/// error), and the webhook's TLS Secret by the Deployment's `--tls-secret` (a certificate
/// that expires within `--cert-days`: a warning). Only the Deployments and the Secret are
/// created: a MutatingWebhookConfiguration would review other tests' pods.
#[tokio::test(flavor = "current_thread")]
async fn components_are_found_whatever_the_release_name() {
    let client = admin_client().await;
    let ns = Ns::new(&client, "doctor-release", &[]).await;
    let s = Scratch::new("doctor-release");
    let chart = format!("{ROOT}/charts/sexton");
    let out = Command::new(helm_bin())
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("sexton-helm-cache"),
        )
        .args(["template", "batch", &chart, "--namespace", &ns.0])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let objects: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text(&out.stdout)).unwrap();
    let deployments: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .collect();
    assert_eq!(deployments.len(), 2);
    for d in &deployments {
        apply(&s, d);
    }
    let (key, crt) = (s.path("tls.key"), s.path("tls.crt"));
    let cert = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "10",
        "-subj",
        "/CN=batch-sexton-webhook",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        crt.to_str().unwrap(),
    ]);
    assert!(cert.status.success(), "{}", text(&cert.stderr));
    let pem = std::fs::read(&crt).unwrap();
    use base64::Engine;
    apply(
        &s,
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "batch-sexton-webhook-tls", "namespace": ns.0},
            "data": {"tls.crt": base64::engine::general_purpose::STANDARD.encode(&pem)}}),
    );

    let (code, report) = doctor_json(&ns.0, None, &["--sexton-namespace", &ns.0]);
    assert_eq!(code, 1, "{report:#}");
    let findings = &check(&report, "components")["findings"];
    let finding = |object: String| {
        findings
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["object"] == object)
            .unwrap_or_else(|| panic!("no finding for {object}: {findings:#}"))
            .clone()
    };
    for component in ["controller", "webhook"] {
        let f = finding(format!("deployment {}/batch-sexton-{component}", ns.0));
        assert_eq!(f["status"], "error", "{f:#}");
        assert!(f["message"].as_str().unwrap().starts_with("0/"), "{f:#}");
    }
    let f = finding(format!("secret {}/batch-sexton-webhook-tls tls.crt", ns.0));
    assert_eq!(f["status"], "warning", "{f:#}");
    assert!(f["message"].as_str().unwrap().contains("under 30"), "{f:#}");
}

// ---------------------------------------------------------------------------------------
// Vendors' injected sidecars and the webhook chain

/// The finding of check `name` about `object`.
fn finding(report: &Value, name: &str, object: &str) -> Value {
    let c = check(report, name);
    c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["object"] == object)
        .unwrap_or_else(|| panic!("{name}: nothing about {object}: {c:#}"))
        .clone()
}

/// Istio's marker, as its injector leaves it on a pod.
fn istio() -> Value {
    json!({"sidecar.istio.io/status": r#"{"initContainers":["istio-init"],"containers":["istio-proxy"]}"#})
}

/// A Job of `main` and `sidecars` (native ones in `natives`), its template carrying the
/// vendor's `annotations` and `labels` as the vendor's webhook would have left them on the
/// pods. The test API server's Job controller creates its pod (no scheduler runs: it stays
/// Pending).
fn vendor_job(
    ns: &str,
    name: &str,
    annotations: Value,
    labels: Value,
    sidecars: &[&str],
    natives: &[&str],
) -> Value {
    let container =
        |n: &str| json!({"name": n, "image": format!("example.com/{n}:1"), "command": ["/run"]});
    let mut containers = vec![container("main")];
    containers.extend(sidecars.iter().map(|n| container(n)));
    let inits: Vec<Value> = natives
        .iter()
        .map(|n| {
            let mut c = container(n);
            c["restartPolicy"] = json!("Always");
            c
        })
        .collect();
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": annotations, "labels": labels},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": false,
                "initContainers": inits, "containers": containers}}}})
}

/// A CronJob whose template asks a vendor's webhook for its sidecar (`annotations`).
fn asking_cronjob(ns: &str, name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": ns},
        "spec": {"schedule": "0 3 * * *", "suspend": true, "jobTemplate": {"spec": {"template": {
            "metadata": {"annotations": annotations},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "example.com/main:1"}]}}}}}})
}

/// Waits (bounded) until the Job controller has created `n` pods in `ns`.
fn wait_pods(ns: &str, n: usize) {
    let mut last = String::new();
    let created = wait_until(Duration::from_secs(60), || {
        let out = kubectl(&["get", "pods", "-n", ns, "-o", "name"]);
        last = text(&out.stdout);
        last.lines().count() >= n
    });
    assert!(created, "{n} pod(s) in {ns} not created in 60 s: {last}");
}

/// A MutatingWebhookConfiguration `name` of Pod CREATE webhooks (`(webhook, path,
/// reinvocationPolicy, more namespaceSelector expressions)`) calling a loopback port nobody
/// serves (failurePolicy Ignore: Pods are admitted unchanged), for the namespaces labelled
/// `key=true` only, so that no other test's Pods see it. `ca`: a real certificate, so that
/// the components check of doctor tests running meanwhile finds it valid.
fn stand_in(
    name: &str,
    key: &str,
    hooks: &[(&str, &str, &str, Value)],
    labels: Value,
    ca: &str,
) -> Value {
    let port = free_port();
    let webhooks: Vec<Value> = hooks
        .iter()
        .map(|(hook, path, policy, more)| {
            let mut selector = vec![json!({"key": key, "operator": "In", "values": ["true"]})];
            selector.extend(more.as_array().into_iter().flatten().cloned());
            json!({
                "name": hook,
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchExpressions": selector},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "timeoutSeconds": 1,
                "reinvocationPolicy": policy,
            })
        })
        .collect();
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": labels}, "webhooks": webhooks})
}

/// Jobs whose pods have vendors' sidecars (as the vendors' webhooks leave them: container and
/// marker) in a namespace sexton's webhook serves and in one it does not, CronJobs that ask
/// a vendor's webhook for its sidecar, and a chain of configurations around sexton's: the
/// doctor lists each Job's sidecars and how each will be ended, and the chain in the API
/// server's order; sexton's configuration without IfNeeded is found, and the fix it gives,
/// run, makes the finding go.
#[tokio::test(flavor = "current_thread")]
async fn injected_sidecars_per_job_and_the_webhook_chain() {
    let client = admin_client().await;
    let s = Scratch::new("doctor-injected");
    let key = format!("sexton-test-doctor-chain-{}", std::process::id());
    let mine = format!("{key}=true");
    let served = Ns::new(&client, "doctor-served", &[&mine]).await;
    let other = Ns::new(&client, "doctor-unserved", &[&mine]).await;

    // the pods first, admitted before any configuration below exists (and before the
    // namespace is served): as the vendors' webhooks left them
    let vault = json!({"vault.hashicorp.com/agent-inject-status": "injected"});
    let cloudsql = json!({"cloudsql.cloud.google.com/orders": "1,gcr.io/cloud-sql-connectors/cloud-sql-proxy:2"});
    let jobs = [
        vendor_job(
            &other.0,
            "istio-job",
            istio(),
            json!({}),
            &["istio-proxy"],
            &[],
        ),
        vendor_job(
            &other.0,
            "vault-native",
            vault.clone(),
            json!({}),
            &[],
            &["vault-agent"],
        ),
        // a container named as Istio's without its marker: nobody's injection
        vendor_job(
            &other.0,
            "look-alike",
            json!({}),
            json!({}),
            &["istio-proxy"],
            &[],
        ),
        vendor_job(
            &served.0,
            "vault-job",
            vault,
            json!({}),
            &["vault-agent"],
            &[],
        ),
        vendor_job(
            &served.0,
            "datadog-job",
            json!({}),
            json!({"agent.datadoghq.com/sidecar": "fargate"}),
            &["datadog-agent-injected"],
            &[],
        ),
        vendor_job(
            &served.0,
            "acme-job",
            json!({}),
            json!({"acme.example/injected": "true"}),
            &["acme-proxy"],
            &[],
        ),
    ];
    for j in &jobs {
        apply(&s, j);
    }
    // one Job injected by `kubectl sexton inject` (wrap): its record names the sidecar
    let wrapped = s.path("wrapped.json");
    std::fs::write(
        &wrapped,
        vendor_job(
            &served.0,
            "wrapped-job",
            cloudsql,
            json!({}),
            &["csql-orders"],
            &[],
        )
        .to_string(),
    )
    .unwrap();
    let injected = Command::new(KUBECTL_SEXTON)
        .args(["inject", "--strategy", "wrap", "-o", "json", "-f"])
        .arg(&wrapped)
        .output()
        .unwrap();
    assert!(injected.status.success(), "{}", text(&injected.stderr));
    assert!(
        text(&injected.stderr)
            .contains("wrap (sidecars: csql-orders [Cloud SQL Auth Proxy, injected])"),
        "{}",
        text(&injected.stderr)
    );
    apply(&s, &serde_json::from_slice(&injected.stdout).unwrap());
    wait_pods(&other.0, 3);
    wait_pods(&served.0, 4);
    let ask_vault = json!({"vault.hashicorp.com/agent-inject": "true"});
    apply(
        &s,
        &asking_cronjob(&other.0, "vault-cron", ask_vault.clone()),
    );
    apply(&s, &asking_cronjob(&served.0, "vault-cron", ask_vault));

    // the chain, for this test's namespaces only: an admin's vendor (Acme, IfNeeded) and an
    // Istio revision before sexton's, Vault (its configuration named as a Helm release
    // names it) after
    let (key_file, crt) = (s.path("ca.key"), s.path("ca.crt"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "365",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        key_file.to_str().unwrap(),
        "-out",
        crt.to_str().unwrap(),
    ]);
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&crt).unwrap());
    let pid = std::process::id();
    let names = [
        format!("acme-injector-{pid}"),
        format!("istio-sidecar-injector-sexton-test-{pid}"),
        format!("sexton-webhook-doctor-{pid}"),
        format!("zz-sexton-test-{pid}-agent-injector-cfg"),
    ];
    let _configs = Cleanup(
        names
            .iter()
            .map(|n| format!("mutatingwebhookconfiguration/{n}"))
            .collect(),
    );
    let none = json!([]);
    let enabled =
        |op: &str| json!([{"key": "sexton.dev/inject", "operator": op, "values": ["enabled"]}]);
    let sextons = json!({"app.kubernetes.io/name": "sexton-webhook"});
    let configs = [
        stand_in(
            &names[0],
            &key,
            &[("acme.example.com", "/inject", "IfNeeded", none.clone())],
            json!({}),
            &ca,
        ),
        stand_in(
            &names[1],
            &key,
            &[(
                "rev.namespace.sidecar-injector.istio.io",
                "/inject",
                "Never",
                none.clone(),
            )],
            json!({}),
            &ca,
        ),
        // sexton's, as deploy/ has it but not called again
        stand_in(
            &names[2],
            &key,
            &[
                ("inject.sexton.dev", "/mutate", "Never", enabled("In")),
                (
                    "annotated.inject.sexton.dev",
                    "/mutate/annotated",
                    "Never",
                    enabled("NotIn"),
                ),
            ],
            sextons,
            &ca,
        ),
        stand_in(
            &names[3],
            &key,
            &[("vault.hashicorp.com", "/mutate", "Never", none)],
            json!({}),
            &ca,
        ),
    ];
    for c in &configs {
        apply(&s, c);
    }
    let out = kubectl(&["label", "namespace", &served.0, "sexton.dev/inject=enabled"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let acme = s.path("acme.yaml");
    std::fs::write(
        &acme,
        "- name: Acme Mesh\n  containers: [acme-proxy]\n  markers: [{on: label, key: acme.example/injected, value: \"true\"}]\n  webhook: {configurations: [\"acme-injector-*\"], reinvocation: Never, doneWhen: nameInContainers}\n",
    )
    .unwrap();
    let catalogue = ["--sidecar-catalogue", acme.to_str().unwrap()];

    // the namespace sexton's webhook does not serve (not labelled)
    let (code, report) = doctor_json(&other.0, None, &catalogue);
    assert_eq!(code, 1, "{report:#}");
    let f = finding(
        &report,
        "injected-sidecars",
        &format!("job {}/istio-job", other.0),
    );
    assert_eq!(f["status"], "warning", "{f:#}");
    assert!(
        f["message"].as_str().unwrap().ends_with(&format!(
            "\"istio-proxy\" (Istio, annotation sidecar.istio.io/status): not ended: nothing ends it (namespace {} is not labelled sexton.dev/inject=enabled, and the pod does not ask with the annotation sexton.dev/inject)",
            other.0
        )),
        "{f:#}"
    );
    assert_eq!(
        f["fix"],
        format!(
            "kubectl label namespace {} sexton.dev/inject=enabled; or switch on Istio's own native sidecars: annotate the pod template sidecar.istio.io/nativeSidecar=true",
            other.0
        )
    );
    let f = finding(
        &report,
        "injected-sidecars",
        &format!("job {}/vault-native", other.0),
    );
    assert_eq!(f["status"], "ok", "{f:#}");
    assert!(f["message"].as_str().unwrap().contains("\"vault-agent\" (Vault Agent, annotation vault.hashicorp.com/agent-inject-status=injected): a native sidecar already"), "{f:#}");
    let f = finding(
        &report,
        "injected-sidecars",
        &format!("cronjob {}/vault-cron", other.0),
    );
    assert_eq!(f["status"], "warning", "{f:#}");
    assert!(f["message"].as_str().unwrap().starts_with("its pod template: \"vault-agent\" (Vault Agent, asks for it: annotation vault.hashicorp.com/agent-inject=true): not ended"), "{f:#}");
    let objects: Vec<&str> = check(&report, "injected-sidecars")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["object"].as_str().unwrap())
        .collect();
    assert!(
        !objects.iter().any(|o| o.ends_with("/look-alike")),
        "{objects:?}"
    );

    // the namespace it serves: the pods admitted before are not injected, new ones will be
    let (code, report) = doctor_json(&served.0, None, &catalogue);
    assert_eq!(code, 1, "{report:#}");
    let f = finding(
        &report,
        "injected-sidecars",
        &format!("job {}/vault-job", served.0),
    );
    assert_eq!(f["status"], "warning", "{f:#}");
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("(Vault Agent, annotation vault.hashicorp.com/agent-inject-status=injected): not ended in this pod, admitted without sexton")
            && message.ends_with("ends it in new pods: made a native sidecar, or wrapped where native sidecars cannot run"),
        "{message}"
    );
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .starts_with(&format!("kubectl delete pod -n {} vault-job-", served.0)),
        "{f:#}"
    );
    // vendors whose webhook is called again and looks for the sidecar by name: by default
    // (Datadog's), and as this cluster registers it (Acme's, the admin's entry says Never)
    for (job, vendor, container) in [
        ("datadog-job", "Datadog Agent", "datadog-agent-injected"),
        ("acme-job", "Acme Mesh", "acme-proxy"),
    ] {
        let f = finding(
            &report,
            "injected-sidecars",
            &format!("job {}/{job}", served.0),
        );
        assert!(
            f["message"].as_str().unwrap().ends_with(&format!(
                "wrapped, not made native: {vendor}'s webhook is called again after sexton's and looks for \"{container}\" by name in spec.containers"
            )),
            "{f:#}"
        );
    }
    let f = finding(
        &report,
        "injected-sidecars",
        &format!("job {}/wrapped-job", served.0),
    );
    assert_eq!(f["status"], "ok", "{f:#}");
    assert!(f["message"].as_str().unwrap().contains("\"csql-orders\" (Cloud SQL Auth Proxy, annotation cloudsql.cloud.google.com/orders): ended by sexton (sexton.dev/injected: wrap): the in-pod supervisor stops it"), "{f:#}");
    let f = finding(
        &report,
        "injected-sidecars",
        &format!("cronjob {}/vault-cron", served.0),
    );
    assert_eq!(f["status"], "ok", "{f:#}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("ended by sexton's webhook ("),
        "{f:#}"
    );

    // the chain for that namespace: this test's configurations in the API server's order
    // (others' may be there too), the vendors named, sexton's found not called again
    let chain = check(&report, "webhook-chain");
    let at = |name: &str| -> usize {
        chain["findings"]
            .as_array()
            .unwrap()
            .iter()
            .position(|f| f["object"] == format!("mutatingwebhookconfiguration {name}"))
            .unwrap_or_else(|| panic!("{name} not in the chain: {chain:#}"))
    };
    let order: Vec<usize> = names.iter().map(|n| at(n)).collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "{order:?}: {chain:#}"
    );
    let message = |i: usize| {
        chain["findings"][order[i]]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(message(0).contains("runs before sexton's ") && message(0).ends_with("; Acme Mesh's injector, called again after sexton's changed a Pod and looking for [\"acme-proxy\"] by name in spec.containers: sexton leaves that sidecar there and wraps it (it is not made native, which would have it injected twice)"), "{}", message(0));
    assert!(
        message(1).contains("(reinvocationPolicy Never); runs before sexton's ")
            && message(1).ends_with("; Istio's injector"),
        "{}",
        message(1)
    );
    assert!(
        message(3).contains("runs after sexton's ")
            && message(3).ends_with("; Vault Agent's injector"),
        "{}",
        message(3)
    );
    assert!(
        chain["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("{} (sexton's)", names[2]))
            && chain["summary"]
                .as_str()
                .unwrap()
                .contains(&format!("Vault Agent ({})", names[3])),
        "{chain:#}"
    );
    let sexton = &chain["findings"][order[2]];
    assert_eq!(sexton["status"], "warning", "{sexton:#}");
    assert!(
        sexton["message"]
            .as_str()
            .unwrap()
            .contains("[\"inject.sexton.dev\"] without reinvocationPolicy IfNeeded"),
        "{sexton:#}"
    );
    // the fix, run as given, makes the finding go
    let fix = sexton["fix"].as_str().unwrap();
    let out = Command::new("sh")
        .args(["-c", fix])
        .env("KUBECONFIG", &testenv().kubeconfig)
        .output()
        .unwrap();
    assert!(out.status.success(), "{fix}: {}", text(&out.stderr));
    let (_, report) = doctor_json(&served.0, None, &catalogue);
    let sexton = finding(
        &report,
        "webhook-chain",
        &format!("mutatingwebhookconfiguration {}", names[2]),
    );
    assert_eq!(sexton["status"], "ok", "{sexton:#}");
    assert_eq!(
        sexton["message"],
        format!(
            "#{}: sexton's webhook: webhook inject.sexton.dev (reinvocationPolicy IfNeeded)",
            order[2] + 1
        )
    );

    // recognition off: nothing is looked for
    let (_, report) = doctor_json(&served.0, None, &["--recognise=false"]);
    let c = check(&report, "injected-sidecars");
    assert_eq!(
        (&c["status"], c["findings"].as_array().unwrap().len()),
        (&json!("ok"), 0),
        "{c:#}"
    );
    // and without the admin's entry, Acme's sidecar is nobody's
    let (_, report) = doctor_json(&served.0, None, &[]);
    let objects = check(&report, "injected-sidecars")["findings"].to_string();
    assert!(!objects.contains("acme-job"), "{objects}");
}

/// A pod kept Running by a vendor's injected sidecar: the stuck-pods check names the vendor
/// and gives the webhook's fix (its manifest has no such container to inject).
#[tokio::test(flavor = "current_thread")]
async fn a_stuck_pod_names_its_vendors_sidecar() {
    let client = admin_client().await;
    let ns = Ns::new(&client, "doctor-stuck-vendor", &[]).await;
    main_done_with(&client, &ns.0, "meshed", 300, "istio-proxy", istio()).await;
    let (code, report) = doctor_json(&ns.0, None, &[]);
    assert_eq!(code, 1, "{report:#}");
    let f = finding(&report, "stuck-pods", &format!("pod {}/meshed", ns.0));
    assert!(
        f["message"].as_str().unwrap().contains("still run and keep the pod Running; \"istio-proxy\" is an injected sidecar (Istio, annotation sidecar.istio.io/status): sexton's webhook ends it with no declaration"),
        "{f:#}"
    );
    assert_eq!(
        f["fix"],
        format!("kubectl label namespace {} sexton.dev/inject=enabled", ns.0)
    );
}
