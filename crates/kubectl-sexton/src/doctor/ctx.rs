//! What every cluster check is given: the client, the namespaces to look at, the flags, and
//! what several checks read, asked of the API once and shared (the first check to need it
//! makes the request; the others wait for its answer).

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use sexton_inject::Catalogue;
use tokio::sync::OnceCell;

use super::access::{Access, AccessError, answer};
use super::reduced::RunPod;

/// Which namespaces the namespaced checks look at.
#[derive(Debug, Clone)]
pub enum Namespaces {
    One(String),
    All,
}

impl Namespaces {
    /// For `Api::namespaced` / `Api::all` and for messages: `None` is every namespace.
    pub fn one(&self) -> Option<&str> {
        match self {
            Namespaces::One(ns) => Some(ns),
            Namespaces::All => None,
        }
    }

    /// The names (listing them for `-A`).
    pub async fn names(&self, client: &Client) -> Result<Vec<String>, AccessError> {
        match self {
            Namespaces::One(ns) => Ok(vec![ns.clone()]),
            Namespaces::All => {
                let list = Api::<Namespace>::all(client.clone())
                    .list_metadata(&ListParams::default())
                    .await;
                let list = answer(Access::new("list", "namespaces"), list)?;
                Ok(list.items.iter().map(|n| n.name_any()).collect())
            }
        }
    }
}

/// The checked namespaces' Jobs and CronJobs (`workloads::listed`).
pub struct Workloads {
    pub jobs: Vec<Job>,
    pub cronjobs: Vec<CronJob>,
}

/// What every cluster check needs.
pub struct Ctx {
    pub client: Client,
    pub namespaces: Namespaces,
    pub stuck_after: Duration,
    pub cert_days: u32,
    pub sexton_namespace: String,
    /// The vendors' injected sidecars to recognise (`--recognise`, `--sidecar-catalogue`).
    pub catalogue: Catalogue,
    /// The cluster's MutatingWebhookConfigurations (`webhooks::configurations`).
    pub configurations: OnceCell<Result<Vec<MutatingWebhookConfiguration>, AccessError>>,
    /// The checked namespaces' pods that are not done yet (`pods::running`).
    pub pods: OnceCell<Result<Vec<RunPod>, AccessError>>,
    /// The checked namespaces' Jobs and CronJobs (`workloads::listed`).
    pub workloads: OnceCell<Result<Workloads, AccessError>>,
}

impl Ctx {
    pub fn new(
        client: Client,
        namespaces: Namespaces,
        stuck_after: Duration,
        cert_days: u32,
        sexton_namespace: String,
        catalogue: Catalogue,
    ) -> Ctx {
        Ctx {
            client,
            namespaces,
            stuck_after,
            cert_days,
            sexton_namespace,
            catalogue,
            configurations: OnceCell::new(),
            pods: OnceCell::new(),
            workloads: OnceCell::new(),
        }
    }
}
