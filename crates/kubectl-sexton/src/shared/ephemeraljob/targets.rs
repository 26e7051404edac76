//! How a pod relates to an EphemeralJob, pure: whether the job's containers are in it
//! (`relation`), the state of its target (`target_state`) and each container's result
//! (`result`), read from the pod's `ephemeralContainerStatuses`. The controller plans with
//! them; `ejob results` lists them.

use crate::shared::pod::{Container, ContainerStatus, Pod};

use super::types::{ENV_JOB_UID, EphemeralJob, MESSAGE_CAP, TargetResult, TargetState};

/// Waiting reasons that mean the container will never start (ephemeral containers are not
/// restarted). Image pull errors are not in the list: they can clear up (the deadline bounds them).
const START_ERRORS: &[&str] = &[
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

pub fn is_ours(c: &Container, uid: &str) -> bool {
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

pub fn pod_active(pod: &Pod) -> bool {
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

/// One injected container's result, from the pod's `ephemeralContainerStatuses`.
pub fn result(pod: &Pod, container: &str) -> TargetResult {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let st = status_of(pod, container).and_then(|s| s.state.as_ref());
    let mut r = TargetResult {
        pod: name,
        container: container.to_string(),
        state: TargetState::Waiting,
        exit_code: None,
        reason: None,
        started_at: None,
        finished_at: None,
        message: None,
    };
    if let Some(t) = st.and_then(|s| s.terminated.as_ref()) {
        r.state = if t.exit_code == 0 {
            TargetState::Succeeded
        } else {
            TargetState::Failed
        };
        r.exit_code = Some(t.exit_code);
        r.reason = t.reason.clone();
        r.started_at = t.started_at.clone();
        r.finished_at = t.finished_at.clone();
        r.message = t.message.as_deref().map(truncate);
    } else if let Some(running) = st.and_then(|s| s.running.as_ref()) {
        r.state = TargetState::Running;
        r.started_at = running.started_at.clone();
    } else if let Some(w) = st.and_then(|s| s.waiting.as_ref()) {
        let reason = w.reason.clone().unwrap_or_default();
        if START_ERRORS.contains(&reason.as_str()) {
            r.state = TargetState::Failed;
            r.message = w.message.as_deref().map(truncate);
        }
        r.reason = Some(reason);
    }
    if matches!(r.state, TargetState::Running | TargetState::Waiting) && !pod_active(pod) {
        r.state = TargetState::Failed;
        r.reason = Some("PodEnded".into());
    }
    r
}

/// At most `MESSAGE_CAP` bytes, cut at a character boundary.
fn truncate(s: &str) -> String {
    let mut end = s.len().min(MESSAGE_CAP);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
