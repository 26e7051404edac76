//! `kubectl-sexton webhook` against the real test API server: the real binary, with the token
//! of the ServiceAccount of `deploy/rbac-webhook.yaml` and exactly that RBAC, registered by
//! URL on loopback in a MutatingWebhookConfiguration like `deploy/webhook.yaml`'s, its TLS
//! self-managed (it writes the caBundle itself). Pods are created through the API server,
//! Job pods by the real Job controller. An old-style webhook (testenv/old-webhook, built on
//! k8s.io/api v0.27) strips `restartPolicy` from init containers as the webhooks users report do.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use testbed::*;

mod admission;
use admission::*;

#[tokio::test(flavor = "current_thread")]
async fn job_pods_of_a_labelled_namespace_are_injected() {
    webhook();
    let client = admin_client().await;
    let ns = labelled_namespace("wh-job", &["sexton.dev/inject=enabled"]);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "backup", "namespace": ns},
        "spec": {"backoffLimit": 0, "template": {"spec": pod("x", json!({}), false)["spec"].clone()}},
    });
    let out = apply(&job);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut found = None;
    for _ in 0..600 {
        let list = pods
            .list(&ListParams::default().labels("job-name=backup"))
            .await
            .unwrap();
        if let Some(p) = list.items.into_iter().next() {
            found = Some(serde_json::to_value(p).unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let p = found.expect("the Job controller created no pod");
    assert!(injected(&p), "{p}");
    assert_eq!(p["spec"]["initContainers"][0]["name"], "proxy");
    assert_eq!(p["spec"]["initContainers"][0]["restartPolicy"], "Always");
    assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn scope_annotation_opt_in_and_opt_out() {
    webhook();
    let client = admin_client().await;
    let plain = labelled_namespace("wh-plain", &[]);
    assert!(
        create(&plain, &pod("untouched", json!({}), false))
            .status
            .success()
    );
    assert!(
        !injected(&stored(&client, &plain, "untouched").await),
        "an unlabelled namespace is not injected"
    );
    assert!(
        create(
            &plain,
            &pod("asked", json!({"sexton.dev/inject": "native"}), false)
        )
        .status
        .success()
    );
    assert!(
        injected(&stored(&client, &plain, "asked").await),
        "a pod that asks is injected anywhere"
    );
    let enabled = labelled_namespace("wh-enabled", &["sexton.dev/inject=enabled"]);
    assert!(
        create(
            &enabled,
            &pod("out", json!({"sexton.dev/inject": "disabled"}), false)
        )
        .status
        .success()
    );
    assert!(
        !injected(&stored(&client, &enabled, "out").await),
        "disabled is honoured"
    );
    // never the webhook's own namespace, even when a pod asks (a dry run: the namespace
    // enforces the restricted Pod Security Standard, which this pod meets)
    let own = restricted(pod("own", json!({"sexton.dev/inject": "native"}), false));
    let out = dry_run("sexton-system", &own);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("sexton.dev/injected"),
        "the webhook's own namespace was injected"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_refusal_is_a_warning_and_an_event_and_the_pod_is_admitted_unchanged() {
    webhook();
    let client = admin_client().await;
    let ns = labelled_namespace("wh-refused", &["sexton.dev/inject=enabled"]);
    let p = pod("refused", json!({"sexton.dev/inject": "native"}), true);
    let out = create(&ns, &p);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "Warning: sexton: pod admitted unchanged: native: sidecar \"proxy\" sets restartPolicy"
        ),
        "{}",
        text(&out.stderr)
    );
    let s = stored(&client, &ns, "refused").await;
    assert!(
        !injected(&s) && s["spec"]["initContainers"].is_null(),
        "{s}"
    );
    // a bare Pod does not exist yet when it is reviewed: no Event (the warning above is
    // its creator's); a Job's refused Pod (an unknown strategy: a Job's template loses the
    // container restartPolicy above, a field behind a feature gate): an Event on the Job
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "refused", "namespace": ns},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {"sexton.dev/inject": "bogus"}},
            "spec": pod("x", json!({}), false)["spec"].clone()}},
    });
    let out = apply(&job);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ok = wait_until(LONG, || {
        let out = kubectl(&["get", "events.events.k8s.io", "-n", &ns, "-o", "json"]);
        let events: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        events["items"].as_array().into_iter().flatten().any(|e| {
            e["reason"] == "InjectRefused"
                && e["regarding"]["kind"] == "Job"
                && e["regarding"]["name"] == "refused"
        })
    });
    assert!(ok, "no InjectRefused event on the Job");
    let out = kubectl(&["get", "events.events.k8s.io", "-n", &ns, "-o", "json"]);
    let events: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !events["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["regarding"]["kind"] == "Pod"),
        "an Event about a Pod that did not exist: {events}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_dry_run_is_answered_and_creates_nothing() {
    webhook();
    let client = admin_client().await;
    let ns = labelled_namespace("wh-dry", &["sexton.dev/inject=enabled"]);
    let out = dry_run(&ns, &pod("dry", json!({}), false));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let answered: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(injected(&answered), "{answered}");
    let refused = dry_run(
        &ns,
        &pod("dry-refused", json!({"sexton.dev/inject": "native"}), true),
    );
    assert!(
        text(&refused.stderr).contains("Warning: sexton"),
        "{}",
        text(&refused.stderr)
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(pods.items.is_empty(), "a dry run created a pod");
    // (no Event either: give a published one time to arrive, then look)
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = kubectl(&["get", "events.events.k8s.io", "-n", &ns, "-o", "json"]);
    assert!(
        !text(&events.stdout).contains("InjectRefused"),
        "a dry run published an Event"
    );
}

/// The tests' webhook never sees a pod of e2e/run.sh's or the node benchmarks' namespaces
/// (labelled `sexton-e2e=true`), though they share the API server: a benchmark whose pods
/// must be admitted unchanged was once measuring this webhook's native sidecar instead.
#[test]
fn the_namespaces_of_e2e_and_the_benchmarks_are_not_served() {
    let w = webhook();
    let e2e = [
        labelled_namespace("wh-e2e", &["sexton.dev/inject=enabled", "sexton-e2e=true"]),
        labelled_namespace("wh-e2e-annotated", &["sexton-e2e=true"]),
    ];
    let annotated = pod("e2e", json!({"sexton.dev/inject": "auto"}), false);
    for ns in &e2e {
        let out = dry_run(ns, &annotated);
        assert!(out.status.success(), "{ns}: {}", text(&out.stderr));
    }
    // the same pod where the webhook serves, after them: its review is logged, theirs not
    let served = labelled_namespace("wh-e2e-control", &["sexton.dev/inject=enabled"]);
    assert!(dry_run(&served, &annotated).status.success());
    w.process.wait_log(&format!("\"pod\":\"{served}/e2e\""));
    let logs = w.process.logs();
    for ns in &e2e {
        assert!(
            !logs.contains(&format!("\"{ns}/")),
            "the tests' webhook reviewed a pod of {ns}"
        );
    }
}

#[tokio::test(flavor = "current_thread")]
async fn with_no_webhook_answering_pods_are_admitted_unchanged() {
    testenv();
    let client = admin_client().await;
    // a configuration like sexton's, its server gone
    let key = format!("sexton-test-down-{}", std::process::id());
    let cfg = configuration(
        &key,
        &format!("https://127.0.0.1:{}", free_port()),
        None,
        Some(&key),
    );
    assert!(apply(&cfg).status.success());
    let ns = labelled_namespace("wh-down", &[&format!("{key}=true")]);
    let out = create(&ns, &pod("admitted", json!({}), false));
    let _ = kubectl(&["delete", "mutatingwebhookconfiguration", &key]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        stored(&client, &ns, "admitted").await["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// The old-style webhook, on namespaces labelled `key=true`, named `name` (webhooks run in
/// the order of their configurations' names).
struct OldWebhook {
    process: Process,
    name: String,
    _scratch: Scratch,
}

impl Drop for OldWebhook {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "mutatingwebhookconfiguration", &self.name]);
    }
}

fn old_webhook(name: &str, key: &str) -> OldWebhook {
    let scratch = Scratch::new("old-webhook");
    let bin = testenv_cmd("old-webhook");
    let (cert, key_file) = (scratch.path("tls.crt"), scratch.path("tls.key"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args([
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key_file.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let port = free_port();
    let mut cmd = Command::new(&bin);
    cmd.arg(format!("127.0.0.1:{port}"))
        .arg(&cert)
        .arg(&key_file);
    let process = scratch.spawn_host("old-webhook", cmd);
    process.wait_log("serving on");
    let ca = std::fs::read_to_string(&cert).unwrap();
    let out = apply(&configuration(
        name,
        &format!("https://127.0.0.1:{port}"),
        Some(&ca),
        Some(key),
    ));
    assert!(out.status.success(), "{}", text(&out.stderr));
    OldWebhook {
        process,
        name: name.into(),
        _scratch: scratch,
    }
}

/// A native sidecar (no probe: valid either way) named `name`.
fn native_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": "sexton-test-no-such-node", "restartPolicy": "Never",
            "initContainers": [{"name": "mesh", "image": "mesh:1", "restartPolicy": "Always"}],
            "containers": [{"name": "main", "image": "app:1"}]}
    })
}

/// Waits until the API server calls the old webhook for namespaces labelled `key=true`:
/// a native sidecar created in one that sexton does not serve comes back stripped.
async fn wait_stripping(client: &Client, key: &str) {
    let alone = labelled_namespace("wh-strip-alone", &[&format!("{key}=true")]);
    for i in 0..300 {
        let name = format!("native-{i}");
        if create(&alone, &native_pod(&name)).status.success()
            && stored(client, &alone, &name).await["spec"]["initContainers"][0]["restartPolicy"]
                .is_null()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the old webhook never stripped a native sidecar");
}

#[tokio::test(flavor = "current_thread")]
async fn native_sidecars_stripped_by_an_old_webhook_are_repaired() {
    webhook();
    let client = admin_client().await;
    let key = format!("sexton-test-stripper-{}", std::process::id());
    // sorted after "sexton-webhook": it runs after sexton, which is then called again
    let old = old_webhook(&format!("zz-{key}"), &key);
    let label = format!("{key}=true");
    // the stripper really strips: a native sidecar in a namespace sexton does not serve
    wait_stripping(&client, &key).await;
    let native = native_pod("native");
    // with sexton: its own native sidecars, and those the pod had, come back
    let ns = labelled_namespace("wh-strip", &[&label, "sexton.dev/inject=enabled"]);
    let out = create(&ns, &pod("made-native", json!({}), false));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("restored restartPolicy: Always on native sidecar \"proxy\""),
        "{}",
        text(&out.stderr)
    );
    let s = stored(&client, &ns, "made-native").await;
    assert_eq!(
        s["spec"]["initContainers"][0]["restartPolicy"], "Always",
        "{s}"
    );
    let out = create(&ns, &native);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = &old;
    let s = stored(&client, &ns, "native").await;
    assert_eq!(
        s["spec"]["initContainers"][0]["restartPolicy"], "Always",
        "{s}"
    );
    assert!(old.process.logs().contains("rewrote the init containers"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_native_sidecar_stripped_before_sexton_saw_it_is_inferred_from_its_probe() {
    webhook();
    let client = admin_client().await;
    let key = format!("sexton-test-stripper-first-{}", std::process::id());
    // sorted before "sexton-webhook": it strips before sexton sees the pod
    let _old = old_webhook(&format!("aa-{key}"), &key);
    wait_stripping(&client, &key).await;
    let ns = labelled_namespace(
        "wh-strip-first",
        &[&format!("{key}=true"), "sexton.dev/inject=enabled"],
    );
    let probed = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probed"},
        "spec": {"nodeName": "sexton-test-no-such-node", "restartPolicy": "Never",
            "initContainers": [{"name": "mesh", "image": "mesh:1", "restartPolicy": "Always",
                "readinessProbe": {"tcpSocket": {"port": 15021}}}],
            "containers": [{"name": "main", "image": "app:1"}]}
    });
    // (without sexton the API server would reject it: a probe on a plain init container)
    let out = create(&ns, &probed);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = stored(&client, &ns, "probed").await;
    assert_eq!(
        s["spec"]["initContainers"][0]["restartPolicy"], "Always",
        "{s}"
    );
}

/// A self-signed certificate for 127.0.0.1 in `dir` (`NAME.crt`, `NAME.key`).
fn self_signed(dir: &Scratch, name: &str) -> (String, String) {
    let (crt, key) = (
        dir.path(&format!("{name}.crt")),
        dir.path(&format!("{name}.key")),
    );
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        &format!("/CN={name}"),
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        crt.to_str().unwrap(),
    ]);
    (crt.to_str().unwrap().into(), key.to_str().unwrap().into())
}

