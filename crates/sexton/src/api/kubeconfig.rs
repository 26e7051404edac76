//! KUBEXIT_KUBECONFIG (feature `kubeconfig`, local runs): the current context's cluster and
//! user of a kubeconfig file. What sexton's client can use: `server`,
//! `certificate-authority[-data]`, `insecure-skip-tls-verify`, `token`, `tokenFile`,
//! `client-certificate[-data]`, `client-key[-data]`; anything else that authenticates
//! (exec plugins, auth providers, basic auth) is refused by name. The resolution works on
//! the parsed document (unit-tested in every build); only the YAML parser (~1 MB) is the
//! feature's.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::config::{Config, Token};

/// What makes a kubeconfig unusable for sexton's client.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[cfg(feature = "kubeconfig")]
    #[error("{0}")]
    Read(io::Error),
    #[cfg(feature = "kubeconfig")]
    #[error("not YAML: {0}")]
    Yaml(serde_saphyr::Error),
    #[error("no current-context")]
    NoCurrentContext,
    #[error("no {kind} {name:?} in {list}")]
    NoEntry {
        kind: &'static str,
        name: String,
        list: &'static str,
    },
    #[error("the current context names no cluster")]
    NoCluster,
    #[error("cluster {0:?} has no server")]
    NoServer(String),
    #[error("server {server:?}: {problem}")]
    Server {
        server: String,
        problem: &'static str,
    },
    #[error(
        "user.{0} is not supported by sexton's API client (use token, tokenFile or client-certificate/client-key)"
    )]
    Unsupported(&'static str),
    #[error("client-certificate and client-key go together")]
    HalfIdentity,
    #[error("{key}-data: not base64: {source}")]
    NotBase64 {
        key: &'static str,
        source: base64::DecodeError,
    },
    #[error("{key}: {path}: {source}")]
    File {
        key: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// The kubeconfig at `path`, resolved.
#[cfg(feature = "kubeconfig")]
pub fn read(path: &Path) -> Result<Config, KubeconfigError> {
    let text = std::fs::read_to_string(path).map_err(KubeconfigError::Read)?;
    let doc: Value = serde_saphyr::from_str(&text).map_err(KubeconfigError::Yaml)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    resolve(&doc, dir, &|p: &Path| std::fs::read(p))
}

/// The named entry of a list of `{name, <kind>: {...}}` (clusters, users, contexts).
fn entry<'a>(
    doc: &'a Value,
    list: &'static str,
    kind: &'static str,
    name: &str,
) -> Result<&'a Value, KubeconfigError> {
    doc[list]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"].as_str() == Some(name))
        .map(|e| &e[kind])
        .ok_or_else(|| KubeconfigError::NoEntry {
            kind,
            name: name.to_string(),
            list,
        })
}

/// Reads a file or its inline `-data` (base64) variant; relative paths are relative to the
/// kubeconfig's directory, as kubectl has them.
fn file_or_data(
    section: &Value,
    key: &'static str,
    dir: &Path,
    read: &dyn Fn(&Path) -> io::Result<Vec<u8>>,
) -> Result<Option<Vec<u8>>, KubeconfigError> {
    use base64::Engine;
    if let Some(data) = section[format!("{key}-data")].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|source| KubeconfigError::NotBase64 { key, source })?;
        return Ok(Some(bytes));
    }
    match section[key].as_str() {
        Some(p) => {
            let path = dir.join(p);
            match read(&path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(source) => Err(KubeconfigError::File { key, path, source }),
            }
        }
        None => Ok(None),
    }
}

/// The current context of a parsed kubeconfig as a `Config`; `read` reads the files it names.
pub fn resolve(
    doc: &Value,
    dir: &Path,
    read: &dyn Fn(&Path) -> io::Result<Vec<u8>>,
) -> Result<Config, KubeconfigError> {
    let current = doc["current-context"]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or(KubeconfigError::NoCurrentContext)?;
    let context = entry(doc, "contexts", "context", current)?;
    let cluster_name = context["cluster"]
        .as_str()
        .ok_or(KubeconfigError::NoCluster)?;
    let cluster = entry(doc, "clusters", "cluster", cluster_name)?;
    let user = match context["user"].as_str() {
        Some(u) if !u.is_empty() => entry(doc, "users", "user", u)?,
        _ => &Value::Null,
    };
    let server = cluster["server"]
        .as_str()
        .ok_or_else(|| KubeconfigError::NoServer(cluster_name.to_string()))?;
    let (host, port, prefix) = parse_server(server)?;
    for unsupported in ["exec", "auth-provider", "username", "password"] {
        if !user[unsupported].is_null() {
            return Err(KubeconfigError::Unsupported(unsupported));
        }
    }
    let token = match (user["token"].as_str(), user["tokenFile"].as_str()) {
        (Some(t), _) => Token::Inline(t.to_string()),
        (None, Some(f)) => Token::File(dir.join(f)),
        (None, None) => Token::None,
    };
    let identity = match (
        file_or_data(user, "client-certificate", dir, read)?,
        file_or_data(user, "client-key", dir, read)?,
    ) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err(KubeconfigError::HalfIdentity),
    };
    Ok(Config {
        host,
        port,
        prefix,
        ca: file_or_data(cluster, "certificate-authority", dir, read)?,
        token,
        identity,
        insecure: cluster["insecure-skip-tls-verify"].as_bool() == Some(true),
    })
}

