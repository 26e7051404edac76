//! Readiness probes of the child (TCP connect, HTTP GET 200-399, file exists) and shutdown
//! hooks (HTTP POST). The targets are local endpoints (a sidecar proxy's admin port), so a
//! minimal HTTP/1.1 client over a `TcpStream`, bounded in time, does the job without a TLS
//! stack or an async runtime in the in-pod binary.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use crate::net::connect;
use sexton_core::endpoint::bracket;
pub use sexton_core::endpoint::{HttpUrl, Probe};

/// Why a readiness check did not pass (logged while the child is not ready yet).
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("{} does not exist", .0.display())]
    Missing(std::path::PathBuf),
}

/// One check of a readiness probe, bounded by `timeout`. Ok means ready.
pub fn check(probe: &Probe, timeout: Duration) -> Result<(), NotReady> {
    match probe {
        Probe::Tcp { host, port } => Ok(connect(host, *port, timeout).map(drop)?),
        // the kubelet's rule for httpGet probes, which `inject` maps here
        Probe::Http(u) => match request("GET", u, timeout)? {
            code if (200..400).contains(&code) => Ok(()),
            code => Err(NotReady::Status(code)),
        },
        Probe::File(p) => match std::fs::symlink_metadata(p) {
            Ok(_) => Ok(()),
            Err(_) => Err(NotReady::Missing(p.clone())),
        },
    }
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
