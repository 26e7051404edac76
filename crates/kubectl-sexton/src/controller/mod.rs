//! `kubectl-sexton controller`: the SidecarTerminator, the EphemeralJob controller and the
//! safety net in one process.
//!
//! Process shape: one multi-threaded tokio runtime; metrics and health served by axum; an
//! optional Lease-based leader election gating the controllers; one pod watch and cache
//! shared by both controllers. SIGTERM/SIGINT stop the controllers gracefully (in-flight
//! reconciliations finish) and release the Lease so a standby takes over at once.

mod decode;
pub mod ejob;
pub mod flags;
mod guarded_patch;
mod metrics;
mod parts;
mod pod_workers;
mod safety_net;
mod telemetry;
mod terminator;
mod watch;
mod watch_cause;
mod workqueue;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use tracing::{info, warn};

use crate::shared::exit::Exit;
use crate::shared::http::Health;
use crate::shared::logging;
use crate::shared::pod::KeptAnnotations;
use crate::shared::service::{self, Service, unusable};
use crate::shared::signals::Shutdown;
use flags::{Flags, Opts, Which};
use metrics::Metrics;
use parts::Parts;
use telemetry::FIELD_MANAGER;
use watch::PodFeed;

/// `kubectl-sexton controller`: validate the flags, then run as a service.
pub fn main(flags: Flags) -> Exit {
    let o = match flags.validate() {
        Ok(o) => o,
        Err(e) => {
            logging::stderr_line(&format!("kubectl-sexton controller: {e}"));
            return Exit::Unusable;
        }
    };
    service::run("controller", o.log_format, o.log_level, |svc| run(o, svc))
}

/// The steps of a controller process: endpoints, client, election, controllers.
async fn run(o: Opts, svc: Service) -> Exit {
    let metrics = Arc::new(Metrics::new());
    let m = metrics.clone();
    let endpoints = svc.serve_endpoints(o.metrics_addr, o.health_addr, move || m.encode());
    if let Err(e) = endpoints.await {
        return unusable(&e);
    }
    let client = match o.kube.client().await {
        Ok(c) => c,
        Err(e) => return unusable(&e),
    };
    let (health, shutdown) = (svc.health.clone(), svc.shutdown.clone());
    let Some(lease) = o.lease.clone() else {
        metrics.leader.set(1);
        return run_controllers(&o, client, metrics, health, shutdown).await;
    };
    let leader = metrics.leader.clone();
    let work = run_controllers(&o, client.clone(), metrics, health, shutdown);
    svc.while_leading(client, &lease, &o.identity, FIELD_MANAGER, leader, work)
        .await
}

/// Runs the chosen controllers on one shared pod watch until the shutdown signal.
async fn run_controllers(
    o: &Opts,
    client: Client,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: Shutdown,
) -> Exit {
    let reporter = Reporter {
        controller: FIELD_MANAGER.into(),
        instance: Some(o.identity.clone()),
    };
    let parts = Parts {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        metrics,
        health,
        shutdown,
        concurrency: o.concurrency,
        namespace: o.namespace.clone(),
        stuck_after: o.stuck_after,
    };
    let runs = |w| o.controllers.contains(&w);
    let net = runs(Which::SafetyNet);
    // the net recognises vendors' sidecars by their markers: the cache keeps them
    let kept = match net {
        true => KeptAnnotations::of(&o.catalogue),
        false => KeptAnnotations::default(),
    };
    let mut pods = PodFeed::new(kept);
    // the pod cache, plus the EphemeralJob cache, plus the safety net's
    let caches = 1 + usize::from(runs(Which::EphemeralJob)) + usize::from(net) * safety_net::CACHES;
    parts.health.pending.store(caches, Ordering::Relaxed);
    let terminator = runs(Which::SidecarTerminator).then(|| {
        terminator::sidecar_terminator(
            &parts,
            o.quick_exit_image.clone(),
            o.sidecar_allowed_images.clone(),
            &mut pods,
        )
    });
    let ejobs = runs(Which::EphemeralJob)
        .then(|| ejob::ephemeral_jobs(&parts, o.ejob_policy.clone(), &mut pods));
    let net = net.then(|| {
        let options = safety_net::Options {
            catalogue: o.catalogue.clone(),
            quick_exit_image: o.quick_exit_image.clone(),
            allowed_images: o.sidecar_allowed_images.clone(),
            terminator_runs: terminator.is_some(),
            webhook_configuration: o.webhook_configuration.clone(),
        };
        let (run, view) = safety_net::safety_net(&parts, options, &mut pods);
        // the stuck-pod Event's advice: a pod the net serves needs no namespace labelled
        if let Some(t) = &terminator {
            t.seen.net_view(view);
        }
        run
    });
    let seen = terminator.as_ref().map(|t| t.seen.clone());
    let pod_watch = pods.run(
        parts.scoped(),
        pod_watch_config(runs(Which::EphemeralJob)),
        parts.report("pods", "pods list and watch", ""),
        move |ev| {
            if let Some(seen) = &seen {
                seen.saw(ev);
            }
        },
    );
    let controllers =
        futures_util::future::join3(maybe(terminator.map(|t| t.run)), maybe(ejobs), maybe(net));
    tokio::select! {
        _ = controllers => {}
        _ = pod_watch => warn!("the pod watch ended"),
    }
    info!("controller stopped");
    Exit::Ok
}

/// The SidecarTerminator needs only Running pods; the EphemeralJob controller also needs
/// the pods its containers ran in after they end, so with it the cache holds every pod.
fn pod_watch_config(ephemeral_jobs: bool) -> watcher::Config {
    let all = watcher::Config::default();
    if ephemeral_jobs {
        all
    } else {
        all.fields("status.phase=Running")
    }
}

async fn maybe(f: Option<impl std::future::Future<Output = ()>>) {
    if let Some(f) = f {
        f.await
    }
}
