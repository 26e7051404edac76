//! What `auto` needs of the cluster's Nodes to choose where `wrap`'s binary comes from: a
//! watch of every Node, each kept as the little that decides (labels, taints, the container
//! runtime's version; sexton-inject's `NodeFacts`), handed to the reviews whenever it
//! changes. A Node's frequent status updates (conditions, images) change none of it, so
//! they cost a comparison. Without the right to watch nodes (the chart grants it when
//! `webhook.binarySource` is `auto`), `auto` copies the binary.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client};
use sexton_inject::{NodeFacts, Runtimes, Taint};
use tracing::{info, warn};

use super::review::Reviewer;

/// Watches the Nodes until the process ends (the watcher retries with back-off).
pub async fn keep_nodes(client: Client, reviewer: Arc<Reviewer>) {
    let mut known: BTreeMap<String, NodeFacts> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, NodeFacts>> = None;
    let mut failing = false;
    let events = watcher(Api::<Node>::all(client), watcher::Config::default()).default_backoff();
    futures_util::pin_mut!(events);
    while let Some(ev) = events.next().await {
        let changed = match ev {
            Ok(Event::Init) => {
                listing = Some(BTreeMap::new());
                false
            }
            Ok(Event::InitApply(n)) => {
                let f = facts(&n);
                listing.get_or_insert_default().insert(f.name.clone(), f);
                false
            }
            Ok(Event::InitDone) => {
                known = listing.take().unwrap_or_default();
                if std::mem::take(&mut failing) {
                    info!("watching nodes again");
                }
                info!(nodes = known.len(), "node runtimes known");
                true
            }
            Ok(Event::Apply(n)) => {
                let f = facts(&n);
                known.insert(f.name.clone(), f.clone()) != Some(f)
            }
            Ok(Event::Delete(n)) => known.remove(&facts(&n).name).is_some(),
            Err(e) => {
                if !std::mem::replace(&mut failing, true) {
                    warn!(
                        "cannot watch nodes ({e}); auto copies the binary until it can (RBAC: nodes get, list, watch)"
                    );
                }
                // (what was known may be stale by now: nothing is assumed)
                let was_known = !known.is_empty();
                known.clear();
                was_known
            }
        };
        if changed {
            let runtimes = match known.is_empty() && failing {
                true => Runtimes::Unknown,
                false => Runtimes::Nodes(Arc::new(known.values().cloned().collect())),
            };
            reviewer.options.lock().expect("poisoned").runtimes = runtimes;
        }
    }
}

/// The Node's labels, taints and runtime.
fn facts(n: &Node) -> NodeFacts {
    let spec = n.spec.as_ref();
    NodeFacts {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
            })
            .collect(),
        runtime: n
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.container_runtime_version.clone())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::facts;
    use k8s_openapi::api::core::v1::Node;

    #[test]
    fn a_node_as_auto_reads_it() {
        let n: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"pool": "a"}},
            "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoExecute"}]},
            "status": {"nodeInfo": {"containerRuntimeVersion": "containerd://2.4.2", "architecture": "amd64",
                "bootID": "", "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "v1.37.2",
                "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""}}
        }))
        .unwrap();
        let f = facts(&n);
        assert_eq!(
            (f.name.as_str(), f.runtime.as_str()),
            ("n1", "containerd://2.4.2")
        );
        assert_eq!(f.labels["pool"], "a");
        assert_eq!(f.taints.len(), 2);
        assert_eq!(
            (f.taints[1].value.as_str(), f.taints[1].effect.as_str()),
            ("v", "NoExecute")
        );
        let bare: Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n2"}})).unwrap();
        assert_eq!(facts(&bare).runtime, "");
    }
}
