//! The controller's Prometheus metrics (`sexton_controller_*`): typed label sets, so a
//! label can be neither misspelt nor forgotten, and a reconcile timer that records when it
//! is dropped, whichever way the reconciliation ends.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::watch_cause::WatchCause;
use crate::shared::api_error::Kind;
use crate::shared::metrics;

/// `controller="sidecar-terminator"`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    pub controller: &'static str,
}

/// `watch="pods",cause="forbidden"`: the resource of a watch and why it failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchErrorLabels {
    pub watch: &'static str,
    pub cause: WatchCause,
}

/// `watch="ephemeraljobs"`: the resource of a watch.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabel {
    pub watch: &'static str,
}

/// An action taken or refused, and why (`action="swap",reason="MainsCompleted"`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub controller: &'static str,
    pub action: &'static str,
    pub reason: &'static str,
}

/// `acted="true"`: whether the SidecarTerminator swapped a sidecar of the pod.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActedLabel {
    pub acted: &'static str,
}

/// A failed reconciliation, by the kind that decides its retry.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: &'static str,
    pub kind: Kind,
}

pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ControllerLabel, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
    pub watch_errors: Family<WatchErrorLabels, Counter>,
    pub undecodable: Family<WatchLabel, Counter>,
    pub actions: Family<ActionLabels, Counter>,
    pub conflicts: Family<ControllerLabel, Counter>,
    pub events_dropped: Family<ControllerLabel, Counter>,
    pub queue_latency: Family<ControllerLabel, Histogram>,
    pub reconcile_duration: Family<ControllerLabel, Histogram>,
    pub leader: Gauge,
    pub stuck_pods: Gauge,
    pub teardown: Family<ActedLabel, Histogram>,
}

/// 0.25 s .. ~68 min: teardowns last from a kubelet sync to forever.
fn teardown_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.25, 2.0, 15))
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~33 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sexton_controller");
        let m = Metrics {
            reconciles: Family::default(),
            errors: Family::default(),
            watch_errors: Family::default(),
            undecodable: Family::default(),
            actions: Family::default(),
            conflicts: Family::default(),
            events_dropped: Family::default(),
            queue_latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            reconcile_duration: Family::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            ),
            leader: Gauge::default(),
            stuck_pods: Gauge::default(),
            teardown: Family::new_with_constructor(teardown_histogram as fn() -> Histogram),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "reconciles",
            "Reconciliations run, by controller",
            m.reconciles.clone(),
        );
        r.register(
            "reconcile_errors",
            "Reconciliations that failed (and were retried), by controller and kind of failure",
            m.errors.clone(),
        );
        r.register(
            "watch_errors",
            "Watch failures (retried with back-off), by resource watched and cause",
            m.watch_errors.clone(),
        );
        r.register(
            "undecodable_objects",
            "Objects of a list or watch that could not be read (logged once each and skipped), by resource watched",
            m.undecodable.clone(),
        );
        r.register(
            "actions",
            "Actions taken or refused, by controller, action and reason",
            m.actions.clone(),
        );
        r.register(
            "patch_conflicts",
            "Patches rejected with 409 Conflict because the object changed (re-read and retried)",
            m.conflicts.clone(),
        );
        r.register(
            "events_dropped",
            "Kubernetes Events not published because the queue of Events waiting for the API server was full",
            m.events_dropped.clone(),
        );
        r.register(
            "queue_latency_seconds",
            "Time from a watch event (a change of the object; not a list's, whose objects are queued only at its end) to the start of the reconciliation it triggers",
            m.queue_latency.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Time spent in one reconciliation",
            m.reconcile_duration.clone(),
        );
        r.register(
            "leader",
            "1 while this replica holds the leader lease (or runs without leader election)",
            m.leader.clone(),
        );
        r.register(
            "stuck_pods",
            "Running pods whose main containers all terminated longer than --stuck-after ago while other containers still run",
            m.stuck_pods.clone(),
        );
        r.register(
            "pod_teardown_seconds",
            "Time from a pod's last main container terminating to the pod leaving Running, by whether the SidecarTerminator swapped a sidecar of it",
            m.teardown.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        metrics::text(&self.registry)
    }

    /// Counts one reconciliation of `controller` and times it until the timer is dropped.
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        let label = ControllerLabel { controller };
        self.reconciles.get_or_create(&label).inc();
        ReconcileTimer {
            histogram: self.reconcile_duration.get_or_create(&label).clone(),
            started: Instant::now(),
        }
    }
}

/// Records the time since its creation into `reconcile_duration_seconds` when dropped: a
/// reconciliation that returns early, fails or is cancelled by shutdown is timed too.
pub struct ReconcileTimer {
    histogram: Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_typed_and_the_timer_records_on_drop() {
        let m = Metrics::new();
        {
            let _t = m.reconcile_started("ephemeraljob");
        }
        m.errors
            .get_or_create(&ErrorLabels {
                controller: "ephemeraljob",
                kind: Kind::Forbidden,
            })
            .inc();
        let text = m.encode();
        for want in [
            r#"sexton_controller_reconciles_total{controller="ephemeraljob"} 1"#,
            r#"sexton_controller_reconcile_duration_seconds_count{controller="ephemeraljob"} 1"#,
            r#"sexton_controller_reconcile_errors_total{controller="ephemeraljob",kind="forbidden"} 1"#,
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
    }
}
