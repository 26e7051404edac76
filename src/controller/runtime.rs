//! What both controllers share: the instrumented watch stream that feeds a kube-runtime
//! `Controller` (queue-latency clock, readiness, watch errors), and once-only reporting.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::{debug, error, info};

use super::http::{Health, Metrics, labels};

/// When each object's oldest unprocessed watch event arrived.
pub struct Clock<K: Resource>(Mutex<HashMap<ObjectRef<K>, Instant>>)
where
    K::DynamicType: Eq + Hash;

impl<K: Resource> Default for Clock<K>
where
    K::DynamicType: Eq + Hash,
{
    fn default() -> Self {
        Clock(Mutex::default())
    }
}

impl<K: Resource<DynamicType = ()>> Clock<K> {
    fn arrived(&self, obj: &K) {
        self.0
            .lock()
            .expect("poisoned")
            .entry(ObjectRef::from_obj(obj))
            .or_insert_with(Instant::now);
    }

    fn forget(&self, obj: &K) {
        self.0
            .lock()
            .expect("poisoned")
            .remove(&ObjectRef::from_obj(obj));
    }

    /// At the start of a reconciliation: count it, and record its queue latency.
    pub fn started(&self, obj: &K, metrics: &Metrics, controller: &str) {
        let l = labels(&[("controller", controller)]);
        if let Some(t) = self
            .0
            .lock()
            .expect("poisoned")
            .remove(&ObjectRef::from_obj(obj))
        {
            metrics
                .queue_latency
                .get_or_create(&l)
                .observe(t.elapsed().as_secs_f64());
        }
        metrics.reconciles.get_or_create(&l).inc();
    }
}

/// The watch of `api` (managedFields dropped, into `writer`'s cache) as the trigger of a
/// controller: it starts the queue-latency clock of each object, tells `health` when the
/// cache is filled, and logs and counts watch errors with what RBAC would be missing.
#[allow(clippy::too_many_arguments)]
pub fn trigger<K>(
    filled_flag: Arc<AtomicBool>,
    api: Api<K>,
    config: watcher::Config,
    writer: Writer<K>,
    clock: Arc<Clock<K>>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    controller: &'static str,
    rbac: String,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut filled = false;
    watcher(api, config)
        .default_backoff()
        .modify(|o: &mut K| {
            o.managed_fields_mut().clear();
        })
        .reflect(writer)
        .inspect(move |ev| {
            use watcher::Event;
            match ev {
                Ok(Event::Apply(o) | Event::InitApply(o)) => clock.arrived(o),
                Ok(Event::Init) => debug!(controller, "listing"),
                Ok(Event::Delete(o)) => clock.forget(o),
                // (Not Store::wait_until_ready: its single-waker future is also awaited by
                // the controller, and only the last waiter is woken.)
                Ok(Event::InitDone) if !filled => {
                    filled = true;
                    filled_flag.store(true, Ordering::Relaxed);
                    info!(controller, "cache filled; reconciling");
                    health.one_ready();
                }
                Ok(_) => {}
                Err(e) => {
                    metrics
                        .errors
                        .get_or_create(&labels(&[("controller", controller), ("kind", "watch")]))
                        .inc();
                    error!(controller, "watching failed: {e} (RBAC: {rbac})");
                }
            }
        })
        .touched_objects()
}

/// Reports each problem once (per key) rather than on every reconciliation of the object.
#[derive(Default)]
pub struct Once(Mutex<HashMap<String, Instant>>);

impl Once {
    pub fn first(&self, key: String) -> bool {
        let mut seen = self.0.lock().expect("poisoned");
        if seen.contains_key(&key) {
            return false;
        }
        if seen.len() > 4096 {
            seen.retain(|_, t| t.elapsed() < Duration::from_secs(3600));
        }
        seen.insert(key, Instant::now());
        true
    }
}

impl Health {
    /// One controller's cache is filled; ready when all are.
    pub fn one_ready(&self) {
        if self.pending.fetch_sub(1, Ordering::Relaxed) <= 1 {
            self.ready.store(true, Ordering::Relaxed);
        }
    }
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
