//! Images' ENTRYPOINT and CMD from their registries (OCI distribution API: index →
//! platform manifest → config), for containers that `wrap` must run behind the supervisor
//! and that set no `command`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sexton_inject::{ImageCommand, Unresolved};

/// Where and how images are looked up.
#[derive(Debug, Clone)]
pub struct RegistryOpts {
    /// The platform whose image is read from a multi-platform index (`linux/amd64`).
    pub platform: String,
    /// Registries reached over plain HTTP (`127.0.0.1:5000`).
    pub insecure: Vec<String>,
    /// A docker config file with credentials (`auths`), if any.
    pub docker_config: Option<PathBuf>,
}

/// The ENTRYPOINT and CMD of each image (looked up once each, a few at a time).
pub async fn lookup_all(
    images: &[String],
    _opts: &RegistryOpts,
) -> BTreeMap<String, Result<ImageCommand, Unresolved>> {
    images
        .iter()
        .map(|i| {
            (
                i.clone(),
                Err(Unresolved(
                    "registry lookups are not implemented yet".into(),
                )),
            )
        })
        .collect()
}
