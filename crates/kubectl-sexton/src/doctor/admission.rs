//! Whether native sidecars survive admission: a probe pod with one (an init container with
//! `restartPolicy: Always`) is created as a server-side dry run in each namespace checked,
//! through the real admission chain, and what comes back is read. If the field is gone,
//! a mutating webhook stripped it (one decoding pods with a `k8s.io/api` that predates
//! native sidecars); the suspects are the webhooks whose rules match that pod, and the
//! report says whether sexton's webhook, which restores the field, is installed and
//! serves the namespace.

use std::collections::BTreeMap;

use futures_util::{StreamExt, stream};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::access::{Access, AccessError, answer};
use super::ctx::{Ctx, Namespaces};
use super::report::{Check, Finding, Status};
use super::webhooks::{self, matches_pod_create, selects, selects_namespace};
use crate::shared::components::{DEFAULT_WEBHOOK_CONFIGURATION, is_sexton_webhook_configuration};

pub const NAME: &str = "admission";

/// Probes in flight at once (one per namespace).
const CONCURRENCY: usize = 8;
const PROBE: &str = "sexton-doctor-probe";
const SIDECAR: &str = "sidecar";

/// What came back from one namespace's probe.
#[derive(Debug)]
enum Outcome {
    Survived,
    /// The sidecar lost its `restartPolicy` (`Some`) or is gone (`None`).
    Stripped(Option<String>),
    /// Admission refused the probe (a policy, a webhook without dry-run support, ...).
    Refused(String),
    Failed(AccessError),
}

pub async fn check(ctx: &Ctx) -> Check {
    let names = match ctx.namespaces.names(&ctx.client).await {
        Ok(n) => n,
        Err(e) => return Check::failed(NAME, "namespaces", e.to_string()),
    };
    // in namespace order, whatever order the probes answer in
    let outcomes: Vec<(String, Outcome)> = stream::iter(names)
        .map(|ns| async move {
            let o = probe(ctx, &ns).await;
            (ns, o)
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let survived = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Survived))
        .count();
    let mut findings = vec![];
    for (ns, outcome) in outcomes {
        let object = format!("namespace {ns}");
        findings.push(match outcome {
            Outcome::Survived => continue,
            Outcome::Refused(why) => Finding::new(
                Status::Warning,
                object,
                format!("the probe pod (a dry run) was refused, so whether native sidecars survive is unknown: {why}"),
            ),
            Outcome::Failed(e) => Finding::new(Status::Error, object, e.to_string()),
            Outcome::Stripped(came_back) => {
                let configs = webhooks::configurations(ctx).await;
                // unreadable: selectors go unevaluated
                let labels = webhooks::namespace_labels(ctx, &ns).await.ok().flatten();
                stripped(&ns, came_back, configs, labels.as_ref())
            }
        });
    }
    let scope = match &ctx.namespaces {
        Namespaces::One(ns) => format!("namespace {ns}"),
        Namespaces::All => format!("{} namespace(s)", survived + findings.len()),
    };
    let summary = if findings.is_empty() {
        format!("a native sidecar survives admission (server-side dry run) in {scope}")
    } else {
        format!(
            "a native sidecar survives admission in {survived} of {} namespace(s)",
            survived + findings.len()
        )
    };
    Check::new(NAME, summary, findings)
}

/// The probe: a pod as a Job makes it, with one native sidecar; restricted enough for
/// Pod Security's `restricted` profile, so that a policy does not hide the answer.
fn probe_pod() -> Pod {
    let container = |name: &str, native: bool| {
        let mut c = json!({
            "name": name, "image": "registry.k8s.io/pause:3.10",
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
        });
        if native {
            c["restartPolicy"] = json!("Always");
        }
        c
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{PROBE}-"),
            "labels": {"app.kubernetes.io/name": PROBE, "job-name": PROBE, "batch.kubernetes.io/job-name": PROBE}},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": [container(SIDECAR, true)],
            "containers": [container("main", false)],
        }
    }))
    .expect("the probe pod is a Pod")
}

async fn probe(ctx: &Ctx, ns: &str) -> Outcome {
    let params = PostParams {
        dry_run: true,
        field_manager: Some("kubectl-sexton-doctor".into()),
    };
    let created = Api::<Pod>::namespaced(ctx.client.clone(), ns)
        .create(&params, &probe_pod())
        .await;
    match created {
        Ok(pod) => read(&pod),
        // RBAC's refusal names the user; admission's (policy, quota, a webhook) does not
        Err(kube::Error::Api(s)) if !(s.code == 403 && s.message.contains("User \"")) => {
            Outcome::Refused(s.message)
        }
        Err(e) => Outcome::Failed(
            answer::<()>(
                Access::new("create (dry run)", "pods").in_ns(Some(ns)),
                Err(e),
            )
            .unwrap_err(),
        ),
    }
}

