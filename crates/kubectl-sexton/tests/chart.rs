//! The Helm chart `charts/sexton`: its versions are the workspace's, its CRD is the one the
//! binary generates, deploy/ is its rendering, it lints, and each certificate mode of the
//! webhook (and the optional parts) applies with a server-side dry run against the real
//! test API server, in a namespace at the `restricted` Pod Security level, with strict
//! field validation. `helm` is built from its Go module by scripts/tools.sh (cached).

use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::{Value, json};
use testbed::*;

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn chart() -> String {
    format!("{ROOT}/charts/sexton")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn helm(args: &[&str]) -> Output {
    Command::new(helm_bin())
        .env("KUBECONFIG", &testenv().kubeconfig)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("sexton-helm-cache"),
        )
        .args(args)
        .output()
        .unwrap()
}

/// `helm template` of the chart into `namespace` with `--set` values; panics if it fails.
fn render(namespace: &str, set: &[&str]) -> String {
    let out = try_render(namespace, set);
    assert!(
        out.status.success(),
        "helm template {set:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn try_render(namespace: &str, set: &[&str]) -> Output {
    let chart = chart();
    let mut args = vec!["template", "sexton", &chart, "--namespace", namespace];
    for s in set {
        args.extend(["--set", s]);
    }
    helm(&args)
}

fn objects(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn get<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    find(objs, kind, name).unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

fn args_of(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// `kubectl apply --server-side --dry-run=server` of `yaml`; returns stdout, panics with
/// stderr if refused, or if the API server warned about Pod Security or deprecations.
fn dry_run(yaml: &str) -> String {
    let out = output_with_input(
        Command::new("kubectl")
            .env("KUBECONFIG", &testenv().kubeconfig)
            .args([
                "apply",
                "--server-side",
                "--dry-run=server",
                "--field-manager=sexton-chart-test",
                // (cluster-wide objects of the same names may exist, applied by other tests;
                // a dry run takes their fields over without keeping anything)
                "--force-conflicts",
                "-f",
                "-",
            ]),
        yaml.as_bytes(),
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "dry run refused: {err}");
    assert!(
        !err.contains("PodSecurity") && !err.contains("deprecated"),
        "warnings: {err}"
    );
    text(&out.stdout)
}

/// The real binary accepts the arguments each rendered Deployment gives it: run with them
/// and a kubeconfig that does not exist, it gets past the flags (no usage error) and stops
/// at the kubeconfig.
fn binary_accepts_the_arguments(objs: &[Value]) {
    for d in objs.iter().filter(|o| o["kind"] == "Deployment") {
        let args = args_of(d);
        let out = Command::new(KUBECTL_SEXTON)
            .args(&args)
            .arg("--kubeconfig=/nonexistent/kubeconfig")
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran without a kubeconfig");
        assert!(
            !err.contains("Usage:") && err.contains("/nonexistent/kubeconfig"),
            "{args:?}: {err}"
        );
    }
}

/// A fresh namespace at the `restricted` Pod Security level, deleted on drop (a server dry
/// run cannot create objects in a namespace that does not exist).
struct Ns(String);

impl Ns {
    fn new(test: &str) -> Ns {
        Ns(labelled_namespace(
            &format!("chart-{test}"),
            &[
                "pod-security.kubernetes.io/enforce=restricted",
                "pod-security.kubernetes.io/warn=restricted",
            ],
        ))
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.0, "--wait=false"]);
    }
}

/// The stand-in CRDs of cert-manager and the Prometheus Operator (tests/chart/), applied for
/// real once per test process and left installed (cluster-wide, idempotent).
fn stand_in_crds() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let file = format!("{ROOT}/crates/kubectl-sexton/tests/chart/stand-in-crds.yaml");
        for args in [
            vec!["apply", "--server-side", "-f", &file],
            vec![
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                "crd/certificates.cert-manager.io",
                "crd/issuers.cert-manager.io",
                "crd/servicemonitors.monitoring.coreos.com",
            ],
        ] {
            let out = kubectl(&args);
            assert!(
                out.status.success(),
                "kubectl {args:?}: {}",
                text(&out.stderr)
            );
        }
    });
}

