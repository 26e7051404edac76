//! The EphemeralJob's planning step, pure: given the job and the pods of its namespace,
//! what its status is and which pods get the containers next.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, EphemeralContainer};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::core::{Selector, SelectorExt};

use crate::shared::ephemeraljob::{
    ENV_JOB_NAME, ENV_JOB_UID, EphemeralJob, EphemeralJobStatus, Phase, Relation, TARGETS_CAP,
    TargetResult, TargetState, pod_active, relation, result, target_state,
};
use crate::shared::pod::Pod;

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

/// The pods of the namespace as the job sees them, in a stable order (creation, name).
struct Targets<'a> {
    /// Pods holding our containers.
    ours: Vec<&'a Pod>,
    /// Running pods the selector picks that we may still inject into (within `replicas`).
    candidates: Vec<&'a Pod>,
    /// Running pods with a foreign container of a template name: (pod, container).
    conflicts: Vec<(String, String)>,
}

fn targets<'a, P: Borrow<Pod>>(job: &EphemeralJob, pods: &'a [P]) -> Targets<'a> {
    let mut sorted: Vec<&Pod> = pods.iter().map(Borrow::borrow).collect();
    sorted.sort_by_key(|p| {
        (
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.name.clone(),
        )
    });
    let no_labels = BTreeMap::new();
    let selected = |p: &Pod| {
        selects_anything(job)
            && selector_matches(
                &job.spec.selector,
                p.metadata.labels.as_ref().unwrap_or(&no_labels),
            )
    };
    let refused = |p: &Pod| {
        let status = job.status.as_ref();
        let name = p.metadata.name.as_deref().unwrap_or_default();
        status.is_some_and(|s| s.refused.iter().any(|r| r.pod == name))
    };
    let (mut ours, mut free, mut conflicts) = (vec![], vec![], vec![]);
    for p in sorted {
        // (a pod the selector does not pick is nobody's business here, whatever it holds)
        let eligible = pod_active(p) && selected(p) && !refused(p);
        match relation(p, job) {
            Relation::Ours => ours.push(p),
            Relation::Conflict(c) if eligible => {
                conflicts.push((p.metadata.name.clone().unwrap_or_default(), c))
            }
            Relation::Free if eligible => free.push(p),
            _ => {}
        }
    }
    let cap = job.spec.replicas.map(|r| r.max(0) as usize);
    let used = ours.len() + refused_count(job);
    let room = cap.map_or(usize::MAX, |c| c.saturating_sub(used));
    let candidates = free.into_iter().take(room).collect();
    Targets {
        ours,
        candidates,
        conflicts,
    }
}

/// Plans one reconciliation. `pods` are the pods of the job's namespace (any phase); `now`
/// is the current time.
pub fn plan(job: &EphemeralJob, pods: &[impl Borrow<Pod>], now: &Time) -> Plan {
    let old = job.status.clone().unwrap_or_default();
    let Targets {
        ours,
        candidates,
        conflicts,
    } = targets(job, pods);
    let mut status = carried_over(job, &old, now);
    let refused = refused_count(job) as i32;
    status.matched = (ours.len() + candidates.len()) as i32 + refused;
    status.failed += refused;
    for p in &ours {
        count(&mut status, target_state(p, job));
    }
    status.targets = results(job, &ours);
    let deadline_exceeded = old.completion_time.is_none() && deadline_passed(job, &status, now);
    let inject = match may_inject(job, &old) && !deadline_exceeded {
        true => next_batch(job, &status, &candidates),
        false => vec![],
    };
    status.waiting += inject.len() as i32;
    let (phase, done) = next_phase(
        job,
        &old,
        &status,
        !ours.is_empty() || !inject.is_empty(),
        deadline_exceeded,
    );
    status.phase = Some(phase);
    if let Some(reason) = done {
        status
            .conditions
            .push(finish_condition(job, &status, reason, now));
        status.completion_time = Some(now.clone());
    }
    Plan {
        status,
        inject,
        conflicts,
        finished: done.is_some(),
        deadline_exceeded,
    }
}

/// Pods refused so far (exact, also beyond the list's cap).
fn refused_count(job: &EphemeralJob) -> usize {
    let status = job.status.as_ref();
    status.map_or(0, |s| {
        s.refused_count
            .map_or(s.refused.len(), |n| n.max(0) as usize)
    })
}

