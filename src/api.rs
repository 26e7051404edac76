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

use crate::config::PodRef;

pub enum ApiEvent {
    /// These containers of the pod are ready now (the complete list).
    Ready(Vec<String>),
    /// Asking is pointless (forbidden, no credentials): the message says what to fix.
    Fatal(String),
}

/// Names of the pod's containers (init containers included: native sidecars) that are
/// ready. The pod is read untyped: only these fields are needed, and the typed `Pod` would
/// bring the deserializer of the whole pod spec into the in-pod binary.
pub fn ready_containers(pod: &DynamicObject) -> Vec<String> {
    let status = &pod.data["status"];
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| status[*k].as_array())
        .flatten()
        .filter(|c| c["ready"].as_bool() == Some(true))
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

/// A failed read or watch: `Some(message)` if waiting is pointless, else after a pause
/// (backing off up to 2 s) the caller lists again.
async fn failed(
    what: &str,
    e: kube::Error,
    pod: &PodRef,
    forbidden: &mut Forbidden,
    pause: &mut Duration,
) -> Option<String> {
    if let kube::Error::Api(ae) = &e {
        if ae.code == 403 || ae.code == 401 {
            let detail = format!("{what}: HTTP {}: {}", ae.code, ae.message);
            if let Some(fatal) = forbidden.check(pod, detail) {
                return Some(fatal);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            return None;
        }
    }
    warn!(
        "cannot {what} pod {}/{} ({e}); retrying in {pause:?}",
        pod.namespace, pod.name
    );
    tokio::time::sleep(*pause).await;
    *pause = (*pause * 2).min(Duration::from_secs(2));
    None
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
        warn!(
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

async fn client(kubeconfig: Option<PathBuf>) -> Result<Client, String> {
    let config = match kubeconfig {
        #[cfg(feature = "kubeconfig")]
        Some(path) => {
            use kube::config::{KubeConfigOptions, Kubeconfig};
            let kc = Kubeconfig::read_from(&path)
                .map_err(|e| format!("invalid KUBEXIT_KUBECONFIG={:?}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| format!("invalid KUBEXIT_KUBECONFIG={:?}: {e}", path.display()))?
        }
        #[cfg(not(feature = "kubeconfig"))]
        Some(path) => {
            return Err(format!(
                "invalid KUBEXIT_KUBECONFIG={:?}: this sexton was built without the `kubeconfig` feature (it keeps a YAML parser out of the in-pod binary); use the pod's service account, or build with --features kubeconfig",
                path.display()
            ));
        }
        None => Config::incluster().map_err(|e| {
            format!("no in-cluster credentials for the Kubernetes API ({e}); is a service account token mounted? (or set KUBEXIT_KUBECONFIG)")
        })?,
    };
    Client::try_from(config).map_err(|e| format!("cannot create a Kubernetes client: {e}"))
}

/// Starts watching `pod` on a thread of its own; `post` receives the results.
pub fn spawn(
    pod: PodRef,
    kubeconfig: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    post: impl Fn(ApiEvent) + Send + 'static,
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
                    return post(ApiEvent::Fatal(format!(
                        "cannot start the API client runtime: {e}"
                    )));
                }
            };
            rt.block_on(watch_pod(pod, kubeconfig, stop, post));
        })?;
    Ok(())
}

async fn watch_pod(
    pod: PodRef,
    kubeconfig: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    post: impl Fn(ApiEvent),
) {
    let client = match client(kubeconfig).await {
        Ok(c) => c,
        Err(e) => return post(ApiEvent::Fatal(e)),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
    let api: Api<DynamicObject> = Api::namespaced_with(client, &pod.namespace, &resource);
    let fields = format!("metadata.name={}", pod.name);
    let mut pause = Duration::from_millis(100);
    let mut announced = false;
    let mut forbidden_rule = Forbidden::default();
    while !stop.load(Ordering::Relaxed) {
        // list (get) for the current state and resourceVersion, then watch from there
        let version = match api.get(&pod.name).await {
            Ok(p) => {
                pause = Duration::from_millis(100);
                forbidden_rule.read_ok();
                if !announced {
                    info!(pod = %pod.name, namespace = %pod.namespace, "watching the pod's container readiness through the Kubernetes API");
                    announced = true;
                }
                post(ApiEvent::Ready(ready_containers(&p)));
                p.metadata.resource_version.unwrap_or_default()
            }
            Err(e) => match failed("read", e, &pod, &mut forbidden_rule, &mut pause).await {
                Some(fatal) => return post(ApiEvent::Fatal(fatal)),
                None => continue,
            },
        };
        let params = WatchParams::default().fields(&fields).timeout(290);
        let stream = match api.watch(&params, &version).await {
            Ok(s) => s,
            Err(e) => match failed("watch", e, &pod, &mut forbidden_rule, &mut pause).await {
                Some(fatal) => return post(ApiEvent::Fatal(fatal)),
                None => continue,
            },
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match ev {
                Ok(WatchEvent::Added(p)) | Ok(WatchEvent::Modified(p)) => {
                    post(ApiEvent::Ready(ready_containers(&p)))
                }
                Ok(WatchEvent::Deleted(_)) => post(ApiEvent::Ready(vec![])),
                Ok(WatchEvent::Bookmark(_)) => {}
                Ok(WatchEvent::Error(e)) if e.code == 403 => {
                    if let Some(msg) = forbidden_rule.check(&pod, format!("watch: {}", e.message)) {
                        return post(ApiEvent::Fatal(msg));
                    }
                    break;
                }
                Ok(WatchEvent::Error(e)) => {
                    debug!("watch ended: {} ({}); listing again", e.message, e.code);
                    break;
                }
                Err(e) => {
                    debug!("watch stream broke ({e}); listing again");
                    break;
                }
            }
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
    fn ready_containers_from_untyped_status() {
        let p: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "status": {
                "containerStatuses": [{"name": "main", "ready": false}, {"name": "proxy", "ready": true}],
                "initContainerStatuses": [{"name": "native-sidecar", "ready": true}]
            }
        }))
        .unwrap();
        assert_eq!(ready_containers(&p), vec!["proxy", "native-sidecar"]);
        let empty: DynamicObject = serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        )
        .unwrap();
        assert!(ready_containers(&empty).is_empty());
    }
}
