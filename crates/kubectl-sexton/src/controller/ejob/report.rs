//! What the reconciler tells people: Events, warnings and the `actions_total` counts, for
//! conflicting names, the pods injected, a refused pod, a job failed for good, and a job
//! that finished. The status itself is `settle.rs`'s.

use kube::ResourceExt;
use kube::runtime::events::EventType;
use tracing::warn;

use super::ctx::Ctx;
use super::plan::{Plan, containers_for};
use super::settle::Settled;
use crate::controller::telemetry::key;
use crate::shared::ephemeraljob::{EphemeralJob, Phase};

/// Matching pods that hold a container of a template name that this job did not create:
/// skipped, said once per pod.
pub async fn conflicts(job: &EphemeralJob, ctx: &Ctx, p: &Plan) {
    for (pod, container) in &p.conflicts {
        let once = format!("{}/{pod}", job.uid().unwrap_or_default());
        if !ctx.telemetry.reported.first(once) {
            continue;
        }
        ctx.count("skip", "NameConflict");
        let msg = format!(
            "pod {pod} already has an ephemeral container named {container:?} that this job did not create; skipped"
        );
        warn!(job = %key(job), pod = %pod, "{msg}");
        ctx.event(job, EventType::Warning, "NameConflict", msg)
            .await;
    }
}

/// One Event for the pods injected by one reconciliation (not one per pod: a job over
/// 10 000 pods would write 10 000 Events).
pub async fn injected(job: &EphemeralJob, ctx: &Ctx, pods: &[String]) {
    const NAMED: usize = 10;
    if pods.is_empty() {
        return;
    }
    ctx.count_by("inject", "Scheduled", pods.len() as u64);
    let names: Vec<_> = containers_for(job).into_iter().map(|c| c.name).collect();
    let mut listed = pods[..pods.len().min(NAMED)].join(", ");
    if pods.len() > NAMED {
        listed.push_str(&format!(" and {} more", pods.len() - NAMED));
    }
    let note = format!(
        "ephemeral containers {names:?} added to {} pod(s): {listed}",
        pods.len()
    );
    ctx.event(job, EventType::Normal, "Injected", note).await;
}

/// What became of a pod (or of the job) that people must hear of: a pod refused the
/// containers (a 4xx such as 422: it lacks the target container, say; an admission
/// denial; the per-pod cap), and the job carries on; or the job failed for good (a person
/// has to act).
pub async fn settled(job: &EphemeralJob, ctx: &Ctx, settled: &Settled) {
    match settled {
        Settled::Injected | Settled::NotInjected => {}
        Settled::Refused { pod, message } => {
            ctx.count("refuse", "InjectRefused");
            warn!(job = %key(job), pod = %pod, "{message}");
            ctx.event(job, EventType::Warning, "InjectRefused", message.clone())
                .await;
        }
        Settled::JobFailed {
            reason, message, ..
        } => {
            let reason: &'static str = reason;
            ctx.count("error", reason);
            warn!(job = %key(job), reason, "{message}");
            ctx.event(job, EventType::Warning, reason, message.clone())
                .await;
        }
    }
}

/// The Event of a job that just finished (not of one that failed for good).
pub async fn finish(job: &EphemeralJob, ctx: &Ctx, p: &Plan) {
    let s = &p.status;
    if !p.finished || s.phase == Some(Phase::Error) {
        return;
    }
    let (t, reason) = match s.phase {
        Some(Phase::Succeeded) => (EventType::Normal, "Succeeded"),
        _ if p.deadline_exceeded => (EventType::Warning, "DeadlineExceeded"),
        _ => (EventType::Warning, "Failed"),
    };
    let note = format!(
        "{} of {} targets succeeded, {} failed",
        s.succeeded, s.matched, s.failed
    );
    ctx.event(job, t, reason, note).await;
}
