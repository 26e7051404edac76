//! The SidecarTerminator: once every main container of a Job-style pod is done, it swaps
//! the image of each marked sidecar (OpenKruise's markers) for a quick-exit image, in
//! place, so the kubelet restarts it into an exit 0 and the pod completes. This is its
//! wiring into the process: the Running pods of the shared pod feed into its loop
//! (`run.rs`), and the stuck-pod detection over the same cache (`teardown.rs`).

pub(crate) mod decide;
mod reconcile;
mod run;
mod teardown;

use std::sync::Arc;

use kube::runtime::watcher::Event;
use tracing::warn;

use super::parts::{GRACE, Parts, Run};
use super::telemetry::Clock;
use super::watch::{self, PodFeed, running_or_relisted};
use crate::shared::pod::Pod;
use crate::shared::pod::is_running;
use reconcile::{CONTROLLER, Ctx};
use teardown::Teardowns;

/// The SidecarTerminator, and what the pod watch shows every event to.
pub struct Terminator {
    pub run: Run,
    pub seen: Arc<Seen>,
}

/// What the SidecarTerminator learns from every pod event, before the pod is queued: when
/// it arrived (queue latency), and when its mains finished and it left Running (teardowns).
pub struct Seen {
    clock: Arc<Clock<Pod>>,
    teardowns: Arc<Teardowns>,
}

impl Seen {
    /// The safety net's view of a pod, for the stuck-pod advice.
    pub fn net_view(&self, view: crate::controller::safety_net::View) {
        self.teardowns.net_view(view);
    }

    pub fn saw(&self, ev: &Event<Pod>) {
        start_clock(&self.clock, ev);
        self.teardowns.saw(ev);
    }
}

/// The SidecarTerminator, reconciling the Running pods of the shared pod cache, with the
/// stuck-pod detection over the same cache.
pub fn sidecar_terminator(
    parts: &Parts,
    quick_exit_image: Option<String>,
    allowed_images: Option<Vec<String>>,
    pods: &mut PodFeed,
) -> Terminator {
    if quick_exit_image.is_none() {
        warn!(
            "no --quick-exit-image: only sidecars that name their own image in KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE can be ended"
        );
    }
    let ctx = Arc::new(Ctx::new(
        parts.client.clone(),
        parts.recorder.clone(),
        quick_exit_image,
        allowed_images,
        parts.metrics.clone(),
    ));
    let clock = ctx.telemetry.clock.clone();
    let teardowns = Arc::new(Teardowns::new(parts.stuck_after, ctx.telemetry.clone()));
    let scans = teardowns.clone().run(pods.store.clone());
    let run = run::run(
        pods.subscribe(running_or_relisted),
        pods.store.clone(),
        ctx,
        parts.concurrency,
        parts.stopped(),
    );
    let filled = pods.filled.clone();
    let run = watch::until_stopped(CONTROLLER, run, filled, parts.stopped(), GRACE);
    // the scans end with the controller
    let run = async move {
        tokio::select! {
            _ = run => {}
            _ = scans => {}
        }
    };
    Terminator {
        run: Box::pin(run),
        seen: Arc::new(Seen { clock, teardowns }),
    }
}

/// Starts the SidecarTerminator's queue-latency clock for a Running pod's change. Not for a
/// listed pod: it is queued only at the list's end, and a list cut short by an error may
/// never get there, nor list the pod again (deleted, or no longer Running, meanwhile), and
/// its clock entry would stay for the process's life.
fn start_clock(clock: &Clock<Pod>, ev: &Event<Pod>) {
    match ev {
        Event::Delete(p) => clock.forget(p),
        Event::Apply(p) if is_running(p) => clock.arrived(p),
        _ => {}
    }
}
