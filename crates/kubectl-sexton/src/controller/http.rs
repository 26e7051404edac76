//! Metrics (Prometheus text format) and health endpoints: a deliberately tiny HTTP/1.1
//! server (GET only, one request per connection, bounded reads and time), because the
//! controller needs three fixed paths and not a web framework.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub type Labels = Vec<(String, String)>;

pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<Labels, Counter>,
    pub errors: Family<Labels, Counter>,
    pub actions: Family<Labels, Counter>,
    pub conflicts: Family<Labels, Counter>,
    pub queue_latency: Family<Labels, Histogram>,
    pub reconcile_duration: Family<Labels, Histogram>,
    pub leader: Gauge,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~33 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sexton_controller");
        let reconciles = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let actions = Family::<Labels, Counter>::default();
        let conflicts = Family::<Labels, Counter>::default();
        let queue_latency = Family::<Labels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let reconcile_duration = Family::<Labels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let leader = Gauge::default();
        registry.register(
            "reconciles",
            "Reconciliations run, by controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciliations that failed (and were retried), by controller and kind",
            errors.clone(),
        );
        registry.register(
            "actions",
            "Actions taken or refused, by controller, action and reason",
            actions.clone(),
        );
        registry.register(
            "patch_conflicts",
            "Patches rejected with 409 Conflict because the object changed (re-read and retried)",
            conflicts.clone(),
        );
        registry.register(
            "queue_latency_seconds",
            "Time from a watch event to the start of the reconciliation it triggers",
            queue_latency.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconciliation",
            reconcile_duration.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease (or runs without leader election)",
            leader.clone(),
        );
        Metrics {
            registry,
            reconciles,
            errors,
            actions,
            conflicts,
            queue_latency,
            reconcile_duration,
            leader,
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What the health endpoints report.
#[derive(Default)]
pub struct Health {
    /// The controller is connected and its caches are filled (or it is a healthy standby).
    pub ready: AtomicBool,
    /// Caches not filled yet.
    pub pending: AtomicUsize,
}

pub enum Serve {
    Metrics(Arc<Metrics>),
    Health(Arc<Health>),
}

/// Bind now (so a taken port is a startup error naming the flag), serve in the background.
pub async fn serve(addr: SocketAddr, what: Serve, flag: &str) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {flag}={addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let what = Arc::new(what);
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                continue;
            };
            let what = what.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), handle(conn, &what)).await;
            });
        }
    });
    Ok(bound)
}

async fn handle(mut conn: TcpStream, what: &Serve) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk).await?;
        if n == 0 || buf.len() > 16 * 1024 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path, what) {
        ("GET", "/metrics", Serve::Metrics(m)) => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            m.encode(),
        ),
        ("GET", "/healthz" | "/livez", Serve::Health(_)) => ("200 OK", "text/plain", "ok\n".into()),
        ("GET", "/readyz", Serve::Health(h)) => {
            if h.ready.load(Ordering::Relaxed) {
                ("200 OK", "text/plain", "ok\n".into())
            } else {
                (
                    "503 Service Unavailable",
                    "text/plain",
                    "not ready\n".into(),
                )
            }
        }
        ("GET", _, _) => ("404 Not Found", "text/plain", "not found\n".into()),
        _ => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(resp.as_bytes()).await?;
    conn.shutdown().await
}
