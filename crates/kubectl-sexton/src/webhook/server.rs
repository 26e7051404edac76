//! The webhook's TLS port under hostile clients: a bounded number of connections, and of
//! connections per client address (more are closed at once, so that one client cannot take
//! every slot; with `--client-ca-file`, the API server's are counted apart and a newcomer
//! takes the place of a connection that waits on its client: `clients.rs`); a TLS handshake
//! within 10 s of the accept; a connection with no review in
//! flight for [`IDLE`] is closed (gracefully: a GOAWAY for HTTP/2), which bounds idle TLS,
//! slow request heads and keep-alive alike and frees the slot; the body's own deadline and
//! size are the handler's (`limits.rs`). While every slot is taken the port accepts nothing
//! (with client auth, unless a connection waits on its client), and `/readyz` says so.
//!
//! The private-key operations of the TLS handshakes run on a thread of their own
//! ([`Handshakes::sign`]): the workers that answer established connections (the API
//! server keeps its connections) never wait behind a burst of them; the kernel shares the
//! CPUs between the two. Client addresses take turns there: a ClientHello is read without a
//! turn (a silent or slow client costs no CPU and holds nothing), then the server's reply,
//! whose private-key operation is the handshake's CPU, is computed on that thread in the
//! address's one turn ([`HANDSHAKES_PER_CLIENT`]); the thread runs them first come first
//! served, so a flood from one address puts at most one private-key operation ahead of
//! another address's handshake. The ClientHello is read on the serving workers, and the
//! rest of the handshake (the client's Finished) on a second thread of its own
//! ([`Handshakes::finish`]): queued behind the signatures it waited for them. The address's
//! turn is given back once the reply is signed; a client that makes the server ask for
//! another ClientHello (a HelloRetryRequest) has that one, and its signature, processed
//! there, in a turn taken again once its bytes are there (`retry_turn.rs`).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{Next, from_fn};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::debug;

use super::clients::{Clients, Entered, HANDSHAKES_PER_CLIENT};
use super::limits::{ANSWER_PIECE, SEND_DEADLINE};
use super::retry_turn::RetryTurn;
use super::sending::Overdue;
use crate::shared::http::{Health, ListenError, accept};

/// A client has this long after the accept to complete its TLS handshake (the wait for a turn
/// included).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// ... and to send a request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection with no request in flight for this long is closed.
pub const IDLE: Duration = Duration::from_secs(10);
/// Requests in flight on one HTTP/2 connection.
const STREAMS: u32 = 32;
/// What a connection reads ahead of the handler, beyond the body budget
/// (`limits::BODY_BUDGET`, which counts what the handler holds): HTTP/1's read buffer (a
/// request head must fit; the API server's are a few hundred bytes) and HTTP/2's flow-control
/// windows (hyper's default, 1 MiB a connection, let 1 024 connections hold 1 GiB of unread
/// bodies; at 32 KiB a stream and 128 KiB the connection a 3 MiB review still arrives in a
/// hundred round trips, a millisecond each at most in a cluster). A stream waiting for room
/// in the body budget keeps its unread window: four such streams stall their connection,
/// for at most `limits::BUDGET_WAIT`.) What it writes ahead: answers' pieces
/// (`limits::ANSWER_PIECE`), each counted in the answers' budget wherever it waits, in
/// HTTP/1's write buffer of the same size, or HTTP/2's send buffer of one piece a stream
/// (hyper's default, 400 KiB, lets a stream take a whole answer of a few hundred kB at once).
const HTTP1_BUFFER: usize = 16 << 10;
const HTTP2_WINDOW: u32 = 32 << 10;
/// The kernel's send buffer of a connection (Linux doubles it for its bookkeeping): what it
/// holds of answers out of the budget's sight, and out of the process's memory but in its
/// cgroup's. Left to autotuning, it grows with the path's segment size, to about 1.3 MB on
/// loopback, where a whole answer of the patch limit fit in it; at 64 KiB a connection an
/// answer still goes out at 128 KiB a round trip, over 100 MB/s within a cluster.
const SEND_BUFFER: usize = 64 << 10;

/// How many connections are served.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// In all; more wait to be accepted.
    pub total: usize,
    /// From one client address; more are closed at once. With client auth, as many again of
    /// the API server's from it (`clients.rs`).
    pub per_client: usize,
    /// `--client-ca-file`: only the API server gets past the handshake.
    pub client_auth: bool,
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
    let shakes = Handshakes::start().map_err(error)?;
    let listener = TcpListener::bind(addr).await.map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    tokio::spawn(accept_loop(listener, router, tls, limits, health, shakes));
    Ok(bound)
}

/// The two threads of the TLS handshakes, each a runtime started once and never stopped.
#[derive(Clone)]
struct Handshakes {
    /// Computes the server's replies (their private-key operations), in the client
    /// addresses' turns. Measured on 2 cores beside 320 hostile clients (BENCHMARKS.md
    /// "Admission webhook under hostile clients"): with the handshakes on the serving
    /// workers, kept-alive reviews waited up to 56 ms behind reconnect bursts.
    sign: tokio::runtime::Handle,
    /// Finishes the handshakes once the reply is sent: the client's Finished, or a second
    /// ClientHello after a HelloRetryRequest (whose signature is then computed here).
    finish: tokio::runtime::Handle,
}

