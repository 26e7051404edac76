//! The workers of a pod work queue, the SidecarTerminator's and the safety net's: each takes
//! the next queued pod, reconciles the newest cached version of it, and on failure queues it
//! again after the delay its error calls for. They stop when the queue is closed (the
//! shutdown signal), each after the pod in hand.

use std::future::Future;
use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};
use tokio::task::JoinSet;

use crate::controller::telemetry::Telemetry;
use crate::controller::workqueue::WorkQueue;
use crate::shared::api_error::Error;
use crate::shared::pod::{Pod, is_running};

pub type PodQueue = WorkQueue<ObjectRef<Pod>>;

/// Queues the Running pods of the cache that `which` picks (at the end of a list, or when
/// something besides a pod's own change concerns it).
pub fn queue_running(store: &Store<Pod>, queue: &PodQueue, which: impl Fn(&Pod) -> bool) {
    for p in store.state() {
        if is_running(&p) && which(&p) {
            queue.add(ObjectRef::from_obj(&*p));
        }
    }
}

/// Runs `concurrency` workers (at least one) until the queue is closed and each is done.
pub async fn run<F, Fut>(
    queue: Arc<PodQueue>,
    store: Store<Pod>,
    telemetry: Arc<Telemetry<Pod>>,
    concurrency: u16,
    reconcile: F,
) where
    F: Fn(Arc<Pod>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), Error>> + Send + 'static,
{
    let mut workers = JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let work = worker(
            queue.clone(),
            store.clone(),
            telemetry.clone(),
            reconcile.clone(),
        );
        workers.spawn(work);
    }
    while workers.join_next().await.is_some() {}
}

/// Reconciles queued pods, one at a time, until the queue is closed.
async fn worker<F, Fut>(
    queue: Arc<PodQueue>,
    store: Store<Pod>,
    telemetry: Arc<Telemetry<Pod>>,
    reconcile: F,
) where
    F: Fn(Arc<Pod>) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    while let Some(pod_ref) = queue.next().await {
        match store.get(&pod_ref) {
            Some(pod) => {
                if let Err(e) = reconcile(pod.clone()).await {
                    let retry = telemetry.failed(&pod, &e);
                    queue.add_after(pod_ref.clone(), retry);
                }
            }
            // the pod left the cache (deleted, or no longer Running) since it was queued:
            // nothing to do, and no queue latency to record
            None => telemetry.clock.forget_ref(&pod_ref),
        }
        queue.done(&pod_ref);
    }
}
