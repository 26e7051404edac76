//! One measured window of the SidecarTerminator: the pods of a slice reach "mains done"
//! (main terminated with 0, sidecar running) at a steady rate, and the harness's own watch
//! sees each sidecar's image swapped.
//!
//! **What the reaction latency is.** For each pod: from the moment the harness receives
//! the API server's answer to its status PATCH (the change is then committed) to the moment
//! the harness's pod watch delivers the event in which the sidecar's image is the quick-exit
//! image (the swap was committed before). Both are `Instant`s of this process.
//! It differs from the true interval "status change committed → swap committed" by
//! (watch delay of the swap event) − (delay of the PATCH answer); both are ≥ 0, so the error
//! is bounded neither way by construction, but it is *measured* on the status change itself:
//! the same watch delivers the status change too, and (its watch arrival − its PATCH answer)
//! is exactly that difference for the status event. Its distribution is reported
//! (`watch_minus_answer_ms`) as the error of the method. A second measure, watch to watch
//! (status event → swap event on the same watch) is reported too.
//!
//! The harness then plays the kubelet once more: `COMPLETE_AFTER` after it saw a swap, it
//! reports the pod Succeeded (the replacement exited 0), as the kubelet would a moment after
//! restarting the sidecar; a pod left Running with its mains done would be reported stuck.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event, watcher};
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc, oneshot};

/// How long after the swap the harness reports the pod Succeeded.
const COMPLETE_AFTER: Duration = Duration::from_secs(2);

use crate::error::Result;
use crate::pods::{SIDECAR, image_of, main_terminated, mains_done_status, succeeded_status};
use crate::stats::{Summary, summary};

#[derive(Default, Clone)]
struct Rec {
    sent: Option<Instant>,
    answered: Option<Instant>,
    /// the status change seen on the watch
    seen: Option<Instant>,
    /// the swap seen on the watch
    swapped: Option<Instant>,
    late_ms: f64,
    error: Option<String>,
}

#[derive(Default)]
struct Track {
    recs: HashMap<String, Rec>,
    /// pods swapped that the window did not make "mains done" (must stay empty)
    unexpected: HashSet<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WindowResult {
    pub transitions: usize,
    pub rate_per_sec: f64,
    /// first to last status PATCH sent
    pub secs: f64,
    pub swapped: usize,
    /// not swapped by the end of the drain
    pub missed: usize,
    pub drain_secs: f64,
    pub patch_errors: usize,
    pub unexpected_swaps: usize,
    /// status PATCH answered → swap seen on the watch (ms); a missed swap counts as +inf
    pub latency_ms: Option<Summary>,
    /// status change seen on the watch → swap seen on the watch (ms)
    pub latency_watch_ms: Option<Summary>,
    /// the status PATCH's round trip (ms)
    pub status_rtt_ms: Option<Summary>,
    /// the method's error: the status change's watch arrival minus its PATCH answer (ms)
    pub watch_minus_answer_ms: Option<Summary>,
    /// how late the harness sent each PATCH after its due time (ms)
    pub send_late_ms: Option<Summary>,
    /// per transition: (seconds after the window's start, latency ms; null if missed)
    pub series: Vec<(f64, Option<f64>)>,
}

/// Runs the window over `slice` (pods Running, mains not done) at `rate` transitions per
/// second; waits up to `drain` after the last one for the swaps.
pub async fn run(
    client: &Client,
    ns: &str,
    slice: &[String],
    rate: f64,
    quick: &str,
    drain: Duration,
) -> Result<WindowResult> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let track: Arc<Mutex<Track>> = Arc::default();
    {
        let mut t = track.lock().unwrap();
        for n in slice {
            t.recs.insert(n.clone(), Rec::default());
        }
    }
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let watch = spawn_watch(api.clone(), track.clone(), quick.to_string(), done_tx).await?;
    let completer = tokio::spawn(complete(api.clone(), done_rx, quick.to_string()));

