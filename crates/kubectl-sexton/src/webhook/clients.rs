//! Who the webhook's connections come from, and how many each may hold.
//!
//! Without `--client-ca-file`, a connection counts against its client address's limit
//! (`--max-connections-per-client`; one over it is closed at once), and its reviews against
//! the address's share of the budgets (`limits::ClientShare`). The API server calls from one
//! address or a few, which anyone else there (a hostNetwork pod on a control-plane node)
//! shares: docs/security.md says what that costs.
//!
//! With `--client-ca-file`, a connection whose client certificate the CA signed is the API
//! server's (no other client gets past the handshake): once its handshake ends it leaves its
//! address's count for one of its own (the same limit, counted apart), and its reviews take
//! the budgets whole, with no address's share (`server.rs`). Before its handshake ends, a
//! connection cannot be told from any other at its address: the client's certificate comes
//! after the server's reply. So a new connection that its address's limit, or the total,
//! would refuse takes the place of the connection that has waited longest on its client (it
//! is closed): one that has sent nothing since its accept, or nothing since the server's
//! reply. The API server speaks within a round trip each time, so unauthenticated
//! connections, idle or stalled, cannot keep its new connections out; only handshakes the
//! server is working on (a ClientHello waiting for its address's turn, or being signed) are
//! never closed for another.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{Notify, Semaphore};

use super::limits::ClientShare;

/// Server replies (each a private-key operation: about 1-2 ms of a core for RSA-2048, spent
/// before the server knows who the client is) computed at once for one client address. One:
/// the handshake thread computes one at a time anyway, so a single turn costs an address no
/// throughput, and it makes the thread take addresses in turn. (It did not move a new
/// connection's p99 beside 320 hostile clients, 5.8x its quiet value before and after;
/// reading the client's Finished off this thread did: 4.9x to 2.5x; BENCHMARKS.md
/// "Admission webhook under hostile clients".) The others wait (FIFO) rather than being closed: a burst of new connections
/// from the API server must not fail reviews.
pub const HANDSHAKES_PER_CLIENT: usize = 1;

/// The connections being served, by client address.
pub struct Clients {
    /// Connections from one address not known to be the API server's (all of them without
    /// client auth), and, apart, the API server's from it: as many, since the limit is
    /// ample for any one client and the API server keeps a few (one HTTP/2 connection
    /// carries 32 reviews at once, far beyond the reviews' 2 turns); the total
    /// (`--max-connections`) bounds them all, so the memory bound is the same.
    per_client: usize,
    /// With `--client-ca-file`: a connection over a limit takes the place of the one that
    /// has waited longest on its client.
    authenticating: bool,
    table: Mutex<Table>,
    /// Woken when a connection begins to wait on its client: one that could make room.
    waiting: Notify,
}

#[derive(Default)]
struct Table {
    addresses: HashMap<IpAddr, Address>,
    next: u64,
}

/// One client address.
struct Address {
    /// Its connections not known to be the API server's, by id.
    unknown: HashMap<u64, Unknown>,
    /// Its connections whose client certificate `--client-ca-file`'s CA signed.
    api_server: usize,
    /// The turns of its TLS handshakes (`server.rs`).
    handshakes: Arc<Semaphore>,
    /// Its share of the budgets (`limits::CLIENT_BODY_SHARE`, `limits::STAMP_CLIENT_SHARE`).
    shares: ClientShare,
}

/// A connection not known to be the API server's.
struct Unknown {
    /// Since when it has waited on its client, if it does (it could make room).
    waiting_since: Option<Instant>,
    /// Told when it is to be closed to make room.
    closed: Arc<Notify>,
}

/// What a connection is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    Unknown,
    ApiServer,
    /// Counted nowhere any more: its place was taken, or the API server's limit reached.
    Gone,
}

impl Address {
    fn new() -> Self {
        Address {
            unknown: HashMap::new(),
            api_server: 0,
            handshakes: Arc::new(Semaphore::new(HANDSHAKES_PER_CLIENT)),
            shares: ClientShare::new(),
        }
    }

