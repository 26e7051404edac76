//! The SidecarTerminator: once every main container of a Job-style pod is done, it swaps
//! the image of each marked sidecar (OpenKruise's markers) for a quick-exit image, in
//! place, so the kubelet restarts it into an exit 0 and the pod completes.

mod decide;
mod reconcile;
mod run;

pub use decide::{is_running, swapped};
pub use reconcile::Ctx;
pub use run::run;

pub const CONTROLLER: &str = "sidecar-terminator";
