//! The stuck-pod rule, one pure function of a Pod shared by the controller's stuck-pod
//! detection and `doctor`: a pod is in *teardown* once its main containers have all
//! terminated for good while others still run, and *stuck* once that has lasted longer than
//! a threshold. Which containers are the mains: those the pod declares (the rule
//! `kubectl sexton inject` reads: annotation `sexton.dev/sidecars`, OpenKruise's markers,
//! `KUBEXIT_DEATH_DEPS`); a pod that declares nothing is taken at its word that the
//! containers that ended were its work, and those still running are presumed sidecars.

use std::time::Duration;

use crate::shared::pod::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;
use sexton_inject::{Source, declared_roles};

/// A pod whose mains are done while other containers run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teardown {
    /// The main containers, all terminated for good.
    pub mains: Vec<String>,
    /// When the last of them terminated (its `finishedAt`).
    pub since: Timestamp,
    /// The containers of `spec.containers` still not terminated: what keeps the pod alive.
    pub running: Vec<String>,
    /// What declared the sidecars; `None`: nothing did, the running ones are presumed.
    pub declared: Option<Source>,
}

/// A pod in teardown for longer than the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub teardown: Teardown,
    /// How long since the last main terminated.
    pub for_: Duration,
}

/// The pod's teardown, if it is in one: Running, not being deleted, restartPolicy Never
/// (or OnFailure with every main at 0, since a failed main would be restarted), every
/// main terminated with a known finish time, and some container of `spec.containers`
/// not terminated.
pub fn teardown(pod: &Pod) -> Option<Teardown> {
    let (spec, status) = (pod.spec.as_ref()?, pod.status.as_ref()?);
    if status.phase.as_deref() != Some("Running") || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let restarts_failures = match spec.restart_policy.as_deref() {
        Some("Never") => false,
        Some("OnFailure") => true,
        _ => return None, // Always (the default): its containers are never done
    };
    let statuses = status.container_statuses.as_deref().unwrap_or_default();
    let ended = |name: &str| ended(statuses, name, restarts_failures);
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    let running: Vec<String> = names
        .iter()
        .filter(|n| ended(n).is_none())
        .map(|n| n.to_string())
        .collect();
    if running.is_empty() || running.len() == names.len() {
        return None; // all ended (the kubelet is catching up), or none did
    }
    let (mains, declared) = match declared_mains(pod) {
        Some((mains, source)) => (mains, Some(source)),
        None => (
            names
                .iter()
                .filter(|n| !running.iter().any(|r| r == *n))
                .map(|n| n.to_string())
                .collect(),
            None,
        ),
    };
    let mut since: Option<Timestamp> = None;
    for m in &mains {
        let finished = ended(m)??; // a main still running, or with no finish time
        since = Some(since.map_or(finished, |s| s.max(finished)));
    }
    Some(Teardown {
        running: running.into_iter().filter(|r| !mains.contains(r)).collect(),
        mains,
        since: since?,
        declared,
    })
}

/// `Some(finishedAt)` if the container terminated for good (`Some(None)`: with no time).
fn ended(
    statuses: &[ContainerStatus],
    name: &str,
    restarts_failures: bool,
) -> Option<Option<Timestamp>> {
    let t = statuses
        .iter()
        .find(|s| s.name == name)?
        .state
        .as_ref()?
        .terminated
        .as_ref()?;
    if restarts_failures && t.exit_code != 0 {
        return None;
    }
    Some(t.finished_at.as_ref().map(|f| f.0))
}

/// The mains the pod declares, and where the sidecars were declared; `None` if nothing
/// declares a sidecar. (The inject rule reads JSON: only pods already in teardown by the
/// cheap test above are converted.)
fn declared_mains(pod: &Pod) -> Option<(Vec<String>, Source)> {
    let mut v = serde_json::to_value(pod).ok()?;
    let r = declared_roles(&mut v)?;
    (!r.mains.is_empty()).then_some((r.mains, r.source))
}

/// The pod's teardown if it has lasted at least `after` at `now`.
pub fn stuck(pod: &Pod, now: Timestamp, after: Duration) -> Option<Stuck> {
    let teardown = teardown(pod)?;
    let for_ = lasted(teardown.since, now);
    (for_ >= after).then_some(Stuck { teardown, for_ })
}

/// The time from `since` to `now`; zero if the clocks disagree.
pub fn lasted(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or_default()
}

/// What the controller's safety net does about a stuck pod, which decides the advice: a
/// pod the net serves lies in a namespace already labelled for the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net {
    /// The net does not run, or does not act on this pod (not served by the webhook, or
    /// its sidecars ended otherwise): the advice of a pod nothing serves.
    Off,
    /// The net ends its sidecars (or waits for the one before to end).
    Ends,
    /// The net serves the pod but cannot end a sidecar: why (its Warning Event says more).
    Cannot(String),
}

impl Stuck {
    /// One line for an Event or a report: what keeps the pod alive, and the fix, for a pod
    /// the safety net does not act on.
    pub fn message(&self) -> String {
        self.message_with(&Net::Off)
    }

