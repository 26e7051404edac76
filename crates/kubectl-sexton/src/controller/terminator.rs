//! The SidecarTerminator reconciler: runs `decide` on a pod and carries the decision out
//! (one precondition-guarded patch, events, metrics, structured logs).

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{EventType, Recorder};
use kube::{Api, Client, ResourceExt};
use tracing::{debug, info, warn};

use super::decide::{Decision, Refusal, Swap, decide, swap_patch};
use super::http::{Metrics, labels};
use super::runtime::{Telemetry, key};

pub const FIELD_MANAGER: &str = "sexton-controller";
pub const CONTROLLER: &str = "sidecar-terminator";
const MAX_ATTEMPTS: usize = 5;

#[derive(Debug)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Error {}

pub struct Ctx {
    pub client: Client,
    pub default_image: Option<String>,
    pub telemetry: Telemetry<Pod>,
    /// Test hook, for the conflict test only: before its first patch attempt, each
    /// reconciliation reads one line from this FIFO, so a test can change the pod in between
    /// and make the API server answer a real 409 Conflict. Unset in production.
    hold_patch: Option<PathBuf>,
}

impl Ctx {
    pub fn new(
        client: Client,
        recorder: Recorder,
        default_image: Option<String>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Ctx {
            client,
            default_image,
            telemetry: Telemetry::new(CONTROLLER, metrics, recorder),
            hold_patch: std::env::var_os("SEXTON_TEST_HOLD_BEFORE_PATCH").map(PathBuf::from),
        }
    }

    /// Report a problem once per pod, container and reason.
    async fn report(&self, pod: &Pod, p: &Refusal) {
        let k = format!(
            "{}/{}/{}",
            pod.uid().unwrap_or_default(),
            p.container,
            p.reason
        );
        let t = &self.telemetry;
        if !t.reported.first(k) {
            return;
        }
        warn!(pod = %key(pod), container = %p.container, reason = p.reason, "{}", p.message);
        t.count("refuse", p.reason);
        t.event(
            pod,
            EventType::Warning,
            p.reason,
            "SwapImage",
            p.message.clone(),
        )
        .await;
    }
}

pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.telemetry
        .reconciling(&pod, reconcile_pod(&pod, &ctx))
        .await
}

async fn reconcile_pod(pod: &Pod, ctx: &Ctx) -> Result<Action, Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let mut current = pod.clone();
    for attempt in 1..=MAX_ATTEMPTS {
        let rv = current.resource_version().unwrap_or_default();
        let decision = decide(&current, ctx.default_image.as_deref());
        let (swaps, problems) = match decision {
            Decision::Ignore(why) => {
                debug!(pod = %key(&current), resource_version = %rv, decision = "ignore", "{why}");
                return Ok(Action::await_change());
            }
            Decision::Wait(why) => {
                info!(pod = %key(&current), resource_version = %rv, decision = "wait", "{why}");
                return Ok(Action::await_change());
            }
            Decision::Done(why) => {
                info!(pod = %key(&current), resource_version = %rv, decision = "done", "{why}");
                return Ok(Action::await_change());
            }
            Decision::Act { swaps, problems } => (swaps, problems),
        };
        for p in &problems {
            ctx.report(&current, p).await;
        }
        if swaps.is_empty() {
            info!(pod = %key(&current), resource_version = %rv, decision = "refuse", "not swapping: {} problem(s) reported", problems.len());
            return Ok(Action::await_change());
        }
        if attempt == 1 {
            hold(ctx).await;
        }
        let patch = swap_patch(&current, &swaps);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api
            .patch(&current.name_any(), &params, &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                swapped(ctx, &current, &swaps, &rv).await;
                return Ok(Action::await_change());
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                ctx.telemetry
                    .metrics
                    .conflicts
                    .get_or_create(&labels(&[("controller", CONTROLLER)]))
                    .inc();
                info!(pod = %key(&current), resource_version = %rv, attempt, "conflict: the pod changed since it was read; re-reading");
                current = match api.get(&current.name_any()).await {
                    Ok(p) => p,
                    Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
                    Err(e) => return Err(Error(format!("re-reading pod {}: {e}", key(&current)))),
                };
            }
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
            Err(e) => {
                let msg = format!(
                    "patching the image of sidecar(s) {:?} failed: {e}",
                    swaps.iter().map(|s| &s.container).collect::<Vec<_>>()
                );
                ctx.report(
                    &current,
                    &Refusal {
                        container: String::new(),
                        reason: "SwapFailed",
                        message: msg.clone(),
                    },
                )
                .await;
                return Err(Error(format!("{}: {msg}", key(&current))));
            }
        }
    }
    Err(Error(format!(
        "{}: still conflicting after {MAX_ATTEMPTS} attempts",
        key(&current)
    )))
}

async fn swapped(ctx: &Ctx, pod: &Pod, swaps: &[Swap], rv: &str) {
    for s in swaps {
        ctx.telemetry.count("swap", "MainsCompleted");
        info!(pod = %key(pod), resource_version = %rv, decision = "swap", container = %s.container, from = %s.from, to = %s.to, "swapped sidecar image");
    }
    let list: Vec<String> = swaps
        .iter()
        .map(|s| format!("{:?} {} -> {}", s.container, s.from, s.to))
        .collect();
    ctx.telemetry.event(
        pod,
        EventType::Normal,
        "SidecarSwapped",
        "SwapImage",
        format!(
            "main containers are done; swapped sidecar image(s) to end them: {}. The kubelet stops each one gracefully and starts its replacement, which exits 0",
            list.join(", ")
        ),
    )
    .await;
}

async fn hold(ctx: &Ctx) {
    let Some(fifo) = ctx.hold_patch.clone() else {
        return;
    };
    let _ = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        if let Ok(f) = std::fs::File::open(&fifo) {
            let mut line = String::new();
            let _ = std::io::BufReader::new(f).read_line(&mut line);
        }
    })
    .await;
}

pub fn error_policy(pod: Arc<Pod>, err: &Error, ctx: Arc<Ctx>) -> Action {
    ctx.telemetry.failed(&pod, err)
}
