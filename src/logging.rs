//! Logs through `tracing` on stderr: human-readable by default, JSON on request. Every
//! line carries the container name (a span field). The level applies to sexton's own
//! events; libraries (the Kubernetes client, HTTP) log warnings and errors only.

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

pub fn init(format: LogFormat, level: tracing::Level) {
    let filter = Targets::new()
        .with_target("sexton", level)
        .with_default(level.min(tracing::Level::WARN));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        LogFormat::Text => registry.with(layer.with_ansi(false)).try_init(),
        LogFormat::Json => registry
            .with(layer.json().with_current_span(true).with_span_list(false))
            .try_init(),
    };
}
