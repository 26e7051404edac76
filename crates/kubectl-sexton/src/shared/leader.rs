//! Leader election (`--leader-elect`): a `coordination.k8s.io` Lease held through
//! kube-lease-manager. A standby is ready but does not reconcile; the leader releases the
//! Lease when it stops, so a standby takes over at once; a leader that loses the Lease
//! exits 1, so that its restart rejoins the election with fresh state (as client-go
//! controllers do).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::shared::exit::Exit;
use crate::shared::http::Health;
use crate::shared::kube_client::service_account_namespace;
use crate::shared::signals::Shutdown;

type LeaseTask = JoinHandle<kube_lease_manager::Result<LeaseManager>>;

/// Leader election (`--leader-elect`).
#[derive(Debug, Clone)]
pub struct LeaseOpts {
    pub namespace: Option<String>,
    pub name: String,
    pub duration: u64,
    pub grace: u64,
}

/// Who competes for the Lease, and what it shows while it leads.
pub struct Elected<'a> {
    /// This replica, in the Lease.
    pub identity: &'a str,
    /// The field manager of the Lease's writes.
    pub field_manager: &'static str,
    pub health: Arc<Health>,
    /// 1 while leading.
    pub leader: Gauge,
    pub shutdown: Shutdown,
}

/// Runs `work` while this replica holds the Lease; returns the exit code.
pub async fn while_leading(
    client: Client,
    lease: &LeaseOpts,
    me: Elected<'_>,
    work: impl Future<Output = Exit>,
) -> Exit {
    let identity = me.identity;
    let namespace = lease.namespace.clone().unwrap_or_else(own_namespace);
    let Some((mut leading, task)) = join(client, lease, &namespace, &me).await else {
        return Exit::Failed;
    };
    me.health.ready.store(true, Ordering::Relaxed); // a standby is healthy and ready
    info!(identity, lease = %format!("{namespace}/{}", lease.name), "leader election: waiting for the lease");
    if let Err(code) = acquired(&mut leading, &me.shutdown).await {
        release(leading, task).await;
        return code;
    }
    info!(identity, "leader election: acquired the lease; starting");
    me.leader.set(1);
    let lost = lost(leading.clone());
    let code = tokio::select! {
        code = work => code,
        _ = lost => {
            // Stop acting at once (this drops the controllers) and exit.
            error!("leader election: lost the lease; exiting");
            me.leader.set(0);
            return Exit::Failed;
        }
    };
    me.leader.set(0);
    release(leading, task).await;
    code
}

/// The service account's namespace, else `default`.
fn own_namespace() -> String {
    service_account_namespace().unwrap_or_else(|| "default".into())
}

/// Joins the election: a receiver that says whether we lead, and the task holding the Lease.
async fn join(
    client: Client,
    lease: &LeaseOpts,
    namespace: &str,
    me: &Elected<'_>,
) -> Option<(watch::Receiver<bool>, LeaseTask)> {
    let manager = LeaseManagerBuilder::new(client, &lease.name)
        .with_namespace(namespace)
        .with_identity(me.identity)
        .with_duration(lease.duration)
        .with_grace(lease.grace)
        .with_field_manager(me.field_manager)
        .build()
        .await;
    match manager {
        Ok(m) => Some(m.watch().await),
        Err(e) => {
            error!(
                "leader election: cannot use Lease {namespace}/{}: {e} (RBAC: coordination.k8s.io leases get/create/patch/update in {namespace:?})",
                lease.name
            );
            None
        }
    }
}

/// Waits until we lead; `Err(exit code)` if the election broke or a shutdown came first.
async fn acquired(leading: &mut watch::Receiver<bool>, shutdown: &Shutdown) -> Result<(), Exit> {
    loop {
        if *leading.borrow_and_update() {
            return Ok(());
        }
        tokio::select! {
            changed = leading.changed() => if changed.is_err() {
                error!("leader election stopped unexpectedly");
                return Err(Exit::Failed);
            },
            _ = shutdown.stopped() => return Err(Exit::Ok),
        }
    }
}

/// Resolves when the lease is lost.
async fn lost(mut leading: watch::Receiver<bool>) {
    while leading.changed().await.is_ok() && *leading.borrow_and_update() {}
}

/// Releases the Lease: dropping the last receiver makes the lease task release it and end.
async fn release(leading: watch::Receiver<bool>, task: LeaseTask) {
    drop(leading);
    match tokio::time::timeout(Duration::from_secs(5), task).await {
        Ok(Ok(Ok(_))) => info!("leader election: lease released"),
        Ok(Ok(Err(e))) => warn!("leader election: releasing the lease failed: {e}"),
        _ => warn!("leader election: the lease was not released within 5s"),
    }
}
