//! Readiness probes of the child (TCP connect, HTTP GET 2xx, file exists) and shutdown
//! hooks (HTTP POST). The targets are local endpoints (a sidecar proxy's admin port), so a
//! minimal HTTP/1.1 client over a `TcpStream`, bounded in time, does the job without a TLS
//! stack or an async runtime in the in-pod binary.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    pub fn parse(s: &str) -> Result<Probe, String> {
        if let Some(rest) = s.strip_prefix("tcp://") {
            let (host, port) = split_host_port(rest.trim_end_matches('/'), None)?;
            return Ok(Probe::Tcp { host, port });
        }
        if s.starts_with("http://") {
            return Ok(Probe::Http(HttpUrl::parse(s)?));
        }
        if let Some(path) = s.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err("a file probe needs an absolute path: file:///path/to/file".into());
            }
            return Ok(Probe::File(PathBuf::from(path)));
        }
        Err("expected tcp://HOST:PORT, http://HOST:PORT/PATH or file:///PATH".into())
    }

    pub fn describe(&self) -> String {
        match self {
            Probe::Tcp { host, port } => format!("tcp://{}:{port}", bracket(host)),
            Probe::Http(u) => u.to_string(),
            Probe::File(p) => format!("file://{}", p.display()),
        }
    }

    /// One check, bounded by `timeout`. Ok means ready.
    pub fn check(&self, timeout: Duration) -> Result<(), String> {
        match self {
            Probe::Tcp { host, port } => connect(host, *port, timeout)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Probe::Http(u) => match request("GET", u, timeout) {
                Ok(code) if (200..300).contains(&code) => Ok(()),
                Ok(code) => Err(format!("HTTP status {code}")),
                Err(e) => Err(e.to_string()),
            },
            Probe::File(p) => {
                if std::fs::symlink_metadata(p).is_ok() {
                    Ok(())
                } else {
                    Err(format!("{} does not exist", p.display()))
                }
            }
        }
    }
}

fn bracket(host: &str) -> String {
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

fn split_host_port(hp: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = hp.strip_prefix('[') {
        let end = rest.find(']').ok_or("unterminated [IPv6 address]")?;
        let host = &rest[..end];
        let after = &rest[end + 1..];
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None if after.is_empty() => (host, None),
            None => return Err(format!("unexpected {after:?} after the address")),
        }
    } else {
        match hp.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hp, None),
        }
    };
    if host.is_empty() {
        return Err("missing host".into());
    }
    if host.contains(['/', '@', ' ']) {
        return Err(format!("bad host {host:?}"));
    }
    let port = match (port, default_port) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("bad port {p:?}"))?,
        (None, Some(d)) => d,
        (None, None) => return Err("missing port: use HOST:PORT".into()),
    };
    Ok((host.to_string(), port))
}

impl HttpUrl {
    pub fn parse(s: &str) -> Result<HttpUrl, String> {
        let rest = s
            .strip_prefix("http://")
            .ok_or("only http:// URLs are supported (local endpoints need no TLS)")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err("user information in the URL is not supported".into());
        }
        let (host, port) = split_host_port(authority, Some(80))?;
        if path.contains(['\r', '\n', ' ']) {
            return Err("the path may not contain spaces or line breaks".into());
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

/// Resolves without DNS for literals and `localhost` (a static glibc binary cannot rely on
/// NSS); other names go through the system resolver.
fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)]);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    Ok((host, port).to_socket_addrs()?.collect())
}

fn connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"));
    for addr in resolve(host, port)? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// One HTTP/1.1 request with an empty body; returns the status code. The whole exchange is
/// bounded by `timeout`.
pub fn request(method: &str, url: &HttpUrl, timeout: Duration) -> io::Result<u16> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "timed out"))
    };
    let mut s = connect(&url.host, url.port, left()?)?;
    s.set_write_timeout(Some(left()?))?;
    let host = if url.port == 80 {
        bracket(&url.host)
    } else {
        format!("{}:{}", bracket(&url.host), url.port)
    };
    write!(
        s,
        "{method} {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sexton/{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        url.path,
        env!("CARGO_PKG_VERSION")
    )?;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    while !buf.windows(2).any(|w| w == b"\r\n") {
        s.set_read_timeout(Some(left()?))?;
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 4096 {
            break;
        }
    }
    parse_status(&buf).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "no HTTP status line in the response",
        )
    })
}

fn parse_status(buf: &[u8]) -> Option<u16> {
    let line = buf.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    parts.next()?.parse().ok()
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

    #[test]
    fn status_lines() {
        assert_eq!(parse_status(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(
            parse_status(b"HTTP/1.0 503 Service Unavailable\r\nx"),
            Some(503)
        );
        assert_eq!(parse_status(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(parse_status(b""), None);
    }
}
