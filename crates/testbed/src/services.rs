//! The services the tests need, and where they come from: the repository's scripts
//! (`scripts/testenv.sh`, `scripts/tools.sh`), and the one-line end of a test process that
//! finds one of them missing.

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
