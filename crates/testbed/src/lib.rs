//! Test support shared by the crates' integration tests. Nothing here is a mock: the test
//! control plane is real (`scripts/testenv.sh`), and processes are real processes.
//!
//! - `cluster`: the test API server, an admin client, fresh namespaces, kubectl.
//! - `scratch`: a scratch directory per test and the processes a test starts in it.
//! - `proxy`: `kubectl proxy` and a relay that holds one request, to make the real API
//!   server answer at the moment a test chooses.
//! - `registry`: the test container registries (`scripts/registry.sh`).

mod cluster;
mod proxy;
mod registry;
mod scratch;

pub use cluster::*;
pub use proxy::*;
pub use registry::*;
pub use scratch::*;

use std::time::{Duration, Instant};

/// The repository's root (this crate lives in `crates/testbed`).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

pub const TESTENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/testenv.sh");

/// The helm binary of `scripts/tools.sh` (built from its Go module on first use and
/// cached), asked for once per test process.
pub fn helm_bin() -> &'static str {
    static HELM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HELM.get_or_init(|| {
        let out = std::process::Command::new(format!("{ROOT}/scripts/tools.sh"))
            .arg("helm")
            .output()
            .expect("running scripts/tools.sh");
        let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
        assert!(out.status.success(), "tools.sh helm: {}", text(&out.stderr));
        text(&out.stdout)
    })
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

/// The bound of every wait in the tests.
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// Waits until `cond` holds, checking every few milliseconds, for at most `timeout`.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
