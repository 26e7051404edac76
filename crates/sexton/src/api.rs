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
pub mod pod;
mod tls;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::events::Event;
use http::Client;
use sexton_core::config::PodRef;

/// The timeoutSeconds of a watch: the server ends it then, and it is resumed. Under the API
/// server's --min-request-timeout default (1800 s), as kube-client's watcher asks.
pub const WATCH_TIMEOUT: u32 = 290;

/// Why no API client could be made (one line for the log; the birth deps cannot be read).
#[derive(Debug, thiserror::Error)]
enum ClientError {
    #[cfg(feature = "kubeconfig")]
    #[error("invalid KUBEXIT_KUBECONFIG={path:?}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: kubeconfig::KubeconfigError,
    },
    #[cfg(not(feature = "kubeconfig"))]
    #[error(
        "invalid KUBEXIT_KUBECONFIG={0:?}: this sexton was built without the `kubeconfig` feature (it keeps a YAML parser out of the in-pod binary); use the pod's service account, or build with --features kubeconfig"
    )]
    NoKubeconfigFeature(PathBuf),
    #[error(
        "no in-cluster credentials for the Kubernetes API ({0}); is a service account token mounted? (or set KUBEXIT_KUBECONFIG)"
    )]
    NotInCluster(#[from] config::InClusterError),
    #[error("cannot create a Kubernetes client: {0}")]
    Client(#[from] http::ClientError),
}

/// A client of the API server that the kubeconfig or the pod's service account names.
fn client(kubeconfig: Option<PathBuf>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        #[cfg(feature = "kubeconfig")]
        Some(path) => {
            kubeconfig::read(&path).map_err(|source| ClientError::Kubeconfig { path, source })?
        }
        #[cfg(not(feature = "kubeconfig"))]
        Some(path) => return Err(ClientError::NoKubeconfigFeature(path)),
        None => config::in_cluster()?,
    };
    Ok(Client::new(config)?)
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
                Ok(client) => watch::watch_pod(&client, &pod, &stop, &post, WATCH_TIMEOUT),
                Err(e) => post(Event::ApiFatal(e.to_string())),
            }
        })?;
    Ok(())
}
