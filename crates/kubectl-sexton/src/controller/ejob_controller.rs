//! The EphemeralJob reconciler: lists the pods of the job's namespace, plans (ejob.rs),
//! injects through the `pods/ephemeralcontainers` subresource, writes the status, and
//! deletes the job when a TTL runs out.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Recorder};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::ejob::{EphemeralJob, EphemeralJobStatus, containers_for, plan};
use super::http::Metrics;
use super::runtime::{Telemetry, key};
use super::terminator::{Error, FIELD_MANAGER};

pub const CONTROLLER: &str = "ephemeraljob";

pub struct Ctx {
    pub client: Client,
    pub telemetry: Telemetry<EphemeralJob>,
}

impl Ctx {
    pub fn new(client: Client, recorder: Recorder, metrics: Arc<Metrics>) -> Self {
        Ctx {
            client,
            telemetry: Telemetry::new(CONTROLLER, metrics, recorder),
        }
    }

    fn count(&self, action: &str, reason: &str) {
        self.telemetry.count(action, reason)
    }

    async fn event(&self, job: &EphemeralJob, type_: EventType, reason: &str, note: String) {
        self.telemetry
            .event(job, type_, reason, "RunEphemeralContainers", note)
            .await
    }
}

fn at(t: &Time, secs: i64) -> i64 {
    t.0.as_second() + secs
}

pub async fn reconcile(job: Arc<EphemeralJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.telemetry
        .reconciling(&job, reconcile_job(&job, &ctx))
        .await
}

/// Deletes the job if `deadline` (seconds since the epoch) has passed; else the delay until it.
async fn expire(
    job: &EphemeralJob,
    ctx: &Ctx,
    deadline: i64,
    now: i64,
    why: &str,
) -> Result<Option<Duration>, Error> {
    if now < deadline {
        return Ok(Some(Duration::from_secs((deadline - now) as u64)));
    }
    let api: Api<EphemeralJob> =
        Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let dp = DeleteParams {
        preconditions: job.uid().map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&job.name_any(), &dp).await {
        Ok(_) => {
            ctx.count("delete", why);
            info!(job = %key(job), decision = "delete", "{why}: deleted");
            Ok(None)
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(None),
        Err(e) => Err(Error(format!("{}: deleting after {why}: {e}", key(job)))),
    }
}

async fn reconcile_job(job: &EphemeralJob, ctx: &Ctx) -> Result<Action, Error> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = job.namespace().unwrap_or_default();
    let now = Time(Timestamp::now());
    let now_s = now.0.as_second();
    let mut wake: Vec<Duration> = vec![];
    if let (Some(ttl), Some(created)) = (
        job.spec.ttl_seconds_after_created,
        job.metadata.creation_timestamp.as_ref(),
    ) {
        match expire(job, ctx, at(created, ttl.into()), now_s, "TTLAfterCreated").await? {
            None => return Ok(Action::await_change()),
            Some(d) => wake.push(d),
        }
    }
    let old = job.status.clone().unwrap_or_default();
    if let Some(done) = old.completion_time.as_ref() {
        if let Some(ttl) = job.spec.ttl_seconds_after_finished {
            match expire(job, ctx, at(done, ttl.into()), now_s, "TTLAfterFinished").await? {
                None => return Ok(Action::await_change()),
                Some(d) => wake.push(d),
            }
        }
        info!(job = %key(job), decision = "done", phase = old.phase.as_deref().unwrap_or_default(), "finished");
        return Ok(requeue(wake));
    }

    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pods = pods_api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error(format!("{}: listing pods in {ns}: {e}", key(job))))?
        .items;
    let mut p = plan(job, &pods, &now);
    for (pod, container) in &p.conflicts {
        if ctx
            .telemetry
            .reported
            .first(format!("{}/{pod}", job.uid().unwrap_or_default()))
        {
            ctx.count("skip", "NameConflict");
            let msg = format!(
                "pod {pod} already has an ephemeral container named {container:?} that this job did not create; skipped"
            );
            warn!(job = %key(job), pod = %pod, "{msg}");
            ctx.event(job, EventType::Warning, "NameConflict", msg)
                .await;
        }
    }
    let containers = containers_for(job);
    for pod in &p.inject {
        let rv = pods
            .iter()
            .find(|x| x.metadata.name.as_deref() == Some(pod.as_str()))
            .and_then(|x| x.metadata.resource_version.clone());
        let patch = json!({"metadata": {"resourceVersion": rv}, "spec": {"ephemeralContainers": containers}});
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match pods_api
            .patch_ephemeral_containers(pod, &pp, &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                ctx.count("inject", "Scheduled");
                info!(job = %key(job), pod = %pod, decision = "inject", "injected ephemeral containers");
                ctx.event(
                    job,
                    EventType::Normal,
                    "Injected",
                    format!(
                        "ephemeral containers {:?} added to pod {pod}",
                        containers.iter().map(|c| &c.name).collect::<Vec<_>>()
                    ),
                )
                .await;
            }
            Err(kube::Error::Api(s))
                if s.code == 409
                    || (s.code == 404 && pods_api.get_opt(pod).await.ok().flatten().is_none()) =>
            {
                // The pod changed or went away: the next event brings it back here.
                p.status.waiting -= 1;
                info!(job = %key(job), pod = %pod, "pod changed or gone before injection ({}); will re-plan", s.code);
            }
            Err(e) => {
                p.status.waiting -= 1;
                let (reason, msg, fatal) = match &e {
                    kube::Error::Api(s) => inject_failure(s.code, &s.message, pod),
                    _ => (
                        "InjectFailed",
                        format!("adding ephemeral containers to pod {pod} failed: {e}"),
                        false,
                    ),
                };
                if fatal {
                    p.status.phase = Some("Error".into());
                    p.status.conditions.push(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                            type_: "Error".into(),
                            status: "True".into(),
                            reason: reason.into(),
                            message: msg.clone(),
                            last_transition_time: now.clone(),
                            observed_generation: job.metadata.generation,
                        },
                    );
                    p.status.completion_time = None;
                    ctx.count("error", reason);
                    warn!(job = %key(job), pod = %pod, reason, "{msg}");
                    ctx.event(job, EventType::Warning, reason, msg).await;
                    break;
                }
                return Err(Error(format!("{}: {msg}", key(job))));
            }
        }
    }
    if p.finished && p.status.phase.as_deref() != Some("Error") {
        let s = &p.status;
        let (t, reason) = match s.phase.as_deref() {
            Some("Succeeded") => (EventType::Normal, "Succeeded"),
            _ if p.deadline_exceeded => (EventType::Warning, "DeadlineExceeded"),
            _ => (EventType::Warning, "Failed"),
        };
        ctx.event(
            job,
            t,
            reason,
            format!(
                "{} of {} targets succeeded, {} failed",
                s.succeeded, s.matched, s.failed
            ),
        )
        .await;
    }
    write_status(job, ctx, &old, &p.status).await?;
    info!(job = %key(job), decision = "plan", phase = p.status.phase.as_deref().unwrap_or_default(), matched = p.status.matched, waiting = p.status.waiting, running = p.status.running, succeeded = p.status.succeeded, failed = p.status.failed, injected = p.inject.len(), "reconciled");
    if p.finished {
        if let (Some(ttl), Some(done)) = (
            job.spec.ttl_seconds_after_finished,
            p.status.completion_time.as_ref(),
        ) {
            wake.push(Duration::from_secs(
                (at(done, ttl.into()) - now_s).max(0) as u64
            ));
        }
    } else if let (Some(d), Some(start)) = (
        job.spec.active_deadline_seconds,
        p.status.start_time.as_ref(),
    ) {
        wake.push(Duration::from_secs(
            (at(start, d) - now_s).max(0) as u64 + 1,
        ));
    }
    Ok(requeue(wake))
}