/// The subject of the certificate `127.0.0.1:port` serves.
fn served_subject(port: u16) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("openssl s_client -connect 127.0.0.1:{port} </dev/null 2>/dev/null | openssl x509 -noout -subject")])
        .output()
        .unwrap();
    text(&out.stdout).trim().to_string()
}

/// A webhook of its own (not registered anywhere) with `args`.
fn lone_webhook(s: &Scratch, port: u16, args: &[&str]) -> Process {
    let mut cmd = Command::new(KUBECTL_SEXTON);
    cmd.args([
        "webhook",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--metrics-addr",
        "127.0.0.1:0",
    ])
    .args([
        "--health-addr",
        "127.0.0.1:0",
        "--kubernetes-version",
        "1.34",
        "--log-format",
        "json",
        "--kubeconfig",
    ])
    .arg(&testenv().kubeconfig)
    .args(args);
    let p = s.spawn_host("webhook", cmd);
    p.wait_log("serving the webhook");
    p
}

#[test]
fn certificate_files_are_reloaded_when_they_change() {
    let s = Scratch::new("webhook-reload");
    let (crt, key) = self_signed(&s, "first");
    let (live_crt, live_key) = (s.path("tls.crt"), s.path("tls.key"));
    std::fs::copy(&crt, &live_crt).unwrap();
    std::fs::copy(&key, &live_key).unwrap();
    let port = free_port();
    let p = lone_webhook(
        &s,
        port,
        &[
            "--tls-cert-file",
            live_crt.to_str().unwrap(),
            "--tls-key-file",
            live_key.to_str().unwrap(),
        ],
    );
    assert!(
        served_subject(port).contains("first"),
        "{}",
        served_subject(port)
    );
    // replaced as a Secret volume does: new files renamed into place
    let (crt2, key2) = self_signed(&s, "second");
    std::fs::copy(&key2, s.path("tls.key.new")).unwrap();
    std::fs::copy(&crt2, s.path("tls.crt.new")).unwrap();
    std::fs::rename(s.path("tls.key.new"), &live_key).unwrap();
    std::fs::rename(s.path("tls.crt.new"), &live_crt).unwrap();
    assert!(
        wait_until(LONG, || served_subject(port).contains("second")),
        "not reloaded:\n{}",
        p.logs()
    );
    // an unreadable replacement is refused; the certificate in use stays
    std::fs::write(&live_crt, "not a certificate").unwrap();
    p.wait_log("not reloaded (the previous one is kept)");
    assert!(served_subject(port).contains("second"));
}

