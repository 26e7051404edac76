//! `kubectl-sexton webhook`: the mutating admission webhook. It injects Pods at creation
//! (sexton-inject's `admit`), in namespaces labelled `sexton.dev/inject=enabled` and for Pods
//! whose annotation asks for it, and repairs native sidecars that a later webhook stripped;
//! and it stamps who creates an EphemeralJob (`requester.rs`).
//!
//! Process shape: one multi-threaded tokio runtime; `POST /mutate` over TLS (certificate
//! files reloaded when they change, or a self-managed CA and certificate in a Secret);
//! metrics and health on plain HTTP ports of their own; the API server's version read at
//! start and every few minutes, and the Nodes watched (`nodes.rs`), for `auto`.

mod answer;
mod certs;
mod chain;
mod clients;
mod events;
mod limits;
mod metrics;
mod nodes;
mod requester;
mod retry_turn;
mod review;
mod self_managed;
mod sending;
mod server;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use clap::Args;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use sexton_inject::{BinarySource, BinarySourceError, Catalogue, Options};
use tracing::{info, warn};

use crate::shared::catalogue::CatalogueFlags;
use crate::shared::exit::Exit;
use crate::shared::http::Health;
use crate::shared::kube_client::{ServiceKubeFlags, service_account_namespace};
use crate::shared::registry::RegistryFlags;
use crate::shared::service::{self, Service, ServiceFlags, unusable};
use crate::shared::values::version;
use certs::{CertError, CertFiles, CertStore};
use metrics::WebhookMetrics;
use review::Reviewer;
use self_managed::{SelfManaged, TlsError};
use server::ConnectionLimits;

/// How often the API server's version is read again (an upgrade changes what `auto` picks).
const VERSION_RECHECK: Duration = Duration::from_secs(600);
/// How long reviews are still answered after SIGTERM (inside the pod's grace period).
const DRAIN: Duration = Duration::from_secs(5);
/// An image's lookup without `--registry-timeout`: under the API server's 5 s wait for a
/// review (the chart's `webhook.timeoutSeconds`), so that a slow registry gives a refusal
/// the user can read rather than a call the API server abandons.
const REGISTRY_TIMEOUT: Duration = Duration::from_secs(4);

