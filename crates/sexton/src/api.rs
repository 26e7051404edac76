//! Birth dependencies through the Kubernetes API (kubexit's behaviour): a birth dependency
//! is a container of this pod whose status says `ready: true`. That works for containers
//! not wrapped by sexton (injected proxies). One watch of one pod (field selector on its
//! name), resumed after disconnects and API server restarts, on a thread of its own with a
//! small single-threaded tokio runtime; results are posted to the supervisor's loop. The
//! supervisor's birth timeout bounds the whole wait.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams};
use kube::{Client, Config};
use tracing::{debug, info, warn};

use crate::events::Event;
use sexton_core::config::PodRef;
use sexton_core::machine::PodView;

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
pub fn pod_view(pod: &DynamicObject) -> PodView {
    let spec = &pod.data["spec"];
    let status = &pod.data["status"];
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
    fn failed(&mut self, what: &str, e: &kube::Error) -> String {
        self.attempts += 1;
        let cause = cause_of(e);
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

/// The innermost cause of an error, which is the part that says what to fix
/// ("Connection refused", "dns error: ...").
fn cause_of(e: &kube::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let (outer, inner) = (e.to_string(), cause.to_string());
    if outer.contains(&inner) {
        outer
    } else {
        format!("{outer}: {inner}")
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
    #[error("invalid KUBEXIT_KUBECONFIG={path:?}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[cfg(not(feature = "kubeconfig"))]
    #[error(
        "invalid KUBEXIT_KUBECONFIG={0:?}: this sexton was built without the `kubeconfig` feature (it keeps a YAML parser out of the in-pod binary); use the pod's service account, or build with --features kubeconfig"
    )]
    NoKubeconfigFeature(PathBuf),
    #[error(
        "no in-cluster credentials for the Kubernetes API ({0}); is a service account token mounted? (or set KUBEXIT_KUBECONFIG)"
    )]
    NotInCluster(kube::config::InClusterError),
    #[error("cannot create a Kubernetes client: {0}")]
    Client(kube::Error),
}

/// A client, and the API server's address for messages.
async fn client(kubeconfig: Option<PathBuf>) -> Result<(Client, String), ClientError> {
    let config = match kubeconfig {
        #[cfg(feature = "kubeconfig")]
        Some(path) => {
            use kube::config::{KubeConfigOptions, Kubeconfig};
            let read = match Kubeconfig::read_from(&path) {
                Ok(kc) => Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await,
                Err(e) => Err(e),
            };
            read.map_err(|source| ClientError::Kubeconfig { path, source })?
        }
        #[cfg(not(feature = "kubeconfig"))]
        Some(path) => return Err(ClientError::NoKubeconfigFeature(path)),
        None => Config::incluster().map_err(ClientError::NotInCluster)?,
    };
    let address = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(ClientError::Client)?;
    Ok((client, address))
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
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    return post(Event::ApiFatal(format!(
                        "cannot start the API client runtime: {e}"
                    )));
                }
            };
            rt.block_on(watch_pod(pod, kubeconfig, stop, post));
        })?;
    Ok(())
}

/// What to do after a failed read or watch.
enum Next {
    Retry,
    Fatal(String),
}

