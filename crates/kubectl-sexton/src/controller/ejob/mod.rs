//! The EphemeralJob controller: runs ephemeral containers, in batches, in the running pods a
//! label selector picks. The pure planning step (`plan.rs`) and the reconciler
//! (`reconcile.rs`); the resource itself is the shared floor's (`shared/ephemeraljob`).

mod plan;
mod reconcile;

pub use reconcile::{CONTROLLER, Ctx, error_policy, jobs_of_pod, reconcile};
