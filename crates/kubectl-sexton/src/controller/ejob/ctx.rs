//! What every step of the EphemeralJob reconciler is given: the client, the telemetry, the
//! shared pod cache, the admin's policy, and the answers about requesters kept briefly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::runtime::events::{EventType, Recorder};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};

use super::access::Access;
use super::policy::Policy;
use super::stamp_guard::StampGuard;
use crate::controller::metrics::Metrics;
use crate::controller::telemetry::Telemetry;
use crate::shared::ephemeraljob::EphemeralJob;
use crate::shared::pod::Pod;

pub const CONTROLLER: &str = "ephemeraljob";

pub struct Ctx {
    pub client: Client,
    pub telemetry: Telemetry<EphemeralJob>,
    /// The shared pod cache, and whether it has been filled.
    pods: Store<Pod>,
    pods_filled: Arc<AtomicBool>,
    pub policy: Policy,
    /// What each job's requester may do (SubjectAccessReview, cached briefly).
    pub access: Access,
    /// Whether requester stamps are protected in a namespace (a dry run, cached briefly).
    pub stamps: StampGuard,
}

impl Ctx {
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: Arc<Metrics>,
        pods: Store<Pod>,
        pods_filled: Arc<AtomicBool>,
        policy: Policy,
    ) -> Self {
        Ctx {
            access: Access::new(client.clone()),
            stamps: StampGuard::new(client.clone()),
            client,
            telemetry: Telemetry::new(CONTROLLER, metrics, recorder),
            pods,
            pods_filled,
            policy,
        }
    }

    pub fn count(&self, action: &'static str, reason: &'static str) {
        self.telemetry.count(action, reason)
    }

    pub fn count_by(&self, action: &'static str, reason: &'static str, n: u64) {
        self.telemetry.count_by(action, reason, n)
    }

    pub async fn event(&self, job: &EphemeralJob, type_: EventType, reason: &str, note: String) {
        self.telemetry
            .event(job, type_, reason, "RunEphemeralContainers", note)
    }

    /// Whether the pod cache has been filled (before, a plan would see no pods).
    pub fn pods_filled(&self) -> bool {
        self.pods_filled.load(Ordering::Relaxed)
    }

    /// The pods of `namespace`, from the cache.
    pub fn pods_in(&self, namespace: &str) -> Vec<Arc<Pod>> {
        self.pods
            .state_filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
    }

    pub fn api<K>(&self, job: &EphemeralJob) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &job.namespace().unwrap_or_default())
    }
}
