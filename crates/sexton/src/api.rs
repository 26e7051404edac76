//! Birth dependencies through the Kubernetes API (kubexit's behaviour): a birth dependency
//! is a container of this pod whose status says `ready: true`. That works for containers
//! not wrapped by sexton (injected proxies). One list and then one watch of one pod (field
//! selector on its name), on a thread of its own, with blocking I/O (src/api/http.rs);
//! results are posted to the supervisor's loop. A watch the server ends (timeoutSeconds) is
//! resumed from the last resourceVersion seen; an ERROR event (410 Gone: that version is
//! too old) or a broken stream lists the pod again. The supervisor's birth timeout bounds
//! the whole wait.

pub mod config;
pub mod http;
#[cfg(any(test, feature = "kubeconfig"))]
mod kubeconfig;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tracing::{debug, info, warn};

use crate::events::Event;
use config::encode;
use http::{Body, Client};
use sexton_core::config::PodRef;
use sexton_core::machine::PodView;

/// The timeoutSeconds of a watch: the server ends it then, and it is resumed. Under the API
/// server's --min-request-timeout default (1800 s), as kube-client's watcher asks.
pub const WATCH_TIMEOUT: u32 = 290;

/// How often a persisting outage is reported again (the first failure is reported at once).
const REPORT_EVERY: Duration = Duration::from_secs(30);

/// What the pod object says, for birth dependencies: every container of the spec, the
/// ready ones, and those whose termination is final. The pod is read untyped: only these
/// fields are needed, and the typed `Pod` would bring the deserializer of the whole pod
/// spec into the in-pod binary.
///
/// A terminated container is final only if the kubelet will not start it again: never
/// for a native sidecar (an init container with `restartPolicy: Always`), and under the
/// pod's `restartPolicy`: `Never` always, `OnFailure` after exit code 0, `Always` never.
pub fn pod_view(pod: &Value) -> PodView {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let restart = spec["restartPolicy"].as_str().unwrap_or("Always");
    let mut view = PodView::default();
    for key in ["initContainers", "containers"] {
        for c in spec[key].as_array().into_iter().flatten() {
            if let Some(name) = c["name"].as_str() {
                view.containers.push(name.to_string());
            }
        }
    }
    let native_sidecar = |name: &str| {
        spec["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["name"].as_str() == Some(name) && c["restartPolicy"].as_str() == Some("Always")
            })
    };
    for key in ["initContainerStatuses", "containerStatuses"] {
        for c in status[key].as_array().into_iter().flatten() {
            let Some(name) = c["name"].as_str() else {
                continue;
            };
            if c["ready"].as_bool() == Some(true) {
                view.ready.push(name.to_string());
            }
            let Some(term) = c["state"]["terminated"].as_object() else {
                continue;
            };
            let code = term
                .get("exitCode")
                .and_then(|v| v.as_i64())
                .map(|c| c as i32);
            let last = match restart {
                _ if native_sidecar(name) => false,
                "Never" => true,
                "OnFailure" => code == Some(0),
                _ => false,
            };
            if last {
                view.terminated.push((name.to_string(), code));
            }
        }
    }
    view
}

/// The API's failures, reported the first time, when the kind of failure changes, and
/// every `REPORT_EVERY` while it lasts: never a line per retry.
struct Outage {
    address: String,
    attempts: u64,
    last_report: Option<(std::time::Instant, String)>,
}

impl Outage {
    fn new(address: String) -> Outage {
        Outage {
            address,
            attempts: 0,
            last_report: None,
        }
    }

    /// Records a failure; returns the problem as the birth-timeout message will say it.
    fn failed(&mut self, what: &str, e: &http::Error) -> String {
        self.attempts += 1;
        let cause = e.to_string();
        let problem = format!("{what} at {}: {cause}", self.address);
        let due = match &self.last_report {
            None => true,
            Some((at, said)) => *said != cause || at.elapsed() >= REPORT_EVERY,
        };
        if due {
            warn!(
                attempts = self.attempts,
                "cannot {what} pod through the Kubernetes API at {}: {cause}; retrying (reported again every {}s while it lasts)",
                self.address,
                REPORT_EVERY.as_secs()
            );
            self.last_report = Some((std::time::Instant::now(), cause));
        }
        problem
    }

