//! What every cluster check is given: the client, the namespaces to look at, the flags.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::access::{Access, AccessError, answer};

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

/// What every cluster check needs.
pub struct Ctx {
    pub client: Client,
    pub namespaces: Namespaces,
    pub stuck_after: Duration,
    pub cert_days: u32,
    pub sexton_namespace: String,
}
