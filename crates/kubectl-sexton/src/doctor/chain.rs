//! The `webhook-chain` check: the mutating webhooks that see the creation of a Pod in the
//! checked namespace, in the order the API server calls them (MutatingWebhookConfigurations
//! sorted by name, each one's webhooks in their order), with their reinvocation policies:
//! which is sexton's (by label, `shared/components.rs`), which are vendors of the catalogue
//! (`Chain::vendor_of`), and which run after sexton's. Found: sexton's webhook without
//! `reinvocationPolicy: IfNeeded` (the sidecars later webhooks add are missed: the patch
//! that fixes it), and, as evidence, each vendor whose sidecar sexton leaves in
//! `spec.containers` and wraps rather than make it native (its webhook is called again and
//! looks for it there by name, or the catalogue says why it must stay).

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use kube::ResourceExt;
use sexton_inject::{Catalogue, Chain, may_move};

use super::ctx::Ctx;
use super::report::{Check, Finding, Status};
use super::webhooks::{self, matches_pod_create, narrows, selects_namespace};
use crate::shared::components::is_sexton_webhook_configuration;

pub const NAME: &str = "webhook-chain";

pub async fn check(ctx: &Ctx) -> Check {
    let configs = match webhooks::configurations(ctx).await {
        Ok(c) => c,
        Err(e) => return Check::failed(NAME, "mutatingwebhookconfigurations", e.to_string()),
    };
    let ns = match ctx.namespaces.one() {
        Some(ns) => {
            let labels = webhooks::namespace_labels(ctx, ns).await;
            Some((
                ns,
                labels
                    .map(Option::unwrap_or_default)
                    .map_err(|e| e.to_string()),
            ))
        }
        None => None,
    };
    let ns = ns.as_ref().map(|(n, l)| (*n, l.as_ref()));
    report(configs, ns, &ctx.catalogue)
}

/// One configuration of the chain, with its webhooks that see the Pod.
struct Link<'a> {
    name: String,
    hooks: Vec<(usize, &'a MutatingWebhook)>,
    sexton: bool,
}

/// A namespace's labels, or why they could not be read.
type Labels<'a> = Result<&'a BTreeMap<String, String>, &'a String>;

/// The check, pure: `ns` is the namespace and its labels, `None` for every namespace (`-A`).
pub fn report(
    configs: &[MutatingWebhookConfiguration],
    ns: Option<(&str, Labels)>,
    catalogue: &Catalogue,
) -> Check {
    let labels = ns.and_then(|(_, l)| l.ok());
    let links = links(configs, labels);
    let chain = webhooks::chain(configs);
    let sexton: Vec<&str> = links
        .iter()
        .filter(|l| l.sexton)
        .map(|l| l.name.as_str())
        .collect();
    let mut findings = vec![];
    let mut after_sexton = vec![];
    for (i, link) in links.iter().enumerate() {
        let position = position(&link.name, &sexton);
        let vendor = Chain::vendor_of(&link.name, &catalogue.vendors);
        if let (Some(v), true) = (vendor, position.starts_with("after")) {
            after_sexton.push(format!("{} ({})", v.name, link.name));
        }
        findings.push(if link.sexton {
            sextons(i, link, &links)
        } else {
            let mut message = format!("#{}: {}", i + 1, hooks(link));
            if !position.is_empty() {
                message.push_str(&format!("; runs {position}"));
            }
            if let Some(v) = vendor {
                message.push_str(&format!("; {}'s injector", v.name));
                if !may_move(v, Some(&chain)) {
                    let names: Vec<&str> = v.containers.iter().map(|p| p.0.as_str()).collect();
                    message.push_str(&match &v.keep_in_containers {
                        Some(why) => format!(
                            "; sexton leaves {names:?} in spec.containers and wraps it rather than make it native: {why}"
                        ),
                        None => format!(
                            ", called again after sexton's changed a Pod and looking for {names:?} by name in spec.containers: sexton leaves that sidecar there and wraps it (it is not made native, which would have it injected twice)"
                        ),
                    });
                }
            }
            Finding::new(
                Status::Ok,
                format!("mutatingwebhookconfiguration {}", link.name),
                message,
            )
        });
    }
    let scope = match ns {
        Some((ns, Ok(_))) => format!("in namespace {ns}"),
        Some((ns, Err(e))) => {
            format!("in namespace {ns} (namespaceSelectors not evaluated: {e})")
        }
        None => "in the cluster (namespaceSelectors not evaluated)".into(),
    };
    let summary = if links.is_empty() {
        format!("no mutating webhook sees the creation of a Pod {scope}")
    } else {
        let order: Vec<String> = links
            .iter()
            .map(|l| match l.sexton {
                true => format!("{} (sexton's)", l.name),
                false => l.name.clone(),
            })
            .collect();
        let tail = match (sexton.is_empty(), after_sexton.is_empty()) {
            (true, _) => "sexton's webhook is not installed".to_string(),
            (false, true) => "no vendor's injector runs after sexton's".to_string(),
            (false, false) => format!("after sexton's: {}", after_sexton.join(", ")),
        };
        format!(
            "{} configuration(s) see the creation of a Pod {scope}, called in this order: {}; {tail}",
            links.len(),
            order.join(", ")
        )
    };
    Check::new(NAME, summary, findings)
}

