//! The long-running subcommands (`controller`, `webhook`) as processes: the flags they
//! share, each mirrored by an environment variable (where they serve metrics and health, how
//! they log), and the one runner that owns their process: logging, the runtime, SIGTERM and
//! SIGINT as a `Shutdown` that the work awaits to stop gracefully (`signals.rs`), the metrics and health
//! endpoints, leader election (`leader.rs`), and the exit code.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use clap::Args;
use kube::Client;
use prometheus_client::metrics::gauge::Gauge;
use sexton_core::config::{LogFormat, LogLevel};
use tracing::error;

use crate::shared::exit::Exit;
use crate::shared::http::{self, Health, ListenError};
use crate::shared::leader::{self, LeaseOpts};
use crate::shared::signals::Shutdown;
use crate::shared::{logging, runtime};

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

/// Runs a long-running subcommand: its logs, the runtime, the signals, then `main`, which
/// returns the exit code. `command` names it in the one line printed when even the runtime
/// cannot start.
pub fn run<F>(
    command: &str,
    log_format: LogFormat,
    log_level: LogLevel,
    main: impl FnOnce(Service) -> F,
) -> Exit
where
    F: Future<Output = Exit>,
{
    logging::init(log_format, log_level);
    match runtime::multi_thread() {
        Ok(rt) => rt.block_on(async {
            let service = Service {
                health: Arc::default(),
                shutdown: Shutdown::on_signals(),
            };
            main(service).await
        }),
        Err(e) => {
            logging::stderr_line(&format!(
                "kubectl-sexton {command}: cannot start the async runtime: {e}"
            ));
            Exit::Failed
        }
    }
}

/// What the runner gives a long-running subcommand.
pub struct Service {
    /// What `/healthz` and `/readyz` report.
    pub health: Arc<Health>,
    /// Resolves once SIGTERM or SIGINT came.
    pub shutdown: Shutdown,
}

impl Service {
    /// Binds the metrics and health addresses now, so that a taken port is a start-up error
    /// naming its flag, and serves them in the background: `metrics` writes what
    /// `/metrics` shows.
    pub async fn serve_endpoints(
        &self,
        metrics_addr: SocketAddr,
        health_addr: SocketAddr,
        metrics: impl Fn() -> String + Clone + Send + Sync + 'static,
    ) -> Result<(), ListenError> {
        let endpoints = vec![
            (
                metrics_addr,
                http::metrics_routes(metrics),
                "--metrics-addr",
            ),
            (
                health_addr,
                http::health_routes(self.health.clone()),
                "--health-addr",
            ),
        ];
        http::serve_all(endpoints).await
    }

    /// Runs `work` while this replica holds the Lease, written as `field_manager` (`leader`
    /// is 1 meanwhile); its exit code, or 1 if the Lease is lost or cannot be used.
    pub async fn while_leading(
        &self,
        client: Client,
        lease: &LeaseOpts,
        identity: &str,
        field_manager: &'static str,
        leader: Gauge,
        work: impl Future<Output = Exit>,
    ) -> Exit {
        let elected = leader::Elected {
            identity,
            field_manager,
            health: self.health.clone(),
            leader,
            shutdown: self.shutdown.clone(),
        };
        leader::while_leading(client, lease, elected, work).await
    }
}

/// A start-up step failed: logged, and the process cannot run (exit 2).
pub fn unusable(e: &dyn std::fmt::Display) -> Exit {
    error!("{e}");
    Exit::Unusable
}
