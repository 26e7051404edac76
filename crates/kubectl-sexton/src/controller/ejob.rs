//! EphemeralJob (`sexton.dev/v1alpha1`, short name `ejob`): run ephemeral containers, in
//! batches, in the running pods a label selector picks. The types (and from them the CRD
//! with its CEL validation rules), and the pure planning step: given the job and the pods,
//! what the status is and which pods get the containers next.
//!
//! The unit of work is a *target*: one pod, into which every container of the template is
//! injected together. `parallelism` bounds the targets whose containers are waiting or
//! running; `replicas` bounds the number of targets.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, EnvVar, EphemeralContainer, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use kube::core::{Selector, SelectorExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

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
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobSpec {
    /// Pods (in the job's namespace) to run the containers in.
    pub selector: LabelSelector,
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
    /// Delete the job this long after it finished (OpenKruise).
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
    /// Waiting, Running, Succeeded, Failed, Paused or Error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The CRD, with the validation the derive cannot express added as OpenAPI and CEL rules
/// (no webhook): required fields of each template container, fields an ephemeral
/// container may not have, unique names, and which spec fields may change.
pub fn crd() -> Value {
    use kube::CustomResourceExt;
    let mut crd = serde_json::to_value(EphemeralJob::crd()).expect("CRD serializes");
    let schema = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    schema["properties"]["spec"]["x-kubernetes-validations"] = json!([
        {"rule": "self.selector == oldSelf.selector", "message": "spec.selector is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.template == oldSelf.template", "message": "spec.template is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.?activeDeadlineSeconds == oldSelf.?activeDeadlineSeconds", "message": "spec.activeDeadlineSeconds is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.?ttlSecondsAfterFinished == oldSelf.?ttlSecondsAfterFinished", "message": "spec.ttlSecondsAfterFinished is immutable (only replicas, parallelism and paused may change)"},
        {"rule": "self.?ttlSecondsAfterCreated == oldSelf.?ttlSecondsAfterCreated", "message": "spec.ttlSecondsAfterCreated is immutable (only replicas, parallelism and paused may change)"},
    ]);
    let spec = &mut schema["properties"]["spec"]["properties"];
    spec["replicas"]["minimum"] = json!(1);
    spec["parallelism"]["minimum"] = json!(1);
    spec["activeDeadlineSeconds"]["minimum"] = json!(1);
    spec["ttlSecondsAfterFinished"]["minimum"] = json!(0);
    spec["ttlSecondsAfterCreated"]["minimum"] = json!(0);
    let list = &mut spec["template"]["properties"]["ephemeralContainers"];
    list["minItems"] = json!(1);
    list["maxItems"] = json!(16);
    list["x-kubernetes-validations"] = json!([
        {"rule": "self.all(c, self.exists_one(d, d.name == c.name))", "message": "template.ephemeralContainers: names must be unique"},
    ]);
    let item = &mut list["items"];
    item["required"] = json!([
        "name",
        "image",
        "imagePullPolicy",
        "terminationMessagePolicy",
        "targetContainerName"
    ]);
    item["properties"]["name"]["maxLength"] = json!(63);
    // bounds for the CEL cost estimate of the subPath rule
    item["properties"]["volumeMounts"]["maxItems"] = json!(32);
    item["properties"]["name"]["pattern"] = json!("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
    item["x-kubernetes-validations"] = json!([
        {"rule": "!has(self.ports)", "message": "ephemeral containers may not have ports"},
        {"rule": "!has(self.resources)", "message": "ephemeral containers may not have resources"},
        {"rule": "!has(self.livenessProbe) && !has(self.readinessProbe) && !has(self.startupProbe)", "message": "ephemeral containers may not have probes"},
        {"rule": "!has(self.lifecycle)", "message": "ephemeral containers may not have lifecycle hooks"},
        {"rule": "!has(self.volumeMounts) || self.volumeMounts.all(m, !has(m.subPath) && !has(m.subPathExpr))", "message": "ephemeral containers may not use subPath volume mounts"},
        {"rule": "!has(self.restartPolicy) && !has(self.resizePolicy)", "message": "ephemeral containers may not have a restartPolicy or resizePolicy"},
    ]);
    crd
}

/// The CRD as YAML, as committed in deploy/.
pub fn crd_yaml() -> String {
    let mut out = String::from(
        "# Generated by `kubectl-sexton crd` from crates/kubectl-sexton/src/controller/ejob.rs; do not edit.\n",
    );
    out.push_str(&serde_saphyr::to_string(&crd()).expect("CRD serializes as YAML"));
    out
}

/// State of one target's injected containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetState {
    Waiting,
    Running,
    Succeeded,
    Failed,
}

/// Waiting reasons that mean the container will never start (ephemeral containers are not
/// restarted). Image pull errors are not in the list: they can clear up (the deadline bounds them).
const START_ERRORS: &[&str] = &[
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

fn is_ours(c: &EphemeralContainer, uid: &str) -> bool {
    c.env
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|e| e.name == ENV_JOB_UID && e.value.as_deref() == Some(uid))
}

/// How a pod relates to the job: our containers are in it, a container of another owner
/// has one of the template's names, or it is free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    Ours,
    Conflict(String),
    Free,
}

