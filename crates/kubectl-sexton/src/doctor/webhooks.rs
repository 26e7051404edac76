//! The cluster's MutatingWebhookConfigurations as the checks read them: listed once for
//! every check (`components`, `admission`, `webhook-chain`, `injected-sidecars`), which of
//! their webhooks see the creation of a Pod in a namespace (rules, namespaceSelector,
//! objectSelector), and whether sexton's webhook serves a namespace and a pod.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ListParams;
use kube::core::{Selector, SelectorExt};
use kube::{Api, ResourceExt};
use serde_json::Value;
use sexton_inject::{ANNOTATION_INJECT, Chain};

use super::access::{Access, AccessError, answer, optional};
use super::ctx::Ctx;
use crate::shared::components::is_sexton_webhook_configuration;

/// The list request, as a refusal names it.
pub fn list_access() -> Access {
    Access::new(
        "list",
        "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    )
}

/// Every configuration (the first check to ask lists them; the others get the same answer).
pub async fn configurations(ctx: &Ctx) -> &Result<Vec<MutatingWebhookConfiguration>, AccessError> {
    ctx.configurations
        .get_or_init(|| async {
            let list = Api::<MutatingWebhookConfiguration>::all(ctx.client.clone())
                .list(&ListParams::default())
                .await;
            answer(list_access(), list).map(|l| l.items)
        })
        .await
}

/// The namespace's labels; `Ok(None)` if it does not exist.
pub async fn namespace_labels(
    ctx: &Ctx,
    ns: &str,
) -> Result<Option<BTreeMap<String, String>>, AccessError> {
    let got = Api::<Namespace>::all(ctx.client.clone()).get(ns).await;
    let access = Access::new("get", "namespaces").named(ns);
    optional(access, got).map(|n| n.map(|n| n.labels().clone()))
}

/// The chain as sexton-inject reads it (the API server's order, reinvocation policies).
pub fn chain(configs: &[MutatingWebhookConfiguration]) -> Chain {
    let objects: Vec<Value> = configs
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();
    Chain::from_objects(&objects)
}

/// Whether a rule of the webhook covers `CREATE` of core `v1` `pods`.
pub fn matches_pod_create(w: &MutatingWebhook) -> bool {
    let has = |list: &Option<Vec<String>>, want: &[&str]| {
        list.iter().flatten().any(|x| want.contains(&x.as_str()))
    };
    w.rules.iter().flatten().any(|r| {
        has(&r.operations, &["CREATE", "*"])
            && has(&r.api_groups, &["", "*"])
            && has(&r.api_versions, &["v1", "*"])
            && has(&r.resources, &["pods", "*", "*/*"])
            && r.scope.as_deref().is_none_or(|s| s != "Cluster")
    })
}

/// Whether the webhook's namespaceSelector selects the namespace; `None` if unknown.
pub fn selects_namespace(
    w: &MutatingWebhook,
    labels: Option<&BTreeMap<String, String>>,
) -> Option<bool> {
    selects(w.namespace_selector.as_ref(), labels?)
}

/// A label selector on labels (absent: everything); `None` if it cannot be read.
pub fn selects(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let Some(selector) = selector else {
        return Some(true);
    };
    Selector::try_from(selector.clone())
        .ok()
        .map(|s| s.matches(labels))
}

/// Whether a selector is set and selects less than everything.
pub fn narrows(selector: Option<&LabelSelector>) -> bool {
    selector.is_some_and(|s| {
        s.match_labels.as_ref().is_some_and(|m| !m.is_empty())
            || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
    })
}

/// How sexton's webhook treats the Pods of a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serving {
    /// Every Pod, unless it opts out (`sexton.dev/inject: disabled`): a webhook of
    /// configuration `.0` calls `/mutate` for it (the namespace is labelled
    /// `sexton.dev/inject=enabled`, or whatever the chart's namespaceSelector says).
    Namespace(String),
    /// Only Pods whose annotation `sexton.dev/inject` asks (`/mutate/annotated`).
    Annotation(String),
    /// sexton's configurations exclude the namespace (kube-system, sexton's own, ...).
    Excluded,
    NotInstalled,
    /// The configurations or the namespace's labels could not be read.
    Unknown(String),
}

/// What sexton's webhook does with one Pod of a namespace served as `serving`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodServed {
    Yes,
    OptedOut,
    NotAsked,
}

impl Serving {
    /// Whether a Pod (or template) with these annotations is injected.
    pub fn pod(&self, pod: &Value) -> PodServed {
        let asked = pod["metadata"]["annotations"][ANNOTATION_INJECT]
            .as_str()
            .map(str::trim);
        match (self, asked) {
            (_, Some(a)) if a.eq_ignore_ascii_case("disabled") => PodServed::OptedOut,
            (Serving::Namespace(_), _) | (Serving::Annotation(_), Some(_)) => PodServed::Yes,
            _ => PodServed::NotAsked,
        }
    }
}

