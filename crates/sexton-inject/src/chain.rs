//! The cluster's mutating admission webhooks for Pods, in the order the API server calls
//! them: it sorts MutatingWebhookConfigurations by name and keeps each one's webhooks in
//! their order (kube-apiserver's mutating_webhook_manager.go); a webhook with
//! `reinvocationPolicy: IfNeeded` is called once more if a later one changed the Pod
//! (apiserver's admission/reinvocation.go: at most one more round). The webhook reads the
//! configurations (where its RBAC lets it) so that it knows which vendors will be called
//! again after it changed a Pod; `doctor` prints the same chain.

use serde_json::Value;

use crate::catalogue::{DoneWhen, Reinvocation, Vendor};

/// One webhook of a configuration that sees Pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub name: String,
    pub reinvocation: Reinvocation,
}

/// A configuration with the webhooks of it whose rules match Pod creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configuration {
    pub name: String,
    pub hooks: Vec<Hook>,
}

/// The configurations that see Pod creation, sorted by name (the API server's order).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chain {
    pub configurations: Vec<Configuration>,
}

/// At most this many configurations, and webhooks per configuration, are kept: the chain
/// is read from the cluster, and no object may make the webhook hold unbounded memory.
pub const MAX_CONFIGURATIONS: usize = 512;
pub const MAX_HOOKS: usize = 64;
/// Names are Kubernetes object names (at most 253 bytes); longer ones are cut.
const MAX_NAME: usize = 253;

impl Chain {
    /// The chain of `configurations` (MutatingWebhookConfiguration objects as JSON).
    pub fn from_objects<'a>(configurations: impl IntoIterator<Item = &'a Value>) -> Chain {
        let mut list: Vec<Configuration> = configurations
            .into_iter()
            .filter_map(Configuration::of)
            .take(MAX_CONFIGURATIONS)
            .collect();
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Chain {
            configurations: list,
        }
    }

    /// The reinvocation policy of `vendor`'s configuration as registered in the cluster
    /// (IfNeeded if any of its Pod webhooks is), if a configuration of its names is there.
    pub fn reinvocation_of(&self, vendor: &Vendor) -> Option<Reinvocation> {
        let mine: Vec<&Configuration> = self
            .configurations
            .iter()
            .filter(|c| {
                vendor
                    .webhook
                    .configurations
                    .iter()
                    .any(|p| p.matches(&c.name))
            })
            .collect();
        if mine.is_empty() {
            return None;
        }
        let again = mine
            .iter()
            .flat_map(|c| &c.hooks)
            .any(|h| h.reinvocation == Reinvocation::IfNeeded);
        Some(if again {
            Reinvocation::IfNeeded
        } else {
            Reinvocation::Never
        })
    }

    /// The vendor (of `vendors`) whose configuration `name` is, if any.
    pub fn vendor_of<'v>(name: &str, vendors: &'v [Vendor]) -> Option<&'v Vendor> {
        vendors
            .iter()
            .find(|v| v.webhook.configurations.iter().any(|p| p.matches(name)))
    }
}

impl Configuration {
    /// The configuration, if it has a webhook that sees Pod creation.
    fn of(object: &Value) -> Option<Configuration> {
        let name = object["metadata"]["name"].as_str()?;
        let hooks: Vec<Hook> = object["webhooks"]
            .as_array()?
            .iter()
            .filter(|h| sees_pod_creation(h))
            .take(MAX_HOOKS)
            .map(|h| Hook {
                name: cut(h["name"].as_str().unwrap_or_default()),
                reinvocation: match h["reinvocationPolicy"].as_str() {
                    Some("IfNeeded") => Reinvocation::IfNeeded,
                    _ => Reinvocation::Never,
                },
            })
            .collect();
        (!hooks.is_empty()).then(|| Configuration {
            name: cut(name),
            hooks,
        })
    }
}

