//! Pure: the vendors' injected sidecars a pod has, by the catalogue (a container's name and
//! the pod's marker, in `spec.containers` or as a native sidecar), and those a pod template
//! asks a vendor's webhook for (the vendor's trigger), each with what proves it.

use serde_json::Value;
use sexton_inject::{Catalogue, Marker, Vendor, run_to_completion};

/// A vendor's sidecar found in a pod, or asked for by a template.
#[derive(Debug, Clone)]
pub struct Found<'c> {
    pub container: String,
    pub vendor: &'c Vendor,
    /// What proves it: the marker the pod carries (`annotation sidecar.istio.io/status`), or
    /// for a template the trigger that asks for it.
    pub evidence: String,
    pub place: Place,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// An init container with `restartPolicy: Always`.
    Native,
    /// In `spec.containers`.
    Containers,
    /// Not there yet: the template asks the vendor's webhook for it.
    Coming,
}

/// The vendors' injected sidecars a pod has (native ones included), in its lists' order.
pub fn in_pod<'c>(pod: &Value, catalogue: &'c Catalogue) -> Vec<Found<'c>> {
    if !run_to_completion(&pod["spec"]) {
        return vec![];
    }
    let natives = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always")
        .filter_map(|c| c["name"].as_str())
        .map(|n| (n.to_string(), Place::Native));
    let containers = catalogue
        .recognise(pod)
        .into_iter()
        .map(|r| (r.container, Place::Containers));
    natives
        .chain(containers)
        .filter_map(|(container, place)| {
            let vendor = catalogue.vendor_of(pod, &container)?;
            let marker = vendor.markers.iter().find(|m| m.on_pod(pod))?;
            Some(Found {
                container,
                vendor,
                evidence: evidence(marker, pod),
                place,
            })
        })
        .collect()
}

/// The marker as the pod carries it: `annotation cloudsql.cloud.google.com/orders`, where
/// the catalogue has the pattern `cloudsql.cloud.google.com/*`.
pub fn evidence(marker: &Marker, pod: &Value) -> String {
    let on = serde_json::to_value(marker).unwrap_or_default()["on"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let map = match on.as_str() {
        "label" => &pod["metadata"]["labels"],
        _ => &pod["metadata"]["annotations"],
    };
    let key = map
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| marker.key.matches(k));
    match (key, &marker.value) {
        (Some(k), Some(v)) => format!("{on} {k}={v}"),
        (Some(k), None) => format!("{on} {k}"),
        (None, _) => marker.to_string(),
    }
}

/// The vendors' sidecars a template asks for (its triggers) and does not have yet.
pub fn asked<'c>(template: &Value, catalogue: &'c Catalogue) -> Vec<Found<'c>> {
    if !run_to_completion(&template["spec"]) {
        return vec![];
    }
    catalogue
        .vendors
        .iter()
        .filter(|v| !v.injected(template))
        .filter_map(|v| {
            let trigger = v.triggers.iter().find(|m| m.on_pod(template))?;
            Some(Found {
                container: v.containers.first()?.0.clone(),
                vendor: v,
                evidence: format!("asks for it: {}", evidence(trigger, template)),
                place: Place::Coming,
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A Job-style pod: its annotations, labels, containers, and native sidecars.
    pub(crate) fn pod(
        annotations: Value,
        labels: Value,
        containers: &[&str],
        natives: &[&str],
    ) -> Value {
        let list = |names: &[&str], native: bool| -> Vec<Value> {
            names
                .iter()
                .map(|n| match native {
                    true => json!({"name": n, "restartPolicy": "Always"}),
                    false => json!({"name": n}),
                })
                .collect()
        };
        json!({
            "metadata": {"annotations": annotations, "labels": labels},
            "spec": {"restartPolicy": "Never", "containers": list(containers, false),
                "initContainers": list(natives, true)},
        })
    }

    #[test]
    fn found_by_name_and_marker_in_either_list() {
        let c = Catalogue::default();
        let p = pod(
            json!({"sidecar.istio.io/status": "{}", "vault.hashicorp.com/agent-inject-status": "injected"}),
            json!({}),
            &["main", "istio-proxy"],
            &["vault-agent"],
        );
        let found: Vec<(String, &str, String, Place)> = in_pod(&p, &c)
            .into_iter()
            .map(|f| (f.container, f.vendor.name.as_str(), f.evidence, f.place))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "vault-agent".to_string(),
                    "Vault Agent",
                    "annotation vault.hashicorp.com/agent-inject-status=injected".to_string(),
                    Place::Native
                ),
                (
                    "istio-proxy".to_string(),
                    "Istio",
                    "annotation sidecar.istio.io/status".to_string(),
                    Place::Containers
                ),
            ]
        );
        // a marker's key pattern is shown as the pod has it
        let csql = pod(
            json!({"cloudsql.cloud.google.com/orders": "1,img"}),
            json!({}),
            &["main", "csql-orders"],
            &[],
        );
        assert_eq!(
            in_pod(&csql, &c)[0].evidence,
            "annotation cloudsql.cloud.google.com/orders"
        );
        // a name alone proves nothing; a long-running pod is never looked at
        let unmarked = pod(json!({}), json!({}), &["main", "istio-proxy"], &[]);
        assert!(in_pod(&unmarked, &c).is_empty());
        let injected = pod(
            json!({"sidecar.istio.io/status": "{}"}),
            json!({}),
            &["main", "istio-proxy"],
            &[],
        );
        let mut always = injected.clone();
        always["spec"]["restartPolicy"] = json!("Always");
        assert!(in_pod(&always, &c).is_empty());
        assert!(in_pod(&injected, &Catalogue::empty()).is_empty());
    }
}
