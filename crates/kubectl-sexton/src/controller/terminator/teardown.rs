//! Stuck-pod detection for every running pod, marked or not (the rule: `crate::shared::stuck`).
//! Shown every event of the shared pod watch, it remembers when each pod's mains finished
//! and, when the pod leaves Running, records the teardown time (last main terminated → pod
//! terminal) by whether the SidecarTerminator acted on it. Every few seconds it reads the
//! pod cache: the gauge of stuck pods, and one Warning event per stuck pod naming what
//! still runs and the fix. Only the leader runs it (it runs with the controllers).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::shared::pod::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::Event;
use tracing::warn;

use super::decide::swapped;
use crate::controller::metrics::ActedLabel;
use crate::controller::safety_net::View;
use crate::controller::telemetry::{Telemetry, key};
use crate::shared::pod::is_running;
use crate::shared::stuck::{self, Net, Stuck};

/// The longest pause between two reads of the cache (a shorter `--stuck-after` reads it
/// twice per threshold).
const MAX_INTERVAL: Duration = Duration::from_secs(10);

pub struct Teardowns {
    after: Duration,
    telemetry: Arc<Telemetry<Pod>>,
    /// Pods seen in teardown (uid → when their last main finished).
    since: Mutex<HashMap<String, Timestamp>>,
    /// Pods reported stuck (uid), so that each gets one event.
    reported: Mutex<HashSet<String>>,
    /// The safety net's view of a pod, when it runs in this process.
    net: OnceLock<View>,
}

impl Teardowns {
    pub fn new(after: Duration, telemetry: Arc<Telemetry<Pod>>) -> Self {
        Teardowns {
            after,
            telemetry,
            since: Mutex::default(),
            reported: Mutex::default(),
            net: OnceLock::new(),
        }
    }

    /// The safety net runs beside: its view of a pod decides the stuck-pod advice.
    pub fn net_view(&self, view: View) {
        let _ = self.net.set(view);
    }

    /// Shown every event of the pod watch. A pod leaves Running either as a terminal Apply
    /// (the watch of every pod) or as a Delete (the watch of Running pods drops it; the
    /// object is its last Running state).
    pub fn saw(&self, ev: &Event<Pod>) {
        match ev {
            Event::Apply(p) | Event::InitApply(p) if is_running(p) => self.running(p),
            // (InitApply of a finished pod: its end was not seen, so it is not timed)
            Event::Apply(p) if is_terminal(p) => self.ended(p),
            Event::Delete(p) => self.ended(p),
            _ => {}
        }
    }

    fn running(&self, pod: &Pod) {
        // cheap first: most running pods have no terminated container
        if !any_terminated(pod) {
            return;
        }
        if let (Some(uid), Some(t)) = (pod.uid(), stuck::teardown(pod)) {
            self.since.lock().expect("poisoned").insert(uid, t.since);
        }
    }

    fn ended(&self, pod: &Pod) {
        let Some(uid) = pod.uid() else { return };
        self.reported.lock().expect("poisoned").remove(&uid);
        let Some(since) = self.since.lock().expect("poisoned").remove(&uid) else {
            return;
        };
        let acted = ActedLabel {
            acted: if swapped(pod).is_empty() {
                "false"
            } else {
                "true"
            },
        };
        let took = stuck::lasted(since, Timestamp::now());
        let metrics = &self.telemetry.metrics;
        metrics
            .teardown
            .get_or_create(&acted)
            .observe(took.as_secs_f64());
    }

    /// Reads the cache every few seconds until the future is dropped.
    pub async fn run(self: Arc<Self>, store: Store<Pod>) {
        let interval = (self.after / 2).clamp(Duration::from_secs(1), MAX_INTERVAL);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for (pod, s) in self.scan(&store.state(), Timestamp::now()) {
                self.report(&pod, &s).await;
            }
        }
    }

    /// The stuck pods of `pods` not reported yet; sets the gauge and forgets pods that left
    /// the cache (their deletion may have been missed across a relist).
    fn scan(&self, pods: &[Arc<Pod>], now: Timestamp) -> Vec<(Arc<Pod>, Stuck)> {
        let stuck: Vec<(Arc<Pod>, Stuck)> = pods
            .iter()
            .filter(|p| any_terminated(p))
            .filter_map(|p| Some((p.clone(), stuck::stuck(p, now, self.after)?)))
            .collect();
        self.telemetry.metrics.stuck_pods.set(stuck.len() as i64);
        let present: HashSet<String> = pods.iter().filter_map(|p| p.uid()).collect();
        self.since
            .lock()
            .expect("poisoned")
            .retain(|uid, _| present.contains(uid));
        let mut reported = self.reported.lock().expect("poisoned");
        reported.retain(|uid| present.contains(uid));
        stuck
            .into_iter()
            .filter(|(p, _)| p.uid().is_some_and(|uid| reported.insert(uid)))
            .collect()
    }

    async fn report(&self, pod: &Pod, s: &Stuck) {
        let net = self.net.get().map_or(Net::Off, |view| view(pod));
        let message = s.message_with(&net);
        warn!(pod = %key(pod), containers = ?s.teardown.running, "stuck: {message}");
        self.telemetry.count("detect", "PodStuck");
        self.telemetry
            .event(pod, EventType::Warning, "PodStuck", "Detect", message);
    }
}

