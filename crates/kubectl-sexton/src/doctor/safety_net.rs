//! The `safety-net` check: the pods whose sidecars the controller's safety net is ending or
//! has ended (its record `sexton.dev/safety-net` on the pod), why admission missed each
//! (the record's cause; for a pod admitted unchanged, the webhook's `InjectRefused` Event
//! on its Job says whether the webhook refused it, and why), the pods whose sidecars it
//! cannot end (its Warning Events, action `SafetyNet`), and a controller that runs without
//! it. The rules are pure (`findings`); the check lists pods and Events.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::access::{Access, answer};
use super::ctx::Ctx;
use super::report::{Check, Finding, Status};
use crate::shared::components::{Part, deployments};
use crate::shared::pod::{Pod, phase};
use crate::shared::safety_net::{ANNOTATION_SAFETY_NET, Cause, Record};

pub const NAME: &str = "safety-net";

/// The action of the safety net's Events (`controller/safety_net/reconcile.rs`).
const ACTION: &str = "SafetyNet";
/// The webhook's Event on a Pod's owner when it admits the Pod unchanged.
const REFUSED: &str = "InjectRefused";

/// Pods per list request.
const PAGE: u32 = 500;

pub async fn check(ctx: &Ctx) -> Check {
    let ns = ctx.namespaces.one();
    let pods = match netted_pods(&ctx.client, ns).await {
        Ok(p) => p,
        Err(e) => return Check::failed(NAME, "pods", e),
    };
    let events = match warnings(&ctx.client, ns).await {
        Ok(e) => e,
        Err(e) => return Check::failed(NAME, "events", e),
    };
    // (a refusal to read sexton's Deployments is the components check's to report)
    let controllers = deployments(&ctx.client, &ctx.sexton_namespace, Part::Controller)
        .await
        .unwrap_or_default();
    let off: Vec<String> = controllers
        .iter()
        .filter(|d| !runs_the_net(d))
        .map(|d| d.name_any())
        .collect();
    let findings = findings(&pods, &events, &off, &ctx.sexton_namespace);
    let (ended, cannot) = (
        findings
            .iter()
            .filter(|f| f.status != Status::Error && f.object.starts_with("pod "))
            .count(),
        findings
            .iter()
            .filter(|f| f.status == Status::Error)
            .count(),
    );
    let summary = match (ended, cannot) {
        (0, 0) => {
            "no pod needed the controller's safety net: admission ended every sidecar".to_string()
        }
        _ => format!(
            "{ended} pod(s) whose sidecars the safety net ended or is ending (admission missed them), {cannot} whose sidecars it cannot end"
        ),
    };
    Check::new(NAME, summary, findings)
}

/// The pods that carry the safety net's record, of every phase (an ended pod keeps it).
async fn netted_pods(client: &Client, ns: Option<&str>) -> Result<Vec<Pod>, String> {
    let api = match ns {
        Some(ns) => Api::<Pod>::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut pods = vec![];
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = answer(Access::new("list", "pods").in_ns(ns), api.list(&lp).await)
            .map_err(|e| e.to_string())?;
        pods.extend(page.items.into_iter().filter(|p| {
            p.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(ANNOTATION_SAFETY_NET))
        }));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(pods);
        }
    }
}

/// The Warning Events that say why: the webhook's refusals and the safety net's.
async fn warnings(client: &Client, ns: Option<&str>) -> Result<Vec<Event>, String> {
    let api = match ns {
        Some(ns) => Api::<Event>::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let lp = ListParams::default().fields("type=Warning");
    let list = answer(Access::new("list", "events").in_ns(ns), api.list(&lp).await)
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(REFUSED) || e.action.as_deref() == Some(ACTION))
        .collect())
}

/// Whether a controller Deployment runs the safety net: its `--controllers` lists it, or it
/// sets none (the default list has it).
fn runs_the_net(d: &Deployment) -> bool {
    let containers = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let args: Vec<&String> = containers
        .iter()
        .flat_map(|c| c.args.iter().flatten())
        .collect();
    let listed = args.iter().find_map(|a| a.strip_prefix("--controllers="));
    listed.is_none_or(|l| l.split(',').any(|c| c.trim() == "safety-net"))
}

/// A finding per pod the net ended or is ending, per pod whose sidecars it cannot end, and
/// per controller Deployment running without it (`off`).
pub fn findings(pods: &[Pod], events: &[Event], off: &[String], sexton_ns: &str) -> Vec<Finding> {
    let mut out: Vec<Finding> = pods.iter().filter_map(|p| netted(p, events)).collect();
    out.extend(cannot_end(events));
    out.extend(off.iter().map(|d| {
        Finding::new(
            Status::Warning,
            format!("deployment {sexton_ns}/{d}"),
            "the controller runs without the safety net: Job pods that sexton's webhook serves but admitted unchanged keep their sidecars for ever",
        )
        .fix("helm upgrade ... --set controller.safetyNet.enabled=true (it needs webhook.enabled)")
    }));
    out
}