/// Whether the probe's sidecar came back with `restartPolicy: Always`.
fn read(pod: &Pod) -> Outcome {
    let inits = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref());
    match inits.into_iter().flatten().find(|c| c.name == SIDECAR) {
        Some(c) if c.restart_policy.as_deref() == Some("Always") => Outcome::Survived,
        Some(c) => Outcome::Stripped(Some(format!(
            "came back with restartPolicy {}",
            c.restart_policy
                .as_deref()
                .map_or("unset".into(), |p| format!("{p:?}"))
        ))),
        None => Outcome::Stripped(None),
    }
}

/// The finding for a namespace whose probe lost its native sidecar.
fn stripped(
    ns: &str,
    came_back: Option<String>,
    configs: &Result<Vec<MutatingWebhookConfiguration>, AccessError>,
    labels: Option<&BTreeMap<String, String>>,
) -> Finding {
    let what = came_back.unwrap_or_else(|| "was removed altogether".into());
    let mut message = format!(
        "native sidecars are stripped at admission: the dry-run probe's init container {SIDECAR:?} (restartPolicy: Always) {what}"
    );
    let fix;
    match configs {
        Err(e) => {
            message.push_str(&format!("; the suspects cannot be named: {e}"));
            fix = "find the mutating webhook that rewrites pods (built on a k8s.io/api older than v0.28) and upgrade it, or install sexton's webhook (deploy/webhook.yaml), which restores the field".to_string();
        }
        Ok(configs) => {
            let probe = probe_pod();
            let suspects = suspects(configs, labels, probe.labels());
            if suspects.is_empty() {
                message.push_str("; no mutating webhook's rules match it (a webhook with a failing selector evaluation, or an admission plugin?)");
            } else {
                message.push_str(&format!("; suspects: {}", suspects.join(", ")));
            }
            if labels.is_none() {
                message.push_str(" (namespaceSelectors not evaluated: cannot get the namespace)");
            }
            let sexton = configs
                .iter()
                .find(|c| is_sexton_webhook_configuration(&c.metadata));
            let serves = sexton.is_some_and(|c| {
                c.webhooks.iter().flatten().any(|w| {
                    w.name == "inject.sexton.dev" && selects_namespace(w, labels) != Some(false)
                })
            });
            let label = format!("kubectl label namespace {ns} sexton.dev/inject=enabled");
            (message, fix) = match (sexton, serves) {
                (None, _) => (
                    format!("{message}; sexton's webhook is not installed"),
                    format!(
                        "upgrade the suspect webhook (it drops fields of k8s.io/api v0.28+), or install sexton's webhook, which restores native sidecars (kubectl apply -k deploy/), then: {label}"
                    ),
                ),
                (Some(_), false) => (
                    format!(
                        "{message}; sexton's webhook is installed but does not serve this namespace"
                    ),
                    label,
                ),
                (Some(c), true) => (
                    format!(
                        "{message}; sexton's webhook serves this namespace and could not restore it"
                    ),
                    format!(
                        "make the suspect sort before {} with reinvocationPolicy Never, or upgrade it (docs/webhook.md, \"Repairing native sidecars after other webhooks\")",
                        c.name_any()
                    ),
                ),
            };
        }
    }
    Finding::new(Status::Error, format!("namespace {ns}"), message).fix(fix)
}

