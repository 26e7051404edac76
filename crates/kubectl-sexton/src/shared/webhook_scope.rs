//! Which Pods sexton's webhook serves, read from its live MutatingWebhookConfiguration (the
//! truth: the chart's values, an admin's edit and `kubectl label namespace` all end up
//! there), pure. The controller's safety net acts only on Pods the webhook serves, and
//! `doctor` says why a Pod was not injected. A webhook of the configuration serves a Pod
//! when one of its rules covers Pod CREATE, its namespaceSelector matches the namespace's
//! labels and its objectSelector the Pod's; `/mutate/annotated` (the chart's second webhook)
//! serves only Pods whose annotation `sexton.dev/inject` asks for it, the others every Pod
//! but those whose annotation says `disabled` (as the webhook itself decides, sexton-inject's
//! `admit`).

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::core::{Selector, SelectorExt};
use sexton_inject::ANNOTATION_INJECT;

/// The path of the webhook that serves only Pods that ask (the chart's
/// `annotated.inject.sexton.dev`).
pub const PATH_ANNOTATED: &str = "/mutate/annotated";

/// One webhook of the configuration that reviews Pod CREATE.
#[derive(Debug, Clone)]
pub struct Hook {
    pub name: String,
    /// Only Pods whose annotation `sexton.dev/inject` asks for it.
    pub annotated: bool,
    namespace: Selector,
    object: Selector,
    /// The namespace label keys its namespaceSelector reads (when were they set?).
    pub namespace_keys: Vec<String>,
}

/// The Pods a webhook configuration serves.
#[derive(Debug, Clone, Default)]
pub struct WebhookScope {
    pub hooks: Vec<Hook>,
    /// Webhooks for Pods whose selectors cannot be read: they serve nothing here (as the
    /// API server, which refuses such a configuration, would not call them either).
    pub unreadable: Vec<String>,
}

impl WebhookScope {
    pub fn of(c: &MutatingWebhookConfiguration) -> WebhookScope {
        let mut scope = WebhookScope::default();
        for w in c
            .webhooks
            .iter()
            .flatten()
            .filter(|w| reviews_pod_create(w))
        {
            match (
                selector(&w.namespace_selector),
                selector(&w.object_selector),
            ) {
                (Some(namespace), Some(object)) => scope.hooks.push(Hook {
                    name: w.name.clone(),
                    annotated: path(w).is_some_and(|p| p.trim_end_matches('/') == PATH_ANNOTATED),
                    namespace,
                    object,
                    namespace_keys: keys(w.namespace_selector.as_ref()),
                }),
                _ => scope.unreadable.push(w.name.clone()),
            }
        }
        scope
    }

    /// The webhook that serves a Pod with `pod_labels` and annotation `sexton.dev/inject`
    /// `asked` in a namespace with `namespace_labels`, if one does.
    pub fn serving(
        &self,
        namespace_labels: &BTreeMap<String, String>,
        pod_labels: &BTreeMap<String, String>,
        asked: Option<&str>,
    ) -> Option<&Hook> {
        let disabled = asked.is_some_and(|a| a.trim().eq_ignore_ascii_case("disabled"));
        if disabled {
            return None;
        }
        self.hooks.iter().find(|h| {
            (!h.annotated || asked.is_some())
                && h.namespace.matches(namespace_labels)
                && h.object.matches(pod_labels)
        })
    }
}

/// The annotation `sexton.dev/inject` of a Pod.
pub fn asked(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(ANNOTATION_INJECT)
        .map(String::as_str)
}

/// Whether one of the webhook's rules covers Pod CREATE (`*` included; subresources not).
fn reviews_pod_create(w: &MutatingWebhook) -> bool {
    let has = |list: &Option<Vec<String>>, want: &str| {
        list.iter().flatten().any(|v| v == want || v == "*")
    };
    w.rules.iter().flatten().any(|r| {
        has(&r.operations, "CREATE") && has(&r.api_groups, "") && has(&r.resources, "pods")
    })
}

/// The webhook's path: its Service's, or its URL's.
fn path(w: &MutatingWebhook) -> Option<&str> {
    let c = &w.client_config;
    if let Some(s) = &c.service {
        return s.path.as_deref();
    }
    let url = c.url.as_deref()?;
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map(|i| &rest[i..])
}

