//! The `injected-sidecars` check: per Job of the checked namespaces, the sidecars other
//! vendors' webhooks injected into its pods (the catalogue: container name and the pod's
//! marker), and whether each will be ended and how (`ended.rs`). A Job is judged by its
//! newest pod that is not done; Jobs without one, and CronJobs, by their template when it
//! asks a vendor's webhook for its sidecar (the vendor's trigger, such as Vault's
//! `vault.hashicorp.com/agent-inject: "true"`).

use std::collections::BTreeMap;

use kube::ResourceExt;
use serde_json::Value;

use super::access::AccessError;
use super::ctx::{Ctx, Workloads};
use super::ended::{self, At};
use super::found::{self, Found, Place};
use super::pods;
use super::reduced::RunPod;
use super::report::{Check, Finding, Status};
use super::webhooks::{self, Serving};
use super::workloads;

pub const NAME: &str = "injected-sidecars";

/// A Job's or CronJob's pod template: `job NS/NAME` (with its CronJob) or `cronjob NS/NAME`.
struct Template {
    object: String,
    namespace: String,
    job: Option<String>,
    finished: bool,
    template: Value,
}

pub async fn check(ctx: &Ctx) -> Check {
    let vendors = ctx.catalogue.vendors.len();
    if vendors == 0 {
        return Check::new(
            NAME,
            "recognition is off (--recognise=false): no vendor's injected sidecar is looked for",
            vec![],
        );
    }
    let pods = match pods::running(ctx).await {
        Ok(p) => p,
        Err(e) => return Check::failed(NAME, "pods", e.to_string()),
    };
    let configs = webhooks::configurations(ctx).await;
    let chain = configs.as_ref().ok().map(|c| webhooks::chain(c));
    let mut namespaces = Labels::default();
    let mut findings = vec![];
    let newest = newest_per_job(pods);
    let (templates, refused) = match templates(ctx).await {
        Ok(t) => (t, None),
        Err(e) => (
            vec![],
            Some(Finding::new(Status::Error, "jobs", e.to_string())),
        ),
    };
    for ((ns, job), (pod, count)) in &newest {
        let found = found::in_pod(&pod.object, &ctx.catalogue);
        if found.is_empty() {
            continue;
        }
        let serving = namespaces.serving(ctx, configs, ns, &pod.object).await;
        let at = At {
            ns,
            serving: &serving,
            chain: chain.as_ref(),
        };
        let owner = templates
            .iter()
            .find(|t| t.namespace == *ns && t.job.as_deref() == Some(job))
            .map_or(format!("job {ns}/{job}"), |t| t.object.clone());
        let lead = match count {
            1 => format!("pod {}", pod.name),
            n => format!("pod {} (the newest of {n})", pod.name),
        };
        findings.extend(ended::finding(
            owner,
            &lead,
            &found,
            at,
            &pod.object,
            Some(&pod.name),
        ));
    }
    for t in &templates {
        let has_pod = t
            .job
            .as_ref()
            .is_some_and(|j| newest.contains_key(&(t.namespace.clone(), j.clone())));
        if has_pod || t.finished {
            continue;
        }
        let found = in_template(&t.template, &ctx.catalogue);
        if found.is_empty() {
            continue;
        }
        let serving = namespaces
            .serving(ctx, configs, &t.namespace, &t.template)
            .await;
        let at = At {
            ns: &t.namespace,
            serving: &serving,
            chain: chain.as_ref(),
        };
        findings.extend(ended::finding(
            t.object.clone(),
            "its pod template",
            &found,
            at,
            &t.template,
            None,
        ));
    }
    let summary = summary(&findings, newest.len(), vendors);
    findings.extend(refused);
    Check::new(NAME, summary, findings)
}

fn summary(findings: &[Finding], jobs: usize, vendors: usize) -> String {
    let not = findings.iter().filter(|f| f.status != Status::Ok).count();
    match findings.len() {
        0 => format!(
            "no Job of the checked namespaces has a vendor's injected sidecar ({jobs} Job(s) with pods not done; {vendors} vendors in the catalogue)"
        ),
        n => format!(
            "{n} Job(s) or CronJob(s) with vendors' injected sidecars: {} ended, {not} not",
            n - not
        ),
    }
}

/// The newest pod of each Job (`(namespace, job)`), and how many it has.
fn newest_per_job(pods: &[RunPod]) -> BTreeMap<(String, String), (&RunPod, usize)> {
    let mut newest: BTreeMap<(String, String), (&RunPod, usize)> = BTreeMap::new();
    for p in pods {
        let Some(job) = &p.job else { continue };
        let entry = newest
            .entry((p.namespace.clone(), job.clone()))
            .or_insert((p, 0));
        entry.1 += 1;
        if (p.created.as_str(), p.name.as_str()) > (entry.0.created.as_str(), entry.0.name.as_str())
        {
            entry.0 = p;
        }
    }
    newest
}

