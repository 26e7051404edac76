//! Where the API server is and how sexton proves who it is: the pod's service account,
//! read exactly as kube-client's in-cluster configuration reads it, or (feature
//! `kubeconfig`, local runs) a kubeconfig file.

use std::io;
use std::path::PathBuf;

use sexton_core::endpoint::bracket;

/// Where the kubelet mounts the service account: token, ca.crt (and namespace, which
/// sexton does not read: KUBEXIT_NAMESPACE names the pod's namespace).
pub const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How requests are authenticated.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    None,
    Inline(String),
    /// Read on every request: the kubelet rotates bound service account tokens in place.
    File(PathBuf),
}

/// The token file could not be read for a request.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the service account token {path}: {source}")]
pub struct TokenError {
    pub path: PathBuf,
    pub source: io::Error,
}

/// Why the pod's service account cannot be used (no client: the birth deps cannot be read).
#[derive(Debug, thiserror::Error)]
pub enum InClusterError {
    #[error("{0} is not set")]
    Unset(&'static str),
    #[error("KUBERNETES_SERVICE_PORT={0:?} is not a port number")]
    BadPort(String),
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: io::Error },
}

/// One API server and the credentials for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The host, without brackets (an IPv6 address is bracketed where a URL needs it).
    pub host: String,
    pub port: u16,
    /// A path prefix of the server's URL (a kubeconfig's `server: https://h/prefix`).
    pub prefix: String,
    /// The certificate authorities (PEM) that the server's certificate must chain to.
    pub ca: Option<Vec<u8>>,
    pub token: Token,
    /// A client certificate and its key (PEM).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The kubeconfig's `insecure-skip-tls-verify`.
    pub insecure: bool,
}

impl Config {
    /// The server's address, for messages.
    pub fn address(&self) -> String {
        format!("https://{}{}", self.host_header(), self.prefix)
    }

    /// The `Host` header: the authority of the URL.
    pub fn host_header(&self) -> String {
        format!("{}:{}", bracket(&self.host), self.port)
    }

    /// The token for the next request (`None`: no bearer token).
    pub fn token(&self) -> Result<Option<String>, TokenError> {
        match &self.token {
            Token::None => Ok(None),
            Token::Inline(t) => Ok(Some(t.clone())),
            Token::File(path) => {
                std::fs::read_to_string(path)
                    .map(Some)
                    .map_err(|source| TokenError {
                        path: path.clone(),
                        source,
                    })
            }
        }
    }
}

/// The API server of in-cluster configuration, from KUBERNETES_SERVICE_HOST and
/// KUBERNETES_SERVICE_PORT as the kubelet sets them (an IPv6 host without brackets).
pub fn in_cluster_server(
    host: Option<String>,
    port: Option<String>,
) -> Result<(String, u16), InClusterError> {
    let host = host
        .filter(|h| !h.is_empty())
        .ok_or(InClusterError::Unset("KUBERNETES_SERVICE_HOST"))?;
    let port = port
        .filter(|p| !p.is_empty())
        .ok_or(InClusterError::Unset("KUBERNETES_SERVICE_PORT"))?;
    let port = port.parse().map_err(|_| InClusterError::BadPort(port))?;
    // (a host given with brackets would be one pair too many in the URL)
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Ok((host, port))
}

/// The pod's service account: the server from the environment, the CA and the token (read
/// again for each request) from `SERVICE_ACCOUNT`.
pub fn in_cluster() -> Result<Config, InClusterError> {
    let var = |k: &str| std::env::var(k).ok();
    let (host, port) = in_cluster_server(
        var("KUBERNETES_SERVICE_HOST"),
        var("KUBERNETES_SERVICE_PORT"),
    )?;
    let dir = PathBuf::from(SERVICE_ACCOUNT);
    let ca_path = dir.join("ca.crt");
    let unreadable = |path: &PathBuf| {
        let path = path.clone();
        move |source| InClusterError::Read { path, source }
    };
    let ca = std::fs::read(&ca_path).map_err(unreadable(&ca_path))?;
    let token = dir.join("token");
    // fail now, as kube-client did, when no token is mounted at all
    std::fs::metadata(&token).map_err(unreadable(&token))?;
    Ok(Config {
        host,
        port,
        prefix: String::new(),
        ca: Some(ca),
        token: Token::File(token),
        identity: None,
        insecure: false,
    })
}

/// Percent-encodes a path segment or query value (RFC 3986: all but the unreserved).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_cluster_servers() {
        let s = |h: &str, p: &str| in_cluster_server(Some(h.into()), Some(p.into()));
        assert_eq!(s("10.96.0.1", "443").unwrap(), ("10.96.0.1".into(), 443));
        assert_eq!(s("fd00::1", "6443").unwrap(), ("fd00::1".into(), 6443));
        assert_eq!(s("[fd00::1]", "6443").unwrap(), ("fd00::1".into(), 6443));
        assert!(
            s("", "443")
                .unwrap_err()
                .to_string()
                .contains("KUBERNETES_SERVICE_HOST")
        );
        assert!(
            in_cluster_server(Some("h".into()), None)
                .unwrap_err()
                .to_string()
                .contains("KUBERNETES_SERVICE_PORT is not set")
        );
        assert!(
            s("h", "https")
                .unwrap_err()
                .to_string()
                .contains("KUBERNETES_SERVICE_PORT=\"https\"")
        );
        let c = Config {
            host: "fd00::1".into(),
            port: 443,
            prefix: String::new(),
            ca: None,
            token: Token::None,
            identity: None,
            insecure: false,
        };
        assert_eq!(c.address(), "https://[fd00::1]:443");
        assert_eq!(c.host_header(), "[fd00::1]:443");
    }

    #[test]
    fn encoding() {
        assert_eq!(encode("metadata.name=job-1"), "metadata.name%3Djob-1");
        assert_eq!(encode("a b/c&d"), "a%20b%2Fc%26d");
        assert_eq!(encode("12345"), "12345");
    }
}