    fn recovered(&mut self) {
        if self.last_report.take().is_some() {
            info!(address = %self.address, attempts = self.attempts, "the Kubernetes API answers again");
        }
        self.attempts = 0;
    }
}

/// A 403 is not always final: an API server that has just (re)started answers 403 until
/// its RBAC caches are filled (seen in the tests). Before the first successful read, a 403
/// that persists for `GRACE` is reported as missing RBAC; after one, 403s are retried like
/// any outage (the birth timeout still bounds the wait).
#[derive(Default)]
struct Forbidden {
    since: Option<std::time::Instant>,
    ever_read: bool,
}

impl Forbidden {
    const GRACE: Duration = Duration::from_secs(3);

    fn read_ok(&mut self) {
        self.since = None;
        self.ever_read = true;
    }

    /// `Some(message)` when the 403 should end the wait.
    fn check(&mut self, pod: &PodRef, detail: String) -> Option<String> {
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if !self.ever_read && since.elapsed() >= Self::GRACE {
            return Some(forbidden(pod, &detail));
        }
        debug!(
            "{detail}; retrying (an API server that has just started answers 403 until its RBAC caches are filled)"
        );
        None
    }
}

fn forbidden(pod: &PodRef, detail: &str) -> String {
    format!(
        "the Kubernetes API refused to show pod {}/{} ({detail}): the pod's service account needs a Role in namespace {:?} with rules [{{apiGroups: [\"\"], resources: [\"pods\"], verbs: [\"get\", \"list\", \"watch\"]}}] and a RoleBinding to it (see examples/rbac-birth-deps.yaml)",
        pod.namespace, pod.name, pod.namespace
    )
}

/// Why no API client could be made (one line for the log; the birth deps cannot be read).
#[derive(Debug, thiserror::Error)]
enum ClientError {
    #[cfg(feature = "kubeconfig")]
    #[error("invalid KUBEXIT_KUBECONFIG={path:?}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    #[cfg(not(feature = "kubeconfig"))]
    #[error(
        "invalid KUBEXIT_KUBECONFIG={0:?}: this sexton was built without the `kubeconfig` feature (it keeps a YAML parser out of the in-pod binary); use the pod's service account, or build with --features kubeconfig"
    )]
    NoKubeconfigFeature(PathBuf),
    #[error(
        "no in-cluster credentials for the Kubernetes API ({0}); is a service account token mounted? (or set KUBEXIT_KUBECONFIG)"
    )]
    NotInCluster(String),
    #[error("cannot create a Kubernetes client: {0}")]
    Client(String),
}

/// A client of the API server that the kubeconfig or the pod's service account names.
fn client(kubeconfig: Option<PathBuf>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        #[cfg(feature = "kubeconfig")]
        Some(path) => {
            kubeconfig::read(&path).map_err(|message| ClientError::Kubeconfig { path, message })?
        }
        #[cfg(not(feature = "kubeconfig"))]
        Some(path) => return Err(ClientError::NoKubeconfigFeature(path)),
        None => config::in_cluster().map_err(ClientError::NotInCluster)?,
    };
    Client::new(config).map_err(ClientError::Client)
}

/// Starts watching `pod` on a thread of its own; `post` receives the results.
pub fn spawn(
    pod: PodRef,
    kubeconfig: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    post: impl Fn(Event) + Send + 'static,
) -> std::io::Result<()> {
    let span = tracing::Span::current();
    std::thread::Builder::new()
        .name("api-watch".into())
        .spawn(move || {
            let _e = span.enter();
            match client(kubeconfig) {
                Ok(client) => watch_pod(&client, &pod, &stop, &post, WATCH_TIMEOUT),
                Err(e) => post(Event::ApiFatal(e.to_string())),
            }
        })?;
    Ok(())
}

