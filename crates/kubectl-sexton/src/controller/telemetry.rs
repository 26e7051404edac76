//! What a controller reports, whatever it reconciles: action counters, Kubernetes Events,
//! queue latency and reconcile timings, failures and their retry, and which problems it
//! reported already (once per object and reason, not on every reconciliation).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc;
use tracing::warn;

use crate::controller::metrics::{
    ActionLabels, ControllerLabel, ErrorLabels, Metrics, ReconcileTimer,
};
use crate::shared::api_error::Error;

/// The field manager of every write, and the reporting controller of Events.
pub const FIELD_MANAGER: &str = "sexton-controller";

/// `namespace/name` of an object, for logs and messages.
pub fn key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// When each object's oldest unprocessed watch event arrived (for `queue_latency_seconds`).
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
    /// A watch event for `obj` arrived (the first one since its last reconciliation counts).
    pub fn arrived(&self, obj: &K) {
        let mut pending = self.0.lock().expect("poisoned");
        pending
            .entry(ObjectRef::from_obj(obj))
            .or_insert_with(Instant::now);
    }

    /// `obj` is gone: nothing will reconcile it.
    pub fn forget(&self, obj: &K) {
        self.forget_ref(&ObjectRef::from_obj(obj));
    }

    /// The object `r` names is gone.
    pub fn forget_ref(&self, r: &ObjectRef<K>) {
        self.0.lock().expect("poisoned").remove(r);
    }

    /// How long `obj` waited in the queue, if a watch event started its reconciliation.
    fn waited(&self, obj: &K) -> Option<Duration> {
        let arrived = self
            .0
            .lock()
            .expect("poisoned")
            .remove(&ObjectRef::from_obj(obj));
        arrived.map(|t| t.elapsed())
    }
}

/// Reports each problem once (per key) rather than on every reconciliation of the object.
#[derive(Default)]
pub struct Once(Mutex<HashMap<String, Instant>>);

impl Once {
    /// True the first time `key` is seen (keys older than an hour are forgotten once
    /// more than 4096 are kept, so memory stays bounded on a large cluster).
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

/// Events wait here for the API server. They are published by a task of their own, so
/// that a reconciliation, and the `--concurrency` slot it holds, does not wait for a second
/// write: with 100 swaps a second, each swap's Event POST doubled its time in the slot
/// (BENCHMARKS.md, "Controllers at scale"). When the API server falls this far behind, new
/// Events are dropped and counted (`events_dropped_total`), as client-go's recorder does.
const EVENT_QUEUE: usize = 1024;
/// Events published at once.
const EVENT_WRITERS: usize = 8;

struct Outgoing {
    event: Event,
    reference: ObjectReference,
    object: String,
}

/// The queue of Events and the task that publishes them (started with the first Event,
/// inside the runtime).
fn publisher(recorder: Recorder) -> mpsc::Sender<Outgoing> {
    let (tx, mut rx) = mpsc::channel::<Outgoing>(EVENT_QUEUE);
    let queue = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    tokio::spawn(queue.for_each_concurrent(EVENT_WRITERS, move |o| {
        let recorder = recorder.clone();
        async move {
            if let Err(e) = recorder.publish(&o.event, &o.reference).await {
                let reason = &o.event.reason;
                warn!(object = %o.object, reason, error = %e, "cannot publish event (RBAC: events.k8s.io events create/patch)");
            }
        }
    }));
    tx
}

/// The API server refuses an Event whose note is longer (events.k8s.io/v1).
const MAX_NOTE: usize = 1024;

/// `s`, cut to at most `max` bytes (on a character boundary, ending with "...").
fn at_most(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut end = max - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str("...");
    s
}

pub struct Telemetry<K: Resource>
where
    K::DynamicType: Eq + Hash,
{
    pub controller: &'static str,
    pub metrics: Arc<Metrics>,
    recorder: Recorder,
    events: OnceLock<mpsc::Sender<Outgoing>>,
    /// Shared with the controller's watch, which starts it.
    pub clock: Arc<Clock<K>>,
    /// Problems already reported (the Recorder would fold repeats into a series, but this
    /// skips the API call).
    pub reported: Once,
}

impl<K: Resource<DynamicType = ()>> Telemetry<K> {
    pub fn new(controller: &'static str, metrics: Arc<Metrics>, recorder: Recorder) -> Self {
        Telemetry {
            controller,
            metrics,
            recorder,
            events: OnceLock::new(),
            clock: Arc::default(),
            reported: Once::default(),
        }
    }

    fn label(&self) -> ControllerLabel {
        ControllerLabel {
            controller: self.controller,
        }
    }

    /// At the start of a reconciliation: counts it, records its queue latency, and returns
    /// the timer that records its duration when dropped.
    pub fn reconcile_started(&self, obj: &K) -> ReconcileTimer {
        if let Some(waited) = self.clock.waited(obj) {
            let histogram = self
                .metrics
                .queue_latency
                .get_or_create(&self.label())
                .clone();
            histogram.observe(waited.as_secs_f64());
        }
        self.metrics.reconcile_started(self.controller)
    }

    pub fn count(&self, action: &'static str, reason: &'static str) {
        self.count_by(action, reason, 1)
    }

    pub fn count_by(&self, action: &'static str, reason: &'static str, n: u64) {
        let labels = ActionLabels {
            controller: self.controller,
            action,
            reason,
        };
        self.metrics.actions.get_or_create(&labels).inc_by(n);
    }

    pub fn conflict(&self) {
        self.metrics.conflicts.get_or_create(&self.label()).inc();
    }

    /// Queues an Event about `obj` (published in the background: see [`EVENT_QUEUE`]).
    pub fn event(&self, obj: &K, type_: EventType, reason: &str, action: &str, note: String) {
        self.event_about(obj.object_ref(&()), type_, reason, action, note)
    }

    /// Queues an Event about the object `reference` names (a pod's Job, say).
    pub fn event_about(
        &self,
        reference: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let object = format!(
            "{}/{}",
            reference.namespace.as_deref().unwrap_or_default(),
            reference.name.as_deref().unwrap_or_default()
        );
        let out = Outgoing {
            event: Event {
                type_,
                reason: reason.into(),
                note: Some(at_most(note, MAX_NOTE)),
                action: action.into(),
                secondary: None,
            },
            reference,
            object,
        };
        let queue = self.events.get_or_init(|| publisher(self.recorder.clone()));
        if let Err(e) = queue.try_send(out) {
            self.metrics
                .events_dropped
                .get_or_create(&self.label())
                .inc();
            let object = e.into_inner().object;
            warn!(%object, reason, "event dropped: {EVENT_QUEUE} events are waiting for the API server");
        }
    }

    /// The error policy: counts the failure by kind, logs it, and says when to retry (the
    /// time its kind calls for).
    pub fn failed(&self, obj: &K, err: &Error) -> Duration {
        let kind = err.kind();
        let labels = ErrorLabels {
            controller: self.controller,
            kind,
        };
        self.metrics.errors.get_or_create(&labels).inc();
        let retry = kind.retry_after();
        warn!(controller = self.controller, object = %key(obj), error = %err, ?kind, "reconcile failed; retrying in {retry:?}");
        retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_to_what_the_api_server_takes() {
        assert_eq!(at_most("short".into(), MAX_NOTE), "short");
        let long = "é".repeat(600);
        let cut = at_most(long, MAX_NOTE);
        assert!(
            cut.len() <= MAX_NOTE && cut.ends_with("..."),
            "{}",
            cut.len()
        );
    }
}
