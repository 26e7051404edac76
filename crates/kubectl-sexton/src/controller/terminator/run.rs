//! The SidecarTerminator's loop: the pod events it is given queue their pods in a FIFO
//! work queue (the end of a list: every Running pod of the cache, as `PodEvent` says why),
//! and `--concurrency` workers reconcile the newest cached version of each, in the order
//! the pods changed. A failed reconciliation is retried after the time its error
//! calls for; at the shutdown signal the queue is closed, so the workers finish the pod in
//! hand and take no other (the next leader lists every pod anyway).

use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::debug;

use super::reconcile::{Ctx, reconcile};
use crate::controller::pod_workers::{self, PodQueue as Queue};
use crate::controller::telemetry::key;
use crate::controller::watch::PodEvent;
use crate::shared::pod::Pod;

/// Runs until `stopped` and the pods in hand are done (or the pod cache's writer is gone).
pub async fn run(
    pods: impl Stream<Item = PodEvent> + Send + 'static,
    store: Store<Pod>,
    ctx: Arc<Ctx>,
    concurrency: u16,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let queue: Arc<Queue> = Arc::default();
    let feed = feed(pods, store.clone(), queue.clone());
    let close = {
        let queue = queue.clone();
        async move {
            stopped.await;
            queue.close();
        }
    };
    let work = async {
        // (the only waiter on the pod cache's readiness: kube-runtime's future for it wakes
        // only the last of several; the cache is filled once the first list is in)
        if store.wait_until_ready().await.is_err() {
            return;
        }
        let (queue, store, telemetry) = (queue.clone(), store.clone(), ctx.telemetry.clone());
        let reconcile = move |pod| reconcile(pod, ctx.clone());
        pod_workers::run(queue, store, telemetry, concurrency, reconcile).await
    };
    // the feed ends only with the pod watch; the workers once the queue is closed
    tokio::select! {
        _ = work => {}
        _ = futures_util::future::join(feed, close) => {}
    }
}

/// Queues each changed pod (once, however many of its events wait); at the end of a list,
/// every Running pod of the cache.
async fn feed(pods: impl Stream<Item = PodEvent>, store: Store<Pod>, queue: Arc<Queue>) {
    pods.for_each(|ev| {
        match ev {
            PodEvent::Changed(pod) => {
                if let Some(ahead) = queue.add(ObjectRef::from_obj(&*pod))
                    && ahead > 0
                {
                    debug!(pod = %key(&*pod), ahead, "queued behind other pods");
                }
            }
            PodEvent::Relisted => pod_workers::queue_running(&store, &queue, |_| true),
        }
        std::future::ready(())
    })
    .await
}