fn is_terminal(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

fn any_terminated(pod: &Pod) -> bool {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref());
    statuses
        .unwrap_or_default()
        .iter()
        .any(|s| s.state.as_ref().is_some_and(|st| st.terminated.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::metrics::Metrics;
    use serde_json::json;

    fn pod(uid: &str, phase: &str, main_ago: i64, swapped: bool) -> Arc<Pod> {
        let at = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(main_ago);
        let mut annotations = json!({});
        if swapped {
            annotations = json!({"sexton.dev/swapped-sidecars": "{\"proxy\":\"envoy\"}"});
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": uid, "namespace": "ns", "uid": uid, "annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main"}, {"name": "proxy"}]},
                "status": {"phase": phase, "containerStatuses": [
                    {"name": "main", "image": "", "imageID": "", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0, "finishedAt": at.to_string()}}},
                    {"name": "proxy", "image": "", "imageID": "", "ready": true, "restartCount": 0,
                     "state": {"running": {}}},
                ]},
            }))
            .unwrap(),
        )
    }

    fn teardowns() -> Teardowns {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let recorder = kube::runtime::events::Recorder::new(client, "test".into());
        let telemetry = Telemetry::new("sidecar-terminator", Arc::new(Metrics::new()), recorder);
        Teardowns::new(Duration::from_secs(60), Arc::new(telemetry))
    }

    #[tokio::test]
    async fn stuck_pods_are_counted_and_reported_once() {
        let t = teardowns();
        let pods = [
            pod("a", "Running", 90, false),
            pod("b", "Running", 10, false),
        ];
        let now = Timestamp::now();
        let first = t.scan(&pods, now);
        assert_eq!(
            first.iter().map(|(p, _)| p.name_any()).collect::<Vec<_>>(),
            ["a"]
        );
        assert!(
            t.telemetry
                .metrics
                .encode()
                .contains("sexton_controller_stuck_pods 1")
        );
        assert!(t.scan(&pods, now).is_empty(), "reported once");
        // gone from the cache, then back (a new incarnation would have a new uid anyway)
        assert!(t.scan(&[], now).is_empty());
        assert!(
            t.telemetry
                .metrics
                .encode()
                .contains("sexton_controller_stuck_pods 0")
        );
        assert_eq!(t.scan(&pods, now).len(), 1, "forgotten once gone");
    }

    #[tokio::test]
    async fn teardown_time_is_recorded_once_by_whether_sexton_acted() {
        let t = teardowns();
        t.saw(&Event::Apply((*pod("a", "Running", 3, false)).clone()));
        t.saw(&Event::InitApply((*pod("b", "Running", 5, false)).clone()));
        // a: ended by sexton's swap (the watch of Running pods: a Delete with the last state)
        t.saw(&Event::Delete((*pod("a", "Running", 3, true)).clone()));
        t.saw(&Event::Delete((*pod("a", "Running", 3, true)).clone()));
        // b, d: ended on their own; c: finished before it was seen, not timed
        t.saw(&Event::Apply((*pod("b", "Succeeded", 5, false)).clone()));
        t.saw(&Event::Apply((*pod("d", "Running", 5, false)).clone()));
        t.saw(&Event::Delete((*pod("d", "Running", 5, false)).clone()));
        t.saw(&Event::Apply((*pod("c", "Succeeded", 5, false)).clone()));
        let text = t.telemetry.metrics.encode();
        for want in [
            r#"sexton_controller_pod_teardown_seconds_count{acted="true"} 1"#,
            r#"sexton_controller_pod_teardown_seconds_count{acted="false"} 2"#,
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
    }
}
