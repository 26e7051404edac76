//! Small pieces of the local machine that several test files use: a free loopback port,
//! `openssl` (certificates for the TLS servers under test), and a command fed its input.

use std::net::TcpListener;
use std::process::{Command, Output};

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    let [port] = free_ports();
    port
}

/// `N` distinct loopback ports nothing listens on now: all bound at once, then released.
/// (Taken one at a time, the kernel may hand out a port it has just released again: a
/// benchmark once gave one process the same port for two servers, and it exited.)
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
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

/// Runs `cmd` with `input` on its stdin and its output captured. A program that exits
/// without reading its input (refusing its arguments, say) is not a failure of the test:
/// the broken pipe is ignored, and the program's own exit status tells.
pub fn output_with_input(cmd: &mut std::process::Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the command");
    let mut stdin = child.stdin.take().expect("piped stdin");
    match stdin.write_all(input) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => {}
    }
    drop(stdin);
    child.wait_with_output().expect("waiting for the command")
}
