//! Vendors' injected sidecars ended by sexton's webhook with no declaration, against the real
//! test API server: each vendor's stand-in injector (`testbed::Vendor`,
//! `testenv/vendor-webhook`) registered under the vendor's real configuration name and
//! reinvocation policy, so that the API server calls it before `sexton-webhook` (all but
//! Vault's) or after it (Vault's, which sorts after: the API server then calls sexton's
//! again), and again under a name that puts it on the other side. The Pod the API server
//! stores is the same either way: the vendor's sidecar native, right after the vendor's own
//! init containers, or, for a vendor whose sidecar must stay in `spec.containers` (Datadog,
//! called again and looking for it there by name; the Cloud SQL operator), wrapped there,
//! and never twice; a long-running Pod untouched; and on nodes that run no native sidecars,
//! every vendor's sidecar wrapped.

use serde_json::{Value, json};
use testbed::*;

mod admission;
use admission::*;

/// The sidecar each stand-in adds (the Cloud SQL operator's name is a prefix).
fn sidecar_of(vendor: &str) -> &'static str {
    match vendor {
        "istio" => "istio-proxy",
        "linkerd" => "linkerd-proxy",
        "vault" => "vault-agent",
        "consul" => "consul-dataplane",
        "dapr" => "daprd",
        "datadog" => "datadog-agent-injected",
        "cloudsql" => "csql-",
        "kuma" => "kuma-sidecar",
        other => panic!("no stand-in {other}"),
    }
}

/// The vendor's own init container, before which its sidecar must not start.
fn own_init(vendor: &str) -> Option<&'static str> {
    match vendor {
        "istio" => Some("istio-init"),
        "linkerd" => Some("linkerd-init"),
        "vault" => Some("vault-agent-init"),
        "consul" => Some("consul-connect-inject-init"),
        "kuma" => Some("kuma-init"),
        _ => None,
    }
}

/// Vendors whose sidecar stays in `spec.containers`, wrapped (the catalogue's rule).
fn stays(vendor: &str) -> bool {
    matches!(vendor, "datadog" | "cloudsql")
}

/// An image of the test registry whose ENTRYPOINT the webhook can read (for `wrap`).
fn readable_image() -> String {
    format!("{}/sexton-test/side:1", registry().anonymous)
}

/// A Job-style Pod (bound to a node that does not exist: nothing runs it), with the vendor's
/// trigger, `Never` unless said.
fn job_pod(vendor: &str, name: &str, policy: &str, node_selector: Value) -> Value {
    triggered(
        vendor,
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": policy, "nodeName": "sexton-test-no-such-node",
                     "nodeSelector": node_selector,
                     "containers": [{"name": "main", "image": "app:1", "command": ["run"]}]}
        }),
    )
}