/// A label selector (absent: everything); `None` if it cannot be read.
fn selector(s: &Option<LabelSelector>) -> Option<Selector> {
    match s {
        None => Some(Selector::default()),
        Some(s) => Selector::try_from(s.clone()).ok(),
    }
}

fn keys(s: Option<&LabelSelector>) -> Vec<String> {
    let Some(s) = s else { return vec![] };
    let mut keys: Vec<String> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .collect();
    keys.extend(s.match_expressions.iter().flatten().map(|e| e.key.clone()));
    keys.sort();
    keys.dedup();
    keys
}

/// Which of the namespace's labels of `keys` were set after `after`, as its managedFields
/// record it, and when the last of them was: the keys owned by an entry written after
/// `after` (an entry's time is its owner's last write of any field it owns, so a key can be
/// named for a later write of another label of the same owner); `None` if none was.
pub fn labels_set_after(
    namespace: &ObjectMeta,
    keys: &[String],
    after: Timestamp,
) -> Option<(Vec<String>, Timestamp)> {
    let mut set = vec![];
    let mut last = None;
    for e in namespace.managed_fields.iter().flatten() {
        let Some(time) = e.time.as_ref().map(|t| t.0).filter(|t| *t > after) else {
            continue;
        };
        let labels = e.fields_v1.as_ref().map(|f| &f.0["f:metadata"]["f:labels"]);
        let owned: Vec<&String> = keys
            .iter()
            .filter(|k| labels.is_some_and(|l| !l[format!("f:{k}")].is_null()))
            .collect();
        if !owned.is_empty() {
            set.extend(owned.into_iter().cloned());
            last = last.max(Some(time));
        }
    }
    set.sort();
    set.dedup();
    last.map(|t| (set, t))
}

