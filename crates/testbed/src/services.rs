//! The services the tests need, and where they come from: the repository's scripts
//! (`scripts/testenv.sh`, `scripts/tools.sh`), and the one-line failure of a test that
//! finds one of them missing.

/// The repository's root (this crate lives in `crates/testbed`).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

pub const TESTENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/testenv.sh");

/// `scripts/testenv.sh VERB`, which must succeed (the test fails with its error output);
/// its standard output, trimmed (a path, for the verbs that build something).
pub fn testenv_cmd(verb: &str) -> String {
    let out = std::process::Command::new(TESTENV)
        .arg(verb)
        .output()
        .unwrap_or_else(|e| panic!("running scripts/testenv.sh {verb}: {e}"));
    assert!(
        out.status.success(),
        "scripts/testenv.sh {verb}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Fails the calling test with one line naming what to start, and how, when a service the
/// tests need is not there: a plain `cargo test` then fails fast instead of building a control
/// plane for a quarter of an hour, or printing one connection error per test.
/// `scripts/test.sh` starts every service before the tests.
///
/// A panic, not `process::exit`: other tests of the same process may hold real processes
/// (a webhook, a controller, a proxy) that their fixtures' `Drop` ends; exiting would skip
/// those and leave them running after the test binary. The full line is written once per
/// process, later callers fail with a short one.
pub fn require_service(what: &str, start: &str) -> ! {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    static TOLD: AtomicBool = AtomicBool::new(false);
    if !TOLD.swap(true, Ordering::SeqCst) {
        // straight to the descriptor: libtest captures eprintln!'s output and would lose it
        let _ = std::io::stderr().write_all(
            format!(
                "\n{what} is not running: start it with `{start}` (or run everything with scripts/test.sh; scripts/test.sh --help lists the stages)\n"
            )
            .as_bytes(),
        );
    }
    panic!("{what} is not running (see the first failure's line for how to start it)")
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
