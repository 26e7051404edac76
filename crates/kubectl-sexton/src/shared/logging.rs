//! Logs of the cluster-side binary: `tracing` on stderr, text or JSON (sexton-core's
//! `LogFormat` and `LogLevel`, parsed by clap). Unlike the in-pod binary, nothing shares
//! this stderr with a child, so lines go straight to it. JSON lines carry the current
//! span (the reconciled object), so every line of a reconciliation can be found by it.

use std::io::Write;

use sexton_core::config::{LogFormat, LogLevel};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn tracing_level(level: LogLevel) -> tracing::Level {
    match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
        LogLevel::Trace => tracing::Level::TRACE,
    }
}

/// Our own events at `level`; libraries' (kube, hyper, ...) at most at WARN unless more
/// is asked for, so that a debug run is not drowned in HTTP traces by default.
pub fn init(format: LogFormat, level: LogLevel) {
    let ours = tracing_level(level);
    let filter = Targets::new()
        .with_target("kubectl_sexton", ours)
        .with_default(LevelFilter::from_level(ours.min(tracing::Level::WARN)));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter);
    // try_init: a second call (tests) keeps the first subscriber
    let _ = match format {
        LogFormat::Text => registry.with(layer.with_ansi(false)).try_init(),
        LogFormat::Json => registry
            .with(layer.json().with_current_span(true).with_span_list(false))
            .try_init(),
    };
}

/// One line on stderr; a closed stderr is not worth a panic.
pub fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// One line on stdout; a closed stdout is not worth a panic either.
pub fn stdout_line(line: &str) {
    let _ = writeln!(std::io::stdout(), "{line}");
}