    /// [`Stuck::message`] where the safety net acts (or cannot) on the pod.
    pub fn message_with(&self, net: &Net) -> String {
        match net {
            Net::Off => {}
            Net::Ends => {
                return format!(
                    "{}; sexton's safety net is ending them (the pod's Event SidecarsEndedBySafetyNet says why admission missed it): each sidecar stops as the kubelet stops a changed container, within the pod's terminationGracePeriodSeconds, one after another; nothing to do unless one outlasts that",
                    self.what()
                );
            }
            Net::Cannot(why) => {
                return format!(
                    "{}; sexton's webhook serves this pod but admitted it unchanged, and the safety net cannot end them ({why}; the pod's Warning events from SafetyNet say more): make the pod again while the webhook answers (delete it; its Job makes another), or inject the workload (`kubectl sexton inject -f MANIFEST`)",
                    self.what()
                );
            }
        }
        let t = &self.teardown;
        let fix = match t.declared {
            None => format!(
                "nothing declares them sidecars: inject the workload (`kubectl sexton inject --sidecar {} -f MANIFEST`), or annotate its pod template sexton.dev/sidecars={:?} and label the namespace sexton.dev/inject=enabled for the webhook, or mark them with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true for the SidecarTerminator",
                t.running.join(" --sidecar "),
                t.running.join(",")
            ),
            Some(Source::KruiseMarkers) => "they carry OpenKruise's markers but were not ended: see this pod's Warning events from the SidecarTerminator (is it running, with --quick-exit-image?)".into(),
            Some(source) => format!(
                "they are declared sidecars ({source}) but nothing ends them: inject the workload (`kubectl sexton inject -f MANIFEST`) or label the namespace sexton.dev/inject=enabled for the webhook"
            ),
        };
        format!("{}; {fix}", self.what())
    }

    /// What is stuck, without the advice: `main container(s) [..] terminated Ns ago, but
    /// [..] still run and keep the pod Running`.
    pub fn what(&self) -> String {
        let t = &self.teardown;
        format!(
            "main container(s) {:?} terminated {}s ago, but {:?} still run and keep the pod Running",
            t.mains,
            self.for_.as_secs(),
            t.running
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-11-25T10:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    /// A container: name, env, state ("run", "wait", or "exit:CODE@SECONDS_AGO").
    type C<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

    fn pod(policy: &str, phase: &str, containers: &[C]) -> Pod {
        let specs: Vec<_> = containers
            .iter()
            .map(|(n, env, _)| {
                let env: Vec<_> = env
                    .iter()
                    .map(|(k, v)| json!({"name": k, "value": v}))
                    .collect();
                json!({"name": n, "image": "x", "env": env})
            })
            .collect();
        let statuses: Vec<_> = containers
            .iter()
            .map(|(n, _, s)| {
                let state = match s.split_once(':') {
                    Some(("exit", rest)) => {
                        let (code, ago) = rest.split_once('@').unwrap();
                        let at = now() - jiff_secs(ago.parse().unwrap());
                        json!({"terminated": {"exitCode": code.parse::<i32>().unwrap(), "finishedAt": at.to_string()}})
                    }
                    _ if *s == "run" => json!({"running": {}}),
                    _ => json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                };
                json!({"name": n, "image": "x", "imageID": "", "ready": false, "restartCount": 0, "state": state})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"restartPolicy": policy, "containers": specs},
            "status": {"phase": phase, "containerStatuses": statuses},
        }))
        .unwrap()
    }

    fn jiff_secs(s: i64) -> k8s_openapi::jiff::SignedDuration {
        k8s_openapi::jiff::SignedDuration::from_secs(s)
    }

