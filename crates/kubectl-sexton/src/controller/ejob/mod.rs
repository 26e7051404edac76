//! EphemeralJob (`sexton.dev/v1alpha1`, short name `ejob`): run ephemeral containers, in
//! batches, in the running pods a label selector picks. The resource (`types.rs`), its CRD
//! (`crd.rs`), the pure planning step (`plan.rs`) and the reconciler (`reconcile.rs`).

mod crd;
mod plan;
mod reconcile;
mod types;

pub use crd::crd_yaml;
pub use plan::{Relation, relation, result};
pub use reconcile::{Ctx, error_policy, jobs_of_pod, reconcile};
pub use types::{EphemeralJob, Refused, TargetResult};

pub const CONTROLLER: &str = "ephemeraljob";
