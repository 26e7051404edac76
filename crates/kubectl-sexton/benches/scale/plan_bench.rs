//! The EphemeralJob's pure planning function (`plan`, src/controller/ejob/plan.rs) timed in
//! memory, on pods built like the cluster part's (same spec and status as the API server
//! returns them, less its defaulted fields), held as the reconciler holds them (`Arc<pod::Pod>`
//! from the cache).

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::json;

use crate::ephemeraljob::{EphemeralJob, EphemeralJobStatus, Refused};
use crate::error::{Result, ctx};
use crate::plan::{containers_for, plan};
use crate::pods::{name, pod, running_status};
use crate::stats::{Summary, summary};

#[derive(clap::Args, Default)]
pub struct Opts {
    /// Numbers of pods (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1000, 10000])]
    pub sizes: Vec<usize>,
    /// Least time spent on each case (seconds); at least 10 runs each.
    #[arg(long, default_value_t = 1.0)]
    pub secs: f64,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    #[arg(long)]
    pub md: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub pods: usize,
    pub case: &'static str,
    pub what: &'static str,
    pub runs: usize,
    pub ms: Summary,
    /// targets planned for injection now
    pub inject: usize,
}

const NS: &str = "scale";

fn job(parallelism: i32, refused: usize) -> EphemeralJob {
    let mut j: EphemeralJob = serde_json::from_value(json!({
        "apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob",
        "metadata": {"name": "check", "namespace": NS, "uid": "0b7c2a4e-5f1d-4c39-9a57-3e1f0f6b2d11",
                     "generation": 1, "creationTimestamp": "2026-11-25T00:00:00Z"},
        "spec": {
            "selector": {"matchLabels": {"app": "scale"}},
            "parallelism": parallelism,
            "template": {"ephemeralContainers": [{
                "name": "probe", "image": "busybox:1.36",
                "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File",
                "targetContainerName": "main", "command": ["sh", "-c", "pgrep -x report"]
            }]}
        }
    }))
    .expect("job literal");
    if refused > 0 {
        let refused: Vec<Refused> = (0..refused)
            .map(|i| Refused {
                pod: format!("gone-{i:05}"),
                message: "the API server refused the ephemeral containers for pod gone: Pod \"gone\" is invalid".into(),
            })
            .collect();
        j.status = Some(EphemeralJobStatus {
            refused_count: Some(refused.len() as i32),
            refused,
            ..Default::default()
        });
    }
    j
}

/// `n` Running pods, created one millisecond apart. `injected`: the job's containers are in
/// every pod, a third each succeeded, running and not started yet.
fn pods(n: usize, injected: Option<&EphemeralJob>) -> Vec<Arc<crate::pod::Pod>> {
    let base = Timestamp::from_second(1_795_000_000).unwrap();
    (0..n)
        .map(|i| {
            let nm = name(i);
            let mut p = pod(NS, &nm, "scale-no-such-node", "sexton-quick-exit:bench");
            p.metadata.creation_timestamp =
                Some(Time(base + SignedDuration::from_millis(i as i64)));
            p.metadata.uid = Some(format!("00000000-0000-4000-8000-{i:012}"));
            p.metadata.resource_version = Some(format!("{}", 1000 + i));
            let st = running_status(&nm)["status"].clone();
            let mut status: PodStatus = serde_json::from_value(st).unwrap();
            if let Some(job) = injected {
                p.spec.as_mut().unwrap().ephemeral_containers = Some(containers_for(job));
                let state = match i % 3 {
                    0 => json!({"terminated": {"exitCode": 0, "reason": "Completed",
                        "startedAt": "2026-11-25T00:01:00Z", "finishedAt": "2026-11-25T00:01:01Z"}}),
                    1 => json!({"running": {"startedAt": "2026-11-25T00:01:00Z"}}),
                    _ => json!({"waiting": {"reason": "ContainerCreating"}}),
                };
                status.ephemeral_container_statuses = Some(vec![
                    serde_json::from_value(json!({"name": "probe", "image": "busybox:1.36",
                        "imageID": "", "ready": false, "restartCount": 0, "state": state}))
                    .unwrap(),
                ]);
            }
            p.status = Some(status);
            // as the controller's cache holds it (decoded from the pod's JSON)
            Arc::new(serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap())
        })
        .collect()
}

