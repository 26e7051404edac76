//! Image volumes, where `wrap` and `native-wrap` may take the supervisor from: which nodes'
//! runtimes mount them (`sexton_inject::mounts_image_volumes`, the rule `auto` uses), and
//! the pods that failed because a runtime mounted one empty without an error (k3s's bundled
//! containerd did, k3s-io/k3s#14323). Such a pod's container fails to start with the
//! runtime's bare "stat /sexton/sexton: no such file or directory"; this check names the
//! cause, the node and its runtime, and the fix (the copy).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use sexton_inject::mounts_image_volumes;

use super::access::{Access, answer};
use super::ctx::Ctx;
use super::report::{Check, Finding, Status};

pub const NAME: &str = "image-volumes";

/// The volume wrap's binary comes from, and the path the wrapped containers run.
const BIN_VOLUME: &str = "sexton-bin";
const BINARY: &str = "/sexton/sexton";

/// k3s's bundled containerd: image volumes mount empty.
const PITFALL: &str =
    "mounts image volumes empty without an error (k3s's bundled containerd did: k3s-io/k3s#14323)";
const FIX: &str = "kubectl sexton inject --binary-source copy -f MANIFEST (or annotate the pod template sexton.dev/binary-source: copy)";

pub async fn check(ctx: &Ctx) -> Check {
    let nodes = Api::<Node>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await;
    let nodes = match answer(Access::new("list", "nodes"), nodes) {
        Ok(n) => n.items,
        Err(e) => return Check::failed(NAME, "nodes", e.to_string()),
    };
    let runtimes: BTreeMap<String, String> =
        nodes.iter().map(|n| (n.name_any(), runtime(n))).collect();
    let mut findings = node_findings(&runtimes);
    let ns = ctx.namespaces.one();
    let api = match ns {
        Some(ns) => Api::<Pod>::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    match answer(
        Access::new("list", "pods").in_ns(ns),
        api.list(&ListParams::default()).await,
    ) {
        Ok(pods) => findings.extend(pods.items.iter().filter_map(|p| empty_volume(p, &runtimes))),
        Err(e) => findings.push(Finding::new(Status::Error, "pods", e.to_string())),
    }
    let mounting = runtimes
        .values()
        .filter(|r| mounts_image_volumes(r))
        .count();
    let failed = findings
        .iter()
        .filter(|f| f.object.starts_with("pod "))
        .count();
    Check::new(
        NAME,
        format!(
            "{mounting} of {} node(s) run a runtime known to mount image volumes (wrap's binary: auto takes the image volume only where every node a pod can land on does); {failed} pod(s) failed on an empty image volume",
            runtimes.len()
        ),
        findings,
    )
}

fn runtime(n: &Node) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.container_runtime_version.clone())
        .unwrap_or_default()
}

/// A warning for each node whose runtime is known to mount image volumes empty.
pub fn node_findings(runtimes: &BTreeMap<String, String>) -> Vec<Finding> {
    runtimes
        .iter()
        .filter(|(_, r)| r.starts_with("containerd://") && r.contains("k3s"))
        .map(|(n, r)| {
            Finding::new(
                Status::Warning,
                format!("node {n}"),
                format!("{r} {PITFALL}"),
            )
            .fix(FIX)
        })
        .collect()
}

/// The finding for a pod whose wrapped container could not start because the supervisor was
/// missing from its image volume.
pub fn empty_volume(pod: &Pod, runtimes: &BTreeMap<String, String>) -> Option<Finding> {
    let spec = pod.spec.as_ref()?;
    let image = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == BIN_VOLUME)?
        .image
        .as_ref()?;
    let status = pod.status.as_ref()?;
    let statuses = status.container_statuses.iter().flatten();
    let inits = status.init_container_statuses.iter().flatten();
    let (container, why) = statuses
        .chain(inits)
        .find_map(|c| missing_binary(c).map(|m| (c.name.clone(), m)))?;
    let node = spec.node_name.clone().unwrap_or_default();
    let rt = runtimes
        .get(&node)
        .map(String::as_str)
        .unwrap_or("an unknown runtime");
    let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    Some(
        Finding::new(
            Status::Error,
            format!("pod {ns}/{name}"),
            format!(
                "container {container:?} could not start: {BINARY} is missing from image volume {BIN_VOLUME} ({}), so node {node:?} ({rt}) mounted it empty or from an image without sexton: a runtime that {PITFALL}; the runtime said: {why}",
                image.reference.as_deref().unwrap_or_default()
            ),
        )
        .fix(FIX),
    )
}

/// The runtime's message, if it says the supervisor's binary was not there.
fn missing_binary(c: &ContainerStatus) -> Option<String> {
    let state = c.state.as_ref()?;
    let last = c.last_state.as_ref();
    [
        state.terminated.as_ref().and_then(|t| t.message.clone()),
        state.waiting.as_ref().and_then(|w| w.message.clone()),
        last.and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.message.clone()),
    ]
    .into_iter()
    .flatten()
    .find(|m| m.contains(BINARY) && m.contains("no such file"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(volume: serde_json::Value, message: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "edge", "containers": [{"name": "main", "image": "x"}],
                "volumes": [volume]},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 128, "reason": "StartError", "message": message}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_failed_on_an_empty_image_volume_is_named_with_the_pitfall() {
        let runtimes = BTreeMap::from([
            ("edge".to_string(), "containerd://v2.2.3-k3s1".to_string()),
            ("core".to_string(), "containerd://2.4.2".to_string()),
        ]);
        let image = json!({"name": "sexton-bin", "image": {"reference": "ghcr.io/sexton-dev/sexton:0.1.0"}});
        let bare = "failed to create containerd task: exec: \"/sexton/sexton\": stat /sexton/sexton: no such file or directory: unknown";
        let f = empty_volume(&pod(image.clone(), bare), &runtimes).unwrap();
        assert_eq!((f.status, f.object.as_str()), (Status::Error, "pod ns/p"));
        for part in [
            "container \"main\"",
            "node \"edge\" (containerd://v2.2.3-k3s1)",
            "k3s-io/k3s#14323",
            bare,
        ] {
            assert!(f.message.contains(part), "{part}: {}", f.message);
        }
        assert!(f.fix.unwrap().contains("--binary-source copy"));
        // the copy's emptyDir, or another failure: not this
        let copied = json!({"name": "sexton-bin", "emptyDir": {}});
        assert_eq!(empty_volume(&pod(copied, bare), &runtimes), None);
        assert_eq!(empty_volume(&pod(image, "OOMKilled"), &runtimes), None);
        let nodes = node_findings(&runtimes);
        assert_eq!(nodes.len(), 1);
        assert_eq!(
            (nodes[0].status, nodes[0].object.as_str()),
            (Status::Warning, "node edge")
        );
    }
}
