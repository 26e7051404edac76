//! The pod as sexton's controllers hold it: only the fields that the SidecarTerminator's
//! `decide`, the EphemeralJob's `plan` and the stuck-pod rule read.
//!
//! Why not k8s-openapi's `Pod`: it keeps every optional field inline (a `Container` is
//! 2 144 bytes before any string), so one ordinary Job pod took 24.8 kB of heap, 248 MB
//! for a cache of 10 000 pods (BENCHMARKS.md, "Controllers at scale"). This type has the
//! kind and version of a Pod, so `Api<Pod>` lists, watches, reads and patches straight into
//! it (the full pod is never built), and takes about 3 kB per pod.
//!
//! Field names and optionality follow k8s-openapi's, so code reads the same either way,
//! and the API's JSON decodes into it (unknown fields are skipped). What a controller
//! does not read is not here: adding a field the code needs is the one thing to do when
//! extending a rule.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Deserializer, Serialize};
use sexton_inject::{Catalogue, Marker, On, Pattern};

/// The prefixes of the environment variables any rule reads: OpenKruise's markers,
/// kubexit's variables (`KUBEXIT_DEATH_DEPS` declares sidecars) and sexton's own (an
/// EphemeralJob's UID on its containers). Others are dropped while decoding: an
/// application's environment can be most of a pod's size.
const ENV_PREFIXES: &[&str] = &["KRUISE_", "KUBEXIT_", "SEXTON_"];

/// The annotations kept in the cache: sexton's own (`sexton.dev/...`); others (a mesh's
/// status, kubectl's last-applied configuration) can be kilobytes per pod.
pub const ANNOTATION_PREFIX: &str = "sexton.dev/";

/// The pod's phase, as its kubelet last wrote it (Pending until then).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// The pod is Running: the only phase in which a controller may have to end a sidecar.
pub fn is_running(pod: &Pod) -> bool {
    phase(pod) == "Running"
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

impl k8s_openapi::Resource for Pod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Pod {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_containers: Option<Vec<Container>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<PodOS>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct PodOS {
    pub name: String,
}

/// A container of any of the three lists (for ephemeral containers, only what they share).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(
        default,
        deserialize_with = "rule_env",
        skip_serializing_if = "Option::is_none"
    )]
    pub env: Option<Vec<EnvVar>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// `Always` on an init container: a native sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct EnvVar {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// Only whether there is one (its handler is not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_start: Option<Present>,
}

/// A field whose presence matters, not its content.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Present;

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Present)
    }
}

