//! The checked namespaces' Jobs and CronJobs, listed once for the checks that read their
//! pod templates (`injected-sidecars`, `virtual-kubelet`): the first check to ask lists
//! them; the others get the same answer.

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Api;
use kube::api::ListParams;

use super::access::{Access, AccessError, answer};
use super::ctx::{Ctx, Workloads};

/// The Jobs and CronJobs (listed by the first check to ask).
pub async fn listed(ctx: &Ctx) -> &Result<Workloads, AccessError> {
    ctx.workloads.get_or_init(|| list(ctx)).await
}

async fn list(ctx: &Ctx) -> Result<Workloads, AccessError> {
    let ns = ctx.namespaces.one();
    let (jobs, cronjobs) = match ns {
        Some(ns) => (
            Api::<Job>::namespaced(ctx.client.clone(), ns),
            Api::<CronJob>::namespaced(ctx.client.clone(), ns),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    let lp = ListParams::default();
    let jobs = answer(
        Access::new("list", "jobs.batch").in_ns(ns),
        jobs.list(&lp).await,
    )?;
    let cronjobs = answer(
        Access::new("list", "cronjobs.batch").in_ns(ns),
        cronjobs.list(&lp).await,
    )?;
    Ok(Workloads {
        jobs: jobs.items,
        cronjobs: cronjobs.items,
    })
}