/// The configurations with a webhook that sees the creation of a Pod (in the namespace of
/// `labels`, when known), sorted by name as the API server calls them.
fn links<'a>(
    configs: &'a [MutatingWebhookConfiguration],
    labels: Option<&BTreeMap<String, String>>,
) -> Vec<Link<'a>> {
    let mut links: Vec<Link> = configs
        .iter()
        .filter_map(|c| {
            let hooks: Vec<(usize, &MutatingWebhook)> = c
                .webhooks
                .iter()
                .flatten()
                .enumerate()
                .filter(|(_, w)| {
                    matches_pod_create(w)
                        && (labels.is_none() || selects_namespace(w, labels) != Some(false))
                })
                .collect();
            (!hooks.is_empty()).then(|| Link {
                name: c.name_any(),
                hooks,
                sexton: is_sexton_webhook_configuration(&c.metadata),
            })
        })
        .collect();
    links.sort_by(|a, b| a.name.cmp(&b.name));
    links
}

/// `before sexton's X`, `after sexton's X` (or both, between two of sexton's), or nothing.
fn position(name: &str, sexton: &[&str]) -> String {
    let after = sexton.iter().rfind(|s| **s < name);
    let before = sexton.iter().find(|s| **s > name);
    match (after, before) {
        (Some(a), Some(b)) => format!("after sexton's {a} and before sexton's {b}"),
        (Some(a), None) => format!("after sexton's {a}"),
        (None, Some(b)) => format!("before sexton's {b}"),
        (None, None) => String::new(),
    }
}

/// `webhook a.x (reinvocationPolicy IfNeeded), webhook b.y (...; objectSelector)`.
fn hooks(link: &Link) -> String {
    let list: Vec<String> = link
        .hooks
        .iter()
        .map(|(_, w)| {
            let mut notes = vec![format!("reinvocationPolicy {}", policy(w))];
            if narrows(w.object_selector.as_ref()) {
                notes.push("only Pods its objectSelector matches".into());
            }
            if w.match_conditions.as_ref().is_some_and(|m| !m.is_empty()) {
                notes.push("matchConditions not evaluated".into());
            }
            format!("webhook {} ({})", w.name, notes.join(", "))
        })
        .collect();
    list.join(", ")
}

fn policy(w: &MutatingWebhook) -> &str {
    w.reinvocation_policy.as_deref().unwrap_or("Never")
}

