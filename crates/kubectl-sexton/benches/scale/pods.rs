//! The benchmark's pods, and the harness playing their kubelet.
//!
//! Each pod is a Job-style pod (`restartPolicy: Never`) bound to a node that has no kubelet
//! (`spec.nodeName`): a main container and a sidecar carrying OpenKruise's markers, both
//! `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true` and `..._WITH_IMAGE=<quick-exit image>` (the
//! second is what OpenKruise needs to swap an image, on virtual-kubelet nodes; sexton swaps
//! to the named image as well, so both controllers make the same change). Status is
//! written through the status subresource, as the kubelet would.

use std::time::Duration;

use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::error::{Result, ctx};

pub const MAIN_IMAGE: &str = "busybox:1.36";
pub const SIDECAR_IMAGE: &str = "envoyproxy/envoy:v1.30.1";
pub const SIDECAR: &str = "proxy";
pub const MAIN: &str = "main";
pub const LABEL: (&str, &str) = ("app", "scale");

pub fn name(i: usize) -> String {
    format!("job-{i:05}")
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// A 64-hex-digit id (container IDs, image digests), different per pod and container.
fn hex64(seed: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut out = String::new();
    for i in 0..4u8 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (seed, i).hash(&mut h);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

pub fn pod(ns: &str, name: &str, node: &str, quick_exit_image: &str) -> Pod {
    let v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns,
            "labels": {LABEL.0: LABEL.1, "batch.kubernetes.io/job-name": "report"}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {"name": MAIN, "image": MAIN_IMAGE,
                 "command": ["sh", "-c", "exec /work/report --all"],
                 "env": [{"name": "REPORT_DAY", "value": "2026-11-24"}],
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                {"name": SIDECAR, "image": SIDECAR_IMAGE,
                 "args": ["-c", "/etc/envoy/envoy.yaml"],
                 "ports": [{"containerPort": 15001, "name": "proxy"}],
                 "env": [
                     {"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"},
                     {"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE", "value": quick_exit_image}],
                 "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}}}
            ]
        }
    });
    serde_json::from_value(v).expect("pod literal")
}

fn container_status(pod: &str, name: &str, image: &str, state: Value, ready: bool) -> Value {
    json!({
        "name": name, "image": image,
        "imageID": format!("docker.io/library/{image}@sha256:{}", hex64(image)),
        "containerID": format!("containerd://{}", hex64(&format!("{pod}/{name}"))),
        "ready": ready, "started": ready, "restartCount": 0, "state": state
    })
}

fn conditions(ready: bool) -> Value {
    let t = now();
    let r = if ready { "True" } else { "False" };
    json!([
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": t},
        {"type": "Initialized", "status": "True", "lastTransitionTime": t},
        {"type": "Ready", "status": r, "lastTransitionTime": t},
        {"type": "ContainersReady", "status": r, "lastTransitionTime": t},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": t}
    ])
}

/// Both containers running (what the kubelet reports once the pod has started).
pub fn running_status(pod: &str) -> Value {
    let t = now();
    json!({"status": {
        "phase": "Running", "startTime": t, "qosClass": "Burstable",
        "conditions": conditions(true),
        "containerStatuses": [
            container_status(pod, MAIN, MAIN_IMAGE, json!({"running": {"startedAt": t}}), true),
            container_status(pod, SIDECAR, SIDECAR_IMAGE, json!({"running": {"startedAt": t}}), true)
        ]
    }})
}

/// The main container has exited 0; the sidecar still runs: "mains done".
pub fn mains_done_status(pod: &str) -> Value {
    let t = now();
    let done = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": t, "finishedAt": t,
        "containerID": format!("containerd://{}", hex64(&format!("{pod}/{MAIN}")))}});
    json!({"status": {
        "conditions": conditions(false),
        "containerStatuses": [
            container_status(pod, MAIN, MAIN_IMAGE, done, false),
            container_status(pod, SIDECAR, SIDECAR_IMAGE, json!({"running": {"startedAt": t}}), true)
        ]
    }})
}

