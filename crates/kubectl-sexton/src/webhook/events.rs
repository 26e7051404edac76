//! The Events the webhook writes about a Pod's injection: on the Pod's owner (the Pod has
//! no UID yet), only one that exists with the UID the review names.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::DynamicObject;
use kube::runtime::events::{Event, EventType, Recorder};
use serde::Deserialize;
use serde_json::Value;
use tracing::{debug, warn};

use super::answer::Request;
use super::limits::escaped;

/// The Pod's first owner, which a refusal's Event is about (read before the Pod is given
/// to the injection; `None` if it has none, or none that reads as an owner reference).
pub fn refusal_owner(pod: &Value) -> Option<OwnerReference> {
    let first = pod["metadata"]["ownerReferences"].get(0)?;
    OwnerReference::deserialize(first).ok()
}

/// An Event about the Pod's injection (a refusal, or the vendors' sidecars it recognised), on
/// the Pod's owner (the Job, the ReplicaSet, ...): the Pod has no UID yet. Only about an owner
/// that exists in the review's namespace with the UID the review names (a forged review
/// cannot put Events on other objects), and with the text escaped and bounded. A bare Pod
/// gets none: the warning reaches its creator.
pub async fn owner_event(
    client: &kube::Client,
    recorder: &Recorder,
    request: &Request,
    owner: Option<OwnerReference>,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let (Some(namespace), Some(owner)) = (request.namespace.clone(), owner) else {
        return;
    };
    if !owner_exists(client, &namespace, &owner).await {
        debug!(
            owner = escaped(&owner.name, 256),
            "no event: the owner is not one that exists in the namespace"
        );
        return;
    }
    let regarding = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(owner.api_version.clone()),
        kind: Some(owner.kind.clone()),
        name: Some(owner.name.clone()),
        uid: Some(owner.uid.clone()),
        namespace: Some(namespace),
        ..Default::default()
    };
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(escaped(note, 1024)),
        action: "Inject".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &regarding).await {
        warn!("cannot publish the {reason} event (RBAC: events.k8s.io events create/patch): {e}");
    }
}

/// Whether the owner named in a review exists in `namespace` with its UID: for the kinds
/// that own Pods (RBAC: get on them), read as metadata only. Any other kind: no.
async fn owner_exists(client: &kube::Client, namespace: &str, owner: &OwnerReference) -> bool {
    let (group, version) = match owner.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", owner.api_version.as_str()),
    };
    let plural = match (group, owner.kind.as_str()) {
        ("batch", "Job") => "jobs",
        ("apps", "ReplicaSet") => "replicasets",
        ("apps", "StatefulSet") => "statefulsets",
        ("apps", "DaemonSet") => "daemonsets",
        ("", "ReplicationController") => "replicationcontrollers",
        _ => return false,
    };
    let gvk = kube::core::GroupVersionKind::gvk(group, version, &owner.kind);
    let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(client.clone(), namespace, &resource);
    match api.get_metadata_opt(&owner.name).await {
        Ok(Some(found)) => found.metadata.uid.as_deref() == Some(owner.uid.as_str()),
        Ok(None) => false,
        Err(e) => {
            warn!("cannot check the owner of a refused pod (RBAC: get {plural}): {e}");
            false
        }
    }
}
