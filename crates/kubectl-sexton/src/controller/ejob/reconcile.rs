//! The EphemeralJob reconciler: reads the pods of the job's namespace from the shared pod
//! cache, plans (`plan.rs`), injects through the `pods/ephemeralcontainers` subresource,
//! writes the status, and deletes the job when a TTL runs out.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::shared::pod::Pod;
use futures_util::{StreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tracing::{info, instrument, warn};

use super::access::{Access, Question};
use super::plan::{Plan, containers_for, plan, selector_matches};
use super::policy::Policy;
use super::stamp_guard::{Stamp, StampGuard};
use crate::controller::metrics::Metrics;
use crate::controller::telemetry::{FIELD_MANAGER, Telemetry, key};
use crate::shared::api_error::Error;
use crate::shared::ephemeraljob::{
    DEFAULT_TTL_AFTER_FINISHED, EphemeralJob, EphemeralJobStatus, Phase, REFUSED_CAP, Refused,
    Requester,
};

/// How soon a job is looked at again while the pod cache is still being filled.
const CACHE_FILLING: Duration = Duration::from_secs(1);

pub const CONTROLLER: &str = "ephemeraljob";

pub struct Ctx {
    pub client: Client,
    pub telemetry: Telemetry<EphemeralJob>,
    /// The shared pod cache, and whether it has been filled.
    pods: Store<Pod>,
    pods_filled: Arc<AtomicBool>,
    pub policy: Policy,
    /// What each job's requester may do (SubjectAccessReview, cached briefly).
    access: Access,
    /// Whether requester stamps are protected in a namespace (a dry run, cached briefly).
    stamps: StampGuard,
}

impl Ctx {
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: Arc<Metrics>,
        pods: Store<Pod>,
        pods_filled: Arc<AtomicBool>,
        policy: Policy,
    ) -> Self {
        Ctx {
            access: Access::new(client.clone()),
            stamps: StampGuard::new(client.clone()),
            client,
            telemetry: Telemetry::new(CONTROLLER, metrics, recorder),
            pods,
            pods_filled,
            policy,
        }
    }

    fn count(&self, action: &'static str, reason: &'static str) {
        self.telemetry.count(action, reason)
    }

    fn count_by(&self, action: &'static str, reason: &'static str, n: u64) {
        self.telemetry.count_by(action, reason, n)
    }

    async fn event(&self, job: &EphemeralJob, type_: EventType, reason: &str, note: String) {
        self.telemetry
            .event(job, type_, reason, "RunEphemeralContainers", note)
    }

    /// The pods of `namespace`, from the cache.
    fn pods_in(&self, namespace: &str) -> Vec<Arc<Pod>> {
        self.pods
            .state_filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
    }

    fn api<K>(&self, job: &EphemeralJob) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &job.namespace().unwrap_or_default())
    }
}

/// The jobs a pod change may concern: those of its namespace that select it, or that have
/// containers waiting or running (the pod may hold them).
pub fn jobs_of_pod(
    jobs: Store<EphemeralJob>,
) -> impl Fn(Arc<Pod>) -> Vec<ObjectRef<EphemeralJob>> + Send + Sync + 'static {
    move |pod| {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        jobs.state()
            .into_iter()
            .filter(|j| {
                j.metadata.namespace.as_deref() == Some(ns.as_str())
                    && (selector_matches(&j.spec.selector, &labels)
                        || j.status.as_ref().is_some_and(|s| s.running + s.waiting > 0))
            })
            .map(|j| ObjectRef::from_obj(&*j))
            .collect()
    }
}

fn at(t: &Time, secs: i64) -> i64 {
    t.0.as_second() + secs
}