/// An empty selector selects nothing unless the job says `selectAllPods` (the CRD refuses
/// it too; this keeps an object written before that rule from running everywhere).
fn selects_anything(job: &EphemeralJob) -> bool {
    let s = &job.spec.selector;
    let labels = s.match_labels.as_ref().is_some_and(|m| !m.is_empty());
    let exprs = s.match_expressions.as_ref().is_some_and(|e| !e.is_empty());
    labels || exprs || job.spec.select_all_pods == Some(true)
}

/// `status.targets`: each injected container of each target, the most telling first
/// (failed, running, waiting, succeeded; the most recent first), at most `TARGETS_CAP`.
fn results(job: &EphemeralJob, ours: &[&Pod]) -> Vec<TargetResult> {
    let mut all: Vec<TargetResult> = ours
        .iter()
        .flat_map(|p| {
            job.spec
                .template
                .ephemeral_containers
                .iter()
                .map(move |t| result(p, &t.name))
        })
        .collect();
    let recent = |r: &TargetResult| {
        r.finished_at
            .as_ref()
            .or(r.started_at.as_ref())
            .map(|t| t.0)
    };
    all.sort_by(|a, b| {
        a.state
            .cmp(&b.state)
            .then_with(|| recent(b).cmp(&recent(a)))
    });
    all.truncate(TARGETS_CAP);
    all
}

/// What the new status keeps from the old: times, conditions and refused pods.
fn carried_over(job: &EphemeralJob, old: &EphemeralJobStatus, now: &Time) -> EphemeralJobStatus {
    EphemeralJobStatus {
        start_time: old.start_time.clone().or_else(|| Some(now.clone())),
        completion_time: old.completion_time.clone(),
        conditions: old.conditions.clone(),
        refused: old.refused.clone(),
        refused_count: old.refused_count,
        observed_generation: job.metadata.generation,
        ..Default::default()
    }
}

fn count(status: &mut EphemeralJobStatus, state: TargetState) {
    match state {
        TargetState::Waiting => status.waiting += 1,
        TargetState::Running => status.running += 1,
        TargetState::Succeeded => status.succeeded += 1,
        TargetState::Failed => status.failed += 1,
    }
}

fn deadline_passed(job: &EphemeralJob, status: &EphemeralJobStatus, now: &Time) -> bool {
    let (Some(deadline), Some(start)) = (job.spec.active_deadline_seconds, &status.start_time)
    else {
        return false;
    };
    now.0.as_second() - start.0.as_second() >= deadline
}

/// Neither finished, nor failed for good, nor paused.
fn may_inject(job: &EphemeralJob, old: &EphemeralJobStatus) -> bool {
    old.completion_time.is_none()
        && old.phase != Some(Phase::Error)
        && !job.spec.paused.unwrap_or(false)
}

/// The candidates to inject into now: as many as `parallelism` leaves room for.
fn next_batch(job: &EphemeralJob, status: &EphemeralJobStatus, candidates: &[&Pod]) -> Vec<String> {
    let parallelism = job.spec.parallelism.unwrap_or(1).max(1) as usize;
    let active = (status.waiting + status.running) as usize;
    candidates
        .iter()
        .take(parallelism.saturating_sub(active))
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// Why a job finished now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    DeadlineExceeded,
    ContainersFailed,
    AllSucceeded,
}

/// The job's phase, and why it finished if it just did. `started`: a target holds our
/// containers or is about to.
fn next_phase(
    job: &EphemeralJob,
    old: &EphemeralJobStatus,
    status: &EphemeralJobStatus,
    started: bool,
    deadline_exceeded: bool,
) -> (Phase, Option<Finish>) {
    if old.completion_time.is_some() {
        return (old.phase.unwrap_or(Phase::Succeeded), None);
    }
    if old.phase == Some(Phase::Error) {
        return (Phase::Error, None);
    }
    if deadline_exceeded {
        return (Phase::Failed, Some(Finish::DeadlineExceeded));
    }
    let done = status.succeeded + status.failed;
    // `waiting` includes the batch injected now: all done means nothing is left to start.
    if status.matched > 0 && done == status.matched && status.waiting == 0 {
        return match status.failed {
            0 => (Phase::Succeeded, Some(Finish::AllSucceeded)),
            _ => (Phase::Failed, Some(Finish::ContainersFailed)),
        };
    }
    if job.spec.paused.unwrap_or(false) {
        return (Phase::Paused, None);
    }
    if status.matched == 0 || (status.running == 0 && done == 0 && !started) {
        return (Phase::Waiting, None);
    }
    (Phase::Running, None)
}

