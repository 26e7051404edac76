//! `kubectl sexton version` against the real test API server: with the controller installed
//! by the Helm chart for real (`helm install`, in a namespace of its own; no node runs its
//! pods, so 0 replicas are ready) and the webhook not installed; with an API server that is
//! unreachable, one that never answers (exit 2, the client's version still printed), and
//! credentials that may read nothing (a line per part saying so, exit 0).

use std::net::TcpListener;
use std::process::{Command, Output};

use serde_json::Value;
use testbed::*;

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn version(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    Command::new(KUBECTL_SEXTON)
        .arg("version")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

/// The line of `part` in the text output.
fn line<'a>(out: &'a str, part: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{part}:")))
        .unwrap_or_else(|| panic!("no {part} line: {out}"))
}

/// A release of the chart with the controller only (the CRD is the test process's, the
/// webhook would stand between every test's Pods and the API server), uninstalled and its
/// namespace deleted on drop.
struct Release {
    name: String,
    ns: String,
}

impl Release {
    fn install() -> Release {
        testenv();
        ejob_crd();
        let name = format!("sexton-it-{}", std::process::id());
        let ns = name.clone();
        let out = Command::new(helm_bin())
            .env("KUBECONFIG", &testenv().kubeconfig)
            .args([
                "install",
                &name,
                &format!("{ROOT}/charts/sexton"),
                "--namespace",
                &ns,
                "--create-namespace",
                "--set",
                "crds.install=false",
                "--set",
                "webhook.enabled=false",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "helm install: {}", text(&out.stderr));
        Release { name, ns }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = Command::new(helm_bin())
            .env("KUBECONFIG", &testenv().kubeconfig)
            .args(["uninstall", &self.name, "--namespace", &self.ns])
            .output();
        let _ = kubectl(&["delete", "namespace", &self.ns, "--wait=false"]);
    }
}

#[test]
fn reports_what_the_chart_installed() {
    let release = Release::install();
    let env = testenv();
    let out = version(&env.kubeconfig, &["--sexton-namespace", &release.ns]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));

    assert_eq!(
        line(&stdout, "client"),
        format!("client:     kubectl-sexton {VERSION}")
    );
    let server: Value =
        serde_json::from_slice(&kubectl(&["version", "-o", "json"]).stdout).unwrap();
    let api = server["serverVersion"]["gitVersion"].as_str().unwrap();
    assert!(
        line(&stdout, "api server").ends_with(&format!(" {api}")),
        "{stdout}"
    );
    assert_eq!(
        line(&stdout, "controller"),
        format!(
            "controller: {VERSION} (deployment {ns}/{ns}-controller, image ghcr.io/sexton-dev/kubectl-sexton:{VERSION}, 0/2 ready)",
            ns = release.ns
        )
    );
    assert_eq!(
        line(&stdout, "webhook"),
        "webhook:    not installed (no Deployment labelled app.kubernetes.io/name=sexton-webhook)"
    );
    assert_eq!(
        line(&stdout, "crd"),
        "crd:        ephemeraljobs.sexton.dev v1alpha1 (served: v1alpha1; stored: v1alpha1)"
    );

    let out = version(
        &env.kubeconfig,
        &["--sexton-namespace", &release.ns, "-o", "json"],
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["client"], VERSION);
    let controller = &json["server"]["controller"];
    assert_eq!(controller["state"], "installed", "{json}");
    assert_eq!(controller["installed"][0]["version"], VERSION, "{json}");
    assert_eq!(controller["installed"][0]["replicas"], 2, "{json}");
    assert_eq!(json["server"]["webhook"]["state"], "notInstalled", "{json}");
}

