//! What every controller of the process is built from ([`Parts`]): the client, the Event
//! recorder, metrics and health, the shutdown signal and the flags they share; and the grace
//! they get to stop.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller;
use kube::runtime::events::Recorder;
use kube::{Api, Client};

use super::metrics::Metrics;
use super::watch::WatchReport;
use crate::shared::http::Health;
use crate::shared::signals::Shutdown;

/// How long in-flight reconciliations may run after SIGTERM (well inside the Deployment's
/// 30 s termination grace period, so the Lease is still released).
pub const GRACE: Duration = Duration::from_secs(10);

/// A controller, ready to run until the shutdown signal (and its grace).
pub type Run = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// What every controller of the process is built from.
pub struct Parts {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    pub shutdown: Shutdown,
    pub concurrency: u16,
    pub namespace: Option<String>,
    pub stuck_after: Duration,
}

impl Parts {
    /// The API of `K` in the watched namespace, or in all namespaces.
    pub fn scoped<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    pub fn report(&self, watch: &'static str, needs: &str) -> WatchReport {
        let scope = match self.namespace {
            Some(_) => "in its namespace",
            None => "cluster-wide",
        };
        WatchReport {
            watch,
            rbac: format!("the controller needs {needs} {scope}"),
            health: self.health.clone(),
            metrics: self.metrics.clone(),
            filled: Arc::default(),
        }
    }

    pub fn config(&self) -> controller::Config {
        controller::Config::default().concurrency(self.concurrency)
    }

    /// Resolves at the shutdown signal.
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
        let shutdown = self.shutdown.clone();
        async move { shutdown.stopped().await }
    }
}
