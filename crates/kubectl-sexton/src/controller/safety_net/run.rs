//! The safety net's loop: a FIFO work queue of pods, fed by the pod feed's Running pods that
//! are candidates (`decide::candidate`: on a large cluster, most pods are not, and cost the
//! net no queue entry) and by the changes that can make the webhook serve pods it did not (a
//! namespace's labels, the webhook's configuration: every candidate of the namespace, or
//! every candidate, queued again), and
//! `--concurrency` workers that reconcile the newest cached version of each. The workers
//! start once the three caches are filled; a failed reconciliation is retried after the time
//! its error calls for; at the shutdown signal the queue is closed, so the workers finish
//! the pod in hand and take no other.

use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;

use super::reconcile::{Ctx, reconcile};
use crate::controller::pod_workers::{self, PodQueue as Queue};
use crate::controller::watch::PodEvent;
use crate::shared::pod::Pod;

/// What queues pods besides their own events.
pub enum Requeue {
    /// These namespaces are new or their labels changed: their pods (one scan of the cache
    /// for all of them).
    Namespaces(std::collections::HashSet<String>),
    /// The webhook's configuration changed: every pod.
    Everything,
}

/// Runs until `stopped` and the pods in hand are done (or the feeds end).
pub async fn run(
    pods: impl Stream<Item = PodEvent> + Send + 'static,
    requeues: impl Stream<Item = Requeue> + Send + 'static,
    store: Store<Pod>,
    ctx: Arc<Ctx>,
    concurrency: u16,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let queue: Arc<Queue> = Arc::default();
    // set once the pod cache is filled (its first relist): the pod store's own readiness
    // future wakes only one waiter, the SidecarTerminator's
    let (listed, mut filled) = watch::channel(false);
    let feed = feed(pods, store.clone(), queue.clone(), listed, ctx.clone());
    let requeue = requeue(requeues, store.clone(), queue.clone(), ctx.clone());
    let close = {
        let queue = queue.clone();
        async move {
            stopped.await;
            queue.close();
        }
    };
    let work = async {
        let caches = async {
            filled.wait_for(|f| *f).await.ok()?;
            ctx.namespaces.wait_until_ready().await.ok()?;
            ctx.configuration.wait_until_ready().await.ok()
        };
        if caches.await.is_none() {
            return;
        }
        let (queue, store, telemetry) = (queue.clone(), store.clone(), ctx.telemetry.clone());
        let reconcile = move |pod| reconcile(pod, ctx.clone());
        pod_workers::run(queue, store, telemetry, concurrency, reconcile).await
    };
    tokio::select! {
        _ = work => {}
        _ = futures_util::future::join3(feed, requeue, close) => {}
    }
}

/// Queues each changed candidate (a pod that is not one is logged as ignored); after a
/// relist, every candidate of the cache.
async fn feed(
    pods: impl Stream<Item = PodEvent>,
    store: Store<Pod>,
    queue: Arc<Queue>,
    listed: watch::Sender<bool>,
    ctx: Arc<Ctx>,
) {
    pods.for_each(|ev| {
        match ev {
            PodEvent::Changed(p) => {
                if ctx.concerns(&p, true) {
                    ctx.telemetry.clock.arrived(&p);
                    queue.add(ObjectRef::from_obj(&*p));
                }
            }
            PodEvent::Relisted => {
                queue_pods(&store, &queue, &ctx, |_| true);
                listed.send_replace(true);
            }
        }
        std::future::ready(())
    })
    .await
}

/// Queues the candidates a change of the webhook's scope can concern.
async fn requeue(
    requeues: impl Stream<Item = Requeue>,
    store: Store<Pod>,
    queue: Arc<Queue>,
    ctx: Arc<Ctx>,
) {
    requeues
        .for_each(|r| {
            match r {
                Requeue::Namespaces(ns) => queue_pods(&store, &queue, &ctx, |p| {
                    p.metadata
                        .namespace
                        .as_ref()
                        .is_some_and(|n| ns.contains(n))
                }),
                Requeue::Everything => queue_pods(&store, &queue, &ctx, |_| true),
            }
            std::future::ready(())
        })
        .await
}

/// Queues the Running candidates of the cache that `which` picks.
fn queue_pods(store: &Store<Pod>, queue: &Queue, ctx: &Ctx, which: impl Fn(&Pod) -> bool) {
    pod_workers::queue_running(store, queue, |p| which(p) && ctx.concerns(p, false));
}
