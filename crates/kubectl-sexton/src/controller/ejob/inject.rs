//! The injection: the template's containers added to each pod of the batch through the
//! `pods/ephemeralcontainers` subresource, a few at a time, once the policy and the
//! requester allow it; what became of each pod is settled into the status (`settle.rs`) and
//! reported (`report.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{StreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use super::ctx::Ctx;
use super::failure::InjectFailure;
use super::plan::{Plan, containers_for};
use super::report;
use super::requester::{requester_may_inject, trusted_requester};
use super::settle::{Settled, settle};
use crate::controller::telemetry::{FIELD_MANAGER, key};
use crate::shared::api_error::Error;
use crate::shared::ephemeraljob::{EphemeralJob, Requester};
use crate::shared::pod::Pod;

/// What became of one injection.
enum Injected {
    Done,
    /// The pod changed or went away: the next event brings the job back here.
    Replan,
}

/// Patches in flight at once while injecting: a job over 10 000 pods would otherwise take
/// 10 000 round trips in a row, and the reconciliation holds the job all that time.
const INJECT_CONCURRENCY: usize = 16;

/// Injects into each pod of the plan, a few at a time; a refusal that retrying will not
/// change puts the job in phase Error and stops (patches already sent complete).
pub async fn inject_all(
    job: &EphemeralJob,
    ctx: &Ctx,
    pods: &[Arc<Pod>],
    p: &mut Plan,
    now: &Time,
) -> Result<(), Error> {
    if p.inject.is_empty() {
        return Ok(());
    }
    let who = match allowed(job, ctx).await? {
        Ok(who) => who,
        Err(failure) => {
            let failed = failure.settled(p.inject.len());
            p.inject.clear();
            settle(&mut p.status, &failed, now, job.metadata.generation);
            report::settled(job, ctx, &failed).await;
            return Ok(());
        }
    };
    let api: Api<Pod> = ctx.api(job);
    let by_name: HashMap<&str, &Pod> = pods
        .iter()
        .filter_map(|x| Some((x.metadata.name.as_deref()?, &**x)))
        .collect();
    let names = std::mem::take(&mut p.inject);
    let attempts = names.iter().cloned().map(|name| {
        let pod = by_name.get(name.as_str()).copied();
        attempt(job, ctx, &api, &who, name, pod)
    });
    let mut outcomes = stream::iter(attempts).buffer_unordered(INJECT_CONCURRENCY);
    let mut injected = vec![];
    let mut result = Ok(());
    while let Some((name, outcome)) = outcomes.next().await {
        let (settled, last) = match outcome {
            Ok(Injected::Done) => {
                injected.push(name);
                (Settled::Injected, false)
            }
            Ok(Injected::Replan) => (Settled::NotInjected, false),
            Err(InjectFailure::Transient { pod, error }) => {
                let doing = format!("adding ephemeral containers to pod {pod}");
                result = Err(Error::api(key(job), doing, error));
                (Settled::NotInjected, true)
            }
            Err(failure) => (failure.settled(1), failure.is_fatal()),
        };
        settle(&mut p.status, &settled, now, job.metadata.generation);
        report::settled(job, ctx, &settled).await;
        if last {
            break;
        }
    }
    drop(outcomes);
    report::injected(job, ctx, &injected).await;
    p.inject = names;
    result
}

/// One pod of the batch (`pod`: as the cache has it): refused when it holds its share of
/// ephemeral containers already or the requester may not inject into it, else injected.
async fn attempt(
    job: &EphemeralJob,
    ctx: &Ctx,
    api: &Api<Pod>,
    who: &Requester,
    name: String,
    pod: Option<&Pod>,
) -> (String, Result<Injected, InjectFailure>) {
    let rv = pod.and_then(|x| x.metadata.resource_version.clone());
    let outcome = match pod.and_then(|x| ctx.policy.pod_refusal(x, job)) {
        Some(message) => Err(InjectFailure::Refused {
            pod: name.clone(),
            message,
        }),
        None => match requester_may_inject(job, ctx, who, &name).await {
            Ok(()) => inject(job, ctx, api, &name, rv).await,
            Err(refusal) => Err(refusal),
        },
    };
    (name, outcome)
}

/// The requester the job acts for, if the admin's policy allows its template and the
/// requester can be trusted; else the failure that puts the job in phase Error.
async fn allowed(job: &EphemeralJob, ctx: &Ctx) -> Result<Result<Requester, InjectFailure>, Error> {
    if let Some(why) = ctx.policy.template_refusal(job) {
        return Ok(Err(InjectFailure::Policy(why)));
    }
    trusted_requester(job, ctx).await
}

/// Adds the template's containers to pod `name` (at resourceVersion `rv`).
async fn inject(
    job: &EphemeralJob,
    ctx: &Ctx,
    api: &Api<Pod>,
    name: &str,
    rv: Option<String>,
) -> Result<Injected, InjectFailure> {
    let containers = containers_for(job);
    let patch =
        json!({"metadata": {"resourceVersion": rv}, "spec": {"ephemeralContainers": containers}});
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let err = match api
        .patch_subresource("ephemeralcontainers", name, &pp, &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => {
            info!(job = %key(job), pod = %name, decision = "inject", "injected ephemeral containers");
            return Ok(Injected::Done);
        }
        Err(e) => e,
    };
    // 404 also answers a missing subresource: only a pod that is really gone is a re-plan.
    let gone = || async { api.get_opt(name).await.ok().flatten().is_none() };
    match &err {
        kube::Error::Api(s) if s.code == 409 || (s.code == 404 && gone().await) => {
            info!(job = %key(job), pod = %name, "pod changed or gone before injection ({}); will re-plan", s.code);
            Ok(Injected::Replan)
        }
        // 403 is RBAC's answer and admission's (Pod Security, a policy, a webhook): only
        // the first is the controller's own failure; the other refused this pod alone
        kube::Error::Api(s) if s.code == 403 && may_inject(ctx, job, name).await => {
            Err(InjectFailure::Refused {
                pod: name.to_string(),
                message: format!(
                    "admission refused the ephemeral containers for pod {name}: {}",
                    s.message
                ),
            })
        }
        _ => Err(InjectFailure::classify(name, err)),
    }
}

/// Whether RBAC lets the controller add ephemeral containers to pod `name` (a
/// SelfSubjectAccessReview, which every authenticated identity may create).
async fn may_inject(ctx: &Ctx, job: &EphemeralJob, name: &str) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: job.namespace(),
                verb: Some("patch".into()),
                resource: Some("pods".into()),
                subresource: Some("ephemeralcontainers".into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(ctx.client.clone());
    match reviews.create(&Default::default(), &review).await {
        Ok(r) => r.status.is_some_and(|s| s.allowed),
        Err(e) => {
            warn!(pod = %name, "SelfSubjectAccessReview failed: {e}; taking the 403 as the controller's own");
            false
        }
    }
}
