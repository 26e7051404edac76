//! The catalogue's rules, table-tested.

use super::builtin::builtin;
use super::*;
use serde_json::json;

fn pod(annotations: Value, labels: Value, containers: &[&str], policy: &str) -> Value {
    json!({
        "metadata": {"annotations": annotations, "labels": labels},
        "spec": {
            "restartPolicy": policy,
            "containers": containers.iter().map(|n| json!({"name": n, "image": "x"})).collect::<Vec<_>>()
        }
    })
}

#[test]
fn patterns_match_exactly_or_around_one_star() {
    for (pat, s, hit) in [
        ("istio-proxy", "istio-proxy", true),
        ("istio-proxy", "istio-proxy2", false),
        ("csql-*", "csql-default-db", true),
        ("csql-*", "csql-", true),
        ("csql-*", "csq", false),
        ("*-agent-injector-cfg", "vault-agent-injector-cfg", true),
        ("*-agent-injector-cfg", "agent-injector-cfg", false),
        (
            "istio-sidecar-injector*",
            "istio-sidecar-injector-canary",
            true,
        ),
        ("a*a", "a", false),
    ] {
        assert_eq!(Pattern(pat.into()).matches(s), hit, "{pat} {s}");
    }
}

#[test]
fn a_name_alone_is_no_proof() {
    let c = Catalogue::default();
    let plain = pod(json!({}), json!({}), &["main", "istio-proxy"], "Never");
    assert_eq!(c.recognise(&plain), vec![]);
    let injected = pod(
        json!({"sidecar.istio.io/status": "{}"}),
        json!({}),
        &["main", "istio-proxy"],
        "Never",
    );
    assert_eq!(
        c.recognise(&injected),
        vec![Recognised {
            container: "istio-proxy".into(),
            vendor: "Istio".into()
        }]
    );
}

#[test]
fn long_running_pods_are_never_recognised() {
    let c = Catalogue::default();
    for policy in ["Always", ""] {
        let p = pod(
            json!({"vault.hashicorp.com/agent-inject-status": "injected"}),
            json!({}),
            &["main", "vault-agent"],
            policy,
        );
        assert_eq!(c.recognise(&p), vec![], "{policy:?}");
    }
}

#[test]
fn markers_with_values_and_key_patterns() {
    let c = Catalogue::default();
    let vault = |status: &str| {
        pod(
            json!({"vault.hashicorp.com/agent-inject-status": status}),
            json!({}),
            &["main", "vault-agent"],
            "OnFailure",
        )
    };
    assert_eq!(c.recognise(&vault("injected")).len(), 1);
    assert_eq!(c.recognise(&vault("update")).len(), 0);
    let csql = pod(
        json!({"cloudsql.cloud.google.com/orders-db": "1,gcr.io/x/proxy:2"}),
        json!({}),
        &["main", "csql-batch-orders-db"],
        "Never",
    );
    assert_eq!(c.recognise(&csql)[0].vendor, "Cloud SQL Auth Proxy");
    let dapr = pod(
        json!({}),
        json!({"dapr.io/sidecar-injected": "true"}),
        &["daprd", "main"],
        "Never",
    );
    assert_eq!(c.recognise(&dapr)[0].container, "daprd");
    // a label where an annotation is expected is not the marker
    let wrong_place = pod(
        json!({"dapr.io/sidecar-injected": "true"}),
        json!({}),
        &["daprd"],
        "Never",
    );
    assert_eq!(c.recognise(&wrong_place), vec![]);
}

#[test]
fn admins_add_vendors_and_theirs_come_first() {
    let extra = json!([{
        "name": "Acme Mesh",
        "containers": ["acme-proxy", "istio-proxy"],
        "markers": [{"on": "annotation", "key": "acme.example/injected", "value": "true"}],
        "quit": {"endpoint": {"port": 9000, "path": "/quit"}},
        "webhook": {"configurations": ["acme-injector"], "reinvocation": "IfNeeded", "doneWhen": "marker"}
    }]);
    let c = Catalogue::with_extra(&extra).unwrap();
    assert_eq!(c.vendors.len(), builtin().len() + 1);
    let p = pod(
        json!({"acme.example/injected": "true", "sidecar.istio.io/status": "{}"}),
        json!({}),
        &["main", "istio-proxy", "acme-proxy"],
        "Never",
    );
    let found: Vec<_> = c.recognise(&p).into_iter().map(|r| r.vendor).collect();
    assert_eq!(found, ["Acme Mesh", "Acme Mesh"]);
}

#[test]
fn an_admin_entry_that_proves_nothing_is_refused_with_its_field() {
    for (extra, says) in [
        (json!({"name": "x"}), "expected a list"),
        (
            json!([{"name": "x", "containers": ["a"], "markers": []}]),
            "`markers` is empty",
        ),
        (
            json!([{"name": "x", "containers": [], "markers": [{"on": "label", "key": "k"}]}]),
            "`containers`",
        ),
        (
            json!([{"name": "x", "containers": ["a"], "markers": [{"on": "env", "key": "k"}]}]),
            "unknown variant",
        ),
        (
            json!([{"name": "x", "containers": ["a"], "marker": []}]),
            "unknown field",
        ),
    ] {
        let e = Catalogue::with_extra(&extra).unwrap_err().to_string();
        assert!(e.contains(says), "{extra}: {e}");
    }
}

#[test]
fn every_builtin_vendor_proves_its_injection_and_has_a_registration() {
    for v in builtin() {
        assert!(
            !v.containers.is_empty() && !v.markers.is_empty(),
            "{}",
            v.name
        );
        assert!(!v.webhook.configurations.is_empty(), "{}", v.name);
        // the serde form is the admins' form: the built-in entries round-trip through it
        let back: Vendor = serde_json::from_value(serde_json::to_value(&v).unwrap()).unwrap();
        assert_eq!(back, v);
    }
}
