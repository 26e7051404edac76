//! Where a cached pod's memory goes: the benchmark's pod as the API server returns it,
//! decoded from JSON into k8s-openapi's `Pod` the way the controller's watch decodes it,
//! `n` times, with the heap counted by this binary's allocator (`Counting`). Also the heap
//! of each part of the pod, and of a projection holding only the fields sexton's two
//! controllers read (the figure a slimmer cache could reach).
//!
//! `scale memory --kubeconfig F [--pods 10000]` (creates one pod in namespace
//! `scale-memory`, reads it back, deletes it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Failed, Result, ctx};
use crate::pods;

/// The system allocator, counting the bytes live (requested sizes, not malloc's overhead).
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

#[derive(clap::Args)]
pub struct Opts {
    /// The test API server (one pod is created there and read back)
    #[arg(long, required_unless_present = "pod_json")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Or the pod from an earlier run's --json file instead of the API server
    #[arg(long)]
    pub pod_json: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 10000)]
    pub pods: usize,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

#[derive(Debug, Serialize)]
pub struct Breakdown {
    pub json_bytes: usize,
    pub json_bytes_without_managed_fields: usize,
    /// heap bytes per pod decoded (managedFields dropped, as the controller's cache does)
    pub heap_per_pod: f64,
    /// the same, per part (each decoded on its own)
    pub parts: Vec<(String, f64)>,
    /// heap per pod of a projection holding only what the controllers read
    pub projected_per_pod: f64,
    /// heap per pod as the controllers' cache holds it now (`src/shared/pod.rs`)
    pub compact_per_pod: f64,
    pub sizes_of: Vec<(String, usize)>,
}

/// Heap bytes per item of `n` values decoded from `json`.
fn per_item<T: serde::de::DeserializeOwned>(json: &[u8], n: usize) -> f64 {
    let before = live();
    let mut keep: Vec<Arc<T>> = Vec::with_capacity(n);
    let vec_bytes = live() - before;
    for _ in 0..n {
        keep.push(Arc::new(serde_json::from_slice(json).expect("decodes")));
    }
    let bytes = live() - before - vec_bytes;
    drop(keep);
    bytes as f64 / n as f64
}

/// The pod with only what the SidecarTerminator's `decide` and the EphemeralJob's `plan`
/// read: name, namespace, uid, resourceVersion, labels, annotations, creation and deletion
/// times; each container's name, image, env, command and lifecycle; restartPolicy, os;
/// ephemeral containers; phase and the containers' states.
fn projection(pod: &Value) -> Value {
    let m = &pod["metadata"];
    let keep = |v: &Value, keys: &[&str]| {
        let mut o = serde_json::Map::new();
        for k in keys {
            if let Some(x) = v.get(*k) {
                o.insert((*k).to_string(), x.clone());
            }
        }
        Value::Object(o)
    };
    let containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| keep(c, &["name", "image", "env", "command", "lifecycle"]))
        .collect();
    let statuses: Vec<Value> = pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            keep(
                c,
                &["name", "state", "ready", "restartCount", "image", "imageID"],
            )
        })
        .collect();
    let mut spec = keep(
        &pod["spec"],
        &["restartPolicy", "os", "ephemeralContainers"],
    );
    spec["containers"] = Value::Array(containers);
    let mut status = keep(&pod["status"], &["phase", "ephemeralContainerStatuses"]);
    status["containerStatuses"] = Value::Array(statuses);
    serde_json::json!({
        "metadata": keep(m, &["name", "namespace", "uid", "resourceVersion", "labels",
            "annotations", "creationTimestamp", "deletionTimestamp"]),
        "spec": spec,
        "status": status,
    })
}