    /// The connection that has waited longest on its client, and since when.
    fn longest_waiting(&self) -> Option<(u64, Instant)> {
        self.unknown
            .iter()
            .filter_map(|(id, c)| Some((*id, c.waiting_since?)))
            .min_by_key(|(_, since)| *since)
    }

    /// Closes connection `id` to make room.
    fn close(&mut self, id: u64) {
        if let Some(c) = self.unknown.remove(&id) {
            c.closed.notify_one();
        }
    }
}

impl Clients {
    pub fn new(per_client: usize, authenticating: bool) -> Self {
        Clients {
            per_client,
            authenticating,
            table: Mutex::default(),
            waiting: Notify::new(),
        }
    }

    /// A new connection from `ip`, waiting on its client (for its ClientHello); `None` if
    /// its address has as many as it may and none can make room.
    pub fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<Entered> {
        let mut table = self.table.lock().expect("poisoned");
        let id = table.next;
        table.next += 1;
        let address = table.addresses.entry(ip).or_insert_with(Address::new);
        if address.unknown.len() >= self.per_client {
            let room = self.authenticating.then(|| address.longest_waiting());
            let Some(Some((oldest, _))) = room else {
                return None;
            };
            address.close(oldest);
        }
        let closed = Arc::new(Notify::new());
        let unknown = Unknown {
            waiting_since: Some(Instant::now()),
            closed: closed.clone(),
        };
        address.unknown.insert(id, unknown);
        let entered = Entered {
            clients: self.clone(),
            ip,
            id,
            standing: Standing::Unknown,
            handshakes: address.handshakes.clone(),
            shares: address.shares.clone(),
            closed,
        };
        drop(table);
        self.began_waiting();
        Some(entered)
    }

    /// With client auth: closes the connection, of any address, that has waited longest on
    /// its client (its slot comes back once its task has ended); whether there was one.
    pub fn make_room(&self) -> bool {
        if !self.authenticating {
            return false;
        }
        let mut table = self.table.lock().expect("poisoned");
        let Some((ip, id)) = longest_waiting(&table) else {
            return false;
        };
        if let Some(address) = table.addresses.get_mut(&ip) {
            address.close(id);
        }
        true
    }

    /// With client auth: whether a connection waits on its client (could make room).
    pub fn someone_waits(&self) -> bool {
        self.authenticating && longest_waiting(&self.table.lock().expect("poisoned")).is_some()
    }

    /// Resolves once a connection begins to wait on its client (only with client auth).
    pub fn waiting(&self) -> tokio::sync::futures::Notified<'_> {
        self.waiting.notified()
    }

    fn began_waiting(&self) {
        if self.authenticating {
            self.waiting.notify_waiters();
        }
    }
}

/// The connection, of any address, that has waited longest on its client.
fn longest_waiting(table: &Table) -> Option<(IpAddr, u64)> {
    let oldest = table
        .addresses
        .iter()
        .filter_map(|(ip, a)| Some((*ip, a.longest_waiting()?)))
        .min_by_key(|(_, (_, since))| *since);
    oldest.map(|(ip, (id, _))| (ip, id))
}

/// One connection as it is counted; leaves its count when dropped.
pub struct Entered {
    clients: Arc<Clients>,
    ip: IpAddr,
    id: u64,
    standing: Standing,
    /// Its address's handshake turns.
    pub handshakes: Arc<Semaphore>,
    shares: ClientShare,
    closed: Arc<Notify>,
}

impl Entered {
    /// Whether the connection now waits on its client (before its ClientHello, after the
    /// server's reply), or the server works for it (the reply being signed, or waiting for
    /// its address's turn), when it must keep its place.
    pub fn waits_on_client(&self, waiting: bool) {
        let mut table = self.clients.table.lock().expect("poisoned");
        let this = table
            .addresses
            .get_mut(&self.ip)
            .and_then(|a| a.unknown.get_mut(&self.id));
        if let Some(this) = this {
            this.waiting_since = waiting.then(Instant::now);
        }
        drop(table);
        if waiting {
            self.clients.began_waiting();
        }
    }

