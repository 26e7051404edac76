//! The cluster side's HTTP endpoints: Prometheus metrics and health, and the admission
//! webhook over TLS, as axum routers served by hyper with a bound on how long a client may
//! take to send a request head, so that idle or slow connections cannot pile up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
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
}

impl Health {
    /// One cache is filled; ready when all are.
    pub fn one_ready(&self) {
        if self.pending.fetch_sub(1, Ordering::Relaxed) <= 1 {
            self.ready.store(true, Ordering::Relaxed);
        }
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

/// `GET /healthz` and `/livez` (the process answers) and `/readyz` (caches filled).
pub fn health_routes(health: Arc<Health>) -> Router {
    let alive = || async { "ok\n" };
    Router::new()
        .route("/healthz", get(alive))
        .route("/livez", get(alive))
        .route(
            "/readyz",
            get(move || async move {
                if health.ready.load(Ordering::Relaxed) {
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
    flag: &'static str,
    addr: SocketAddr,
    source: std::io::Error,
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

/// The next connection; on EMFILE and the like it backs off instead of spinning.
async fn accept(listener: &TcpListener) -> tokio::net::TcpStream {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => return conn,
            Err(e) => {
                debug!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn accept_loop(listener: TcpListener, router: Router) {
    loop {
        let conn = accept(&listener).await;
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

/// At most this many TLS connections are served at once; more wait to be accepted.
const MAX_TLS_CONNECTIONS: usize = 1024;
/// A client has this long to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr` now and serves `router` over TLS (HTTP/1.1 with keep-alive, or HTTP/2 as
/// the API server negotiates it) in the background; `tls` picks the certificate per
/// handshake, so a reloaded one is used from the next connection on.
pub async fn serve_tls(
    addr: SocketAddr,
    router: Router,
    tls: Arc<rustls::ServerConfig>,
    flag: &'static str,
) -> Result<SocketAddr, ListenError> {
    let error = |source| ListenError { flag, addr, source };
    let listener = TcpListener::bind(addr).await.map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    tokio::spawn(tls_accept_loop(listener, router, tls));
    Ok(bound)
}

async fn tls_accept_loop(listener: TcpListener, router: Router, tls: Arc<rustls::ServerConfig>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_TLS_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let conn = accept(&listener).await;
        let (acceptor, service) = (acceptor.clone(), TowerToHyperService::new(router.clone()));
        tokio::spawn(async move {
            let _slot = slot;
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(conn)).await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return debug!("TLS handshake failed: {e}"),
                Err(_) => return debug!("TLS handshake timed out"),
            };
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            builder
                .http2()
                .timer(TokioTimer::new())
                .keep_alive_interval(Some(Duration::from_secs(30)));
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!("connection ended: {e}");
            }
        });
    }
}