impl Handshakes {
    fn start() -> std::io::Result<Handshakes> {
        static SIGN: Mutex<Option<tokio::runtime::Handle>> = Mutex::new(None);
        static FINISH: Mutex<Option<tokio::runtime::Handle>> = Mutex::new(None);
        Ok(Handshakes {
            sign: thread_runtime(&SIGN, "tls-handshake")?,
            finish: thread_runtime(&FINISH, "tls-finish")?,
        })
    }
}

/// The runtime kept in `slot`, started on a thread of its own named `name` if there is none
/// yet. A current-thread runtime, not a multi-thread one of one worker: the latter runs a
/// task woken by the running one next (its LIFO slot), so a turn given back by one
/// address's handshake would go to the same address's next one, ahead of every other
/// address's; the current-thread scheduler queues it last.
fn thread_runtime(
    slot: &Mutex<Option<tokio::runtime::Handle>>,
    name: &str,
) -> std::io::Result<tokio::runtime::Handle> {
    let mut handle = slot.lock().expect("poisoned");
    if let Some(handle) = handle.as_ref() {
        return Ok(handle.clone());
    }
    // (built on its own thread, which keeps it: a runtime may not be dropped in another's task)
    let (built, receive) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => {
                    let _ = built.send(Ok(rt.handle().clone()));
                    rt.block_on(std::future::pending::<()>())
                }
                Err(e) => drop(built.send(Err(e))),
            }
        })?;
    let new = receive
        .recv()
        .map_err(|_| std::io::Error::other(format!("the {name} thread ended at its start")))??;
    *handle = Some(new.clone());
    Ok(new)
}

/// Aborts a task when dropped: a handshake that timed out while its task waited on one of
/// the handshake threads neither signs for a connection nobody will use nor keeps its
/// connection (and its address's turn) beyond the deadline.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    tls: Arc<rustls::ServerConfig>,
    limits: ConnectionLimits,
    health: Arc<Health>,
    shakes: Handshakes,
) {
    let slots = Arc::new(Semaphore::new(limits.total));
    let clients = Arc::new(Clients::new(limits.per_client, limits.client_auth));
    loop {
        let Some((slot, conn, peer)) = next_connection(&listener, &slots, &health, &clients).await
        else {
            return;
        };
        if let Err(e) = socket2::SockRef::from(&conn).set_send_buffer_size(SEND_BUFFER) {
            debug!(%peer, "cannot bound the connection's send buffer: {e}");
        }
        let Some(entered) = clients.enter(client_of(peer.ip())) else {
            debug!(%peer, "closed: {} connections from this address already", limits.per_client);
            continue;
        };
        let (tls, router, shakes) = (tls.clone(), router.clone(), shakes.clone());
        tokio::spawn(async move {
            serve_one(conn, tls, router, entered, &shakes).await;
            drop(slot);
        });
    }
}

/// The next connection, and its slot. While every slot is taken the port is jammed (not
/// ready) and accepts nothing; with client auth, unless a connection waits on its client:
/// then the next connection is accepted and takes the slot of the one that has waited
/// longest (`clients.rs`), so that only the API server's connections, and handshakes the
/// server is working on, jam the port.
async fn next_connection(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    health: &Health,
    clients: &Clients,
) -> Option<(OwnedSemaphorePermit, TcpStream, SocketAddr)> {
    loop {
        // (listening before looking, so that a connection that begins to wait meanwhile is seen)
        let waiting = clients.waiting();
        tokio::pin!(waiting);
        waiting.as_mut().enable();
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            let (conn, peer) = accept(listener).await;
            return Some((slot, conn, peer));
        }
        if clients.someone_waits() {
            let (conn, peer) = accept(listener).await;
            if slots.available_permits() == 0 {
                clients.make_room();
            }
            // (the closed connection's slot comes back once its task has ended; if nobody
            // waited on its client any more, this connection waits for a slot as any would)
            let slot = free_slot(slots, health).await?;
            return Some((slot, conn, peer));
        }
        health.jammed.store(true, Ordering::Relaxed);
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => Some(slot),
            () = &mut waiting => None,
        };
        health.jammed.store(false, Ordering::Relaxed);
        if let Some(slot) = slot {
            let (conn, peer) = accept(listener).await;
            return Some((slot.ok()?, conn, peer));
        }
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

