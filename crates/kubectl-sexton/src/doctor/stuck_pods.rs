//! Pods stuck with their work done: by the one rule the controller's stuck-pod detection
//! uses (`crate::shared::stuck`), pods whose main containers all ended longer ago than
//! `--stuck-after` while others still run and keep them Running. Each is named with its
//! Job (if it has one), the containers still running (a vendor's injected sidecar with its
//! vendor and marker: sexton's webhook ends those with no declaration), and the fix.

use crate::shared::pod::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use sexton_inject::{Catalogue, Source};

use super::access::{Access, answer};
use super::ctx::Ctx;
use super::found::{self, Place};
use super::pods;
use super::reduced::RunPod;
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
    // the vendors' sidecars are read from the pods as the injected-sidecars check lists
    // them (once for both); unreadable, they go unnamed, and that check says why
    let reduced: &[RunPod] = match ctx.catalogue.vendors.is_empty() {
        true => &[],
        false => pods::running(ctx)
            .await
            .as_ref()
            .map_or(&[], |p| p.as_slice()),
    };
    let findings = findings(
        &pods,
        Timestamp::now(),
        ctx.stuck_after,
        reduced,
        &ctx.catalogue,
    );
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

/// A finding for each stuck pod, by the shared rule; `reduced` has the pods whose vendors'
/// sidecars are to be named (`catalogue`).
pub fn findings(
    pods: &[Pod],
    now: Timestamp,
    after: std::time::Duration,
    reduced: &[RunPod],
    catalogue: &Catalogue,
) -> Vec<Finding> {
    pods.iter()
        .filter_map(|p| {
            let s = stuck(p, now, after)?;
            let vendors = vendors(p, &s, reduced, catalogue);
            Some(finding(p, &s, &vendors))
        })
        .collect()
}

/// `(container, "Istio, annotation sidecar.istio.io/status")` for each container still
/// running that is a vendor's injected sidecar.
fn vendors(
    pod: &Pod,
    s: &Stuck,
    reduced: &[RunPod],
    catalogue: &Catalogue,
) -> Vec<(String, String)> {
    let ns = pod.namespace().unwrap_or_default();
    let Some(r) = reduced
        .iter()
        .find(|r| r.namespace == ns && r.name == pod.name_any())
    else {
        return vec![];
    };
    found::in_pod(&r.object, catalogue)
        .into_iter()
        .filter(|f| f.place == Place::Containers && s.teardown.running.contains(&f.container))
        .map(|f| (f.container, format!("{}, {}", f.vendor.name, f.evidence)))
        .collect()
}

fn finding(pod: &Pod, s: &Stuck, vendors: &[(String, String)]) -> Finding {
    let (ns, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
    let job = pod
        .owner_references()
        .iter()
        .find(|o| o.kind == "Job")
        .map(|o| format!(" (Job {})", o.name))
        .unwrap_or_default();
    let object = format!("pod {ns}/{name}{job}");
    let t = &s.teardown;
    let named: Vec<String> = vendors
        .iter()
        .map(|(c, v)| format!("{c:?} is an injected sidecar ({v})"))
        .collect();
    if !vendors.is_empty() && t.declared.is_none() {
        // the vendors' sidecars are not in the workload's manifest: only the webhook can
        // end them, and it needs no declaration
        let others: Vec<&String> = t
            .running
            .iter()
            .filter(|r| !vendors.iter().any(|(c, _)| c == *r))
            .collect();
        let label = format!("kubectl label namespace {ns} sexton.dev/inject=enabled");
        let mut message = format!(
            "{}; {}: sexton's webhook ends it with no declaration in new pods of namespaces labelled sexton.dev/inject=enabled (the injected-sidecars check says whether this one is)",
            s.what(),
            named.join(", ")
        );
        let mut fix = label;
        if !others.is_empty() {
            let flags: Vec<&str> = others.iter().map(|o| o.as_str()).collect();
            let inject = format!(
                "kubectl sexton inject --sidecar {} -f MANIFEST",
                flags.join(" --sidecar ")
            );
            message.push_str(&format!(
                "; nothing declares {others:?} sidecars: inject the workload ({inject})"
            ));
            fix = format!("{fix}, and: {inject}");
        }
        return Finding::new(Status::Error, object, message).fix(fix);
    }
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
    let mut message = s.message();
    if !named.is_empty() {
        message.push_str(&format!("; {}", named.join(", ")));
    }
    Finding::new(Status::Error, object, message).fix(fix)
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
        let f = findings(
            &[pod(json!([]), true)],
            now,
            minute,
            &[],
            &Catalogue::default(),
        );
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
        let f = findings(
            &[pod(marked, false)],
            now,
            minute,
            &[],
            &Catalogue::default(),
        );
        assert_eq!(f[0].object, "pod ns/p");
        assert!(
            f[0].fix
                .as_deref()
                .unwrap()
                .starts_with("kubectl get events -n ns")
        );
        // under the threshold: nothing
        assert!(
            findings(
                &[pod(json!([]), true)],
                now,
                3 * minute,
                &[],
                &Catalogue::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn a_vendors_injected_sidecar_is_named_and_the_fix_is_the_webhooks() {
        let now: Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        let status = |c: &str, state: serde_json::Value| json!({"name": c, "image": "x", "imageID": "", "ready": false, "restartCount": 0, "state": state});
        let full = json!({
            "metadata": {"name": "p", "namespace": "ns", "annotations": {"sidecar.istio.io/status": "{}"}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "x"}, {"name": "istio-proxy", "image": "x"}, {"name": "logs", "image": "x"}]},
            "status": {"phase": "Running", "containerStatuses": [
                status("main", json!({"terminated": {"exitCode": 0, "finishedAt": "2026-11-25T09:58:00Z"}})),
                status("istio-proxy", json!({"running": {}})),
                status("logs", json!({"running": {}}))]},
        });
        let pod: Pod = serde_json::from_value(full.clone()).unwrap();
        let catalogue = Catalogue::default();
        let reduced = crate::doctor::reduced::reduce(
            &full,
            &crate::doctor::reduced::annotation_keys(&catalogue),
        )
        .unwrap();
        let minute = std::time::Duration::from_secs(60);
        let f = findings(
            std::slice::from_ref(&pod),
            now,
            minute,
            &[reduced],
            &catalogue,
        );
        assert!(
            f[0].message.contains("; \"istio-proxy\" is an injected sidecar (Istio, annotation sidecar.istio.io/status): sexton's webhook ends it with no declaration")
                && f[0].message.contains("nothing declares [\"logs\"] sidecars"),
            "{}",
            f[0].message
        );
        assert_eq!(
            f[0].fix.as_deref(),
            Some(
                "kubectl label namespace ns sexton.dev/inject=enabled, and: kubectl sexton inject --sidecar logs -f MANIFEST"
            )
        );
        // without the pod's markers (unreadable), the shared rule's advice, as before
        let f = findings(std::slice::from_ref(&pod), now, minute, &[], &catalogue);
        assert_eq!(
            f[0].fix.as_deref(),
            Some("kubectl sexton inject --sidecar istio-proxy --sidecar logs -f MANIFEST")
        );
    }
}
