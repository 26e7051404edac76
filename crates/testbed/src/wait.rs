//! Bounded waits: every wait of the tests ends on its event or at its bound, stretched
//! under emulation.

use std::time::{Duration, Instant};

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