    let interval = Duration::from_secs_f64(1.0 / rate);
    let in_flight = Arc::new(Semaphore::new(256));
    let start = Instant::now() + Duration::from_millis(200);
    let mut tasks = Vec::with_capacity(slice.len());
    for (i, name) in slice.iter().enumerate() {
        let due = start + interval * i as u32;
        tokio::time::sleep_until(due.into()).await;
        let permit = in_flight.clone().acquire_owned().await.unwrap();
        let (api, track, name) = (api.clone(), track.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let body = mains_done_status(&name);
            let sent = Instant::now();
            let r = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(body))
                .await;
            let answered = Instant::now();
            drop(permit);
            let mut t = track.lock().unwrap();
            let rec = t.recs.entry(name).or_default();
            rec.sent = Some(sent);
            rec.late_ms = sent.saturating_duration_since(due).as_secs_f64() * 1e3;
            match r {
                Ok(_) => rec.answered = Some(answered),
                Err(e) => rec.error = Some(e.to_string()),
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let last_sent = Instant::now();
    let deadline = last_sent + drain;
    while Instant::now() < deadline {
        let done = track
            .lock()
            .unwrap()
            .recs
            .values()
            .all(|r| r.swapped.is_some() || r.error.is_some());
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drain_secs = last_sent.elapsed().as_secs_f64();
    watch.abort();
    // the last completions (the watch is gone: the channel closes)
    let _ = tokio::time::timeout(COMPLETE_AFTER + Duration::from_secs(30), completer).await;
    let t = track.lock().unwrap();
    Ok(result(&t, start, rate, drain_secs))
}

/// The harness's pod watch: records when each pod's status change and swap are seen.
/// Returns once the initial list is in.
async fn spawn_watch(
    api: Api<Pod>,
    track: Arc<Mutex<Track>>,
    quick: String,
    done: mpsc::UnboundedSender<(String, Instant)>,
) -> Result<tokio::task::JoinHandle<()>> {
    let (tx, rx) = oneshot::channel();
    let handle = tokio::spawn(async move {
        let mut tx = Some(tx);
        let mut s = watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = s.next().await {
            let now = Instant::now();
            let pod = match ev {
                Ok(Event::Apply(p)) => p,
                Ok(Event::InitDone) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("scale: harness watch: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            let swapped = image_of(&pod, SIDECAR) == Some(quick.as_str());
            let mut t = track.lock().unwrap();
            match t.recs.get_mut(&name) {
                Some(rec) => {
                    if main_terminated(&pod) && rec.seen.is_none() {
                        rec.seen = Some(now);
                    }
                    if swapped && rec.swapped.is_none() {
                        rec.swapped = Some(now);
                        let _ = done.send((name, now));
                    }
                }
                None if swapped => {
                    t.unexpected.insert(name);
                }
                None => {}
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(120), rx)
        .await
        .map_err(|_| "the harness's pod watch did not list the pods within 120 s".to_string())?
        .map_err(|_| "the harness's pod watch ended".to_string())?;
    Ok(handle)
}

/// Reports each swapped pod Succeeded `COMPLETE_AFTER` after its swap was seen.
async fn complete(
    api: Api<Pod>,
    mut rx: mpsc::UnboundedReceiver<(String, Instant)>,
    quick: String,
) {
    let in_flight = Arc::new(Semaphore::new(64));
    let mut tasks = vec![];
    while let Some((name, seen)) = rx.recv().await {
        tokio::time::sleep_until((seen + COMPLETE_AFTER).into()).await;
        let permit = in_flight.clone().acquire_owned().await.unwrap();
        let (api, body) = (api.clone(), succeeded_status(&name, &quick));
        tasks.push(tokio::spawn(async move {
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(body))
                .await
            {
                eprintln!("scale: reporting {name} Succeeded: {e}");
            }
            drop(permit);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

fn ms(a: Instant, b: Instant) -> f64 {
    if b >= a {
        b.duration_since(a).as_secs_f64() * 1e3
    } else {
        -(a.duration_since(b).as_secs_f64() * 1e3)
    }
}

fn result(t: &Track, start: Instant, rate: f64, drain_secs: f64) -> WindowResult {
    let recs: Vec<&Rec> = t.recs.values().collect();
    let mut latency = vec![];
    let mut latency_watch = vec![];
    let mut rtt = vec![];
    let mut err = vec![];
    let mut late = vec![];
    let mut series = vec![];
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for r in &recs {
        let (Some(sent), Some(answered)) = (r.sent, r.answered) else {
            continue;
        };
        first = Some(first.map_or(sent, |f| f.min(sent)));
        last = Some(last.map_or(sent, |l| l.max(sent)));
        rtt.push(ms(sent, answered));
        late.push(r.late_ms);
        if let Some(seen) = r.seen {
            err.push(ms(answered, seen));
        }
        let l = r.swapped.map(|s| ms(answered, s));
        latency.push(l.unwrap_or(f64::INFINITY));
        if let (Some(seen), Some(s)) = (r.seen, r.swapped) {
            latency_watch.push(ms(seen, s));
        }
        series.push((sent.saturating_duration_since(start).as_secs_f64(), l));
    }
    series.sort_by(|a, b| a.0.total_cmp(&b.0));
    let swapped = recs.iter().filter(|r| r.swapped.is_some()).count();
    let patch_errors = recs.iter().filter(|r| r.error.is_some()).count();
    WindowResult {
        transitions: recs.len(),
        rate_per_sec: rate,
        secs: match (first, last) {
            (Some(f), Some(l)) => l.duration_since(f).as_secs_f64(),
            _ => 0.0,
        },
        swapped,
        missed: recs.len() - swapped - patch_errors,
        drain_secs,
        patch_errors,
        unexpected_swaps: t.unexpected.len(),
        latency_ms: summary(&latency),
        latency_watch_ms: summary(&latency_watch),
        status_rtt_ms: summary(&rtt),
        watch_minus_answer_ms: summary(&err),
        send_late_ms: summary(&late),
        series,
    }
}
