//! `kubectl-sexton controller`: the SidecarTerminator and the EphemeralJob controller in
//! one process.
//!
//! Process shape: one multi-threaded tokio runtime; metrics and health served by axum; an
//! optional Lease-based leader election gating the controllers; one pod watch and cache
//! shared by both controllers. SIGTERM/SIGINT stop the controllers gracefully (in-flight
//! reconciliations finish) and release the Lease so a standby takes over at once.

mod ejob;
pub mod flags;
mod metrics;
mod telemetry;
mod terminator;
mod watch;
mod workqueue;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::shared::pod::Pod;
use futures_util::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tracing::{info, warn};

use crate::shared::exit::Exit;
use crate::shared::http::Health;
use crate::shared::logging;
use crate::shared::service::{self, Service, unusable};
use crate::shared::signals::Shutdown;
use flags::{Flags, Opts, Which};
use metrics::Metrics;
use telemetry::FIELD_MANAGER;
use watch::{PodEvent, PodFeed, WatchReport};

/// How long in-flight reconciliations may run after SIGTERM (well inside the Deployment's
/// 30 s termination grace period, so the Lease is still released).
const GRACE: Duration = Duration::from_secs(10);

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

/// What every controller of the process is built from.
struct Parts {
    client: Client,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: Shutdown,
    concurrency: u16,
    namespace: Option<String>,
    stuck_after: Duration,
}

impl Parts {
    /// The API of `K` in the watched namespace, or in all namespaces.
    fn scoped<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    fn report(&self, watch: &'static str, needs: &str) -> WatchReport {
        let scope = match self.namespace {
            Some(_) => "in its namespace",
            None => "cluster-wide",
        };
        WatchReport {
            watch,
            rbac: format!("the controller needs {needs} {scope}"),
            health: self.health.clone(),
            metrics: self.metrics.clone(),
            filled: Arc::default(),
        }
    }