fn finish_condition(
    job: &EphemeralJob,
    status: &EphemeralJobStatus,
    why: Finish,
    now: &Time,
) -> Condition {
    let (matched, failed) = (status.matched, status.failed);
    let done = status.succeeded + failed;
    match why {
        Finish::DeadlineExceeded => condition(
            "Failed",
            "DeadlineExceeded",
            format!(
                "activeDeadlineSeconds ({}s) passed with {done} of {matched} targets finished",
                job.spec.active_deadline_seconds.unwrap_or_default(),
            ),
            now,
        ),
        Finish::ContainersFailed => condition(
            "Failed",
            "ContainersFailed",
            format!("{failed} of {matched} targets had an ephemeral container fail"),
            now,
        ),
        Finish::AllSucceeded => condition(
            "Complete",
            "AllSucceeded",
            format!("all {matched} targets succeeded"),
            now,
        ),
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
    use crate::shared::ephemeraljob::{Refused, is_ours};
    use crate::shared::pod::Container;
    use serde_json::{Value, json};

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
            s.phase.unwrap().as_str(),
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

    /// A pod the selector does not pick is nobody's business, whatever it holds (a defect
    /// found by OpenKruise's suite: the conflict branch lacked the selector check).
    #[test]
    fn a_conflict_outside_the_selector_is_not_reported() {
        let mut other = pod("other", 1, "foreign");
        other.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
        let p = plan(&job(json!({})), &[other, pod("a", 2, "")], &now(10));
        assert!(p.conflicts.is_empty(), "{:?}", p.conflicts);
        assert_eq!(p.inject, ["a"]);
    }

    /// A refused pod is a failed target and is not tried again; the others go on.
    #[test]
    fn refused_pods_count_as_failed_and_are_not_tried_again() {
        let mut j = job(json!({"parallelism": 2}));
        j.status = Some(EphemeralJobStatus {
            refused: vec![Refused {
                pod: "a".into(),
                message: "422".into(),
            }],
            refused_count: Some(1),
            ..Default::default()
        });
        let p = plan(
            &j,
            &[pod("a", 1, ""), pod("b", 2, ""), pod("c", 3, "0")],
            &now(10),
        );
        assert_eq!(p.inject, ["b"], "{p:?}");
        let s = &p.status;
        assert_eq!((s.matched, s.failed, s.succeeded, s.waiting), (3, 1, 1, 1));
    }

    #[test]
    fn results_are_listed_failed_first_and_capped() {
        let pods: Vec<Pod> = (0..300)
            .map(|i| pod(&format!("p{i:03}"), i % 60, if i == 7 { "3" } else { "0" }))
            .collect();
        let p = plan(&job(json!({})), &pods, &now(10));
        let t = &p.status.targets;
        assert_eq!(t.len(), TARGETS_CAP);
        assert_eq!(
            (t[0].pod.as_str(), t[0].state, t[0].exit_code),
            ("p007", TargetState::Failed, Some(3))
        );
        assert_eq!(
            p.status.succeeded, 299,
            "the counters stay exact beyond the cap"
        );
    }

    #[test]
    fn an_empty_selector_selects_nothing_unless_said() {
        let j = job(json!({"selector": {}}));
        assert!(plan(&j, &[pod("a", 1, "")], &now(10)).inject.is_empty());
        let j = job(json!({"selector": {}, "selectAllPods": true}));
        assert_eq!(plan(&j, &[pod("a", 1, "")], &now(10)).inject, ["a"]);
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
        assert_eq!(p.status.phase, Some(Phase::Paused));
        let p = plan(&job(json!({})), &[] as &[Pod], &now(10));
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
        assert_eq!(p.status.phase, Some(Phase::Failed));
        assert_eq!(
            p.status.conditions.last().unwrap().reason,
            "DeadlineExceeded"
        );
    }

    #[test]
    fn error_is_sticky_and_not_success() {
        let mut j = job(json!({}));
        j.status = Some(EphemeralJobStatus {
            phase: Some(Phase::Error),
            ..Default::default()
        });
        let p = plan(&j, &[pod("a", 1, "")], &now(10));
        assert!(p.inject.is_empty() && !p.finished);
        assert_eq!(p.status.phase, Some(Phase::Error));
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
        // as the pod holds it, once injected
        let c: Container =
            serde_json::from_value(serde_json::to_value(&containers_for(&j)[0]).unwrap()).unwrap();
        assert!(is_ours(&c, "u-1"));
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        assert!(selector_matches(&j.spec.selector, &labels));
        assert!(!selector_matches(&j.spec.selector, &BTreeMap::new()));
    }
}
