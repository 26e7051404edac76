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
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::{debug, error, info, warn};

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

/// What one controller reports, whatever it reconciles: action counters, Kubernetes
/// Events, reconcile timings and errors, and which problems it already reported.
pub struct Telemetry<K: Resource>
where
    K::DynamicType: Eq + Hash,
{
    pub controller: &'static str,
    pub metrics: Arc<Metrics>,
    recorder: Recorder,
    /// Shared with the controller's watch stream (`trigger`), which starts it.
    pub clock: Arc<Clock<K>>,
    /// Problems already reported (the reconciler sees the same object many times; the
    /// Recorder would fold repeats into a series, but this skips the API call).
    pub reported: Once,
}

/// `namespace/name` of an object, for logs.
pub fn key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

impl<K: Resource<DynamicType = ()>> Telemetry<K> {
    pub fn new(controller: &'static str, metrics: Arc<Metrics>, recorder: Recorder) -> Self {
        Telemetry {
            controller,
            metrics,
            recorder,
            clock: Arc::default(),
            reported: Once::default(),
        }
    }

    pub fn count(&self, action: &str, reason: &str) {
        self.metrics
            .actions
            .get_or_create(&labels(&[
                ("controller", self.controller),
                ("action", action),
                ("reason", reason),
            ]))
            .inc();
    }

    pub async fn event(&self, obj: &K, type_: EventType, reason: &str, action: &str, note: String) {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            warn!(object = %key(obj), reason, error = %e, "cannot publish event (RBAC: events.k8s.io events create/patch)");
        }
    }

    /// Runs one reconciliation of `obj`: counts it and records its queue latency and duration.
    pub async fn reconciling<T>(&self, obj: &K, f: impl std::future::Future<Output = T>) -> T {
        self.clock.started(obj, &self.metrics, self.controller);
        let started = Instant::now();
        let result = f.await;
        self.metrics
            .reconcile_duration
            .get_or_create(&labels(&[("controller", self.controller)]))
            .observe(started.elapsed().as_secs_f64());
        result
    }

    /// The error policy: count the failure, log it, retry in 5 s.
    pub fn failed(&self, obj: &K, err: &impl std::fmt::Display) -> Action {
        self.metrics
            .errors
            .get_or_create(&labels(&[
                ("controller", self.controller),
                ("kind", "reconcile"),
            ]))
            .inc();
        warn!(controller = self.controller, object = %key(obj), error = %err, "reconcile failed; retrying in 5s");
        Action::requeue(Duration::from_secs(5))
    }
}
