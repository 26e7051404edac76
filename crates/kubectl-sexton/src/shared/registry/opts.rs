//! Where and how images are looked up: what a command's flags (or the webhook's) say, read
//! by the client of each platform (client.rs, client_macos.rs).

use std::path::PathBuf;
use std::time::Duration;

use super::platform::Platform;

/// Where and how images are looked up.
#[derive(Debug, Clone)]
#[cfg_attr(target_os = "macos", allow(dead_code))] // (no lookups on macOS: client_macos.rs)
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
