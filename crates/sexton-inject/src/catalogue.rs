//! The catalogue of well-known injected sidecars: the containers other vendors' admission
//! webhooks add to pods at creation (a mesh proxy, a secrets agent, a database proxy), which
//! keep a Job from completing when nobody declared them. Per vendor: the container names,
//! the pod markers that prove the vendor's webhook injected them (a name alone is no proof: a
//! user's container may be called `envoy`), the vendor's own init containers (which must keep
//! running before its sidecar), its readiness endpoint, its quit endpoint and what turns it
//! on, its own native-sidecar switch, and how its webhook is registered and decides a pod is
//! already injected (which matters when the API server calls it again after sexton changed
//! the pod).
//!
//! Admins add entries (`--sidecar-catalogue FILE`, the chart's
//! `webhook.recognition.extraVendors`) in the same shape as [`Vendor`]'s serde form, and turn
//! recognition off (`--recognise=false`).
//!
//! Sources (shared/research/injected-sidecars-2026.md has the links and dates):
//! - Istio: istio/istio manifests/charts/istio-control/istio-discovery (templates/
//!   mutatingwebhook.yaml, revision-tags-mwc.yaml, files/injection-template.yaml); the chart's
//!   `sidecarInjectorWebhook.reinvocationPolicy` (default Never); istio/istio#18505
//!   (`:15020/quitquitquit`), PR #49570 and #56428 (native sidecars), discussion #61963
//!   (`sidecar.istio.io/nativeSidecar`).
//! - Linkerd: linkerd/linkerd2 charts (proxy-injector-rbac.yaml, partials/_metadata.tpl,
//!   `LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED` in partials/_proxy.tpl), linkerd.io/2/reference/
//!   proxy-configuration and features/native-sidecars, linkerd2 PR #12705 (shutdown endpoint off
//!   by default since June 2024), linkerd2#3750 (no reinvocation).
//! - Vault: developer.hashicorp.com/vault/docs/platform/k8s/injector/annotations, vault-helm
//!   templates/injector-mutating-webhook.yaml, vault-k8s CHANGELOG (0.16.0
//!   `agent-enable-quit`), vault-k8s agent-inject/agent/agent.go (quit on 127.0.0.1, cache
//!   listener port 8200).
//! - Consul: hashicorp/consul-k8s charts/consul/templates/
//!   connect-inject-mutatingwebhookconfiguration.yaml, control-plane constants
//!   (`KeyInjectStatus`, `DefaultGracefulPort` 20600, `/graceful_shutdown`,
//!   `AnnotationSidecarProxyLifecycleGracefulPort`).
//! - Dapr: docs.dapr.io kubernetes-job and shutdown_api pages, dapr/dapr charts
//!   dapr_sidecar_injector_webhook_config.yaml, pkg/injector (`dapr.io/sidecar-injected`).
//! - Datadog: DataDog/datadog-agent pkg/clusteragent/admission/mutate/agent_sidecar
//!   (`datadog-agent-injected`, re-checked by name in `spec.containers`), pkg/config
//!   (`datadog-webhook`, reinvocation IfNeeded).
//! - Cloud SQL Auth Proxy operator: GoogleCloudPlatform/cloud-sql-proxy-operator
//!   internal/workload (names.go: `csql-` prefix; podspec_updates.go: annotation
//!   `cloudsql.cloud.google.com/<workload>`, `CSQL_PROXY_QUIT_URLS`, admin port 9091).
//! - Kuma: kumahq/kuma pkg/plugins/runtime/k8s/metadata (`kuma.io/sidecar-injected`),
//!   app/cni (`kuma-sidecar`, `kuma-init`), the injector's `needInject` (by container name).
//! - OpenTelemetry operator: open-telemetry/opentelemetry-operator pkg/sidecar/pod.go
//!   (`otc-container`, label `sidecar.opentelemetry.io/injected`).
//!
//! Where a fact was not verified in a source (marked "not verified" below), the entry takes
//! the cautious reading: an injector whose re-check is unknown is taken to re-check by
//! container name, so that sexton never moves its sidecar where it could be re-added.

