//! The EphemeralJob resource (`sexton.dev/v1alpha1`, short name `ejob`): its spec and
//! status as Rust types, from which the CRD's schema is derived (`crd.rs`).
//!
//! The unit of work is a *target*: one pod, into which every container of the template is
//! injected together. `parallelism` bounds the targets whose containers are waiting or
//! running; `replicas` bounds the number of targets.

use k8s_openapi::api::core::v1::EphemeralContainer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Env var put into every injected container: the job's UID marks the container as ours.
pub const ENV_JOB_UID: &str = "SEXTON_EPHEMERALJOB_UID";
pub const ENV_JOB_NAME: &str = "SEXTON_EPHEMERALJOB_NAME";

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "sexton.dev",
    version = "v1alpha1",
    kind = "EphemeralJob",
    namespaced,
    shortname = "ejob",
    status = "EphemeralJobStatus",
    printcolumn = r#"{"name":"STATUS","type":"string","jsonPath":".status.phase","description":"Phase of the job"}"#,
    printcolumn = r#"{"name":"MATCH","type":"integer","jsonPath":".status.match","description":"Pods targeted"}"#,
    printcolumn = r#"{"name":"SUCCEED","type":"integer","jsonPath":".status.succeeded","description":"Targets whose containers all exited 0"}"#,
    printcolumn = r#"{"name":"FAILED","type":"integer","jsonPath":".status.failed","description":"Targets with a container that failed"}"#,
    printcolumn = r#"{"name":"RUNNING","type":"integer","jsonPath":".status.running","description":"Targets with a container running"}"#,
    printcolumn = r#"{"name":"WAITING","type":"integer","jsonPath":".status.waiting","description":"Targets whose containers are injected but not started"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"REPLICAS","type":"integer","jsonPath":".spec.replicas","description":"At most this many targets","priority":1}"#,
    printcolumn = r#"{"name":"PARALLELISM","type":"integer","jsonPath":".spec.parallelism","description":"Targets waiting or running at once","priority":1}"#,
    printcolumn = r#"{"name":"PAUSED","type":"boolean","jsonPath":".spec.paused","priority":1}"#,
    printcolumn = r#"{"name":"REFUSED","type":"integer","jsonPath":".status.refusedCount","description":"Targets whose injection the API refused (counted as failed)","priority":1}"#,
    printcolumn = r#"{"name":"FINISHED","type":"date","jsonPath":".status.completionTime","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobSpec {
    /// Pods (in the job's namespace) to run the containers in. An empty selector (every
    /// running pod of the namespace) is refused unless `selectAllPods` says so.
    pub selector: LabelSelector,
    /// Allow an empty selector: run in every running pod of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_all_pods: Option<bool>,
    /// Run in at most this many pods; unset: every matching pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Pods whose containers may be waiting or running at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,
    pub template: EphemeralJobTemplate,
    /// Stop injecting into further pods (containers already running are not stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Fail the job this long after it started if it has not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Delete the job this long after it finished (OpenKruise); 1800 when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Delete the job this long after it was created, finished or not (the original proposal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_created: Option<i32>,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobTemplate {
    pub ephemeral_containers: Vec<EphemeralContainer>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobStatus {
    /// Pods targeted (matching, up to `replicas`, plus pods already injected).
    #[serde(rename = "match", default)]
    pub matched: i32,
    #[serde(default)]
    pub running: i32,
    #[serde(default)]
    pub succeeded: i32,
    #[serde(default)]
    pub failed: i32,
    #[serde(default)]
    pub waiting: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// One entry per target and container, at most `TARGETS_CAP`: failed first, then
    /// running, waiting and succeeded, the most recent first within each (the counters
    /// above are exact; `kubectl sexton ejob results` lists every target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetResult>,
    /// Pods whose injection the API server refused (counted as failed targets, never tried
    /// again), at most `REFUSED_CAP`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
    /// How many pods were refused (exact, also beyond the list's cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_count: Option<i32>,
}

/// `ttlSecondsAfterFinished` when not given (OpenKruise's default).
pub const DEFAULT_TTL_AFTER_FINISHED: i32 = 1800;

/// Entries of `status.targets` at most (each below 1.3 KiB: the object stays far below the
/// API server's size limit however many targets there are).
pub const TARGETS_CAP: usize = 256;
/// Entries of `status.refused` at most; a pod refused beyond it is tried again later.
pub const REFUSED_CAP: usize = 1000;
/// Bytes of a container's termination message kept in `status.targets`.
pub const MESSAGE_CAP: usize = 1024;

/// State of one target's injected containers.
#[derive(
    Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum TargetState {
    Failed,
    Running,
    Waiting,
    Succeeded,
}

impl TargetState {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetState::Failed => "Failed",
            TargetState::Running => "Running",
            TargetState::Waiting => "Waiting",
            TargetState::Succeeded => "Succeeded",
        }
    }
}

/// One injected container of one target.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetResult {
    pub pod: String,
    pub container: String,
    pub state: TargetState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// The container's termination message, at most `MESSAGE_CAP` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A pod into which the API server refused the containers (a 4xx other than a conflict).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    pub pod: String,
    pub message: String,
}

/// The phase of a job.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// No target has started yet (or none matches).
    Waiting,
    /// Containers are injected, waiting or running.
    Running,
    /// Every target's containers exited 0.
    Succeeded,
    /// A target failed, or the deadline passed.
    Failed,
    /// `spec.paused`: no further injection.
    Paused,
    /// The API refused the containers for a reason retrying will not change.
    Error,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Waiting => "Waiting",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Paused => "Paused",
            Phase::Error => "Error",
        }
    }
}
