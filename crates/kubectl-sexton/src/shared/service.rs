//! The flags every long-running subcommand (`controller`, `webhook`) shares, each mirrored by
//! an environment variable: where it serves metrics and health, and how it logs.

use std::net::SocketAddr;

use clap::Args;
use sexton_core::config::{LogFormat, LogLevel};

#[derive(Args, Debug, Clone)]
pub struct ServiceFlags {
    /// Serve Prometheus metrics on http://ADDR/metrics
    #[arg(
        long,
        env = "SEXTON_METRICS_ADDR",
        default_value = "0.0.0.0:8080",
        value_name = "ADDR"
    )]
    pub metrics_addr: SocketAddr,
    /// Serve /healthz and /readyz on ADDR
    #[arg(
        long,
        env = "SEXTON_HEALTH_ADDR",
        default_value = "0.0.0.0:8081",
        value_name = "ADDR"
    )]
    pub health_addr: SocketAddr,
    #[arg(long, env = "SEXTON_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[arg(long, env = "SEXTON_LOG_LEVEL", value_enum, default_value = "info")]
    pub log_level: LogLevel,
}