#[test]
fn a_self_managed_certificate_near_expiry_is_renewed_with_the_same_ca() {
    let s = Scratch::new("webhook-renew");
    let ns = labelled_namespace("wh-renew", &[]);
    let name = format!("sexton-test-renew-{}", std::process::id());
    // a CA for 10 years, a serving certificate with 10 days left
    let (ca_crt, ca_key) = (s.path("ca.crt"), s.path("ca.key"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "3650",
        "-subj",
        "/CN=test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        ca_key.to_str().unwrap(),
        "-out",
        ca_crt.to_str().unwrap(),
    ]);
    let (csr, key, crt) = (s.path("tls.csr"), s.path("tls.key"), s.path("tls.crt"));
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=old",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        csr.to_str().unwrap(),
    ]);
    std::fs::write(s.path("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        csr.to_str().unwrap(),
        "-CA",
        ca_crt.to_str().unwrap(),
        "-CAkey",
        ca_key.to_str().unwrap(),
        "-CAcreateserial",
        "-days",
        "10",
        "-extfile",
        s.path("ext").to_str().unwrap(),
        "-out",
        crt.to_str().unwrap(),
    ]);
    let from = |k: &str, p: &std::path::Path| format!("--from-file={k}={}", p.display());
    let out = kubectl(&[
        "create",
        "secret",
        "generic",
        &name,
        "-n",
        &ns,
        &from("ca.crt", &ca_crt),
        &from("ca.key", &ca_key),
        &from("tls.crt", &crt),
        &from("tls.key", &key),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let key_ = format!("{name}-never");
    assert!(
        apply(&configuration(
            &name,
            "https://127.0.0.1:1",
            None,
            Some(&key_)
        ))
        .status
        .success()
    );
    let port = free_port();
    let p = lone_webhook(
        &s,
        port,
        &[
            "--self-managed-tls",
            "--namespace",
            &ns,
            "--tls-secret",
            &name,
            "--webhook-configuration",
            &name,
            "--service",
            "renew",
            "--tls-san",
            "127.0.0.1",
        ],
    );
    let _ = kubectl(&["delete", "mutatingwebhookconfiguration", &name]);
    assert!(
        p.logs().contains("wrote a new serving certificate"),
        "{}",
        p.logs()
    );
    let secret: Value =
        serde_json::from_slice(&kubectl(&["get", "secret", &name, "-n", &ns, "-o", "json"]).stdout)
            .unwrap();
    let decode = |k: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(secret["data"][k].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(
        decode("ca.crt"),
        std::fs::read(&ca_crt).unwrap(),
        "the CA, still good, is kept"
    );
    std::fs::write(s.path("new.crt"), decode("tls.crt")).unwrap();
    // valid for 300 days more at least, signed by the CA, and served
    openssl(&[
        "x509",
        "-in",
        s.path("new.crt").to_str().unwrap(),
        "-noout",
        "-checkend",
        "25920000",
    ]);
    openssl(&[
        "verify",
        "-CAfile",
        ca_crt.to_str().unwrap(),
        s.path("new.crt").to_str().unwrap(),
    ]);
    assert!(
        served_subject(port).contains("renew."),
        "{}",
        served_subject(port)
    );
}

/// With `--image-pull-secrets`, a Pod's own pull Secret opens the registry that asks for
/// credentials; without the Secret (or without the flag) the lookup is refused and the Pod
/// admitted unchanged, the reason in the warning.
#[test]
fn image_pull_secrets_are_read_only_when_asked() {
    let r = registry();
    let s = Scratch::new("webhook-pull-secrets");
    let key = format!("sexton-test-pull-{}", std::process::id());
    let ns = labelled_namespace("wh-pull", &[&format!("{key}=true")]);
    let config = json!({"auths": {r.basic.clone(): {"username": r.user, "password": r.password}}});
    std::fs::write(s.path("config.json"), config.to_string()).unwrap();
    let out = kubectl(&[
        "create",
        "secret",
        "docker-registry",
        "regcred",
        "-n",
        &ns,
        &format!(
            "--from-file=.dockerconfigjson={}",
            s.path("config.json").display()
        ),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pod = |name: &str, secrets: bool| {
        let mut p = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"sexton.dev/inject": "wrap", "sexton.dev/sidecars": "proxy"}},
            "spec": {"nodeName": "sexton-test-no-such-node", "restartPolicy": "Never",
                "containers": [{"name": "main", "image": format!("{}/sexton-test/app:1", r.basic)},
                               {"name": "proxy", "image": "busybox:1", "command": ["sleep", "9"]}]}
        });
        if secrets {
            p["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
        }
        p
    };
    for flag in [true, false] {
        let port = free_port();
        let name = format!("{key}-{flag}");
        assert!(
            apply(&configuration(
                &name,
                &format!("https://127.0.0.1:{port}"),
                None,
                Some(&key)
            ))
            .status
            .success()
        );
        let mut args = vec![
            "--self-managed-tls",
            "--namespace",
            &ns,
            "--tls-secret",
            &name,
            "--webhook-configuration",
            &name,
            "--service",
            "pull",
            "--tls-san",
            "127.0.0.1",
            "--insecure-registry",
            &r.basic,
        ];
        if flag {
            args.push("--image-pull-secrets");
        }
        let p = lone_webhook(&s, port, &args);
        // (until the API server calls it with the new caBundle)
        let mut last = None;
        let called = wait_until(LONG, || {
            let out = dry_run(&ns, &pod("with", true));
            let called = text(&out.stdout).contains("sexton.dev/injected")
                || text(&out.stderr).contains("Warning: sexton");
            last = Some(out);
            called
        });
        let _ = kubectl(&["delete", "mutatingwebhookconfiguration", &name]);
        assert!(called, "never called:\n{}", p.logs());
        let with = last.unwrap();
        if flag {
            let answered: Value = serde_json::from_slice(&with.stdout).unwrap();
            assert_eq!(
                answered["spec"]["containers"][0]["command"],
                json!(["/sexton/sexton", "--", "/bin/app", "--serve"]),
                "{}",
                text(&with.stderr)
            );
        } else {
            assert!(
                text(&with.stderr).contains("401 unauthorized"),
                "without the flag: {}",
                text(&with.stderr)
            );
        }
        drop(p);
    }
}

/// An EphemeralJob is stamped with who creates it (the request's userInfo), over whatever
/// its creator wrote in the annotation.
#[tokio::test(flavor = "current_thread")]
async fn an_ephemeraljob_is_stamped_with_its_creator() {
    webhook();
    ejob_crd();
    let ns = labelled_namespace("wh-requester", &["sexton.dev/inject=enabled"]);
    let job = |name: &str| {
        json!({"apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob",
               "metadata": {"name": name, "annotations": {"sexton.dev/requester": "user=system:admin\ngroup=system:masters"}},
               "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"ephemeralContainers": [
                   {"name": "probe", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePolicy": "File", "targetContainerName": "app"}]}}})
    };
    for args in [
        &[
            "create",
            "role",
            "ejob",
            "--verb=create",
            "--resource=ephemeraljobs.sexton.dev",
        ][..],
        &[
            "create",
            "rolebinding",
            "ejob",
            "--role=ejob",
            "--user=alice",
        ],
    ] {
        let out = kubectl(&[args, &["-n", &ns]].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let s = Scratch::new("wh-requester");
    for (name, as_user, stamp) in [
        (
            "as-alice",
            Some("--as=alice"),
            "user=alice\ngroup=system:authenticated",
        ),
        (
            "as-admin",
            None,
            "user=admin\ngroup=system:masters\ngroup=system:authenticated\nextra=authentication.kubernetes.io/credential-id=X509SHA256=",
        ),
    ] {
        let f = s.path(&format!("{name}.json"));
        std::fs::write(&f, job(name).to_string()).unwrap();
        let mut args = vec![
            "create",
            "--dry-run=server",
            "-o",
            "json",
            "-n",
            &ns,
            "-f",
            f.to_str().unwrap(),
        ];
        args.extend(as_user);
        let out = kubectl(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let created: Value = serde_json::from_slice(&out.stdout).unwrap();
        let got = created["metadata"]["annotations"]["sexton.dev/requester"]
            .as_str()
            .unwrap_or_default();
        assert!(got.starts_with(stamp), "{name}: {got:?}");
    }
}