/// `https://host[:port][/prefix]` (an IPv6 host in brackets).
fn parse_server(server: &str) -> Result<(String, u16, String), KubeconfigError> {
    let bad = |problem| KubeconfigError::Server {
        server: server.to_string(),
        problem,
    };
    let rest = server
        .strip_prefix("https://")
        .ok_or_else(|| bad("not an https:// URL"))?;
    let (authority, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.starts_with('[') || h.ends_with(']') => {
            (h, p.parse().map_err(|_| bad("invalid port"))?)
        }
        _ => (authority, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("no host"));
    }
    Ok((host.to_string(), port, prefix.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn files(p: &Path) -> io::Result<Vec<u8>> {
        match p.to_str().unwrap() {
            "/kc/pki/ca.crt" => Ok(b"CA".to_vec()),
            "/kc/admin.crt" => Ok(b"CERT".to_vec()),
            "/kc/admin.key" => Ok(b"KEY".to_vec()),
            _ => Err(io::Error::new(io::ErrorKind::NotFound, "No such file")),
        }
    }

    fn doc(cluster: Value, user: Value) -> Value {
        json!({
            "current-context": "c",
            "contexts": [{"name": "other", "context": {"cluster": "x"}}, {"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "clusters": [{"name": "k", "cluster": cluster}],
            "users": [{"name": "u", "user": user}]
        })
    }

    #[test]
    fn current_context_with_files_data_and_tokens() {
        let dir = Path::new("/kc");
        let c = resolve(
            &doc(
                json!({"server": "https://127.0.0.1:6443", "certificate-authority": "pki/ca.crt"}),
                json!({"client-certificate": "/kc/admin.crt", "client-key": "admin.key"}),
            ),
            dir,
            &files,
        )
        .unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.prefix.as_str()),
            ("127.0.0.1", 6443, "")
        );
        assert_eq!(c.ca.as_deref(), Some(&b"CA"[..]));
        assert_eq!(c.identity, Some((b"CERT".to_vec(), b"KEY".to_vec())));
        assert_eq!(c.token, Token::None);
        assert!(!c.insecure);
        let c = resolve(
            &doc(
                json!({"server": "https://[fd00::1]/k8s/", "certificate-authority-data": "Q0EhCg==", "insecure-skip-tls-verify": true}),
                json!({"tokenFile": "tok"}),
            ),
            dir,
            &files,
        )
        .unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.prefix.as_str()),
            ("fd00::1", 443, "/k8s")
        );
        assert_eq!(c.address(), "https://[fd00::1]:443/k8s");
        assert_eq!(c.ca.as_deref(), Some(&b"CA!\n"[..]));
        assert_eq!(c.token, Token::File("/kc/tok".into()));
        assert!(c.insecure);
        let c = resolve(
            &doc(
                json!({"server": "https://h"}),
                json!({"token": "t", "tokenFile": "f"}),
            ),
            dir,
            &files,
        )
        .unwrap();
        assert_eq!(
            c.token,
            Token::Inline("t".into()),
            "token wins over tokenFile"
        );
    }

    #[test]
    fn what_cannot_be_used_is_named() {
        let err = |cluster: Value, user: Value| {
            resolve(&doc(cluster, user), Path::new("/kc"), &files)
                .unwrap_err()
                .to_string()
        };
        let ok = json!({"server": "https://h"});
        assert!(err(json!({"server": "http://h"}), json!({})).contains("not an https:// URL"));
        assert!(err(json!({"server": "https://h:x"}), json!({})).contains("invalid port"));
        assert!(err(json!({}), json!({})).contains("has no server"));
        assert!(
            err(ok.clone(), json!({"exec": {"command": "aws"}}))
                .contains("user.exec is not supported")
        );
        assert!(
            err(ok.clone(), json!({"client-certificate": "/kc/admin.crt"})).contains("go together")
        );
        assert!(
            err(
                ok.clone(),
                json!({"client-certificate": "nope", "client-key": "admin.key"})
            )
            .contains("client-certificate: /kc/nope: No such file")
        );
        assert!(err(ok, json!({"client-key-data": "!!"})).contains("client-key-data: not base64"));
        let e = resolve(
            &json!({"current-context": "gone", "contexts": []}),
            Path::new("/"),
            &files,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "no context \"gone\" in contexts");
        assert_eq!(
            resolve(&json!({}), Path::new("/"), &files)
                .unwrap_err()
                .to_string(),
            "no current-context"
        );
    }
}