#[test]
fn chart_version_and_app_version_are_the_workspace_version() {
    let chart: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(format!("{}/Chart.yaml", chart())).unwrap(),
    )
    .unwrap();
    assert_eq!(chart["version"], VERSION, "Chart.yaml version");
    assert_eq!(chart["appVersion"], VERSION, "Chart.yaml appVersion");
    // and the images default to that tag
    let objs = objects(&render("sexton-system", &[]));
    let d = get(&objs, "Deployment", "sexton-controller");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("ghcr.io/sexton-dev/kubectl-sexton:{VERSION}")
    );
    assert!(
        args_of(d).contains(&format!(
            "--quick-exit-image=ghcr.io/sexton-dev/sexton-quick-exit:{VERSION}"
        )),
        "{:?}",
        args_of(d)
    );
    let w = get(&objs, "Deployment", "sexton-webhook");
    assert!(args_of(w).contains(&format!(
        "--sexton-image=ghcr.io/sexton-dev/sexton:{VERSION}"
    )));
}

#[test]
fn chart_crd_is_the_generated_one() {
    let out = Command::new(KUBECTL_SEXTON).arg("crd").output().unwrap();
    assert!(out.status.success());
    let committed =
        std::fs::read_to_string(format!("{}/files/crd-ephemeraljob.yaml", chart())).unwrap();
    assert_eq!(
        text(&out.stdout),
        committed,
        "charts/sexton/files/crd-ephemeraljob.yaml is stale: run `kubectl-sexton crd > charts/sexton/files/crd-ephemeraljob.yaml`, then scripts/manifests.sh"
    );
}