    const MINUTE: Duration = Duration::from_secs(60);
    const MARK: &[(&str, &str)] = &[("KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "true")];

    #[test]
    fn undeclared_pods_presume_the_running_containers_are_sidecars() {
        let p = pod(
            "Never",
            "Running",
            &[("main", &[], "exit:0@90"), ("proxy", &[], "run")],
        );
        let s = stuck(&p, now(), MINUTE).expect("stuck");
        assert_eq!(s.teardown.mains, ["main"]);
        assert_eq!(s.teardown.running, ["proxy"]);
        assert_eq!(s.teardown.declared, None);
        assert_eq!(s.for_, Duration::from_secs(90));
        let m = s.message();
        assert!(
            m.contains("--sidecar proxy") && m.contains("90s ago"),
            "{m}"
        );
        // under the threshold: in teardown, not stuck
        assert!(stuck(&p, now(), Duration::from_secs(91)).is_none());
        assert!(teardown(&p).is_some());
    }

    #[test]
    fn declared_mains_must_all_be_done_and_the_last_one_counts() {
        let p = pod(
            "Never",
            "Running",
            &[
                ("a", &[], "exit:1@300"),
                ("b", &[], "exit:0@70"),
                ("proxy", MARK, "run"),
            ],
        );
        let s = stuck(&p, now(), MINUTE).expect("stuck");
        assert_eq!(
            (s.teardown.mains.len(), s.for_),
            (2, Duration::from_secs(70))
        );
        assert_eq!(s.teardown.declared, Some(Source::KruiseMarkers));
        assert!(s.message().contains("SidecarTerminator"), "{}", s.message());
        // a declared main still running: not in teardown, even though another ended
        let p = pod(
            "Never",
            "Running",
            &[
                ("a", &[], "exit:0@300"),
                ("b", &[], "run"),
                ("proxy", MARK, "run"),
            ],
        );
        assert_eq!(teardown(&p), None);
        // a waiting sidecar keeps the pod alive as much as a running one
        let p = pod(
            "Never",
            "Running",
            &[("a", &[], "exit:0@300"), ("proxy", MARK, "wait")],
        );
        assert_eq!(
            stuck(&p, now(), MINUTE).unwrap().teardown.running,
            ["proxy"]
        );
    }

    #[test]
    fn on_failure_counts_only_mains_at_zero() {
        let failed = pod(
            "OnFailure",
            "Running",
            &[("main", &[], "exit:1@300"), ("proxy", &[], "run")],
        );
        assert_eq!(teardown(&failed), None, "the kubelet restarts it");
        let ok = pod(
            "OnFailure",
            "Running",
            &[("main", &[], "exit:0@300"), ("proxy", &[], "run")],
        );
        assert!(stuck(&ok, now(), MINUTE).is_some());
    }

    #[test]
    fn pods_that_cannot_be_stuck() {
        for p in [
            pod(
                "Always",
                "Running",
                &[("main", &[], "exit:0@300"), ("proxy", &[], "run")],
            ),
            pod(
                "Never",
                "Succeeded",
                &[("main", &[], "exit:0@300"), ("proxy", &[], "exit:0@200")],
            ),
            pod(
                "Never",
                "Running",
                &[("main", &[], "exit:0@300"), ("proxy", &[], "exit:0@200")],
            ),
            pod(
                "Never",
                "Running",
                &[("main", &[], "run"), ("proxy", &[], "run")],
            ),
            pod("Never", "Running", &[("main", &[], "exit:0@300")]),
        ] {
            assert_eq!(teardown(&p), None, "{:?}", p.status);
        }
        let mut deleting = pod(
            "Never",
            "Running",
            &[("main", &[], "exit:0@300"), ("proxy", &[], "run")],
        );
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
        assert_eq!(teardown(&deleting), None, "the kubelet is stopping it");
    }

    fn stuck_proxy() -> Stuck {
        let p = pod(
            "Never",
            "Running",
            &[("main", &[], "exit:0@90"), ("proxy", &[], "run")],
        );
        stuck(&p, now(), MINUTE).unwrap()
    }

    #[test]
    fn without_the_safety_net_the_advice_is_to_label_the_namespace() {
        let s = stuck_proxy();
        assert_eq!(s.message_with(&Net::Off), s.message());
        assert!(
            s.message().contains("label the namespace"),
            "{}",
            s.message()
        );
    }

    #[test]
    fn where_the_safety_net_ends_them_nothing_is_to_be_labelled() {
        let s = stuck_proxy();
        let ends = s.message_with(&Net::Ends);
        assert!(ends.starts_with(&s.what()), "{ends}");
        assert!(ends.contains("safety net is ending them"), "{ends}");
        assert!(!ends.contains("label the namespace"), "{ends}");
    }

    #[test]
    fn where_the_safety_net_cannot_the_pod_is_made_again() {
        let s = stuck_proxy();
        let why = "sidecar \"proxy\" sets command";
        let cannot = s.message_with(&Net::Cannot(why.into()));
        assert!(cannot.contains("safety net cannot end them"), "{cannot}");
        assert!(cannot.contains(why), "{cannot}");
        assert!(
            cannot.contains("delete it; its Job makes another"),
            "{cannot}"
        );
        assert!(!cannot.contains("label the namespace"), "{cannot}");
    }

    #[test]
    fn annotation_and_kubexit_declarations_say_to_inject() {
        let mut p = pod(
            "Never",
            "Running",
            &[
                ("main", &[], "exit:0@300"),
                ("log", &[], "run"),
                ("proxy", &[], "run"),
            ],
        );
        p.metadata.annotations =
            Some([("sexton.dev/sidecars".to_string(), "log,proxy".to_string())].into());
        let s = stuck(&p, now(), MINUTE).unwrap();
        assert_eq!(
            (s.teardown.mains.clone(), s.teardown.running.clone()),
            (
                vec!["main".to_string()],
                vec!["log".to_string(), "proxy".to_string()]
            )
        );
        assert!(
            s.message().contains("kubectl sexton inject -f MANIFEST"),
            "{}",
            s.message()
        );
        // clocks that disagree: never a negative time
        assert_eq!(lasted(now(), now() - jiff_secs(5)), Duration::ZERO);
    }
}
