//! Vendors' injected sidecars at admission, played here by the edits each vendor's webhook
//! makes (the real order of webhooks runs against the test API server in kubectl-sexton's
//! tests): recognised without a declaration, the same result whether the vendor's webhook
//! ran before sexton's or after it (then the API server calls sexton's again), a vendor that
//! re-checks `spec.containers` by name never made to add its sidecar twice, and no change
//! that would give the Pod two containers of one name.

use std::sync::Arc;

use serde_json::{Value, json};
use sexton_inject::{
    Admission, Chain, ImageCommand, Mechanism, Options, Outcome, Resolve, Scope, Unresolved, admit,
};

/// Images as a registry would describe them (the vendors' sidecars that set no command).
struct Registry;

impl Resolve for Registry {
    fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        match image {
            "gcr.io/datadoghq/agent:7" => Ok(ImageCommand {
                entrypoint: vec!["/bin/entrypoint.sh".into()],
                cmd: vec![],
            }),
            "docker.io/istio/proxyv2:1.27.0" => Ok(ImageCommand {
                entrypoint: vec!["/usr/local/bin/pilot-agent".into()],
                cmd: vec![],
            }),
            _ => Err(Unresolved(format!("{image}: manifest unknown"))),
        }
    }
}

/// A Job's Pod as the Job controller creates it: one main, nothing declared.
fn job_pod(annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "backup-", "annotations": annotations, "labels": {"batch.kubernetes.io/job-name": "backup"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "app:1", "command": ["backup"]}]
        }
    })
}