    fn config(&self) -> controller::Config {
        controller::Config::default().concurrency(self.concurrency)
    }
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
    let mut pods = PodFeed::new();
    // the pod cache, plus the EphemeralJob cache
    let caches = 1 + usize::from(runs(Which::EphemeralJob));
    parts.health.pending.store(caches, Ordering::Relaxed);
    let terminator = runs(Which::SidecarTerminator)
        .then(|| sidecar_terminator(&parts, o.quick_exit_image.clone(), &mut pods));
    let ejobs = runs(Which::EphemeralJob).then(|| ephemeral_jobs(&parts, &mut pods));
    let seen = terminator
        .as_ref()
        .map(|t| (t.clock.clone(), t.teardowns.clone()));
    let pod_watch = pods.run(
        parts.scoped(),
        pod_watch_config(runs(Which::EphemeralJob)),
        parts.report("pods", "pods list and watch"),
        move |ev| {
            if let Some((clock, teardowns)) = &seen {
                start_clock(clock, ev);
                teardowns.saw(ev);
            }
        },
    );
    let controllers = futures_util::future::join(maybe(terminator.map(|t| t.run)), maybe(ejobs));
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

fn running(ev: &Event<Pod>) -> bool {
    match ev {
        Event::Apply(p) | Event::InitApply(p) => terminator::is_running(p),
        _ => false,
    }
}

/// Starts the SidecarTerminator's queue-latency clock for the pod events it is given.
fn start_clock(clock: &telemetry::Clock<Pod>, ev: &Event<Pod>) {
    match ev {
        Event::Delete(p) => clock.forget(p),
        _ if running(ev) => {
            if let Event::Apply(p) | Event::InitApply(p) = ev {
                clock.arrived(p)
            }
        }
        _ => {}
    }
}

type Run = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The SidecarTerminator and what the pod watch shows every event to.
struct Terminator {
    run: Run,
    clock: Arc<telemetry::Clock<Pod>>,
    teardowns: Arc<terminator::Teardowns>,
}

/// The SidecarTerminator, reconciling the Running pods of the shared pod cache, with the
/// stuck-pod detection over the same cache.
fn sidecar_terminator(
    parts: &Parts,
    quick_exit_image: Option<String>,
    pods: &mut PodFeed,
) -> Terminator {
    if quick_exit_image.is_none() {
        warn!(
            "no --quick-exit-image: only sidecars that name their own image in KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE can be ended"
        );
    }
    let ctx = Arc::new(terminator::Ctx::new(
        parts.client.clone(),
        parts.recorder.clone(),
        quick_exit_image,
        parts.metrics.clone(),
    ));
    let clock = ctx.telemetry.clock.clone();
    let teardowns = Arc::new(terminator::Teardowns::new(
        parts.stuck_after,
        ctx.telemetry.clone(),
    ));
    let scans = teardowns.clone().run(pods.store.clone());
    let changed = changed_pods(pods.subscribe(running));
    let run = terminator::run(
        changed,
        pods.store.clone(),
        ctx,
        parts.concurrency,
        stopped(&parts.shutdown),
    );
    let filled = pods.filled.clone();
    let name = terminator::CONTROLLER;
    let run = watch::until_stopped(name, run, filled, stopped(&parts.shutdown), GRACE);
    // the scans end with the controller
    let run = async move {
        tokio::select! {
            _ = run => {}
            _ = scans => {}
        }
    };
    Terminator {
        run: Box::pin(run),
        clock,
        teardowns,
    }
}

/// The EphemeralJob controller: its own watch of jobs, woken by the pods they select.
fn ephemeral_jobs(parts: &Parts, pods: &mut PodFeed) -> Run {
    let ctx = Arc::new(ejob::Ctx::new(
        parts.client.clone(),
        parts.recorder.clone(),
        parts.metrics.clone(),
        pods.store.clone(),
        pods.filled.clone(),
    ));
    let report = parts.report(
        "ephemeraljobs",
        "ephemeraljobs.sexton.dev list and watch; is the CRD installed (deploy/crd-ephemeraljob.yaml)?",
    );
    let filled = report.filled.clone();
    let clock = ctx.telemetry.clock.clone();
    let (jobs, writer) = reflector::store();
    let trigger = watch::observed(
        parts.scoped(),
        watcher::Config::default(),
        writer,
        watch::slim,
        report,
        move |ev| match ev {
            Event::Apply(j) | Event::InitApply(j) => clock.arrived(j),
            Event::Delete(j) => clock.forget(j),
            _ => {}
        },
    )
    .touched_objects();
    let pod_changes = changed_pods(pods.subscribe(changes));
    let relists = relists(pods.subscribe(relisted));
    let mapper = ejob::jobs_of_pod(jobs.clone());
    let run = Controller::for_stream(trigger, jobs)
        .watches_shared_stream(pod_changes, mapper)
        .reconcile_all_on(relists)
        .with_config(parts.config())
        .graceful_shutdown_on(stopped(&parts.shutdown))
        .run(ejob::reconcile, ejob::error_policy, ctx)
        .for_each(log_queue_error);
    Box::pin(watch::until_stopped(
        ejob::CONTROLLER,
        run,
        filled,
        stopped(&parts.shutdown),
        GRACE,
    ))
}

/// The pods of a feed (relists dropped).
fn changed_pods(
    feed: impl Stream<Item = PodEvent> + Send + 'static,
) -> impl Stream<Item = Arc<Pod>> + Send + 'static {
    feed.filter_map(|ev| async move {
        match ev {
            PodEvent::Changed(p) => Some(p),
            PodEvent::Relisted => None,
        }
    })
}

/// A tick for each relist of a feed.
fn relists(
    feed: impl Stream<Item = PodEvent> + Send + 'static,
) -> impl Stream<Item = ()> + Send + 'static {
    feed.filter_map(|ev| async move { matches!(ev, PodEvent::Relisted).then_some(()) })
}

fn changes(ev: &Event<Pod>) -> bool {
    matches!(ev, Event::Apply(_) | Event::InitApply(_) | Event::Delete(_))
}

fn relisted(ev: &Event<Pod>) -> bool {
    matches!(ev, Event::InitDone)
}

fn stopped(shutdown: &Shutdown) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
    let shutdown = shutdown.clone();
    async move { shutdown.stopped().await }
}

async fn maybe(f: Option<impl std::future::Future<Output = ()>>) {
    if let Some(f) = f {
        f.await
    }
}

async fn log_queue_error<T, E: std::fmt::Display, Q: std::fmt::Display>(
    res: Result<T, controller::Error<E, Q>>,
) {
    if let Err(controller::Error::QueueError(e)) = res {
        warn!("controller queue: {e}");
    }
}
