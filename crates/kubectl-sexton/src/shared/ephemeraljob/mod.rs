//! The EphemeralJob resource (`sexton.dev/v1alpha1`, short name `ejob`) as every subcommand
//! sees it: its types (`types.rs`), its CRD (`crd.rs`: `kubectl-sexton crd`, `doctor`,
//! `version`), and a pod's part in a job (`targets.rs`: the controller's planning and
//! `ejob results`).

mod crd;
mod requester;
mod targets;
mod types;

pub use crd::crd_yaml;
pub use requester::{ANNOTATION_REQUESTER, Requester, RequesterError};
#[cfg(test)]
pub use targets::is_ours;
pub use targets::{Relation, pod_active, relation, result, target_state};
pub use types::*;
