//! The SidecarTerminator reconciler: runs `decide` on a pod and carries the decision out
//! (one precondition-guarded patch, re-read and retried on conflict; events, metrics,
//! structured logs).

use std::sync::Arc;

use crate::shared::pod::Pod;
use kube::runtime::events::{EventType, Recorder};
use kube::{Api, Client, ResourceExt};
use tracing::{debug, info, instrument, warn};

use super::decide::{Decision, Images, Named, Reason, Refusal, Swap, decide, swap_patch};
use crate::controller::guarded_patch::{self, Failed, Patched, rv};
use crate::controller::metrics::Metrics;
use crate::controller::telemetry::{Telemetry, key};
use crate::shared::api_error::Error;

pub const CONTROLLER: &str = "sidecar-terminator";

pub struct Ctx {
    pub client: Client,
    pub default_image: Option<String>,
    /// `--sidecar-allowed-images`: None for any image, else prefixes.
    pub allowed_images: Option<Vec<String>>,
    pub telemetry: Arc<Telemetry<Pod>>,
}

impl Ctx {
    pub fn new(
        client: Client,
        recorder: Recorder,
        default_image: Option<String>,
        allowed_images: Option<Vec<String>>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Ctx {
            client,
            default_image,
            allowed_images,
            telemetry: Arc::new(Telemetry::new(CONTROLLER, metrics, recorder)),
        }
    }

    /// Reports a problem once per pod, container and reason.
    async fn report(&self, pod: &Pod, p: &Refusal) {
        let reason = p.reason.as_str();
        let once = format!("{}/{}/{reason}", pod.uid().unwrap_or_default(), p.container);
        let t = &self.telemetry;
        if !t.reported.first(once) {
            return;
        }
        warn!(pod = %key(pod), container = %p.container, reason, "{}", p.message);
        t.count("refuse", reason);
        t.event(
            pod,
            EventType::Warning,
            reason,
            "SwapImage",
            p.message.clone(),
        );
    }
}

/// Decides on one pod and carries the decision out.
#[instrument(skip_all, fields(pod = %key(&*pod)))]
pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<(), Error> {
    let ctx = &*ctx;
    let _timer = ctx.telemetry.reconcile_started(&pod);
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    guarded_patch::decide_and_patch(pod, Terminate { ctx, api }).await
}

/// The SidecarTerminator's steps: swap the marked sidecars once the mains are done.
struct Terminate<'a> {
    ctx: &'a Ctx,
    api: Api<Pod>,
}

impl guarded_patch::Steps for Terminate<'_> {
    type Step = Vec<Swap>;

    async fn decide(&self, pod: &Pod) -> Option<Vec<Swap>> {
        decide_and_report(pod, self.ctx).await
    }

    async fn patch(&self, pod: &Pod, swaps: &Vec<Swap>) -> Result<Patched, Error> {
        patch(&self.api, pod, swaps, self.ctx).await
    }

    async fn done(&self, pod: &Pod, swaps: &Vec<Swap>) {
        swapped(self.ctx, pod, swaps).await
    }
}

/// Decides, logs the decision and reports its problems; the swaps to make, if any.
async fn decide_and_report(pod: &Pod, ctx: &Ctx) -> Option<Vec<Swap>> {
    let (rv, k) = (rv(pod), key(pod));
    let images = Images {
        quick_exit: ctx.default_image.as_deref(),
        named: match &ctx.allowed_images {
            None => Named::Any,
            Some(prefixes) => Named::Prefixes(prefixes),
        },
    };
    let (swaps, problems) = match decide(pod, images) {
        Decision::Ignore(why) => {
            debug!(pod = %k, resource_version = %rv, decision = "ignore", "{why}");
            return None;
        }
        Decision::Wait(why) => {
            info!(pod = %k, resource_version = %rv, decision = "wait", "{why}");
            return None;
        }
        Decision::Done(why) => {
            info!(pod = %k, resource_version = %rv, decision = "done", "{why}");
            return None;
        }
        Decision::Act { swaps, problems } => (swaps, problems),
    };
    for p in &problems {
        ctx.report(pod, p).await;
    }
    if swaps.is_empty() {
        info!(pod = %k, resource_version = %rv, decision = "refuse", "not swapping: {} problem(s) reported", problems.len());
        return None;
    }
    Some(swaps)
}

/// One patch of the images, guarded by the pod's resourceVersion.
async fn patch(api: &Api<Pod>, pod: &Pod, swaps: &[Swap], ctx: &Ctx) -> Result<Patched, Error> {
    let patch = swap_patch(pod, swaps);
    match guarded_patch::send(api, pod, &patch, || ctx.telemetry.conflict()).await {
        Ok(p) => Ok(p),
        Err(Failed::Reread(e)) => Err(Error::api(key(pod), "re-reading the pod", e)),
        Err(Failed::Patch(e)) => {
            let names: Vec<_> = swaps.iter().map(|s| &s.container).collect();
            let doing = format!("patching the image of sidecar(s) {names:?}");
            let failed = Refusal {
                container: String::new(),
                reason: Reason::SwapFailed,
                message: format!("{doing} failed: {e}"),
            };
            ctx.report(pod, &failed).await;
            Err(Error::api(key(pod), doing, e))
        }
    }
}

async fn swapped(ctx: &Ctx, pod: &Pod, swaps: &[Swap]) {
    for s in swaps {
        let why = if s.waiting.is_some() {
            "SidecarWaiting"
        } else {
            "MainsCompleted"
        };
        ctx.telemetry.count("swap", why);
        info!(pod = %key(pod), resource_version = %rv(pod), decision = "swap", container = %s.container, from = %s.from, to = %s.to, waiting = s.waiting.as_deref().unwrap_or(""), "swapped sidecar image");
    }
    let (waiting, running): (Vec<&Swap>, Vec<&Swap>) =
        swaps.iter().partition(|s| s.waiting.is_some());
    let list = |l: &[&Swap]| {
        l.iter()
            .map(|s| match &s.waiting {
                Some(w) => format!("{:?} ({w}) {} -> {}", s.container, s.from, s.to),
                None => format!("{:?} {} -> {}", s.container, s.from, s.to),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !running.is_empty() {
        let note = format!(
            "main containers are done; swapped sidecar image(s) to end them: {}. The kubelet stops each one gracefully and starts its replacement, which exits 0",
            list(&running)
        );
        ctx.telemetry
            .event(pod, EventType::Normal, "SidecarSwapped", "SwapImage", note);
    }
    if !waiting.is_empty() {
        let note = format!(
            "main containers are done and these sidecars were waiting, not running; swapped their image(s) so the pod can end: {}. The kubelet starts each replacement, which exits 0, once its back-off allows",
            list(&waiting)
        );
        ctx.telemetry.event(
            pod,
            EventType::Normal,
            "SidecarSwappedWhileWaiting",
            "SwapImage",
            note,
        );
    }
}
