//! Endpoints of the supervisor's settings (pure): readiness probes (`tcp://`, `http://`,
//! `file://`) and the HTTP URLs of shutdown hooks. The in-pod binary's probe.rs does the I/O.

use std::net::IpAddr;
use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EndpointError {
    #[error("a file probe needs an absolute path: file:///path/to/file")]
    RelativeFile,
    #[error("expected tcp://HOST:PORT, http://HOST:PORT/PATH or file:///PATH")]
    Scheme,
    #[error("unterminated [IPv6 address]")]
    UnterminatedIpv6,
    #[error("unexpected {0:?} after the address")]
    AfterAddress(String),
    #[error("missing host")]
    MissingHost,
    #[error("bad host {0:?}")]
    BadHost(String),
    #[error("bad port {0:?}")]
    BadPort(String),
    #[error("missing port: use HOST:PORT")]
    MissingPort,
    #[error("only http:// URLs are supported (local endpoints need no TLS)")]
    NotHttp,
    #[error("user information in the URL is not supported")]
    UserInfo,
    #[error("the path may not contain spaces or line breaks")]
    BadPath,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Tcp { host: String, port: u16 },
    Http(HttpUrl),
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Probe {
    pub fn parse(s: &str) -> Result<Probe, EndpointError> {
        if let Some(rest) = s.strip_prefix("tcp://") {
            let (host, port) = split_host_port(rest.trim_end_matches('/'), None)?;
            return Ok(Probe::Tcp { host, port });
        }
        if s.starts_with("http://") {
            return Ok(Probe::Http(HttpUrl::parse(s)?));
        }
        if let Some(path) = s.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(EndpointError::RelativeFile);
            }
            return Ok(Probe::File(PathBuf::from(path)));
        }
        Err(EndpointError::Scheme)
    }

    pub fn describe(&self) -> String {
        match self {
            Probe::Tcp { host, port } => format!("tcp://{}:{port}", bracket(host)),
            Probe::Http(u) => u.to_string(),
            Probe::File(p) => format!("file://{}", p.display()),
        }
    }
}

pub fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

impl std::fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "http://{}:{}{}",
            bracket(&self.host),
            self.port,
            self.path
        )
    }
}

fn split_host_port(hp: &str, default_port: Option<u16>) -> Result<(String, u16), EndpointError> {
    let (host, port) = if let Some(rest) = hp.strip_prefix('[') {
        let end = rest.find(']').ok_or(EndpointError::UnterminatedIpv6)?;
        let host = &rest[..end];
        let after = &rest[end + 1..];
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None if after.is_empty() => (host, None),
            None => return Err(EndpointError::AfterAddress(after.into())),
        }
    } else {
        match hp.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hp, None),
        }
    };
    if host.is_empty() {
        return Err(EndpointError::MissingHost);
    }
    if host.contains(['/', '@', ' ']) {
        return Err(EndpointError::BadHost(host.into()));
    }
    let port = match (port, default_port) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| EndpointError::BadPort(p.into()))?,
        (None, Some(d)) => d,
        (None, None) => return Err(EndpointError::MissingPort),
    };
    Ok((host.to_string(), port))
}

impl HttpUrl {
    pub fn parse(s: &str) -> Result<HttpUrl, EndpointError> {
        let rest = s.strip_prefix("http://").ok_or(EndpointError::NotHttp)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(EndpointError::UserInfo);
        }
        let (host, port) = split_host_port(authority, Some(80))?;
        if path.contains(['\r', '\n', ' ']) {
            return Err(EndpointError::BadPath);
        }
        Ok(HttpUrl {
            host,
            port,
            path: path.to_string(),
        })
    }

    /// 127.0.0.0/8, ::1 or `localhost`.
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_probes() {
        assert_eq!(
            Probe::parse("tcp://127.0.0.1:15021"),
            Ok(Probe::Tcp {
                host: "127.0.0.1".into(),
                port: 15021
            })
        );
        assert_eq!(
            Probe::parse("tcp://[::1]:80/"),
            Ok(Probe::Tcp {
                host: "::1".into(),
                port: 80
            })
        );
        assert_eq!(
            Probe::parse("file:///tmp/ready"),
            Ok(Probe::File("/tmp/ready".into()))
        );
        let Probe::Http(u) = Probe::parse("http://localhost:15021/healthz/ready?x=1").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("localhost", 15021, "/healthz/ready?x=1")
        );
        for bad in [
            "",
            "tcp://",
            "tcp://host",
            "tcp://:80",
            "tcp://h:0",
            "tcp://h:70000",
            "https://x",
            "file://x",
            "ftp://a:1",
            "http://a b/",
        ] {
            assert!(Probe::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_and_loopback() {
        let u = HttpUrl::parse("http://127.0.0.1:15020/quitquitquit").unwrap();
        assert!(u.is_loopback());
        assert_eq!(u.to_string(), "http://127.0.0.1:15020/quitquitquit");
        let u = HttpUrl::parse("http://[::1]:4191/shutdown").unwrap();
        assert!(u.is_loopback());
        assert_eq!(u.to_string(), "http://[::1]:4191/shutdown");
        let u = HttpUrl::parse("http://127.8.9.10").unwrap();
        assert!(u.is_loopback() && u.port == 80 && u.path == "/");
        for remote in [
            "http://10.0.0.1:1/",
            "http://example.com/",
            "http://[fe80::1]:1/",
            "http://0.0.0.0:1/",
        ] {
            assert!(!HttpUrl::parse(remote).unwrap().is_loopback(), "{remote}");
        }
        assert!(HttpUrl::parse("http://user@127.0.0.1/").is_err());
    }
}