/// Times `f` at least 10 times and for at least `secs`.
fn time(secs: f64, mut f: impl FnMut() -> usize) -> (Summary, usize, usize) {
    let mut ms = vec![];
    let mut out = 0;
    let start = Instant::now();
    while ms.len() < 10 || start.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        out = std::hint::black_box(f());
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        if ms.len() >= 10_000 {
            break;
        }
    }
    let n = ms.len();
    (summary(&ms).unwrap(), n, out)
}

pub fn rows(o: &Opts) -> Vec<Row> {
    let now = Time(Timestamp::from_second(1_795_000_600).unwrap());
    let mut rows = vec![];
    for &n in &o.sizes {
        let fresh = pods(n, None);
        let cases: Vec<(&'static str, EphemeralJob, &Vec<Arc<crate::pod::Pod>>)> = vec![
            ("new job, parallelism = pods", job(n as i32, 0), &fresh),
            ("new job, parallelism 10", job(10, 0), &fresh),
            (
                "new job, parallelism = pods, 1 000 refused pods in its status",
                job(n as i32, 1000),
                &fresh,
            ),
        ];
        for (case, j, ps) in cases {
            let (ms, runs, inject) = time(o.secs, || plan(&j, ps, &now).inject.len());
            rows.push(Row {
                pods: n,
                case,
                what: "plan",
                runs,
                ms,
                inject,
            });
        }
        let j = job(n as i32, 0);
        let injected = pods(n, Some(&j));
        let (ms, runs, inject) = time(o.secs, || plan(&j, &injected, &now).inject.len());
        rows.push(Row {
            pods: n,
            case: "every pod injected: a third each succeeded, running, not started",
            what: "plan",
            runs,
            ms,
            inject,
        });
        // What the reconciler does next with a plan of `n` targets (inject_all in
        // inject.rs): a map of the namespace's pods by name, then each planned pod's
        // resourceVersion from it. Replicated here to time it; not the pure function.
        let j = job(n as i32, 0);
        let p = plan(&j, &fresh, &now);
        let (ms, runs, inject) = time(o.secs, || {
            let versions: std::collections::HashMap<&str, Option<String>> = fresh
                .iter()
                .filter_map(|x| {
                    Some((
                        x.metadata.name.as_deref()?,
                        x.metadata.resource_version.clone(),
                    ))
                })
                .collect();
            p.inject
                .iter()
                .filter(|nm| versions.get(nm.as_str()).cloned().flatten().is_some())
                .count()
        });
        rows.push(Row {
            pods: n,
            case: "new job, parallelism = pods",
            what: "inject_all's resourceVersion lookups (replica)",
            runs,
            ms,
            inject,
        });
    }
    rows
}

pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| pods | case | what | targets planned now | median (ms) | p99 (ms) | min (ms) | runs |\n|---:|---|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {} |\n",
            crate::stats::thousands(r.pods as f64),
            r.case,
            if r.what == "plan" {
                "`plan`".to_string()
            } else {
                r.what.to_string()
            },
            crate::stats::thousands(r.inject as f64),
            r.ms.p50,
            r.ms.p99,
            r.ms.min,
            r.runs
        ));
    }
    s
}

pub fn run(o: &Opts) -> Result<()> {
    let o = Opts {
        sizes: if o.sizes.is_empty() {
            vec![1000, 10000]
        } else {
            o.sizes.clone()
        },
        secs: if o.secs > 0.0 { o.secs } else { 1.0 },
        json: o.json.clone(),
        md: o.md.clone(),
    };
    let rows = rows(&o);
    let md = markdown(&rows);
    print!("{md}");
    if let Some(p) = &o.json {
        std::fs::write(p, serde_json::to_string_pretty(&rows).unwrap())
            .map_err(ctx(format!("writing {}", p.display())))?;
    }
    if let Some(p) = &o.md {
        std::fs::write(p, &md).map_err(ctx(format!("writing {}", p.display())))?;
    }
    Ok(())
}