/// What Vault's injector adds (vault-k8s: `vault-agent-init` first, `vault-agent` last, the
/// status annotation).
fn vault(p: &mut Value) {
    let agent = |name: &str| {
        json!({"name": name, "image": "hashicorp/vault:1.20.0",
        "command": ["/bin/sh", "-ec"], "args": ["vault agent -config=/home/vault/config.json"]})
    };
    p["metadata"]["annotations"]["vault.hashicorp.com/agent-inject-status"] = json!("injected");
    let inits = p["spec"]["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut inits_new = vec![agent("vault-agent-init")];
    inits_new.extend(inits);
    p["spec"]["initContainers"] = json!(inits_new);
    p["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(agent("vault-agent"));
}

/// What Istio's injector adds in its legacy mode.
fn istio(p: &mut Value) {
    p["metadata"]["annotations"]["sidecar.istio.io/status"] =
        json!(r#"{"initContainers":["istio-init"],"containers":["istio-proxy"]}"#);
    let mut inits = vec![
        json!({"name": "istio-init", "image": "docker.io/istio/proxyv2:1.27.0", "args": ["istio-iptables"]}),
    ];
    inits.extend(
        p["spec"]["initContainers"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    p["spec"]["initContainers"] = json!(inits);
    p["spec"]["containers"].as_array_mut().unwrap().push(json!({
        "name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.27.0", "args": ["proxy", "sidecar"],
        "readinessProbe": {"httpGet": {"path": "/healthz/ready", "port": 15021}}}));
}

/// What Datadog's injector does: adds its agent unless `spec.containers` has one by name.
fn datadog(p: &mut Value) {
    p["metadata"]["labels"]["agent.datadoghq.com/sidecar"] = json!("fargate");
    p["spec"]["shareProcessNamespace"] = json!(true);
    let containers = p["spec"]["containers"].as_array_mut().unwrap();
    if !containers
        .iter()
        .any(|c| c["name"] == "datadog-agent-injected")
    {
        containers
            .push(json!({"name": "datadog-agent-injected", "image": "gcr.io/datadoghq/agent:7"}));
    }
}

fn sexton(p: &Value, opts: &Options) -> (Value, Admission) {
    let a = admit(p, Scope::Namespace, opts, &Registry);
    let mut out = p.clone();
    json_patch::patch(&mut out, &a.patch).unwrap();
    (out, a)
}

fn names(p: &Value, list: &str) -> Vec<String> {
    p["spec"][list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn record(p: &Value) -> Value {
    serde_json::from_str(
        p["metadata"]["annotations"]["sexton.dev/injected"]
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

/// The API server's two rounds for webhooks sorted `before`, sexton, `after` (each a vendor's
/// edit): sexton's is called again when a later one changed the Pod.
fn rounds(
    mut p: Value,
    before: &[fn(&mut Value)],
    after: &[fn(&mut Value)],
    opts: &Options,
) -> Value {
    for v in before {
        v(&mut p);
    }
    let (mut p, _) = sexton(&p, opts);
    let seen = p.clone();
    for v in after {
        v(&mut p);
    }
    if p != seen {
        p = sexton(&p, opts).0;
    }
    p
}

#[test]
fn a_vendor_before_or_after_sexton_gives_the_same_pod() {
    let opts = Options::default();
    let before = rounds(job_pod(json!({})), &[vault], &[], &opts);
    let after = rounds(job_pod(json!({})), &[], &[vault], &opts);
    for p in [&before, &after] {
        assert_eq!(names(p, "containers"), ["main"], "{p}");
        assert_eq!(
            names(p, "initContainers"),
            ["vault-agent-init", "vault-agent"],
            "{p}"
        );
        assert_eq!(p["spec"]["initContainers"][1]["restartPolicy"], "Always");
        assert_eq!(record(p)["sidecars"], json!(["vault-agent"]));
    }
}

#[test]
fn a_sidecar_added_after_the_first_pass_joins_what_it_did() {
    let opts = Options::default();
    // Istio before sexton, Vault after it: both end up native, each after its own init
    let p = rounds(job_pod(json!({})), &[istio], &[vault], &opts);
    assert_eq!(
        names(&p, "initContainers"),
        [
            "vault-agent-init",
            "vault-agent",
            "istio-init",
            "istio-proxy"
        ],
        "{p}"
    );
    assert_eq!(names(&p, "containers"), ["main"]);
    let r = record(&p);
    assert_eq!(r["sidecars"], json!(["istio-proxy", "vault-agent"]));
    assert_eq!(r["moved"].as_array().unwrap().len(), 2);
    // and the re-invocation's outcome names the vendor
    let mut first = job_pod(json!({}));
    istio(&mut first);
    let (mut p, _) = sexton(&first, &opts);
    vault(&mut p);
    let (_, a) = sexton(&p, &opts);
    match &a.outcome {
        Some(
            o @ Outcome::Injected {
                sidecars,
                recognised,
                ..
            },
        ) => {
            assert_eq!(sidecars, &["vault-agent"]);
            assert_eq!(recognised[0].vendor, "Vault Agent", "{o:?}");
        }
        other => panic!("{other:?}"),
    }
    // a third call finds nothing new
    let mut again = p.clone();
    json_patch::patch(&mut again, &a.patch).unwrap();
    assert!(sexton(&again, &opts).1.patch.is_empty());
}

#[test]
fn wrap_takes_a_later_sidecar_behind_the_supervisor_too() {
    let opts = Options {
        kubernetes_version: Some((1, 28)),
        ..Options::default()
    };
    let p = rounds(job_pod(json!({})), &[istio], &[vault], &opts);
    let agent = p["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "vault-agent")
        .unwrap()
        .clone();
    assert_eq!(agent["command"][0], "/sexton/sexton", "{agent}");
    let env = agent["env"].as_array().unwrap();
    assert!(
        env.contains(&json!({"name": "KUBEXIT_DEATH_DEPS", "value": "main"})),
        "{agent}"
    );
    assert!(env.contains(&json!({"name": "KUBEXIT_DEATH_DEPS_MODE", "value": "all"})));
    assert_eq!(record(&p)["mechanism"], "wrap");
    assert_eq!(
        record(&p)["sidecars"],
        json!(["istio-proxy", "vault-agent"])
    );
    // one install container, whatever was added later
    assert_eq!(
        names(&p, "initContainers")
            .iter()
            .filter(|n| *n == "sexton-install")
            .count(),
        1
    );
}

#[test]
fn a_declared_sidecar_that_a_later_webhook_adds_is_not_an_error_at_the_first_pass() {
    let opts = Options::default();
    let declared = job_pod(json!({"sexton.dev/sidecars": "vault-agent"}));
    let (p, first) = sexton(&declared, &opts);
    assert!(
        first.patch.is_empty() && first.warnings.is_empty(),
        "{first:?}"
    );
    assert!(
        matches!(first.outcome, Some(Outcome::Unchanged(_))),
        "{first:?}"
    );
    let p = rounds(p, &[], &[vault], &opts);
    assert_eq!(
        names(&p, "initContainers"),
        ["vault-agent-init", "vault-agent"]
    );
}

#[test]
fn datadog_called_again_keeps_its_agent_in_spec_containers() {
    // Datadog's configuration sorts before sexton's and is called again (IfNeeded): had
    // sexton moved its agent, the second call would add another
    let opts = Options::default();
    let mut p = job_pod(json!({}));
    datadog(&mut p);
    let (mut p, a) = sexton(&p, &opts);
    assert!(
        matches!(
            &a.outcome,
            Some(Outcome::Injected {
                mechanism: Mechanism::Wrap,
                ..
            })
        ),
        "{a:?}"
    );
    datadog(&mut p); // its second call: finds its agent, adds nothing
    assert_eq!(names(&p, "containers"), ["main", "datadog-agent-injected"]);
    // where the cluster registers it Never, native is safe
    let never = Chain::from_objects(&[
        json!({"metadata": {"name": "datadog-webhook"}, "webhooks": [{
        "name": "x", "reinvocationPolicy": "Never",
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "resources": ["pods"]}]}]}),
    ]);
    let opts = Options {
        chain: Some(Arc::new(never)),
        ..Options::default()
    };
    let mut p = job_pod(json!({}));
    datadog(&mut p);
    let (p, _) = sexton(&p, &opts);
    assert_eq!(names(&p, "initContainers"), ["datadog-agent-injected"]);
}

#[test]
fn a_second_copy_put_back_by_a_webhook_called_again_is_removed() {
    // an unknown webhook that re-adds by name: sexton's re-invocation drops the copy
    let opts = Options::default();
    let mut p = job_pod(json!({"sexton.dev/sidecars": "agent"}));
    p["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "agent", "image": "agent:1", "command": ["agent"]}));
    let (mut p, _) = sexton(&p, &opts);
    assert_eq!(names(&p, "initContainers"), ["agent"]);
    p["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "agent", "image": "agent:1", "command": ["agent"]}));
    let (p, a) = sexton(&p, &opts);
    assert_eq!(names(&p, "containers"), ["main"], "{a:?}");
    assert!(
        a.warnings
            .iter()
            .any(|w| w.contains("removed a second copy of sidecar \"agent\"")),
        "{a:?}"
    );
}

#[test]
fn a_change_that_would_duplicate_a_name_is_not_made() {
    // a main named like wrap's install init container: wrapping would give two
    let opts = Options::default();
    let mut p = job_pod(json!({"sexton.dev/inject": "wrap", "sexton.dev/sidecars": "proxy"}));
    p["spec"]["containers"] = json!([
        {"name": "sexton-install", "image": "app:1", "command": ["install"]},
        {"name": "proxy", "image": "proxy:1", "command": ["proxy"]}]);
    let (out, a) = sexton(&p, &opts);
    assert_eq!(out, p, "admitted unchanged");
    assert!(
        matches!(&a.outcome, Some(Outcome::Refused(why)) if why.contains("two containers named \"sexton-install\"")),
        "{a:?}"
    );
    assert_eq!(a.warnings.len(), 1);
    // a duplicate the Pod came with is not sexton's to refuse for
    let mut dup = job_pod(json!({}));
    istio(&mut dup);
    dup["spec"]["initContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "main", "image": "x"}));
    let (_, a) = sexton(&dup, &opts);
    assert!(
        matches!(&a.outcome, Some(Outcome::Injected { .. })),
        "{a:?}"
    );
}

#[test]
fn long_running_pods_and_unproven_names_are_left_alone() {
    let opts = Options::default();
    let mut web = job_pod(json!({}));
    web["spec"]["restartPolicy"] = json!("Always");
    istio(&mut web);
    let (_, a) = sexton(&web, &opts);
    assert!(a.patch.is_empty(), "{a:?}");
    let mut named = job_pod(json!({}));
    named["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "istio-proxy", "image": "mine:1"}));
    let (_, a) = sexton(&named, &opts);
    assert!(a.patch.is_empty(), "{a:?}");
    // recognition off: a vendor's sidecar is not a sidecar
    let off = Options {
        catalogue: Arc::new(sexton_inject::Catalogue::empty()),
        ..Options::default()
    };
    let mut p = job_pod(json!({}));
    istio(&mut p);
    assert!(sexton(&p, &off).1.patch.is_empty());
}

#[test]
fn a_switch_set_ahead_by_inject_stays_for_the_vendors_webhook() {
    // `kubectl sexton inject` on a template that asks Vault's webhook, on virtual-kubelet
    // nodes: the annotation that turns Vault's quit endpoint on, and a record of it
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "backup"},
        "spec": {"template": job_pod(json!({"vault.hashicorp.com/agent-inject": "true"}))}});
    job["spec"]["template"]["spec"]["nodeSelector"] = json!({"type": "virtual-kubelet"});
    let reports = sexton_inject::inject(&mut job, &Options::default(), &Registry);
    assert!(
        reports[0].to_string().contains("agent-enable-quit"),
        "{}",
        reports[0]
    );
    let mut pod = job["spec"]["template"].clone();
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    // the Job's Pod: sexton first (the record goes, the annotation stays), then Vault, whose
    // sidecar sexton's second call wraps
    let (p, _) = sexton(&pod, &Options::default());
    assert_eq!(
        p["metadata"]["annotations"]["vault.hashicorp.com/agent-enable-quit"],
        "true"
    );
    assert!(
        p["metadata"]["annotations"]["sexton.dev/injected"].is_null(),
        "{p}"
    );
    let p = rounds(p, &[], &[vault], &Options::default());
    assert_eq!(record(&p)["sidecars"], json!(["vault-agent"]), "{p}");
    assert_eq!(record(&p)["mechanism"], "wrap");
    assert_eq!(
        p["metadata"]["annotations"]["vault.hashicorp.com/agent-enable-quit"],
        "true"
    );
}
