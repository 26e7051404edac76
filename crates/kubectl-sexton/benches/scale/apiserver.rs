//! What the API server did during a window, read from the API server itself: its request
//! counters by verb and resource (who asked for what, and how long the server took), its
//! watch events, and, when it serves profiles (`--profiling`), a CPU profile of the window.
//! These say where a saturated API server's time goes, which the controllers' own figures
//! cannot.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::Client;
use serde::Serialize;
use testbed::parse_metrics;

use crate::error::{Failed, Result, ctx};

/// The API server's counters that matter here, by full series name.
pub async fn metrics(client: &Client) -> BTreeMap<String, f64> {
    let req = http::Request::get("/metrics").body(vec![]).unwrap();
    let text = tokio::time::timeout(Duration::from_secs(10), client.request_text(req)).await;
    match text {
        Ok(Ok(t)) => parse_metrics(&t)
            .into_iter()
            .filter(|(k, _)| {
                k.starts_with("apiserver_request_total{")
                    || k.starts_with("apiserver_request_duration_seconds_sum{")
                    || k.starts_with("apiserver_watch_events_total{")
                    || k.starts_with("apiserver_watch_events_sizes_sum{")
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Requests of one verb on one resource (and subresource) during a window.
#[derive(Debug, Clone, Serialize)]
pub struct Requests {
    pub verb: String,
    /// `pods`, `pods/status`, `events` (events.k8s.io and core together)
    pub resource: String,
    pub count: f64,
    /// not 2xx
    pub failed: f64,
    /// the API server's own mean handling time (ms)
    pub mean_ms: f64,
}

/// Watch events the API server sent, per resource.
#[derive(Debug, Clone, Serialize)]
pub struct WatchEvents {
    pub resource: String,
    pub events: f64,
    pub bytes: f64,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Activity {
    pub requests: Vec<Requests>,
    pub watch_events: Vec<WatchEvents>,
    /// where the CPU profile was written, if one was taken
    pub profile: Option<String>,
}

/// `name{a="x",b="y"}` → the value of label `key`.
fn label<'a>(series: &'a str, key: &str) -> Option<&'a str> {
    let inner = series.split_once('{')?.1.strip_suffix('}')?;
    inner.split("\",").find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.trim_matches('"'))
    })
}

/// What changed between two scrapes.
pub fn activity(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> Activity {
    let delta =
        |k: &str| after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
    let resource = |k: &str| {
        let r = label(k, "resource").unwrap_or("");
        match label(k, "subresource").unwrap_or("") {
            "" => r.to_string(),
            s => format!("{r}/{s}"),
        }
    };
    // (verb, resource) → (count, failed, seconds)
    let mut req: BTreeMap<(String, String), (f64, f64, f64)> = BTreeMap::new();
    let mut watch: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for k in after.keys() {
        let d = delta(k);
        if d <= 0.0 {
            continue;
        }
        if k.starts_with("apiserver_request_total{") {
            let key = (label(k, "verb").unwrap_or("").to_string(), resource(k));
            let e = req.entry(key).or_default();
            e.0 += d;
            if !label(k, "code").unwrap_or("").starts_with('2') {
                e.1 += d;
            }
        } else if k.starts_with("apiserver_request_duration_seconds_sum{") {
            let key = (label(k, "verb").unwrap_or("").to_string(), resource(k));
            req.entry(key).or_default().2 += d;
        } else if k.starts_with("apiserver_watch_events_total{") {
            watch
                .entry(label(k, "resource").unwrap_or("").into())
                .or_default()
                .0 += d;
        } else if k.starts_with("apiserver_watch_events_sizes_sum{") {
            watch
                .entry(label(k, "resource").unwrap_or("").into())
                .or_default()
                .1 += d;
        }
    }
    let mut requests: Vec<Requests> = req
        .into_iter()
        .filter(|(_, (n, _, _))| *n >= 1.0)
        .map(|((verb, resource), (count, failed, secs))| Requests {
            verb,
            resource,
            count,
            failed,
            mean_ms: secs / count * 1e3,
        })
        .collect();
    requests.sort_by(|a, b| b.count.total_cmp(&a.count));
    let mut watch_events: Vec<WatchEvents> = watch
        .into_iter()
        .filter(|(_, (n, _))| *n >= 1.0)
        .map(|(resource, (events, bytes))| WatchEvents {
            resource,
            events,
            bytes,
        })
        .collect();
    watch_events.sort_by(|a, b| b.events.total_cmp(&a.events));
    Activity {
        requests,
        watch_events,
        profile: None,
    }
}

/// A CPU profile of the API server over the next `secs` seconds, written to `path` (pprof's
/// gzipped protobuf; `go tool pprof -top` reads it). Fails if the server does not serve
/// profiles (kube-apiserver's `--profiling=false`).
pub async fn cpu_profile(client: Client, secs: u64, path: &Path) -> Result<()> {
    use http_body_util::BodyExt;
    let req = http::Request::get(format!("/debug/pprof/profile?seconds={secs}"))
        .body(kube::client::Body::empty())
        .unwrap();
    let fetch = async {
        let res = client
            .send(req)
            .await
            .map_err(ctx("asking for a CPU profile"))?;
        if !res.status().is_success() {
            return Err(Failed(format!(
                "the API server answered {} to /debug/pprof/profile (is it started with --profiling?)",
                res.status()
            )));
        }
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(ctx("reading the profile"))?;
        Ok(body.to_bytes())
    };
    let bytes = tokio::time::timeout(Duration::from_secs(secs + 30), fetch)
        .await
        .map_err(|_| Failed::from("the CPU profile did not arrive in time"))??;
    std::fs::write(path, &bytes).map_err(ctx(format!("writing {}", path.display())))
}
