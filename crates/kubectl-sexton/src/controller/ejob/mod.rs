//! The EphemeralJob controller: runs ephemeral containers, in batches, in the running pods a
//! label selector picks. Pure: the planning step (`plan.rs`), the status arithmetic of its
//! outcomes (`settle.rs`), the failures' classes (`failure.rs`), the admin's policy
//! (`policy.rs`). Acting: the reconciler's steps (`reconcile.rs`) over the job's TTL
//! (`ttl.rs`), the injection (`inject.rs`), the requester checks (`requester.rs`, with
//! `access.rs`, `stamp_guard.rs` and their answers kept briefly, `fresh.rs`) and what people
//! are told (`report.rs`), all given a `Ctx` (`ctx.rs`). The resource itself is the shared
//! floor's (`shared/ephemeraljob`). This is its wiring into the process: kube-runtime's
//! `Controller` over its own watch of jobs, woken by the changes of the shared pod feed that
//! concern them.

mod access;
mod ctx;
mod failure;
mod fresh;
mod inject;
mod plan;
pub mod policy;
mod reconcile;
mod report;
mod requester;
mod settle;
mod stamp_guard;
mod ttl;

use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tracing::warn;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::decode::{self, Lenient};
use super::parts::{GRACE, Parts, Run};
use super::watch::{self, PodEvent, PodFeed, changed_pods};
use crate::shared::ephemeraljob::{EphemeralJob, EphemeralJobSpec, EphemeralJobTemplate};
use crate::shared::pod::Pod;
use ctx::{CONTROLLER, Ctx};
use plan::selector_matches;
use reconcile::{error_policy, reconcile};

/// The EphemeralJob controller: its own watch of jobs, woken by the pods they select.
pub fn ephemeral_jobs(parts: &Parts, policy: policy::Policy, pods: &mut PodFeed) -> Run {
    let ctx = Arc::new(Ctx::new(
        parts.client.clone(),
        parts.recorder.clone(),
        parts.metrics.clone(),
        pods.store.clone(),
        pods.filled.clone(),
        policy,
    ));
    let report = parts.report(
        "ephemeraljobs",
        "ephemeraljobs.sexton.dev list and watch",
        "is the EphemeralJob CRD installed (deploy/crd-ephemeraljob.yaml)?",
    );
    let filled = report.filled.clone();
    let clock = ctx.telemetry.clock.clone();
    let (jobs, writer) = reflector::store();
    let raw = decode::raw_api::<EphemeralJob>(parts.client.clone(), parts.namespace.as_deref());
    let lenient = Lenient {
        watch: "ephemeraljobs",
        metrics: parts.metrics.clone(),
        placeholder,
    };
    // A listed job is reconciled once the list ends, not as it comes: the cache takes a list
    // in only at its end, and a job created or changed while the watch was down would be
    // reconciled from the cache's older version (or not at all), then never again
    // (`PodEvent` in watch.rs).
    let (listed, mut job_relists) = tokio::sync::mpsc::unbounded_channel();
    let trigger = watch::observed(
        decode::one_at_a_time(raw, watcher::Config::default(), lenient),
        writer,
        watch::slim,
        report,
        // (no queue-latency clock for a listed job: as for listed pods, `start_clock` in
        // terminator/mod.rs says why)
        move |ev| match ev {
            Event::Apply(j) => clock.arrived(j),
            Event::Delete(j) => clock.forget(j),
            Event::InitDone => {
                let _ = listed.send(());
            }
            Event::Init | Event::InitApply(_) => {}
        },
    )
    .filter(|ev| std::future::ready(!matches!(ev, Ok(Event::InitApply(_)))))
    .touched_objects();
    let pod_changes = changed_pods(pods.subscribe(changes));
    let relists = relists(pods.subscribe(relisted));
    let mapper = jobs_of_pod(jobs.clone());
    let run = Controller::for_stream(trigger, jobs)
        .watches_shared_stream(pod_changes, mapper)
        .reconcile_all_on(relists)
        .reconcile_all_on(futures_util::stream::poll_fn(move |cx| {
            job_relists.poll_recv(cx)
        }))
        .with_config(parts.config())
        .graceful_shutdown_on(parts.stopped())
        .run(reconcile, error_policy, ctx)
        .for_each(log_queue_error);
    Box::pin(watch::until_stopped(
        CONTROLLER,
        run,
        filled,
        parts.stopped(),
        GRACE,
    ))
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

/// A job with only its metadata (what a deletion of an undecodable job removes).
fn placeholder(metadata: ObjectMeta) -> EphemeralJob {
    let spec = EphemeralJobSpec {
        selector: Default::default(),
        select_all_pods: None,
        replicas: None,
        parallelism: None,
        template: EphemeralJobTemplate {
            ephemeral_containers: vec![],
        },
        paused: None,
        active_deadline_seconds: None,
        ttl_seconds_after_finished: None,
        ttl_seconds_after_created: None,
    };
    EphemeralJob {
        metadata,
        spec,
        status: None,
    }
}

/// A tick for each relist of a feed.
fn relists(
    feed: impl Stream<Item = PodEvent> + Send + 'static,
) -> impl Stream<Item = ()> + Send + 'static {
    feed.filter_map(|ev| async move { matches!(ev, PodEvent::Relisted).then_some(()) })
}

/// The pod events that may change a job's targets: every change, deletions included (a
/// list's pods come as its end: `reconcile_all_on` the relists).
fn changes(ev: &Event<Pod>) -> bool {
    matches!(ev, Event::Apply(_) | Event::Delete(_))
}

fn relisted(ev: &Event<Pod>) -> bool {
    matches!(ev, Event::InitDone)
}

async fn log_queue_error<T, E: std::fmt::Display, Q: std::fmt::Display>(
    res: Result<T, controller::Error<E, Q>>,
) {
    if let Err(controller::Error::QueueError(e)) = res {
        warn!("controller queue: {e}");
    }
}