pub fn relation(pod: &Pod, job: &EphemeralJob) -> Relation {
    let uid = job.metadata.uid.as_deref().unwrap_or_default();
    let existing = pod
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or_default();
    if existing.iter().any(|c| is_ours(c, uid)) {
        return Relation::Ours;
    }
    for t in &job.spec.template.ephemeral_containers {
        if existing.iter().any(|c| c.name == t.name) {
            return Relation::Conflict(t.name.clone());
        }
    }
    Relation::Free
}

fn status_of<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()?
        .ephemeral_container_statuses
        .as_deref()?
        .iter()
        .find(|s| s.name == name)
}

fn pod_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The state of our containers in `pod`: Failed if any failed, else Running if any runs,
/// else Waiting if any has not finished, else Succeeded.
pub fn target_state(pod: &Pod, job: &EphemeralJob) -> TargetState {
    let mut any_running = false;
    let mut any_waiting = false;
    for t in &job.spec.template.ephemeral_containers {
        let state = status_of(pod, &t.name).and_then(|s| s.state.as_ref());
        match state {
            Some(s) if s.terminated.as_ref().is_some_and(|t| t.exit_code != 0) => {
                return TargetState::Failed;
            }
            Some(s) if s.terminated.is_some() => {}
            Some(s) if s.running.is_some() => any_running = true,
            Some(s)
                if s.waiting.as_ref().is_some_and(|w| {
                    START_ERRORS.contains(&w.reason.as_deref().unwrap_or_default())
                }) =>
            {
                return TargetState::Failed;
            }
            _ => any_waiting = true,
        }
    }
    if (any_running || any_waiting) && !pod_active(pod) {
        // The pod ended (or is going away) before our containers did.
        return TargetState::Failed;
    }
    if any_running {
        TargetState::Running
    } else if any_waiting {
        TargetState::Waiting
    } else {
        TargetState::Succeeded
    }
}

/// What to do now.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub status: EphemeralJobStatus,
    /// Pods to inject into now, in order.
    pub inject: Vec<String>,
    /// Matching pods skipped because a container of another owner has a template name.
    pub conflicts: Vec<(String, String)>,
    /// The job just finished (set completionTime, emit the event).
    pub finished: bool,
    /// The deadline passed now.
    pub deadline_exceeded: bool,
}

pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    Selector::try_from(sel.clone()).is_ok_and(|s| s.matches(labels))
}

fn condition(type_: &str, reason: &str, message: String, now: &Time) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.into(),
        message,
        last_transition_time: now.clone(),
        observed_generation: None,
    }
}