use serde_json::Value;

/// A container recognised as a vendor's injected sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recognised {
    pub container: String,
    /// The vendor's name (`Vault Agent`).
    pub vendor: String,
}

/// The vendors sexton recognises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalogue {
    pub vendors: Vec<Vendor>,
}

impl Default for Catalogue {
    fn default() -> Self {
        Catalogue { vendors: builtin() }
    }
}

/// An admin's catalogue entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueError {
    #[error("catalogue entry {index}: {reason}")]
    Invalid { index: usize, reason: String },
}

impl Catalogue {
    /// No vendor: recognition off.
    pub fn empty() -> Catalogue {
        Catalogue { vendors: vec![] }
    }

    /// The built-in vendors and `extra` (a list of [`Vendor`]s as JSON), the extra ones
    /// first: an admin's entry for a container name wins over the built-in one.
    pub fn with_extra(extra: &Value) -> Result<Catalogue, CatalogueError> {
        let list = extra.as_array().ok_or(CatalogueError::Invalid {
            index: 0,
            reason: "expected a list of vendors".into(),
        })?;
        let mut vendors = vec![];
        for (index, v) in list.iter().enumerate() {
            let vendor: Vendor =
                serde_json::from_value(v.clone()).map_err(|e| CatalogueError::Invalid {
                    index,
                    reason: e.to_string(),
                })?;
            let invalid = |reason: &str| CatalogueError::Invalid {
                index,
                reason: format!("{}: {reason}", vendor.name),
            };
            if vendor.containers.is_empty() {
                return Err(invalid("`containers` names no container"));
            }
            if vendor.markers.is_empty() {
                return Err(invalid(
                    "`markers` is empty: a container name alone does not prove an injection",
                ));
            }
            vendors.push(vendor);
        }
        vendors.extend(builtin());
        Ok(Catalogue { vendors })
    }

    /// The vendor whose sidecar `container` of `pod` is, if the pod proves the injection.
    pub fn vendor_of(&self, pod: &Value, container: &str) -> Option<&Vendor> {
        self.vendors
            .iter()
            .find(|v| v.names(container) && v.injected(pod))
    }

    /// The vendor a container's name belongs to, proven or not (for the re-check rules and
    /// `doctor`'s hints).
    pub fn vendor_named(&self, container: &str) -> Option<&Vendor> {
        self.vendors.iter().find(|v| v.names(container))
    }

    /// The containers of `spec.containers` that the pod (or pod template) proves injected
    /// sidecars, in their order. Only run-to-completion pods (restartPolicy Never or
    /// OnFailure): a long-running pod's sidecars run as long as it does.
    pub fn recognise(&self, pod: &Value) -> Vec<Recognised> {
        if !run_to_completion(&pod["spec"]) {
            return vec![];
        }
        crate::template::list(&pod["spec"], "containers")
            .iter()
            .filter_map(|c| {
                let name = crate::template::name(c);
                self.vendor_of(pod, name).map(|v| Recognised {
                    container: name.to_string(),
                    vendor: v.name.clone(),
                })
            })
            .collect()
    }

    pub fn vendor(&self, name: &str) -> Option<&Vendor> {
        self.vendors.iter().find(|v| v.name == name)
    }
}

/// Whether a pod spec runs to completion: restartPolicy Never or OnFailure (a Pod's default
/// is Always).
pub fn run_to_completion(spec: &Value) -> bool {
    matches!(spec["restartPolicy"].as_str(), Some("Never" | "OnFailure"))
}

mod builtin;
#[cfg(test)]
mod tests;
mod vendor;

pub use builtin::builtin;
pub use vendor::{DoneWhen, Env, Marker, On, Pattern, Quit, Reinvocation, Vendor};