/// The kubelet's report once the swapped sidecar's replacement (the quick-exit image)
/// has exited 0: every container terminated, the pod Succeeded.
pub fn succeeded_status(pod: &str, quick: &str) -> Value {
    let t = now();
    let done = |c: &str| {
        json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": t, "finishedAt": t,
            "containerID": format!("containerd://{}", hex64(&format!("{pod}/{c}/end")))}})
    };
    let mut sidecar = container_status(pod, SIDECAR, quick, done(SIDECAR), false);
    sidecar["restartCount"] = json!(1);
    json!({"status": {
        "phase": "Succeeded",
        "conditions": conditions(false),
        "containerStatuses": [
            container_status(pod, MAIN, MAIN_IMAGE, done(MAIN), false),
            sidecar
        ]
    }})
}

/// Runs `f` over `items`, `concurrency` at a time; the first error is returned.
pub async fn bounded<T, F, Fut>(items: Vec<T>, concurrency: usize, f: F) -> Result<()>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut s = stream::iter(items.into_iter().map(f)).buffer_unordered(concurrency);
    while let Some(r) = s.next().await {
        r?;
    }
    Ok(())
}

pub async fn ensure_namespace(client: &Client, ns: &str) -> Result<()> {
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    if nss
        .get_opt(ns)
        .await
        .map_err(ctx("reading the namespace"))?
        .is_none()
    {
        let obj = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        nss.create(&PostParams::default(), &obj)
            .await
            .map_err(ctx(format!("creating namespace {ns}")))?;
    }
    // pods need the namespace's default ServiceAccount (made by the controller manager)
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    for _ in 0..300 {
        if sas.get_opt("default").await.ok().flatten().is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("no default ServiceAccount in {ns} after 60 s").into())
}

/// Creates the pods `names` and makes them Running.
pub async fn create_running(
    client: &Client,
    ns: &str,
    names: Vec<String>,
    node: &str,
    quick: &str,
    concurrency: usize,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    bounded(names, concurrency, |n| {
        let api = api.clone();
        async move {
            let p = pod(ns, &n, node, quick);
            api.create(&PostParams::default(), &p)
                .await
                .map_err(ctx(format!("creating pod {n}")))?;
            api.patch_status(
                &n,
                &PatchParams::default(),
                &Patch::Merge(running_status(&n)),
            )
            .await
            .map_err(ctx(format!("writing the Running status of pod {n}")))?;
            Ok(())
        }
    })
    .await
}

/// Deletes the pods `names` at once (grace period 0: no kubelet will confirm) and waits
/// until they are gone.
pub async fn delete_now(
    client: &Client,
    ns: &str,
    names: Vec<String>,
    concurrency: usize,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    bounded(names.clone(), concurrency, |n| {
        let (api, dp) = (api.clone(), dp.clone());
        async move {
            match api.delete(&n, &dp).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(format!("deleting pod {n}: {e}").into()),
            }
        }
    })
    .await?;
    for _ in 0..600 {
        let left = api
            .list_metadata(&ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1)))
            .await
            .map_err(ctx("listing pods"))?;
        let left = left
            .items
            .iter()
            .filter(|p| p.metadata.name.as_ref().is_some_and(|n| names.contains(n)))
            .count();
        if left == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err("pods still there 120 s after their deletion".into())
}

/// Every pod of the benchmark in `ns`, deleted at once.
pub async fn delete_all(client: &Client, ns: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let names: Vec<String> = api
        .list_metadata(&ListParams::default())
        .await
        .map_err(ctx("listing pods"))?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    delete_now(client, ns, names, 32).await
}

/// The node OpenKruise looks up (`type=virtual-kubelet`: it swaps images there). An API
/// object only: no kubelet runs it.
pub async fn ensure_vk_node(client: &Client, name: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes
        .get_opt(name)
        .await
        .map_err(ctx("reading the node"))?
        .is_some()
    {
        return Ok(());
    }
    let node = serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {"type": "virtual-kubelet", "kubernetes.io/hostname": name}}}))
    .unwrap();
    nodes
        .create(&PostParams::default(), &node)
        .await
        .map_err(ctx("creating the virtual-kubelet node"))?;
    Ok(())
}

pub async fn delete_node(client: &Client, name: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(format!("deleting node {name}: {e}").into()),
    }
}

/// The image of `container` in the pod's spec.
pub fn image_of<'a>(pod: &'a Pod, container: &str) -> Option<&'a str> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?
        .image
        .as_deref()
}

/// Whether the pod's status says its main container has terminated.
pub fn main_terminated(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.name == MAIN && c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
        })
}
