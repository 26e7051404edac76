//! The one way every subcommand gets a Kubernetes client: `--kubeconfig` (and
//! `--context`) when given, else the standard inference (in-cluster service account, then
//! `$KUBECONFIG` / `~/.kube/config`).

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

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

/// A client for `kubeconfig` (or the inferred configuration), in `context` if given.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClientError> {
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
