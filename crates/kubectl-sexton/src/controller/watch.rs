//! The watches that feed the controllers, instrumented the same way: managedFields dropped
//! before caching, queue-latency clocks started, readiness reported once the cache is
//! filled, failures logged with the RBAC they need. One pod watch fills one cache that
//! both controllers read ([`PodFeed`]), and hands each controller the pod events it needs.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::shared::pod::Pod;
use futures_util::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tracing::{debug, error, info};

use crate::controller::metrics::{Metrics, WatchLabel};
use crate::shared::http::Health;

/// What a watch is of, and where it reports.
#[derive(Clone)]
pub struct WatchReport {
    /// The resource watched (`pods`, `ephemeraljobs`), in logs and metric labels.
    pub watch: &'static str,
    /// What RBAC the watch needs, named when it fails.
    pub rbac: String,
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
    /// Set once the cache is filled.
    pub filled: Arc<AtomicBool>,
}

impl WatchReport {
    fn saw<K>(&self, ev: &watcher::Result<Event<K>>) {
        match ev {
            Ok(Event::Init) => debug!(watch = self.watch, "listing"),
            // (Not Store::wait_until_ready: its single-waker future is also awaited by the
            // controller, and only the last waiter is woken.)
            Ok(Event::InitDone) if !self.filled.swap(true, Ordering::Relaxed) => {
                info!(watch = self.watch, "cache filled; reconciling");
                self.health.one_ready();
            }
            Ok(_) => {}
            Err(e) => {
                let label = WatchLabel { watch: self.watch };
                self.metrics.watch_errors.get_or_create(&label).inc();
                error!(
                    watch = self.watch,
                    "watching failed: {e} (RBAC: {})", self.rbac
                );
            }
        }
    }
}

/// The watch of `api` into `writer`'s cache, each object `trim`med first, with `report`
/// told of its progress and `each` shown every event (to start queue-latency clocks).
pub fn observed<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
    trim: fn(&mut K),
    report: WatchReport,
    mut each: impl FnMut(&Event<K>) + Send + 'static,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    watcher(api, config)
        .default_backoff()
        .modify(trim)
        .reflect(writer)
        .inspect(move |ev| {
            report.saw(ev);
            if let Ok(ev) = ev {
                each(ev);
            }
        })
}

/// What the cache does not need to keep: managedFields, and the last-applied annotation
/// kubectl writes (often the largest part of an object).
pub fn slim<K: Resource>(obj: &mut K) {
    obj.managed_fields_mut().clear();
    obj.annotations_mut()
        .remove("kubectl.kubernetes.io/last-applied-configuration");
}

/// What the pod cache keeps of a pod's metadata: no managedFields, and only sexton's
/// annotations (the pod's other fields are trimmed as it is decoded: `crate::shared::pod`).
fn slim_pod(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    if let Some(a) = pod.metadata.annotations.as_mut() {
        crate::shared::pod::keep_own_annotations(a);
    }
}

/// A pod event for a controller: a pod that changed (or was deleted), or the cache was
/// listed again (deletions in between are not seen one by one).
#[derive(Debug, Clone)]
pub enum PodEvent {
    Changed(Arc<Pod>),
    Relisted,
}

/// Which pod events a controller wants.
type Wanted = fn(&Event<Pod>) -> bool;

/// Room for this many pod events per controller before the pod watch waits for it.
const FEED_BUFFER: usize = 1024;

/// The one pod watch and cache both controllers share.
pub struct PodFeed {
    pub store: Store<Pod>,
    pub filled: Arc<AtomicBool>,
    writer: Writer<Pod>,
    subscribers: Vec<(mpsc::Sender<PodEvent>, Wanted)>,
}

impl PodFeed {
    pub fn new() -> Self {
        let (store, writer) = reflector::store();
        PodFeed {
            store,
            writer,
            filled: Arc::default(),
            subscribers: vec![],
        }
    }

    /// The events `wanted` lets through, as a stream for one controller.
    pub fn subscribe(&mut self, wanted: Wanted) -> impl Stream<Item = PodEvent> + Send + 'static {
        let (tx, rx) = mpsc::channel(FEED_BUFFER);
        self.subscribers.push((tx, wanted));
        futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|ev| (ev, rx)) },
        )
    }

    /// Runs the watch (until the process stops), filling the cache and feeding the
    /// subscribers; `each` is shown every event first.
    pub async fn run(
        self,
        api: Api<Pod>,
        config: watcher::Config,
        report: WatchReport,
        each: impl FnMut(&Event<Pod>) + Send + 'static,
    ) {
        let subscribers = self.subscribers;
        let report = WatchReport {
            filled: self.filled,
            ..report
        };
        observed(api, config, self.writer, slim_pod, report, each)
            .for_each(|ev| {
                let ev = ev.ok();
                let to: Vec<_> = subscribers
                    .iter()
                    .filter(|(_, wanted)| ev.as_ref().is_some_and(wanted))
                    .map(|(tx, _)| tx.clone())
                    .collect();
                async move {
                    let Some(out) = ev.and_then(feed) else { return };
                    for tx in to {
                        // a controller that stopped has dropped its receiver
                        let _ = tx.send(out.clone()).await;
                    }
                }
            })
            .await
    }
}

/// The controller-facing form of a watch event (the pod moved, not copied, into an Arc).
fn feed(ev: Event<Pod>) -> Option<PodEvent> {
    match ev {
        Event::Apply(p) | Event::InitApply(p) | Event::Delete(p) => {
            Some(PodEvent::Changed(Arc::new(p)))
        }
        Event::InitDone => Some(PodEvent::Relisted),
        Event::Init => None,
    }
}

/// The pods of a feed (relists dropped).
pub fn changed_pods(
    feed: impl Stream<Item = PodEvent> + Send + 'static,
) -> impl Stream<Item = Arc<Pod>> + Send + 'static {
    feed.filter_map(|ev| async move {
        match ev {
            PodEvent::Changed(p) => Some(p),
            PodEvent::Relisted => None,
        }
    })
}

/// Runs a controller until it ends after the shutdown signal. kube-runtime's graceful
/// shutdown never ends for a controller whose cache was not filled yet (its runner waits for
/// the store forever once the trigger has stopped): such a controller has nothing in flight
/// and is dropped at once. Others get `grace` to finish their reconciliations.
pub async fn until_stopped(
    name: &'static str,
    controller: impl std::future::Future<Output = ()>,
    filled: Arc<AtomicBool>,
    stopped: impl std::future::Future<Output = ()>,
    grace: Duration,
) {
    let cut = async {
        stopped.await;
        if filled.load(Ordering::Relaxed) {
            tokio::time::sleep(grace).await;
            tracing::warn!(
                controller = name,
                "reconciliations still running {grace:?} after the shutdown signal; stopping anyway"
            );
        } else {
            info!(controller = name, "stopped before its cache was filled");
        }
    };
    tokio::select! {
        _ = controller => {}
        _ = cut => {}
    }
}
