//! The real test control plane (`scripts/testenv.sh`): starts it if it is not running,
//! gives a `kube::Client` with admin rights, and a fresh namespace per test.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::local::output_with_input;
use crate::services::{ROOT, TESTENV, require_service};
use crate::wait::wait_until;

pub struct TestEnv {
    pub kubeconfig: PathBuf,
    pub state: PathBuf,
    pub ca: PathBuf,
    pub host: String,
    pub port: u16,
}

/// The running test control plane (`scripts/testenv.sh up`), asked for once per test
/// process; `require_service` when it is not running.
pub fn testenv() -> &'static TestEnv {
    static ENV: OnceLock<TestEnv> = OnceLock::new();
    ENV.get_or_init(|| {
        let up = Command::new(TESTENV)
            .arg("status")
            .output()
            .expect("run scripts/testenv.sh");
        if !up.status.success() {
            require_service(
                "the test API server",
                "scripts/testenv.sh up` (its first run builds it from Go modules, ~15 min); stop it with `scripts/testenv.sh down",
            );
        }
        let env =
            String::from_utf8(Command::new(TESTENV).arg("env").output().unwrap().stdout).unwrap();
        let kubeconfig = PathBuf::from(env.trim().trim_start_matches("export KUBECONFIG="));
        let state = kubeconfig.parent().unwrap().to_path_buf();
        let port = std::env::var("SEXTON_API_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(16443);
        TestEnv {
            ca: state.join("pki/ca.crt"),
            kubeconfig,
            state,
            host: "127.0.0.1".into(),
            port,
        }
    })
}

pub async fn admin_client() -> Client {
    let env = testenv();
    let kc = Kubeconfig::read_from(&env.kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Creates a namespace of its own for one test and returns its name.
pub async fn fresh_namespace(client: &Client, test: &str) -> String {
    let name = fresh_name(test);
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

/// A new namespace named `it-{test}-{pid}-{seq}`, with `labels` (`key=value`) set in the
/// same request that creates it. Not `kubectl create` then `kubectl label`: the API
/// server's admission plugins (webhook namespaceSelectors, Pod Security) read namespaces
/// from an informer cache, and a label added by a second request can reach that cache
/// after the test's next pod does. The pod is then admitted as if the namespace had no
/// label (a flake seen right after `testenv.sh up`, when the API server is busiest). A
/// namespace missing from the cache is read from storage instead, so one request is safe.
pub fn labelled_namespace(test: &str, labels: &[&str]) -> String {
    let name = fresh_name(test);
    let labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|l| {
            let (k, v) = l.split_once('=').expect("a label is key=value");
            (k.to_string(), v.into())
        })
        .collect();
    let manifest = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}});
    let out = output_with_input(
        Command::new("kubectl")
            .env("KUBECONFIG", &testenv().kubeconfig)
            .args(["create", "-f", "-"]),
        manifest.to_string().as_bytes(),
    );
    assert!(
        out.status.success(),
        "creating namespace {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    name
}

/// `it-{test}-{pid}-{seq}`: unique in the test process, and apart from other processes'.
fn fresh_name(test: &str) -> String {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("it-{test}-{}-{seq}", std::process::id())
}

/// kubectl against the test API server.
pub fn kubectl(args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .env("KUBECONFIG", &testenv().kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

/// Waits (at most 30 s) until `who` (as `--as` names them: a user, or
/// `system:serviceaccount:NS:NAME`) may `verb` the `resource` (`pods`, `pods/log`,
/// `ephemeraljobs.sexton.dev`) in `ns`. A RoleBinding takes effect once the API server's
/// authorizer has it in its cache, which under load is not at once: a test that grants a
/// right and uses it at once was refused (403) in a loaded run.
pub fn wait_allowed(ns: &str, who: &str, verb: &str, resource: &str) {
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    let (as_who, subresource) = (format!("--as={who}"), format!("--subresource={sub}"));
    let mut args = vec!["auth", "can-i", verb, resource, "-n", ns, &as_who];
    if !sub.is_empty() {
        args.push(&subresource);
    }
    let mut last = String::new();
    let allowed = wait_until(std::time::Duration::from_secs(30), || {
        let out = kubectl(&args);
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out.status.success()
    });
    assert!(
        allowed,
        "{who} still may not {verb} {resource} {sub} in {ns} after 30 s (times the slowdown): {last}"
    );
}

/// kubectl against the test API server, `input` on its stdin.
pub fn kubectl_with_input(args: &[&str], input: &[u8]) -> std::process::Output {
    let mut cmd = Command::new("kubectl");
    cmd.env("KUBECONFIG", &testenv().kubeconfig).args(args);
    output_with_input(&mut cmd, input)
}

/// Installs the EphemeralJob CRD (deploy/crd-ephemeraljob.yaml) and waits until the API
/// server serves it; once per test process. (Not `kubectl wait --for=condition=Established`:
/// it fails at once on a CRD just created, whose status has no conditions yet.)
pub fn ejob_crd() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let crd = format!("{}/deploy/crd-ephemeraljob.yaml", ROOT);
        let out = kubectl(&["apply", "--server-side", "-f", &crd]);
        assert!(
            out.status.success(),
            "kubectl apply {crd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let established = r#"jsonpath={.status.conditions[?(@.type=="Established")].status}"#;
        let served = wait_until(Duration::from_secs(30), || {
            let out = kubectl(&["get", "crd/ephemeraljobs.sexton.dev", "-o", established]);
            out.status.success() && out.stdout == b"True"
        });
        assert!(served, "the EphemeralJob CRD is not Established after 30 s");
    });
}

/// A kubeconfig for ServiceAccount `ns/sa` (a fresh 2-hour token from the TokenRequest API).
pub fn service_account_kubeconfig(
    ns: &str,
    sa: &str,
    path: &std::path::Path,
) -> std::path::PathBuf {
    let env = testenv();
    let out = kubectl(&["create", "token", sa, "-n", ns, "--duration=2h"]);
    assert!(
        out.status.success(),
        "create token: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap();
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: https://{}:{}\n    certificate-authority: {}\nusers:\n- name: {sa}\n  user:\n    token: {}\ncontexts:\n- name: t\n  context: {{cluster: t, user: {sa}}}\ncurrent-context: t\n",
            env.host,
            env.port,
            env.ca.display(),
            token.trim()
        ),
    )
    .unwrap();
    path.to_path_buf()
}
