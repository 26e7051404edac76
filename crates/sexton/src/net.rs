//! TCP connections by host name, shared by the readiness probe and the API client: a
//! static glibc binary cannot rely on NSS, so literals and `localhost` are resolved here.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

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

/// A TCP connection to the first address of `host` that answers within `timeout` each.
pub fn connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"));
    for addr in resolve(host, port)? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}