/// The client an address counts as: itself, and an IPv4 address that comes IPv4-mapped (on
/// a dual-stack listener) as that IPv4 address. (Not an IPv6 /64: on some platforms the API
/// server's addresses and the pods' share one, EKS's IPv6 subnets and Cilium's default pod
/// pool among them, and a pod would then take the API server's connections and turns.)
fn client_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// The TLS handshake: the ClientHello read here without a turn, the server's reply (its
/// private-key operation) computed on the signing thread in one of the client's turns
/// (given back once it is computed), then the rest awaited on the finishing thread.
/// (Awaited on the signing thread, as it was, the Finished of a new connection queued there
/// again behind a reconnect burst's signatures.)
async fn handshake(
    conn: TcpStream,
    tls: &Arc<rustls::ServerConfig>,
    entered: &Entered,
    shakes: &Handshakes,
) -> std::io::Result<tokio_rustls::server::TlsStream<RetryTurn>> {
    let peer = conn.peer_addr().ok();
    let conn = RetryTurn::new(conn);
    let hello =
        tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), conn).await?;
    entered.waits_on_client(false);
    let turns = &entered.handshakes;
    let turn = match turns.clone().try_acquire_owned() {
        Ok(turn) => turn,
        Err(_) => {
            debug!(
                ?peer,
                "TLS handshake waits for a turn: {HANDSHAKES_PER_CLIENT} from this address already"
            );
            turns.clone().acquire_owned().await.expect("never closed")
        }
    };
    let tls = tls.clone();
    // (rustls signs here: `into_stream` processes the ClientHello and queues the reply, or a
    // HelloRetryRequest, unsigned, when the client offered no key share the server takes)
    let signed = shakes.sign.spawn(async move {
        let mut retry = false;
        let finishing = hello.into_stream_with(tls, |c| {
            retry = c.handshake_kind() == Some(rustls::HandshakeKind::FullWithHelloRetryRequest);
        });
        (finishing, retry)
    });
    let _abort = AbortOnDrop(signed.abort_handle());
    let (mut finishing, retry) = signed.await.map_err(std::io::Error::other)?;
    // (a client that needs a HelloRetryRequest, as a Go client in FIPS mode does since it
    // sends no X25519 share, has its second ClientHello, and so its signature, processed on
    // the finishing thread a round trip later: in a turn taken again once it is there)
    if let (true, Some(conn)) = (retry, finishing.get_mut()) {
        conn.next_read_in_turn(turns.clone());
    }
    drop(turn);
    entered.waits_on_client(true);
    let finished = shakes.finish.spawn(finishing);
    let _abort = AbortOnDrop(finished.abort_handle());
    finished.await.map_err(std::io::Error::other)?
}

/// The handshake, then requests until the client closes or the connection is idle.
async fn serve_one(
    conn: TcpStream,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    mut entered: Entered,
    shakes: &Handshakes,
) {
    let shaken = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(conn, &tls, &entered, shakes));
    let stream = tokio::select! {
        shaken = shaken => match shaken {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return debug!("TLS handshake failed: {e}"),
            Err(_) => return debug!("TLS handshake timed out"),
        },
        () = entered.place_taken() => {
            return debug!("closed in its TLS handshake: a newer connection took its place");
        }
    };
    // (with client auth, every handshake that ends has a certificate the CA signed)
    if stream.get_ref().1.peer_certificates().is_some() {
        if let Err(why) = entered.api_server() {
            return debug!("closed after its TLS handshake: {why}");
        }
    }
    let bodies = entered.shares();
    let (in_flight, watch_in_flight) = watch::channel(0usize);
    let in_flight = Arc::new(in_flight);
    let (late, mut watch_overdue) = watch::channel(false);
    let late = Overdue(Arc::new(late));
    let counted = router.layer(from_fn(move |mut req: Request, next: Next| {
        let busy = Busy::start(in_flight.clone());
        if let Some(bodies) = &bodies {
            req.extensions_mut().insert(bodies.clone());
        }
        req.extensions_mut().insert(late.clone());
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
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(HTTP1_BUFFER);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(STREAMS)
        .initial_stream_window_size(HTTP2_WINDOW)
        .initial_connection_window_size(4 * HTTP2_WINDOW)
        .max_send_buf_size(ANSWER_PIECE)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    let served = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(counted));
    tokio::pin!(served);
    let why = tokio::select! {
        r = served.as_mut() => match r {
            Ok(()) => "ended".to_string(),
            Err(e) => format!("ended: {e}"),
        },
        () = idle(watch_in_flight) => {
            served.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), served).await;
            "idle".to_string()
        }
        true = overdue(&mut watch_overdue) => {
            format!("an answer not taken within {}s", SEND_DEADLINE.as_secs())
        }
    };
    debug!("connection closed: {why}");
    drop(entered);
}

/// Whether one of the connection's answers was not taken in time (`false` if no answer can
/// be any more).
async fn overdue(late: &mut watch::Receiver<bool>) -> bool {
    late.wait_for(|late| *late).await.is_ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_ipv4_address_counts_as_itself_and_ipv6_addresses_apart() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(client_of(ip("10.0.0.7")), ip("10.0.0.7"));
        assert_eq!(client_of(ip("::ffff:10.0.0.7")), ip("10.0.0.7"));
        assert_ne!(
            client_of(ip("2001:db8:1:2::9")),
            client_of(ip("2001:db8:1:2::1"))
        );
    }
}