    /// Resolves when the connection is to be closed: another took its place.
    pub async fn place_taken(&self) {
        self.closed.notified().await
    }

    /// Counts the connection as the API server's (its client certificate verified): out of
    /// its address's count, into the API server's from that address. Why not, if it cannot
    /// be.
    pub fn api_server(&mut self) -> Result<(), &'static str> {
        let mut table = self.clients.table.lock().expect("poisoned");
        let Some(address) = table.addresses.get_mut(&self.ip) else {
            return Err("its place was taken");
        };
        if address.unknown.remove(&self.id).is_none() {
            return Err("its place was taken");
        }
        self.standing = Standing::Gone;
        if address.api_server >= self.clients.per_client {
            return Err("the API server's connections from its address are at their limit");
        }
        address.api_server += 1;
        self.standing = Standing::ApiServer;
        Ok(())
    }

    /// Its address's share of the budgets; none for the API server's connections (no
    /// unauthenticated client gets past the handshake to hold any of the budgets).
    pub fn shares(&self) -> Option<ClientShare> {
        (self.standing == Standing::Unknown).then(|| self.shares.clone())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let mut table = self.clients.table.lock().expect("poisoned");
        let Some(address) = table.addresses.get_mut(&self.ip) else {
            return;
        };
        match self.standing {
            Standing::Unknown => drop(address.unknown.remove(&self.id)),
            Standing::ApiServer => address.api_server -= 1,
            Standing::Gone => {}
        }
        if address.unknown.is_empty() && address.api_server == 0 {
            table.addresses.remove(&self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn place_taken(e: &Entered) -> bool {
        e.place_taken().now_or_never().is_some()
    }

    #[test]
    fn without_client_auth_a_connection_over_the_limit_is_refused() {
        let clients = Arc::new(Clients::new(2, false));
        let held: Vec<_> = (0..2).map(|_| clients.enter(ip("10.0.0.1"))).collect();
        assert!(held.iter().all(Option::is_some));
        assert!(clients.enter(ip("10.0.0.1")).is_none());
        assert!(!clients.make_room());
        assert!(clients.enter(ip("10.0.0.2")).is_some());
    }

    #[test]
    fn with_client_auth_the_longest_waiting_makes_room_and_working_handshakes_keep_theirs() {
        let clients = Arc::new(Clients::new(2, true));
        let a = clients.enter(ip("10.0.0.1")).unwrap();
        let b = clients.enter(ip("10.0.0.1")).unwrap();
        // (a's ClientHello read: the server works for it)
        a.waits_on_client(false);
        let c = clients.enter(ip("10.0.0.1")).unwrap();
        assert!(!place_taken(&a) && place_taken(&b), "b waited longest");
        // a and c both worked for: nobody makes room at the address, nor in all
        c.waits_on_client(false);
        assert!(clients.enter(ip("10.0.0.1")).is_none());
        assert!(!clients.make_room());
        // a's reply sent: it waits on its client again, and makes room in all
        a.waits_on_client(true);
        assert!(clients.make_room());
        assert!(place_taken(&a) && !place_taken(&c));
    }

    #[test]
    fn the_api_servers_connections_are_counted_apart_and_have_no_share() {
        let clients = Arc::new(Clients::new(1, true));
        let mut api = clients.enter(ip("10.0.0.1")).unwrap();
        assert!(api.shares().is_some());
        api.api_server().unwrap();
        assert!(api.shares().is_none());
        // the address's count is free again (nobody's place taken); the API server's is full
        let mut other = clients.enter(ip("10.0.0.1")).unwrap();
        assert!(!place_taken(&api));
        assert!(other.api_server().is_err());
        drop(api);
        let mut again = clients.enter(ip("10.0.0.1")).unwrap();
        again.api_server().unwrap();
        drop((other, again));
        assert!(clients.table.lock().unwrap().addresses.is_empty());
    }
}
