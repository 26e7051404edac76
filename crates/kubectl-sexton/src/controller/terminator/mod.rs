//! The SidecarTerminator: once every main container of a Job-style pod is done, it swaps
//! the image of each marked sidecar (OpenKruise's markers) for a quick-exit image, in
//! place, so the kubelet restarts it into an exit 0 and the pod completes.

mod decide;
mod reconcile;
mod run;
mod teardown;

pub use decide::is_running;
pub use reconcile::{CONTROLLER, Ctx};
pub use run::run;
pub use teardown::Teardowns;
