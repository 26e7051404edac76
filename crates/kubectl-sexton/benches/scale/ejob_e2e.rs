//! The EphemeralJob end to end: a job selecting every pod of the namespace, with
//! `parallelism` as high as the number of pods (every target may be injected at once), from
//! the API server's answer to its creation until the harness's pod watch has seen every
//! target's ephemeral container (the API server accepted each before it was watched).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event, watcher};
use serde::Serialize;
use serde_json::json;
use tokio::sync::oneshot;

use crate::ephemeraljob::{ANNOTATION_REQUESTER, ENV_JOB_NAME, EphemeralJob, Requester};
use crate::error::{Result, ctx};
use crate::pods::{LABEL, MAIN};

#[derive(Debug, Clone, Serialize)]
pub struct EjobResult {
    pub targets: usize,
    pub parallelism: i32,
    /// creation answered → first target's containers seen (s)
    pub first_s: Option<f64>,
    /// creation answered → the given share of targets seen (s): 10 %, 50 %, 90 %, 100 %
    pub p10_s: Option<f64>,
    pub p50_s: Option<f64>,
    pub p90_s: Option<f64>,
    pub all_s: Option<f64>,
    pub injected: usize,
    /// targets per second between the first and the last injection seen
    pub per_sec: Option<f64>,
    /// creation answered → the job's status counts every target (waiting + running) (s)
    pub status_s: Option<f64>,
    pub status: serde_json::Value,
}

fn job(ns: &str, name: &str, parallelism: i32) -> EphemeralJob {
    serde_json::from_value(json!({
        "apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {LABEL.0: LABEL.1}},
            "parallelism": parallelism,
            "ttlSecondsAfterFinished": 600,
            "template": {"ephemeralContainers": [{
                "name": "probe", "image": "busybox:1.36",
                "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File",
                "targetContainerName": MAIN, "command": ["sh", "-c", "pgrep -x report >/dev/null"]
            }]}
        }
    }))
    .expect("ejob literal")
}

/// The requester stamp of the harness's own user (the controller acts only for a stamped
/// requester; the test control plane runs no webhook to write it).
async fn own_stamp(client: &Client) -> Result<String> {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &Default::default())
        .await
        .map_err(ctx("asking who the harness is (SelfSubjectReview)"))?;
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    Ok(Requester::from_user_info(&user).stamp())
}

/// The requester policy of deploy/, bound to `ns` alone, and in force (a forged stamp is
/// refused on a dry run): the controller acts on a stamp only where a change of it would be
/// refused, which it asks the API server before its first injection (`stamp_guard.rs`).
async fn protect_stamps(client: &Client, ns: &str) -> Result<()> {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/ephemeraljob-requester.yaml"
    );
    let yaml = std::fs::read_to_string(file).map_err(ctx(format!("reading {file}")))?;
    let first = yaml.split("\n---\n").next().unwrap_or_default();
    let policy: ValidatingAdmissionPolicy =
        serde_saphyr::from_str(first).map_err(ctx(format!("reading the policy of {file}")))?;
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": format!("sexton-bench-{ns}")},
        "spec": {"policyName": policy.metadata.name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}
    }))
    .expect("binding literal");
    let apply = PatchParams::apply("sexton-bench").force();
    let name = policy.metadata.name.clone().unwrap_or_default();
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .patch(&name, &apply, &Patch::Apply(&policy))
        .await
        .map_err(ctx("applying the requester policy"))?;
    let bname = binding.metadata.name.clone().unwrap_or_default();
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .patch(&bname, &apply, &Patch::Apply(&binding))
        .await
        .map_err(ctx("binding the requester policy"))?;
    let mut forged = job(ns, "forged", 1);
    forged.metadata.annotations =
        Some([(ANNOTATION_REQUESTER.to_string(), "user=nobody".to_string())].into());
    let jobs: Api<EphemeralJob> = Api::namespaced(client.clone(), ns);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        match jobs.create(&dry_run, &forged).await {
            Err(kube::Error::Api(e)) if e.message.contains(&name) => return Ok(()),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    Err(format!("the requester policy {name} is not in force in {ns} after 30 s").into())
}

fn ours(pod: &Pod, job: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|ecs| {
            ecs.iter().any(|c| {
                c.env
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|e| e.name == ENV_JOB_NAME && e.value.as_deref() == Some(job))
            })
        })
}

pub async fn run(
    client: &Client,
    ns: &str,
    name: &str,
    targets: usize,
    limit: Duration,
) -> Result<EjobResult> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let jobs: Api<EphemeralJob> = Api::namespaced(client.clone(), ns);
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let (tx, rx) = oneshot::channel();
    let (s2, job_name) = (seen.clone(), name.to_string());
    let watch = tokio::spawn(async move {
        let mut tx = Some(tx);
        let mut s = watcher(pods, watcher::Config::default()).boxed();
        while let Some(ev) = s.next().await {
            let now = Instant::now();
            match ev {
                Ok(Event::Apply(p)) if ours(&p, &job_name) => {
                    let n = p.metadata.name.clone().unwrap_or_default();
                    s2.lock().unwrap().entry(n).or_insert(now);
                }
                Ok(Event::InitDone) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("scale: harness watch: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(120), rx)
        .await
        .map_err(|_| "the harness's pod watch did not list the pods within 120 s".to_string())?
        .map_err(|_| "the harness's pod watch ended".to_string())?;

    protect_stamps(client, ns).await?;
    let parallelism = targets as i32;
    let mut job = job(ns, name, parallelism);
    job.metadata.annotations =
        Some([(ANNOTATION_REQUESTER.to_string(), own_stamp(client).await?)].into());
    jobs.create(&PostParams::default(), &job)
        .await
        .map_err(ctx("creating the EphemeralJob"))?;
    let created = Instant::now();
    let end = created + limit;
    while Instant::now() < end && seen.lock().unwrap().len() < targets {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // the job's status, once it counts every target
    let mut status_s = None;
    let mut status = serde_json::Value::Null;
    let status_end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < status_end {
        if let Ok(j) = jobs.get(name).await {
            status = serde_json::to_value(&j.status).unwrap_or_default();
            let s = j.status.unwrap_or_default();
            if (s.waiting + s.running + s.succeeded + s.failed) as usize >= targets {
                status_s = Some(created.elapsed().as_secs_f64());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    watch.abort();
    let _ = jobs.delete(name, &DeleteParams::default()).await;

    let mut times: Vec<f64> = seen
        .lock()
        .unwrap()
        .values()
        .map(|t| t.saturating_duration_since(created).as_secs_f64())
        .collect();
    times.sort_by(|a, b| a.total_cmp(b));
    let share = |p: f64| -> Option<f64> {
        let k = ((p * targets as f64).ceil() as usize).max(1);
        times.get(k - 1).copied()
    };
    let per_sec = match (times.first(), times.last()) {
        (Some(a), Some(b)) if b > a => Some((times.len() - 1) as f64 / (b - a)),
        _ => None,
    };
    Ok(EjobResult {
        targets,
        parallelism,
        first_s: times.first().copied(),
        p10_s: share(0.10),
        p50_s: share(0.50),
        p90_s: share(0.90),
        all_s: share(1.0),
        injected: times.len(),
        per_sec,
        status_s,
        status,
    })
}