/// A template's sidecars: those it already has (as coming: its pods are not admitted yet)
/// and those it asks a vendor's webhook for.
fn in_template<'c>(t: &Value, catalogue: &'c sexton_inject::Catalogue) -> Vec<Found<'c>> {
    let mut found = found::in_pod(t, catalogue);
    for f in &mut found {
        if f.place == Place::Containers {
            f.place = Place::Coming;
        }
    }
    found.extend(found::asked(t, catalogue));
    found
}

/// The namespaces' labels, each read once.
#[derive(Default)]
struct Labels(BTreeMap<String, Result<BTreeMap<String, String>, String>>);

impl Labels {
    /// How sexton's webhook serves `pod` (its labels, for objectSelectors) in `ns`.
    async fn serving(
        &mut self,
        ctx: &Ctx,
        configs: &Result<
            Vec<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>,
            AccessError,
        >,
        ns: &str,
        pod: &Value,
    ) -> Serving {
        let configs = match configs {
            Ok(c) => c,
            Err(e) => return Serving::Unknown(e.to_string()),
        };
        if !self.0.contains_key(ns) {
            let got = webhooks::namespace_labels(ctx, ns).await;
            let got = got
                .map(Option::unwrap_or_default)
                .map_err(|e| e.to_string());
            self.0.insert(ns.to_string(), got);
        }
        let labels = match &self.0[ns] {
            Ok(l) => l,
            Err(e) => return Serving::Unknown(e.clone()),
        };
        let pod_labels: BTreeMap<String, String> =
            serde_json::from_value(pod["metadata"]["labels"].clone()).unwrap_or_default();
        webhooks::serving(configs, labels, &pod_labels)
    }
}

/// The Jobs' and CronJobs' templates of the checked namespaces.
async fn templates(ctx: &Ctx) -> Result<Vec<Template>, &AccessError> {
    let Workloads { jobs, cronjobs } = workloads::listed(ctx).await.as_ref()?;
    let mut out = vec![];
    for j in jobs {
        let (namespace, name) = (j.namespace().unwrap_or_default(), j.name_any());
        let cron = j
            .owner_references()
            .iter()
            .find(|o| o.kind == "CronJob")
            .map(|o| format!(" (CronJob {})", o.name))
            .unwrap_or_default();
        let finished = j
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
        let Some(spec) = &j.spec else { continue };
        out.push(Template {
            object: format!("job {namespace}/{name}{cron}"),
            job: Some(name),
            namespace,
            finished,
            template: serde_json::to_value(&spec.template).unwrap_or_default(),
        });
    }
    for c in cronjobs {
        let (namespace, name) = (c.namespace().unwrap_or_default(), c.name_any());
        let Some(t) = c.spec.as_ref().and_then(|s| s.job_template.spec.as_ref()) else {
            continue;
        };
        out.push(Template {
            object: format!("cronjob {namespace}/{name}"),
            job: None,
            namespace,
            finished: false,
            template: serde_json::to_value(&t.template).unwrap_or_default(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, job: Option<&str>, created: &str) -> RunPod {
        RunPod {
            namespace: "ns".into(),
            name: name.into(),
            job: job.map(str::to_string),
            created: created.into(),
            object: json!({}),
        }
    }

    #[test]
    fn a_job_is_judged_by_its_newest_pod() {
        let pods = [
            pod("j-new", Some("j"), "2026-11-28T10:00:05Z"),
            pod("j-old", Some("j"), "2026-11-28T10:00:00Z"),
            pod("bare", None, "2026-11-28T10:00:09Z"),
            pod("k-1", Some("k"), "2026-11-28T10:00:00Z"),
        ];
        let newest = newest_per_job(&pods);
        let got: Vec<(&str, &str, usize)> = newest
            .iter()
            .map(|((_, job), (p, n))| (job.as_str(), p.name.as_str(), *n))
            .collect();
        assert_eq!(got, [("j", "j-new", 2), ("k", "k-1", 1)]);
    }

    #[test]
    fn a_templates_own_sidecars_are_coming_as_are_those_it_asks_for() {
        let c = sexton_inject::Catalogue::default();
        let t = json!({"metadata": {"annotations": {"sidecar.istio.io/status": "{}",
                "vault.hashicorp.com/agent-inject": "true"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main"}, {"name": "istio-proxy"}]}});
        let found: Vec<(String, Place)> = in_template(&t, &c)
            .into_iter()
            .map(|f| (f.container, f.place))
            .collect();
        assert_eq!(
            found,
            [
                ("istio-proxy".to_string(), Place::Coming),
                ("vault-agent".to_string(), Place::Coming)
            ]
        );
    }
}
