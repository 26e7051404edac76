//! A vendor's entry of the catalogue, in the form admins write too (serde): names, markers,
//! endpoints, switches, registration.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A name pattern: exact, or with one `*` standing for any run of characters
/// (`csql-*`, `*-agent-injector-cfg`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Pattern(pub String);

impl Pattern {
    pub fn matches(&self, s: &str) -> bool {
        match self.0.split_once('*') {
            None => self.0 == s,
            Some((pre, post)) => {
                s.len() >= pre.len() + post.len() && s.starts_with(pre) && s.ends_with(post)
            }
        }
    }
}

/// Where a marker is: a pod annotation or a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum On {
    Annotation,
    Label,
}

/// A pod annotation or label: its key (a [`Pattern`]: `cloudsql.cloud.google.com/*`), and
/// the value it must have, if any particular one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    pub on: On,
    pub key: Pattern,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl Marker {
    pub(crate) fn new(on: On, key: &str, value: Option<&str>) -> Marker {
        Marker {
            on,
            key: Pattern(key.into()),
            value: value.map(Into::into),
        }
    }

    /// Whether the pod (or pod template) `metadata` carries it.
    pub fn on_pod(&self, pod: &Value) -> bool {
        let map = match self.on {
            On::Annotation => &pod["metadata"]["annotations"],
            On::Label => &pod["metadata"]["labels"],
        };
        map.as_object().is_some_and(|m| {
            m.iter().any(|(k, v)| {
                self.key.matches(k)
                    && match &self.value {
                        None => true,
                        Some(want) => v.as_str().is_some_and(|v| v.eq_ignore_ascii_case(want)),
                    }
            })
        })
    }
}

impl fmt::Display for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = match self.on {
            On::Annotation => "annotation",
            On::Label => "label",
        };
        write!(f, "{on} {}", self.key.0)?;
        match &self.value {
            Some(v) => write!(f, "={v}"),
            None => Ok(()),
        }
    }
}

/// An HTTP endpoint on the pod's loopback: `port` and `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub port: u16,
    pub path: String,
}

/// An environment variable (name and value) set on a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Env {
    pub name: String,
    pub value: String,
}

/// The vendor's quit endpoint: POSTed once every main is done (the mains' supervisor does it,
/// `KUBEXIT_SHUTDOWN_HOOKS`), where its sidecar can be neither native nor wrapped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quit {
    pub endpoint: Endpoint,
    /// A pod annotation whose value replaces the endpoint's port (`dapr.io/http-port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_annotation: Option<String>,
    /// Set on the sidecar to turn the endpoint on (an injected Linkerd proxy reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_env: Option<Env>,
    /// Read by the vendor's webhook to turn the endpoint on: works only on a pod the vendor
    /// has not injected yet (Vault's `agent-enable-quit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_annotation: Option<Marker>,
    /// Markers under which the endpoint is not served, or refuses a call without a token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable_with: Vec<Marker>,
    /// An environment variable the vendor writes into the app containers with the URLs to
    /// call (space- or comma-separated): preferred to `endpoint` where present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls_env: Option<String>,
}

/// A webhook's `reinvocationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Reinvocation {
    #[default]
    Never,
    IfNeeded,
}

/// How the vendor's webhook decides, when called again, that a pod is already injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum DoneWhen {
    /// By its marker: moving its sidecar is safe.
    Marker,
    /// By a container of its sidecar's name in `spec.containers` or `spec.initContainers`.
    NameInEitherList,
    /// By a container of its sidecar's name in `spec.containers` only: a sidecar moved to
    /// `initContainers` is injected a second time (a duplicate name: the Pod is refused).
    #[default]
    NameInContainers,
}

/// How the vendor's webhook is registered by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registration {
    /// MutatingWebhookConfiguration names (Helm release names can change them: the
    /// cluster's configurations are read where the webhook may).
    #[serde(default)]
    pub configurations: Vec<Pattern>,
    #[serde(default)]
    pub reinvocation: Reinvocation,
    #[serde(default)]
    pub done_when: DoneWhen,
}

/// One vendor's injected sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vendor {
    /// What users call it: `Istio`.
    pub name: String,
    /// The sidecar's container name(s).
    pub containers: Vec<Pattern>,
    /// What proves the vendor's webhook injected it (any one of them).
    pub markers: Vec<Marker>,
    /// The vendor's own init containers: its sidecar, made native, goes right after them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Pattern>,
    /// What asks the vendor's webhook to inject (before it has).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Marker>,
    /// Ready when this answers 2xx: the startupProbe of the sidecar made native, as the
    /// vendor's own native mode gates the mains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<Endpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quit: Option<Quit>,
    /// The annotation that makes the vendor's webhook inject its sidecar natively: set on a
    /// run-to-completion pod that asks for the vendor's injection and does not have it yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_switch: Option<Marker>,
    #[serde(default)]
    pub webhook: Registration,
    /// Why the sidecar must stay in `spec.containers` whatever the webhook order, if it must
    /// (the Cloud SQL operator's Pod controller looks for its proxy there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_in_containers: Option<String>,
}

impl Vendor {
    /// Whether `name` is one of this vendor's sidecar containers.
    pub fn names(&self, name: &str) -> bool {
        self.containers.iter().any(|p| p.matches(name))
    }

    /// Whether the pod carries proof of this vendor's injection.
    pub fn injected(&self, pod: &Value) -> bool {
        self.markers.iter().any(|m| m.on_pod(pod))
    }

    /// Whether the pod asks for this vendor's injection.
    pub fn asked(&self, pod: &Value) -> bool {
        self.triggers.iter().any(|m| m.on_pod(pod))
    }
}
