//! The test registries of `scripts/registry.sh` (the distribution registry on 127.0.0.1,
//! plain HTTP: anonymous, with basic authentication, and with bearer tokens from a token
//! realm), with its test images, once per test process; `require_service` when they are
//! not running.

use std::collections::HashMap;
use std::process::Command;
use std::sync::OnceLock;

pub const REGISTRY_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/registry.sh");

/// Where the registries are, and how to log in to the two that ask.
pub struct Registries {
    /// `HOST:PORT` of each.
    pub anonymous: String,
    pub basic: String,
    pub token: String,
    pub user: String,
    pub password: String,
    /// The manifest digest of `sexton-test/app:1` (the same in each).
    pub app_digest: String,
}

/// The running test registries (`scripts/registry.sh up`).
pub fn registry() -> &'static Registries {
    static REGISTRIES: OnceLock<Registries> = OnceLock::new();
    REGISTRIES.get_or_init(|| {
        let up = Command::new(REGISTRY_SH)
            .arg("status")
            .output()
            .expect("run scripts/registry.sh");
        if !up.status.success() {
            crate::services::require_service(
                "the test registry",
                "scripts/registry.sh up`; stop it with `scripts/registry.sh down",
            );
        }
        let env = Command::new(REGISTRY_SH).arg("env").output().unwrap();
        assert!(
            env.status.success(),
            "{}",
            String::from_utf8_lossy(&env.stderr)
        );
        let vars: HashMap<String, String> = String::from_utf8(env.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let var = |k: &str| {
            vars.get(&format!("SEXTON_REGISTRY_{k}"))
                .unwrap_or_else(|| panic!("scripts/registry.sh env lacks SEXTON_REGISTRY_{k}"))
                .clone()
        };
        Registries {
            anonymous: var("ANONYMOUS"),
            basic: var("BASIC"),
            token: var("TOKEN"),
            user: var("USER"),
            password: var("PASSWORD"),
            app_digest: var("APP_DIGEST"),
        }
    })
}