/// What an API error on injection means. 4xx answers other than 409 (handled by the
/// caller) will not change by retrying: the job goes to phase Error with this reason.
/// 404/405 from the subresource on a pod that exists mean the API server has no ephemeral
/// containers API: that is an Error, never a success.
pub fn inject_failure(code: u16, message: &str, pod: &str) -> (&'static str, String, bool) {
    match code {
        404 | 405 => (
            "EphemeralContainersUnsupported",
            format!(
                "the API server has no pods/ephemeralcontainers subresource ({message}): ephemeral containers are not available on this cluster"
            ),
            true,
        ),
        403 => (
            "Forbidden",
            format!(
                "not allowed to add ephemeral containers ({message}); the controller's ClusterRole needs pods/ephemeralcontainers patch"
            ),
            true,
        ),
        400..=499 => (
            "InjectFailed",
            format!("the API server refused the ephemeral containers for pod {pod}: {message}"),
            true,
        ),
        _ => (
            "InjectFailed",
            format!("adding ephemeral containers to pod {pod} failed ({code}): {message}"),
            false,
        ),
    }
}

fn requeue(wake: Vec<Duration>) -> Action {
    match wake.into_iter().min() {
        Some(d) => Action::requeue(d.max(Duration::from_millis(200))),
        None => Action::await_change(),
    }
}

async fn write_status(
    job: &EphemeralJob,
    ctx: &Ctx,
    old: &EphemeralJobStatus,
    new: &EphemeralJobStatus,
) -> Result<(), Error> {
    if old == new {
        return Ok(());
    }
    let api: Api<EphemeralJob> =
        Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    api.patch_status(&job.name_any(), &pp, &Patch::Merge(json!({"status": new})))
        .await
        .map(|_| ())
        .map_err(|e| {
            Error(format!(
                "{}: writing status: {e} (RBAC: ephemeraljobs/status patch)",
                key(job)
            ))
        })
}

pub fn error_policy(job: Arc<EphemeralJob>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.telemetry.failed(&job, err)
}

#[cfg(test)]
mod tests {
    use super::inject_failure;

    /// A missing ephemeral-containers API cannot be produced on a 1.34 API server (the
    /// feature is GA and has no gate), so its handling is pinned here.
    #[test]
    fn injection_errors_are_classified() {
        for (code, reason, fatal) in [
            (404, "EphemeralContainersUnsupported", true),
            (405, "EphemeralContainersUnsupported", true),
            (403, "Forbidden", true),
            (422, "InjectFailed", true),
            (500, "InjectFailed", false),
            (503, "InjectFailed", false),
        ] {
            let (r, msg, f) = inject_failure(code, "m", "web-0");
            assert_eq!((r, f), (reason, fatal), "{code}");
            assert!(msg.contains('m'));
        }
    }
}
