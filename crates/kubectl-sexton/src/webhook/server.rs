//! The webhook's TLS port under hostile clients: a bounded number of connections, and of
//! connections per client address (more are closed at once, so that one client cannot take
//! every slot); at most [`HANDSHAKES_PER_CLIENT`] TLS handshakes of one client address worked
//! on at once (its others wait their turn, first come first served), so that a flood of
//! handshakes from one address, each a private-key operation, cannot queue ahead of another
//! address's reviews; a TLS handshake within 10 s of the accept, its wait for a turn included;
//! a connection with no review in flight for [`IDLE`] is closed (gracefully: a GOAWAY for
//! HTTP/2), which bounds idle TLS, slow request heads and keep-alive alike and frees the
//! slot; the body's own deadline and size are the handler's (`limits.rs`). While every slot
//! is taken the port accepts nothing, and `/readyz` says so. The handshakes run on a thread
//! of their own ([`handshake_runtime`]): the workers that answer established connections
//! (the API server keeps its connections) never wait behind a burst of private-key
//! operations; the kernel shares the CPUs between the two.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{Next, from_fn};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::debug;

use crate::shared::http::{Health, ListenError, accept};

/// A client has this long after the accept to complete its TLS handshake (the wait for a turn
/// included).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// TLS handshakes of one client address worked on at once. A handshake costs the server a
/// private-key operation (about 1-2 ms of a core for RSA-2048) before it knows who the client
/// is; the webhook's runtime has 2 threads. Handshakes beyond this wait (FIFO) rather than
/// being closed: a burst of new connections from the API server must not fail reviews.
pub const HANDSHAKES_PER_CLIENT: usize = 4;
/// ... and to send a request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection with no request in flight for this long is closed.
pub const IDLE: Duration = Duration::from_secs(10);
/// Requests in flight on one HTTP/2 connection.
const STREAMS: u32 = 32;

/// How many connections are served.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// In all; more wait to be accepted.
    pub total: usize,
    /// From one client address; more are closed at once.
    pub per_client: usize,
}

/// Binds `addr` now and serves `router` over TLS (HTTP/1.1 with keep-alive, or HTTP/2 as
/// the API server negotiates it) in the background; `tls` picks the certificate per
/// handshake, so a reloaded one is used from the next connection on.
pub async fn serve_tls(
    addr: SocketAddr,
    router: Router,
    tls: Arc<rustls::ServerConfig>,
    limits: ConnectionLimits,
    health: Arc<Health>,
    flag: &'static str,
) -> Result<SocketAddr, ListenError> {
    let error = |source| ListenError { flag, addr, source };
    let shakes = handshake_runtime().map_err(error)?;
    let listener = TcpListener::bind(addr).await.map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    tokio::spawn(accept_loop(listener, router, tls, limits, health, shakes));
    Ok(bound)
}

/// The runtime of the TLS handshakes: one thread, started once, never dropped (a runtime
/// may not be dropped inside another's task). Measured on 2 cores beside 320 hostile
/// clients (BENCHMARKS.md "Admission webhook under hostile clients"): with the handshakes
/// on the serving workers, kept-alive reviews waited up to 56 ms behind reconnect bursts.
fn handshake_runtime() -> std::io::Result<tokio::runtime::Handle> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt.handle().clone());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("tls-handshake")
        .enable_all()
        .build()?;
    if let Err(rt) = RUNTIME.set(rt) {
        std::mem::forget(rt); // (set by another caller first: this one is never used)
    }
    Ok(RUNTIME.get().expect("set above").handle().clone())
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    tls: Arc<rustls::ServerConfig>,
    limits: ConnectionLimits,
    health: Arc<Health>,
    shakes: tokio::runtime::Handle,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(limits.total));
    let clients = Arc::new(Clients::default());
    loop {
        let Some(slot) = free_slot(&slots, &health).await else {
            return;
        };
        let (conn, peer) = accept(&listener).await;
        let Some(client) = clients.enter(peer.ip(), limits.per_client) else {
            debug!(%peer, "closed: {} connections from this address already", limits.per_client);
            continue;
        };
        let (acceptor, router, shakes) = (acceptor.clone(), router.clone(), shakes.clone());
        tokio::spawn(async move {
            let turns = client.handshakes.clone();
            serve_one(conn, acceptor, router, turns, &shakes).await;
            drop((slot, client));
        });
    }
}

