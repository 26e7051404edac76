//! Registry credentials from a docker config.json, the file `docker login` writes:
//! `auths` entries with `auth` (base64 of USER:PASSWORD), or `username` and `password`, or
//! a `registrytoken`. Credential helpers (`credsStore`, `credHelpers`) are programs this
//! command does not run: a registry whose credentials are there is tried anonymously, and a
//! refusal names the helper and the fix.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use sexton_inject::Unresolved;

/// The credentials of a docker config file (none without a file). No `Debug`: it holds
/// passwords, which must not reach a log.
#[derive(Default)]
pub struct Credentials {
    /// Each registry's entry, and the file (or Secret) it came from.
    auths: BTreeMap<String, (AuthEntry, PathBuf)>,
    store: Option<String>,
    helpers: BTreeMap<String, String>,
}

/// Where a registry's credentials came from, for the reason of a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// None known: anonymous.
    Anonymous,
    /// An `auths` entry of this file.
    File(PathBuf),
    /// A credential helper (`docker-credential-NAME`), not run: anonymous.
    Helper(String),
    /// An OAuth identity token of this file, which a registry client must exchange through
    /// the registry's own OAuth flow, not supported: anonymous.
    IdentityToken(PathBuf),
}

#[derive(Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(rename = "credsStore", default)]
    creds_store: Option<String>,
    #[serde(rename = "credHelpers", default)]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Clone, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

impl Credentials {
    /// Reads `explicit` (`--registry-config`), else the default file if there is one:
    /// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
    pub fn load(explicit: Option<&Path>) -> Result<Self, Unresolved> {
        let (path, what) = match explicit {
            Some(p) => (p.to_path_buf(), "--registry-config"),
            None => match default_path() {
                Some(p) if p.exists() => (p, "the default of --registry-config"),
                _ => return Ok(Self::default()),
            },
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Unresolved(format!("cannot read {} ({what}): {e}", path.display())))?;
        Self::parse(&text, path.clone()).map_err(|e| {
            Unresolved(format!(
                "{} ({what}) is not a docker config.json: {e}",
                path.display()
            ))
        })
    }

    fn parse(text: &str, path: PathBuf) -> Result<Self, serde_json::Error> {
        let file: ConfigFile = serde_json::from_str(text)?;
        Ok(Self {
            auths: file
                .auths
                .into_iter()
                .map(|(k, v)| (host_key(&k), (v, path.clone())))
                .collect(),
            store: file.creds_store.filter(|s| !s.is_empty()),
            helpers: file
                .cred_helpers
                .into_iter()
                .map(|(k, v)| (host_key(&k), v))
                .collect(),
        })
    }

    /// Adds the entries of an image pull Secret (`.dockerconfigjson`, or the older
    /// `.dockercfg`, whose object is the `auths` alone), named `label` in reasons; they win
    /// over the file's, as the kubelet's pull secrets would.
    pub fn add_pull_secret(&mut self, label: &str, text: &str) -> Result<(), serde_json::Error> {
        let file: ConfigFile = serde_json::from_str(text)?;
        let auths = match file.auths.is_empty() {
            false => file.auths,
            true => serde_json::from_str::<BTreeMap<String, AuthEntry>>(text)?,
        };
        for (k, v) in auths {
            self.auths.insert(host_key(&k), (v, PathBuf::from(label)));
        }
        Ok(())
    }

    /// The authentication to use with `registry` (as an image reference names it), and
    /// where it came from; an entry that cannot be used is an error naming it.
    pub fn for_registry(&self, registry: &str) -> Result<(RegistryAuth, Source), Unresolved> {
        let key = host_key(registry);
        // docker's order: a registry's own helper, then the `auths` entry (credsStore
        // leaves it empty), then the store
        if let Some(helper) = self.helpers.get(&key) {
            return Ok((RegistryAuth::Anonymous, Source::Helper(helper.clone())));
        }
        if let Some((e, from)) = self.auths.get(&key) {
            let file = Source::File(from.clone());
            if let Some(token) = &e.registrytoken {
                return Ok((RegistryAuth::Bearer(token.clone()), file));
            }
            if let (Some(user), Some(password)) = (&e.username, &e.password) {
                return Ok((RegistryAuth::Basic(user.clone(), password.clone()), file));
            }
            if let Some(auth) = e.auth.as_deref().filter(|a| !a.is_empty()) {
                return match decode(auth) {
                    Some((user, password)) => Ok((RegistryAuth::Basic(user, password), file)),
                    None => Err(Unresolved(format!(
                        "the `auth` of {registry} in {} is not base64 of USER:PASSWORD",
                        from.display()
                    ))),
                };
            }
            if e.identitytoken.is_some() {
                return Ok((RegistryAuth::Anonymous, Source::IdentityToken(from.clone())));
            }
        }
        match &self.store {
            Some(store) => Ok((RegistryAuth::Anonymous, Source::Helper(store.clone()))),
            None => Ok((RegistryAuth::Anonymous, Source::Anonymous)),
        }
    }
}