pub fn breakdown(pod: &Value, n: usize) -> Breakdown {
    let mut slim = pod.clone();
    if let Some(m) = slim["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    let bytes = |v: &Value| serde_json::to_vec(v).unwrap();
    let full = bytes(pod);
    let slim_bytes = bytes(&slim);
    let heap_per_pod = per_item::<Pod>(&slim_bytes, n);
    let mut parts = vec![
        (
            "metadata".to_string(),
            per_item::<ObjectMeta>(&bytes(&slim["metadata"]), n),
        ),
        (
            "spec".to_string(),
            per_item::<PodSpec>(&bytes(&slim["spec"]), n),
        ),
        (
            "status".to_string(),
            per_item::<PodStatus>(&bytes(&slim["status"]), n),
        ),
    ];
    let arr = |v: &Value| v.as_array().map(|a| a.len()).unwrap_or(0);
    parts.push((
        format!("spec.volumes ({})", arr(&slim["spec"]["volumes"])),
        per_item::<Vec<Volume>>(&bytes(&slim["spec"]["volumes"]), n),
    ));
    parts.push((
        format!("spec.containers ({})", arr(&slim["spec"]["containers"])),
        per_item::<Vec<Container>>(&bytes(&slim["spec"]["containers"]), n),
    ));
    parts.push((
        format!(
            "status.containerStatuses ({})",
            arr(&slim["status"]["containerStatuses"])
        ),
        per_item::<Vec<ContainerStatus>>(&bytes(&slim["status"]["containerStatuses"]), n),
    ));
    let projected_per_pod = per_item::<Pod>(&bytes(&projection(&slim)), n);
    let compact_per_pod = per_item::<crate::pod::Pod>(&slim_bytes, n);
    let sizes_of = vec![
        ("Pod".to_string(), std::mem::size_of::<Pod>()),
        ("ObjectMeta".to_string(), std::mem::size_of::<ObjectMeta>()),
        ("PodSpec".to_string(), std::mem::size_of::<PodSpec>()),
        ("PodStatus".to_string(), std::mem::size_of::<PodStatus>()),
        ("Container".to_string(), std::mem::size_of::<Container>()),
        (
            "ContainerStatus".to_string(),
            std::mem::size_of::<ContainerStatus>(),
        ),
        ("Volume".to_string(), std::mem::size_of::<Volume>()),
        (
            "sexton's pod::Pod".to_string(),
            std::mem::size_of::<crate::pod::Pod>(),
        ),
    ];
    Breakdown {
        json_bytes: full.len(),
        json_bytes_without_managed_fields: slim_bytes.len(),
        heap_per_pod,
        parts,
        projected_per_pod,
        compact_per_pod,
        sizes_of,
    }
}

pub fn markdown(b: &Breakdown) -> String {
    let mut s = format!(
        "One benchmark pod as the API server returns it: {} bytes of JSON ({} without managedFields). Decoded into k8s-openapi's `Pod` (managedFields dropped, as the cache keeps it): **{} bytes of heap per pod**; a projection with only the fields the two controllers read: {} bytes as k8s-openapi types; **{} bytes as the controllers' own type** (`src/shared/pod.rs`, decoded from the same JSON, which the pod cache has held since issue 16).\n\n| part (decoded alone) | heap per pod (bytes) |\n|---|---:|\n",
        crate::stats::thousands(b.json_bytes as f64),
        crate::stats::thousands(b.json_bytes_without_managed_fields as f64),
        crate::stats::thousands(b.heap_per_pod),
        crate::stats::thousands(b.projected_per_pod),
        crate::stats::thousands(b.compact_per_pod),
    );
    for (k, v) in &b.parts {
        s.push_str(&format!("| {k} | {} |\n", crate::stats::thousands(*v)));
    }
    s.push_str("\n| type | size_of (bytes) |\n|---|---:|\n");
    for (k, v) in &b.sizes_of {
        s.push_str(&format!(
            "| `{k}` | {} |\n",
            crate::stats::thousands(*v as f64)
        ));
    }
    s
}

pub fn run(o: &Opts) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ctx("starting the runtime"))?;
    let from_file = o.pod_json.as_ref().map(|p| -> Result<Value> {
        let v: Value = serde_json::from_slice(
            &std::fs::read(p).map_err(ctx(format!("reading {}", p.display())))?,
        )
        .map_err(ctx(format!("{} is not JSON", p.display())))?;
        // an earlier --json file is [breakdown, pod]
        Ok(v.get(1).cloned().unwrap_or(v))
    });
    let pod = match from_file {
        Some(p) => p?,
        None => rt.block_on(async {
            let kubeconfig = o
                .kubeconfig
                .as_ref()
                .ok_or(Failed::from("--kubeconfig or --pod-json"))?;
            let client = crate::cluster::client(kubeconfig).await?;
            let ns = "scale-memory";
            pods::ensure_namespace(&client, ns).await?;
            let name = pods::name(0);
            pods::delete_now(&client, ns, vec![name.clone()], 1).await?;
            pods::create_running(
                &client,
                ns,
                vec![name.clone()],
                "scale-node-0",
                "sexton-quick-exit:bench",
                1,
            )
            .await?;
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            let p = api.get(&name).await.map_err(ctx("reading the pod"))?;
            pods::delete_now(&client, ns, vec![name], 1).await?;
            Ok::<_, Failed>(serde_json::to_value(&p).unwrap())
        })?,
    };
    let b = breakdown(&pod, o.pods);
    let md = markdown(&b);
    print!("{md}");
    if let Some(p) = &o.json {
        std::fs::write(p, serde_json::to_string_pretty(&(b, pod)).unwrap())
            .map_err(ctx(format!("writing {}", p.display())))?;
    }
    Ok(())
}