#[instrument(skip_all, fields(job = %key(&*job)))]
pub async fn reconcile(job: Arc<EphemeralJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let _timer = ctx.telemetry.reconcile_started(&job);
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !ctx.pods_filled.load(Ordering::Relaxed) {
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
    report_conflicts(&job, &ctx, &p).await;
    inject_all(&job, &ctx, &pods, &mut p, &now).await?;
    withhold_messages(&job, &ctx, &mut p).await;
    report_finish(&job, &ctx, &p).await;
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

/// The earliest time the job must be looked at again without an event.
#[derive(Default)]
struct Wake(Option<Duration>);

impl Wake {
    fn at(&mut self, d: Duration) {
        self.0 = Some(self.0.map_or(d, |w| w.min(d)));
    }

    /// After this reconciliation: when a finished job's TTL or a running job's deadline
    /// runs out.
    fn at_next_deadline(&mut self, job: &EphemeralJob, p: &Plan, now: &Time) {
        let now = now.0.as_second();
        let secs = |deadline: i64| Duration::from_secs((deadline - now).max(0) as u64);
        if p.finished {
            let (ttl, done) = (
                job.spec
                    .ttl_seconds_after_finished
                    .or(Some(DEFAULT_TTL_AFTER_FINISHED)),
                p.status.completion_time.as_ref(),
            );
            if let (Some(ttl), Some(done)) = (ttl, done) {
                self.at(secs(at(done, ttl.into())));
            }
        } else if let (Some(d), Some(start)) = (
            job.spec.active_deadline_seconds,
            p.status.start_time.as_ref(),
        ) {
            self.at(secs(at(start, d)) + Duration::from_secs(1));
        }
    }

    fn action(self) -> Action {
        match self.0 {
            Some(d) => Action::requeue(d.max(Duration::from_millis(200))),
            None => Action::await_change(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Ttl {
    AfterCreated,
    AfterFinished,
}

impl Ttl {
    fn reason(self) -> &'static str {
        match self {
            Ttl::AfterCreated => "TTLAfterCreated",
            Ttl::AfterFinished => "TTLAfterFinished",
        }
    }

    /// When the job expires, in seconds since the epoch, if it has this TTL.
    fn deadline(self, job: &EphemeralJob) -> Option<i64> {
        let (ttl, from) = match self {
            Ttl::AfterCreated => (
                job.spec.ttl_seconds_after_created,
                job.metadata.creation_timestamp.as_ref(),
            ),
            Ttl::AfterFinished => (
                job.spec
                    .ttl_seconds_after_finished
                    .or(Some(DEFAULT_TTL_AFTER_FINISHED)),
                job.status.as_ref().and_then(|s| s.completion_time.as_ref()),
            ),
        };
        Some(at(from?, ttl?.into()))
    }
}

/// Deletes the job if its `ttl` has run out (true: deleted or gone); else notes in `wake`
/// when it will.
async fn expired(
    job: &EphemeralJob,
    ctx: &Ctx,
    ttl: Ttl,
    now: &Time,
    wake: &mut Wake,
) -> Result<bool, Error> {
    let Some(deadline) = ttl.deadline(job) else {
        return Ok(false);
    };
    let now = now.0.as_second();
    if now < deadline {
        wake.at(Duration::from_secs((deadline - now) as u64));
        return Ok(false);
    }
    // The UID precondition: never delete a newer job of the same name.
    let dp = DeleteParams {
        preconditions: job.uid().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..Default::default()
    };
    let why = ttl.reason();
    match ctx
        .api::<EphemeralJob>(job)
        .delete(&job.name_any(), &dp)
        .await
    {
        Ok(_) => {
            ctx.count("delete", why);
            info!(job = %key(job), decision = "delete", "{why}: deleted");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(true),
        Err(e) => Err(Error::api(key(job), format!("deleting after {why}"), e)),
    }
}

async fn report_conflicts(job: &EphemeralJob, ctx: &Ctx, p: &Plan) {
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
async fn inject_all(
    job: &EphemeralJob,
    ctx: &Ctx,
    pods: &[Arc<Pod>],
    p: &mut Plan,
    now: &Time,
) -> Result<(), Error> {
    if p.inject.is_empty() {
        return Ok(());
    }
    if let Some(why) = ctx.policy.template_refusal(job) {
        p.status.waiting -= p.inject.len() as i32;
        p.inject.clear();
        fail(job, ctx, p, &InjectFailure::Policy(why), now).await;
        return Ok(());
    }
    let who = match trusted_requester(job, ctx).await? {
        Ok(who) => who,
        Err(failure) => {
            p.status.waiting -= p.inject.len() as i32;
            p.inject.clear();
            fail(job, ctx, p, &failure, now).await;
            return Ok(());
        }
    };
    let api: Api<Pod> = ctx.api(job);
    let by_name: HashMap<&str, &Arc<Pod>> = pods
        .iter()
        .filter_map(|x| Some((x.metadata.name.as_deref()?, x)))
        .collect();
    let names = std::mem::take(&mut p.inject);
    let calls = names.iter().cloned().map(|name| {
        let pod = by_name.get(name.as_str()).copied();
        let rv = pod.and_then(|x| x.metadata.resource_version.clone());
        let full = pod.and_then(|x| ctx.policy.pod_refusal(x, job));
        let (api, who) = (&api, &who);
        async move {
            let outcome = match full {
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
    });
    let mut outcomes = stream::iter(calls).buffer_unordered(INJECT_CONCURRENCY);
    let mut injected = vec![];
    let mut result = Ok(());
    while let Some((name, outcome)) = outcomes.next().await {
        match outcome {
            Ok(Injected::Done) => injected.push(name),
            Ok(Injected::Replan) => p.status.waiting -= 1,

            Err(InjectFailure::Transient { pod, error }) => {
                p.status.waiting -= 1;
                let doing = format!("adding ephemeral containers to pod {pod}");
                result = Err(Error::api(key(job), doing, error));
                break;
            }
            Err(failure) if failure.is_fatal() => {
                p.status.waiting -= 1;
                fail(job, ctx, p, &failure, now).await;
                break;
            }
            Err(failure) => {
                p.status.waiting -= 1;
                refused(job, ctx, p, &failure).await;
            }
        }
    }
    drop(outcomes);
    report_injected(job, ctx, &injected).await;
    p.inject = names;
    result
}

/// The user the job acts for (its `sexton.dev/requester` stamp), or why there is none.
fn requester(job: &EphemeralJob) -> Result<Requester, String> {
    Requester::of(job.metadata.annotations.as_ref()).map_err(|why| {
        format!(
            "the EphemeralJob does not say who created it ({why}): the controller acts only for a known requester; install the sexton webhook (it stamps the creator) and the ValidatingAdmissionPolicy sexton-ephemeraljob-requester, then create the job again"
        )
    })
}

/// The user the job acts for, if its stamp says who and the namespace keeps stamps from
/// being changed (`stamp_guard.rs`); else the failure that puts the job in phase Error.
/// An unanswered question about the stamp's protection is retried.
async fn trusted_requester(
    job: &EphemeralJob,
    ctx: &Ctx,
) -> Result<Result<Requester, InjectFailure>, Error> {
    let who = match requester(job) {
        Ok(who) => who,
        Err(why) => return Ok(Err(InjectFailure::NoRequester(why))),
    };
    match ctx.stamps.check(job).await {
        Ok(Stamp::Protected) => Ok(Ok(who)),
        Ok(Stamp::Unprotected(why)) => Ok(Err(InjectFailure::StampUnprotected(why))),
        Err(e) => Err(Error::api(
            key(job),
            "checking that its requester stamp is protected",
            e,
        )),
    }
}

/// Whether the requester may add ephemeral containers to pod `name` themselves (else the
/// pod is a refused target naming the missing right); an unanswered question is retried.
async fn requester_may_inject(
    job: &EphemeralJob,
    ctx: &Ctx,
    who: &Requester,
    name: &str,
) -> Result<(), InjectFailure> {
    let ns = job.namespace().unwrap_or_default();
    let q = Question::new(Question::INJECT, &ns, None);
    let right = q.right();
    match ctx.access.may(who, q, name).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(InjectFailure::Refused {
            pod: name.into(),
            message: format!(
                "the requester {:?} may not {right} on pod {ns}/{name}: the controller injects only what the EphemeralJob's creator could (annotation sexton.dev/requester)",
                who.user
            ),
        }),
        Err(error) => Err(InjectFailure::Transient {
            pod: name.into(),
            error,
        }),
    }
}

/// Each target's termination message goes into the status only if the requester may read
/// that container's output (`get pods/log` on the pod): the status is readable by whoever
/// may get the job, and the message is the container's output (or its log's tail).
async fn withhold_messages(job: &EphemeralJob, ctx: &Ctx, p: &mut Plan) {
    let ns = job.namespace().unwrap_or_default();
    let who = requester(job).ok();
    for t in p.status.targets.iter_mut().filter(|t| t.message.is_some()) {
        let q = Question::new(Question::READ_OUTPUT, &ns, None);
        let right = q.right();
        let why = match &who {
            None => "the job has no valid requester stamp".to_string(),
            Some(who) => match ctx.access.may(who, q, &t.pod).await {
                Ok(true) => continue,
                Ok(false) => format!(
                    "the requester {:?} may not {right} on pod {ns}/{}",
                    who.user, t.pod
                ),
                Err(e) => format!("cannot check whether the requester may {right} ({e})"),
            },
        };
        t.message = Some(format!("(withheld: {why})"));
    }
}

/// One Event for the pods injected by one reconciliation (not one per pod: a job over
/// 10 000 pods would write 10 000 Events).
async fn report_injected(job: &EphemeralJob, ctx: &Ctx, pods: &[String]) {
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

/// Why the API server did not take the containers, and whether retrying can help.
#[derive(Debug)]
pub enum InjectFailure {
    /// 404/405 from the subresource on a pod that exists: no ephemeral containers API.
    Unsupported(kube::Error),
    /// 401/403: the controller may not add ephemeral containers.
    Forbidden(kube::Error),
    /// Another 4xx, an admission denial or a pod over the cap: this pod refused these
    /// containers (`message` says why).
    Refused { pod: String, message: String },
    /// The admin's policy does not allow the template (`policy.rs`).
    Policy(String),
    /// The job does not say (truthfully) who created it: nothing is injected for it.
    NoRequester(String),
    /// The job's namespace lets a stamp be changed: it cannot be trusted.
    StampUnprotected(String),
    /// 5xx, transport errors: retried.
    Transient { pod: String, error: kube::Error },
}

impl InjectFailure {
    pub fn classify(pod: &str, error: kube::Error) -> Self {
        let code = match &error {
            kube::Error::Api(s) => s.code,
            _ => 0,
        };
        let pod = pod.to_string();
        match code {
            404 | 405 => InjectFailure::Unsupported(error),
            401 | 403 => InjectFailure::Forbidden(error),
            400..=499 => InjectFailure::Refused {
                message: format!(
                    "the API server refused the ephemeral containers for pod {pod}: {}",
                    api_message(&error)
                ),
                pod,
            },
            _ => InjectFailure::Transient { pod, error },
        }
    }

    /// A failure of the whole job (no API, no permission, a template the policy
    /// refuses): it goes to phase Error. `Refused` concerns one pod, `Transient` is retried.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            InjectFailure::Unsupported(_)
                | InjectFailure::Forbidden(_)
                | InjectFailure::Policy(_)
                | InjectFailure::NoRequester(_)
                | InjectFailure::StampUnprotected(_)
        )
    }

    /// The reason of the Event and condition, and the `actions_total` label.
    pub fn reason(&self) -> &'static str {
        match self {
            InjectFailure::Unsupported(_) => "EphemeralContainersUnsupported",
            InjectFailure::Forbidden(_) => "Forbidden",
            InjectFailure::Policy(_) => "TemplateRefused",
            InjectFailure::NoRequester(_) => "RequesterUnknown",
            InjectFailure::StampUnprotected(_) => "RequesterUnprotected",
            InjectFailure::Refused { .. } | InjectFailure::Transient { .. } => "InjectFailed",
        }
    }

    pub fn message(&self) -> String {
        match self {
            InjectFailure::Unsupported(e) => format!(
                "the API server has no pods/ephemeralcontainers subresource ({}): ephemeral containers are not available on this cluster",
                api_message(e)
            ),
            InjectFailure::Forbidden(e) => format!(
                "not allowed to add ephemeral containers ({}); the controller's ClusterRole needs pods/ephemeralcontainers patch",
                api_message(e)
            ),
            InjectFailure::Refused { message, .. }
            | InjectFailure::Policy(message)
            | InjectFailure::NoRequester(message)
            | InjectFailure::StampUnprotected(message) => message.clone(),
            InjectFailure::Transient { pod, error } => {
                format!("adding ephemeral containers to pod {pod} failed: {error}")
            }
        }
    }
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

/// One pod refused the containers (a 4xx such as 422: it lacks the target container, say;
/// an admission denial; the per-pod cap):
/// that target counts as failed, with the API's reason, and the job carries on.
async fn refused(job: &EphemeralJob, ctx: &Ctx, p: &mut Plan, failure: &InjectFailure) {
    let InjectFailure::Refused { pod, .. } = failure else {
        return;
    };
    let message = failure.message();
    p.status.failed += 1;
    let count = p
        .status
        .refused_count
        .unwrap_or(p.status.refused.len() as i32)
        + 1;
    p.status.refused_count = Some(count);
    if p.status.refused.len() < REFUSED_CAP {
        p.status.refused.push(Refused {
            pod: pod.clone(),
            message: message.clone(),
        });
    }
    ctx.count("refuse", "InjectRefused");
    warn!(job = %key(job), pod = %pod, "{message}");
    ctx.event(job, EventType::Warning, "InjectRefused", message)
        .await;
}

/// Puts the job in phase Error for `failure` (sticky: a person has to act).
async fn fail(job: &EphemeralJob, ctx: &Ctx, p: &mut Plan, failure: &InjectFailure, now: &Time) {
    let (reason, msg) = (failure.reason(), failure.message());
    p.status.phase = Some(Phase::Error);
    p.status.conditions.push(Condition {
        type_: "Error".into(),
        status: "True".into(),
        reason: reason.into(),
        message: msg.clone(),
        last_transition_time: now.clone(),
        observed_generation: job.metadata.generation,
    });
    p.status.completion_time = None;
    ctx.count("error", reason);
    warn!(job = %key(job), reason, "{msg}");
    ctx.event(job, EventType::Warning, reason, msg).await;
}

/// The Event of a job that just finished (not of one that failed for good).
async fn report_finish(job: &EphemeralJob, ctx: &Ctx, p: &Plan) {
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

#[cfg(test)]
mod tests {
    use super::InjectFailure;

    fn api_error(code: u16) -> kube::Error {
        let status = kube::core::Status::failure("m", "Reason").with_code(code);
        kube::Error::Api(Box::new(status))
    }

    /// A missing ephemeral-containers API cannot be produced on a 1.34 API server (the
    /// feature is GA and has no gate), so its handling is pinned here.
    #[test]
    fn injection_errors_are_classified() {
        for (code, reason, fatal) in [
            (404, "EphemeralContainersUnsupported", true),
            (405, "EphemeralContainersUnsupported", true),
            (403, "Forbidden", true),
            (422, "InjectFailed", false),
            (500, "InjectFailed", false),
            (503, "InjectFailed", false),
        ] {
            let f = InjectFailure::classify("web-0", api_error(code));
            assert_eq!((f.reason(), f.is_fatal()), (reason, fatal), "{code}");
            assert!(f.message().contains('m'));
        }
    }
}