/// Plans one reconciliation. `pods` are the pods of the job's namespace that match its
/// selector (any phase) plus those holding our containers; `now` is the current time.
pub fn plan(job: &EphemeralJob, pods: &[Pod], now: &Time) -> Plan {
    let old = job.status.clone().unwrap_or_default();
    let mut status = EphemeralJobStatus {
        start_time: old.start_time.clone().or_else(|| Some(now.clone())),
        completion_time: old.completion_time.clone(),
        conditions: old.conditions.clone(),
        observed_generation: job.metadata.generation,
        ..Default::default()
    };
    let mut sorted: Vec<&Pod> = pods.iter().collect();
    sorted.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                p.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    let mut ours = vec![];
    let mut free = vec![];
    let mut conflicts = vec![];
    for p in &sorted {
        let name = p.metadata.name.clone().unwrap_or_default();
        match relation(p, job) {
            Relation::Ours => ours.push(*p),
            Relation::Conflict(c) if pod_active(p) => conflicts.push((name, c)),
            Relation::Free
                if pod_active(p)
                    && selector_matches(
                        &job.spec.selector,
                        p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
                    ) =>
            {
                free.push(*p)
            }
            _ => {}
        }
    }
    let cap = job.spec.replicas.map(|r| r.max(0) as usize);
    let room = cap.map_or(usize::MAX, |c| c.saturating_sub(ours.len()));
    let candidates: Vec<&Pod> = free.into_iter().take(room).collect();
    status.matched = (ours.len() + candidates.len()) as i32;
    for p in &ours {
        match target_state(p, job) {
            TargetState::Waiting => status.waiting += 1,
            TargetState::Running => status.running += 1,
            TargetState::Succeeded => status.succeeded += 1,
            TargetState::Failed => status.failed += 1,
        }
    }

    let already_finished = old.completion_time.is_some();
    let errored = old.phase.as_deref() == Some("Error");
    let deadline_exceeded = !already_finished
        && job.spec.active_deadline_seconds.is_some_and(|d| {
            status
                .start_time
                .as_ref()
                .is_some_and(|s| now.0.as_second() - s.0.as_second() >= d)
        });
    let mut inject = vec![];
    let paused = job.spec.paused.unwrap_or(false);
    if !already_finished && !errored && !deadline_exceeded && !paused {
        let parallelism = job.spec.parallelism.unwrap_or(1).max(1) as usize;
        let active = (status.waiting + status.running) as usize;
        for p in candidates.iter().take(parallelism.saturating_sub(active)) {
            inject.push(p.metadata.name.clone().unwrap_or_default());
            status.waiting += 1;
        }
    }
    let done = status.succeeded + status.failed;
    let all_done = status.matched > 0 && done == status.matched && inject.is_empty();
    let mut finished = false;
    status.phase = Some(if already_finished {
        old.phase.clone().unwrap_or_else(|| "Succeeded".into())
    } else if errored {
        "Error".into()
    } else if deadline_exceeded {
        finished = true;
        status.conditions.push(condition(
            "Failed",
            "DeadlineExceeded",
            format!(
                "activeDeadlineSeconds ({}s) passed with {done} of {} targets finished",
                job.spec.active_deadline_seconds.unwrap_or_default(),
                status.matched
            ),
            now,
        ));
        "Failed".into()
    } else if all_done {
        finished = true;
        if status.failed > 0 {
            status.conditions.push(condition(
                "Failed",
                "ContainersFailed",
                format!(
                    "{} of {} targets had an ephemeral container fail",
                    status.failed, status.matched
                ),
                now,
            ));
            "Failed".into()
        } else {
            status.conditions.push(condition(
                "Complete",
                "AllSucceeded",
                format!("all {} targets succeeded", status.matched),
                now,
            ));
            "Succeeded".into()
        }
    } else if paused {
        "Paused".into()
    } else if status.matched == 0
        || (status.running == 0 && done == 0 && ours.is_empty() && inject.is_empty())
    {
        "Waiting".into()
    } else {
        "Running".into()
    });
    if finished {
        status.completion_time = Some(now.clone());
    }
    Plan {
        status,
        inject,
        conflicts,
        finished,
        deadline_exceeded,
    }
}