#[derive(Args, Debug)]
#[command(
    about = "Serve the mutating admission webhook that injects Pods and repairs stripped native sidecars",
    group(clap::ArgGroup::new("tls").required(true).args(["tls_cert_file", "self_managed_tls"]))
)]
pub struct WebhookFlags {
    /// Serve the webhook (HTTPS) on ADDR
    #[arg(
        long,
        env = "SEXTON_WEBHOOK_LISTEN",
        default_value = "0.0.0.0:8443",
        value_name = "ADDR"
    )]
    listen: SocketAddr,
    /// Serving certificate (PEM chain); reloaded when the file changes
    #[arg(
        long,
        env = "SEXTON_TLS_CERT_FILE",
        value_name = "FILE",
        requires = "tls_key_file"
    )]
    tls_cert_file: Option<PathBuf>,
    /// Its private key (PEM)
    #[arg(
        long,
        env = "SEXTON_TLS_KEY_FILE",
        value_name = "FILE",
        requires = "tls_cert_file"
    )]
    tls_key_file: Option<PathBuf>,
    /// Create and renew a CA and serving certificate in a Secret, and keep the MutatingWebhookConfiguration's caBundle up to date
    #[arg(long, env = "SEXTON_SELF_MANAGED_TLS")]
    self_managed_tls: bool,
    /// The Secret of the self-managed certificates
    #[arg(
        long,
        env = "SEXTON_TLS_SECRET",
        default_value = "sexton-webhook-tls",
        value_name = "NAME"
    )]
    tls_secret: String,
    /// The MutatingWebhookConfiguration whose caBundle the self-managed mode writes
    #[arg(
        long,
        env = "SEXTON_WEBHOOK_CONFIGURATION",
        default_value = "sexton-webhook",
        value_name = "NAME"
    )]
    webhook_configuration: String,
    /// The webhook's Service: its DNS names go into the self-managed certificate
    #[arg(
        long,
        env = "SEXTON_WEBHOOK_SERVICE",
        default_value = "sexton-webhook",
        value_name = "NAME"
    )]
    service: String,
    /// Another name or IP address for the self-managed certificate; repeatable
    #[arg(long, value_name = "NAME")]
    tls_san: Vec<String>,
    /// The webhook's own namespace (default: the service account's)
    #[arg(long, env = "SEXTON_NAMESPACE", value_name = "NAMESPACE")]
    namespace: Option<String>,
    #[command(flatten)]
    kube: ServiceKubeFlags,
    /// The sexton image (wrap, native-wrap): mounted as an image volume, or run by the `sexton install` init container that copies the binary
    #[arg(long, env = "SEXTON_IMAGE", value_name = "IMAGE", default_value = concat!("ghcr.io/sexton-dev/sexton:", env!("CARGO_PKG_VERSION")))]
    sexton_image: String,
    /// Where wrap and native-wrap get the supervisor's binary: image-volume, copy, or auto (image-volume where the API server's version and the runtimes of the nodes a Pod can land on support it: the webhook watches Nodes; else copy)
    #[arg(long, env = "SEXTON_BINARY_SOURCE", value_name = "SOURCE", default_value = "auto", value_parser = binary_source)]
    binary_source: BinarySource,
    /// Assume this Kubernetes version (MAJOR.MINOR) instead of asking the API server
    #[arg(long, value_name = "MAJOR.MINOR", value_parser = version)]
    kubernetes_version: Option<(u32, u32)>,
    #[command(flatten)]
    catalogue: CatalogueFlags,
    #[command(flatten)]
    registry: RegistryFlags,
    /// Read a Pod's imagePullSecrets to look up its images' entrypoints (needs RBAC secrets get in the Pods' namespaces; off by default)
    #[arg(long, env = "SEXTON_IMAGE_PULL_SECRETS")]
    image_pull_secrets: bool,
    /// Accept only clients with a certificate signed by a CA of FILE (PEM): the API server's, as its AdmissionConfiguration presents it; their connections and reviews then have limits of their own (docs/security.md)
    #[arg(long, env = "SEXTON_CLIENT_CA_FILE", value_name = "FILE")]
    client_ca_file: Option<PathBuf>,
    /// Serve at most N connections at once (more wait; /readyz fails meanwhile)
    #[arg(long, env = "SEXTON_MAX_CONNECTIONS", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Serve at most N connections from one client address (more are closed at once); with --client-ca-file, the API server's are counted apart
    #[arg(long, env = "SEXTON_MAX_CONNECTIONS_PER_CLIENT", value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_client: u32,
    #[command(flatten)]
    serving: ServiceFlags,
}

/// `kubectl-sexton webhook`: run as a service.
pub fn main(flags: WebhookFlags) -> Exit {
    let (format, level) = (flags.serving.log_format, flags.serving.log_level);
    service::run("webhook", format, level, |svc| run(flags, svc))
}

/// The steps: client, certificate, endpoints, version, serve until SIGTERM.
async fn run(flags: WebhookFlags, svc: Service) -> Exit {
    let client = match flags.kube.client().await {
        Ok(c) => c,
        Err(e) => return unusable(&e),
    };
    let catalogue = match flags.catalogue.load() {
        Ok(c) => c,
        Err(e) => return unusable(&e),
    };
    let store = Arc::new(CertStore::default());
    if let Err(e) = first_certificate(&flags, &client, &store).await {
        return unusable(&e);
    }
    let metrics = Arc::new(WebhookMetrics::default());
    let reviewer = Arc::new(reviewer(&flags, catalogue, &client, metrics.clone()));
    let (metrics_addr, health_addr) = (flags.serving.metrics_addr, flags.serving.health_addr);
    let endpoints = svc.serve_endpoints(metrics_addr, health_addr, move || metrics.encode());
    if let Err(e) = endpoints.await {
        return unusable(&e);
    }
    let routes = Router::new()
        .route("/mutate", post(review::mutate))
        .route("/mutate/annotated", post(review::mutate_annotated))
        .route("/mutate/ephemeraljobs", post(requester::stamp))
        .with_state(reviewer.clone());
    let tls = match store.server_config(flags.client_ca_file.as_deref()) {
        Ok(tls) => tls,
        Err(e) => return unusable(&e),
    };
    let limits = ConnectionLimits {
        total: flags.max_connections as usize,
        per_client: flags.max_connections_per_client as usize,
        client_auth: flags.client_ca_file.is_some(),
    };
    let served = server::serve_tls(
        flags.listen,
        routes,
        tls,
        limits,
        svc.health.clone(),
        "--listen",
    );
    let bound = match served.await {
        Ok(bound) => bound,
        Err(e) => return unusable(&e),
    };
    tokio::spawn(chain::keep_chain(client.clone(), reviewer.clone()));
    if flags.binary_source == BinarySource::Auto {
        tokio::spawn(nodes::keep_nodes(client.clone(), reviewer.clone()));
    }
    tokio::spawn(keep_version(
        client.clone(),
        reviewer,
        flags.kubernetes_version,
    ));
    svc.health.ready.store(true, Ordering::Relaxed);
    // (logged once ready: tests and operators read this line as "ready")
    info!(%bound, "serving the webhook");
    svc.shutdown.stopped().await;
    drain(&svc.health).await;
    Exit::Ok
}

