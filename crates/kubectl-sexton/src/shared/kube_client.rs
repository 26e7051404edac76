//! The one way every subcommand gets a Kubernetes client: `--kubeconfig` (and
//! `--context`, `--request-timeout`) when given, else the standard inference (in-cluster service account, then
//! `$KUBECONFIG` / `~/.kube/config`). The flags are defined here, once, and flattened into
//! each subcommand's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::values::timeout;

mod kubeconfig_ca;

/// The client of `config`: kube's own, with the platform's certificate verifier; on macOS
/// one that trusts the kubeconfig's certificate authority ([`kubeconfig_ca`]), which
/// `SEXTON_KUBECONFIG_CA_CLIENT=1` selects on any platform (tests/version.rs runs it so
/// against the real API server: nothing runs the macOS binary here).
fn new_client(config: Config) -> Result<Client, ClientError> {
    if cfg!(target_os = "macos") || std::env::var_os("SEXTON_KUBECONFIG_CA_CLIENT").is_some() {
        return kubeconfig_ca::client(config).map_err(|e| match e {
            kubeconfig_ca::Error::Client(e) => ClientError::Client(e),
            kubeconfig_ca::Error::Tls(why) => ClientError::Tls(why),
        });
    }
    Client::try_from(config).map_err(ClientError::Client)
}

/// `--kubeconfig`, `--context` and `--request-timeout` of the commands people run
/// (`doctor`, `ejob results`, `version`), as kubectl spells them.
#[derive(Args, Debug, Clone)]
pub struct KubeFlags {
    /// Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config; in a pod, its service account)
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context)
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// How long each request to the API server may take (Go duration: 10s, 1m)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = timeout)]
    pub request_timeout: Duration,
}

impl KubeFlags {
    /// A client whose requests time out after `--request-timeout`, and the API server's
    /// version: the one request that says whether the cluster can be used at all.
    pub async fn connect(&self) -> Result<(Client, Info), ClientError> {
        let mut config = config(self.kubeconfig.as_deref(), self.context.as_deref()).await?;
        let t = self.request_timeout;
        config.connect_timeout = Some(t);
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
        let url = config.cluster_url.to_string();
        let client = new_client(config)?;
        let unreachable = |reason: String| ClientError::Unreachable {
            url: url.trim_end_matches('/').to_string(),
            reason,
        };
        let no_answer = || format!("no answer within {}s (--request-timeout)", t.as_secs_f64());
        let started = Instant::now();
        match tokio::time::timeout(t, client.apiserver_version()).await {
            Ok(Ok(info)) => Ok((client, info)),
            // the client's own timeouts (a TLS handshake that never ends) end it as an error
            Ok(Err(e)) if started.elapsed() >= t => {
                Err(unreachable(format!("{}: {}", no_answer(), chain(&e))))
            }
            Ok(Err(e)) => Err(unreachable(chain(&e))),
            Err(_) => Err(unreachable(no_answer())),
        }
    }
}

/// `--kubeconfig` of the long-running commands (`controller`, `webhook`), also read from
/// `$KUBECONFIG`. They run in a pod, with no context to choose.
#[derive(Args, Debug, Clone)]
pub struct ServiceKubeFlags {
    /// Kubeconfig file; default: in-cluster service account, else ~/.kube/config
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

impl ServiceKubeFlags {
    pub async fn client(&self) -> Result<Client, ClientError> {
        client(self.kubeconfig.as_deref(), None).await
    }
}

/// The namespace a command acts in: `-n`, else the kubeconfig context's (the client's
/// default).
pub fn namespace_or_default(namespace: Option<&str>, client: &Client) -> String {
    namespace.map_or_else(|| client.default_namespace().to_string(), str::to_string)
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid --kubeconfig={}: {}", .path.display(), first_line(.source))]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes credentials: not in a pod with a service account token, and no usable ~/.kube/config ({0}); pass --kubeconfig"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("invalid --context={context:?}: {}", first_line(.source))]
    Context {
        context: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot create a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot create a Kubernetes client: {0}")]
    Tls(String),
    #[error("cannot reach the Kubernetes API server {url}: {reason}")]
    Unreachable { url: String, reason: String },
}

/// The first line of an error (a YAML error goes on with the line and a caret under it).
fn first_line(e: &impl std::fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// An error and its causes, `: `-separated (kube's own message alone says "client error
/// (Connect)", its cause "Connection refused").
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// The namespace of the pod's service account, when running in one.
pub fn service_account_namespace() -> Option<String> {
    const FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
    std::fs::read_to_string(FILE)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A client for `kubeconfig` (or the inferred configuration), in `context` if given.
async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Client, ClientError> {
    let config = config(kubeconfig, context).await?;
    new_client(config)
}

async fn config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<Config, ClientError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let Some(path) = kubeconfig else {
        return match context {
            None => Config::infer().await.map_err(ClientError::Infer),
            Some(c) => {
                Config::from_kubeconfig(&options)
                    .await
                    .map_err(|source| ClientError::Context {
                        context: c.into(),
                        source,
                    })
            }
        };
    };
    let error = |source| ClientError::Kubeconfig {
        path: path.into(),
        source,
    };
    let kc = Kubeconfig::read_from(path).map_err(error)?;
    Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(|source| match context {
            Some(c) => ClientError::Context {
                context: c.into(),
                source,
            },
            None => error(source),
        })
}
