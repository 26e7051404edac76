//! The safety net's reconciler: reads whether the webhook serves the Pod from the caches,
//! runs `decide`, and carries the decision out: one precondition-guarded patch per step
//! (the sidecar's image and the net's record), re-read and retried on conflict; Events on
//! the Pod and its Job, metrics by cause, structured logs (the field `safety_net` holds the
//! decision).

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use kube::core::PartialObjectMeta;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use sexton_inject::Catalogue;
use tracing::{debug, info, instrument, warn};

use super::decide::{Decision, End, Rules, Served, candidate, decide, served};
use crate::controller::guarded_patch::{self, Failed, Patched, rv};
use crate::controller::telemetry::{Telemetry, key};
use crate::controller::terminator::decide::{Images, Named, Reason, Refusal, swap_patch};
use crate::shared::api_error::Error;
use crate::shared::pod::Pod;
use crate::shared::safety_net::{ANNOTATION_SAFETY_NET, Record};
use crate::shared::stuck::Net;
use crate::shared::webhook_scope::WebhookScope;

pub const CONTROLLER: &str = "safety-net";

/// The action of its Events.
const ACTION: &str = "SafetyNet";

/// The Event on the Pod and its Job when the net starts ending a Pod's sidecars.
pub const ENDED: &str = "SidecarsEndedBySafetyNet";

pub struct Ctx {
    pub client: Client,
    pub catalogue: Catalogue,
    pub quick_exit_image: Option<String>,
    /// `--sidecar-allowed-images`: None for any image, else prefixes.
    pub allowed_images: Option<Vec<String>>,
    pub terminator_runs: bool,
    pub telemetry: Arc<Telemetry<Pod>>,
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    pub configuration: Store<MutatingWebhookConfiguration>,
}

impl Ctx {
    /// Whether the webhook serves `pod`, from the caches.
    fn served(&self, pod: &Pod) -> Served {
        let config = self.configuration.state().into_iter().next();
        let scope = config.as_deref().map(WebhookScope::of);
        let ns = self
            .namespaces
            .get(&ObjectRef::new(&pod.namespace().unwrap_or_default()));
        served(scope.as_ref(), ns.as_deref().map(|n| &n.metadata), pod)
    }

    /// What the net does about `pod`, for the stuck-pod Event's advice.
    pub fn view(&self, pod: &Pod) -> Net {
        match decide(pod, &self.served(pod), &self.rules()) {
            Decision::Ignore(_) => Net::Off,
            Decision::Wait(_) | Decision::End(_) | Decision::Done(_) => Net::Ends,
            Decision::Refuse { problems, .. } => Net::Cannot(
                problems
                    .iter()
                    .map(|p| p.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        }
    }

    /// Whether the net may act on `pod` (`decide::candidate`); a Pod it leaves alone is
    /// logged as its decision (`ignore`) when `log` is set.
    pub fn concerns(&self, pod: &Pod, log: bool) -> bool {
        match candidate(pod, &self.rules()) {
            Ok(_) => true,
            Err(why) if log => {
                debug!(pod = %key(pod), resource_version = %rv(pod), safety_net = "ignore", "{why}");
                false
            }
            Err(_) => false,
        }
    }

    fn rules(&self) -> Rules<'_> {
        Rules {
            catalogue: &self.catalogue,
            images: Images {
                quick_exit: self.quick_exit_image.as_deref(),
                named: match &self.allowed_images {
                    None => Named::Any,
                    Some(prefixes) => Named::Prefixes(prefixes),
                },
            },
            terminator_runs: self.terminator_runs,
        }
    }

    /// Reports a problem once per Pod, container and reason, on the Pod and its Job.
    fn report(&self, pod: &Pod, p: &Refusal, record: &Record) {
        let reason = p.reason.as_str();
        let once = format!("{}/{}/{reason}", pod.uid().unwrap_or_default(), p.container);
        let t = &self.telemetry;
        if !t.reported.first(once) {
            return;
        }
        let note = match p.reason {
            Reason::QuickExitStalled | Reason::QuickExitFailed => p.message.clone(),
            Reason::SwapRefusedCommand => format!(
                "the safety net cannot end this Pod's sidecars, so none is ended: sidecar {:?} sets `command`, which does not exist in the quick-exit image (swapped, the container would fail and fail the Pod), and the net does not signal its process (the sidecar's own exit code, 143 or 137, would fail the Pod); the Pod runs until the sidecar exits or is deleted (its Job then makes another, injected if the webhook answers). (It would, because {})",
                p.container,
                record.cause.explain(&record.detail)
            ),
            _ => format!(
                "the safety net cannot end this Pod's sidecars, so none is ended: {}. (It would, because {})",
                p.message,
                record.cause.explain(&record.detail)
            ),
        };
        warn!(pod = %key(pod), container = %p.container, reason, "{note}");
        t.count("refuse", reason);
        t.event(pod, EventType::Warning, reason, ACTION, note.clone());
        if let Some(job) = job_of(pod) {
            t.event_about(job, EventType::Warning, reason, ACTION, note);
        }
    }
}

/// The Pod's Job, if a Job owns it.
fn job_of(pod: &Pod) -> Option<ObjectReference> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Job" && o.api_version.starts_with("batch/"))?;
    Some(ObjectReference {
        api_version: Some(owner.api_version.clone()),
        kind: Some(owner.kind.clone()),
        name: Some(owner.name.clone()),
        namespace: pod.namespace(),
        uid: Some(owner.uid.clone()),
        ..Default::default()
    })
}