/// A list of the pod alone (field selector on its name). A list, not a GET of the pod: the
/// list's resourceVersion is the current one, from which a watch can start; the pod's own
/// is that of its last change, which the API server may no longer hold (a watch from it is
/// answered 410 Gone, again and again while the pod does not change).
pub fn list_path(pod: &PodRef) -> String {
    format!(
        "/api/v1/namespaces/{}/pods?fieldSelector={}",
        encode(&pod.namespace),
        encode(&format!("metadata.name={}", pod.name))
    )
}

/// The pod of a list of it, and the list's resourceVersion; a list without it is the
/// API's 404, as a GET of a missing pod answers.
pub fn listed(pod: &PodRef, list: Value) -> Result<(Value, String), http::Error> {
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match list["items"].as_array().and_then(|items| items.first()) {
        Some(p) => Ok((p.clone(), version)),
        None => Err(http::Error::Status {
            code: 404,
            message: format!("pods {:?} not found", pod.name),
        }),
    }
}

/// A watch of the pod from `version`, which the server ends after `timeout` seconds. The
/// same request as kube-client's `Api::watch` with a field selector on the name.
pub fn watch_path(pod: &PodRef, version: &str, timeout: u32) -> String {
    format!(
        "/api/v1/namespaces/{}/pods?fieldSelector={}&resourceVersion={}&timeoutSeconds={timeout}&watch=true&allowWatchBookmarks=true",
        encode(&pod.namespace),
        encode(&format!("metadata.name={}", pod.name)),
        encode(version)
    )
}

/// What one line of a watch says.
#[derive(Debug, PartialEq)]
pub enum Change {
    /// ADDED, MODIFIED: the pod as it is now.
    Pod(PodView),
    Deleted,
    /// A BOOKMARK: only a newer resourceVersion.
    Bookmark,
    /// An ERROR: the watch is over (410 Gone: its resourceVersion is too old to resume).
    Error {
        code: u16,
        message: String,
    },
}

/// One watch event (a JSON line: `{"type": ..., "object": ...}`), and the resourceVersion
/// of its object, from which a watch resumes.
pub fn parse_event(line: &[u8]) -> Result<(Change, Option<String>), String> {
    let event: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let object = &event["object"];
    let version = object["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    let change = match event["type"].as_str() {
        Some("ADDED" | "MODIFIED") => Change::Pod(pod_view(object)),
        Some("DELETED") => Change::Deleted,
        Some("BOOKMARK") => Change::Bookmark,
        Some("ERROR") => {
            // (an ERROR's object is a Status, whose resourceVersion is not the pod's)
            let code = object["code"].as_u64().and_then(|c| u16::try_from(c).ok());
            let message = object["message"].as_str().unwrap_or("").to_string();
            return Ok((
                Change::Error {
                    code: code.unwrap_or(500),
                    message,
                },
                None,
            ));
        }
        other => return Err(format!("unknown watch event type {other:?}")),
    };
    Ok((change, version))
}

/// What to do after a failed read or watch.
enum Next {
    Retry,
    Fatal(String),
}

/// A failed read or watch: a 401/403 that persists ends the wait; anything else is an
/// outage, reported sparingly and retried after a pause (backing off up to 2 s).
fn failed(
    what: &str,
    e: http::Error,
    pod: &PodRef,
    state: &mut WatchState,
    post: &impl Fn(Event),
) -> Next {
    if let http::Error::Status { code, message } = &e {
        if *code == 403 || *code == 401 {
            let detail = format!("{what}: HTTP {code}: {message}");
            if let Some(fatal) = state.forbidden.check(pod, detail) {
                return Next::Fatal(fatal);
            }
            std::thread::sleep(Duration::from_millis(500));
            return Next::Retry;
        }
    }
    let problem = state.outage.failed(what, &e);
    if !state.forbidden.ever_read {
        post(Event::ApiUnreachable(problem));
    }
    std::thread::sleep(state.pause);
    state.pause = (state.pause * 2).min(Duration::from_secs(2));
    Next::Retry
}

struct WatchState {
    pause: Duration,
    forbidden: Forbidden,
    outage: Outage,
}