/// The ephemeral containers to add to a pod: the template's, each marked with the job's
/// UID and name in its env.
pub fn containers_for(job: &EphemeralJob) -> Vec<EphemeralContainer> {
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    job.spec
        .template
        .ephemeral_containers
        .iter()
        .map(|c| {
            let mut c = c.clone();
            let env = c.env.get_or_insert_with(Vec::new);
            env.retain(|e| e.name != ENV_JOB_UID && e.name != ENV_JOB_NAME);
            for (k, v) in [(ENV_JOB_UID, &uid), (ENV_JOB_NAME, &name)] {
                env.push(EnvVar {
                    name: k.into(),
                    value: Some(v.clone()),
                    value_from: None,
                });
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(extra: Value) -> EphemeralJob {
        let mut spec = json!({
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"ephemeralContainers": [{
                "name": "probe", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                "terminationMessagePolicy": "File", "targetContainerName": "app"
            }]}
        });
        if let Value::Object(m) = extra {
            for (k, v) in m {
                spec[k] = v;
            }
        }
        serde_json::from_value(json!({
            "apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob",
            "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "generation": 1},
            "spec": spec
        }))
        .unwrap()
    }

    /// A running pod `name` created at second `t`, labelled app=web, with our container in
    /// `state` ("" = not injected), or a foreign container of the same name ("foreign").
    fn pod(name: &str, t: i64, state: &str) -> Pod {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"},
                         "creationTimestamp": format!("2026-01-01T00:00:{t:02}Z")},
            "spec": {"containers": [{"name": "app", "image": "a"}]},
            "status": {"phase": "Running"}
        });
        if !state.is_empty() {
            let env = if state == "foreign" {
                json!([])
            } else {
                json!([{"name": ENV_JOB_UID, "value": "u-1"}])
            };
            p["spec"]["ephemeralContainers"] =
                json!([{"name": "probe", "image": "busybox", "env": env}]);
            let st = match state {
                "waiting" | "foreign" => json!({"waiting": {"reason": "ContainerCreating"}}),
                "running" => json!({"running": {}}),
                "starterror" => json!({"waiting": {"reason": "CreateContainerError"}}),
                code => json!({"terminated": {"exitCode": code.parse::<i32>().unwrap()}}),
            };
            p["status"]["ephemeralContainerStatuses"] = json!([{"name": "probe", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0, "state": st}]);
        }
        serde_json::from_value(p).unwrap()
    }

    fn now(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_767_225_600 + s).unwrap())
    }

    fn counts(p: &Plan) -> (i32, i32, i32, i32, i32, &str) {
        let s = &p.status;
        (
            s.matched,
            s.waiting,
            s.running,
            s.succeeded,
            s.failed,
            s.phase.as_deref().unwrap(),
        )
    }

    #[test]
    fn injects_in_creation_order_up_to_parallelism() {
        let pods = [
            pod("c", 3, ""),
            pod("a", 1, ""),
            pod("b", 2, ""),
            pod("b0", 2, ""),
        ];
        let p = plan(&job(json!({"parallelism": 2})), &pods, &now(10));
        assert_eq!(p.inject, ["a", "b", "b0"][..2]);
        assert_eq!(counts(&p), (4, 2, 0, 0, 0, "Running"));
    }

    #[test]
    fn waiting_and_running_count_against_parallelism() {
        let pods = [
            pod("a", 1, "waiting"),
            pod("b", 2, "running"),
            pod("c", 3, ""),
            pod("d", 4, ""),
        ];
        let p = plan(&job(json!({"parallelism": 2})), &pods, &now(10));
        assert!(p.inject.is_empty(), "{p:?}");
        let pods = [
            pod("a", 1, "0"),
            pod("b", 2, "running"),
            pod("c", 3, ""),
            pod("d", 4, ""),
        ];
        let p = plan(&job(json!({"parallelism": 2})), &pods, &now(10));
        assert_eq!(p.inject, ["c"]);
        assert_eq!(counts(&p), (4, 1, 1, 1, 0, "Running"));
    }

    #[test]
    fn replicas_limit_and_more_replicas_than_pods_still_finishes() {
        let pods = [pod("a", 1, "0"), pod("b", 2, ""), pod("c", 3, "")];
        let p = plan(
            &job(json!({"replicas": 2, "parallelism": 5})),
            &pods,
            &now(10),
        );
        assert_eq!(p.inject, ["b"]);
        assert_eq!(p.status.matched, 2);
        let pods = [pod("a", 1, "0"), pod("b", 2, "0")];
        let p = plan(&job(json!({"replicas": 5})), &pods, &now(10));
        assert!(p.finished);
        assert_eq!(counts(&p), (2, 0, 0, 2, 0, "Succeeded"));
    }

    #[test]
    fn mixed_success_and_failure_finishes_failed_with_a_condition() {
        let pods = [
            pod("a", 1, "0"),
            pod("b", 2, "3"),
            pod("c", 3, "starterror"),
        ];
        let p = plan(&job(json!({"parallelism": 3})), &pods, &now(10));
        assert!(p.finished);
        assert_eq!(counts(&p), (3, 0, 0, 1, 2, "Failed"));
        let c = p.status.conditions.last().unwrap();
        assert_eq!(
            (c.type_.as_str(), c.reason.as_str()),
            ("Failed", "ContainersFailed")
        );
        assert!(p.status.completion_time.is_some());
    }

    #[test]
    fn conflicts_are_skipped_and_reported() {
        let pods = [pod("a", 1, "foreign"), pod("b", 2, "")];
        let p = plan(&job(json!({})), &pods, &now(10));
        assert_eq!(p.conflicts, [("a".to_string(), "probe".to_string())]);
        assert_eq!(p.inject, ["b"]);
        assert_eq!(p.status.matched, 1);
    }

    #[test]
    fn paused_injects_nothing_and_no_match_waits() {
        let pods = [pod("a", 1, "")];
        let p = plan(&job(json!({"paused": true})), &pods, &now(10));
        assert!(p.inject.is_empty());
        assert_eq!(p.status.phase.as_deref(), Some("Paused"));
        let p = plan(&job(json!({})), &[], &now(10));
        assert_eq!(counts(&p), (0, 0, 0, 0, 0, "Waiting"));
        assert!(!p.finished, "no pods is not success");
    }

    #[test]
    fn deadline_fails_the_job() {
        let mut j = job(json!({"activeDeadlineSeconds": 5}));
        j.status = Some(EphemeralJobStatus {
            start_time: Some(now(0)),
            ..Default::default()
        });
        let pods = [pod("a", 1, "running"), pod("b", 2, "")];
        assert!(!plan(&j, &pods, &now(4)).finished);
        let p = plan(&j, &pods, &now(5));
        assert!(p.finished && p.deadline_exceeded && p.inject.is_empty());
        assert_eq!(p.status.phase.as_deref(), Some("Failed"));
        assert_eq!(
            p.status.conditions.last().unwrap().reason,
            "DeadlineExceeded"
        );
    }

    #[test]
    fn error_is_sticky_and_not_success() {
        let mut j = job(json!({}));
        j.status = Some(EphemeralJobStatus {
            phase: Some("Error".into()),
            ..Default::default()
        });
        let p = plan(&j, &[pod("a", 1, "")], &now(10));
        assert!(p.inject.is_empty() && !p.finished);
        assert_eq!(p.status.phase.as_deref(), Some("Error"));
    }

    #[test]
    fn a_pod_that_ended_before_our_container_counts_as_failed() {
        let mut gone = pod("a", 1, "running");
        gone.status.as_mut().unwrap().phase = Some("Succeeded".into());
        let p = plan(&job(json!({})), &[gone], &now(10));
        assert_eq!(counts(&p), (1, 0, 0, 0, 1, "Failed"));
    }

    #[test]
    fn containers_carry_the_job_uid_and_selector_matches() {
        let j = job(json!({}));
        let c = containers_for(&j);
        assert!(is_ours(&c[0], "u-1"));
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        assert!(selector_matches(&j.spec.selector, &labels));
        assert!(!selector_matches(&j.spec.selector, &BTreeMap::new()));
    }

    #[test]
    fn crd_has_the_validation_rules() {
        let crd = crd();
        let v = &crd["spec"]["versions"][0];
        let item = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"]
            ["properties"]["ephemeralContainers"]["items"];
        assert_eq!(item["required"].as_array().unwrap().len(), 5);
        assert_eq!(v["subresources"]["status"], json!({}));
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["ejob"]));
        let cols: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            cols,
            [
                "STATUS", "MATCH", "SUCCEED", "FAILED", "RUNNING", "WAITING", "AGE"
            ]
        );
    }
}
