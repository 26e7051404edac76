//! The EphemeralJob reconciler, as named steps: a job past its TTL is deleted (`ttl.rs`);
//! else the pods of its namespace are read from the shared pod cache and planned
//! (`plan.rs`, pure), the batch injected (`inject.rs`, its outcomes settled into the status
//! by `settle.rs`, pure), the output of targets the requester may not read withheld
//! (`requester.rs`), what happened reported (`report.rs`) and the status written.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;
use tracing::{info, instrument};

use super::ctx::Ctx;
use super::inject::inject_all;
use super::plan::plan;
use super::report;
use super::requester::withhold_messages;
use super::ttl::{Ttl, Wake, expired};
use crate::controller::telemetry::{FIELD_MANAGER, key};
use crate::shared::api_error::Error;
use crate::shared::ephemeraljob::{EphemeralJob, EphemeralJobStatus, Phase};

/// How soon a job is looked at again while the pod cache is still being filled.
const CACHE_FILLING: Duration = Duration::from_secs(1);

#[instrument(skip_all, fields(job = %key(&*job)))]
pub async fn reconcile(job: Arc<EphemeralJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let _timer = ctx.telemetry.reconcile_started(&job);
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !ctx.pods_filled() {
        return Ok(Action::requeue(CACHE_FILLING));
    }
    let now = Time(Timestamp::now());
    let mut wake = Wake::default();
    if expired(&job, &ctx, Ttl::AfterCreated, &now, &mut wake).await? {
        return Ok(Action::await_change());
    }
    let old = job.status.clone().unwrap_or_default();
    if old.completion_time.is_some() {
        return finished_earlier(&job, &ctx, &old, &now, wake).await;
    }
    let pods = ctx.pods_in(&job.namespace().unwrap_or_default());
    let mut p = plan(&job, &pods, &now);
    report::conflicts(&job, &ctx, &p).await;
    inject_all(&job, &ctx, &pods, &mut p, &now).await?;
    withhold_messages(&job, &ctx, &mut p).await;
    report::finish(&job, &ctx, &p).await;
    write_status(&job, &ctx, &old, &p.status).await?;
    let s = &p.status;
    info!(job = %key(&*job), decision = "plan", phase = s.phase.map(Phase::as_str).unwrap_or_default(), matched = s.matched, waiting = s.waiting, running = s.running, succeeded = s.succeeded, failed = s.failed, injected = p.inject.len(), "reconciled");
    wake.at_next_deadline(&job, &p, &now);
    Ok(wake.action())
}

/// A job finished before: nothing to do but delete it when its TTL runs out.
async fn finished_earlier(
    job: &EphemeralJob,
    ctx: &Ctx,
    old: &EphemeralJobStatus,
    now: &Time,
    mut wake: Wake,
) -> Result<Action, Error> {
    if expired(job, ctx, Ttl::AfterFinished, now, &mut wake).await? {
        return Ok(Action::await_change());
    }
    info!(job = %key(job), decision = "done", phase = old.phase.map(Phase::as_str).unwrap_or_default(), "finished");
    Ok(wake.action())
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
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let status = Patch::Merge(json!({"status": new}));
    match ctx
        .api::<EphemeralJob>(job)
        .patch_status(&job.name_any(), &pp, &status)
        .await
    {
        Ok(_) => Ok(()),
        // deleted since it was read (its TTL, or a user): nothing is left to write, and
        // retrying as a refusal would only log a failure five minutes later
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::api(
            key(job),
            "writing status (RBAC: ephemeraljobs/status patch)",
            e,
        )),
    }
}

pub fn error_policy(job: Arc<EphemeralJob>, err: &Error, ctx: Arc<Ctx>) -> Action {
    Action::requeue(ctx.telemetry.failed(&job, err))
}
