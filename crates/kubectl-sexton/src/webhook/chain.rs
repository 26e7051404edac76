//! The cluster's mutating webhook chain, kept current for the reviews (`Options::chain`):
//! which vendors' webhooks the API server calls again after sexton's changed a Pod
//! (sexton-inject's `chain.rs` decides from it). One watch of MutatingWebhookConfigurations,
//! each reduced to what the chain reads (names, reinvocation policies, rules: no caBundle is
//! kept). Without the RBAC to list them (the chart grants list/watch), the vendors'
//! defaults decide, and the first failure is logged.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::{StreamExt, pin_mut};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::{Value, json};
use sexton_inject::Chain;
use tracing::{debug, info, warn};

use super::review::Reviewer;

/// Configurations beyond this many are not kept (they are cluster-wide objects only a
/// cluster admin creates; the bound keeps the watch's memory bounded all the same).
const MAX_KEPT: usize = 2048;

/// Watches the configurations until the process ends.
pub async fn keep_chain(client: Client, reviewer: Arc<Reviewer>) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client);
    let events = watcher(api, watcher::Config::default()).default_backoff();
    pin_mut!(events);
    let mut known: BTreeMap<String, Value> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Value>> = None;
    let mut failing = false;
    while let Some(ev) = events.next().await {
        let changed = match ev {
            Ok(Event::Init) => {
                listing = Some(BTreeMap::new());
                false
            }
            Ok(Event::InitApply(c)) => {
                if let Some(l) = &mut listing {
                    keep(l, c);
                }
                false
            }
            Ok(Event::InitDone) => {
                known = listing.take().unwrap_or_default();
                true
            }
            Ok(Event::Apply(c)) => {
                keep(&mut known, c);
                true
            }
            Ok(Event::Delete(c)) => {
                known.remove(&c.metadata.name.unwrap_or_default());
                true
            }
            Err(e) => {
                if !failing {
                    warn!(
                        "cannot watch MutatingWebhookConfigurations ({e}); the vendors' default reinvocation policies decide which sidecars stay in spec.containers (RBAC: admissionregistration.k8s.io mutatingwebhookconfigurations list, watch)"
                    );
                }
                failing = true;
                false
            }
        };
        if changed {
            if failing {
                info!("watching MutatingWebhookConfigurations again");
            }
            failing = false;
            let chain = Chain::from_objects(known.values());
            debug!(configurations = chain.configurations.len(), "webhook chain");
            reviewer.options.lock().expect("poisoned").chain = Some(Arc::new(chain));
        }
    }
}

/// The configuration reduced to what the chain reads.
fn keep(map: &mut BTreeMap<String, Value>, c: MutatingWebhookConfiguration) {
    let Some(name) = c.metadata.name else {
        return;
    };
    if map.len() >= MAX_KEPT && !map.contains_key(&name) {
        return;
    }
    let hooks: Vec<Value> = c
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|h| {
            json!({
                "name": h.name,
                "reinvocationPolicy": h.reinvocation_policy,
                "rules": h.rules.unwrap_or_default().into_iter().map(|r| json!({
                    "operations": r.operations,
                    "apiGroups": r.api_groups,
                    "resources": r.resources,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    map.insert(
        name.clone(),
        json!({"metadata": {"name": name}, "webhooks": hooks}),
    );
}
