//! The async runtimes: the short commands (`inject`'s registry lookups, `doctor`, `ejob
//! results`, `version`) run their async part to completion on a current-thread runtime
//! (`block_on`); the long-running ones (`controller`, `webhook`) on two worker threads
//! (`service::run`).

use std::future::Future;

/// Runs `f` to completion on a runtime of its own; an error only when no runtime can be
/// started (no file descriptor left for its I/O driver, say).
pub fn block_on<F: Future>(f: F) -> std::io::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(f))
}

/// The long-running commands' runtime: they mostly wait for the API server.
pub fn multi_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
