//! One registry client for all of a command's lookups (oci-client over rustls with ring):
//! an image's manifest (through its index, for the platform asked for), then its config,
//! bounded by size and time, failures put in words by `reason.rs`.

use std::io;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sexton_inject::{ImageCommand, Unresolved};
use tokio::io::AsyncWrite;

use super::credentials::Credentials;
use super::opts::RegistryOpts;
use super::reason::{Context, Failure, explain};

/// The largest image config read. Real ones are a few KiB, tens with a long history.
const MAX_CONFIG: i64 = 4 << 20;

/// The media types of image configs (OCI, Docker); anything else is an artifact.
const CONFIG_TYPES: [&str; 2] = [
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];

/// One client for every lookup: connections and tokens are reused across images of the
/// same registry.
pub struct Lookup<'a> {
    client: Client,
    credentials: Credentials,
    opts: &'a RegistryOpts,
    insecure: Vec<String>,
}

impl<'a> Lookup<'a> {
    pub fn new(opts: &'a RegistryOpts) -> Result<Self, Unresolved> {
        // reqwest is built without a crypto provider of its own, so that the binary has one
        // (ring, kube's). Installing fails only when it is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut credentials = Credentials::load(opts.docker_config.as_deref())?;
        for (name, config) in &opts.pull_secrets {
            credentials
                .add_pull_secret(name, config)
                .map_err(|e| Unresolved(format!("{name} is not a docker config: {e}")))?;
        }
        // as users write them: `http://host:port/` names the registry host:port
        let insecure: Vec<String> = opts
            .insecure
            .iter()
            .map(|r| {
                let r = r.trim();
                let r = r.strip_prefix("http://").unwrap_or(r);
                r.strip_prefix("https://")
                    .unwrap_or(r)
                    .trim_end_matches('/')
                    .to_string()
            })
            .collect();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure.clone()),
            // an index is resolved here, so that a missing platform is said with the
            // platforms there are
            platform_resolver: None,
            connect_timeout: Some(opts.timeout),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config)
            .map_err(|e| Unresolved(format!("cannot set up the registry client: {e}")))?;
        Ok(Self {
            client,
            credentials,
            opts,
            insecure,
        })
    }

    /// One image, within the timeout.
    pub async fn image(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        let reference: Reference = image
            .parse()
            .map_err(|e| Unresolved(format!("not a valid image reference: {e}")))?;
        let (auth, source) = self.credentials.for_registry(reference.registry())?;
        let read = tokio::time::timeout(self.opts.timeout, self.read(&reference, &auth));
        let failure = match read.await {
            Ok(Ok(command)) => return Ok(command),
            Ok(Err(f)) => f,
            Err(_elapsed) => Failure::Timeout,
        };
        let version = match (reference.digest(), reference.tag()) {
            (Some(d), _) => format!("digest {d}"),
            (None, t) => format!("tag {}", t.unwrap_or("latest")),
        };
        Err(explain(
            failure,
            &Context {
                registry: reference.registry(),
                repository: reference.repository(),
                version,
                source: &source,
                platform: &self.opts.platform,
                insecure: self
                    .insecure
                    .iter()
                    .any(|r| r == reference.resolve_registry()),
                timeout: self.opts.timeout,
            },
        ))
    }

    /// Manifest (through the index, if it is one), then config.
    async fn read(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<ImageCommand, Failure> {
        let manifest = match self.client.pull_manifest(reference, auth).await?.0 {
            OciManifest::Image(m) => m,
            OciManifest::ImageIndex(index) => {
                let digest = self
                    .opts
                    .platform
                    .select(&index.manifests)
                    .map_err(Failure::NoPlatform)?;
                let one = reference.clone_with_digest(digest);
                match self.client.pull_manifest(&one, auth).await?.0 {
                    OciManifest::Image(m) => m,
                    OciManifest::ImageIndex(_) => return Err(Failure::NestedIndex),
                }
            }
        };
        self.config(reference, &manifest).await
    }

    async fn config(
        &self,
        reference: &Reference,
        manifest: &OciImageManifest,
    ) -> Result<ImageCommand, Failure> {
        let descriptor = &manifest.config;
        if !CONFIG_TYPES.contains(&descriptor.media_type.as_str()) {
            return Err(Failure::NotAnImage(descriptor.media_type.clone()));
        }
        if !(0..=MAX_CONFIG).contains(&descriptor.size) {
            return Err(Failure::ConfigTooLarge(descriptor.size));
        }
        let mut blob = Bounded {
            bytes: Vec::new(),
            limit: descriptor.size as usize,
        };
        self.client
            .pull_blob(reference, descriptor, &mut blob)
            .await?;
        let config: ImageConfig =
            serde_json::from_slice(&blob.bytes).map_err(Failure::BadConfig)?;
        let exec = config.config.unwrap_or_default();
        Ok(ImageCommand {
            entrypoint: exec.entrypoint.unwrap_or_default(),
            cmd: exec.cmd.unwrap_or_default(),
        })
    }
}

/// The part of an image config that says what runs (`null` and absent are empty).
#[derive(Deserialize)]
struct ImageConfig {
    #[serde(default)]
    config: Option<ExecConfig>,
}

#[derive(Default, Deserialize)]
struct ExecConfig {
    #[serde(rename = "Entrypoint", default)]
    entrypoint: Option<Vec<String>>,
    #[serde(rename = "Cmd", default)]
    cmd: Option<Vec<String>>,
}

/// The config blob in memory, refused past the size its manifest declares: a registry that
/// sends more is stopped before it fills memory (the digest check would catch it only at
/// the end).
struct Bounded {
    bytes: Vec<u8>,
    limit: usize,
}

impl AsyncWrite for Bounded {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.bytes.len() + data.len() > this.limit {
            return Poll::Ready(Err(io::Error::other(format!(
                "the registry sent more than the {} bytes its manifest declares",
                this.limit
            ))));
        }
        this.bytes.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
