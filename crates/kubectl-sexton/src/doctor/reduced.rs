//! A pod reduced to what the injected-sidecar rules read, pure: its name, owner, labels,
//! the annotations the catalogue or sexton reads, and its containers' names (a mesh's
//! status annotation is kept; an application's environment, kubectl's last-applied
//! configuration and the like are not).

use serde_json::{Map, Value, json};
use sexton_inject::{Catalogue, Marker, run_to_completion};

/// A pod, reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPod {
    pub namespace: String,
    pub name: String,
    /// The Job that owns it, if one does.
    pub job: Option<String>,
    /// `creationTimestamp` as the API gives it (RFC 3339: ordered as text).
    pub created: String,
    /// `{metadata: {annotations, labels}, spec: {restartPolicy, containers, initContainers}}`,
    /// containers with their `name` (and `restartPolicy` for init containers) only.
    pub object: Value,
}

/// The annotation keys worth keeping: the catalogue's markers, triggers and native switches.
pub fn annotation_keys(catalogue: &Catalogue) -> Vec<Marker> {
    catalogue
        .vendors
        .iter()
        .flat_map(|v| {
            v.markers
                .iter()
                .chain(&v.triggers)
                .chain(v.native_switch.as_ref())
        })
        .cloned()
        .collect()
}

/// The pod reduced, if it runs to completion.
pub fn reduce(pod: &Value, keys: &[Marker]) -> Option<RunPod> {
    let meta = &pod["metadata"];
    let spec = &pod["spec"];
    if !run_to_completion(spec) {
        return None;
    }
    let annotations: Map<String, Value> = meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("sexton.dev/") || keys.iter().any(|m| m.key.matches(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let names = |key: &str, policy: bool| -> Vec<Value> {
        spec[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut kept = json!({"name": c["name"]});
                if policy && !c["restartPolicy"].is_null() {
                    kept["restartPolicy"] = c["restartPolicy"].clone();
                }
                kept
            })
            .collect()
    };
    let job = meta["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["kind"] == "Job" && o["apiVersion"] == "batch/v1")
        .and_then(|o| o["name"].as_str())
        .map(str::to_string);
    Some(RunPod {
        namespace: meta["namespace"].as_str()?.to_string(),
        name: meta["name"].as_str()?.to_string(),
        job,
        created: meta["creationTimestamp"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        object: json!({
            "metadata": {"annotations": annotations, "labels": meta["labels"].clone()},
            "spec": {
                "restartPolicy": spec["restartPolicy"],
                "containers": names("containers", false),
                "initContainers": names("initContainers", true),
            },
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_reduced_to_what_the_rules_read() {
        let keys = annotation_keys(&Catalogue::default());
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-11-28T10:00:00Z",
                "labels": {"job-name": "j"},
                "annotations": {"sidecar.istio.io/status": "{}", "sexton.dev/injected": "{}",
                    "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(10_000)},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]},
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "app", "env": [{"name": "BIG", "value": "y"}]},
                    {"name": "istio-proxy", "image": "proxyv2"}],
                "initContainers": [{"name": "istio-init", "image": "proxyv2"},
                    {"name": "vault-agent", "restartPolicy": "Always"}]},
        });
        let r = reduce(&pod, &keys).unwrap();
        assert_eq!((r.namespace.as_str(), r.name.as_str()), ("ns", "p"));
        assert_eq!(r.job.as_deref(), Some("j"));
        assert_eq!(
            r.object,
            json!({
                "metadata": {"annotations": {"sidecar.istio.io/status": "{}", "sexton.dev/injected": "{}"},
                    "labels": {"job-name": "j"}},
                "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main"}, {"name": "istio-proxy"}],
                    "initContainers": [{"name": "istio-init"}, {"name": "vault-agent", "restartPolicy": "Always"}]},
            })
        );
        // a long-running pod is not one of them
        let mut always = pod.clone();
        always["spec"]["restartPolicy"] = json!("Always");
        assert_eq!(reduce(&always, &keys), None);
    }
}