/// How sexton's configurations (among `configs`) serve a namespace with `labels`; the pod's
/// labels decide objectSelectors.
pub fn serving(
    configs: &[MutatingWebhookConfiguration],
    labels: &BTreeMap<String, String>,
    pod_labels: &BTreeMap<String, String>,
) -> Serving {
    let mut installed = false;
    let mut annotation = None;
    for c in configs
        .iter()
        .filter(|c| is_sexton_webhook_configuration(&c.metadata))
    {
        installed = true;
        let selected = c.webhooks.iter().flatten().filter(|w| {
            matches_pod_create(w)
                && selects(w.namespace_selector.as_ref(), labels) == Some(true)
                && selects(w.object_selector.as_ref(), pod_labels) != Some(false)
        });
        for w in selected {
            if annotated(w) {
                annotation.get_or_insert_with(|| c.name_any());
            } else {
                return Serving::Namespace(c.name_any());
            }
        }
    }
    match (installed, annotation) {
        (_, Some(c)) => Serving::Annotation(c),
        (true, None) => Serving::Excluded,
        (false, None) => Serving::NotInstalled,
    }
}

/// Whether the webhook is sexton's `/mutate/annotated` (Pods that ask), by the path it calls.
fn annotated(w: &MutatingWebhook) -> bool {
    let cc = &w.client_config;
    let path = cc
        .service
        .as_ref()
        .and_then(|s| s.path.clone())
        .or_else(|| {
            let url = cc.url.as_deref()?;
            let rest = url.split_once("://").map_or(url, |(_, r)| r);
            rest.find('/').map(|i| rest[i..].to_string())
        })
        .unwrap_or_default();
    path.trim_end_matches('/').ends_with("/mutate/annotated")
}

/// sexton's configuration as deploy/ makes it (for tests of the checks that read it).
#[cfg(test)]
pub fn sexton_configuration(
    name: &str,
    reinvocation: &str,
    labelled: bool,
) -> MutatingWebhookConfiguration {
    let hook = |hook: &str, path: &str, op: &str| {
        serde_json::json!({"name": hook, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "reinvocationPolicy": reinvocation,
            "clientConfig": {"service": {"name": "sexton-webhook", "namespace": "sexton-system", "path": path}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchExpressions": [
                {"key": "sexton.dev/inject", "operator": op, "values": ["enabled"]},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}})
    };
    let mut meta = serde_json::json!({"name": name});
    if labelled {
        meta["labels"] = serde_json::json!({"app.kubernetes.io/name": "sexton-webhook"});
    }
    serde_json::from_value(serde_json::json!({"metadata": meta, "webhooks": [
        hook("inject.sexton.dev", "/mutate", "In"),
        hook("annotated.inject.sexton.dev", "/mutate/annotated", "NotIn"),
    ]}))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn sextons_webhook_serves_labelled_namespaces_and_annotated_pods() {
        let configs = [sexton_configuration(
            "batch-sexton-webhook",
            "IfNeeded",
            true,
        )];
        let none = labels(&[]);
        let enabled = labels(&[
            ("sexton.dev/inject", "enabled"),
            ("kubernetes.io/metadata.name", "jobs"),
        ]);
        let plain = labels(&[("kubernetes.io/metadata.name", "jobs")]);
        let system = labels(&[("kubernetes.io/metadata.name", "kube-system")]);
        let ns = serving(&configs, &enabled, &none);
        assert_eq!(ns, Serving::Namespace("batch-sexton-webhook".into()));
        let an = serving(&configs, &plain, &none);
        assert_eq!(an, Serving::Annotation("batch-sexton-webhook".into()));
        assert_eq!(serving(&configs, &system, &none), Serving::Excluded);
        assert_eq!(serving(&[], &enabled, &none), Serving::NotInstalled);
        let pod = |a: Value| json!({"metadata": {"annotations": a}});
        assert_eq!(ns.pod(&pod(json!({}))), PodServed::Yes);
        assert_eq!(
            ns.pod(&pod(json!({"sexton.dev/inject": " Disabled"}))),
            PodServed::OptedOut
        );
        assert_eq!(an.pod(&pod(json!({}))), PodServed::NotAsked);
        assert_eq!(
            an.pod(&pod(json!({"sexton.dev/inject": "wrap"}))),
            PodServed::Yes
        );
        assert_eq!(Serving::Excluded.pod(&pod(json!({}))), PodServed::NotAsked);
        // a configuration of another's is not sexton's, even with sexton's paths
        let other: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "other"}, "webhooks": serde_json::to_value(&configs[0].webhooks).unwrap()}))
        .unwrap();
        assert_eq!(serving(&[other], &enabled, &none), Serving::NotInstalled);
    }

    #[test]
    fn the_annotated_webhook_is_known_by_its_path() {
        let hook = |cc: Value| -> MutatingWebhook {
            serde_json::from_value(json!({"name": "h", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "clientConfig": cc}))
            .unwrap()
        };
        assert!(annotated(&hook(
            json!({"url": "https://127.0.0.1:9443/mutate/annotated"})
        )));
        assert!(!annotated(&hook(
            json!({"url": "https://127.0.0.1:9443/mutate"})
        )));
        assert!(!annotated(&hook(json!({"url": "https://127.0.0.1:9443"}))));
        assert!(annotated(&hook(
            json!({"service": {"name": "s", "namespace": "n", "path": "/mutate/annotated/"}})
        )));
    }
}