#[test]
fn deploy_is_the_chart_rendered() {
    let out = Command::new(format!("{ROOT}/scripts/manifests.sh"))
        .arg("check")
        .env("HELM", helm_bin())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn chart_lints_in_every_certificate_mode() {
    let chart = chart();
    for set in [
        vec![],
        vec![
            "webhook.certificate=secret",
            "webhook.tls.secretName=tls",
            "webhook.tls.caBundle=Cg==",
        ],
        vec!["webhook.certificate=cert-manager"],
        vec![
            "metrics.serviceMonitor.enabled=true",
            "controller.watchNamespace=apps",
        ],
    ] {
        let mut args = vec!["lint", "--strict", &chart];
        for s in &set {
            args.extend(["--set", s]);
        }
        let out = helm(&args);
        assert!(
            out.status.success(),
            "helm lint {set:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

#[test]
fn default_values_apply_with_server_dry_run() {
    let ns = Ns::new("default");
    let yaml = render(&ns.0, &[]);
    let objs = objects(&yaml);
    // self-managed certificate: the webhook writes the Secret and the caBundle itself
    let w = get(&objs, "Deployment", "sexton-webhook");
    let args = args_of(w);
    for a in [
        "webhook",
        "--self-managed-tls",
        "--tls-secret=sexton-webhook-tls",
        "--webhook-configuration=sexton-webhook",
        "--service=sexton-webhook",
    ] {
        assert!(args.contains(&a.to_string()), "{a} missing: {args:?}");
    }
    let role = get(&objs, "Role", "sexton-webhook-tls");
    assert_eq!(role["rules"][0]["resourceNames"][0], "sexton-webhook-tls");
    let mwc = get(&objs, "MutatingWebhookConfiguration", "sexton-webhook");
    assert!(mwc["webhooks"][0]["clientConfig"]["caBundle"].is_null());
    assert_eq!(
        mwc["webhooks"][0]["clientConfig"]["service"]["namespace"],
        ns.0.as_str()
    );
    // never the webhook's own namespace nor kube-system
    let excluded = &mwc["webhooks"][1]["namespaceSelector"]["matchExpressions"][1];
    assert_eq!(excluded["operator"], "NotIn");
    assert_eq!(excluded["values"], serde_json::json!(["kube-system", ns.0]));
    let c = get(&objs, "Deployment", "sexton-controller");
    assert_eq!(args_of(c)[0], "controller");
    assert!(args_of(c).contains(&"--leader-elect-name=sexton-controller".to_string()));
    get(&objs, "PodDisruptionBudget", "sexton-controller");
    get(&objs, "PodDisruptionBudget", "sexton-webhook");
    get(
        &objs,
        "CustomResourceDefinition",
        "ephemeraljobs.sexton.dev",
    );
    binary_accepts_the_arguments(&objs);

    let applied = dry_run(&yaml);
    for kind in [
        "customresourcedefinition.apiextensions.k8s.io/ephemeraljobs.sexton.dev",
        "deployment.apps/sexton-controller",
        "deployment.apps/sexton-webhook",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/sexton-webhook",
        "poddisruptionbudget.policy/sexton-webhook",
        "service/sexton-webhook",
        "role.rbac.authorization.k8s.io/sexton-webhook-tls",
    ] {
        assert!(applied.contains(kind), "{kind} missing: {applied}");
    }
}

/// Recognition's values: more vendors in a ConfigMap the webhook reads (and rolls on), the
/// configurations' list/watch only while recognition is on.
#[test]
fn recognition_values_give_the_catalogue_and_take_the_rights() {
    let ns = Ns::new("recognition");
    let chart = chart();
    let extra = r#"recognition.extraVendors=[{"name":"Acme","containers":["acme-proxy"],"markers":[{"on":"label","key":"acme.example/injected"}]}]"#;
    let out = helm(&[
        "template",
        "sexton",
        &chart,
        "--namespace",
        &ns.0,
        "--set-json",
        extra,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    let objs = objects(&yaml);
    let cm = get(&objs, "ConfigMap", "sexton-sidecar-catalogue");
    let vendors: Value =
        serde_json::from_str(cm["data"]["vendors.json"].as_str().unwrap()).unwrap();
    assert!(
        sexton_inject::Catalogue::with_extra(&vendors).is_ok(),
        "{vendors}"
    );
    let w = get(&objs, "Deployment", "sexton-webhook");
    let args = args_of(w);
    for a in [
        "--recognise=true",
        "--sidecar-catalogue=/etc/sexton/catalogue/vendors.json",
    ] {
        assert!(args.contains(&a.to_string()), "{args:?}");
    }
    let pod = &w["spec"]["template"];
    assert!(
        pod["metadata"]["annotations"]["checksum/sidecar-catalogue"].is_string(),
        "{pod}"
    );
    assert!(
        pod.to_string().contains("sexton-sidecar-catalogue"),
        "the ConfigMap is mounted"
    );
    dry_run(&yaml);
    // off: no catalogue, no reading of the configurations
    let objs = objects(&render(&ns.0, &["recognition.enabled=false"]));
    assert!(
        args_of(get(&objs, "Deployment", "sexton-webhook"))
            .contains(&"--recognise=false".to_string())
    );
    assert!(find(&objs, "ConfigMap", "sexton-sidecar-catalogue").is_none());
    let role = get(&objs, "ClusterRole", "sexton-webhook");
    assert!(
        rules_for(role, "mutatingwebhookconfigurations")
            .iter()
            .all(|r| !r["verbs"].to_string().contains("\"list\"")),
        "{role}"
    );
    // a value the schema refuses is named
    let out = try_render(&ns.0, &["recognition.extraVendors[0].name=x"]);
    assert!(
        !out.status.success() && text(&out.stderr).contains("recognition"),
        "{}",
        text(&out.stderr)
    );
}

/// The ClusterRole's rules about `resource`.
fn rules_for<'a>(role: &'a Value, resource: &str) -> Vec<&'a Value> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            r["resources"]
                .to_string()
                .contains(&format!("\"{resource}\""))
        })
        .collect()
}

/// webhook.binarySource: the flag, and the right to watch Nodes only where `auto` reads them.
#[test]
fn binary_source_gives_the_flag_and_the_nodes_rights_only_for_auto() {
    let ns = Ns::new("binary-source");
    for (value, reads_nodes) in [("auto", true), ("image-volume", false), ("copy", false)] {
        let objs = objects(&render(&ns.0, &[&format!("webhook.binarySource={value}")]));
        let args = args_of(get(&objs, "Deployment", "sexton-webhook"));
        assert!(
            args.contains(&format!("--binary-source={value}")),
            "{args:?}"
        );
        let nodes = rules_for(get(&objs, "ClusterRole", "sexton-webhook"), "nodes");
        assert_eq!(!nodes.is_empty(), reads_nodes, "{value}: {nodes:?}");
        if reads_nodes {
            assert_eq!(nodes[0]["verbs"], json!(["get", "list", "watch"]));
        }
    }
    let out = try_render(&ns.0, &["webhook.binarySource=floppy"]);
    assert!(
        !out.status.success() && text(&out.stderr).contains("binarySource"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn secret_certificate_mode_applies_with_server_dry_run() {
    let ns = Ns::new("secret");
    let ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";
    let ca_set = format!("webhook.tls.caBundle={ca}");
    let yaml = render(
        &ns.0,
        &[
            "webhook.certificate=secret",
            "webhook.tls.secretName=my-tls",
            &ca_set,
        ],
    );
    let objs = objects(&yaml);
    let w = get(&objs, "Deployment", "sexton-webhook");
    let args = args_of(w);
    assert!(
        args.contains(&"--tls-cert-file=/etc/sexton/tls/tls.crt".to_string()),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a == "--self-managed-tls"), "{args:?}");
    assert_eq!(
        w["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "my-tls"
    );
    let mwc = get(&objs, "MutatingWebhookConfiguration", "sexton-webhook");
    for hook in mwc["webhooks"].as_array().unwrap() {
        assert_eq!(hook["clientConfig"]["caBundle"], ca);
    }
    // no self-managed rights: no Secret role, no patching of the configuration (reading
    // the configurations, for the webhook chain, is recognition's)
    assert!(find(&objs, "Role", "sexton-webhook-tls").is_none());
    let role = get(&objs, "ClusterRole", "sexton-webhook");
    let on_configurations: Vec<&Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.to_string().contains("mutatingwebhookconfigurations"))
        .collect();
    assert_eq!(on_configurations.len(), 1, "{role}");
    assert_eq!(
        on_configurations[0]["verbs"],
        json!(["list", "watch"]),
        "{role}"
    );
    assert!(
        on_configurations[0].get("resourceNames").is_none(),
        "{role}"
    );
    binary_accepts_the_arguments(&objs);
    dry_run(&yaml);
}

#[test]
fn cert_manager_mode_applies_with_server_dry_run() {
    stand_in_crds();
    let ns = Ns::new("cert-manager");
    let yaml = render(&ns.0, &["webhook.certificate=cert-manager"]);
    let objs = objects(&yaml);
    let cert = get(&objs, "Certificate", "sexton-webhook");
    assert_eq!(cert["spec"]["secretName"], "sexton-webhook-tls");
    assert_eq!(
        cert["spec"]["issuerRef"]["name"],
        "sexton-webhook-selfsigned"
    );
    assert_eq!(
        cert["spec"]["dnsNames"][0],
        format!("sexton-webhook.{}.svc", ns.0)
    );
    get(&objs, "Issuer", "sexton-webhook-selfsigned");
    let mwc = get(&objs, "MutatingWebhookConfiguration", "sexton-webhook");
    assert_eq!(
        mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!("{}/sexton-webhook", ns.0)
    );
    let w = get(&objs, "Deployment", "sexton-webhook");
    assert_eq!(
        w["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "sexton-webhook-tls"
    );
    binary_accepts_the_arguments(&objs);
    let applied = dry_run(&yaml);
    assert!(
        applied.contains("certificate.cert-manager.io/sexton-webhook"),
        "{applied}"
    );

    // a cluster issuer of one's own: no Issuer of the chart's
    let yaml = render(
        &ns.0,
        &[
            "webhook.certificate=cert-manager",
            "webhook.tls.certManager.issuerRef.name=corp-ca",
            "webhook.tls.certManager.issuerRef.kind=ClusterIssuer",
        ],
    );
    let objs = objects(&yaml);
    assert!(find(&objs, "Issuer", "sexton-webhook-selfsigned").is_none());
    assert_eq!(
        get(&objs, "Certificate", "sexton-webhook")["spec"]["issuerRef"]["kind"],
        "ClusterIssuer"
    );
    dry_run(&yaml);
}

#[test]
fn values_reach_the_objects_and_apply() {
    stand_in_crds();
    let ns = Ns::new("values");
    let yaml = render(
        &ns.0,
        &[
            "ephemeralJob.ttlSecondsAfterFinished=60",
            "controller.watchNamespace=apps",
            "controller.replicas=1",
            "controller.leaderElection.enabled=false",
            "image.registry=registry.example:5000",
            "image.tag=9.9.9",
            "controller.quickExitImage.digest=sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "controller.nodeSelector.kubernetes\\.io/arch=arm64",
            "webhook.tolerations[0].key=dedicated",
            "webhook.tolerations[0].operator=Exists",
            "webhook.annotatedPods=false",
            "metrics.serviceMonitor.enabled=true",
            "imagePullSecrets[0].name=regcred",
            "webhook.readPodPullSecrets=true",
        ],
    );
    let objs = objects(&yaml);
    let crd = get(
        &objs,
        "CustomResourceDefinition",
        "ephemeraljobs.sexton.dev",
    );
    let ttl = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["ttlSecondsAfterFinished"];
    assert_eq!(ttl["default"], 60);
    assert_eq!(
        crd["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    // one namespace watched: a Role there, no ClusterRole; no leader election
    let role = get(&objs, "Role", "sexton-controller");
    assert_eq!(role["metadata"]["namespace"], "apps");
    assert!(find(&objs, "ClusterRole", "sexton-controller").is_none());
    assert!(find(&objs, "Role", "sexton-controller-leader-election").is_none());
    assert!(find(&objs, "PodDisruptionBudget", "sexton-controller").is_none());
    let c = get(&objs, "Deployment", "sexton-controller");
    let args = args_of(c);
    assert!(args.contains(&"--namespace=apps".to_string()), "{args:?}");
    assert!(!args.contains(&"--leader-elect".to_string()), "{args:?}");
    assert!(args.contains(
        &"--quick-exit-image=ghcr.io/sexton-dev/sexton-quick-exit@sha256:0000000000000000000000000000000000000000000000000000000000000000".to_string()
    ));
    let pod = &c["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example:5000/sexton-dev/kubectl-sexton:9.9.9"
    );
    assert_eq!(pod["nodeSelector"]["kubernetes.io/arch"], "arm64");
    let w = get(&objs, "Deployment", "sexton-webhook");
    assert_eq!(
        w["spec"]["template"]["spec"]["tolerations"][0]["key"],
        "dedicated"
    );
    let mwc = get(&objs, "MutatingWebhookConfiguration", "sexton-webhook");
    let names: Vec<&str> = mwc["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    // annotatedPods=false: one webhook for pods; EphemeralJobs are stamped whatever it says
    assert_eq!(
        names,
        ["inject.sexton.dev", "requester.sexton.dev"],
        "annotatedPods=false"
    );
    // imagePullSecrets: the chart's own pods' list; webhook.readPodPullSecrets: the webhook
    // reads the Pods' own (its flag, and the rule that lets it)
    for d in ["sexton-controller", "sexton-webhook"] {
        let pod = &get(&objs, "Deployment", d)["spec"]["template"]["spec"];
        assert_eq!(pod["imagePullSecrets"][0]["name"], "regcred", "{d}");
    }
    assert!(args_of(w).contains(&"--image-pull-secrets".to_string()));
    let rules = get(&objs, "ClusterRole", "sexton-webhook")["rules"].to_string();
    assert!(rules.contains(r#""resources":["secrets"]"#), "{rules}");
    // the requester's stamp is checked, and the controller may ask what the requester may do
    get(
        &objs,
        "ValidatingAdmissionPolicy",
        "sexton-ephemeraljob-requester",
    );
    get(
        &objs,
        "ValidatingAdmissionPolicyBinding",
        "sexton-ephemeraljob-requester",
    );
    let review = get(&objs, "ClusterRole", "sexton-controller-access-review");
    assert_eq!(review["rules"][0]["resources"][0], "subjectaccessreviews");
    get(&objs, "ServiceMonitor", "sexton-controller");
    get(&objs, "ServiceMonitor", "sexton-webhook");
    binary_accepts_the_arguments(&objs);

    // The Role lives in the watched namespace, which must exist for the dry run.
    let apps = Ns::new("apps");
    let yaml = yaml.replace("namespace: apps", &format!("namespace: {}", apps.0));
    let applied = dry_run(&yaml);
    assert!(
        applied.contains("servicemonitor.monitoring.coreos.com/sexton-webhook"),
        "{applied}"
    );
}

#[test]
fn bad_values_are_refused_naming_the_value() {
    for (set, needle) in [
        (vec!["webhook.certificate=acme"], "/webhook/certificate"),
        (
            vec!["webhook.certificate=secret", "webhook.tls.caBundle=Cg=="],
            "webhook.tls.secretName",
        ),
        (
            vec!["webhook.certificate=secret", "webhook.tls.secretName=x"],
            "webhook.tls.caBundle",
        ),
        (
            vec!["controller.leaderElection.enabled=false"],
            "controller.leaderElection.enabled",
        ),
        (
            vec!["ephemeralJob.ttlSecondsAfterFinished=-1"],
            "/ephemeralJob/ttlSecondsAfterFinished",
        ),
        (
            vec!["controller.controllers={sidecar-terminator,cronjob}"],
            "/controller/controllers",
        ),
        (
            vec!["webhook.imagePullSecrets=true"],
            "webhook.readPodPullSecrets",
        ),
        (
            vec!["webhook.readPodPullSecrets=yes"],
            "/webhook/readPodPullSecrets",
        ),
        (
            vec!["webhook.namespaceSelector.matchExpressions[0].operator=Exists"],
            "webhook.namespaceSelector",
        ),
    ] {
        let out = try_render("sexton-system", &set);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{set:?} accepted");
        assert!(
            err.contains(needle),
            "{set:?}: error does not name {needle}: {err}"
        );
    }
}

/// `scripts/publish.sh REGISTRY`'s install step (the README's quick start): the chart,
/// installed from the checkout with every image in REGISTRY, is accepted by the API server
/// (a server-side dry run of `helm upgrade --install`). The build and the push are
/// scripts/images.sh and scripts/release.sh push, run by the release stage.
#[test]
fn publish_installs_the_chart_with_the_registrys_images() {
    let ns = Ns::new("publish");
    let registry = "registry.example:5000/team";
    let out = Command::new(format!("{ROOT}/scripts/publish.sh"))
        .args([registry, "--no-build", "--no-push", "--"])
        // (the CRD is the chart's own test's; a cluster-wide CRD another test applied
        // without Helm's ownership would make the install refuse to adopt it. The other
        // cluster-wide objects, deploy/'s as other tests apply them, are adopted: a dry
        // run changes nothing)
        .args([
            "--dry-run=server",
            "--take-ownership",
            "--namespace",
            &ns.0,
            "--set",
            "crds.install=false",
        ])
        .env("HELM", helm_bin())
        .env("KUBECONFIG", &testenv().kubeconfig)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("sexton-helm-cache"),
        )
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "publish.sh failed: {stderr}");
    let version = env!("CARGO_PKG_VERSION");
    for image in [
        format!("image: {registry}/kubectl-sexton:{version}"),
        format!("--quick-exit-image={registry}/sexton-quick-exit:{version}"),
        format!("--sexton-image={registry}/sexton:{version}"),
    ] {
        assert!(
            stdout.contains(&image),
            "{image} not in the manifest:\n{stdout}"
        );
    }
    assert!(
        !stdout.contains("ghcr.io/"),
        "an image still names ghcr.io:\n{stdout}"
    );
    // a registry that is not one fails at once, naming it
    let out = Command::new(format!("{ROOT}/scripts/publish.sh"))
        .arg("https://registry.example")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("REGISTRY must be HOST[:PORT][/PATH]"));
}