fn names(p: &Value, list: &str) -> Vec<String> {
    p["spec"][list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The container `name` of `list` (a name ending in `-`: the first with that prefix).
fn find<'a>(p: &'a Value, list: &str, name: &str) -> Option<(usize, &'a Value)> {
    let is_it = |n: &str| n == name || (name.ends_with('-') && n.starts_with(name));
    p["spec"][list]
        .as_array()?
        .iter()
        .enumerate()
        .find(|(_, c)| c["name"].as_str().is_some_and(is_it))
}

/// Creates `p` in `ns` through the API server: the Pod as stored.
fn created(ns: &str, p: &Value) -> Value {
    let out = kubectl_with_input(
        &["create", "-n", ns, "-o", "json", "-f", "-"],
        p.to_string().as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}: {}",
        p["metadata"]["name"],
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What sexton recorded of its injection.
fn record(p: &Value) -> Value {
    let raw = p["metadata"]["annotations"]["sexton.dev/injected"]
        .as_str()
        .unwrap_or_else(|| panic!("not injected: {p}"));
    serde_json::from_str(raw).unwrap()
}

/// The vendor's sidecar ended as the catalogue says, once, in `p`.
fn ended(vendor: &str, p: &Value, wrapped: bool) {
    let sidecar = sidecar_of(vendor);
    let all: Vec<String> = [names(p, "initContainers"), names(p, "containers")].concat();
    let is_it = |n: &str| n == sidecar || (sidecar.ends_with('-') && n.starts_with(sidecar));
    let copies = all.iter().filter(|n| is_it(n)).count();
    assert_eq!(copies, 1, "{vendor}: {all:?}");
    let r = record(p);
    assert!(
        r["sidecars"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| is_it(s.as_str().unwrap())),
        "{vendor}: {r}"
    );
    if wrapped {
        let (_, c) = find(p, "containers", sidecar).unwrap_or_else(|| panic!("{vendor}: {p}"));
        assert_eq!(c["command"][0], "/sexton/sexton", "{vendor}: {c}");
        assert_eq!(r["mechanism"], "wrap", "{vendor}: {r}");
        return;
    }
    assert_eq!(r["mechanism"], "native", "{vendor}: {r}");
    assert!(find(p, "containers", sidecar).is_none(), "{vendor}: {p}");
    let (at, c) = find(p, "initContainers", sidecar).unwrap_or_else(|| panic!("{vendor}: {p}"));
    assert_eq!(c["restartPolicy"], "Always", "{vendor}: {c}");
    if let Some(init) = own_init(vendor) {
        let (own, _) = find(p, "initContainers", init).unwrap();
        assert_eq!(
            at,
            own + 1,
            "{vendor}: right after {init}: {:?}",
            names(p, "initContainers")
        );
    }
}

/// The configuration name that puts `vendor`'s stand-in on the other side of
/// `sexton-webhook` from its real one.
fn other_side(vendor: &str) -> String {
    match vendor {
        "vault" => "a-vault-agent-injector-cfg".into(),
        v => format!("zz-{v}-injector"),
    }
}

/// One vendor, its stand-in before sexton's webhook and after it: the same Pod.
fn before_and_after(vendor: &str) {
    webhook();
    for (side, configuration) in [("a", None), ("b", Some(other_side(vendor)))] {
        // (a label per side: the first side's configuration may outlive its stand-in briefly)
        let label = format!("sexton-test-wv{side}-{vendor}-{}=true", std::process::id());
        let image = stays(vendor).then(readable_image);
        let options = VendorOptions {
            image,
            configuration: configuration.clone(),
            ..VendorOptions::default()
        };
        let v = Vendor::start_with(vendor, &label, options);
        let ns = labelled_namespace(
            &format!("wv-{vendor}"),
            &[&label, "sexton.dev/inject=enabled"],
        );
        let p = created(&ns, &job_pod(vendor, "job", "Never", json!({})));
        ended(vendor, &p, stays(vendor));
        // a long-running Pod keeps the vendor's sidecar where the vendor put it
        let web = created(&ns, &job_pod(vendor, "web", "Always", json!({})));
        assert!(
            web["metadata"]["annotations"]["sexton.dev/injected"].is_null(),
            "{vendor} ({}): {web}",
            v.configuration
        );
        assert!(
            find(&web, "containers", sidecar_of(vendor)).is_some(),
            "{web}"
        );
        drop(v);
    }
}

#[test]
fn istio_before_and_after_sexton() {
    before_and_after("istio");
}

#[test]
fn linkerd_before_and_after_sexton() {
    before_and_after("linkerd");
}

#[test]
fn vault_before_and_after_sexton() {
    before_and_after("vault");
}

#[test]
fn consul_before_and_after_sexton() {
    before_and_after("consul");
}

#[test]
fn dapr_before_and_after_sexton() {
    before_and_after("dapr");
}

#[test]
fn kuma_before_and_after_sexton() {
    before_and_after("kuma");
}

/// Datadog is called again after sexton's change (IfNeeded) and looks for its agent by name
/// in spec.containers: sexton wraps it there, and the Pod is created (moved, the agent would
/// be added twice and the API server would refuse the Pod: `vendors.rs` shows that refusal).
#[test]
fn datadog_before_and_after_sexton_keeps_one_agent() {
    before_and_after("datadog");
}

#[test]
fn cloudsql_before_and_after_sexton() {
    before_and_after("cloudsql");
}

/// Where native sidecars cannot run (the Pod targets virtual-kubelet nodes), each vendor's
/// sidecar is wrapped.
#[test]
fn on_virtual_kubelet_nodes_every_vendors_sidecar_is_wrapped() {
    webhook();
    let vk = json!({"type": "virtual-kubelet"});
    for vendor in VENDORS {
        let label = format!("sexton-test-wvk-{vendor}-{}=true", std::process::id());
        let options = VendorOptions {
            image: Some(readable_image()),
            ..VendorOptions::default()
        };
        let _v = Vendor::start_with(vendor, &label, options);
        let ns = labelled_namespace(
            &format!("wvk-{vendor}"),
            &[&label, "sexton.dev/inject=enabled"],
        );
        let p = created(&ns, &job_pod(vendor, "job", "Never", vk.clone()));
        ended(vendor, &p, true);
    }
}

/// Two vendors in one Pod, one on each side of sexton's webhook (Istio before it, Vault after
/// it): the first call makes Istio's proxy native, the API server calls sexton's again after
/// Vault's, and that call ends Vault's agent too, added to the first call's record.
#[test]
fn a_sidecar_added_after_sexton_joins_the_first_calls_injection() {
    webhook();
    let label = format!("sexton-test-wv2-{}=true", std::process::id());
    let _istio = Vendor::start("istio", &label);
    let _vault = Vendor::start("vault", &label);
    let ns = labelled_namespace("wv-two", &[&label, "sexton.dev/inject=enabled"]);
    let p = created(&ns, &job_pod("vault", "job", "Never", json!({})));
    ended("istio", &p, false);
    ended("vault", &p, false);
    let r = record(&p);
    assert_eq!(r["sidecars"], json!(["istio-proxy", "vault-agent"]), "{r}");
    assert_eq!(names(&p, "containers"), ["main"]);
}
