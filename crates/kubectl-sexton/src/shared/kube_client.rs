//! The one way every subcommand gets a Kubernetes client: `--kubeconfig` (and
//! `--context`) when given, else the standard inference (in-cluster service account, then
//! `$KUBECONFIG` / `~/.kube/config`). The flags are defined here, once, and flattened into
//! each subcommand's.

use std::path::{Path, PathBuf};

use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// `--kubeconfig` and `--context` of the commands people run (`doctor`, `ejob results`,
/// `version`).
#[derive(Args, Debug, Clone)]
pub struct KubeFlags {
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long)]
    pub context: Option<String>,
}

impl KubeFlags {
    pub async fn client(&self) -> Result<Client, ClientError> {
        client(self.kubeconfig.as_deref(), self.context.as_deref()).await
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
    #[error("invalid --kubeconfig={}: {source}", .path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes credentials: not in a pod with a service account token, and no usable ~/.kube/config ({0}); pass --kubeconfig"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("invalid --context={context:?}: {source}")]
    Context {
        context: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot create a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
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
    Client::try_from(config).map_err(ClientError::Client)
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
