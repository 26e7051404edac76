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
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::Shutdown;
use super::flags::LeaseOpts;
use super::telemetry::FIELD_MANAGER;
use crate::controller::metrics::Metrics;
use crate::shared::http::Health;

const SA_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

type LeaseTask = JoinHandle<kube_lease_manager::Result<LeaseManager>>;

/// Runs `work` while this replica holds the Lease; returns the exit code.
pub async fn while_leading(
    client: Client,
    lease: &LeaseOpts,
    identity: &str,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
    work: impl Future<Output = i32>,
) -> i32 {
    let namespace = lease.namespace.clone().unwrap_or_else(own_namespace);
    let Some((mut leading, task)) = join(client, lease, &namespace, identity).await else {
        return 1;
    };
    health.ready.store(true, Ordering::Relaxed); // a standby is healthy and ready
    info!(identity, lease = %format!("{namespace}/{}", lease.name), "leader election: waiting for the lease");
    if let Err(code) = acquired(&mut leading, &shutdown).await {
        release(leading, task).await;
        return code;
    }
    info!(identity, "leader election: acquired the lease; starting");
    metrics.leader.set(1);
    let lost = lost(leading.clone());
    let code = tokio::select! {
        code = work => code,
        _ = lost => {
            // Stop acting at once (this drops the controllers) and exit.
            error!("leader election: lost the lease; exiting");
            metrics.leader.set(0);
            return 1;
        }
    };
    metrics.leader.set(0);
    release(leading, task).await;
    code
}

/// The service account's namespace, else `default`.
fn own_namespace() -> String {
    std::fs::read_to_string(SA_NAMESPACE_FILE)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "default".into())
}

/// Joins the election: a receiver that says whether we lead, and the task holding the Lease.
async fn join(
    client: Client,
    lease: &LeaseOpts,
    namespace: &str,
    identity: &str,
) -> Option<(watch::Receiver<bool>, LeaseTask)> {
    let manager = LeaseManagerBuilder::new(client, &lease.name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(lease.duration)
        .with_grace(lease.grace)
        .with_field_manager(FIELD_MANAGER)
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
async fn acquired(leading: &mut watch::Receiver<bool>, shutdown: &Shutdown) -> Result<(), i32> {
    loop {
        if *leading.borrow_and_update() {
            return Ok(());
        }
        tokio::select! {
            changed = leading.changed() => if changed.is_err() {
                error!("leader election stopped unexpectedly");
                return Err(1);
            },
            _ = shutdown.stopped() => return Err(0),
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