/// A connection slot; while there is none, the port is jammed (not ready).
async fn free_slot(slots: &Arc<Semaphore>, health: &Health) -> Option<OwnedSemaphorePermit> {
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        return Some(slot);
    }
    health.jammed.store(true, Ordering::Relaxed);
    let slot = slots.clone().acquire_owned().await.ok();
    health.jammed.store(false, Ordering::Relaxed);
    slot
}

/// The client addresses with connections.
#[derive(Default)]
struct Clients(Mutex<HashMap<IpAddr, Client>>);

/// One client address: its connections, and the turns of its TLS handshakes.
struct Client {
    connections: usize,
    handshakes: Arc<Semaphore>,
}

/// One connection of a client; leaves when dropped.
struct Entered {
    clients: Arc<Clients>,
    ip: IpAddr,
    handshakes: Arc<Semaphore>,
}

impl Clients {
    fn enter(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<Entered> {
        let mut map = self.0.lock().expect("poisoned");
        let client = map.entry(ip).or_insert_with(|| Client {
            connections: 0,
            handshakes: Arc::new(Semaphore::new(HANDSHAKES_PER_CLIENT)),
        });
        if client.connections >= max {
            return None;
        }
        client.connections += 1;
        Some(Entered {
            clients: self.clone(),
            ip,
            handshakes: client.handshakes.clone(),
        })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let mut map = self.clients.0.lock().expect("poisoned");
        if let Some(client) = map.get_mut(&self.ip) {
            client.connections -= 1;
            if client.connections == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// The TLS handshake in one of the client's turns; the turn is given back when it ends,
/// fails, or is dropped by the timeout.
async fn handshake(
    conn: TcpStream,
    acceptor: &tokio_rustls::TlsAcceptor,
    turns: &Semaphore,
) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
    let _turn = match turns.try_acquire() {
        Ok(turn) => turn,
        Err(_) => {
            let peer = conn.peer_addr().ok();
            debug!(
                ?peer,
                "TLS handshake waits for a turn: {HANDSHAKES_PER_CLIENT} from this address already"
            );
            turns.acquire().await.expect("never closed")
        }
    };
    acceptor.accept(conn).await
}

/// The handshake, then requests until the client closes or the connection is idle.
async fn serve_one(
    conn: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
    turns: Arc<Semaphore>,
    shakes: &tokio::runtime::Handle,
) {
    let shaken = shakes.spawn(async move {
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(conn, &acceptor, &turns)).await
    });
    let stream = match shaken.await {
        Ok(Ok(Ok(s))) => s,
        Ok(Ok(Err(e))) => return debug!("TLS handshake failed: {e}"),
        Ok(Err(_)) => return debug!("TLS handshake timed out"),
        Err(e) => return debug!("TLS handshake ended: {e}"),
    };
    let (in_flight, watch_in_flight) = watch::channel(0usize);
    let in_flight = Arc::new(in_flight);
    let counted = router.layer(from_fn(move |req: Request, next: Next| {
        let busy = Busy::start(in_flight.clone());
        async move {
            let response = next.run(req).await;
            drop(busy);
            response
        }
    }));
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(STREAMS)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    let served = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(counted));
    tokio::pin!(served);
    tokio::select! {
        r = served.as_mut() => if let Err(e) = r { debug!("connection ended: {e}") },
        () = idle(watch_in_flight) => {
            served.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), served).await;
            debug!("idle connection closed");
        }
    }
}

/// A request in flight on the connection.
struct Busy(Arc<watch::Sender<usize>>);

impl Busy {
    fn start(count: Arc<watch::Sender<usize>>) -> Busy {
        count.send_modify(|n| *n += 1);
        Busy(count)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// Resolves once no request has been in flight for [`IDLE`].
async fn idle(mut in_flight: watch::Receiver<usize>) {
    loop {
        let busy = *in_flight.borrow_and_update() > 0;
        let changed = in_flight.changed();
        match busy {
            false => {
                if tokio::time::timeout(IDLE, changed).await.is_err() {
                    return;
                }
            }
            true => {
                if changed.await.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}