impl Serialize for Present {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_map(Some(0))
            .and_then(serde::ser::SerializeMap::end)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_statuses: Option<Vec<ContainerStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_container_statuses: Option<Vec<ContainerStatus>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    pub name: String,
    /// The image the runtime ran (possibly normalized, e.g. with `docker.io/`).
    #[serde(default)]
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ContainerState>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ContainerState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<ContainerStateRunning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<ContainerStateTerminated>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<ContainerStateWaiting>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateRunning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateTerminated {
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The container's termination message (an EphemeralJob reports it, cut to 1 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct ContainerStateWaiting {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A container's environment, reduced to the variables some rule reads.
fn rule_env<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<EnvVar>>, D::Error> {
    let env = Option::<Vec<EnvVar>>::deserialize(d)?;
    Ok(env.map(|mut env| {
        env.retain(|e| ENV_PREFIXES.iter().any(|p| e.name.starts_with(p)));
        env
    }))
}

/// The annotations a rule reads besides sexton's: the catalogue's markers (which prove a
/// vendor's injection: the safety net recognises vendors' sidecars by them) and those its
/// quit endpoints read. Kept by key, and with their value only where a marker names one:
/// Istio's `sidecar.istio.io/status` is a kilobyte of JSON that no rule reads.
#[derive(Debug, Clone, Default)]
pub struct KeptAnnotations {
    /// (key, whether its value is read)
    keys: Vec<(Pattern, bool)>,
}

impl KeptAnnotations {
    pub fn of(catalogue: &Catalogue) -> KeptAnnotations {
        fn markers(keys: &mut Vec<(Pattern, bool)>, list: &[Marker]) {
            for m in list.iter().filter(|m| m.on == On::Annotation) {
                keys.push((m.key.clone(), m.value.is_some()));
            }
        }
        let mut keys = vec![];
        for v in &catalogue.vendors {
            markers(&mut keys, &v.markers);
            if let Some(q) = &v.quit {
                markers(&mut keys, &q.unavailable_with);
                markers(&mut keys, q.enable_annotation.as_slice());
                if let Some(port) = &q.port_annotation {
                    keys.push((Pattern(port.clone()), true));
                }
            }
        }
        KeptAnnotations { keys }
    }

    /// Keeps sexton's annotations and these, dropping the values no rule reads.
    pub fn trim(&self, annotations: &mut BTreeMap<String, String>) {
        annotations.retain(|k, v| {
            if k.starts_with(ANNOTATION_PREFIX) {
                return true;
            }
            let mut matching = self.keys.iter().filter(|(p, _)| p.matches(k)).peekable();
            if matching.peek().is_none() {
                return false;
            }
            if !matching.any(|(_, value)| *value) {
                v.clear();
            }
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod as the API server returns it, with fields no rule reads.
    fn full() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "resourceVersion": "7",
                         "annotations": {"sexton.dev/sidecars": "proxy", "other": "x"}},
            "spec": {
                "restartPolicy": "Never",
                "volumes": [{"name": "token", "projected": {"sources": []}}],
                "containers": [
                    {"name": "main", "image": "app:1", "resources": {"limits": {"cpu": "1"}},
                     "env": [{"name": "HOME", "value": "/"},
                             {"name": "SEXTON_EPHEMERALJOB_UID", "value": "j"},
                             {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
                    {"name": "proxy", "image": "envoy:1", "command": ["envoy"],
                     "lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
                     "env": [{"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}]}
                ]
            },
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "main", "image": "docker.io/library/app:1", "imageID": "sha256:1",
                     "containerID": "containerd://1", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 3, "reason": "Error",
                                              "finishedAt": "2026-01-01T00:00:00Z"}}}
                ]
            }
        })
    }

    #[test]
    fn decodes_what_the_rules_read_and_drops_the_rest() {
        let pod: Pod = serde_json::from_value(full()).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        let main_env: Vec<_> = spec.containers[0]
            .env
            .iter()
            .flatten()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(main_env, ["SEXTON_EPHEMERALJOB_UID"]);
        assert_eq!(
            spec.containers[1].command.as_deref(),
            Some(&["envoy".to_string()][..])
        );
        assert!(
            spec.containers[1]
                .lifecycle
                .as_ref()
                .unwrap()
                .post_start
                .is_some()
        );
        let st = &pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        let t = st.state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!(
            (t.exit_code, st.image.as_str()),
            (3, "docker.io/library/app:1")
        );
        assert!(t.finished_at.is_some());
    }

    #[test]
    fn serializes_back_into_the_fields_of_a_pod() {
        let pod: Pod = serde_json::from_value(full()).unwrap();
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(
            v["spec"]["containers"][1]["lifecycle"]["postStart"],
            json!({})
        );
        assert_eq!(v["spec"]["restartPolicy"], "Never");
        assert_eq!(v["metadata"]["annotations"]["sexton.dev/sidecars"], "proxy");
        assert!(v["spec"].get("volumes").is_none());
        let again: Pod = serde_json::from_value(v).unwrap();
        assert_eq!(again, pod);
    }

    #[test]
    fn only_sextons_annotations_are_kept() {
        let mut a = BTreeMap::from([
            ("sexton.dev/swapped-sidecars".to_string(), "{}".to_string()),
            ("sidecar.istio.io/status".to_string(), "{...}".to_string()),
        ]);
        KeptAnnotations::default().trim(&mut a);
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            ["sexton.dev/swapped-sidecars"]
        );
    }

    #[test]
    fn the_catalogues_markers_are_kept_by_key_and_value_only_where_read() {
        let kept = KeptAnnotations::of(&Catalogue::default());
        let mut a: BTreeMap<String, String> = [
            ("sexton.dev/sidecars", "proxy"),
            ("sidecar.istio.io/status", "{\"initContainers\":[...]}"),
            // (Dapr's marker is a label)
            ("dapr.io/sidecar-injected", "true"),
            ("dapr.io/http-port", "3501"),
            ("cloudsql.cloud.google.com/db", "x"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{...}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        kept.trim(&mut a);
        let got: Vec<(&str, &str)> = a.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("cloudsql.cloud.google.com/db", ""),
                ("dapr.io/http-port", "3501"),
                ("sexton.dev/sidecars", "proxy"),
                ("sidecar.istio.io/status", ""),
            ]
        );
    }
}
