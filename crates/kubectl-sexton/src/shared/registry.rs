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

// The registry client: oci-client over rustls (client.rs), except on macOS, where reqwest's
// TLS stacks link Apple's Security framework, which the cross-build cannot (Cargo.toml):
// there every lookup is refused, saying how to do without (client_macos.rs).
#[cfg(not(target_os = "macos"))]
mod client;
#[cfg(target_os = "macos")]
#[path = "registry/client_macos.rs"]
mod client;
#[cfg(not(target_os = "macos"))]
mod credentials;
mod opts;
mod platform;
#[cfg(not(target_os = "macos"))]
mod reason;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use futures_util::StreamExt;
use futures_util::stream;
use sexton_inject::{ImageCommand, Resolve, Unresolved};

use crate::shared::values::timeout;
use client::Lookup;
pub use opts::RegistryOpts;
pub use platform::Platform;

/// Lookups at a time: enough to hide the round trips of a handful of registries, few
/// enough not to look like a flood to one of them.
const CONCURRENCY: usize = 4;

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