/// The finding for a pod with the net's record.
fn netted(pod: &Pod, events: &[Event]) -> Option<Finding> {
    let record = Record::of(pod.metadata.annotations.as_ref())?;
    let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let job = job_of(pod);
    let object = match &job {
        Some(j) => format!("pod {ns}/{name} (Job {j})"),
        None => format!("pod {ns}/{name}"),
    };
    let running: Vec<&String> = record.sidecars.iter().filter(|s| !ended(pod, s)).collect();
    let done = matches!(phase(pod), "Succeeded" | "Failed") || running.is_empty();
    let what = match done {
        true => format!("the safety net ended its sidecar(s) {:?}", record.sidecars),
        false => format!(
            "the safety net is ending its sidecar(s) {:?} (in this order; {running:?} not ended yet)",
            record.sidecars
        ),
    };
    let why = why(&record, job.as_deref(), events);
    let (status, fix) = match record.cause {
        // new pods are injected: nothing to do
        Cause::NamespaceLabelledLater => (Status::Ok, None),
        Cause::NotInjected => (
            Status::Warning,
            Some(
                "kubectl get pods -A -l app.kubernetes.io/name=sexton-webhook (are the webhook's replicas ready, and did one restart?)"
                    .to_string(),
            ),
        ),
        Cause::NotRecognised => (
            Status::Warning,
            Some("give the webhook the controller's catalogue: the chart's recognition values apply to both".into()),
        ),
        Cause::AddedAfterAdmission => (
            Status::Warning,
            Some(format!(
                "kubectl get events -n {ns} --field-selector involvedObject.name={name},type=Warning"
            )),
        ),
    };
    let f = Finding::new(status, object, format!("{what}; {why}"));
    Some(match fix {
        Some(fix) => f.fix(fix),
        None => f,
    })
}

/// Why admission missed the pod: the record's cause, and for a pod admitted unchanged the
/// webhook's refusal on its Job, if there is one.
fn why(record: &Record, job: Option<&str>, events: &[Event]) -> String {
    let explained = record.cause.explain(&record.detail);
    if record.cause != Cause::NotInjected {
        return explained;
    }
    let refusal = job.and_then(|j| {
        events.iter().find(|e| {
            e.reason.as_deref() == Some(REFUSED)
                && e.involved_object.kind.as_deref() == Some("Job")
                && e.involved_object.name.as_deref() == Some(j)
        })
    });
    match (refusal, job) {
        (Some(e), _) => format!(
            "not injected at admission: sexton's webhook refused it: {}",
            e.message.as_deref().unwrap_or_default()
        ),
        (None, Some(j)) => format!(
            "not injected at admission: sexton's webhook serves it, and its Job {j} has no InjectRefused Event, so most likely no replica of the webhook answered in time when the pod was created"
        ),
        (None, None) => explained,
    }
}

/// A finding for each pod whose sidecars the net cannot end (its Warning Events on pods).
fn cannot_end(events: &[Event]) -> Vec<Finding> {
    let mut seen: Vec<(String, String)> = vec![];
    let mut out = vec![];
    for e in events.iter().filter(|e| {
        e.action.as_deref() == Some(ACTION) && e.involved_object.kind.as_deref() == Some("Pod")
    }) {
        let o = &e.involved_object;
        let key = (
            o.namespace.clone().unwrap_or_default(),
            o.name.clone().unwrap_or_default(),
        );
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        out.push(
            Finding::new(
                Status::Error,
                format!("pod {}/{}", key.0, key.1),
                format!(
                    "{}: {}",
                    e.reason.as_deref().unwrap_or_default(),
                    e.message.as_deref().unwrap_or_default()
                ),
            )
            .fix(format!(
                "make the pod again while sexton's webhook answers: kubectl delete pod -n {} {} (its Job makes another; its work is done again), or kubectl sexton inject -f MANIFEST where the sidecar is in the manifest",
                key.0, key.1
            )),
        );
    }
    out
}

fn job_of(pod: &Pod) -> Option<String> {
    pod.owner_references()
        .iter()
        .find(|o| o.kind == "Job")
        .map(|o| o.name.clone())
}