/// Why a watch ended: the server ended it (resume from the last resourceVersion), read
/// the pod again, stop, or a refusal (its message) that ends the wait.
#[derive(Debug, PartialEq)]
enum WatchEnd {
    Ended,
    ListAgain,
    Stopped,
    Refused(String),
}

/// Follows one watch until it ends (server timeout, disconnect, error) or `stop` is set;
/// `version` follows the events' resourceVersion.
fn follow(
    body: &mut Body,
    version: &mut String,
    pod: &PodRef,
    state: &mut WatchState,
    stop: &AtomicBool,
    post: &impl Fn(Event),
) -> WatchEnd {
    loop {
        let line = match body.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return WatchEnd::Ended,
            Err(e) => {
                debug!("watch stream broke ({e}); listing again");
                return WatchEnd::ListAgain;
            }
        };
        if stop.load(Ordering::Relaxed) {
            return WatchEnd::Stopped;
        }
        if line.trim_ascii().is_empty() {
            continue;
        }
        let (change, at) = match parse_event(&line) {
            Ok(event) => event,
            Err(e) => {
                debug!("watch stream broke ({e}); listing again");
                return WatchEnd::ListAgain;
            }
        };
        if let Some(at) = at {
            *version = at;
        }
        match change {
            Change::Pod(view) => post(Event::Pod(view)),
            Change::Deleted => post(Event::Pod(PodView::default())),
            Change::Bookmark => {}
            Change::Error { code: 403, message } => {
                let refused = state.forbidden.check(pod, format!("watch: {message}"));
                return refused.map_or(WatchEnd::ListAgain, WatchEnd::Refused);
            }
            Change::Error { code, message } => {
                debug!("watch ended: {message} ({code}); listing again");
                return WatchEnd::ListAgain;
            }
        }
    }
}

