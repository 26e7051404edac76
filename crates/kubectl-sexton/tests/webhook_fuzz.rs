//! No review takes the webhook down (issue 29, finding 5): the real `kubectl-sexton webhook`
//! as a process, sent AdmissionReviews that a client reaching its port could forge: a Pod
//! shaped as sexton reads it but with scalars where objects belong, names that are not
//! strings, every strategy and annotation; envelopes with the wrong kinds, operations, UIDs
//! and namespaces; truncated and non-JSON bodies. `sexton-inject`'s own decision is fuzzed
//! in crates/sexton-inject/tests/admit_arbitrary.rs; this is the webhook's handling around
//! it (the body read, the envelope, the limits, the Event of a refusal, the answer).
//!
//! Every answer must be a 200 or a 400 (never a 5xx, never none); a 200 admits, for the
//! request's own UID, and its patch (when there is one) applies to the Pod. After every case
//! the process still runs and answers a genuine review. The number of cases is fixed
//! (bounded in CI); a failure prints the body that caused it. No control plane: the
//! webhook's API server is a closed port.

use std::process::Command;

use base64::Engine;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};
use testbed::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
const CASES: u32 = 300;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..100_000_000_000).prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "main",
            "proxy",
            "wrap",
            "Always",
            "5",
            "a=b",
            "\u{0}\u{202e}"
        ])
        .prop_map(Value::from),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A field that is usually of the right shape, sometimes anything.
fn or_any(right: impl Strategy<Value = Value> + 'static) -> BoxedStrategy<Value> {
    prop_oneof![4 => right, 1 => any_json()].boxed()
}

fn strings(items: &'static [&'static str]) -> BoxedStrategy<Value> {
    prop::sample::select(items.to_vec())
        .prop_map(Value::from)
        .boxed()
}

/// Images whose lookups fail at once (a closed port on loopback), or that are not images.
fn image() -> BoxedStrategy<Value> {
    or_any(strings(&[
        "127.0.0.1:1/app:1",
        "127.0.0.1:1/proxy@sha256:0000",
        "",
        "UPPER:case",
    ]))
}

fn container() -> BoxedStrategy<Value> {
    let object = (
        or_any(strings(&["main", "proxy", "logs", ""])),
        image(),
        prop::option::of(or_any(
            prop::collection::vec(strings(&["sh", "-c", "x"]), 0..3).prop_map(Value::from),
        )),
        prop::option::of(or_any(strings(&["Always", "Never"]))),
        prop::option::of(any_json()),
        prop::option::of(any_json()),
    )
        .prop_map(|(name, image, command, restart, probe, lifecycle)| {
            let mut c = Map::new();
            c.insert("name".into(), name);
            c.insert("image".into(), image);
            if let Some(v) = command {
                c.insert("command".into(), v);
            }
            if let Some(v) = restart {
                c.insert("restartPolicy".into(), v);
            }
            if let Some(v) = probe {
                c.insert("startupProbe".into(), v);
            }
            if let Some(v) = lifecycle {
                c.insert("lifecycle".into(), v);
            }
            Value::Object(c)
        });
    prop_oneof![5 => object, 1 => leaf()].boxed()
}

fn annotations() -> BoxedStrategy<Value> {
    let key = strings(&[
        "sexton.dev/inject",
        "sexton.dev/sidecars",
        "sexton.dev/strategy",
        "sexton.dev/injected",
        "kruise.io/sidecar",
    ]);
    let value = or_any(strings(&[
        "wrap",
        "native",
        "native-wrap",
        "auto",
        "controller",
        "disabled",
        "proxy",
        "main,proxy",
    ]));
    or_any(prop::collection::vec((key, value), 0..4).prop_map(|kv| {
        Value::Object(
            kv.into_iter()
                .map(|(k, v)| (k.as_str().unwrap().to_string(), v))
                .collect(),
        )
    }))
}