fn default_path() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("config.json")),
        None => std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".docker/config.json")),
    }
}

/// `USER:PASSWORD` from base64 (the password may hold colons).
fn decode(auth: &str) -> Option<(String, String)> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// A registry as docker keys it: without scheme and path (`https://index.docker.io/v1/`
/// is the key `docker login` writes for Docker Hub), Docker Hub's names made one.
fn host_key(s: &str) -> String {
    let s = s.trim();
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let host = s.split('/').next().unwrap_or_default().to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_string()
        }
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(json: &str) -> Credentials {
        Credentials::parse(json, PathBuf::from("/c.json")).unwrap()
    }

    fn basic(u: &str, p: &str) -> RegistryAuth {
        RegistryAuth::Basic(u.into(), p.into())
    }

    #[test]
    fn entries_by_host_in_every_spelling_docker_writes() {
        // "alice:s3cret:x" and "bob:pw"
        let c = creds(
            r#"{"auths": {
                "https://index.docker.io/v1/": {"auth": "YWxpY2U6czNjcmV0Ong="},
                "http://127.0.0.1:5001/v2/": {"username": "bob", "password": "pw"},
                "ghcr.io": {"registrytoken": "tok"},
                "quay.io": {"auth": "not base64!"}
            }}"#,
        );
        let file = Source::File("/c.json".into());
        assert_eq!(
            c.for_registry("docker.io").unwrap(),
            (basic("alice", "s3cret:x"), file.clone())
        );
        assert_eq!(
            c.for_registry("127.0.0.1:5001").unwrap(),
            (basic("bob", "pw"), file.clone())
        );
        assert_eq!(
            c.for_registry("ghcr.io").unwrap(),
            (RegistryAuth::Bearer("tok".into()), file)
        );
        assert_eq!(
            c.for_registry("127.0.0.1:5000").unwrap(),
            (RegistryAuth::Anonymous, Source::Anonymous)
        );
        let e = c.for_registry("quay.io").unwrap_err().0;
        assert_eq!(
            e,
            "the `auth` of quay.io in /c.json is not base64 of USER:PASSWORD"
        );
    }

    #[test]
    fn helpers_and_identity_tokens_are_named_not_run() {
        let c = creds(
            r#"{"auths": {"a.io": {}, "b.io": {"identitytoken": "x"}, "c.io": {"auth": "Yzpk"}},
                "credsStore": "desktop", "credHelpers": {"d.io": "ecr-login"}}"#,
        );
        let anon = |r: &str| c.for_registry(r).unwrap();
        assert_eq!(
            anon("a.io"),
            (RegistryAuth::Anonymous, Source::Helper("desktop".into()))
        );
        assert_eq!(
            anon("b.io"),
            (
                RegistryAuth::Anonymous,
                Source::IdentityToken("/c.json".into())
            )
        );
        assert_eq!(anon("c.io").0, basic("c", "d"));
        assert_eq!(
            anon("d.io"),
            (RegistryAuth::Anonymous, Source::Helper("ecr-login".into()))
        );
        assert_eq!(anon("e.io").1, Source::Helper("desktop".into()));
    }

    #[test]
    fn unreadable_files_name_the_flag() {
        let e = Credentials::load(Some(Path::new("/nonexistent/config.json")))
            .err()
            .unwrap();
        assert!(
            e.0.starts_with("cannot read /nonexistent/config.json (--registry-config): "),
            "{e}"
        );
        assert!(Credentials::parse("{\"auths\": []}", PathBuf::new()).is_err());
        assert!(Credentials::parse("{}", PathBuf::new()).is_ok());
    }
}