/// `configuration/webhook (order and reinvocation)` for every webhook other than sexton's
/// whose rules match the probe's CREATE in this namespace.
fn suspects(
    configs: &[MutatingWebhookConfiguration],
    ns_labels: Option<&BTreeMap<String, String>>,
    pod_labels: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut names = vec![];
    // admission calls mutating webhooks in the order of their configurations' names
    let sexton = configs
        .iter()
        .find(|c| is_sexton_webhook_configuration(&c.metadata))
        .map_or(DEFAULT_WEBHOOK_CONFIGURATION.to_string(), |c| c.name_any());
    for c in configs {
        let config = c.name_any();
        if is_sexton_webhook_configuration(&c.metadata) {
            continue;
        }
        for w in c.webhooks.iter().flatten() {
            if !matches_pod_create(w)
                || selects_namespace(w, ns_labels) == Some(false)
                || !selects(w.object_selector.as_ref(), pod_labels).unwrap_or(true)
            {
                continue;
            }
            let order = if config < sexton { "before" } else { "after" };
            let mut note = format!(
                "runs {order} {sexton}, reinvocationPolicy {}",
                w.reinvocation_policy.as_deref().unwrap_or("Never")
            );
            if w.match_conditions.as_ref().is_some_and(|m| !m.is_empty()) {
                note.push_str(", matchConditions not evaluated");
            }
            names.push(format!(
                "MutatingWebhookConfiguration {config} webhook {} ({note})",
                w.name
            ));
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, webhooks: serde_json::Value) -> MutatingWebhookConfiguration {
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": webhooks})).unwrap()
    }

    fn hook(name: &str, rule: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
        let mut h = json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"url": "https://x"}, "rules": [rule]});
        h.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        h
    }

    fn pods(ops: &[&str]) -> serde_json::Value {
        json!({"operations": ops, "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]})
    }

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn suspects_are_the_webhooks_whose_rules_and_selectors_match() {
        let configs = vec![
            config(
                "aa-strip",
                json!([hook("a.x", pods(&["CREATE"]), json!({}))]),
            ),
            config(
                "zz-update-only",
                json!([hook("u.x", pods(&["UPDATE"]), json!({}))]),
            ),
            config(
                "zz-services",
                json!([hook(
                    "s.x",
                    json!({"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"]}),
                    json!({})
                )]),
            ),
            config(
                "zz-other-ns",
                json!([hook(
                    "o.x",
                    pods(&["*"]),
                    json!({"namespaceSelector": {"matchLabels": {"team": "b"}}})
                )]),
            ),
            config(
                "zz-objects",
                json!([hook(
                    "obj.x",
                    pods(&["CREATE"]),
                    json!({"objectSelector": {"matchExpressions": [{"key": "inject", "operator": "Exists"}]}})
                )]),
            ),
            config(
                "zz-mine",
                json!([hook(
                    "m.x",
                    pods(&["CREATE"]),
                    json!({"namespaceSelector": {"matchLabels": {"team": "a"}}, "reinvocationPolicy": "IfNeeded"})
                )]),
            ),
            config(
                "sexton-webhook",
                json!([hook("inject.sexton.dev", pods(&["CREATE"]), json!({}))]),
            ),
        ];
        let ns = labels(&[("team", "a")]);
        let s = suspects(&configs, Some(&ns), &labels(&[("job-name", "p")]));
        assert_eq!(
            s,
            [
                "MutatingWebhookConfiguration aa-strip webhook a.x (runs before sexton-webhook, reinvocationPolicy Never)",
                "MutatingWebhookConfiguration zz-mine webhook m.x (runs after sexton-webhook, reinvocationPolicy IfNeeded)",
            ]
        );
        // namespace labels unknown: namespaceSelectors cannot rule anyone out
        assert_eq!(suspects(&configs, None, &labels(&[])).len(), 3);
    }

    #[test]
    fn the_finding_says_whether_sextons_webhook_can_repair() {
        let strip = config(
            "zz-strip",
            json!([hook("s.x", pods(&["CREATE"]), json!({}))]),
        );
        let sexton = config(
            "sexton-webhook",
            json!([hook(
                "inject.sexton.dev",
                pods(&["CREATE"]),
                json!({"namespaceSelector": {"matchLabels": {"sexton.dev/inject": "enabled"}}})
            )]),
        );
        let plain = labels(&[("kubernetes.io/metadata.name", "ns")]);
        let f = stripped(
            "ns",
            Some("came back with restartPolicy unset".into()),
            &Ok(vec![strip.clone()]),
            Some(&plain),
        );
        assert_eq!(f.status, Status::Error);
        assert!(
            f.message.contains("zz-strip webhook s.x") && f.message.contains("not installed"),
            "{}",
            f.message
        );
        let f = stripped(
            "ns",
            None,
            &Ok(vec![strip.clone(), sexton.clone()]),
            Some(&plain),
        );
        assert!(
            f.message.contains("does not serve this namespace"),
            "{}",
            f.message
        );
        assert_eq!(
            f.fix.as_deref(),
            Some("kubectl label namespace ns sexton.dev/inject=enabled")
        );
        let served = labels(&[("sexton.dev/inject", "enabled")]);
        let f = stripped("ns", None, &Ok(vec![strip, sexton]), Some(&served));
        assert!(f.message.contains("could not restore"), "{}", f.message);
    }

    #[test]
    fn a_probe_is_read_by_its_sidecars_restart_policy() {
        let mut pod = probe_pod();
        assert!(matches!(read(&pod), Outcome::Survived));
        let spec = pod.spec.as_mut().unwrap();
        spec.init_containers.as_mut().unwrap()[0].restart_policy = None;
        assert!(matches!(read(&pod), Outcome::Stripped(Some(_))));
        pod.spec.as_mut().unwrap().init_containers = None;
        assert!(matches!(read(&pod), Outcome::Stripped(None)));
    }
}
