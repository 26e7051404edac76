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

// (named from this file: the scale benchmark includes this file by `#[path]`, which would
// look for a plain `mod tests;` beside it, in ejob/)
#[cfg(test)]
#[path = "plan/tests.rs"]
mod tests;