/// Reads, then watches, this pod until `stop` is set, posting what it says about container
/// readiness; a persistent refusal (401/403) ends with `Event::ApiFatal`, an outage is
/// retried. Each watch asks the server to end it after `timeout` seconds.
pub fn watch_pod(
    client: &Client,
    pod: &PodRef,
    stop: &AtomicBool,
    post: &impl Fn(Event),
    timeout: u32,
) {
    let mut state = WatchState {
        pause: Duration::from_millis(100),
        forbidden: Forbidden::default(),
        outage: Outage::new(client.address()),
    };
    // a quiet watch sends nothing until the server ends it: a read waiting longer than that
    // is a dead connection (a half-open TCP after a node's failure)
    let read_timeout = Duration::from_secs(u64::from(timeout) + 30);
    let mut announced = false;
    // the resourceVersion to resume a watch from; `None`: read the pod first
    let mut resume: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut version = match resume.take() {
            Some(version) => version,
            None => match client.get(&list_path(pod)).and_then(|l| listed(pod, l)) {
                Ok((p, version)) => {
                    state.pause = Duration::from_millis(100);
                    state.forbidden.read_ok();
                    state.outage.recovered();
                    if !announced {
                        info!(pod = %pod.name, namespace = %pod.namespace, "watching the pod's container readiness through the Kubernetes API");
                        announced = true;
                    }
                    post(Event::Pod(pod_view(&p)));
                    version
                }
                Err(e) => match failed("read", e, pod, &mut state, post) {
                    Next::Fatal(fatal) => return post(Event::ApiFatal(fatal)),
                    Next::Retry => continue,
                },
            },
        };
        let mut body = match client.stream(&watch_path(pod, &version, timeout), read_timeout) {
            Ok(body) => body,
            Err(http::Error::Status { code: 410, message }) => {
                debug!("watch refused: {message} (410); listing again");
                continue;
            }
            Err(e) => match failed("watch", e, pod, &mut state, post) {
                Next::Fatal(fatal) => return post(Event::ApiFatal(fatal)),
                Next::Retry => continue,
            },
        };
        match follow(&mut body, &mut version, pod, &mut state, stop, post) {
            WatchEnd::Refused(fatal) => return post(Event::ApiFatal(fatal)),
            WatchEnd::Stopped => return,
            WatchEnd::Ended => {
                debug!("the API server ended the watch; resuming from resourceVersion {version}");
                resume = Some(version);
            }
            WatchEnd::ListAgain => {}
        }
        // after a watch: a short pause, so that a restarting (or broken) API server is not
        // hammered
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn pod() -> PodRef {
        PodRef {
            name: "job-1".into(),
            namespace: "team-a".into(),
        }
    }

    #[test]
    fn forbidden_is_final_only_when_it_persists_before_any_read() {
        let mut f = Forbidden::default();
        assert_eq!(
            f.check(&pod(), "HTTP 403".into()),
            None,
            "the first 403 may be a starting API server"
        );
        f.since = Some(Instant::now() - Forbidden::GRACE);
        let msg = f
            .check(&pod(), "HTTP 403: nope".into())
            .expect("persisted: final");
        assert!(
            msg.contains("team-a/job-1") && msg.contains(r#"verbs: ["get", "list", "watch"]"#),
            "{msg}"
        );
        // after one successful read, 403s are outages, however long
        let mut f = Forbidden::default();
        f.read_ok();
        f.since = Some(Instant::now() - Forbidden::GRACE * 10);
        assert_eq!(f.check(&pod(), "HTTP 403".into()), None);
    }

    #[test]
    fn pod_view_from_untyped_pod() {
        let view = |restart: &str, statuses: serde_json::Value| -> PodView {
            let p = serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {
                    "restartPolicy": restart,
                    "initContainers": [{"name": "native-sidecar", "restartPolicy": "Always"}, {"name": "setup"}],
                    "containers": [{"name": "main"}, {"name": "proxy"}]
                },
                "status": statuses
            });
            pod_view(&p)
        };
        let v = view(
            "Never",
            serde_json::json!({
                "containerStatuses": [
                    {"name": "main", "ready": false, "state": {"running": {}}},
                    {"name": "proxy", "ready": true, "state": {"running": {}}}
                ],
                "initContainerStatuses": [{"name": "native-sidecar", "ready": true}]
            }),
        );
        assert_eq!(v.containers, ["native-sidecar", "setup", "main", "proxy"]);
        assert_eq!(v.ready, ["native-sidecar", "proxy"]);
        assert!(v.terminated.is_empty());
        // which terminations are final
        let ended = serde_json::json!({
            "containerStatuses": [
                {"name": "main", "state": {"terminated": {"exitCode": 0}}},
                {"name": "proxy", "state": {"terminated": {"exitCode": 127}}}
            ],
            "initContainerStatuses": [{"name": "native-sidecar", "state": {"terminated": {"exitCode": 1}}}]
        });
        let names = |v: PodView| {
            v.terminated
                .into_iter()
                .map(|(n, c)| (n, c.unwrap()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(view("Never", ended.clone())),
            [("main".into(), 0), ("proxy".into(), 127)]
        );
        assert_eq!(
            names(view("OnFailure", ended.clone())),
            [("main".into(), 0)]
        );
        assert!(view("Always", ended).terminated.is_empty());
        let empty =
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert_eq!(pod_view(&empty), PodView::default());
    }

    #[test]
    fn request_paths() {
        assert_eq!(
            list_path(&pod()),
            "/api/v1/namespaces/team-a/pods?fieldSelector=metadata.name%3Djob-1"
        );
        let list = serde_json::json!({"kind": "PodList", "metadata": {"resourceVersion": "900"}, "items": [{"metadata": {"name": "job-1", "resourceVersion": "12"}}]});
        let (p, version) = listed(&pod(), list).unwrap();
        assert_eq!(
            (p["metadata"]["name"].as_str(), version.as_str()),
            (Some("job-1"), "900"),
            "the list's version, not the pod's"
        );
        let empty = serde_json::json!({"kind": "PodList", "metadata": {"resourceVersion": "900"}, "items": []});
        let e = listed(&pod(), empty).unwrap_err().to_string();
        assert_eq!(e, "HTTP 404: pods \"job-1\" not found");
        assert_eq!(
            watch_path(&pod(), "123", 290),
            "/api/v1/namespaces/team-a/pods?fieldSelector=metadata.name%3Djob-1&resourceVersion=123&timeoutSeconds=290&watch=true&allowWatchBookmarks=true"
        );
    }

    #[test]
    fn watch_events() {
        let pod = br#"{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"job-1","resourceVersion":"42"},"spec":{"containers":[{"name":"main"}]},"status":{"containerStatuses":[{"name":"main","ready":true}]}}}"#;
        let (change, version) = parse_event(pod).unwrap();
        assert_eq!(version.as_deref(), Some("42"));
        let Change::Pod(view) = change else {
            panic!("{change:?}")
        };
        assert_eq!(view.ready, ["main"]);
        let bookmark =
            br#"{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"57"}}}"#;
        assert_eq!(
            parse_event(bookmark).unwrap(),
            (Change::Bookmark, Some("57".into()))
        );
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2264)","reason":"Expired","code":410}}"#;
        assert_eq!(
            parse_event(gone).unwrap(),
            (
                Change::Error {
                    code: 410,
                    message: "too old resource version: 1 (2264)".into()
                },
                None
            )
        );
        assert!(parse_event(b"{\"type\":\"WHAT\"}").is_err());
        assert!(parse_event(b"not json").is_err());
    }

    /// `follow` over a watch body given as bytes: what it posts and how it ends.
    fn follow_bytes(body: &str) -> (WatchEnd, String, Vec<PodView>) {
        let mut body = Body::new(Box::new(std::io::Cursor::new(body.as_bytes().to_vec())));
        let mut state = WatchState {
            pause: Duration::ZERO,
            forbidden: Forbidden::default(),
            outage: Outage::new("https://h:443".into()),
        };
        let posted = std::cell::RefCell::new(Vec::new());
        let post = |e: Event| match e {
            Event::Pod(view) => posted.borrow_mut().push(view),
            other => panic!("{other:?}"),
        };
        let mut version = "1".to_string();
        let end = follow(
            &mut body,
            &mut version,
            &pod(),
            &mut state,
            &AtomicBool::new(false),
            &post,
        );
        (end, version, posted.into_inner())
    }

    #[test]
    fn a_watch_resumes_after_the_servers_end_and_lists_again_after_an_error() {
        let added = r#"{"type":"ADDED","object":{"metadata":{"resourceVersion":"5"},"status":{"containerStatuses":[{"name":"proxy","ready":true}]}}}"#;
        let bookmark = r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
        // the server ended the watch (timeoutSeconds): resume from the last version seen
        let (end, version, posted) = follow_bytes(&format!("{added}\n\n{bookmark}\n"));
        assert_eq!((end, version.as_str()), (WatchEnd::Ended, "9"));
        assert_eq!(posted.len(), 1);
        assert_eq!(posted[0].ready, ["proxy"]);
        // 410 Gone: the version is too old, read the pod again
        let gone = r#"{"type":"ERROR","object":{"kind":"Status","message":"too old resource version","code":410}}"#;
        let (end, _, posted) = follow_bytes(&format!("{added}\n{gone}\n{added}\n"));
        assert_eq!((end, posted.len()), (WatchEnd::ListAgain, 1));
        // a broken stream (cut inside a line) or garbage: read again
        assert_eq!(follow_bytes(r#"{"type":"ADD"#).0, WatchEnd::ListAgain);
        assert_eq!(follow_bytes("<html>\n").0, WatchEnd::ListAgain);
        // a deletion says no container is ready any more
        let (_, _, posted) = follow_bytes("{\"type\":\"DELETED\",\"object\":{}}\n");
        assert_eq!(posted, [PodView::default()]);
        // a 403 in the stream before any read, persisting: the refusal ends the wait
        let forbidden =
            r#"{"type":"ERROR","object":{"kind":"Status","message":"nope","code":403}}"#;
        assert_eq!(
            follow_bytes(&format!("{forbidden}\n")).0,
            WatchEnd::ListAgain,
            "not yet: within the grace"
        );
    }
}
