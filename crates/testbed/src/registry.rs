//! The test registries of `scripts/registry.sh` (the distribution registry on 127.0.0.1,
//! plain HTTP: anonymous, with basic authentication, and with bearer tokens from a token
//! realm), with its test images: started if they are not running, once per test process.

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

/// `scripts/registry.sh up` once per test process (idempotent: reuses running registries).
pub fn registry() -> &'static Registries {
    static REGISTRIES: OnceLock<Registries> = OnceLock::new();
    REGISTRIES.get_or_init(|| {
        let up = Command::new(REGISTRY_SH)
            .arg("up")
            .output()
            .expect("run scripts/registry.sh");
        assert!(
            up.status.success(),
            "scripts/registry.sh up failed:\n{}",
            String::from_utf8_lossy(&up.stderr)
        );
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
