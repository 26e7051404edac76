//! Images' ENTRYPOINT and CMD from their registries (OCI distribution API: index →
//! platform manifest → config), for containers that `wrap` must run behind the supervisor
//! and that set no `command`.
//!
//! The protocol is oci-client's: references (Docker Hub's defaults, tags, digests), the
//! manifest media types, digest checks, and authentication: anonymous, bearer tokens from
//! the realm a registry names in its 401 (with the credentials, if any, sent to the realm),
//! or basic credentials. This module chooses what to fetch, bounds it (a few lookups at a
//! time, each within `--registry-timeout`, configs by size), and puts failures in words
//! (`reason.rs`).

mod credentials;
mod platform;
mod reason;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use clap::Args;
use futures_util::StreamExt;
use futures_util::stream;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sexton_inject::{ImageCommand, Resolve, Unresolved};
use tokio::io::AsyncWrite;

use crate::shared::values::timeout;
use credentials::Credentials;
pub use platform::Platform;
use reason::{Context, Failure, explain};

/// Lookups at a time: enough to hide the round trips of a handful of registries, few
/// enough not to look like a flood to one of them.
const CONCURRENCY: usize = 4;

/// The largest image config read. Real ones are a few KiB, tens with a long history.
const MAX_CONFIG: i64 = 4 << 20;

/// The media types of image configs (OCI, Docker); anything else is an artifact.
const CONFIG_TYPES: [&str; 2] = [
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];

/// Where and how images are looked up.
#[derive(Debug, Clone)]
pub struct RegistryOpts {
    /// The platform whose image is read from a multi-platform index (`linux/amd64`).
    pub platform: Platform,
    /// Registries reached over plain HTTP (`127.0.0.1:5000`).
    pub insecure: Vec<String>,
    /// A docker config file with credentials (`auths`), if any.
    pub docker_config: Option<PathBuf>,
    /// The bound of each image's lookup, connection and authentication included.
    pub timeout: Duration,
    /// Image pull Secrets' docker configs (a name for reasons, the JSON), which win over
    /// `docker_config` (the webhook's `--image-pull-secrets`).
    pub pull_secrets: Vec<(String, String)>,
}

/// How wrap looks up images' ENTRYPOINT and CMD.
#[derive(Args, Debug)]
pub struct RegistryFlags {
    /// The platform whose image is read from multi-platform images, that of the nodes the pods run on (OS/ARCH[/VARIANT])
    #[arg(long, value_name = "OS/ARCH", default_value = "linux/amd64", value_parser = Platform::parse)]
    platform: Platform,
    /// A registry reached over plain HTTP (HOST[:PORT]); repeatable
    #[arg(long, value_name = "HOST")]
    insecure_registry: Vec<String>,
    /// Registry credentials (a docker config.json; default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json, if present)
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// The longest one image's lookup may take (connection, authentication, manifests, config); default: 20s for inject, 4s for the webhook (under the API server's 5 s admission timeout)
    #[arg(long, value_name = "DURATION", value_parser = timeout)]
    registry_timeout: Option<Duration>,
}

impl RegistryFlags {
    /// The options, with `default_timeout` where `--registry-timeout` is not given: a
    /// webhook's lookups must end within the API server's wait for its answer.
    pub fn opts(&self, default_timeout: Duration) -> RegistryOpts {
        RegistryOpts {
            platform: self.platform.clone(),
            insecure: self.insecure_registry.clone(),
            docker_config: self.registry_config.clone(),
            timeout: self.registry_timeout.unwrap_or(default_timeout),
            pull_secrets: vec![],
        }
    }
}

/// Images' commands as looked up beforehand: what the pure mutation resolves images with
/// (it does no I/O itself). An image that was not looked up is unresolved.
#[derive(Debug, Default)]
pub struct Looked(pub BTreeMap<String, Result<ImageCommand, Unresolved>>);

impl Resolve for Looked {
    fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        self.0
            .get(image)
            .cloned()
            .unwrap_or_else(|| Err(Unresolved("not looked up".into())))
    }
}

/// The ENTRYPOINT and CMD of each image (looked up once each, a few at a time).
pub async fn lookup_all(
    images: &[String],
    opts: &RegistryOpts,
) -> BTreeMap<String, Result<ImageCommand, Unresolved>> {
    let unique: BTreeSet<&String> = images.iter().collect();
    let lookup = match Lookup::new(opts) {
        Ok(l) => l,
        // (credentials that cannot be read fail every lookup: which registries they were
        // meant for is in the file)
        Err(e) => {
            return unique
                .into_iter()
                .map(|i| (i.clone(), Err(e.clone())))
                .collect();
        }
    };
    // (owned names: a stream of borrowed ones is not Send in the webhook's handler)
    let owned: Vec<String> = unique.into_iter().cloned().collect();
    let lookup = &lookup;
    stream::iter(owned)
        .map(|image| async move {
            let found = lookup.image(&image).await;
            (image, found)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

/// One client for every lookup: connections and tokens are reused across images of the
/// same registry.
struct Lookup<'a> {
    client: Client,
    credentials: Credentials,
    opts: &'a RegistryOpts,
    insecure: Vec<String>,
}

impl<'a> Lookup<'a> {
    fn new(opts: &'a RegistryOpts) -> Result<Self, Unresolved> {
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
    async fn image(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        let reference: Reference = image
            .parse()
            .map_err(|e| Unresolved(format!("not a valid image reference: {e}")))?;
        #[cfg(target_os = "macos")]
        if !self.insecure.iter().any(|r| r == reference.registry()) {
            // (Cargo.toml: no TLS for registries in the macOS build)
            return Err(Unresolved(format!(
                "the macOS build of kubectl-sexton reads registries over plain HTTP only (--insecure-registry), not {}: give the container's command in the manifest, or run inject on Linux",
                reference.registry()
            )));
        }
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