/// A failed read or watch: a 401/403 that persists ends the wait; anything else is an
/// outage, reported sparingly and retried after a pause (backing off up to 2 s).
async fn failed(
    what: &str,
    e: kube::Error,
    pod: &PodRef,
    state: &mut WatchState,
    post: &impl Fn(Event),
) -> Next {
    if let kube::Error::Api(ae) = &e {
        if ae.code == 403 || ae.code == 401 {
            let detail = format!("{what}: HTTP {}: {}", ae.code, ae.message);
            if let Some(fatal) = state.forbidden.check(pod, detail) {
                return Next::Fatal(fatal);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            return Next::Retry;
        }
    }
    let problem = state.outage.failed(what, &e);
    if !state.forbidden.ever_read {
        post(Event::ApiUnreachable(problem));
    }
    tokio::time::sleep(state.pause).await;
    state.pause = (state.pause * 2).min(Duration::from_secs(2));
    Next::Retry
}

struct WatchState {
    pause: Duration,
    forbidden: Forbidden,
    outage: Outage,
}

/// Why a watch ended: list again, stop, or a refusal (its message) that ends the wait.
enum WatchEnd {
    ListAgain,
    Stopped,
    Refused(String),
}

/// Follows one watch until it ends (server timeout, disconnect, error) or `stop` is set.
async fn follow(
    stream: impl futures_util::Stream<Item = kube::Result<WatchEvent<DynamicObject>>>,
    pod: &PodRef,
    state: &mut WatchState,
    stop: &AtomicBool,
    post: &impl Fn(Event),
) -> WatchEnd {
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        if stop.load(Ordering::Relaxed) {
            return WatchEnd::Stopped;
        }
        match ev {
            Ok(WatchEvent::Added(p)) | Ok(WatchEvent::Modified(p)) => {
                post(Event::Pod(pod_view(&p)))
            }
            Ok(WatchEvent::Deleted(_)) => post(Event::Pod(PodView::default())),
            Ok(WatchEvent::Bookmark(_)) => {}
            Ok(WatchEvent::Error(e)) if e.code == 403 => {
                let refused = state.forbidden.check(pod, format!("watch: {}", e.message));
                return refused.map_or(WatchEnd::ListAgain, WatchEnd::Refused);
            }
            Ok(WatchEvent::Error(e)) => {
                debug!("watch ended: {} ({}); listing again", e.message, e.code);
                return WatchEnd::ListAgain;
            }
            Err(e) => {
                debug!("watch stream broke ({e}); listing again");
                return WatchEnd::ListAgain;
            }
        }
    }
    WatchEnd::ListAgain
}

/// Reads, then watches, this pod until `stop` is set, posting what it says about container
/// readiness; a persistent refusal (401/403) ends with `Event::ApiFatal`, an outage is
/// retried.
async fn watch_pod(
    pod: PodRef,
    kubeconfig: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    post: impl Fn(Event),
) {
    let (client, address) = match client(kubeconfig).await {
        Ok(c) => c,
        Err(e) => return post(Event::ApiFatal(e.to_string())),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
    let api: Api<DynamicObject> = Api::namespaced_with(client, &pod.namespace, &resource);
    let fields = format!("metadata.name={}", pod.name);
    let mut state = WatchState {
        pause: Duration::from_millis(100),
        forbidden: Forbidden::default(),
        outage: Outage::new(address),
    };
    let mut announced = false;
    while !stop.load(Ordering::Relaxed) {
        // list (get) for the current state and resourceVersion, then watch from there
        let version = match api.get(&pod.name).await {
            Ok(p) => {
                state.pause = Duration::from_millis(100);
                state.forbidden.read_ok();
                state.outage.recovered();
                if !announced {
                    info!(pod = %pod.name, namespace = %pod.namespace, "watching the pod's container readiness through the Kubernetes API");
                    announced = true;
                }
                post(Event::Pod(pod_view(&p)));
                p.metadata.resource_version.unwrap_or_default()
            }
            Err(e) => match failed("read", e, &pod, &mut state, &post).await {
                Next::Fatal(fatal) => return post(Event::ApiFatal(fatal)),
                Next::Retry => continue,
            },
        };
        let params = WatchParams::default().fields(&fields).timeout(290);
        let stream = match api.watch(&params, &version).await {
            Ok(s) => s,
            Err(e) => match failed("watch", e, &pod, &mut state, &post).await {
                Next::Fatal(fatal) => return post(Event::ApiFatal(fatal)),
                Next::Retry => continue,
            },
        };
        match follow(stream, &pod, &mut state, &stop, &post).await {
            WatchEnd::Refused(fatal) => return post(Event::ApiFatal(fatal)),
            WatchEnd::Stopped => return,
            WatchEnd::ListAgain => {}
        }
        // normal end of a watch (server timeout) or a disconnect: list again, after a
        // short pause so a restarting API server is not hammered
        tokio::time::sleep(Duration::from_millis(100)).await;
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
            let p: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {
                    "restartPolicy": restart,
                    "initContainers": [{"name": "native-sidecar", "restartPolicy": "Always"}, {"name": "setup"}],
                    "containers": [{"name": "main"}, {"name": "proxy"}]
                },
                "status": statuses
            }))
            .unwrap();
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
        let empty: DynamicObject = serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        )
        .unwrap();
        assert_eq!(pod_view(&empty), PodView::default());
    }
}
