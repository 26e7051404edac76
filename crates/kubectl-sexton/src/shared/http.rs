//! The cluster side's HTTP endpoints: Prometheus metrics and health, as axum routers served
//! by hyper with a bound on how long a client may take to send a request head, so that idle
//! or slow connections cannot pile up. (The webhook's TLS port: `tls_server.rs`.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tracing::debug;

/// A client has this long to send its request head, and a connection this long in all.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// What the health endpoints report.
#[derive(Default)]
pub struct Health {
    /// The controller is connected and its caches are filled (or it is a healthy standby).
    pub ready: AtomicBool,
    /// Caches not filled yet.
    pub pending: AtomicUsize,
    /// Watches whose last list failed and has not succeeded since: a controller that
    /// cannot list works from a stale cache (or none), so it is not ready.
    pub failing: AtomicUsize,
    /// The serving port takes no more connections (every slot is taken): not ready.
    pub jammed: AtomicBool,
}

impl Health {
    /// One cache is filled; ready when all are.
    pub fn one_ready(&self) {
        if self.pending.fetch_sub(1, Ordering::Relaxed) <= 1 {
            self.ready.store(true, Ordering::Relaxed);
        }
    }

    /// What `/readyz` answers: ready, no watch failing to list, and the serving port not
    /// jammed.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
            && self.failing.load(Ordering::Relaxed) == 0
            && !self.jammed.load(Ordering::Relaxed)
    }
}

/// `GET /metrics`: the OpenMetrics text `encode` writes.
pub fn metrics_routes(encode: impl Fn() -> String + Clone + Send + Sync + 'static) -> Router {
    Router::new().route(
        "/metrics",
        get(move || async move {
            (
                [(
                    header::CONTENT_TYPE,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                )],
                encode(),
            )
        }),
    )
}

/// `GET /healthz` and `/livez` (the process answers) and `/readyz` (caches filled, every
/// watch listing, and the serving port, if any, taking connections).
pub fn health_routes(health: Arc<Health>) -> Router {
    let alive = || async { "ok\n" };
    Router::new()
        .route("/healthz", get(alive))
        .route("/livez", get(alive))
        .route(
            "/readyz",
            get(move || async move {
                if health.is_ready() {
                    (StatusCode::OK, "ok\n").into_response()
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
                }
            }),
        )
}

/// The address given by `flag` could not be listened on.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {flag}={addr}: {source}")]
pub struct ListenError {
    pub flag: &'static str,
    pub addr: SocketAddr,
    pub source: std::io::Error,
}

/// Binds `addr` now (so a taken port is a start-up error naming `flag`) and serves `router`
/// on it in the background; returns the bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    flag: &'static str,
) -> Result<SocketAddr, ListenError> {
    let error = |source| ListenError { flag, addr, source };
    let listener = TcpListener::bind(addr).await.map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    tokio::spawn(accept_loop(listener, router));
    Ok(bound)
}

/// Serves each (address, routes, flag) in the background, logging the bound addresses
/// (`serving metrics-addr`); the first address that cannot be bound is the error.
pub async fn serve_all(
    endpoints: Vec<(SocketAddr, Router, &'static str)>,
) -> Result<(), ListenError> {
    for (addr, routes, flag) in endpoints {
        let bound = serve(addr, routes, flag).await?;
        tracing::info!(%bound, "serving {}", flag.trim_start_matches('-'));
    }
    Ok(())
}

/// The next connection and its peer; on EMFILE and the like it backs off instead of spinning.
pub async fn accept(listener: &TcpListener) -> (tokio::net::TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                debug!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn accept_loop(listener: TcpListener, router: Router) {
    loop {
        let (conn, _) = accept(&listener).await;
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(conn), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, served).await;
        });
    }
}