/// sexton's configuration: a warning, with the patch, if a webhook of it that sees Pods is
/// not called again after later webhooks changed the Pod.
fn sextons(i: usize, link: &Link, links: &[Link]) -> Finding {
    let object = format!("mutatingwebhookconfiguration {}", link.name);
    let message = format!("#{}: sexton's webhook: {}", i + 1, hooks(link));
    let once: Vec<&(usize, &MutatingWebhook)> = link
        .hooks
        .iter()
        .filter(|(_, w)| policy(w) != "IfNeeded")
        .collect();
    if once.is_empty() {
        return Finding::new(Status::Ok, object, message);
    }
    let later: Vec<&str> = links
        .iter()
        .filter(|l| !l.sexton && l.name > link.name)
        .map(|l| l.name.as_str())
        .collect();
    let later = match later.is_empty() {
        true => "none here yet".to_string(),
        false => later.join(", "),
    };
    let names: Vec<&str> = once.iter().map(|(_, w)| w.name.as_str()).collect();
    let ops: Vec<String> = once
        .iter()
        .map(|(at, _)| {
            format!(r#"{{"op":"replace","path":"/webhooks/{at}/reinvocationPolicy","value":"IfNeeded"}}"#)
        })
        .collect();
    Finding::new(
        Status::Warning,
        object,
        format!(
            "{message}; {names:?} without reinvocationPolicy IfNeeded: the API server does not call sexton's webhook again after later webhooks changed the Pod, so the sidecars they add are not ended, and native sidecars they strip are not restored (webhooks after it: {later})"
        ),
    )
    .fix(format!(
        "kubectl patch mutatingwebhookconfiguration {} --type=json -p '[{}]'",
        link.name,
        ops.join(",")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::webhooks::sexton_configuration;
    use serde_json::{Value, json};

    fn config(
        name: &str,
        policy: &str,
        resource: &str,
        selector: Value,
    ) -> MutatingWebhookConfiguration {
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": [{
            "name": format!("{name}.example.com"), "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "clientConfig": {"url": "https://x/mutate"},
            "reinvocationPolicy": policy, "namespaceSelector": selector,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": [resource]}]}]}))
        .unwrap()
    }

    fn cluster(sexton_policy: &str) -> Vec<MutatingWebhookConfiguration> {
        vec![
            config("vault-agent-injector-cfg", "Never", "pods", json!({})),
            sexton_configuration("sexton-webhook", sexton_policy, true),
            config(
                "zz-team-b",
                "Never",
                "pods",
                json!({"matchLabels": {"team": "b"}}),
            ),
            config("cert-checker", "Never", "secrets", json!({})),
            config("istio-sidecar-injector", "Never", "pods", json!({})),
            config("datadog-webhook", "IfNeeded", "pods", json!({})),
        ]
    }

    fn labels() -> BTreeMap<String, String> {
        [("team", "a"), ("sexton.dev/inject", "enabled")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_chain_in_the_api_servers_order_for_the_namespace() {
        let l = labels();
        let c = report(
            &cluster("IfNeeded"),
            Some(("jobs", Ok(&l))),
            &Catalogue::default(),
        );
        assert_eq!(c.status, Status::Ok, "{c:#?}");
        assert_eq!(
            c.summary,
            "4 configuration(s) see the creation of a Pod in namespace jobs, called in this order: datadog-webhook, istio-sidecar-injector, sexton-webhook (sexton's), vault-agent-injector-cfg; after sexton's: Vault Agent (vault-agent-injector-cfg)"
        );
        let messages: Vec<&str> = c.findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            messages[0],
            "#1: webhook datadog-webhook.example.com (reinvocationPolicy IfNeeded); runs before sexton's sexton-webhook; Datadog Agent's injector, called again after sexton's changed a Pod and looking for [\"datadog-agent-injected\"] by name in spec.containers: sexton leaves that sidecar there and wraps it (it is not made native, which would have it injected twice)"
        );
        assert_eq!(
            messages[1],
            "#2: webhook istio-sidecar-injector.example.com (reinvocationPolicy Never); runs before sexton's sexton-webhook; Istio's injector"
        );
        assert_eq!(
            messages[2],
            // (its other webhook serves the namespaces not labelled sexton.dev/inject=enabled)
            "#3: sexton's webhook: webhook inject.sexton.dev (reinvocationPolicy IfNeeded)"
        );
        assert!(
            messages[3].ends_with("runs after sexton's sexton-webhook; Vault Agent's injector")
        );
        // a vendor whose sidecar stays in spec.containers whatever the order
        let mut configs = cluster("IfNeeded");
        configs.push(config(
            "cloud-sql-proxy-operator-mutating-core-webhook-configuration",
            "Never",
            "pods",
            json!({}),
        ));
        let c = report(&configs, Some(("jobs", Ok(&l))), &Catalogue::default());
        assert!(
            c.findings[0].message.contains("; Cloud SQL Auth Proxy's injector; sexton leaves [\"csql-*\"] in spec.containers and wraps it rather than make it native: the Cloud SQL operator's Pod controller"),
            "{:?}",
            c.findings[0]
        );
        // every namespace: the other team's webhook too
        let all = report(&cluster("IfNeeded"), None, &Catalogue::default());
        assert_eq!(all.findings.len(), 5);
        assert!(
            all.summary
                .contains("in the cluster (namespaceSelectors not evaluated)")
        );
        // the namespace unreadable: its selectors are not evaluated either
        let e = "forbidden".to_string();
        let unknown = report(
            &cluster("IfNeeded"),
            Some(("jobs", Err(&e))),
            &Catalogue::default(),
        );
        assert_eq!(unknown.findings.len(), 5);
    }

    #[test]
    fn sextons_webhook_not_called_again_is_found_with_the_patch() {
        let l = labels();
        let c = report(
            &cluster("Never"),
            Some(("jobs", Ok(&l))),
            &Catalogue::default(),
        );
        assert_eq!(c.status, Status::Warning);
        let f = &c.findings[2];
        assert_eq!(f.object, "mutatingwebhookconfiguration sexton-webhook");
        assert!(
            f.message.ends_with("[\"inject.sexton.dev\"] without reinvocationPolicy IfNeeded: the API server does not call sexton's webhook again after later webhooks changed the Pod, so the sidecars they add are not ended, and native sidecars they strip are not restored (webhooks after it: vault-agent-injector-cfg)"),
            "{}",
            f.message
        );
        assert_eq!(
            f.fix.as_deref(),
            Some(
                r#"kubectl patch mutatingwebhookconfiguration sexton-webhook --type=json -p '[{"op":"replace","path":"/webhooks/0/reinvocationPolicy","value":"IfNeeded"}]'"#
            )
        );
        // every namespace: both of its webhooks, each patched at its index
        let all = report(&cluster("Never"), None, &Catalogue::default());
        let f = all
            .findings
            .iter()
            .find(|f| f.status == Status::Warning)
            .unwrap();
        assert_eq!(
            f.fix.as_deref(),
            Some(
                r#"kubectl patch mutatingwebhookconfiguration sexton-webhook --type=json -p '[{"op":"replace","path":"/webhooks/0/reinvocationPolicy","value":"IfNeeded"},{"op":"replace","path":"/webhooks/1/reinvocationPolicy","value":"IfNeeded"}]'"#
            )
        );
    }

    #[test]
    fn without_sexton_or_anything() {
        let l = labels();
        let mut configs = cluster("IfNeeded");
        configs.remove(1);
        let c = report(&configs, Some(("jobs", Ok(&l))), &Catalogue::default());
        assert!(
            c.summary.ends_with("; sexton's webhook is not installed"),
            "{}",
            c.summary
        );
        assert!(
            !c.findings[0].message.contains("runs "),
            "{:?}",
            c.findings[0]
        );
        let c = report(&[], Some(("jobs", Ok(&l))), &Catalogue::default());
        assert_eq!(
            (c.status, c.summary.as_str()),
            (
                Status::Ok,
                "no mutating webhook sees the creation of a Pod in namespace jobs"
            )
        );
        // two of sexton's (two releases): a configuration between them is after one, before the other
        assert_eq!(
            position("m", &["a-sexton", "z-sexton"]),
            "after sexton's a-sexton and before sexton's z-sexton"
        );
    }
}
