//! The planning step, table-tested (`plan.rs`).

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
