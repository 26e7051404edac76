//! The health and metrics endpoints of the cluster-side processes, read as a scraper reads
//! them: a plain HTTP GET on loopback, and the Prometheus text it returns as numbers. Shared
//! by the integration tests and the scale benchmark.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Each step of a GET (connecting, writing, every read) is bounded by this.
const STEP: Duration = Duration::from_secs(5);

/// (status code, body) of `GET path` at `addr` (`HOST:PORT`, an IP address).
pub fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let to: SocketAddr = addr
        .parse()
        .map_err(|_| invalid("not an IP address and port"))?;
    let mut s = TcpStream::connect_timeout(&to, STEP)?;
    s.set_read_timeout(Some(STEP))?;
    s.set_write_timeout(Some(STEP))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| invalid("no HTTP status line"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    Ok((code, body.to_string()))
}

/// Prometheus text: each sample's full name (`name{labels}`) → its value; comments and
/// blank lines skipped.
pub fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}
