//! One strategic-merge patch of a pod whose body carries the pod's resourceVersion, as both
//! swapping controllers (the SidecarTerminator, the safety net) send it, and what became of
//! it: the 404 and 409 handling they share; any other failure is the caller's to report.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::Value;

use super::telemetry::FIELD_MANAGER;
use crate::shared::pod::Pod;

/// What became of one patch.
pub enum Patched {
    Done,
    /// The pod is gone: nothing left to do.
    Gone,
    /// It changed since it was read: here it is again.
    Reread(Box<Pod>),
}

/// Why a patch came to nothing.
pub enum Failed {
    /// The API server refused the patch itself (not a 404 or 409).
    Patch(kube::Error),
    /// After a 409, the pod could not be read again.
    Reread(kube::Error),
}

/// Sends `patch` for `pod`: a 404 is `Gone`; a 409 (the pod changed since it was read) calls
/// `conflict` and reads the pod again.
pub async fn send(
    api: &Api<Pod>,
    pod: &Pod,
    patch: &Value,
    conflict: impl FnOnce(),
) -> Result<Patched, Failed> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api
        .patch(&pod.name_any(), &params, &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(Patched::Done),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Patched::Gone),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            conflict();
            match api.get_opt(&pod.name_any()).await {
                Ok(Some(p)) => Ok(Patched::Reread(Box::new(p))),
                Ok(None) => Ok(Patched::Gone),
                Err(e) => Err(Failed::Reread(e)),
            }
        }
        Err(e) => Err(Failed::Patch(e)),
    }
}

/// The pod's resourceVersion, for the logs.
pub fn rv(pod: &Pod) -> String {
    pod.resource_version().unwrap_or_default()
}
