//! Pods stuck with their work done: by the one rule the controller's stuck-pod detection
//! uses (`crate::shared::stuck`), pods whose main containers all ended longer ago than
//! `--stuck-after` while others still run and keep them Running. Each is named with its
//! Job (if it has one), the containers still running, and the fix.

use crate::shared::pod::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use sexton_inject::Source;

use super::access::{Access, answer};
use super::ctx::Ctx;
use super::report::{Check, Finding, Status};
use crate::shared::stuck::{Stuck, stuck};

pub const NAME: &str = "stuck-pods";

pub async fn check(ctx: &Ctx) -> Check {
    let ns = ctx.namespaces.one();
    let api = match ns {
        Some(ns) => Api::<Pod>::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    // only pods that can be stuck: Running ones
    let lp = ListParams::default().fields("status.phase=Running");
    let pods = match answer(Access::new("list", "pods").in_ns(ns), api.list(&lp).await) {
        Ok(p) => p.items,
        Err(e) => return Check::failed(NAME, "pods", e.to_string()),
    };
    let findings = findings(&pods, Timestamp::now(), ctx.stuck_after);
    let after = sexton_core::duration::format_go_duration(ctx.stuck_after);
    let summary = match findings.len() {
        0 => format!(
            "none of the {} Running pod(s) has had its main containers done for more than {after}",
            pods.len()
        ),
        n => format!(
            "{n} pod(s) kept Running by sidecars for more than {after} after their main containers ended"
        ),
    };
    Check::new(NAME, summary, findings)
}

/// A finding for each stuck pod, by the shared rule.
pub fn findings(pods: &[Pod], now: Timestamp, after: std::time::Duration) -> Vec<Finding> {
    pods.iter()
        .filter_map(|p| stuck(p, now, after).map(|s| finding(p, &s)))
        .collect()
}

fn finding(pod: &Pod, s: &Stuck) -> Finding {
    let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let job = pod
        .owner_references()
        .iter()
        .find(|o| o.kind == "Job")
        .map(|o| format!(" (Job {})", o.name))
        .unwrap_or_default();
    let t = &s.teardown;
    let fix = match t.declared {
        None => format!(
            "kubectl sexton inject --sidecar {} -f MANIFEST",
            t.running.join(" --sidecar ")
        ),
        Some(Source::KruiseMarkers) => format!(
            "kubectl get events -n {ns} --field-selector involvedObject.name={name},type=Warning"
        ),
        Some(_) => "kubectl sexton inject -f MANIFEST".to_string(),
    };
    Finding::new(Status::Error, format!("pod {ns}/{name}{job}"), s.message()).fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(env: serde_json::Value, owner: bool) -> Pod {
        let mut p = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "x"}, {"name": "proxy", "image": "x", "env": env}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-25T09:58:00Z"}}},
                {"name": "proxy", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {}}}]},
        });
        if owner {
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]);
        }
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn stuck_pods_name_their_job_running_sidecars_and_fix() {
        let now: Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        let minute = std::time::Duration::from_secs(60);
        let f = findings(&[pod(json!([]), true)], now, minute);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].object, "pod ns/p (Job j)");
        assert!(
            f[0].message.contains("[\"proxy\"] still run"),
            "{}",
            f[0].message
        );
        assert_eq!(
            f[0].fix.as_deref(),
            Some("kubectl sexton inject --sidecar proxy -f MANIFEST")
        );
        let marked = json!([{"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}]);
        let f = findings(&[pod(marked, false)], now, minute);
        assert_eq!(f[0].object, "pod ns/p");
        assert!(
            f[0].fix
                .as_deref()
                .unwrap()
                .starts_with("kubectl get events -n ns")
        );
        // under the threshold: nothing
        assert!(findings(&[pod(json!([]), true)], now, 3 * minute).is_empty());
    }
}
