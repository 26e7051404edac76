//! What the caller asks for: the strategy, extra sidecar names, where the supervisor's binary
//! comes from, and the facts `auto` decides on (the cluster's Kubernetes version, the nodes'
//! container runtimes); and what was done (`Mechanism`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::catalogue::Catalogue;
use crate::chain::Chain;

/// How sidecars should be made to end (`--strategy`, or the annotation `sexton.dev/inject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    Native,
    /// Native sidecars that the supervisor also ends: as fast as `wrap` (the sidecar exits
    /// with the mains, and the kubelet does not restart it), with native start order.
    NativeWrap,
    Wrap,
    /// The mains behind the supervisor, which calls the sidecars' quit endpoints once every
    /// main is done; the sidecars stay as they are (vendors' injected sidecars that can be
    /// neither native nor wrapped).
    Quit,
    #[default]
    Auto,
    Disabled,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a strategy (native, native-wrap, wrap, quit, auto or disabled)")]
pub struct StrategyError(pub String);

impl FromStr for Strategy {
    type Err = StrategyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "native" => Ok(Strategy::Native),
            "native-wrap" => Ok(Strategy::NativeWrap),
            "wrap" => Ok(Strategy::Wrap),
            "quit" => Ok(Strategy::Quit),
            "auto" => Ok(Strategy::Auto),
            "disabled" => Ok(Strategy::Disabled),
            _ => Err(StrategyError(s.to_string())),
        }
    }
}

/// Where `wrap` and `native-wrap` get the supervisor's binary (`--binary-source`, or the
/// annotation `sexton.dev/binary-source`): see `binary_source.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BinarySource {
    /// The image volume where it is known to work, else the copy.
    #[default]
    Auto,
    /// The sexton image as a volume (`volumes[].image`), mounted at `/sexton`.
    ImageVolume,
    /// `sexton install` copies it into an `emptyDir`, in an init container.
    Copy,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a binary source (image-volume, copy or auto)")]
pub struct BinarySourceError(pub String);

impl FromStr for BinarySource {
    type Err = BinarySourceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BinarySource::Auto),
            "image-volume" => Ok(BinarySource::ImageVolume),
            "copy" => Ok(BinarySource::Copy),
            _ => Err(BinarySourceError(s.to_string())),
        }
    }
}

/// What was done to a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// Sidecars moved to `initContainers` with `restartPolicy: Always`.
    Native,
    /// Both: every container behind the supervisor, sidecars native.
    #[serde(rename = "native-wrap")]
    NativeWrap,
    /// Every container behind the in-pod supervisor; sidecars die with the mains.
    Wrap,
    /// The mains behind the supervisor, which calls the sidecars' quit endpoints.
    Quit,
    /// Sidecars marked for the SidecarTerminator controller.
    Controller,
}

impl Mechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Native => "native",
            Mechanism::NativeWrap => "native-wrap",
            Mechanism::Wrap => "wrap",
            Mechanism::Quit => "quit",
            Mechanism::Controller => "controller",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where native sidecars go among the existing init containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Position {
    /// After them: the init containers run first, as before (the default).
    #[default]
    Last,
    /// Before them: for sidecars that init containers need (a mesh proxy).
    First,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Used where the template has no `sexton.dev/inject` annotation.
    pub strategy: Strategy,
    /// `--sidecar`: names of sidecars, where nothing in the template says which are.
    pub sidecars: Vec<String>,
    pub position: Position,
    /// The cluster's version (major, minor), when known: below 1.29, `auto` does not
    /// choose native sidecars.
    pub kubernetes_version: Option<(u32, u32)>,
    /// The sexton image: `sexton install`'s (the copy), or the image volume's.
    pub sexton_image: String,
    /// The vendors' injected sidecars recognised without a declaration (empty: recognition
    /// off).
    pub catalogue: Arc<Catalogue>,
    /// The cluster's mutating webhooks, where the webhook could read them: which vendors the
    /// API server calls again after sexton changed a Pod.
    pub chain: Option<Arc<Chain>>,
    /// Set by the admission webhook: a sidecar named in `sexton.dev/sidecars` that the Pod
    /// does not have yet is not an error (a later webhook may add it, and the API server then
    /// calls sexton's again).
    pub at_admission: bool,
    pub binary_source: BinarySource,
    /// What is known of the nodes' container runtimes (`auto` of the binary source).
    pub runtimes: Runtimes,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            strategy: Strategy::Auto,
            sidecars: vec![],
            position: Position::Last,
            kubernetes_version: None,
            sexton_image: format!("ghcr.io/sexton-dev/sexton:{}", env!("CARGO_PKG_VERSION")),
            catalogue: Arc::new(Catalogue::default()),
            chain: None,
            at_admission: false,
            binary_source: BinarySource::Auto,
            runtimes: Runtimes::Unknown,
        }
    }
}

/// What is known of the nodes' container runtimes (`nodeInfo.containerRuntimeVersion`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Runtimes {
    /// Nothing: `auto` copies.
    #[default]
    Unknown,
    /// The runtimes of every node a pod may land on (`inject --container-runtime`).
    Given(Vec<String>),
    /// The cluster's nodes (the webhook reads them): those a pod can land on decide.
    Nodes(Arc<Vec<NodeFacts>>),
}

/// What of a Node decides whether a pod can land on it, and what its runtime mounts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `status.nodeInfo.containerRuntimeVersion`: `containerd://2.1.4`, `cri-o://1.33.2`.
    pub runtime: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}
