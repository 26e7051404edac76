//! The watches that feed the controllers, instrumented the same way: managedFields dropped
//! before caching, queue-latency clocks started, readiness reported once the cache is
//! filled, failures logged by their real cause (and a failed list makes the process
//! unready until a list succeeds). One pod watch fills one cache that
//! both controllers read ([`PodFeed`]), and hands each controller the pod events it needs.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::shared::pod::{KeptAnnotations, Pod, is_running};
use futures_util::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tracing::{debug, error, info};

use super::watch_cause::WatchCause;
use crate::controller::metrics::{Metrics, WatchErrorLabels};
use crate::shared::http::Health;

/// What a watch is of, and where it reports.
#[derive(Clone)]
pub struct WatchReport {
    /// The resource watched (`pods`, `ephemeraljobs`), in logs and metric labels.
    pub watch: &'static str,
    /// What RBAC the watch needs, named when it is forbidden.
    pub rbac: String,
    /// What to check when the API server does not serve the resource (404), if anything
    /// can be missing (a CRD).
    pub missing: &'static str,
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
    /// Set once the cache is filled.
    pub filled: Arc<AtomicBool>,
    /// Set while the last list failed (counted once in `health.failing`).
    pub failing: Arc<AtomicBool>,
}

impl WatchReport {
    fn saw<K>(&self, ev: &watcher::Result<Event<K>>) {
        match ev {
            Ok(Event::Init) => debug!(watch = self.watch, "listing"),
            Ok(Event::InitApply(_) | Event::InitDone) => {
                self.listed();
                // (Not Store::wait_until_ready: its single-waker future is also awaited by
                // the controller, and only the last waiter is woken.)
                if matches!(ev, Ok(Event::InitDone)) && !self.filled.swap(true, Ordering::Relaxed) {
                    info!(watch = self.watch, "cache filled; reconciling");
                    self.health.one_ready();
                }
            }
            Ok(_) => {}
            Err(e) => self.failed(e),
        }
    }

    /// A list answered: the watch is no longer failing.
    fn listed(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            self.health.failing.fetch_sub(1, Ordering::Relaxed);
            info!(watch = self.watch, "listing again");
        }
    }

    /// Logs a failure by its real cause and counts it; a failed list makes the process
    /// unready until a list succeeds.
    fn failed(&self, e: &watcher::Error) {
        let cause = WatchCause::of(e);
        let label = WatchErrorLabels {
            watch: self.watch,
            cause,
        };
        self.metrics.watch_errors.get_or_create(&label).inc();
        if matches!(e, watcher::Error::InitialListFailed(_))
            && !self.failing.swap(true, Ordering::Relaxed)
        {
            self.health.failing.fetch_add(1, Ordering::Relaxed);
        }
        let what = bounded(&e.to_string());
        match cause {
            // the API server no longer has the history the watch resumes from: a relist
            // follows, nothing is wrong
            WatchCause::Expired => info!(watch = self.watch, "watch expired, relisting: {what}"),
            WatchCause::Forbidden => error!(
                watch = self.watch,
                cause = cause.as_str(),
                "watching failed: {what} (RBAC: {})",
                self.rbac
            ),
            WatchCause::NotFound if !self.missing.is_empty() => error!(
                watch = self.watch,
                cause = cause.as_str(),
                "watching failed: {what} ({})",
                self.missing
            ),
            _ => error!(
                watch = self.watch,
                cause = cause.as_str(),
                "watching failed ({}): {what}",
                cause.explain()
            ),
        }
    }
}

/// At most 512 bytes of an error's text: an error may carry a whole response body.
pub fn bounded(s: &str) -> String {
    const MAX: usize = 512;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

/// The watch `events` into `writer`'s cache, each object `trim`med first, with `report`
/// told of its progress and `each` shown every event (to start queue-latency clocks).
pub fn observed<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    writer: Writer<K>,
    trim: impl FnMut(&mut K) + Send + 'static,
    report: WatchReport,
    mut each: impl FnMut(&Event<K>) + Send + 'static,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    events
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
/// annotations and the catalogue's markers (`kept`; the pod's other fields are trimmed as
/// it is decoded: `crate::shared::pod`).
fn slim_pod(pod: &mut Pod, kept: &KeptAnnotations) {
    pod.metadata.managed_fields = None;
    if let Some(a) = pod.metadata.annotations.as_mut() {
        kept.trim(a);
    }
}

/// A pod event for a controller: a pod that changed (or was deleted), or the cache was
/// listed again (deletions in between are not seen one by one).
///
/// The pods of a list are not given one by one: kube-runtime's cache takes them in only
/// when the list ends (its writer buffers them until `InitDone`), so a controller given a
/// listed pod before then would read the cache's older version of it, decide on that, and
/// never look again. After a watch restart (a restarted API server, an expired resource
/// version) that older version is all a controller would see of what changed while the
/// watch was down: a main that exited then would keep its sidecars running. So `Relisted`
/// comes once the cache holds the whole list, and each controller then looks at every pod
/// of the cache that it may have to act on.
#[derive(Debug, Clone)]
pub enum PodEvent {
    Changed(Arc<Pod>),
    Relisted,
}

/// The pod events of a controller of Running pods: a Running pod's change, and the end of
/// a list (then the controller reads the Running pods of the cache: [`PodEvent`]).
pub fn running_or_relisted(ev: &Event<Pod>) -> bool {
    match ev {
        Event::Apply(p) => is_running(p),
        Event::InitDone => true,
        _ => false,
    }
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
    kept: KeptAnnotations,
}

impl PodFeed {
    /// A feed whose cache keeps sexton's annotations and `kept`.
    pub fn new(kept: KeptAnnotations) -> Self {
        let (store, writer) = reflector::store();
        PodFeed {
            store,
            writer,
            filled: Arc::default(),
            subscribers: vec![],
            kept,
        }
    }

    /// The events `wanted` lets through, as a stream for one controller.
    pub fn subscribe(&mut self, wanted: Wanted) -> impl Stream<Item = PodEvent> + Send + 'static {
        let (tx, mut rx) = mpsc::channel(FEED_BUFFER);
        self.subscribers.push((tx, wanted));
        futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
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
        let kept = self.kept;
        let trim = move |p: &mut Pod| slim_pod(p, &kept);
        observed(watcher(api, config), self.writer, trim, report, each)
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

/// The controller-facing form of a watch event (the pod moved, not copied, into an Arc);
/// a listed pod is given only as part of the list's end ([`PodEvent`] says why).
fn feed(ev: Event<Pod>) -> Option<PodEvent> {
    match ev {
        Event::Apply(p) | Event::Delete(p) => Some(PodEvent::Changed(Arc::new(p))),
        Event::InitDone => Some(PodEvent::Relisted),
        Event::Init | Event::InitApply(_) => None,
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