fn pod() -> BoxedStrategy<Value> {
    (
        annotations(),
        prop::option::of(any_json()),
        or_any(prop::collection::vec(container(), 0..4).prop_map(Value::from)),
        prop::option::of(or_any(
            prop::collection::vec(container(), 0..3).prop_map(Value::from),
        )),
        or_any(strings(&["Never", "OnFailure", "Always"])),
        prop::option::of(leaf()),
    )
        .prop_map(|(annotations, owners, containers, inits, restart, grace)| {
            let mut spec = json!({"containers": containers, "restartPolicy": restart});
            if let Some(i) = inits {
                spec["initContainers"] = i;
            }
            if let Some(g) = grace {
                spec["terminationGracePeriodSeconds"] = g;
            }
            let mut meta = json!({"generateName": "fuzz-", "annotations": annotations});
            if let Some(o) = owners {
                meta["ownerReferences"] = o;
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        })
        .boxed()
}

/// A body: a review around a Pod (most of the time), any JSON, or bytes that are not JSON.
fn body() -> impl Strategy<Value = (String, Vec<u8>)> {
    let review = (
        or_any(strings(&["admission.k8s.io/v1"])),
        or_any(strings(&["AdmissionReview"])),
        or_any(strings(&["0b6bd2d2-fuzz"])),
        or_any(Just(json!({"group": "", "version": "v1", "kind": "Pod"}))),
        prop::option::of(or_any(strings(&[
            "default",
            "kube-system",
            "no-such-ns",
            "",
        ]))),
        or_any(strings(&["CREATE", "UPDATE", "DELETE", "create"])),
        or_any(pod()),
        prop::option::of(leaf()),
    )
        .prop_map(|(api, kind, uid, gvk, ns, op, object, dry)| {
            let mut request = json!({
                "uid": uid, "kind": gvk,
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": op, "userInfo": {"username": "mallory"}, "object": object,
            });
            if let Some(n) = ns {
                request["namespace"] = n;
            }
            if let Some(d) = dry {
                request["dryRun"] = d;
            }
            json!({"apiVersion": api, "kind": kind, "request": request})
                .to_string()
                .into_bytes()
        })
        .boxed();
    let bytes = prop_oneof![
        8 => review.clone(),
        1 => any_json().prop_map(|v| v.to_string().into_bytes()),
        1 => (review, any::<prop::sample::Index>()).prop_map(|(b, i)| b[..i.index(b.len())].to_vec()),
    ];
    (
        strings(&["/mutate", "/mutate/annotated"]).prop_map(|p| p.as_str().unwrap().to_string()),
        bytes,
    )
}

/// A webhook of its own, with certificate files from openssl; its port and CA file.
fn webhook(s: &Scratch) -> (Process, u16, String) {
    let (crt, key) = (s.path("tls.crt"), s.path("tls.key"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fuzz",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        // (an end-entity certificate that is its own trust anchor: webpki refuses one that
        // says it is a CA, openssl's default)
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An API server that refuses every connection at once: the Events of refusals and the
    // owner lookups before them fail fast (what they write is tests/webhook_hostile.rs's
    // concern), and the test needs no control plane.
    let kubeconfig = s.path("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n\
         current-context: c\n",
    )
    .unwrap();
    let port = free_port();
    let mut cmd = Command::new(KUBECTL_SEXTON);
    cmd.args(["webhook", "--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .arg("--tls-cert-file")
        .arg(&crt)
        .arg("--tls-key-file")
        .arg(&key)
        .args(["--kubernetes-version", "1.34", "--registry-timeout", "2s"])
        .args(["--sexton-image", "sexton:test", "--kubeconfig"])
        .arg(&kubeconfig);
    let process = s.spawn_host("webhook", cmd);
    process.wait_log("serving the webhook");
    (process, port, crt.to_str().unwrap().to_string())
}

fn connector(ca: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

/// One POST on a connection of its own; the status and the body (0 and why: no answer).
async fn post(
    port: u16,
    tls: &tokio_rustls::TlsConnector,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut s = tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        // (the webhook may answer and close before the whole of a refused body is sent)
        let _ = s.write_all(body).await;
        let mut got = vec![];
        let _ = s.read_to_end(&mut got).await;
        Ok::<_, String>(String::from_utf8_lossy(&got).into_owned())
    };
    let answer = match tokio::time::timeout(std::time::Duration::from_secs(20), exchange).await {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => return (0, e),
        Err(_) => return (0, "no answer within 20 s".into()),
    };
    let status = answer.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// What was wrong with an answer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Wrong(String);

/// What every answer must be, given the body that was sent.
fn check(sent: &[u8], status: u16, answer: &str) -> Result<(), Wrong> {
    match status {
        400 => return Ok(()),
        200 => {}
        _ => return Err(Wrong(format!("status {status}: {answer}"))),
    }
    let review: Value = serde_json::from_slice(sent)
        .map_err(|e| Wrong(format!("200 for a body that is not JSON ({e})")))?;
    let got: Value = serde_json::from_str(answer)
        .map_err(|e| Wrong(format!("an answer that is not JSON ({e}): {answer}")))?;
    let r = &got["response"];
    if r["uid"] != review["request"]["uid"] || r["allowed"] != true {
        return Err(Wrong(format!(
            "not an admission of the request's UID: {answer}"
        )));
    }
    if let Some(patch) = r["patch"].as_str() {
        let ops = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .map_err(|e| Wrong(format!("patch not base64 ({e})")))?;
        let ops: json_patch::Patch =
            serde_json::from_slice(&ops).map_err(|e| Wrong(format!("not a JSON patch ({e})")))?;
        let mut pod = review["request"]["object"].clone();
        json_patch::patch(&mut pod, &ops)
            .map_err(|e| Wrong(format!("the patch does not apply to the Pod ({e})")))?;
    }
    Ok(())
}

#[test]
fn arbitrary_reviews_are_answered_and_never_take_the_webhook_down() {
    let s = Scratch::new("webhook-fuzz");
    let (process, port, ca) = webhook(&s);
    let process = std::cell::RefCell::new(process);
    let tls = connector(&ca);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let genuine = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "genuine", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "default",
            "operation": "CREATE", "userInfo": {"username": "u"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}}
    })
    .to_string();
    // No shrinking: a body that kills the process fails every case after it, so a shrunk
    // "minimal" input would be any body at all; the one reported is the one that failed.
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 0,
        ..Config::default()
    });
    let result = runner.run(&body(), |(path, sent)| {
        let (status, answer) = rt.block_on(post(port, &tls, &path, &sent));
        let shown = || String::from_utf8_lossy(&sent[..sent.len().min(2000)]).into_owned();
        check(&sent, status, &answer)
            .map_err(|why| TestCaseError::fail(format!("{path}: {why}\nbody: {}", shown())))?;
        if !process.borrow_mut().is_running() {
            return Err(TestCaseError::fail(format!(
                "the webhook exited after {path}\nbody: {}",
                shown()
            )));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}\nwebhook log:\n{}", process.borrow().logs());
    }
    let (status, answer) = rt.block_on(post(port, &tls, "/mutate", genuine.as_bytes()));
    assert_eq!(status, 200, "a genuine review after the fuzzing: {answer}");
    let mut process = process.into_inner();
    assert!(
        process.is_running(),
        "the webhook exited:\n{}",
        process.logs()
    );
}