/// After SIGTERM: not ready at once (the Service stops sending new reviews here), and
/// still answering for a few seconds while endpoints are updated across the cluster.
async fn drain(health: &Health) {
    health.ready.store(false, Ordering::Relaxed);
    tokio::time::sleep(DRAIN).await;
    info!("webhook stopped");
}

/// Why the webhook has no certificate to start with.
#[derive(Debug, thiserror::Error)]
enum NoCertificate {
    #[error(transparent)]
    Files(#[from] CertError),
    #[error("self-managed TLS: {0}")]
    SelfManaged(#[from] TlsError),
}

/// The certificate to start with, and the task that keeps it current.
async fn first_certificate(
    flags: &WebhookFlags,
    client: &Client,
    store: &Arc<CertStore>,
) -> Result<(), NoCertificate> {
    if let (Some(cert), Some(key)) = (&flags.tls_cert_file, &flags.tls_key_file) {
        let files = CertFiles {
            cert: cert.clone(),
            key: key.clone(),
        };
        files.load(store)?;
        tokio::spawn(files.watch(store.clone()));
        return Ok(());
    }
    let managed = SelfManaged {
        namespace: flags.namespace.clone().unwrap_or_else(own_namespace),
        secret: flags.tls_secret.clone(),
        webhook_config: flags.webhook_configuration.clone(),
        service: flags.service.clone(),
        extra_names: flags.tls_san.clone(),
    };
    managed.ensure(client, store).await?;
    tokio::spawn(managed.run(client.clone(), store.clone()));
    Ok(())
}

/// The service account's namespace, else `sexton-system`.
fn own_namespace() -> String {
    service_account_namespace().unwrap_or_else(|| "sexton-system".into())
}

fn reviewer(
    flags: &WebhookFlags,
    catalogue: Catalogue,
    client: &Client,
    metrics: Arc<WebhookMetrics>,
) -> Reviewer {
    let options = Options {
        sexton_image: flags.sexton_image.clone(),
        kubernetes_version: flags.kubernetes_version,
        catalogue: Arc::new(catalogue),
        binary_source: flags.binary_source,
        ..Options::default()
    };
    let reporter = Reporter {
        controller: "sexton-webhook".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let secrets = flags.image_pull_secrets.then(|| client.clone());
    let recorder = Recorder::new(client.clone(), reporter);
    Reviewer::new(
        options,
        flags.registry.opts(REGISTRY_TIMEOUT),
        recorder,
        metrics,
        secrets,
        client.clone(),
    )
}

/// `--binary-source`.
fn binary_source(s: &str) -> Result<BinarySource, BinarySourceError> {
    s.parse()
}

/// Reads the API server's version now and every few minutes, unless it was given.
async fn keep_version(client: Client, reviewer: Arc<Reviewer>, given: Option<(u32, u32)>) {
    if given.is_some() {
        return;
    }
    loop {
        match client.apiserver_version().await {
            Ok(info) => {
                let v = version(&format!("{}.{}", info.major, info.minor)).ok();
                reviewer
                    .options
                    .lock()
                    .expect("poisoned")
                    .kubernetes_version = v;
            }
            Err(e) => warn!(
                "cannot read the API server's version ({e}); auto assumes native sidecars work"
            ),
        }
        tokio::time::sleep(VERSION_RECHECK).await;
    }
}
