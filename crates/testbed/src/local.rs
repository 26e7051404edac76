//! Small pieces of the local machine that several test files use: a free loopback port and
//! `openssl` (certificates for the TLS servers under test).

use std::net::TcpListener;
use std::process::{Command, Output};

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `openssl` with `args`, which must succeed.
pub fn openssl(args: &[&str]) -> Output {
    let out = Command::new("openssl").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
