//! The safety net: sexton's webhook runs with `failurePolicy: Ignore`, so a Pod created
//! while no replica answers (or that it refuses, or created before its namespace was
//! labelled) is admitted unchanged, and a Job whose Pod has a sidecar never completes. The
//! net finds the Job-style Pods the webhook serves whose declared or recognised sidecars
//! nothing of sexton's ends, and once every main is done ends them by the
//! SidecarTerminator's swap, in reverse order (`decide.rs`, `reconcile.rs`).
//!
//! Which Pods the webhook serves is read from its live MutatingWebhookConfiguration
//! (`--webhook-configuration`, watched by name: RBAC `get/list/watch` on that one name) and
//! the namespaces' labels (a metadata-only watch of namespaces: their names, labels and when
//! the labels were set; in one namespace with `--namespace`), so that the net follows the
//! chart's values, an admin's edit of the configuration and `kubectl label namespace`
//! without a flag of its own. This is its wiring: the two watches beside the shared pod
//! feed (which namespaces' labels changed: `labels.rs`), and its loop (`run.rs`).

mod decide;
mod labels;
mod reconcile;
mod run;

use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event, watcher};
use sexton_inject::Catalogue;
use tokio::sync::mpsc;

use super::parts::{GRACE, Parts, Run};
use super::telemetry::Telemetry;
use super::watch::{self, PodFeed, WatchReport, running_or_relisted};
use crate::shared::pod::Pod;
use crate::shared::webhook_scope::keep_label_owners;
use labels::Labels;
use reconcile::{CONTROLLER, Ctx};
use run::Requeue;

/// The caches the safety net adds to the process's: namespaces and the configuration.
pub const CACHES: usize = 2;

/// What the safety net is configured with.
pub struct Options {
    pub catalogue: Catalogue,
    pub quick_exit_image: Option<String>,
    pub allowed_images: Option<Vec<String>>,
    /// The SidecarTerminator runs in this process too.
    pub terminator_runs: bool,
    /// The MutatingWebhookConfiguration of sexton's webhook.
    pub webhook_configuration: String,
}

/// The safety net, ready to run on the shared pod feed.
/// What the net does about a pod: the stuck-pod detection's advice depends on it.
pub type View = Arc<dyn Fn(&Pod) -> crate::shared::stuck::Net + Send + Sync>;

/// The net, and its view of a pod.
pub fn safety_net(parts: &Parts, o: Options, pods: &mut PodFeed) -> (Run, View) {
    let (requeue, mut requeue_rx) = mpsc::unbounded_channel();
    let (namespaces, ns_watch) = namespaces(parts, requeue.clone());
    let (configuration, config_watch) = configuration(parts, &o.webhook_configuration, requeue);
    let telemetry = Arc::new(Telemetry::new(
        CONTROLLER,
        parts.metrics.clone(),
        parts.recorder.clone(),
    ));
    let ctx = Arc::new(Ctx {
        client: parts.client.clone(),
        catalogue: o.catalogue,
        quick_exit_image: o.quick_exit_image,
        allowed_images: o.allowed_images,
        terminator_runs: o.terminator_runs,
        telemetry,
        namespaces,
        configuration,
    });
    let view: View = {
        let ctx = ctx.clone();
        Arc::new(move |pod: &Pod| ctx.view(pod))
    };
    let feed = pods.subscribe(running_or_relisted);
    let requeues = futures_util::stream::poll_fn(move |cx| requeue_rx.poll_recv(cx));
    let run = run::run(
        feed,
        requeues,
        pods.store.clone(),
        ctx,
        parts.concurrency,
        parts.stopped(),
    );
    let filled = pods.filled.clone();
    let run = watch::until_stopped(CONTROLLER, run, filled, parts.stopped(), GRACE);
    let run = Box::pin(async move {
        tokio::select! {
            _ = run => {}
            _ = futures_util::future::join(ns_watch, config_watch) => {}
        }
    });
    (run, view)
}

type Watching = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The namespaces' metadata (one namespace with `--namespace`), each one's pods queued again
/// when its labels change.
fn namespaces(
    parts: &Parts,
    requeue: mpsc::UnboundedSender<Requeue>,
) -> (reflector::Store<PartialObjectMeta<Namespace>>, Watching) {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(parts.client.clone());
    let config = match &parts.namespace {
        Some(ns) => watcher::Config::default().fields(&format!("metadata.name={ns}")),
        None => watcher::Config::default(),
    };
    let report = parts.report("namespaces", "namespaces get, list and watch", "");
    let (store, writer) = reflector::store();
    let mut labels = Labels::default();
    let watch = watch::observed(
        watcher(api, config),
        writer,
        |n: &mut PartialObjectMeta<Namespace>| {
            n.metadata.annotations = None;
            keep_label_owners(&mut n.metadata);
        },
        report,
        move |ev| {
            let changed = labels.changed(ev);
            if !changed.is_empty() {
                let _ = requeue.send(Requeue::Namespaces(changed.into_iter().collect()));
            }
        },
    );
    (store, Box::pin(watch.for_each(|_| std::future::ready(()))))
}

/// The webhook's configuration, watched by name; every pod queued again when it changes.
fn configuration(
    parts: &Parts,
    name: &str,
    requeue: mpsc::UnboundedSender<Requeue>,
) -> (reflector::Store<MutatingWebhookConfiguration>, Watching) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(parts.client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let report: WatchReport = parts.report(
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfigurations get, list and watch of its --webhook-configuration",
        "",
    );
    let (store, writer) = reflector::store();
    let mut listed = false;
    // (a list after the first may show a change or a deletion made while the watch was
    // down, and the cache takes it in only at the list's end: every pod is queued then)
    let watch = watch::observed(
        watcher(api, config),
        writer,
        watch::slim,
        report,
        move |ev| match ev {
            Event::InitDone if !listed => listed = true,
            Event::Apply(_) | Event::Delete(_) | Event::InitDone if listed => {
                let _ = requeue.send(Requeue::Everything);
            }
            _ => {}
        },
    );
    (store, Box::pin(watch.for_each(|_| std::future::ready(()))))
}