/// Whether container `name` has terminated.
fn ended(pod: &Pod, name: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|l| l.iter().find(|s| s.name == name))
        .and_then(|s| s.state.as_ref())
        .is_some_and(|s| s.terminated.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, record: Option<&str>, phase: &str, states: &[(&str, bool)]) -> Pod {
        let statuses: Vec<_> = states
            .iter()
            .map(|(n, ended)| {
                let state = match ended {
                    true => json!({"terminated": {"exitCode": 0}}),
                    false => json!({"running": {}}),
                };
                json!({"name": n, "image": "x", "state": state})
            })
            .collect();
        let mut p = json!({
            "metadata": {"name": name, "namespace": "ns", "annotations": {},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("{name}-job"), "uid": "u"}]},
            "spec": {"restartPolicy": "Never", "containers": []},
            "status": {"phase": phase, "containerStatuses": statuses},
        });
        if let Some(r) = record {
            p["metadata"]["annotations"]["sexton.dev/safety-net"] = json!(r);
        }
        serde_json::from_value(p).unwrap()
    }

    fn event(kind: &str, name: &str, reason: &str, action: &str, message: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{name}.1"), "namespace": "ns"},
            "involvedObject": {"kind": kind, "name": name, "namespace": "ns"},
            "reason": reason, "action": action, "message": message, "type": "Warning",
        }))
        .unwrap()
    }

    #[test]
    fn pods_ended_or_ending_and_why_admission_missed_them() {
        let down = r#"{"cause":"NotInjected","sidecars":["proxy","logs"]}"#;
        let later =
            r#"{"cause":"NamespaceLabelledLater","sidecars":["proxy"],"detail":"labelled at T"}"#;
        let pods = [
            pod(
                "ending",
                Some(down),
                "Running",
                &[("main", true), ("proxy", true), ("logs", false)],
            ),
            pod(
                "ended",
                Some(down),
                "Succeeded",
                &[("main", true), ("proxy", true), ("logs", true)],
            ),
            pod("later", Some(later), "Succeeded", &[]),
            pod("untouched", None, "Running", &[]),
        ];
        let events = [event(
            "Job",
            "ended-job",
            "InjectRefused",
            "",
            "sexton: pod admitted unchanged: more than 64 containers",
        )];
        let f = findings(&pods, &events, &[], "sexton-system");
        assert_eq!(f.len(), 3, "{f:#?}");
        assert_eq!(f[0].object, "pod ns/ending (Job ending-job)");
        assert_eq!(f[0].status, Status::Warning);
        assert!(
            f[0].message.starts_with("the safety net is ending its sidecar(s) [\"proxy\", \"logs\"] (in this order; [\"logs\"] not ended yet)")
                && f[0].message.contains("its Job ending-job has no InjectRefused Event, so most likely no replica of the webhook answered in time"),
            "{}",
            f[0].message
        );
        assert!(
            f[1].message.starts_with("the safety net ended its sidecar(s)")
                && f[1].message.ends_with("sexton's webhook refused it: sexton: pod admitted unchanged: more than 64 containers"),
            "{}",
            f[1].message
        );
        assert_eq!((f[2].status, f[2].fix.as_deref()), (Status::Ok, None));
        assert!(
            f[2].message.contains(
                "labelled for sexton's webhook after the Pod was created (labelled at T)"
            )
        );
    }

    #[test]
    fn pods_it_cannot_end_and_a_controller_without_it() {
        let events = [
            event(
                "Pod",
                "p",
                "SwapRefusedCommand",
                "SafetyNet",
                "the safety net cannot end this Pod's sidecars",
            ),
            // the same pod's Event again (another container), and the Job's copy
            event("Pod", "p", "SwapRefusedPostStart", "SafetyNet", "..."),
            event("Job", "j", "SwapRefusedCommand", "SafetyNet", "..."),
            // the SidecarTerminator's, not the net's
            event("Pod", "q", "SwapRefusedCommand", "SwapImage", "..."),
        ];
        let f = findings(&[], &events, &["sexton-controller".into()], "sexton-system");
        assert_eq!(f.len(), 2, "{f:#?}");
        assert_eq!(
            (f[0].status, f[0].object.as_str()),
            (Status::Error, "pod ns/p")
        );
        assert!(
            f[0].message
                .starts_with("SwapRefusedCommand: the safety net cannot end")
        );
        assert!(
            f[0].fix.as_deref().is_some_and(|x| x.starts_with(
                "make the pod again while sexton's webhook answers: kubectl delete pod -n ns p "
            )),
            "{:?}",
            f[0].fix
        );
        assert_eq!(f[1].object, "deployment sexton-system/sexton-controller");
    }

    #[test]
    fn whether_a_deployment_runs_the_net() {
        let d = |args: serde_json::Value| -> Deployment {
            serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {"selector": {},
                "template": {"spec": {"containers": [{"name": "controller", "args": args}]}}}}))
            .unwrap()
        };
        assert!(runs_the_net(&d(json!(["controller"]))), "the default list");
        assert!(runs_the_net(&d(json!([
            "controller",
            "--controllers=sidecar-terminator,safety-net"
        ]))));
        assert!(!runs_the_net(&d(json!([
            "controller",
            "--controllers=sidecar-terminator,ephemeraljob"
        ]))));
    }
}