/// What the namespace cache keeps of managedFields: the entries that own labels, with
/// nothing but the labels they own (`labels_set_after` reads no more).
pub fn keep_label_owners(namespace: &mut ObjectMeta) {
    let Some(entries) = namespace.managed_fields.as_mut() else {
        return;
    };
    entries.retain_mut(|e| {
        let labels = e
            .fields_v1
            .as_ref()
            .map(|f| f.0["f:metadata"]["f:labels"].clone())
            .filter(|l| !l.is_null());
        match labels {
            Some(l) => {
                e.fields_v1 = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                    serde_json::json!({"f:metadata": {"f:labels": l}}),
                ));
                true
            }
            None => false,
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(l: &[(&str, &str)]) -> BTreeMap<String, String> {
        l.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The chart's configuration: `/mutate` for labelled namespaces, `/mutate/annotated`
    /// for the others, never kube-system; and the EphemeralJob webhook.
    fn chart() -> MutatingWebhookConfiguration {
        let hook = |name: &str, path: &str, op: &str| {
            json!({
                "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "clientConfig": {"service": {"name": "sexton-webhook", "namespace": "sexton-system", "path": path}},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "namespaceSelector": {"matchExpressions": [
                    {"key": "sexton.dev/inject", "operator": op, "values": ["enabled"]},
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]},
            })
        };
        serde_json::from_value(json!({
            "metadata": {"name": "sexton-webhook"},
            "webhooks": [
                hook("inject.sexton.dev", "/mutate", "In"),
                hook("annotated.inject.sexton.dev", "/mutate/annotated", "NotIn"),
                {"name": "requester.sexton.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"url": "https://127.0.0.1:1/mutate/ephemeraljobs"},
                 "rules": [{"operations": ["CREATE"], "apiGroups": ["sexton.dev"], "apiVersions": ["*"], "resources": ["ephemeraljobs"]}]},
            ],
        }))
        .unwrap()
    }

    #[test]
    fn the_charts_two_webhooks_and_the_pods_they_serve() {
        let scope = WebhookScope::of(&chart());
        let names: Vec<_> = scope.hooks.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["inject.sexton.dev", "annotated.inject.sexton.dev"]);
        assert_eq!(
            scope.hooks[0].namespace_keys,
            ["kubernetes.io/metadata.name", "sexton.dev/inject"]
        );
        let on = labels(&[
            ("sexton.dev/inject", "enabled"),
            ("kubernetes.io/metadata.name", "a"),
        ]);
        let off = labels(&[("kubernetes.io/metadata.name", "b")]);
        let system = labels(&[
            ("sexton.dev/inject", "enabled"),
            ("kubernetes.io/metadata.name", "kube-system"),
        ]);
        let none = BTreeMap::new();
        let serving = |ns: &BTreeMap<String, String>, asked: Option<&str>| {
            scope.serving(ns, &none, asked).map(|h| h.name.clone())
        };
        // (namespace, annotation, webhook)
        for (ns, asked, want) in [
            (&on, None, Some("inject.sexton.dev")),
            (&on, Some("wrap"), Some("inject.sexton.dev")),
            (&on, Some(" Disabled"), None),
            (&off, None, None),
            (&off, Some("native"), Some("annotated.inject.sexton.dev")),
            (&off, Some("disabled"), None),
            (&system, None, None),
        ] {
            assert_eq!(serving(ns, asked).as_deref(), want, "{ns:?} {asked:?}");
        }
    }

    #[test]
    fn rules_paths_and_selectors() {
        let c: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "x"},
            "webhooks": [
                // every resource, by URL; an objectSelector on the Pod's labels
                {"name": "all.x", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"url": "https://h:8443/mutate/annotated/"},
                 "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}],
                 "objectSelector": {"matchLabels": {"team": "a"}}},
                // UPDATE only: not Pod creation
                {"name": "update.x", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"url": "https://h/mutate"},
                 "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
                // a subresource: not Pod creation
                {"name": "sub.x", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"url": "https://h/mutate"},
                 "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/ephemeralcontainers"]}]},
                // a selector that cannot be read
                {"name": "bad.x", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"url": "https://h/mutate"},
                 "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                 "namespaceSelector": {"matchExpressions": [{"key": "k", "operator": "Sideways"}]}},
            ],
        }))
        .unwrap();
        let scope = WebhookScope::of(&c);
        assert_eq!(scope.hooks.len(), 1);
        assert!(
            scope.hooks[0].annotated,
            "the URL's path, trailing slash or not"
        );
        assert_eq!(scope.unreadable, ["bad.x"]);
        let none = BTreeMap::new();
        let team_a = labels(&[("team", "a")]);
        assert!(scope.serving(&none, &team_a, Some("auto")).is_some());
        assert!(
            scope.serving(&none, &team_a, None).is_none(),
            "annotated: only Pods that ask"
        );
        assert!(
            scope.serving(&none, &none, Some("auto")).is_none(),
            "objectSelector"
        );
    }

    #[test]
    fn when_the_labels_were_set_from_managed_fields() {
        let mut ns: ObjectMeta = serde_json::from_value(json!({
            "name": "batch",
            "managedFields": [
                {"manager": "kubectl-create", "operation": "Update", "time": "2026-01-01T00:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}},
                {"manager": "kubectl-label", "operation": "Update", "time": "2026-01-01T00:05:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:sexton.dev/inject": {}}}}},
                {"manager": "other", "operation": "Update", "time": "2026-01-01T00:09:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:finalizers": {}}}},
            ],
        }))
        .unwrap();
        let after = |ns: &ObjectMeta, keys: &[&str], t: &str| {
            let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            labels_set_after(ns, &keys, t.parse().unwrap())
                .map(|(keys, at)| format!("{} at {at}", keys.join(", ")))
        };
        let both = ["sexton.dev/inject", "kubernetes.io/metadata.name"];
        assert_eq!(
            after(&ns, &["sexton.dev/inject"], "2026-01-01T00:01:00Z").as_deref(),
            Some("sexton.dev/inject at 2026-01-01T00:05:00Z")
        );
        assert_eq!(
            after(&ns, &both, "2026-01-01T00:01:00Z").as_deref(),
            Some("sexton.dev/inject at 2026-01-01T00:05:00Z"),
            "only the keys set after the time"
        );
        assert_eq!(
            after(&ns, &both, "2025-12-31T00:00:00Z").as_deref(),
            Some("kubernetes.io/metadata.name, sexton.dev/inject at 2026-01-01T00:05:00Z")
        );
        assert_eq!(after(&ns, &both, "2026-01-01T00:05:00Z"), None, "not after");
        assert_eq!(after(&ns, &["team"], "2025-12-31T00:00:00Z"), None);
        keep_label_owners(&mut ns);
        assert_eq!(
            ns.managed_fields.as_ref().unwrap().len(),
            2,
            "the entry without labels dropped"
        );
        assert_eq!(
            after(&ns, &both, "2026-01-01T00:01:00Z").as_deref(),
            Some("sexton.dev/inject at 2026-01-01T00:05:00Z"),
            "what the cache keeps says the same"
        );
    }
}