fn cut(s: &str) -> String {
    let mut end = s.len().min(MAX_NAME);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Whether a webhook's rules match the creation of a core/v1 Pod.
fn sees_pod_creation(hook: &Value) -> bool {
    let has = |list: &Value, want: &str| {
        list.as_array()
            .is_some_and(|l| l.iter().any(|x| x == want || x == "*"))
    };
    hook["rules"].as_array().into_iter().flatten().any(|r| {
        has(&r["operations"], "CREATE")
            && has(&r["apiGroups"], "")
            && (has(&r["resources"], "pods") || has(&r["resources"], "*/*"))
    })
}

/// Whether sexton may move `vendor`'s sidecar out of `spec.containers`: never where the
/// catalogue says it must stay there (`keep_in_containers`), and not when the vendor's
/// webhook will be called again after sexton changed the Pod and then looks for its sidecar
/// by name in `spec.containers` alone (it would add it a second time, and the API server
/// refuses a Pod with two containers of one name). The cluster's registration (`chain`,
/// where it could be read) wins over the vendor's default.
pub fn may_move(vendor: &Vendor, chain: Option<&Chain>) -> bool {
    if vendor.keep_in_containers.is_some() {
        return false;
    }
    let reinvoked = chain
        .and_then(|c| c.reinvocation_of(vendor))
        .unwrap_or(vendor.webhook.reinvocation);
    !(reinvoked == Reinvocation::IfNeeded && vendor.webhook.done_when == DoneWhen::NameInContainers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::builtin;
    use serde_json::json;

    fn configuration(name: &str, policy: &str, resources: &str) -> Value {
        json!({"metadata": {"name": name}, "webhooks": [{
            "name": format!("{name}.example"),
            "reinvocationPolicy": policy,
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": [resources]}]
        }]})
    }

    fn vendor(name: &str) -> Vendor {
        builtin().into_iter().find(|v| v.name == name).unwrap()
    }

    #[test]
    fn sorted_by_name_and_only_what_sees_pods() {
        let objects = [
            configuration("vault-agent-injector-cfg", "Never", "pods"),
            configuration("sexton-webhook", "IfNeeded", "pods"),
            configuration("datadog-webhook", "IfNeeded", "pods"),
            configuration("cert-checker", "Never", "secrets"),
        ];
        let chain = Chain::from_objects(&objects);
        let names: Vec<&str> = chain
            .configurations
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "datadog-webhook",
                "sexton-webhook",
                "vault-agent-injector-cfg"
            ]
        );
    }

    #[test]
    fn a_vendor_that_rechecks_spec_containers_by_name_and_is_called_again_keeps_its_place() {
        let datadog = vendor("Datadog Agent");
        // unknown cluster: the vendor's default (IfNeeded) decides
        assert!(!may_move(&datadog, None));
        // registered Never in this cluster: safe to move
        let never = Chain::from_objects(&[configuration("datadog-webhook", "Never", "pods")]);
        assert!(may_move(&datadog, Some(&never)));
        // registered IfNeeded: not
        let again = Chain::from_objects(&[configuration("datadog-webhook", "IfNeeded", "pods")]);
        assert!(!may_move(&datadog, Some(&again)));
        // a vendor that rechecks by its marker may always be moved
        let vault = vendor("Vault Agent");
        let vault_again = Chain::from_objects(&[configuration(
            "vault-agent-injector-cfg",
            "IfNeeded",
            "pods",
        )]);
        assert!(may_move(&vault, Some(&vault_again)));
        // Linkerd finds its proxy by name in either list
        let linkerd = vendor("Linkerd");
        let l = Chain::from_objects(&[configuration(
            "linkerd-proxy-injector-webhook-config",
            "IfNeeded",
            "pods",
        )]);
        assert!(may_move(&linkerd, Some(&l)));
        // a renamed configuration is not found: the default applies
        let renamed = Chain::from_objects(&[configuration("zz-dd", "Never", "pods")]);
        assert!(!may_move(&datadog, Some(&renamed)));
    }

    #[test]
    fn what_the_cluster_holds_is_bounded() {
        let many: Vec<Value> = (0..MAX_CONFIGURATIONS + 10)
            .map(|i| configuration(&format!("c{i:04}"), "Never", "pods"))
            .collect();
        assert_eq!(
            Chain::from_objects(&many).configurations.len(),
            MAX_CONFIGURATIONS
        );
        let long = configuration(&"x".repeat(10_000), "Never", "pods");
        assert_eq!(
            Chain::from_objects([&long]).configurations[0].name.len(),
            MAX_NAME
        );
        // scalars where objects are expected are skipped, not a panic
        let odd = [
            json!(1),
            json!({"metadata": {"name": "a"}, "webhooks": [1, {"rules": "x"}]}),
        ];
        assert_eq!(Chain::from_objects(&odd), Chain::default());
    }
}