/// An API server that cannot be reached: the client's version still printed, exit 2
/// (cannot run, as every command), stderr naming the server.
#[test]
fn an_unreachable_api_server_is_exit_2_naming_it() {
    let scratch = Scratch::new("version-unreachable");
    let port = free_port();
    let kc = scratch.path("closed.kubeconfig");
    write_kubeconfig(&kc, port);
    let out = version(&kc, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("client: kubectl-sexton {VERSION}\n")
    );
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "kubectl-sexton version: cannot reach the Kubernetes API server https://127.0.0.1:{port}: "
        )) && err.lines().count() == 1,
        "{err}"
    );
    let out = version(&kc, &["-o", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json, serde_json::json!({"client": VERSION}));
}

#[test]
fn an_api_server_that_never_answers_times_out() {
    let scratch = Scratch::new("version-silent");
    // accepts connections (the kernel's backlog) and never says anything
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let kc = scratch.path("silent.kubeconfig");
    write_kubeconfig(&kc, silent.local_addr().unwrap().port());
    let start = std::time::Instant::now();
    let out = version(&kc, &["--request-timeout=1s"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("no answer within 1s (--request-timeout)"),
        "{err}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn credentials_that_may_read_nothing_are_lines_saying_so() {
    testenv();
    let scratch = Scratch::new("version-forbidden");
    let ns = format!("it-version-forbidden-{}", std::process::id());
    assert!(kubectl(&["create", "namespace", &ns]).status.success());
    assert!(
        kubectl(&["create", "serviceaccount", "nobody", "-n", &ns])
            .status
            .success()
    );
    let kc = service_account_kubeconfig(&ns, "nobody", &scratch.path("nobody.kubeconfig"));
    let out = version(&kc, &["--sexton-namespace", &ns]);
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // /version is open to every authenticated user; the rest is not
    assert!(line(&stdout, "api server").contains(" v1."), "{stdout}");
    assert!(
        line(&stdout, "controller").contains("unknown (forbidden: "),
        "{stdout}"
    );
    assert!(
        line(&stdout, "crd").contains("unknown (forbidden: "),
        "{stdout}"
    );
}

/// The macOS build's client (src/shared/kube_client/kubeconfig_ca.rs), which nothing here
/// can run as a macOS binary, selected on Linux by SEXTON_KUBECONFIG_CA_CLIENT: it trusts
/// the kubeconfig's certificate authority and presents its client certificate (the test
/// API server's admin kubeconfig names both by file), so `version` reaches and reads the
/// API server; a kubeconfig without a certificate authority is refused naming the field.
#[test]
fn the_macos_client_trusts_the_kubeconfigs_ca() {
    let kubeconfig = &testenv().kubeconfig;
    let run = |path: &std::path::Path| {
        Command::new(KUBECTL_SEXTON)
            .args(["version", "--kubeconfig"])
            .arg(path)
            .env("SEXTON_KUBECONFIG_CA_CLIENT", "1")
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let out = run(kubeconfig);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(line(&stdout, "api server").contains("v1."), "{stdout}");

    let scratch = Scratch::new("version-kubeconfig-ca");
    let no_ca = scratch.path("no-ca.kubeconfig");
    let kept: String = std::fs::read_to_string(kubeconfig)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("certificate-authority"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&no_ca, kept).unwrap();
    let out = run(&no_ca);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}{stderr}", text(&out.stdout));
    assert!(stderr.contains("certificate-authority"), "{stderr}");
}

#[test]
fn client_only_contacts_nothing() {
    let out = Command::new(KUBECTL_SEXTON)
        .args(["version", "--client", "--kubeconfig", "/nonexistent"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("client: kubectl-sexton {VERSION}\n")
    );
}

#[test]
fn a_bad_timeout_is_refused_naming_the_flag() {
    let out = Command::new(KUBECTL_SEXTON)
        .args(["version", "--request-timeout=0s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("--request-timeout"), "{err}");
}

/// A kubeconfig for 127.0.0.1:`port`, with the test CA and an admin-like (unused) token.
fn write_kubeconfig(path: &std::path::Path, port: u16) {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: none\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\n"
        ),
    )
    .unwrap();
}