/// Decides on one pod and carries the decision out.
#[instrument(skip_all, fields(pod = %key(&*pod)))]
pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<(), Error> {
    let ctx = &*ctx;
    let _timer = ctx.telemetry.reconcile_started(&pod);
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    guarded_patch::decide_and_patch(pod, EndSidecars { ctx, api }).await
}

/// The safety net's steps: end the last sidecar not ended, with the net's record.
struct EndSidecars<'a> {
    ctx: &'a Ctx,
    api: Api<Pod>,
}

impl guarded_patch::Steps for EndSidecars<'_> {
    type Step = End;

    async fn decide(&self, pod: &Pod) -> Option<End> {
        decide_and_report(pod, self.ctx)
    }

    async fn patch(&self, pod: &Pod, end: &End) -> Result<Patched, Error> {
        patch(&self.api, pod, end, self.ctx).await
    }

    async fn done(&self, pod: &Pod, end: &End) {
        ended(self.ctx, pod, end)
    }
}

/// Decides, logs the decision and reports its problems; the step to take, if any.
fn decide_and_report(pod: &Pod, ctx: &Ctx) -> Option<End> {
    let (rv, k) = (rv(pod), key(pod));
    match decide(pod, &ctx.served(pod), &ctx.rules()) {
        Decision::Ignore(why) => {
            debug!(pod = %k, resource_version = %rv, safety_net = "ignore", "{why}");
            None
        }
        Decision::Wait(why) => {
            info!(pod = %k, resource_version = %rv, safety_net = "wait", "{why}");
            None
        }
        Decision::Done(why) => {
            info!(pod = %k, resource_version = %rv, safety_net = "done", "{why}");
            None
        }
        Decision::Refuse { record, problems } => {
            for p in &problems {
                ctx.report(pod, p, &record);
            }
            info!(pod = %k, resource_version = %rv, safety_net = "refuse", "not ending any sidecar: {} problem(s) reported", problems.len());
            None
        }
        Decision::End(end) => {
            for p in &end.problems {
                ctx.report(pod, p, &end.record);
            }
            Some(end)
        }
    }
}

/// The swap and the net's record, guarded by the pod's resourceVersion.
async fn patch(api: &Api<Pod>, pod: &Pod, end: &End, ctx: &Ctx) -> Result<Patched, Error> {
    let mut patch = swap_patch(pod, std::slice::from_ref(&end.swap));
    patch["metadata"]["annotations"][ANNOTATION_SAFETY_NET] = serde_json::to_string(&end.record)
        .expect("a record serializes")
        .into();
    match guarded_patch::send(api, pod, &patch, || ctx.telemetry.conflict()).await {
        Ok(p) => Ok(p),
        Err(Failed::Reread(e)) => Err(Error::api(key(pod), "re-reading the pod", e)),
        Err(Failed::Patch(e)) => {
            let doing = format!("patching the image of sidecar {:?}", end.swap.container);
            let failed = Refusal {
                container: end.swap.container.clone(),
                reason: Reason::SwapFailed,
                message: format!("{doing} failed: {e}"),
            };
            ctx.report(pod, &failed, &end.record);
            Err(Error::api(key(pod), doing, e))
        }
    }
}

/// Counts the step by cause, logs it, and the first time publishes the Events.
fn ended(ctx: &Ctx, pod: &Pod, end: &End) {
    let (s, r) = (&end.swap, &end.record);
    let t = &ctx.telemetry;
    t.count("swap", r.cause.as_str());
    info!(pod = %key(pod), resource_version = %rv(pod), safety_net = "end", cause = r.cause.as_str(), container = %s.container, from = %s.from, to = %s.to, waiting = s.waiting.as_deref().unwrap_or(""), "swapped sidecar image");
    if !end.first
        || !t
            .reported
            .first(format!("{}/{ENDED}", pod.uid().unwrap_or_default()))
    {
        return;
    }
    let order = match r.sidecars.len() {
        1 => format!("sidecar {:?}", r.sidecars[0]),
        _ => format!(
            "sidecars {} in this order, each once the one before has ended",
            r.sidecars
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let note = format!(
        "main containers are done and {}; the safety net ends {order} by swapping its image to {} (the kubelet restarts it into an exit 0)",
        r.cause.explain(&r.detail),
        s.to
    );
    t.event(pod, EventType::Normal, ENDED, ACTION, note.clone());
    if let Some(job) = job_of(pod) {
        let note = format!("pod {}: {note}", pod.name_any());
        t.event_about(job, EventType::Normal, ENDED, ACTION, note);
    }
}
