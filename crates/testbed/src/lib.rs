//! Test support shared by the crates' integration tests. Nothing here is a mock: the test
//! control plane is real (`scripts/testenv.sh`), and processes are real processes.
//!
//! - `cluster`: the test API server, an admin client, fresh namespaces, kubectl.
//! - `scratch`: a scratch directory per test and the processes a test starts in it.
//! - `proxy`: `kubectl proxy` and a relay that holds one request, to make the real API
//!   server answer at the moment a test chooses.
//! - `registry`: the test container registries (`scripts/registry.sh`).
//! - `http`: a GET of a process's health or metrics endpoint, and the metrics parsed.
//! - `local`: a free loopback port, `openssl`.
//! - `vendor`: stand-ins of the vendors' sidecar injectors (Istio, Vault, Datadog, ...) on
//!   the test API server, under their real configuration names (`testenv/vendor-webhook`).

mod cluster;
mod http;
mod local;
mod proxy;
mod registry;
mod scratch;
mod vendor;

pub use cluster::*;
pub use http::*;
pub use local::*;
pub use proxy::*;
pub use registry::*;
pub use scratch::*;
pub use vendor::*;

use std::time::{Duration, Instant};

/// The repository's root (this crate lives in `crates/testbed`).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

pub const TESTENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/testenv.sh");

/// Ends the test process at once with one line naming what to start, and how, when a
/// service the tests need is not there: a plain `cargo test` then fails fast instead of
/// building a control plane for a quarter of an hour, or printing one connection error per
/// test. `scripts/test.sh` starts every service before the tests.
pub fn require_service(what: &str, start: &str) -> ! {
    use std::io::Write;
    // straight to the descriptor: libtest captures eprintln!'s output and would lose it
    let _ = std::io::stderr().write_all(
        format!(
            "\n{what} is not running: start it with `{start}` (or run everything with scripts/test.sh; scripts/test.sh --help lists the stages)\n"
        )
        .as_bytes(),
    );
    std::process::exit(2)
}

/// The helm binary of `scripts/tools.sh` (built from its Go module, cached), asked for
/// once per test process; `require_service` when it is not built yet.
pub fn helm_bin() -> &'static str {
    static HELM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HELM.get_or_init(|| {
        if let Ok(helm) = std::env::var("HELM") {
            return helm;
        }
        let out = std::process::Command::new(format!("{ROOT}/scripts/tools.sh"))
            .args(["helm", "--cached"])
            .output()
            .expect("running scripts/tools.sh");
        if !out.status.success() {
            require_service("helm (built from its Go module)", "scripts/tools.sh helm");
        }
        String::from_utf8_lossy(&out.stdout).trim().to_string()
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

/// The bound of every wait in the tests, on a native machine (`wait_until` stretches it
/// under emulation: `slowdown`).
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// How much slower than native the binaries under test run: `SEXTON_TEST_SLOWDOWN`
/// (default 1). scripts/test.sh sets it for the arm64 stage, whose in-pod binary runs
/// under qemu-aarch64-static (see there for the factor and why). Every bounded wait
/// (`wait_until`, and so `Process::wait_status`) is stretched by it: a bound that holds
/// natively must hold emulated too, and a wait that ends on its event costs nothing more.
pub fn slowdown() -> u32 {
    static FACTOR: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *FACTOR.get_or_init(|| {
        std::env::var("SEXTON_TEST_SLOWDOWN")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&f| f >= 1)
            .unwrap_or(1)
    })
}

/// Waits until `cond` holds, checking every few milliseconds, for at most `timeout`
/// (stretched by `slowdown`).
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout * slowdown();
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
